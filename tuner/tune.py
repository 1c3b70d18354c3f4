"""Tuning entry points: `tune_tir` for one workload and `tune_tasks` for a model's tasks, TVM's
functions of the same names with msdb's database as the place every measurement lands.

What msdb adds to TVM's loop (commits as it measures, skips and claims what the database knows,
settles claims on Ctrl-C, checks the best kernel, pretrains the cost model): see
docs/architecture.md, "What msdb adds to TVM's tuning loop". Builders, runners and measure
callbacks are TVM's interfaces (`msdb.tuner.measure`): any subclass plugs in.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

from msdb.errors import MsdbError
from msdb.ir.function import IRModule, PrimFunc
from msdb.records.target import Target
from msdb.tuner.context import TuneContext
from msdb.tuner.task_scheduler.base import RoundFn, TaskRecord, TaskScheduler

if TYPE_CHECKING:
    from msdb.database.base import Database
    from msdb.records.record import TuningRecord
    from msdb.records.workload import Workload
    from msdb.tuner.measure.builder import Builder
    from msdb.tuner.measure.callback import MeasureCallback, RecordSink
    from msdb.tuner.measure.runner import Runner

    #: what `measure_callbacks=` takes: None (TVM's default list), a kind name, one callback or a list
    MeasureCallbacks = Sequence[MeasureCallback] | MeasureCallback | str | None

__all__ = ["tune_tir", "tune_tasks", "TuneResult", "TaskResult", "TuneInterrupted", "CommittedSoFar",
           "tuning_statistics", "check_record", "tuning_target", "make_context"]

logger = logging.getLogger(__name__)


@dataclass
class TaskResult:
    """One task's outcome: its trials and the best record that computes the right numbers."""

    name: str
    workload: Workload
    flop: float
    weight: float
    trials: int
    best: TuningRecord | None
    miscomputing: list[str] = field(default_factory=list)  # trace hashes of fast but wrong records
    claimed_elsewhere: int = 0  # candidates skipped because another tuner of the database claimed them
    run_best_us: float | None = None  # this run's fastest valid measurement (`best` may be older, or another's)

    @property
    def best_us(self) -> float | None:
        """The database's best (`best`): any run's or import's record for the target, checked."""
        return self.best.mean_run_secs * 1e6 if self.best is not None else None

    @property
    def gflops(self) -> float | None:
        us = self.best_us
        return self.flop / us / 1e3 if us else None

    @property
    def run_gflops(self) -> float | None:
        us = self.run_best_us
        return self.flop / us / 1e3 if us else None


@dataclass
class TuneResult:
    """What `tune_tir` / `tune_tasks` return: per-task results, in task order."""

    tasks: list[TaskResult]
    source_id: int | None = None

    def table(self) -> str:
        return tuning_statistics(self.tasks)


#: The statistics table's last line: which columns are whose (without it, the database's best, a
#: teammate's record from another machine, was read as this run's result).
STATISTICS_NOTE = ("This run: its own best measurement. DB best: the best record in the database for the target "
                   "(any run or import; what msdb compile uses), checked against the reference interpreter.")


def tuning_statistics(tasks: Sequence[TaskResult]) -> str:
    """TVM's per-task statistics table (ID, Name, FLOP, Weight, Speed, Latency, Weighted
    Latency, Trials, Done) and the total weighted latency, with speed and latency given twice:
    this run's best measurement, and the database's best record (which continues earlier runs
    and may be a teammate's), so that neither is read as the other (`STATISTICS_NOTE`)."""
    header = ("ID", "Name", "FLOP", "Weight", "This run (GFLOPS)", "This run (us)", "DB best (GFLOPS)",
              "DB best (us)", "Weighted DB best (us)", "Trials", "Done")
    rows = []
    total = 0.0
    for i, task in enumerate(tasks):
        us = task.best_us
        weighted = us * task.weight if us is not None else None
        total += weighted or 0.0
        rows.append((str(i), task.name, str(int(task.flop)), f"{task.weight:g}", _cell(task.run_gflops),
                     _cell(task.run_best_us), _cell(task.gflops), _cell(us), _cell(weighted), str(task.trials), "Y"))
    widths = [max(len(h), *(len(r[c]) for r in rows)) if rows else len(h) for c, h in enumerate(header)]
    line = lambda cells: " | ".join(cell.rjust(w) for cell, w in zip(cells, widths))  # noqa: E731
    out = [line(header), "-" * len(line(header)), *(line(r) for r in rows)]
    out.append(f"Total trials: {sum(t.trials for t in tasks)}")
    out.append(f"Total latency (us), DB best: {total:.4f}")
    out.append(STATISTICS_NOTE)
    return "\n".join(out)


def _cell(value: float | None) -> str:
    return f"{value:.4f}" if value else "N/A"


