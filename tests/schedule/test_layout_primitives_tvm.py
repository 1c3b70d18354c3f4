"""reindex, transform_layout, transform_block_layout and the wmma tensor intrinsics against real
TVM 0.27: the same calls on the same workload give the same module, msdb's trace of them
replays in TVM to that module, and msdb's wmma intrinsics are TVM's (descriptions and
implementations structurally equal). TVM's whole tensor-core traces:
tests/tuner/cuda/test_cuda_replay_tvm.py."""

from __future__ import annotations

import json
from typing import Any, Callable

import pytest

from msdb.hashing import structural_equal
from msdb.ir import from_script, to_script
from msdb.schedule import Schedule, tensor_intrin
from tests.schedule.test_layout_primitives import conv_nhwc, fold_conv
from tests.tuner.cuda._candidates import tvm_module

pytestmark = pytest.mark.tvm


def _fold_conv(sch: Any, get: Callable[[str], Any]) -> None:
    fold_conv(sch, get)
    # tiles of 4x4 for the output, as the tensor-core rule lays out its accumulator
    sch.transform_layout(get("conv"), ("write", 0), lambda i, j: (i // 4, j // 4, i % 4, j % 4))
    sch.compute_inline(get("PadInput"))


def test_msdb_and_tvm_fold_a_conv_into_the_same_matrix_multiply() -> None:
    tvm = pytest.importorskip("tvm")
    source = to_script(conv_nhwc())
    if "s_tir=True" not in source:  # TVM 0.27 parses block allocations in s_tir functions only
        source = source.replace("@T.prim_func", "@T.prim_func(s_tir=True)", 1)
    theirs = tvm.s_tir.Schedule(tvm.script.from_source(source))
    _fold_conv(theirs, theirs.get_sblock)
    ours = Schedule(from_script(source))
    _fold_conv(ours, ours.get_block)
    assert structural_equal(ours.mod, tvm_module(str(theirs.mod.script()))), str(theirs.mod.script())
    # msdb's trace, written as TVM's JSON, replays in TVM to the same module
    replayed = tvm.s_tir.Schedule(tvm.script.from_source(source))
    tvm.s_tir.schedule.Trace.apply_json_to_schedule(json.loads(json.dumps(ours.trace.as_json())), replayed)
    assert str(replayed.mod.script()) == str(theirs.mod.script())


def test_msdb_registers_tvms_wmma_intrinsics() -> None:
    tvm = pytest.importorskip("tvm")
    import tvm.s_tir.tensor_intrin.cuda as cuda  # noqa: F401  (registers TVM's wmma intrinsics)

    names = [n for n in tensor_intrin.registered() if n.startswith("wmma_")]
    assert len(names) == 34  # sync 6, load 16, fill 3, store 9
    for name in names:
        theirs = tvm.s_tir.TensorIntrin.get(name)
        ours = tensor_intrin.get(name)
        for what, mine, tvm_func in (("desc", ours.desc, theirs.desc), ("impl", ours.impl, theirs.impl)):
            (parsed,) = from_script(str(tvm_func.script())).functions.values()
            assert structural_equal(mine, parsed), f"{name} {what}"
