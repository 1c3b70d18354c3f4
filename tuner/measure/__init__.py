"""Measurement (docs/architecture.md, "Tuner"): building candidates and timing them in worker
processes with TVM's timing semantics, so that a crashing or hanging kernel is a failed result
and never takes the tuner down.

- `base`: `Closeable`, the `close` and context manager every builder and runner shares;
- `builder`: `Builder` (TVM's interface, `Builder.create(kind)`), `LocalBuilder`, `BuilderInput`,
  `BuilderResult` (lowering + LLVM in workers);
- `runner`: `Runner` (TVM's interface, `Runner.create(kind)`), `RunnerFuture`, `LocalRunner`,
  `RunnerInput`, `RunnerResult` (timed runs in a worker);
- `callback`: `MeasureCallback` (`create("default")`: `AddToDatabase`, `RemoveBuildArtifact`,
  `UpdateCostModel`), what happens after each measured round;
- `worker`: the worker process protocol both use (`python -m msdb.tuner.measure.worker`, which
  is why this package imports nothing until a name is asked for);
- `timing`: TVM's `time_evaluator` semantics (number, repeat, min_repeat_ms, cache flush);
- `cuda_runner`: `CudaRunner`, cubins measured on this machine's GPU;
- `dask`: `DaskBuilder`, `DaskRunner`, the same on a Dask cluster's workers (extra `dask`).
"""

from __future__ import annotations

from msdb.lazy import lazy_getattr

from typing import TYPE_CHECKING, Any

_LAZY = {
    "Builder": "msdb.tuner.measure.builder", "Runner": "msdb.tuner.measure.runner",
    "RunnerFuture": "msdb.tuner.measure.runner", "ReadyRunnerFuture": "msdb.tuner.measure.runner",
    "MeasureCallback": "msdb.tuner.measure.callback", "AddToDatabase": "msdb.tuner.measure.callback",
    "RemoveBuildArtifact": "msdb.tuner.measure.callback", "UpdateCostModel": "msdb.tuner.measure.callback",
    "CudaRunner": "msdb.tuner.measure.cuda_runner",
    "BuilderInput": "msdb.tuner.measure.builder", "BuilderResult": "msdb.tuner.measure.builder",
    "LocalBuilder": "msdb.tuner.measure.builder", "LocalRunner": "msdb.tuner.measure.runner",
    "RunnerInput": "msdb.tuner.measure.runner", "RunnerResult": "msdb.tuner.measure.runner",
    "TimingResult": "msdb.tuner.measure.timing",
    "DaskBuilder": "msdb.tuner.measure.dask", "DaskRunner": "msdb.tuner.measure.dask",
}

__all__ = sorted(_LAZY)

if TYPE_CHECKING:
    from msdb.tuner.measure.builder import Builder, BuilderInput, BuilderResult, LocalBuilder
    from msdb.tuner.measure.callback import AddToDatabase, MeasureCallback, RemoveBuildArtifact, UpdateCostModel
    from msdb.tuner.measure.cuda_runner import CudaRunner
    from msdb.tuner.measure.dask import DaskBuilder, DaskRunner
    from msdb.tuner.measure.runner import (LocalRunner, ReadyRunnerFuture, Runner, RunnerFuture, RunnerInput,
                                           RunnerResult)
    from msdb.tuner.measure.timing import TimingResult


__getattr__ = lazy_getattr(__name__, _LAZY, globals())