@dataclass
class CommittedSoFar:
    """What an interrupted run committed: measurements per task (in commit order), how many of
    them are failed runs, and the `tune` source row they are under."""

    per_task: dict[str, int] = field(default_factory=dict)
    failed: int = 0
    source_id: int | None = None

    @property
    def records(self) -> int:
        return sum(self.per_task.values())

    def line(self, where: str | None = None) -> str:
        """'5 measurements committed to WHERE (GMM: 5; 1 failed run; source 3)', or 'no
        measurement committed to WHERE'."""
        to = f" to {where}" if where else ""
        if not self.records:
            return f"no measurement committed{to}"
        details = [", ".join(f"{name}: {n}" for name, n in self.per_task.items())]
        if self.failed:
            details.append(f"{self.failed} failed run{'s' if self.failed != 1 else ''}")
        if self.source_id is not None:
            details.append(f"source {self.source_id}")
        plural = "s" if self.records != 1 else ""
        return f"{self.records} measurement{plural} committed{to} ({'; '.join(details)})"


class TuneInterrupted(KeyboardInterrupt):
    """Ctrl-C during tuning, after the round's unmeasured claims were given back; `committed`
    says what this run committed (a KeyboardInterrupt, so code that catches that still does)."""

    def __init__(self, committed: CommittedSoFar) -> None:
        super().__init__(f"tuning interrupted: {committed.line()}")
        self.committed = committed


def tune_tir(mod: IRModule | PrimFunc, target: Target | str | None, database: Database, max_trials_global: int,
             num_trials_per_iter: int = 64, *, space: Any = "post-order-apply", strategy: Any = "evolutionary",
             cost_model: Any = "xgb", seed: int | None = None, task_name: str = "main", num_threads: int = 1,
             builder: Builder | str | None = None, runner: Runner | str | None = None,
             measure_callbacks: MeasureCallbacks = None, on_round: RoundFn | None = None, check_best: bool = True,
             pretrain: bool = True) -> TuneResult:
    """Tune one workload on `target` (default: this host with `num_threads` cores) for at
    most `max_trials_global` measurements; every measurement is committed to `database` (by
    `AddToDatabase`, in the default `measure_callbacks`)."""
    target = tuning_target(target, num_threads)
    context = make_context(mod, target, space, strategy, seed, task_name, num_threads)
    return tune_tasks([context], [1.0], database, max_trials_global, num_trials_per_iter, cost_model=cost_model,
                      task_scheduler="round-robin", builder=builder, runner=runner, seed=seed,
                      measure_callbacks=measure_callbacks, on_round=on_round, check_best=check_best,
                      pretrain=pretrain)


def tune_tasks(tasks: Sequence[TuneContext], task_weights: Sequence[float], database: Database,
               max_trials_global: int, num_trials_per_iter: int = 64, *, max_trials_per_task: int | None = None,
               cost_model: Any = "xgb", task_scheduler: str | TaskScheduler = "gradient",
               builder: Builder | str | None = None, runner: Runner | str | None = None, seed: int | None = None,
               measure_callbacks: MeasureCallbacks = None, on_round: RoundFn | None = None, check_best: bool = True,
               location: str | None = None, pretrain: bool = True) -> TuneResult:
    """Tune `tasks` (each a TuneContext with its module, target, space generator and search
    strategy) sharing `max_trials_global` measurements, weighted by `task_weights`; with
    `pretrain`, a cost model that can learn from the database's records first. `builder` and
    `runner` are objects or kind names (`Builder.create`, `Runner.create`; default: this
    machine's, a GPU runner for cuda targets); the ones made here are closed here."""
    from msdb.tuner.measure.builder import Builder
    from msdb.tuner.measure.callback import RecordSink, callback_list
    from msdb.tuner.measure.runner import Runner
    from msdb.tuner.profiler import Profiler

    if max_trials_global < 1 or num_trials_per_iter < 1:
        raise ValueError(f"max_trials_global ({max_trials_global}) and num_trials_per_iter ({num_trials_per_iter}) "
                         "must be >= 1")
    for task in tasks:
        if task.mod is None or task.target is None:
            raise ValueError(f"task {task.task_name!r} needs a module and a target")
    threads = max((t.num_threads for t in tasks), default=1)
    model = cost_model_of(cost_model, seed=seed, num_threads=threads, target=tasks[0].target if tasks else None)
    if pretrain and tasks:
        _pretrain(model, database, tasks[0].target)
    scheduler = task_scheduler if isinstance(task_scheduler, TaskScheduler) else \
        TaskScheduler.create(task_scheduler, seed=seed or 0)
    # a kind name (or None) is made, and closed, here; an object is the caller's
    own_builder = builder is None or isinstance(builder, str)
    own_runner = runner is None or isinstance(runner, str)
    made_builder = builder if isinstance(builder, Builder) else \
        Builder.create(builder or "local", **_builder_defaults(builder))
    made_runner: Runner | None = None
    try:
        made_runner = runner if isinstance(runner, Runner) else _default_runner(runner, tasks, threads)
        sink = RecordSink(database, location or f"tune: {', '.join(t.task_name or 'main' for t in tasks)}")
        try:
            try:
                for task in tasks:
                    sink.workload(task)
                records = scheduler.tune(
                    list(tasks), list(task_weights), max_trials_global=max_trials_global,
                    max_trials_per_task=max_trials_per_task or max_trials_global,
                    num_trials_per_iter=num_trials_per_iter, builder=made_builder, runner=made_runner,
                    measure_callbacks=callback_list(measure_callbacks), database=database, cost_model=model,
                    on_round=on_round, recorder=sink)
            except KeyboardInterrupt:
                _give_back_claims(scheduler, sink)
                raise
            results = [_task_result(task, database, sink, check_best) for task in records]
        except KeyboardInterrupt:
            raise TuneInterrupted(CommittedSoFar(dict(sink.per_task), sink.failed, sink.source_id)) from None
    finally:
        with Profiler.timeit("build"):
            if own_builder:
                made_builder.close()
        with Profiler.timeit("run"):
            if own_runner and made_runner is not None:
                made_runner.close()
    return TuneResult(results, sink.source_id)


