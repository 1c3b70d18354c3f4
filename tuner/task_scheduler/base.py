"""The task scheduler (docs/architecture.md, "Tuner"): TVM's `TaskScheduler`, which shares one
trial budget among the tasks of a model, deciding which task's search strategy proposes the next
round, and sends each round through the builder, the runner and the measure callbacks (database,
artifacts, cost model; `msdb.tuner.measure.callback`).

Measurement is synchronous here: a round is built (in parallel worker processes) and run, and
each result goes to the callbacks' `apply_one` as it ends (`AddToDatabase` commits it at once),
so a process killed mid-run loses only the candidates of the round in flight.
"""

from __future__ import annotations

import logging
import math
import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Sequence

from msdb.records.ranking import FAILED_RUN_SECS, is_failure, mean_run_secs
from msdb.kinds import UnknownKind, load_kind

if TYPE_CHECKING:
    from msdb.tuner.candidate import MeasureCandidate
    from msdb.tuner.context import TuneContext
    from msdb.tuner.measure.builder import Builder, BuilderResult
    from msdb.tuner.measure.callback import MeasureCallback, RecordSink
    from msdb.tuner.measure.runner import Runner, RunnerResult

__all__ = ["TaskScheduler", "TaskRecord", "UnknownTaskScheduler", "create", "RoundFn", "failed_ms"]

logger = logging.getLogger(__name__)

#: Told after each round, after the measure callbacks: (task, candidates, results).
RoundFn = Callable[["TaskRecord", "list[MeasureCandidate]", "list[RunnerResult]"], None]


#: what `create` raises for a name msdb does not have (one error class for every kind).
UnknownTaskScheduler = UnknownKind


@dataclass
class TaskRecord:
    """One task's state during tuning (TVM's `TaskRecord`): its context and weight, the FLOPs of
    its workload, and what was measured so far (`latency_ms`: each result's mean run time in ms,
    a failed one at the failure mark, see `failed_ms`)."""

    ctx: TuneContext
    task_weight: float = 1.0
    flop: float = 0.0
    trials: int = 0
    latency_ms: list[float] = field(default_factory=list)
    is_terminated: bool = False

    @property
    def best_ms(self) -> float | None:
        valid = [x for x in self.latency_ms if not failed_ms(x)]
        return min(valid) if valid else None

    @property
    def name(self) -> str:
        return self.ctx.task_name or "main"


