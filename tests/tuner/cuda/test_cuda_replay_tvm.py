"""TVM 0.27's own CUDA design spaces and post-processed candidates replay in msdb as in TVM.

TVM's `TuneContext` with a cuda target (sm_90), the `post-order-apply` space generator (TVM's
cuda schedule rules and post-processors) and the `replay-trace` strategy produces design spaces
and measure candidates without a GPU (for an int8 dense, with TVM's dp4a rule set: Blockize and
Tensorize "dp4a_s8s8s32"). With MSDB_REGENERATE_CUDA_CANDIDATES=1 this test writes
them to tests/data/cuda_candidates (workload TVMScript, target, traces as TVM JSON and the
module TVM's replay gives); otherwise it checks that TVM still replays each shipped trace to the
shipped module, and that msdb's replay of the trace on the workload gives that module
(structurally equal after msdb parses TVM's print)."""

from __future__ import annotations

import json
import os

import pytest

from msdb.hashing import structural_equal
from msdb.ir import from_script
from msdb.schedule import Schedule, Trace, tvm_json
from tests.tuner.cuda._candidates import DATA, DP4A_RECORDS, TENSOR_CORE_WORKLOADS, WORKLOADS, load, tvm_module

pytestmark = pytest.mark.tvm

REGENERATE = os.environ.get("MSDB_REGENERATE_CUDA_CANDIDATES") == "1"
TARGET = {"kind": "cuda", "arch": "sm_90", "max_threads_per_block": 1024, "max_shared_memory_per_block": 49152,
          "thread_warp_size": 32, "registers_per_block": 65536, "max_num_threads": 1024}
N_CANDIDATES = 4


def _tvm_workload(name: str) -> object:
    from tvm import te
    from tvm.s_tir.meta_schedule.testing import te_workload as W

    if name == "dense_int8_dp4a":
        return _dp4a_workload()
    tensors = {
        "matmul": lambda: W.matmul(1024, 1024, 1024),
        "conv2d": lambda: W.conv2d_nchw(1, 56, 56, 64, 64, 3, 3, 1, 1),  # ResNet-18 layer: 64 filters 3x3 pad 1
        "softmax": lambda: W.softmax_mn(256, 1024),
        # tensor cores: fp16 inputs, fp32 or fp16 accumulation (TVM's wmma intrinsic groups)
        "matmul_fp16": lambda: W.matmul(1024, 1024, 1024, in_dtype="float16", out_dtype="float32"),
        "matmul_fp16_f16acc": lambda: W.matmul(1024, 1024, 1024, in_dtype="float16", out_dtype="float16"),
        "conv2d_fp16": lambda: W.conv2d_nhwc(1, 56, 56, 64, 64, 3, 1, 1, in_dtype="float16", out_dtype="float32"),
        # a 1x1 conv: its unit kernel loops stay outside the matrix multiply
        "conv2d_1x1_fp16": lambda: W.conv2d_nhwc(1, 56, 56, 256, 64, 1, 1, 0, in_dtype="float16",
                                                 out_dtype="float32"),
    }[name]()
    return te.create_prim_func(tensors)


