"""TVM 0.27 reads the same Relax-style scripts msdb reads, and its task extraction
(`tvm.s_tir.meta_schedule.relax_integration.extract_tasks`) gives the tasks msdb's gives: the
same count, names, weights (anchor-block's over-count included) and workloads (TVM's PrimFuncs
printed and read back by msdb hash as msdb's). Orders differ by design (TVM's is hash-map order;
msdb.model.tasks), so the comparison is order-insensitive.

One documented difference: two public functions with the same body under two names are one
task in msdb (names never count, docs/architecture.md "Hashing") and two in TVM (each keeps its
own global_symbol)."""

from __future__ import annotations

import pathlib
import runpy

import pytest

from msdb.hashing import structural_hash
from msdb.ir import from_script
from msdb.model import extract_tasks, parse_relax_script
from tests.model.relax_scripts import MLP, mixed_script, named_twins_script

pytestmark = pytest.mark.tvm

SCRIPTS = {
    "mlp": lambda: MLP.read_text(),
    "mixed-linear0-first": lambda: mixed_script("linear0"),
    "mixed-dense-first": lambda: mixed_script("dense"),
}


def _tvm_module(text: str, tmp_path: pathlib.Path):  # type: ignore[no-untyped-def]
    """The IRModule TVM builds from the script, run as a TVM user runs it (TVM's parser reads the
    decorated class's source from its file)."""
    import tvm

    path = tmp_path / "model.py"
    path.write_text(text)
    found = [v for v in runpy.run_path(str(path)).values() if isinstance(v, tvm.IRModule)]
    assert len(found) == 1
    return found[0]


def _tvm_tasks(mod, mode: str) -> list[tuple[str, int, str]]:  # type: ignore[no-untyped-def]
    import tvm
    from tvm.s_tir.meta_schedule.relax_integration import extract_tasks as tvm_extract_tasks

    target = tvm.target.Target({"kind": "llvm", "num-cores": 1})
    return sorted((t.task_name, int(t.weight), structural_hash(from_script(t.mod.script())))
                  for t in tvm_extract_tasks(mod, target, module_equality=mode))


def _msdb_tasks(text: str, mode: str) -> list[tuple[str, int, str]]:
    model = parse_relax_script(text, "model.py")
    return sorted((t.task_name, t.weight, structural_hash(t.mod)) for t in extract_tasks(model, module_equality=mode))


@pytest.mark.parametrize("mode", ["structural", "anchor-block"])
@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_tvm_extracts_the_tasks_msdb_extracts(name: str, mode: str, tmp_path: pathlib.Path) -> None:
    text = SCRIPTS[name]()
    assert _tvm_tasks(_tvm_module(text, tmp_path), mode) == _msdb_tasks(text, mode)


def test_anchor_block_weights_over_count_in_both() -> None:
    # 5 calls; TVM and msdb both count 6 under anchor-block (dense replaced linear0: 1 + (1 + 1))
    assert sum(w for _, w, _ in _msdb_tasks(mixed_script("linear0"), "anchor-block")) == 6


def test_named_twins_are_two_tvm_tasks_and_one_msdb_task(tmp_path: pathlib.Path) -> None:
    text = named_twins_script()
    tvm_tasks = _tvm_tasks(_tvm_module(text, tmp_path), "structural")
    msdb_tasks = _msdb_tasks(text, "structural")
    assert [(n, w) for n, w, _ in tvm_tasks] == [("relu_a", 1), ("relu_b", 1)]
    assert [(n, w) for n, w, _ in msdb_tasks] == [("relu_a", 2)]
    # the same workload to msdb: TVM split it only by its names
    assert tvm_tasks[0][2] == tvm_tasks[1][2] == msdb_tasks[0][2]
