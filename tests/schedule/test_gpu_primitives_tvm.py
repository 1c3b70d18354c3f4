"""Blockize, tensorize, set_scope and thread-relaxed compute_at against real TVM 0.27: the same
calls on the same workload, through `tvm.s_tir.Schedule` and msdb's `Schedule`, give the same
module (TVM's print parsed by msdb; dp4a's 4-lane loads as msdb writes them, see
msdb.schedule.tensor_intrin)."""

from __future__ import annotations

from typing import Any, Callable

import pytest

from msdb.hashing import structural_equal
from msdb.ir import from_script
from msdb.schedule import Schedule
from tests.tuner.cuda._candidates import tvm_module
from tests.schedule.test_gpu_primitives import DENSE_I8, FUSED_LOOP, MATMUL, TWO_STAGE

pytestmark = pytest.mark.tvm


def _blockize_spatial(sch: Any, get: Callable[[str], Any]) -> None:
    i, j, k = sch.get_loops(get("C"))
    _, j_1 = sch.split(j, [None, 4])
    sch.reorder(k, j_1)
    sch.blockize(j_1)


def _blockize_two_loops(sch: Any, get: Callable[[str], Any]) -> None:
    i, j, k = sch.get_loops(get("C"))
    i_0, i_1 = sch.split(i, [None, 8])
    j_0, j_1 = sch.split(j, [None, 8])
    sch.reorder(i_0, j_0, i_1, j_1, k)
    sch.blockize(i_1)


def _blockize_unit_dropped(sch: Any, get: Callable[[str], Any]) -> None:
    _, _, k = sch.get_loops(get("compute"))
    _, k_1 = sch.split(k, [None, 16])
    sch.blockize(k_1, preserve_unit_iters=False)


def _tensorize_block(sch: Any, get: Callable[[str], Any]) -> None:
    _, _, k = sch.get_loops(get("compute"))
    _, k_1 = sch.split(k, [None, 4])
    outer = sch.blockize(k_1)
    sch.cache_read(outer, 0, "shared")
    sch.cache_read(outer, 1, "shared")
    sch.cache_write(outer, 0, "local")
    i, _, _ = sch.get_loops(outer)
    sch.decompose_reduction(outer, i)
    sch.tensorize(get("compute_o_update"), "dp4a_s8s8s32")


def _set_scope_shared(sch: Any, get: Callable[[str], Any]) -> None:
    sch.set_scope(get("B"), 0, "shared")
    sch.set_scope(get("B"), 0, "shared")  # already shared: nothing changes


CASES: dict[str, tuple[str, Callable[[Any, Callable[[str], Any]], None]]] = {
    "blockize_spatial": (MATMUL, _blockize_spatial),
    "blockize_two_loops": (MATMUL, _blockize_two_loops),
    "blockize_unit_dropped": (DENSE_I8, _blockize_unit_dropped),
    "tensorize_dp4a": (DENSE_I8, _tensorize_block),
    "set_scope": (FUSED_LOOP, _set_scope_shared),
    "set_scope_two_stage": (TWO_STAGE, _set_scope_shared),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_msdb_and_tvm_give_the_same_module(case: str) -> None:
    tvm = pytest.importorskip("tvm")
    import tvm.s_tir.tensor_intrin  # noqa: F401

    source, schedule = CASES[case]
    theirs = tvm.s_tir.Schedule(tvm.script.from_source(source))
    schedule(theirs, theirs.get_sblock)
    ours = Schedule(from_script(source))
    schedule(ours, ours.get_block)
    assert structural_equal(ours.mod, tvm_module(str(theirs.mod.script()))), str(theirs.mod.script())