def _builder_defaults(kind: str | None) -> dict[str, Any]:
    """What the builder `tune_tasks` makes by itself gets: this machine's cores, at most 4."""
    return {"max_workers": min(os.cpu_count() or 1, 4)} if kind in (None, "local") else {}


def _default_runner(kind: str | None, tasks: Sequence[TuneContext], threads: int) -> Runner:
    """The runner `tune_tasks` makes: `kind` by name, or this machine's (the GPU for cuda targets:
    a machine without one records [1e10] with the reason)."""
    from msdb.tuner.measure.runner import Runner

    if kind is None and tasks and all(t.target is not None and t.target.kind == "cuda" for t in tasks):
        kind = "cuda"
    return Runner.create(kind or "local", **({"num_threads": threads} if kind in (None, "local") else {}))


def _give_back_claims(scheduler: TaskScheduler, sink: RecordSink) -> None:
    """After Ctrl-C: end every unfinished task's search session as if the round in flight had
    measured just the candidates committed so far. Their claims become permanent, every other
    claim of the session is given back now instead of expiring with its lease
    (`msdb.database.claims`). A database that cannot be written leaves the claims to expire."""
    for task in scheduler.tasks:
        if task.is_terminated:
            continue
        strategy = task.ctx.search_strategy
        done = [(candidate, result) for ctx, candidate, result in sink.in_flight if ctx is task.ctx]
        try:
            if done:
                strategy.notify_runner_results([c for c, _ in done], [r for _, r in done])
            strategy.post_tuning()
        except Exception as exc:  # the interrupt is what the user sees; the claims expire with their lease
            logger.warning("task %r: its unmeasured claims could not be given back (%s: %s); they expire "
                           "within the claim lease", task.name, type(exc).__name__, exc)
        task.is_terminated = True


# ---------------------------------------------------------------- pieces


def tuning_target(target: Target | str | None, num_threads: int) -> Target:
    """The target tuning runs for: `target` as a Target, or this host with `num_threads` cores."""
    if target is None:
        config = Target.host().config
        config["num-cores"] = num_threads
        return Target(config)
    coerced = Target.coerce(target)
    assert coerced is not None
    return coerced


def make_context(mod: IRModule | PrimFunc, target: Target, space: Any, strategy: Any, seed: int | None, task_name: str,
                 num_threads: int) -> TuneContext:
    """One task's TuneContext: `space` and `strategy` by kind name (`create`) or as objects; seed
    None draws one (TVM's -1)."""
    from msdb.tuner.search.base import SearchStrategy
    from msdb.tuner.space.generators.base import SpaceGenerator

    generator = SpaceGenerator.create(space) if isinstance(space, str) else space
    search = SearchStrategy.create(strategy) if isinstance(strategy, str) else strategy
    return TuneContext(mod=IRModule.coerce(mod, "a tuned workload"), target=target, space_generator=generator,
                       search_strategy=search, task_name=task_name, rand_state=-1 if seed is None else seed,
                       num_threads=num_threads)


def cost_model_of(cost_model: Any, *, seed: int | None, num_threads: int, target: Target | None) -> Any:
    """The search's model: a `CostModel` (or None) as given, a kind by name (`CostModel.create`),
    or a trained model's file (`saved.load_cost_model`, refused when it was trained for other
    features or another target kind than `target`)."""
    if cost_model is None or not isinstance(cost_model, (str, os.PathLike)):
        return cost_model
    from msdb.tuner.cost_model.base import CostModel
    from msdb.tuner.cost_model.saved import load_cost_model

    if not names_a_model_file(cost_model):
        return CostModel.create(os.fspath(cost_model), seed=seed or 0, num_threads=num_threads)
    return load_cost_model(cost_model, target=target, seed=seed or 0, num_threads=num_threads)


