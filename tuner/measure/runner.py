"""`Runner`, TVM's runner interface (`run(inputs) -> futures`, `Runner.create(kind)`), and
`LocalRunner`: measure built candidates in an isolated worker process with TVM's timing
semantics (docs/architecture.md, "Tuner" and "Measurement").

    runner = Runner.create("local", timeout_sec=30, number=3, repeat=1, min_repeat_ms=100)
    futures = runner.run([RunnerInput(r.artifact_path) for r in builder_results])
    results = [f.result() for f in futures]

Per candidate the worker loads the object code, fills the arguments with seeded random uniform
values, calls the kernel once (warm-up), then times `repeat` rounds of `number` calls (growing
`number` until a round lasts `min_repeat_ms`). Candidates run one at a time, so measurements do
not disturb each other. A candidate that crashes the worker or runs past `timeout_sec` is a
failed result (`run_secs == [1e10]`, the reason in `error_msg`); the worker is replaced and the
next candidate is measured normally.

msdb's runners measure while their caller waits: a future's `result()` (or the runner's
`as_completed`) measures what comes before it, so a Ctrl-C lands in the tuning process's own
thread and nothing measures behind its back; `done()` says whether a result is there.
"""

from __future__ import annotations

import abc
import ctypes
import json
import logging
import time
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, Iterator, Sequence

from msdb.kinds import load_kind
from msdb.records.ranking import FAILED_RUN_SECS
from msdb.tuner.measure.base import Closeable
from msdb.tuner.measure.worker import Worker, WorkerCrashed, WorkerFailed, WorkerTimeout

if TYPE_CHECKING:
    from msdb.tuner.measure.builder import Builder, BuilderInput, BuilderResult

__all__ = ["Runner", "RunnerFuture", "ReadyRunnerFuture", "BatchFuture", "batch_futures", "RunnerInput",
           "RunnerResult", "WorkerRunner", "LocalRunner", "FAILED_RUN_SECS", "random_arguments",
           "cached_arguments", "time_object", "device_type"]

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

    @property
    def recorded_run_secs(self) -> list[float]:
        """The run_secs a tuning record of this result stores: the measured ones, or TVM's
        failure mark [1e10] for a failed build or run (as TVM records failures)."""
        return list(self.run_secs) if self.error_msg is None and self.run_secs else [FAILED_RUN_SECS]


class RunnerFuture(abc.ABC):
    """TVM's RunnerFuture: one candidate's measurement, `result()` when it is there."""

    @abc.abstractmethod
    def done(self) -> bool:
        """Whether `result()` would return without measuring or waiting."""

    @abc.abstractmethod
    def result(self) -> RunnerResult:
        """The candidate's result (measured or waited for first when it is not there yet)."""


class ReadyRunnerFuture(RunnerFuture):
    """A future whose result is known already: a failed build, or a runner of one's own that
    computes its results at once (a simulator)."""

    def __init__(self, result: RunnerResult) -> None:
        self._result = result

    def done(self) -> bool:
        return True

    def result(self) -> RunnerResult:
        return self._result


class _Batch:
    """The results of one `run` call, pulled from `source` ((index, result) pairs, in the order
    they end) while a caller waits; an index the source never gives is a failed result."""

    def __init__(self, n: int, source: Iterator[tuple[int, RunnerResult]], who: str) -> None:
        self.n = n
        self.source: Iterator[tuple[int, RunnerResult]] | None = source
        self.who = who
        self.results: dict[int, RunnerResult] = {}

    def step(self) -> None:
        """Pull one more result (measuring or waiting for it)."""
        if self.source is None:
            return
        try:
            index, result = next(self.source)
        except StopIteration:
            self.source = None
            for i in range(self.n):
                self.results.setdefault(i, RunnerResult([FAILED_RUN_SECS], f"{self.who}: no result"))
            return
        self.results[index] = result

    def wait(self, index: int) -> RunnerResult:
        while index not in self.results:
            self.step()
        return self.results[index]


class BatchFuture(RunnerFuture):
    """One candidate of a batch that the caller drives (`batch_futures`): `result()` pulls the
    batch's results until this one is there; `advance()` pulls the next to end, whichever it is
    (`Runner.as_completed`)."""

    def __init__(self, batch: _Batch, index: int) -> None:
        self._batch = batch
        self._index = index

    def done(self) -> bool:
        return self._index in self._batch.results

    def result(self) -> RunnerResult:
        return self._batch.wait(self._index)

    def advance(self) -> None:
        self._batch.step()


def batch_futures(n: int, source: Iterator[tuple[int, RunnerResult]], who: str) -> list[RunnerFuture]:
    """Futures for `n` candidates whose results `source` yields as (index, result), each as it
    ends (a lazy generator: it measures, or waits for a farm, when it is pulled)."""
    batch = _Batch(n, source, who)
    return [BatchFuture(batch, i) for i in range(n)]


