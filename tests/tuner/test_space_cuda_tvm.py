"""msdb's GPU design space against TVM 0.27's own (tvm-marked: runs in the TVM venv).

For TVM's benchmark workloads (te_workload CONFIGS, index 0) and the three workloads of
tests/data/cuda_candidates, TVM's TuneContext with a cuda sm_90 target and `post-order-apply`
gives the design spaces; msdb, given TVM's print of the same workload, must give the same
instructions with the same inputs and attributes (only the sampled decisions differ). Then
random samples of msdb's design spaces go through both post-processor lists (TVM's on TVM's
replay of msdb's trace): the same candidates are rejected, and the accepted ones end with the
same post-processed trace.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from msdb.ir import from_script
from msdb.records.target import Target
from msdb.schedule import Schedule, Trace
from msdb.schedule.tvm_json import dumps
from msdb.tuner.context import TuneContext
from msdb.tuner.space.generators.base import SpaceGenerator
from tests.tuner.cuda._candidates import load

#: The three workloads checked (tests/data/cuda_candidates has TVM's spaces and candidates of each).
WORKLOADS = ("matmul", "conv2d", "softmax")

pytestmark = pytest.mark.tvm

TARGET = {"kind": "cuda", "arch": "sm_90", "max_threads_per_block": 1024, "max_shared_memory_per_block": 49152,
          "thread_warp_size": 32, "registers_per_block": 65536, "max_num_threads": 1024}
ZOO = ("C1D", "C2D", "DEP", "GRP", "T2D", "NRM", "SFM", "CBR", "TBG")


def _plain(value: Any) -> Any:
    import tvm

    if isinstance(value, (str, bool, int, float)) or value is None:
        return value
    if isinstance(value, tvm.tirx.IntImm):
        return int(value)
    if isinstance(value, tvm.tirx.FloatImm):
        return float(value)
    if hasattr(value, "items"):
        return {str(k): _plain(v) for k, v in value.items()}
    if hasattr(value, "__iter__"):
        return [_plain(v) for v in value]
    return str(value)


def _tvm_workload(name: str) -> str:
    """TVM's print of a workload: te_workload CONFIGS[name][0], or a shipped one."""
    if name in WORKLOADS:
        return str(load(name)["workload"])
    import tvm
    from tvm.s_tir.meta_schedule.testing import te_workload

    return str(tvm.IRModule({"main": te_workload.create_te_workload(name, 0)}).script())


def _tvm_context(script: str) -> Any:
    import tvm
    from tvm.s_tir import meta_schedule as ms

    return ms.TuneContext(mod=tvm.script.from_source(script), target=tvm.target.Target(TARGET),
                          space_generator="post-order-apply", search_strategy="replay-trace", task_name="t",
                          num_threads=1, rand_state=1)


def _msdb_context(script: str) -> TuneContext:
    return TuneContext(mod=from_script(script), target=Target(TARGET), space_generator=SpaceGenerator.create(
        "post-order-apply"), rand_state=1)


def _insts(trace_json: Any) -> Any:
    """A trace's instructions as msdb writes TVM 0.27's JSON (decisions left out)."""
    return json.loads(dumps(Trace.from_json(trace_json).normalized().as_json()))[0]


@pytest.mark.parametrize("name", WORKLOADS + ZOO)
def test_msdb_design_spaces_are_tvms_instruction_for_instruction(name: str) -> None:
    pytest.importorskip("tvm")
    script = _tvm_workload(name)
    theirs = [_insts(_plain(s.trace.as_json())) for s in _tvm_context(script).generate_design_space()]
    ours = [_insts(s.trace.as_json()) for s in _msdb_context(script).generate_design_space()]
    assert len(ours) == len(theirs)
    for i, (a, b) in enumerate(zip(ours, theirs)):
        assert a == b, f"{name} design space {i} differs"


def _apply(postprocs: Any, sch: Any) -> str:
    for postproc in postprocs:
        try:
            ok = postproc.apply(sch)
        except Exception:  # TVM raises where msdb answers False; both reject
            ok = False
        if not ok:
            return type(postproc).__name__
    return "accepted"


@pytest.mark.parametrize("name", WORKLOADS)
def test_msdb_post_processors_accept_reject_and_rewrite_as_tvms(name: str) -> None:
    pytest.importorskip("tvm")
    import tvm

    script = _tvm_workload(name)
    tvm_postprocs = _tvm_context(script).space_generator.postprocs
    context = _msdb_context(script)
    spaces = context.generate_design_space()
    mod, tvm_mod = from_script(script), tvm.script.from_source(script)
    rng = random.Random(7)
    verdicts = []
    for i in range(24):
        space = spaces[i % len(spaces)]
        sch = Schedule(mod, seed=rng.randrange(1 << 30))
        Trace(space.trace.insts).apply_to_schedule(sch, remove_postproc=True)
        sampled = json.loads(dumps(sch.trace.as_json()))
        tvm_sch = tvm.s_tir.Schedule(tvm_mod)
        tvm.s_tir.schedule.Trace.apply_json_to_schedule(sampled, tvm_sch)
        sch.enter_postproc()
        tvm_sch.enter_postproc()
        ours, theirs = _apply(context.space_generator.postprocs, sch), _apply(tvm_postprocs, tvm_sch)
        assert ours == theirs, f"{name} sample {i} ({sampled[1]}): msdb {ours}, TVM {theirs}"
        if ours == "accepted":
            assert json.loads(dumps(sch.trace.as_json())) == json.loads(dumps(
                Trace.from_json(_plain(tvm_sch.trace.as_json())).normalized().as_json())), f"{name} sample {i}"
        verdicts.append(ours)
    assert "accepted" in verdicts
