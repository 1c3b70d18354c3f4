"""Random samples of tasks' design spaces measured into a database: TenSet's recipe, so a team
builds the training set of a pretrained cost model itself (docs/architecture.md, "Sampling").

Nothing here is a second search or a second measurement path: the tasks are tuned by `tune_tasks`
with the `replay-trace` strategy and no cost model. Each sample is a random design space replayed
with every decision drawn anew and post-processed (`search.replay.apply_trace`, the same step as
the evolutionary search's initial population); a failed replay or post-processor is drawn again
(`ReplayTrace.max_fail_count` misses in a row end the task); samples are distinct by
post-processed module, against the database too. They are built, run and committed through the
tuner's builder, runner and `AddToDatabase`, failures as [1e10], like any tuned candidate.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

if TYPE_CHECKING:
    from msdb.database.base import Database
    from msdb.model.graph import Model
    from msdb.model.tasks import ExtractedTask
    from msdb.records.target import Target
    from msdb.tuner.measure.builder import Builder
    from msdb.tuner.measure.runner import Runner
    from msdb.tuner.task_scheduler.base import RoundFn

__all__ = ["sample_tasks", "sample_models", "model_tasks", "unique_tasks", "SampleResult", "MAX_PER_ROUND"]

logger = logging.getLogger(__name__)

#: Candidates per measurement round at most (msdb tune's default --per-iter): a large
#: `per_workload` is measured in rounds, so progress and commits come as it goes.
MAX_PER_ROUND = 64


@dataclass
class SampleResult:
    """What `sample_tasks` did: tasks sampled, records written (failed ones among them), the
    seed, wall time and the part of it spent building and running, the `tune` source row."""

    tasks: int
    records: int
    failed: int
    seed: int
    wall_s: float
    measure_s: float
    source_id: int | None = None
    per_task: dict[str, int] = field(default_factory=dict)

    @property
    def records_per_s(self) -> float:
        return self.records / self.wall_s if self.wall_s > 0 else 0.0

    def summary(self) -> str:
        """One line: '3 task(s), 12 record(s) written (1 failed), seed 0: 5.1 s wall, 3.2 s
        measuring (build + run), 2.35 records/s'."""
        return (f"{self.tasks} task(s), {self.records} record(s) written ({self.failed} failed), seed {self.seed}: "
                f"{self.wall_s:.1f} s wall, {self.measure_s:.1f} s measuring (build + run), "
                f"{self.records_per_s:.2f} records/s")


def model_tasks(models: Sequence[Model], target: Target, database: Database | None = None, *,
                module_equality: str = "structural") -> list[ExtractedTask]:
    """The tasks `tune_model` tunes for each model (`extract_tasks`, `tunable_tasks`), each
    model and its tasks recorded in `database` first as `tune_model` records them."""
    from msdb.model.tasks import extract_tasks, record_model_tasks
    from msdb.tuner.model_tuning import tunable_tasks

    out: list[ExtractedTask] = []
    for model in models:
        tasks = extract_tasks(model, target, module_equality=module_equality)
        if database is not None:
            record_model_tasks(database, model.name, tasks)
        out.extend(tunable_tasks(tasks))
    return out


def sample_models(models: Sequence[Model], target: Target | str | None, database: Database, per_workload: int, *,
                  module_equality: str = "structural", num_threads: int = 1, **kwargs: Any) -> SampleResult:
    """`sample_tasks` on every task of `models` (`model_tasks`), a workload shared by several
    models sampled once."""
    from msdb.tuner.tune import tuning_target

    resolved = tuning_target(target, num_threads)
    tasks = model_tasks(models, resolved, database, module_equality=module_equality)
    location = kwargs.pop("location", None) or f"sample: {', '.join(m.name for m in models)}"
    return sample_tasks(tasks, resolved, database, per_workload, num_threads=num_threads, location=location,
                        **kwargs)


def unique_tasks(tasks: Sequence[ExtractedTask]) -> list[ExtractedTask]:
    """`tasks` with one per workload (structural hash), the first of each kept."""
    from msdb.hashing import structural_hash

    unique: dict[str, ExtractedTask] = {}
    for task in tasks:
        unique.setdefault(structural_hash(task.mod, "structural"), task)
    return list(unique.values())


def sample_tasks(tasks: Sequence[ExtractedTask], target: Target | str | None, database: Database,
                 per_workload: int, *, seed: int | None = None, num_threads: int = 1,
                 builder: Builder | str | None = None, runner: Runner | str | None = None,
                 location: str | None = None, on_round: RoundFn | None = None) -> SampleResult:
    """Measure `per_workload` distinct random samples of each task's design space on `target`
    (default: this host with `num_threads` cores) and commit every measurement to `database`
    (module docstring). Tasks with the same workload (structural hash) are sampled once. One
    `seed` gives the same samples (None: drawn from the clock, and reported). Without a
    `runner` (or with "local"), CPU candidates are timed cold as `tune_model` times a model's
    tasks (`MODEL_TIMING`), so sampled and tuned records of a model compare."""
    from msdb.records.ranking import ran
    from msdb.tuner.profiler import Profiler
    from msdb.tuner.tune import make_context, tune_tasks, tuning_target

    if per_workload < 1:
        raise ValueError(f"per_workload ({per_workload}) must be >= 1")
    resolved = tuning_target(target, num_threads)
    if seed is None:
        seed = time.time_ns() & 0x7FFFFFFF
    chosen = unique_tasks(tasks)
    if not chosen:
        return SampleResult(0, 0, 0, seed, 0.0, 0.0)
    contexts = [make_context(task.mod, resolved, "post-order-apply", "replay-trace", seed, task.task_name, num_threads)
                for task in chosen]
    failed = 0

    def count(task: Any, candidates: list[Any], results: list[Any]) -> None:
        nonlocal failed
        failed += sum(not ran(result.recorded_run_secs) for result in results)
        if on_round is not None:
            on_round(task, candidates, results)

    own_runner = None
    if runner in (None, "local") and resolved.kind == "llvm":
        from msdb.tuner.measure.runner import Runner
        from msdb.tuner.model_tuning import MODEL_TIMING

        runner = own_runner = Runner.create("local", num_threads=num_threads, **MODEL_TIMING)
    started = time.perf_counter()
    try:
        with Profiler() as profiler:
            result = tune_tasks(contexts, [1.0] * len(contexts), database, per_workload * len(contexts),
                                min(per_workload, MAX_PER_ROUND), max_trials_per_task=per_workload, cost_model=None,
                                task_scheduler="round-robin", builder=builder, runner=runner, seed=seed,
                                on_round=count, check_best=False, pretrain=False,
                                location=location or f"sample: {len(contexts)} task(s)")
    finally:
        if own_runner is not None:
            own_runner.close()
    wall = time.perf_counter() - started
    phases = profiler.get()
    per_task = {task.name: task.trials for task in result.tasks}
    for task in result.tasks:
        if task.trials < per_workload:
            logger.warning("task %r: %d distinct sample(s) measured of %d asked (its design space gave no more)",
                           task.name, task.trials, per_workload)
    return SampleResult(len(contexts), sum(per_task.values()), failed, seed, wall, phases["build"] + phases["run"],
                        result.source_id, per_task)
