"""The TVMScript parser's layers (docs/architecture.md, "TVMScript parser"): public names stay
where users import them, each layer imports only the layers below it, and the docs table lists
every module of the package."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SCRIPT_DIR = Path(__file__).resolve().parents[2] / "msdb" / "ir" / "script"
ARCHITECTURE = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"

# Bottom first: a layer may import the ones before it, never the ones after.
LAYERS = ["parse_scope", "parse_expr", "parse_buffer", "parse_stmt", "parser"]


def test_public_names_import_from_the_package_and_the_parser_module() -> None:
    from msdb.errors import ScriptError
    from msdb.ir.script import ScriptError as PackageScriptError
    from msdb.ir.script import from_script, to_script
    from msdb.ir.script.parser import from_script as parser_from_script

    assert parser_from_script is from_script
    assert PackageScriptError is ScriptError
    mod = from_script("@T.prim_func\ndef f(A: T.Buffer((4,), \"float32\")):\n    A[0] = T.float32(1)\n")
    assert from_script(to_script(mod)) is not None


def _runtime_imports(path: Path) -> set[str]:
    """Modules imported outside `if TYPE_CHECKING:` blocks."""
    tree = ast.parse(path.read_text())
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            skipped.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


@pytest.mark.parametrize("layer", LAYERS)
def test_a_layer_imports_only_the_layers_below_it(layer: str) -> None:
    above = LAYERS[LAYERS.index(layer) + 1:]
    imports = _runtime_imports(SCRIPT_DIR / f"{layer}.py")
    wrong = sorted(m for m in imports if m.rpartition(".")[2] in above and m.startswith("msdb.ir.script"))
    assert not wrong, f"{layer} imports {wrong}, a layer above it"


def test_architecture_table_lists_every_module_of_the_package() -> None:
    text = ARCHITECTURE.read_text()
    section = text.split("### TVMScript parser", 1)[1].split("\n#", 1)[0]
    modules = sorted(p.stem for p in SCRIPT_DIR.glob("*.py") if p.stem != "__init__")
    assert modules, f"no modules found under {SCRIPT_DIR}"
    missing = [m for m in modules if f"| `{m}` |" not in section]
    assert not missing, f"docs/architecture.md, TVMScript parser: no row for {missing}"
