"""The layering of docs/architecture.md ("Which way imports point"), checked on the source:
no two folders of msdb import each other (directly or through a third), only msdb.database
touches the table models, and the tuner's search does not import its compile.

Every import counts, the ones inside functions too: a lazy import is still a dependency."""

from __future__ import annotations

import pytest

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
#: Source folder -> the package it installs as (setup.py installs tuner/, cli/, schema/ in msdb).
SOURCES = {"msdb": "msdb", "tuner": "msdb.tuner", "cli": "msdb.cli", "schema": "msdb.schema"}


def _modules() -> dict[str, pathlib.Path]:
    """Every module of the installed package, by its dotted name."""
    found = {}
    for folder, package in SOURCES.items():
        for path in (ROOT / folder).rglob("*.py"):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join((package, *parts))] = path
    return found


def _imports(name: str, path: pathlib.Path) -> set[str]:
    """The absolute names `path` imports (relative imports resolved against `name`)."""
    is_package = path.name == "__init__.py"
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")
                base = base[: len(base) - node.level + (1 if is_package else 0)]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return found


def _folder(name: str) -> str | None:
    """The folder (second-level package, or `msdb` for the top-level modules) of an msdb name."""
    parts = name.split(".")
    if parts[0] != "msdb":
        return None
    return "msdb" if len(parts) < 2 else f"msdb.{parts[1]}"


def folder_graph() -> dict[str, set[str]]:
    modules = _modules()
    known_folders = {_folder(n) for n in modules}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        source = _folder(name)
        for target in map(_folder, _imports(name, path)):
            if target is not None and target in known_folders and target != source:
                graph.setdefault(source, set()).add(target)
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of `graph`, as the list of its folders, or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt):], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


@pytest.mark.slow
def test_no_folders_import_each_other_in_a_circle() -> None:
    graph = folder_graph()
    graph.pop("msdb", None)  # the package's __init__ re-exports everything lazily (PEP 562)
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])


def test_the_cycle_finder_finds_a_cycle_through_a_third_folder() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": {"c"}}) is None


@pytest.mark.slow
def test_only_the_database_package_imports_the_table_models() -> None:
    offenders = [f"{path.relative_to(ROOT)} imports {imported}"
                 for name, path in _modules().items() if not name.startswith("msdb.database")
                 for imported in _imports(name, path) if imported.startswith("msdb.database.models")]
    assert offenders == []


def test_the_search_does_not_import_compile() -> None:
    """Inside the tuner, compile uses the search's results and not the other way: what both need
    (the default schedule, the anchor trace) lives in the design space, `msdb.tuner.space`."""
    offenders = [f"{path.relative_to(ROOT)} imports {imported}"
                 for name, path in _modules().items() if name.startswith("msdb.tuner.search")
                 for imported in _imports(name, path)
                 if imported == "msdb.tuner.compile" or imported.startswith("msdb.tuner.compile.")]
    assert offenders == []


@pytest.mark.slow
def test_tests_see_every_folder() -> None:
    folders = set(folder_graph())
    assert {"msdb.database", "msdb.interop", "msdb.records", "msdb.schedule", "msdb.ir", "msdb.tuner",
            "msdb.cli"} <= folders


def test_the_database_layer_imports_nothing_from_the_msdb_package_itself() -> None:
    """msdb/__init__ sits above every folder (it re-exports them): msdb.database reaches
    `__version__` downward, through msdb.version, never through `import msdb`."""
    offenders = [f"{path.relative_to(ROOT)} imports msdb/__init__"
                 for name, path in _modules().items() if _folder(name) == "msdb.database"
                 if "msdb" in _imports(name, path)]
    assert offenders == []


def test_the_import_finder_sees_an_import_of_the_package_itself(tmp_path: pathlib.Path) -> None:
    for number, source in enumerate(("import msdb\n", "def f():\n    from msdb import __version__\n")):
        path = tmp_path / f"probe{number}.py"
        path.write_text(source)
        assert "msdb" in _imports("msdb.database.probe", path)
    assert "msdb" not in _imports("msdb.database.location", ROOT / "msdb" / "database" / "location.py")


def test_opening_a_database_and_the_database_class_do_not_import_each_other() -> None:
    """msdb.database.location opens the SQL database class's module; that module (and any other
    location imports) must not import location back, not even inside a function (what
    both need, `redact`, lives below them in msdb.database.urls)."""
    modules = _modules()
    location = "msdb.database.location"
    imported = {name for name in _imports(location, modules[location]) if name in modules and name != location}
    assert imported  # the finder sees what location imports
    assert [name for name in sorted(imported) if location in _imports(name, modules[name])] == []
