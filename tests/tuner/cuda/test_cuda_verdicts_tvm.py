"""Many of TVM 0.27's own CUDA candidates, with TVM's verdict on each (tests/data/cuda_verdicts).

For each workload, TVM's `post-order-apply` space generator with its cuda defaults (target
sm_90, no GPU needed) makes the design spaces. The "accepted" candidates are the measure
candidates of TVM's replay-trace strategy (design spaces replayed with fresh random decisions,
every post-processor passed). The "refused" ones are design spaces replayed the same way in
this test and post-processed by TVM's cuda post-processors in turn, kept when VerifyGPUCode
refused them, with the trace the post-processors before it left. With MSDB_REGENERATE_CUDA_CANDIDATES=1 this test writes
the files; otherwise it checks that TVM still gives each shipped trace its shipped verdict.
msdb's side (the same verdicts, every accepted candidate built) is
tests/tuner/cuda/test_cuda_verdicts.py; build times are bench/bench_cuda_build.py's."""

from __future__ import annotations

import gzip
import json
import os
from typing import Any

import pytest

from tests.tuner.cuda._verdicts import DATA, WORKLOADS, load, path

pytestmark = pytest.mark.tvm

REGENERATE = os.environ.get("MSDB_REGENERATE_CUDA_CANDIDATES") == "1"
TARGET = {"kind": "cuda", "arch": "sm_90", "max_threads_per_block": 1024, "max_shared_memory_per_block": 49152,
          "thread_warp_size": 32, "registers_per_block": 65536, "max_num_threads": 1024}
#: Per workload: TVM's measure candidates kept, refusals kept at most, and samples drawn for them.
ACCEPTED = 48
REFUSED = 16
SAMPLES = 96
SEED = 7


def _tvm_workload(name: str) -> object:
    from tvm import te
    from tvm.s_tir.meta_schedule.testing import te_workload as W

    tensors = {
        "matmul": lambda: W.matmul(1024, 1024, 1024),
        "conv2d": lambda: W.conv2d_nchw(1, 56, 56, 64, 64, 3, 3, 1, 1),
        "softmax": lambda: W.softmax_mn(256, 1024),
        "depthwise_conv2d": lambda: W.depthwise_conv2d_nhwc(1, 56, 56, 128, 3, 1, 1),
        "batch_matmul": lambda: W.batch_matmul_nkkm(12, 128, 128, 64),
        # tensor cores: TVM's defaults for sm_90 are its "cuda-tensorcore" rules
        "matmul_fp16": lambda: W.matmul(1024, 1024, 1024, in_dtype="float16", out_dtype="float32"),
        "conv2d_fp16": lambda: W.conv2d_nhwc(1, 56, 56, 64, 64, 3, 1, 1, in_dtype="float16", out_dtype="float32"),
    }[name]()
    return te.create_prim_func(tensors)


def _context(name: str) -> object:
    import tvm
    from tvm.s_tir import meta_schedule as ms

    mod = tvm.IRModule({"main": _tvm_workload(name)})
    return ms.TuneContext(mod=mod, target=tvm.target.Target(TARGET), space_generator="post-order-apply",
                          search_strategy="replay-trace", task_name=name, num_threads=1, rand_state=SEED)


def _before_tensorize(trace_json: Any) -> Any:
    """The trace as VerifyGPUCode saw it: without what RewriteTensorize, which runs after it
    in TVM's "cuda-tensorcore" post-processors, added (per block: GetSBlock, Unannotate,
    Tensorize)."""
    insts, decisions = trace_json
    first = next((i for i, inst in enumerate(insts) if inst[0] == "Tensorize"), None)
    if first is None:
        return trace_json
    cut = first - 2
    assert [inst[0] for inst in insts[cut:first]] == ["GetSBlock", "Unannotate"]
    return [insts[:cut], [d for d in decisions if d[0] < cut]]


def _verdict(ctx: object, trace_json: object) -> str:
    """TVM's VerifyGPUCode on the module a post-processed trace replays to (before tensorize)."""
    import tvm

    from tvm.s_tir import meta_schedule as ms

    sch = tvm.s_tir.Schedule(ctx.mod)  # type: ignore[attr-defined]
    tvm.s_tir.schedule.Trace.apply_json_to_schedule(_before_tensorize(trace_json), sch)
    verify = ms.postproc.VerifyGPUCode()
    verify._initialize_with_tune_context(ctx)
    return "accepted" if verify.apply(sch) else "refused"


def _generate(name: str) -> None:
    import tvm

    from tests.tuner.cuda.test_cuda_replay_tvm import _plain

    ctx = _context(name)
    spaces = ctx.generate_design_space()  # type: ignore[attr-defined]
    ctx.pre_tuning(max_trials=ACCEPTED, num_trials_per_iter=ACCEPTED, design_spaces=spaces)  # type: ignore[attr-defined]
    traces = [(c.sch.trace.as_json(), "accepted") for c in ctx.generate_measure_candidates()]  # type: ignore[attr-defined]
    postprocs = list(ctx.space_generator.postprocs)  # type: ignore[attr-defined]
    refused = 0
    for i in range(SAMPLES):
        if refused == REFUSED:
            break
        sch = tvm.s_tir.Schedule(ctx.mod, seed=SEED * 1000 + i)  # type: ignore[attr-defined]
        tvm.s_tir.schedule.Trace(spaces[i % len(spaces)].trace.insts, {}).apply_to_schedule(sch, remove_postproc=True)
        sch.enter_postproc()
        at = [type(p).__name__ for p in postprocs].index("VerifyGPUCode")
        if all(p.apply(sch) for p in postprocs[:at]) and not postprocs[at].apply(sch):
            traces.append((sch.trace.as_json(), "refused"))
            refused += 1
    kept = [{"trace": json.loads(json.dumps(_plain(t))), "verdict": v} for t, v in traces]
    mod = tvm.IRModule({"main": _tvm_workload(name)})
    data = {"tvm_version": tvm.__version__, "workload": str(mod.script()), "target": TARGET, "seed": SEED,
            "candidates": kept}
    DATA.mkdir(parents=True, exist_ok=True)
    path(name).write_bytes(gzip.compress((json.dumps(data, separators=(",", ":")) + "\n").encode(), mtime=0))
    load.cache_clear()


@pytest.mark.slow
@pytest.mark.parametrize("name", WORKLOADS)
def test_tvm_gives_the_shipped_verdicts(name: str) -> None:
    pytest.importorskip("tvm")
    if REGENERATE:
        _generate(name)
    data = load(name)
    ctx = _context(name)
    for i, item in enumerate(data["candidates"]):
        assert _verdict(ctx, item["trace"]) == item["verdict"], f"{name} candidate {i}: TVM's verdict changed"
