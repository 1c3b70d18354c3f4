"""`LocalRunner`: measure built candidates in an isolated worker process with TVM's timing
semantics (docs/architecture.md, "Tuner").

    runner = LocalRunner(timeout_sec=30, number=3, repeat=1, min_repeat_ms=100)
    results = runner.run([RunnerInput(r.artifact_path) for r in builder_results])

Per candidate the worker loads the object code, fills the arguments with seeded random uniform
values, calls the kernel once (warm-up), then times `repeat` rounds of `number` calls (growing
`number` until a round lasts `min_repeat_ms`). Candidates run one at a time, so measurements do
not disturb each other. A candidate that crashes the worker or runs past `timeout_sec` is a
failed result (`run_secs == [1e10]`, the reason in `error_msg`); the worker is replaced and the
next candidate is measured normally.
"""

from __future__ import annotations

import ctypes
import json
import logging
import time
from dataclasses import dataclass
from typing import Any, Self, Sequence

from msdb.records.ranking import FAILED_RUN_SECS
from msdb.tuner.measure.worker import Worker, WorkerCrashed, WorkerFailed, WorkerTimeout

__all__ = ["RunnerInput", "RunnerResult", "WorkerRunner", "LocalRunner", "FAILED_RUN_SECS", "random_arguments", "cached_arguments", "time_object"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunnerInput:
    """An artifact from `LocalBuilder` (`args_info` is informational: the sidecar is used)."""

    artifact_path: str | None
    device_type: str = "cpu"
    args_info: Any = None


@dataclass(frozen=True)
class RunnerResult:
    """Seconds per call of each repeat, or [1e10] and the reason."""

    run_secs: list[float] | None
    error_msg: str | None
    overhead_secs: float | None = None  # wall time of the candidate beyond its timed calls

    @property
    def ok(self) -> bool:
        return self.error_msg is None


_args_cache: dict[Any, list[Any]] = {}


def random_arguments(args: Sequence[Sequence[Any]], seed: int = 0) -> list[Any]:
    """numpy arrays for (name, dtype, shape) specs: uniform [0, 1) floats, small non-negative
    integers (they may be indices), random bools."""
    import numpy as np

    rng = np.random.default_rng(seed)
    out = []
    for _, dtype, shape in args:
        shape = tuple(shape)
        if dtype.startswith("float"):
            out.append(rng.random(shape, dtype=np.float32).astype(dtype, copy=False))
        elif dtype == "bool":
            out.append(rng.random(shape) < 0.5)
        else:
            out.append(rng.integers(0, 4, size=shape).astype(dtype))
    return out


def cached_arguments(args: list[Any], seed: int) -> list[Any]:
    """`random_arguments`, remembered for the last spec and seed: a worker measures one task's
    candidates in a row, and drawing a 4096^2 matmul's arguments takes half a second (CPU and
    CUDA runners; the arrays are inputs to copy from or to time on, never a result)."""
    key = (json.dumps(args), seed)
    hit = _args_cache.get(key)
    if hit is None:
        _args_cache.clear()  # keep one set: consecutive candidates of a task share it
        hit = random_arguments(args, seed)
        _args_cache[key] = hit
    return hit


def _run_in_worker(artifact_path: str, number: int, repeat: int, min_repeat_ms: float, flush: bool,
                   num_threads: int | None, seed: int) -> tuple[list[float], float]:
    with open(artifact_path + ".json", "rb") as f:
        meta = json.loads(f.read())
    with open(artifact_path, "rb") as f:
        obj = f.read()
    return time_object(obj, meta, number, repeat, min_repeat_ms, flush, num_threads, seed)


def time_object(obj: bytes, meta: dict[str, Any], number: int, repeat: int, min_repeat_ms: float, flush: bool,
                num_threads: int | None, seed: int) -> tuple[list[float], float]:
    """Load object code and time its kernel (seconds per call of each repeat, and the seconds
    spent in timed calls); shared by the local runner's workers and the Dask workers."""
    from msdb.tuner.codegen.jit import TargetSpec, load_object, set_num_threads
    from msdb.tuner.measure.timing import evaluate, flush_cpu_cache

    loaded = load_object(obj, TargetSpec(**meta["target"]))
    try:
        timed = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64)(loaded.address(meta["timed"]))
        arrays = cached_arguments(meta["args"], seed)
        packed = (ctypes.c_void_p * len(arrays))(*[a.ctypes.data for a in arrays])
        set_num_threads(num_threads)
        spent = [0]

        def run(n: int) -> int:
            nanos = timed(packed, n)
            spent[0] += nanos
            return nanos

        result = evaluate(run, number, repeat, min_repeat_ms, flush_cpu_cache if flush else None)
        return list(result.results), spent[0] / 1e9
    finally:
        loaded.close()


def _preload() -> None:
    import numpy  # noqa: F401  (imported now so that the first candidate does not pay for it)

    from msdb.tuner.codegen import jit

    jit.ensure_runtime()


class WorkerRunner:
    """What the runners that measure in an isolated worker process share (LocalRunner on the
    CPU, CudaRunner on a GPU): `run` is `run_one` per input, `close` ends the worker, and a
    runner is a context manager that closes it."""

    _worker: Any = None

    def run_one(self, item: RunnerInput) -> RunnerResult:
        raise NotImplementedError

    def run(self, runner_inputs: Sequence[RunnerInput]) -> list[RunnerResult]:
        """One result per input, in order; failures are results, never exceptions."""
        return [self.run_one(item) for item in runner_inputs]

    def close(self) -> None:
        if self._worker is not None:
            self._worker.close()
            self._worker = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class LocalRunner(WorkerRunner):
    """Measures artifacts one at a time in a worker process (see the module docstring)."""

    def __init__(self, timeout_sec: float = 30.0, number: int = 3, repeat: int = 1, min_repeat_ms: float = 100.0,
                 enable_cpu_cache_flush: bool = False, *, num_threads: int | None = None, seed: int = 0) -> None:
        self.timeout_sec = float(timeout_sec)
        self.number = int(number)
        self.repeat = int(repeat)
        self.min_repeat_ms = float(min_repeat_ms)
        self.enable_cpu_cache_flush = bool(enable_cpu_cache_flush)
        self.num_threads = num_threads
        self.seed = int(seed)
        self._worker: Worker | None = None

    @property
    def worker(self) -> Worker:
        if self._worker is None:
            self._worker = Worker(preload=["msdb.tuner.measure.runner:_preload"], name="runner")
        return self._worker

    def run_one(self, item: RunnerInput) -> RunnerResult:
        if item.artifact_path is None:
            return RunnerResult([FAILED_RUN_SECS], "LocalRunner: no artifact (the build failed)")
        started = time.perf_counter()
        try:
            secs, timed = self.worker.call(
                "msdb.tuner.measure.runner:_run_in_worker",
                (item.artifact_path, self.number, self.repeat, self.min_repeat_ms, self.enable_cpu_cache_flush,
                 self.num_threads, self.seed),
                self.timeout_sec,
            )
        except WorkerTimeout as err:
            return RunnerResult([FAILED_RUN_SECS], f"LocalRunner: {err}")
        except WorkerCrashed as err:
            return RunnerResult([FAILED_RUN_SECS], f"LocalRunner: kernel {err}")
        except WorkerFailed as err:
            return RunnerResult([FAILED_RUN_SECS], f"LocalRunner: {err}")
        except Exception as err:  # the worker could not start: this candidate fails, the next retries
            return RunnerResult([FAILED_RUN_SECS], f"LocalRunner: {type(err).__name__}: {err}")
        return RunnerResult(list(secs), None, time.perf_counter() - started - timed)

