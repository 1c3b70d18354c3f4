"""Measurement (docs/architecture.md, "Tuner"): building candidates and timing them in worker
processes with TVM's timing semantics, so that a crashing or hanging kernel is a failed result
and never takes the tuner down.

- `builder`: `LocalBuilder`, `BuilderInput`, `BuilderResult` (lowering + LLVM in workers);
- `runner`: `LocalRunner`, `RunnerInput`, `RunnerResult` (timed runs in a worker);
- `worker`: the worker process protocol both use;
- `timing`: TVM's `time_evaluator` semantics (number, repeat, min_repeat_ms, cache flush).
"""

from __future__ import annotations

from msdb.tuner.measure.builder import BuilderInput, BuilderResult, LocalBuilder
from msdb.tuner.measure.runner import LocalRunner, RunnerInput, RunnerResult
from msdb.tuner.measure.timing import TimingResult

__all__ = ["BuilderInput", "BuilderResult", "LocalBuilder", "LocalRunner", "RunnerInput", "RunnerResult",
           "TimingResult"]