def _space_generator(name: str) -> object:
    """"post-order-apply" with TVM's cuda defaults; for the int8 dense, TVM's dp4a rule set (as
    TVM's own dp4a tests tune it): on sm_90 the defaults would pick tensor cores (ReIndex,
    TransformLayout and the wmma intrinsics), which msdb does not replay."""
    if name != "dense_int8_dp4a":
        return "post-order-apply"
    import tvm.s_tir.tensor_intrin  # noqa: F401  (registers dp4a_s8s8s32)

    rule, post = ms.schedule_rule, ms.postproc
    rules = [
        rule.MultiLevelTilingWithIntrin(
            "dp4a_s8s8s32", structure="SSSRRSRS", tile_binds=["blockIdx.x", "vthread.x", "threadIdx.x"],
            max_innermost_factor=64, vector_load_lens=[1, 2, 3, 4],
            reuse_read=rule.ReuseType(req="must", levels=[4], scope="shared"),
            reuse_write=rule.ReuseType(req="must", levels=[3], scope="local")),
        rule.AutoInline(into_producer=True, into_consumer=True, inline_const_tensor=True, disallow_if_then_else=False,
                        require_injective=False, require_ordered=False, disallow_op=None),
        rule.CrossThreadReduction(thread_extents=[4, 8, 16, 32, 64, 128, 256, 512]),
        rule.ParallelizeVectorizeUnroll(max_jobs_per_core=-1, max_vectorize_extent=-1,
                                        unroll_max_steps=[0, 16, 64, 512, 1024], unroll_explicit=True),
    ]
    postprocs = [post.DisallowDynamicLoop(), post.RewriteCooperativeFetch(), post.RewriteUnboundBlock(),
                 post.RewriteParallelVectorizeUnroll(), post.RewriteReductionBlock(), post.RewriteTensorize(),
                 post.VerifyGPUCode()]
    return ms.space_generator.PostOrderApply(sch_rules=rules, postprocs=postprocs, mutator_probs={})


def _tvm_replay(mod: object, trace_json: object) -> str:
    import tvm
    import tvm.s_tir.tensor_intrin  # noqa: F401  (registers TVM's tensor intrinsics, dp4a among them)

    sch = tvm.s_tir.Schedule(mod)
    tvm.s_tir.schedule.Trace.apply_json_to_schedule(trace_json, sch)
    return str(sch.mod.script())


def _generate(name: str) -> None:
    import tvm
    from tvm.s_tir import meta_schedule as ms

    mod = tvm.IRModule({"main": _tvm_workload(name)})
    target = tvm.target.Target(TARGET)
    ctx = ms.TuneContext(mod=mod, target=target, space_generator=_space_generator(name),
                         search_strategy="replay-trace", task_name=name, num_threads=1, rand_state=15)
    spaces = ctx.generate_design_space()
    ctx.pre_tuning(max_trials=N_CANDIDATES, num_trials_per_iter=N_CANDIDATES, design_spaces=spaces)
    candidates = ctx.generate_measure_candidates()
    assert candidates, f"{name}: TVM produced no candidates"

    def item(sch: object) -> dict[str, object]:
        trace_json = sch.trace.as_json()  # type: ignore[attr-defined]
        plain = json.loads(json.dumps(_plain(trace_json)))
        return {"trace": plain, "tvm_script": str(sch.mod.script())}  # type: ignore[attr-defined]

    data = {
        "tvm_version": tvm.__version__,
        "workload": str(mod.script()),
        "target": json.loads(json.dumps(_plain(target.export()))),
        "design_spaces": [item(s) for s in spaces],
        "candidates": [item(c.sch) for c in candidates[:N_CANDIDATES]],
    }
    DATA.mkdir(parents=True, exist_ok=True)
    (DATA / f"{name}.json").write_text(json.dumps(data, indent=1) + "\n")


def _plain(value: object) -> object:
    """TVM's FFI containers as plain JSON values (what TVM's JSON database writes)."""
    import tvm

    if isinstance(value, (str, bool, int, float)) or value is None:
        return value
    if isinstance(value, tvm.tirx.IntImm) if hasattr(tvm, "tirx") else False:
        return int(value)  # type: ignore[call-overload]
    if isinstance(value, tvm.tirx.FloatImm) if hasattr(tvm, "tirx") else False:
        return float(value)  # type: ignore[arg-type]
    if hasattr(value, "items"):
        return {str(k): _plain(v) for k, v in value.items()}  # type: ignore[attr-defined]
    if hasattr(value, "__iter__"):
        return [_plain(v) for v in value]  # type: ignore[attr-defined]
    return str(value)


