"""Small workloads, traces and records shared by the database tests (deterministic)."""

from __future__ import annotations

from typing import Sequence

from msdb.ir import zoo
from msdb.ir.function import IRModule
from msdb.records import Target, TuningRecord, Workload
from msdb.schedule import Schedule, Trace

N = 16
CPU = Target("llvm -mcpu=skylake-avx512 -num-cores=4")
CPU_OTHER = Target("llvm -mcpu=znver3 -num-cores=4")
GPU = Target("cuda -arch=sm_80")


def matmul(name: str = "matmul", n: int = N) -> IRModule:
    """A fresh small module (new objects on every call, so equality is structural)."""
    return zoo.build(name, n, n, n)


def split_trace(mod: IRModule, inner: int) -> Trace:
    """get_block C, split its first loop by a sampled tile [N/inner, inner], reorder: a real
    trace whose decisions differ with `inner`."""
    sch = Schedule(mod, seed=1)
    block = sch.get_block("C")
    i, j, _k = sch.get_loops(block)
    n = sch.get(i).extent.value
    tiles = sch.sample_perfect_tile(i, n=2, max_innermost_factor=64, decision=[n // inner, inner])
    outer, inner_loop = sch.split(i, tiles)
    sch.reorder(outer, j, inner_loop)
    return sch.trace


def postproc_only_trace(mod: IRModule) -> Trace:
    """A trace with nothing before EnterPostproc: never valid, whatever its run times."""
    sch = Schedule(mod, seed=1)
    sch.enter_postproc()
    return sch.trace


def record(workload: Workload, run_secs: Sequence[float] | None, target: Target | None = CPU,
           inner: int = 4) -> TuningRecord:
    return TuningRecord(split_trace(workload.mod, inner), workload, run_secs, target)
