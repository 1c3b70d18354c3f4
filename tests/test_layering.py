"""The layering of docs/architecture.md ("Which way imports point"), checked on the source:
no two folders of msdb import each other (directly or through a third), and only msdb.database
touches the table models.

Every import counts, the ones inside functions too: a lazy import is still a dependency."""

from __future__ import annotations

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


def test_no_folders_import_each_other_in_a_circle() -> None:
    graph = folder_graph()
    graph.pop("msdb", None)  # the package's __init__ re-exports everything lazily (PEP 562)
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])


def test_the_cycle_finder_finds_a_cycle_through_a_third_folder() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": {"c"}}) is None


def test_only_the_database_package_imports_the_table_models() -> None:
    offenders = [f"{path.relative_to(ROOT)} imports {imported}"
                 for name, path in _modules().items() if not name.startswith("msdb.database")
                 for imported in _imports(name, path) if imported.startswith("msdb.database.models")]
    assert offenders == []


def test_tests_see_every_folder() -> None:
    folders = set(folder_graph())
    assert {"msdb.database", "msdb.interop", "msdb.records", "msdb.schedule", "msdb.ir", "msdb.tuner",
            "msdb.cli"} <= folders
