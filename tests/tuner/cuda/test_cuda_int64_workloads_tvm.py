"""msdb's GPU post-processors on TVM 0.27's own Relax legalization (int64 shapes and indices),
against TVM's (tvm-marked: runs in the TVM venv). tests/tuner/cuda/test_cuda_int64_workloads.py
checks msdb's legalization of the same ops without TVM.

TVM's LegalizeOps turns a Relax conv2d / matmul into a PrimFunc; msdb parses TVM's print of
it. Random draws of msdb's cuda design spaces are replayed in both (TVM's replay of msdb's
sampled trace): both post-processor lists give the same verdict, and some candidates are
accepted.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from msdb.ir import from_script
from msdb.schedule import Schedule, Trace
from msdb.schedule.tvm_json import dumps
from tests.tuner.test_space_cuda_tvm import _apply, _msdb_context, _tvm_context

pytestmark = pytest.mark.tvm

SAMPLES = 40


def _tvm_legalized(name: str) -> str:
    """TVM's print of the PrimFunc its LegalizeOps makes of one Relax op."""
    import tvm
    from tvm import relax

    op: Any
    shapes: dict[str, tuple[int, ...]]
    if name == "conv2d":
        op, shapes, attrs = relax.op.nn.conv2d, {"data": (1, 64, 56, 56), "weight": (64, 64, 3, 3)}, {"padding": 1}
    else:
        op, shapes, attrs = relax.op.matmul, {"A": (128, 256), "B": (256, 64)}, {}
    builder = relax.BlockBuilder()
    args = [relax.Var(n, relax.TensorType(s, "float32")) for n, s in shapes.items()]
    with builder.function("main", args):
        builder.emit_func_output(builder.emit(op(*args, **attrs)))
    mod = relax.transform.LegalizeOps()(builder.get())
    (prim,) = [gv for gv in mod.functions if gv.name_hint != "main"]
    return str(tvm.IRModule({"main": mod[prim]}).script())


@pytest.mark.parametrize("name", [pytest.param("conv2d", marks=pytest.mark.slow), "matmul"])
def test_msdb_accepts_and_rejects_tvms_int64_legalization_as_tvm(name: str) -> None:
    pytest.importorskip("tvm")
    import tvm

    script = _tvm_legalized(name)
    assert "T.int64(" in script
    tvm_postprocs = _tvm_context(script).space_generator.postprocs
    context = _msdb_context(script)
    spaces = context.generate_design_space()
    mod, tvm_mod = from_script(script), tvm.script.from_source(script)
    rng = random.Random(0)
    verdicts = []
    for i in range(SAMPLES):
        space = spaces[rng.randrange(len(spaces))]
        sch = Schedule(mod, seed=rng.getrandbits(31))
        Trace(space.trace.insts).apply_to_schedule(sch, remove_postproc=True)
        sampled = json.loads(dumps(sch.trace.as_json()))
        tvm_sch = tvm.s_tir.Schedule(tvm_mod)
        tvm.s_tir.schedule.Trace.apply_json_to_schedule(sampled, tvm_sch)
        sch.enter_postproc()
        tvm_sch.enter_postproc()
        ours, theirs = _apply(context.space_generator.postprocs, sch), _apply(tvm_postprocs, tvm_sch)
        assert ours == theirs, f"{name} sample {i}: msdb {ours}, TVM {theirs}"
        verdicts.append(ours)
    assert "accepted" in verdicts
