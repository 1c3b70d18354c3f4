"""The shipped TVM 0.27 CUDA candidates with TVM's VerifyGPUCode verdicts
(tests/data/cuda_verdicts, written by tests/tuner/cuda/test_cuda_verdicts_tvm.py): one gzipped
JSON file per workload with the workload as TVMScript, TVM's cuda target and a list of candidates, each a
post-processed trace in TVM's JSON and "accepted" or "refused"."""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parents[2] / "data" / "cuda_verdicts"
WORKLOADS = ("matmul", "conv2d", "softmax", "depthwise_conv2d", "batch_matmul", "matmul_fp16", "conv2d_fp16")


@dataclass(frozen=True)
class Verdict:
    """One shipped candidate: its workload, index, TVM JSON trace and TVM's verdict."""

    workload: str
    index: int
    trace: Any
    verdict: str

    @property
    def id(self) -> str:
        return f"{self.workload}-{self.index}"


@lru_cache(maxsize=None)
def load(workload: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(gzip.decompress(path(workload).read_bytes()))
    return data


def path(workload: str) -> Path:
    return DATA / f"{workload}.json.gz"


def verdicts() -> list[Verdict]:
    return [Verdict(name, i, item["trace"], item["verdict"])
            for name in WORKLOADS for i, item in enumerate(load(name)["candidates"])]
