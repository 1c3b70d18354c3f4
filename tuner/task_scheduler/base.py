"""The task scheduler (docs/architecture.md, "Tuner"): TVM's `TaskScheduler`, which shares one
trial budget among the tasks of a model, deciding which task's search strategy proposes the next
round, and sends each round through building, running and the measure callbacks (database,
cost model).

Measurement is synchronous here: a round is built (in parallel worker processes) and run (one
candidate at a time, each result committed to the database at once), so a process killed
mid-run loses only the candidates of the round in flight.
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
    from msdb.tuner.measure.runner import RunnerResult

__all__ = ["TaskScheduler", "TaskRecord", "UnknownTaskScheduler", "create", "MeasureFn", "RoundFn", "failed_ms"]

logger = logging.getLogger(__name__)

#: Measures one round: candidates of a task -> one result each (building, running, committing).
MeasureFn = Callable[["TaskRecord", "list[MeasureCandidate]"], "list[RunnerResult]"]
#: Told after each round: (task, candidates, results).
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

    def next_task_id(self) -> int:
        """The task whose strategy proposes the next round, or -1 when every task is done."""
        raise NotImplementedError

    def tune(self, tasks: Sequence[TuneContext], task_weights: Sequence[float], *, max_trials_global: int,
             max_trials_per_task: int, num_trials_per_iter: int, measure: MeasureFn, database: Any = None,
             cost_model: Any = None, on_round: RoundFn | None = None) -> list[TaskRecord]:
        """Tune every task until the global budget is spent or every task is done."""
        from msdb.ir.flops import estimate_flops

        if len(tasks) != len(task_weights):
            raise ValueError(f"{len(tasks)} tasks but {len(task_weights)} task weights")
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
            candidates = task.ctx.search_strategy.generate_measure_candidates()
            if candidates is None:
                self._terminate(task)
                continue
            candidates = candidates[:max_trials_global - total]
            results = measure(task, candidates) if candidates else []
            if cost_model is not None and results:
                cost_model.update(task.ctx, candidates, results)
            task.ctx.search_strategy.notify_runner_results(candidates, results)
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

    def _after_round(self, task_id: int) -> None:
        """Hook after a task's round was measured (the gradient policy records the best)."""

    def _terminate(self, task: TaskRecord) -> None:
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
