"""Measure callbacks (docs/architecture.md, "Measurement"): TVM's `MeasureCallback`, what happens
after each round is measured, `apply(task_scheduler, task_id, measure_candidates,
builder_results, runner_results)`. `MeasureCallback.create("default")` is TVM's list, in TVM's
order: `AddToDatabase`, `RemoveBuildArtifact`, `UpdateCostModel`. `tune_tir`, `tune_tasks` and
`tune_model` take `measure_callbacks=`: None is the default list, a list of one's own replaces
it (as in TVM: without `AddToDatabase` nothing is committed).

msdb commits each result as it comes, so a killed tuner loses only the candidates still being
measured, and a farm's results land one by one: `apply_one` (msdb's, a no-op by default) is
called for each result as it ends, before `apply` sees the whole round. `AddToDatabase` commits
in `apply_one`; its `apply` confirms the round: a result the tuner did not commit one by one (a
candidate given to `apply` directly) is committed then, none twice.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any, Sequence

from msdb.interrupts import interrupts_held
from msdb.kinds import load_kind
from msdb.tuner.profiler import Profiler

if TYPE_CHECKING:
    from msdb.database.base import Database
    from msdb.records.workload import Workload
    from msdb.tuner.candidate import MeasureCandidate
    from msdb.tuner.context import TuneContext
    from msdb.tuner.measure.builder import BuilderResult
    from msdb.tuner.measure.runner import RunnerResult
    from msdb.tuner.task_scheduler.base import TaskScheduler

__all__ = ["MeasureCallback", "AddToDatabase", "RemoveBuildArtifact", "UpdateCostModel", "RecordSink",
           "default_callbacks", "callback_list"]

logger = logging.getLogger(__name__)


class MeasureCallback:
    """Base class: subclass it and override `apply` (after each round) and/or `apply_one`
    (after each result) to watch or steer tuning: a progress feed, an early stop, a notice."""

    def apply(self, task_scheduler: TaskScheduler, task_id: int, measure_candidates: Sequence[MeasureCandidate],
              builder_results: Sequence[BuilderResult], runner_results: Sequence[RunnerResult]) -> None:
        """After a round of task `task_id` (`task_scheduler.tasks[task_id]`) was measured: one
        builder and one runner result per candidate, in the candidates' order."""

    def apply_one(self, task_scheduler: TaskScheduler, task_id: int, index: int, candidate: MeasureCandidate,
                  builder_result: BuilderResult, runner_result: RunnerResult) -> None:
        """As candidate `index` of the round in flight ends (msdb's, not TVM's; nothing here)."""

    @staticmethod
    def create(kind: str = "default") -> list[MeasureCallback]:
        """A list of callbacks by name: "default", TVM's (AddToDatabase, RemoveBuildArtifact,
        UpdateCostModel)."""
        callbacks: list[MeasureCallback] = load_kind(_KINDS, kind, "measure callback list")()
        return callbacks


def default_callbacks() -> list[MeasureCallback]:
    """TVM's default list, in TVM's order."""
    return [AddToDatabase(), RemoveBuildArtifact(), UpdateCostModel()]


_KINDS = {"default": ("msdb.tuner.measure.callback", "default_callbacks")}


def callback_list(measure_callbacks: Sequence[MeasureCallback] | MeasureCallback | str | None) -> list[MeasureCallback]:
    """`measure_callbacks=` as the tuner takes it: None or a kind name -> `create`, one callback
    or a list -> that list."""
    if measure_callbacks is None:
        return MeasureCallback.create("default")
    if isinstance(measure_callbacks, str):
        return MeasureCallback.create(measure_callbacks)
    if isinstance(measure_callbacks, MeasureCallback):
        return [measure_callbacks]
    return list(measure_callbacks)