def names_a_model_file(cost_model: Any) -> bool:
    """Whether `cost_model_of` reads `cost_model` as a trained model's file: a path, not a
    kind's name (a name with no separator or dot that exists nowhere is a kind)."""
    from msdb.tuner.cost_model.base import KINDS

    if not isinstance(cost_model, (str, os.PathLike)):
        return False
    name = os.fspath(cost_model)
    return name not in KINDS and (os.path.exists(name) or os.sep in name or "." in name)


#: Pretraining reads at most this many stored records in all, spread over the workloads (at most
#: 64 and at least 4 each, best to worst): each one is replayed and featurized, so a large shared
#: database must not turn the start of every tuning run into minutes of replays.
PRETRAIN_RECORDS = 1024


def _pretrain(model: Any, database: Database, target: Target | None) -> None:
    """Train a model that supports it (`pretrain(records, target)`) on the database's records
    of the target's kind; a database that cannot list its workloads is skipped."""
    learn = getattr(model, "pretrain", None)
    workloads = getattr(database, "workloads", None)
    if learn is None or workloads is None or target is None:
        return
    from msdb.tuner.profiler import Profiler

    with Profiler.timeit("database"):
        stored = workloads()
    if not stored:
        return
    per_workload = max(4, min(64, PRETRAIN_RECORDS // len(stored)))
    records: list[TuningRecord] = []
    for workload in stored:
        if len(records) >= PRETRAIN_RECORDS:
            break
        with Profiler.timeit("database"):
            records.extend(database.get_top_k(workload, per_workload))
    if records:
        added = learn(records, target, max_per_workload=per_workload)
        logger.info("cost model pretrained on %d stored records of %s targets", added, target.kind)


def _task_result(task: TaskRecord, database: Database, sink: RecordSink, check_best: bool) -> TaskResult:
    from msdb.tuner.profiler import Profiler

    workload = sink.workload(task.ctx)
    best = None
    wrong: list[str] = []
    with Profiler.timeit("database"):
        stored = database.get_top_k(workload, 5, task.ctx.target)
    for record in stored:
        problem = check_record(record) if check_best else None
        if problem is None:
            best = record
            break
        logger.error("task %r: a measured kernel computes wrong numbers, passed over: %s", task.name, problem)
        wrong.append(record.storage_fields()[1])
    lost = getattr(task.ctx.search_strategy, "claims_lost", 0)  # a strategy of one's own may not claim
    run_best = task.best_ms
    return TaskResult(task.name, workload, task.flop, task.task_weight, task.trials, best, wrong, lost,
                      run_best * 1e3 if run_best is not None else None)


def check_record(record: TuningRecord, seed: int = 0, rtol: float = 1e-3, atol: float = 1e-4,
                 scale_atol: float = 1e-4) -> str | None:
    """Why the record's kernel does not compute its workload's numbers (built again and run on
    seeded inputs against msdb's reference interpreter), or None when it does.

    Each float buffer's absolute tolerance is at least `scale_atol` times its largest reference
    value: an algorithm whose intermediates are larger than its outputs (a Winograd conv's
    transforms, `msdb.model.legalize.winograd`) rounds outputs near zero to that scale, whatever
    the loop order; a wrong kernel is off by the scale itself."""
    import numpy as np

    from msdb.ir.interpreter import interpret
    from msdb.schedule.schedule import Schedule
    from msdb.tuner.kernel import build
    from msdb.tuner.measure.runner import random_arguments

    reference = record.workload.mod
    sch = Schedule(reference)
    try:
        record.trace.apply_to_schedule(sch, remove_postproc=False)
        kernel = build(sch.mod, record.target)
    except MsdbError as exc:
        return f"does not build: {exc}"
    from msdb.records.record import ArgInfo

    specs = [(buf.name, info.dtype, info.shape) for buf, info in zip(reference.main.buffers, ArgInfo.from_prim_func(reference))]
    arrays = random_arguments(specs, seed)
    expected = [a.copy() for a in arrays]
    interpret(reference, *expected)
    actual = [a.copy() for a in arrays]
    kernel(*actual)
    for (name, _, _), got, want in zip(specs, actual, expected):
        finite = np.abs(want[np.isfinite(want)]) if want.dtype.kind == "f" else None
        tolerance = max(atol, scale_atol * float(finite.max())) if finite is not None and finite.size else atol
        if not np.allclose(got, want, rtol=rtol, atol=tolerance, equal_nan=True):
            worst = float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64))))
            return f"buffer {name} differs from the reference interpreter (max abs difference {worst:.3g})"
    return None