class TaskScheduler:
    """Base class: subclass it and override `next_task_id` to plug in a policy of one's own."""

    def __init__(self, seed: int = 0) -> None:
        self.tasks: list[TaskRecord] = []
        self.rng = random.Random(seed)
        # what `tune` was given (TVM's task scheduler holds them too; measure callbacks read them)
        self.builder: Builder | None = None
        self.runner: Runner | None = None
        self.measure_callbacks: list[MeasureCallback] = []
        self.database: Any = None
        self.cost_model: Any = None
        self.recorder: RecordSink | None = None  # msdb's: commits under one source row, counts them

    def next_task_id(self) -> int:
        """The task whose strategy proposes the next round, or -1 when every task is done."""
        raise NotImplementedError

    def tune(self, tasks: Sequence[TuneContext], task_weights: Sequence[float], *, max_trials_global: int,
             max_trials_per_task: int, num_trials_per_iter: int, builder: Builder, runner: Runner,
             measure_callbacks: Sequence[MeasureCallback] | None = None, database: Any = None,
             cost_model: Any = None, on_round: RoundFn | None = None,
             recorder: RecordSink | None = None) -> list[TaskRecord]:
        """Tune every task until the global budget is spent or every task is done. Each round:
        the task's strategy proposes candidates, `measure` builds and runs them, the strategy
        hears the results, then each measure callback's `apply` (None: the default list), then
        `on_round`. `recorder` is where `AddToDatabase` commits (default: one over `database`)."""
        from msdb.ir.flops import estimate_flops
        from msdb.tuner.measure.callback import RecordSink, callback_list
        from msdb.tuner.profiler import Profiler
        from msdb.tuner.search.collector import collector_quiet

        if len(tasks) != len(task_weights):
            raise ValueError(f"{len(tasks)} tasks but {len(task_weights)} task weights")
        self.builder, self.runner = builder, runner
        self.measure_callbacks = callback_list(measure_callbacks)
        self.database, self.cost_model = database, cost_model
        self.recorder = recorder if recorder is not None or database is None else RecordSink(database, "tune")
        self.tasks = [TaskRecord(ctx, float(w), float(estimate_flops(ctx.mod) or 0.0))  # type: ignore[arg-type]
                      for ctx, w in zip(tasks, task_weights)]
        for task in self.tasks:
            spaces = task.ctx.generate_design_space()
            task.ctx.search_strategy.pre_tuning(max_trials_per_task, num_trials_per_iter, spaces, database, cost_model)
        total = 0
        while total < max_trials_global:
            task_id = self.next_task_id()
            if task_id < 0:
                break
            task = self.tasks[task_id]
            with collector_quiet(), Profiler.timeit("search"):
                candidates = task.ctx.search_strategy.generate_measure_candidates()
            if candidates is None:
                self._terminate(task)
                continue
            candidates = candidates[:max_trials_global - total]
            built, results = self.measure(task_id, candidates) if candidates else ([], [])
            task.ctx.search_strategy.notify_runner_results(candidates, results)
            for callback in self.measure_callbacks:
                callback.apply(self, task_id, candidates, built, results)
            task.trials += len(results)
            total += len(results)
            task.latency_ms.extend(_latency_ms(r) for r in results)
            self._after_round(task_id)
            if on_round is not None:
                on_round(task, candidates, results)
            if task.trials >= max_trials_per_task:
                self._terminate(task)
        for task in self.tasks:
            if not task.is_terminated:
                self._terminate(task)
        return self.tasks

    def measure(self, task_id: int, candidates: Sequence[MeasureCandidate]) -> tuple[list[BuilderResult],
                                                                                      list[RunnerResult]]:
        """Build and run a round of task `task_id` through the builder and runner (the runner's
        `build_and_run` and `as_completed`: no question asked of their kinds), each result handed
        to the callbacks' `apply_one` as it ends; one builder and one runner result per
        candidate, in order."""
        from msdb.tuner.measure.builder import BuilderInput
        from msdb.tuner.measure.runner import RunnerResult
        from msdb.tuner.profiler import Profiler

        assert self.builder is not None and self.runner is not None, "measure runs inside tune"
        ctx = self.tasks[task_id].ctx
        if self.recorder is not None:
            self.recorder.start_round()
        inputs = [BuilderInput(c.sch.mod, ctx.target) for c in candidates]
        built, futures = self.runner.build_and_run(self.builder, inputs, [c.args_info for c in candidates])
        results: list[RunnerResult | None] = [None] * len(candidates)
        arriving = self.runner.as_completed(futures)
        while True:
            with Profiler.timeit("run"):
                arrived = next(arriving, None)
            if arrived is None:
                break
            i, result = arrived
            results[i] = result
            for callback in self.measure_callbacks:
                callback.apply_one(self, task_id, i, candidates[i], built[i], result)
        return built, [r if r is not None else RunnerResult(None, "no result") for r in results]

    def _after_round(self, task_id: int) -> None:
        """Hook after a task's round was measured (the gradient policy records the best)."""

    def terminate_task(self, task_id: int) -> None:
        """End task `task_id` now (TVM's `terminate_task`; a measure callback's early stop): it
        gets no more rounds and its search session ends."""
        self._terminate(self.tasks[task_id])

    def _terminate(self, task: TaskRecord) -> None:
        if task.is_terminated:
            return
        task.is_terminated = True
        task.ctx.search_strategy.post_tuning()

    def alive(self) -> list[int]:
        return [i for i, t in enumerate(self.tasks) if not t.is_terminated]

    @staticmethod
    def create(kind: str = "gradient", **kwargs: Any) -> TaskScheduler:
        return create(kind, **kwargs)


def failed_ms(latency_ms: float) -> bool:
    """Whether a `TaskRecord.latency_ms` entry is a failure: `msdb.records.ranking.is_failure`,
    in milliseconds."""
    return is_failure(latency_ms / 1e3)


def _latency_ms(result: RunnerResult) -> float:
    """A result's `latency_ms` entry: the ranking mean of its run times (failures included), in ms;
    the failure mark for an error, no run times or a mean that is not finite."""
    mean = mean_run_secs(result.run_secs) if result.error_msg is None else None
    if mean is None or not math.isfinite(mean) or is_failure(mean):
        mean = FAILED_RUN_SECS
    return mean * 1e3


_KINDS = {
    "round-robin": ("msdb.tuner.task_scheduler.round_robin", "RoundRobin"),
    "gradient": ("msdb.tuner.task_scheduler.gradient", "GradientBased"),
}


def create(kind: str = "gradient", **kwargs: Any) -> TaskScheduler:
    """A scheduler by name: "gradient" (TVM's default) or "round-robin"."""
    scheduler: TaskScheduler = load_kind(_KINDS, kind, "task scheduler")(**kwargs)
    return scheduler