class AddToDatabase(MeasureCallback):
    """Commits every result to the task scheduler's database (a failed build or run as
    [1e10]): each as it ends, then the round confirmed (module docstring)."""

    def apply_one(self, task_scheduler: TaskScheduler, task_id: int, index: int, candidate: MeasureCandidate,
                  builder_result: BuilderResult, runner_result: RunnerResult) -> None:
        sink = task_scheduler.recorder
        if sink is not None:
            sink.commit(task_scheduler.tasks[task_id].ctx, candidate, runner_result)

    def apply(self, task_scheduler: TaskScheduler, task_id: int, measure_candidates: Sequence[MeasureCandidate],
              builder_results: Sequence[BuilderResult], runner_results: Sequence[RunnerResult]) -> None:
        sink = task_scheduler.recorder
        if sink is None:
            return
        ctx = task_scheduler.tasks[task_id].ctx
        for candidate, result in zip(measure_candidates, runner_results):
            if not sink.committed(candidate):
                sink.commit(ctx, candidate, result)


class RemoveBuildArtifact(MeasureCallback):
    """Deletes the round's artifacts (object code or cubin and its JSON sidecar)."""

    def apply(self, task_scheduler: TaskScheduler, task_id: int, measure_candidates: Sequence[MeasureCandidate],
              builder_results: Sequence[BuilderResult], runner_results: Sequence[RunnerResult]) -> None:
        with Profiler.timeit("build"):
            for result in builder_results:
                if result.artifact_path is not None:
                    remove_artifact(result.artifact_path)


def remove_artifact(path: str) -> None:
    """Delete a built artifact and its sidecar; one already gone is fine."""
    for name in (path, path + ".json"):
        try:
            os.remove(name)
        except OSError:
            pass


class UpdateCostModel(MeasureCallback):
    """Trains the task scheduler's cost model on the round's results."""

    def apply(self, task_scheduler: TaskScheduler, task_id: int, measure_candidates: Sequence[MeasureCandidate],
              builder_results: Sequence[BuilderResult], runner_results: Sequence[RunnerResult]) -> None:
        model = task_scheduler.cost_model
        if model is None or not runner_results:
            return
        with Profiler.timeit("cost model"):
            model.update(task_scheduler.tasks[task_id].ctx, list(measure_candidates), list(runner_results))


class RecordSink:
    """Commits measured candidates under one `tune` source row (SQL databases) and keeps count:
    what was committed (for `TuneInterrupted`) and the round in flight's committed candidates
    (whose claims Ctrl-C keeps; docs/architecture.md, "What msdb adds to TVM's tuning loop")."""

    def __init__(self, database: Database, location: str) -> None:
        self.database = database
        self.location = location
        self.source_id: int | None = None
        self.workloads: dict[int, Workload] = {}
        self.per_task: dict[str, int] = {}
        self.failed = 0
        self.in_flight: list[tuple[TuneContext, MeasureCandidate, RunnerResult]] = []

    def workload(self, task: TuneContext) -> Workload:
        """The task's stored workload; one new to the database is named after the task (the
        default task name "main" names nothing)."""
        from msdb.records.workload import Workload

        stored = self.workloads.get(id(task))
        if stored is None:
            name = task.task_name if task.task_name and task.task_name != "main" else None
            named = Workload(task.mod, name=name)
            with Profiler.timeit("database"):
                stored = self.workloads[id(task)] = self.database.commit_workload(named)
        return stored

    def start_round(self) -> None:
        self.in_flight = []

    def committed(self, candidate: MeasureCandidate) -> bool:
        """Whether `candidate` was committed in the round in flight."""
        return any(c is candidate for _, c, _ in self.in_flight)

    def commit(self, task: TuneContext, candidate: MeasureCandidate, result: RunnerResult) -> None:
        from msdb.records.ranking import ran
        from msdb.records.record import TuningRecord

        run_secs = result.recorded_run_secs
        record = TuningRecord(candidate.sch.trace, self.workload(task), run_secs, task.target, candidate.args_info)
        name = task.task_name or "main"
        # a Ctrl-C between the commit and the count would make `TuneInterrupted` deny a stored row
        with Profiler.timeit("database"), interrupts_held():
            add_source: Any = getattr(self.database, "add_source", None)
            if add_source is None:
                self.database.commit_tuning_record(record)
            else:
                if self.source_id is None:
                    self.source_id = add_source("tune", self.location)
                self.database.commit_tuning_record(record, source_id=self.source_id)  # type: ignore[call-arg]
            self.per_task[name] = self.per_task.get(name, 0) + 1
            self.failed += not ran(run_secs)
            self.in_flight.append((task, candidate, result))