def device_type(target: Any) -> str:
    """A `RunnerInput`'s device for a build target: "cuda" for CUDA targets, else "cpu"."""
    from msdb.records.target import Target

    coerced = Target.coerce(target) if target is not None else None
    return "cuda" if coerced is not None and coerced.kind == "cuda" else "cpu"


class Runner(Closeable, abc.ABC):
    """TVM's Runner: subclass it and implement `run` to plug a runner of one's own (a remote
    board, a simulator) into `tune_tir` / `tune_tasks` (docs/architecture.md, "Measurement")."""

    @abc.abstractmethod
    def run(self, runner_inputs: Sequence[RunnerInput]) -> list[RunnerFuture]:
        """One future per input, in order; failures are results, never exceptions."""

    def as_completed(self, futures: Sequence[RunnerFuture]) -> Iterator[tuple[int, RunnerResult]]:
        """(index, result) per future, each as it ends, so the tuner commits each at once: what
        is done first, then a caller-driven batch pulled one result at a time (a farm's in the
        order its workers end), any other future waited for in order."""
        pending = list(range(len(futures)))
        while pending:
            ready = [i for i in pending if futures[i].done()]
            if not ready:
                first = futures[pending[0]]
                if isinstance(first, BatchFuture):
                    first.advance()
                    continue
                ready = [pending[0]]
            for i in ready:
                yield i, futures[i].result()
            gone = set(ready)
            pending = [i for i in pending if i not in gone]

    def build_and_run(self, builder: Builder, build_inputs: Sequence[BuilderInput],
                      args_infos: Sequence[Any]) -> tuple[list[BuilderResult], list[RunnerFuture]]:
        """Build the inputs with `builder`, then run what was built (TVM's two steps); a failed
        build is a ready, failed result saying why ("build failed: ..."). A runner that can do
        both in one step on its own machines overrides this (`DaskRunner` with a `DaskBuilder`
        on its client)."""
        from msdb.tuner.profiler import Profiler

        items = list(build_inputs)
        with Profiler.timeit("build"):
            built = builder.build(items)
        futures: list[RunnerFuture | None] = [None] * len(items)
        to_run = []
        for i, (item, result, args_info) in enumerate(zip(items, built, args_infos)):
            if result.artifact_path is None:
                futures[i] = ReadyRunnerFuture(RunnerResult(None, f"build failed: {result.error_msg}"))
            else:
                to_run.append((i, RunnerInput(result.artifact_path, device_type(item.target), args_info)))
        if to_run:
            with Profiler.timeit("run"):
                for (i, _), future in zip(to_run, self.run([inp for _, inp in to_run])):
                    futures[i] = future
        return built, [f for f in futures if f is not None]

    @staticmethod
    def create(kind: str = "local", *args: Any, **kwargs: Any) -> Runner:
        """A runner by name: "local" (`LocalRunner`, this machine's CPU), "dask" (`DaskRunner`,
        a Dask cluster's workers; its first argument is the client or the scheduler's address)
        or "cuda" (`CudaRunner`, this machine's GPU)."""
        runner: Runner = load_kind(_KINDS, kind, "runner")(*args, **kwargs)
        return runner


_KINDS = {
    "local": ("msdb.tuner.measure.runner", "LocalRunner"),
    "dask": ("msdb.tuner.measure.dask", "DaskRunner"),
    "cuda": ("msdb.tuner.measure.cuda_runner", "CudaRunner"),
}


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
    from msdb.tuner.measure.timing import evaluate, flush_arguments

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

        result = evaluate(run, number, repeat, min_repeat_ms, partial(flush_arguments, arrays) if flush else None)
        return list(result.results), spent[0] / 1e9
    finally:
        loaded.close()


def _preload() -> None:
    import numpy  # noqa: F401  (imported now so that the first candidate does not pay for it)

    from msdb.tuner.codegen import jit

    jit.ensure_runtime()


class WorkerRunner(Runner):
    """What the runners that measure in an isolated worker process share (LocalRunner on the
    CPU, CudaRunner on a GPU): `run` measures `run_one` per input, one at a time and in order,
    as its futures are asked for; `close` ends the worker."""

    _worker: Any = None

    @abc.abstractmethod
    def run_one(self, item: RunnerInput) -> RunnerResult:
        """Measure one candidate; failures are results, never exceptions."""

    def run(self, runner_inputs: Sequence[RunnerInput]) -> list[RunnerFuture]:
        """One future per input, in order; failures are results, never exceptions."""
        items = list(runner_inputs)
        return batch_futures(len(items), ((i, self.run_one(item)) for i, item in enumerate(items)),
                             type(self).__name__)

    def close(self) -> None:
        if self._worker is not None:
            self._worker.close()
            self._worker = None


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