@pytest.mark.parametrize("name", [pytest.param(name, marks=pytest.mark.slow) if name == "dense_int8_dp4a" else name
                                  for name in WORKLOADS + TENSOR_CORE_WORKLOADS])  # TVM's tensorize replay takes most of a minute here
def test_tvm_and_msdb_replay_the_shipped_cuda_traces_alike(name: str) -> None:
    pytest.importorskip("tvm")
    import tvm

    if REGENERATE:
        _generate(name)
    data = load(name)
    tvm_mod = tvm.script.from_source(data["workload"])
    ours = from_script(data["workload"])
    for key in ("design_spaces", "candidates"):
        for i, item in enumerate(data[key]):
            where = f"{name} {key}[{i}]"
            assert _tvm_replay(tvm_mod, item["trace"]) == item["tvm_script"], f"{where}: TVM's replay changed"
            sch = Schedule(ours)
            Trace.from_json(item["trace"]).apply_to_schedule(sch, remove_postproc=False)
            assert structural_equal(sch.mod, tvm_module(item["tvm_script"])), f"{where}: msdb's replay differs"


def _dp4a_workload() -> object:
    """The int8 dense workload of the fixture's dp4a records (TVM's dp4a test workload, 1024^2:
    X (m, k) and W (n, k), int32 accumulation, block "compute")."""
    from tvm import te

    x = te.placeholder((1024, 1024), name="X", dtype="int8")
    w = te.placeholder((1024, 1024), name="W", dtype="int8")
    k = te.reduce_axis((0, 1024), name="k")
    out = te.compute((1024, 1024), lambda i, j: te.sum(x[i, k].astype("int32") * w[j, k].astype("int32"), axis=k),
                     name="compute")
    return te.create_prim_func([x, w, out])


def _register_tvm_dp4a() -> None:
    """TVM 0.27 names the signed dp4a intrinsic "dp4a_s8s8s32"; the older traces say "dp4a"."""
    import tvm
    from tvm.s_tir.tensor_intrin.dot_product_common import get_dp4a_intrin

    try:
        tvm.s_tir.TensorIntrin.get("dp4a")
    except Exception:  # not registered yet: TVM raises a ValueError or an FFI error
        tvm.s_tir.TensorIntrin.register("dp4a", *get_dp4a_intrin("int8", "int8", "int32"))


@pytest.mark.slow  # TVM's own replay of the two records takes most of a minute here
def test_tvm_and_msdb_replay_the_dp4a_fixture_records_alike() -> None:
    """The fixture's two dp4a records (an older TVM's CUDA log: Blockize, Tensorize "dp4a"),
    normalized to TVM 0.27's spelling by msdb, replay in TVM 0.27 and in msdb to the same
    module (TVM's 4-lane loads `A[T.Ramp(0, 1, 4)]` read as msdb's `A[0]`, see
    msdb.schedule.tensor_intrin)."""
    pytest.importorskip("tvm")
    import tvm

    _register_tvm_dp4a()
    path = DATA / "dp4a_fixture.json"
    lines = DP4A_RECORDS.read_text().splitlines()
    traces = [Trace.from_json(tvm_json.loads(line)[1][0]).normalized().as_json() for line in lines]
    if REGENERATE:
        mod = tvm.IRModule({"main": _dp4a_workload()})
        data = {"tvm_version": tvm.__version__, "workload": str(mod.script()),
                "replayed": [_tvm_replay(mod, json.loads(json.dumps(t))) for t in traces]}
        path.write_text(json.dumps(data, indent=1) + "\n")
    data = json.loads(path.read_text())
    tvm_mod = tvm.script.from_source(data["workload"])
    ours = from_script(data["workload"])
    for i, trace in enumerate(traces):
        assert _tvm_replay(tvm_mod, json.loads(json.dumps(trace))) == data["replayed"][i]
        sch = Schedule(ours)
        Trace.from_json(trace).apply_to_schedule(sch, remove_postproc=False)
        assert structural_equal(sch.mod, tvm_module(data["replayed"][i])), f"record {i} differs"
