"""TVM 0.27's "cuda-tensorcore" design spaces of the workloads around the tensor-core rule's edges,
shipped in tests/data/cuda_candidates/tensorcore_paths.json for
tests/tuner/cuda/test_tensorcore_space.py (no TVM needed there).

The workloads: an int8 matmul accumulated in int32 (the s8s8s32 wmma groups), a batch matmul in
fp16 (the batch iter var left unmapped, fused into blockIdx.y), and those no wmma group matches:
uint8 x int8 into int32, int8 into int16, fp16 into fp64 (TVM falls back to the CUDA tiling), and
an fp16 matmul whose 100 rows the 16x16x16 tile does not divide (TVM pads the block, PadEinsum).
Made as tests/tuner/cuda/test_cuda_replay_tvm.py makes the shipped candidates (TuneContext,
cuda sm_90, "post-order-apply" with the target's defaults, rand_state 15). With
MSDB_REGENERATE_CUDA_CANDIDATES=1 this test writes the file; otherwise it checks that TVM still
gives the shipped design spaces.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from tests.tuner.cuda._candidates import DATA
from tests.tuner.cuda.test_cuda_replay_tvm import TARGET, _plain

pytestmark = pytest.mark.tvm

REGENERATE = os.environ.get("MSDB_REGENERATE_CUDA_CANDIDATES") == "1"
PATH = DATA / "tensorcore_paths.json"


def _matmul(n: int, m: int, k: int, a: str, b: str, c: str) -> Any:
    from tvm import te

    lhs = te.placeholder((n, k), name="A", dtype=a)
    rhs = te.placeholder((k, m), name="B", dtype=b)
    r = te.reduce_axis((0, k), name="k")
    out = te.compute((n, m), lambda i, j: te.sum(lhs[i, r].astype(c) * rhs[r, j].astype(c), axis=r), name="C")
    return [lhs, rhs, out]


def _workloads() -> dict[str, Any]:
    from tvm.s_tir.meta_schedule.testing import te_workload as W

    return {
        "int8": lambda: _matmul(256, 256, 256, "int8", "int8", "int32"),
        "batch_fp16": lambda: W.batch_matmul_nkkm(4, 128, 128, 64, in_dtype="float16", out_dtype="float32"),
        "uint8": lambda: _matmul(256, 256, 256, "uint8", "int8", "int32"),
        "int8_to_int16": lambda: _matmul(256, 256, 256, "int8", "int8", "int16"),
        "fp16_fp64": lambda: _matmul(256, 256, 256, "float16", "float16", "float64"),
        "fp16_odd": lambda: _matmul(100, 256, 256, "float16", "float16", "float32"),
    }


def _design_spaces(name: str) -> dict[str, Any]:
    import tvm
    from tvm import te
    from tvm.s_tir import meta_schedule as ms

    mod = tvm.IRModule({"main": te.create_prim_func(_workloads()[name]())})
    ctx = ms.TuneContext(mod=mod, target=tvm.target.Target(TARGET), space_generator="post-order-apply",
                         search_strategy="replay-trace", task_name=name, num_threads=1, rand_state=15)
    spaces = ctx.generate_design_space()
    return {"workload": str(mod.script()),
            "design_spaces": [{"trace": json.loads(json.dumps(_plain(s.trace.as_json()))),
                               "tvm_script": str(s.mod.script())} for s in spaces]}


def test_tvm_gives_the_shipped_tensorcore_path_spaces() -> None:
    pytest.importorskip("tvm")
    import tvm

    if REGENERATE:
        data = {"tvm_version": tvm.__version__, "target": TARGET,
                "workloads": {name: _design_spaces(name) for name in _workloads()}}
        PATH.write_text(json.dumps(data, indent=1) + "\n")
    shipped = json.loads(PATH.read_text())["workloads"]
    for name in _workloads():
        assert _design_spaces(name) == shipped[name], name
