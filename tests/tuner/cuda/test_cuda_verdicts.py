"""msdb on TVM 0.27's own CUDA candidates (tests/data/cuda_verdicts, a few hundred of five
workloads, written by tests/tuner/cuda/test_cuda_verdicts_tvm.py): msdb's VerifyGPUCode gives
each the verdict TVM's gave, and accepted candidates build to a cubin (NVRTC and ptxas, no GPU).
Building every one takes minutes; bench/bench_cuda_build.py builds them all and times them, this
test builds a fixed sample of each workload."""

from __future__ import annotations

from functools import lru_cache

import pytest

from msdb.ir import from_script
from msdb.ir.function import IRModule
from msdb.records.target import Target
from msdb.schedule import Schedule, Trace
from msdb.tuner.codegen.cuda import build_cuda
from msdb.tuner.context import TuneContext
from msdb.tuner.space.postprocs.verify_gpu_code import VerifyGPUCode
from tests.tuner.cuda._verdicts import WORKLOADS, Verdict, load, verdicts

VERDICTS = verdicts()
#: Accepted candidates built per workload here (every one in bench/bench_cuda_build.py).
BUILT_PER_WORKLOAD = 2


@lru_cache(maxsize=None)
def _workload(name: str) -> IRModule:
    return IRModule.coerce(from_script(load(name)["workload"]))


def _replayed(item: Verdict) -> Schedule:
    sch = Schedule(_workload(item.workload))
    Trace.from_json(item.trace).apply_to_schedule(sch, remove_postproc=False)
    return sch


def test_the_shipped_candidates_cover_both_verdicts_and_every_workload() -> None:
    assert len(VERDICTS) >= 200
    for name in WORKLOADS:
        assert any(v.workload == name and v.verdict == "accepted" for v in VERDICTS), name
    assert sum(v.verdict == "refused" for v in VERDICTS) >= 20
    assert {v.workload for v in VERDICTS if v.verdict == "refused"} >= {"matmul", "conv2d"}


@pytest.mark.slow  # a few hundred replays and GPU lowerings
@pytest.mark.parametrize("item", VERDICTS, ids=lambda v: v.id)
def test_msdb_verify_gpu_code_gives_tvms_verdict(item: Verdict) -> None:
    sch = _replayed(item)
    context = TuneContext(mod=_workload(item.workload), target=Target(load(item.workload)["target"]))
    verify = VerifyGPUCode()
    verify._initialize_with_tune_context(context)
    assert ("accepted" if verify.apply(sch) else "refused") == item.verdict


def _sample() -> list[Verdict]:
    out = []
    for name in WORKLOADS:
        accepted = [v for v in VERDICTS if v.workload == name and v.verdict == "accepted"]
        step = max(1, len(accepted) // BUILT_PER_WORKLOAD)
        out.extend(accepted[::step][:BUILT_PER_WORKLOAD])
    return out


@pytest.mark.slow  # NVRTC and ptxas, a few seconds a candidate
@pytest.mark.parametrize("item", _sample(), ids=lambda v: v.id)
def test_an_accepted_candidate_builds_to_a_cubin(item: Verdict) -> None:
    built = build_cuda(_replayed(item).mod, load(item.workload)["target"])
    assert built.cubin and built.kernels
    for kernel in built.kernels:
        assert kernel["registers"] > 0
        assert kernel["shared_bytes"] <= load(item.workload)["target"]["max_shared_memory_per_block"]
