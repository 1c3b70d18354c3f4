"""The shipped TVM 0.27 CUDA candidates (tests/data/cuda_candidates): one JSON file per workload
with the workload as TVMScript, TVM's cuda target, TVM's design-space traces and post-processed
measure candidates (traces in TVM's JSON), and the module TVM's own replay of each trace gives
(TVMScript printed by TVM). Written by tests/tuner/cuda/test_cuda_replay_tvm.py; read by both CUDA
replay tests."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parents[2] / "data" / "cuda_candidates"
#: Two dp4a records of an older TVM's CUDA log (tests/data/fixtures/README.md).
DP4A_RECORDS = Path(__file__).resolve().parents[2] / "data" / "fixtures" / "tvm-legacy" / "cuda_dp4a_records.json"
WORKLOADS = ("matmul", "conv2d", "softmax", "dense_int8_dp4a")
#: fp16 workloads with TVM's "cuda-tensorcore" defaults (ReIndex, TransformLayout, the wmma intrinsics).
TENSOR_CORE_WORKLOADS = ("matmul_fp16", "matmul_fp16_f16acc", "conv2d_fp16", "conv2d_1x1_fp16")


@dataclass(frozen=True)
class Shipped:
    """One shipped trace: which workload, whether a design space or a candidate, its TVM JSON
    and the module TVM's replay gave."""

    workload: str
    role: str  # "space" or "candidate"
    index: int
    trace: Any
    tvm_script: str

    @property
    def id(self) -> str:
        return f"{self.workload}-{self.role}{self.index}"


def load(workload: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((DATA / f"{workload}.json").read_text())
    return data


def shipped() -> list[Shipped]:
    out = []
    for name in WORKLOADS + TENSOR_CORE_WORKLOADS:
        data = load(name)
        for role, key in (("space", "design_spaces"), ("candidate", "candidates")):
            for i, item in enumerate(data[key]):
                out.append(Shipped(name, role, i, item["trace"], item["tvm_script"]))
    return out


def tvm_dp4a_print(script: str) -> str:
    """TVM's print of a dp4a-tensorized module in msdb's terms: TVM loads each 4-lane operand as
    `A[T.Ramp(0, 1, 4)]`, msdb (no vector lanes in its IR) as `A[0]`
    (msdb.schedule.tensor_intrin)."""
    return script.replace("[T.Ramp(0, 1, 4)]", "[0]")


def tvm_module(script: str) -> Any:
    """TVM's print of a scheduled module, parsed by msdb (dp4a loads as `tvm_dp4a_print` says)."""
    from msdb.ir import from_script

    return from_script(tvm_dp4a_print(script))
