"""One workload, every producer, one hash: the zoo (TE builder), TVM 0.27's printed TVMScript,
the older TVMScript dialect and TVM's own serialized workloads must all agree. These tests run as
soon as the producers they need exist (the parser, the zoo, the TVM payload decoder)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from msdb.hashing import MODES, structural_equal, structural_hash

DATA = Path(__file__).resolve().parents[1] / "data"
SCRIPTS_027 = DATA / "tvmscript" / "tvm027"
SCRIPTS_02X = DATA / "tvmscript" / "tvm02x"
TVM_WORKLOADS = DATA / "tvm027_workloads"
ZOO_NAMES = json.loads((TVM_WORKLOADS / "zoo_index0_names.json").read_text())


def _needs(module: str, attr: str):
    """`module.attr`, imported on first use."""
    import importlib

    return getattr(importlib.import_module(module), attr)


def _from_script():
    return _needs("msdb.ir.script", "from_script")


def _zoo():
    _needs("msdb.ir.zoo", "workload")
    from msdb.ir import zoo

    return zoo


NAMES_02X = sorted(p.stem for p in SCRIPTS_02X.glob("*.py"))


def test_the_old_dialect_scripts_are_there() -> None:
    assert NAMES_02X, f"no scripts in {SCRIPTS_02X}"  # else the test below is skipped, not failed


@pytest.mark.parametrize("name", NAMES_02X)
def test_old_and_new_tvmscript_dialects_hash_alike(name: str) -> None:
    # 0.2x scripts say tir.noalias and no s_tir; 0.27 scripts say tirx.noalias and s_tir=True.
    from_script = _from_script()
    new = from_script((SCRIPTS_027 / f"{name}.py").read_text())
    old = from_script((SCRIPTS_02X / f"{name}.py").read_text())
    for mode in MODES:
        assert structural_hash(old, mode) == structural_hash(new, mode), mode
    assert structural_equal(old, new)


@pytest.mark.parametrize("name", ZOO_NAMES)
def test_zoo_matches_tvm_printed_script(name: str) -> None:
    zoo = _zoo()
    from_script = _from_script()
    parsed = from_script((SCRIPTS_027 / f"{name}.py").read_text())
    built = zoo.workload(name)
    assert structural_hash(built) == structural_hash(parsed)
    assert structural_equal(built, parsed)


@pytest.mark.parametrize("index, name", list(enumerate(ZOO_NAMES)))
def test_zoo_matches_tvm_serialized_workload(index: int, name: str) -> None:
    zoo = _zoo()
    decode_workload = _needs("msdb.interop.tvm.payload", "decode_workload")
    lines = (TVM_WORKLOADS / "zoo_index0_database_workload.json").read_text().splitlines()
    _tvm_shash, b64 = json.loads(lines[index])
    decoded = decode_workload(b64)
    assert structural_hash(decoded) == structural_hash(zoo.workload(name))
