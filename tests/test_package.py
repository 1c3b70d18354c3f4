"""The package's shape: namespaced install, a cheap `import msdb`, the layering of
docs/architecture.md, the public API and the console script."""

from __future__ import annotations

import pytest

import ast
import json
import pathlib
import subprocess
import sys

from click.testing import CliRunner

import msdb
from msdb.cli.main import cli

ROOT = pathlib.Path(__file__).resolve().parents[1]
HEAVY_MODULES = ("llvmlite", "xgboost", "pycuda", "datasette", "sqlalchemy", "alembic", "numpy.linalg")


def _imports_of(path: pathlib.Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def test_namespaced_packages_are_importable() -> None:
    import msdb.cli
    import msdb.ir
    import msdb.tuner

    assert pathlib.Path(msdb.tuner.__file__).parent.name == "tuner"
    assert pathlib.Path(msdb.cli.__file__).parent.name == "cli"


def test_import_msdb_loads_no_heavy_dependency() -> None:
    code = "import sys, json, msdb, msdb.ir; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    loaded = set(json.loads(out))
    assert not [m for m in HEAVY_MODULES if m in loaded]


@pytest.mark.slow
def test_library_never_imports_the_tuner_or_the_cli() -> None:
    offenders = []
    for path in (ROOT / "msdb").rglob("*.py"):
        for name in _imports_of(path):
            if name.startswith(("msdb.tuner", "msdb.cli", "tuner", "cli")):
                offenders.append(f"{path.relative_to(ROOT)} imports {name}")
    assert offenders == []


def test_no_top_level_cli_or_schema_package_is_installed() -> None:
    for name in ("cli", "schema", "tuner"):
        code = f"import importlib.util, sys; sys.exit(0 if importlib.util.find_spec({name!r}) is None else 1)"
        result = subprocess.run([sys.executable, "-c", code], cwd="/", capture_output=True)
        assert result.returncode == 0, f"a top-level package {name!r} is importable"


def test_console_script_version_and_help() -> None:
    runner = CliRunner()
    result = runner.invoke(cli, ["--version"])
    assert result.exit_code == 0
    assert result.output == f"msdb, version {msdb.__version__}\n"
    result = runner.invoke(cli, ["--help"])
    assert result.exit_code == 0
    assert "tuning database" in result.output


def test_public_api_names_resolve_to_their_defining_modules() -> None:
    from msdb import JSONDatabase, Schedule, SQLiteDatabase, Target, Trace, TuningRecord, Workload
    from msdb.database.sql import SQLDatabase as defined
    from msdb.database.sqlite import SQLiteDatabase as kept  # the class's first module, which users import

    assert SQLiteDatabase is defined and msdb.SQLDatabase is defined and kept is defined
    for value in (JSONDatabase, Schedule, Target, Trace, TuningRecord, Workload):
        assert value.__module__.startswith("msdb.")
    assert set(msdb.__all__) <= set(dir(msdb))
    for name in msdb.__all__:
        assert getattr(msdb, name) is not None, name


def test_public_api_unknown_name_is_an_attribute_error() -> None:
    import pytest

    with pytest.raises(AttributeError, match="has no attribute 'NoSuchThing'"):
        msdb.NoSuchThing  # noqa: B018


def test_public_api_loads_lazily() -> None:
    code = ("import sys, msdb; assert 'msdb.database.sql' not in sys.modules; "
            "from msdb import SQLiteDatabase; assert 'msdb.database.sql' in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_remote_database_is_a_public_view_loaded_lazily() -> None:
    code = ("import sys, msdb; assert 'msdb.hub.remote' not in sys.modules; "
            "from msdb import RemoteDatabase; assert 'msdb.hub.remote' in sys.modules; "
            "from msdb.hub.remote import RemoteDatabase as defined; assert RemoteDatabase is defined; "
            "assert 'datasette' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)
