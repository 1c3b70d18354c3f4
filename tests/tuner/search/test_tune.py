"""tune_tir / tune_tasks with a user-written space: every measurement lands in the database,
a resumed run measures nothing twice, a seed gives one run, failures are records."""

from __future__ import annotations

from pathlib import Path

import pytest

from msdb import SQLiteDatabase
from msdb.records import Target
from msdb.schedule import Schedule
from msdb.tuner.context import TuneContext
from msdb.tuner.search import SearchStrategy, UnknownSearchStrategy
from msdb.tuner.search.replay import module_key
from msdb.tuner.task_scheduler import GradientBased, RoundRobin, TaskScheduler, UnknownTaskScheduler
from msdb.tuner.tune import check_record, tune_tasks
from tests.tuner.search._fakes import SMALL_GMM, FakeBuilder, FakeRunner, TiledSpace

TARGET = Target("llvm -num-cores=1")


def _context(strategy: str, seed: int, name: str = "gmm") -> TuneContext:
    kwargs = {"population_size": 16, "init_min_unmeasured": 4} if strategy == "evolutionary" else {}
    return TuneContext(mod=SMALL_GMM, target=TARGET, space_generator=TiledSpace(),
                       search_strategy=SearchStrategy.create(strategy, **kwargs), task_name=name, rand_state=seed)


def _tune(db: SQLiteDatabase, strategy: str, trials: int, seed: int = 1, **kwargs: object):
    return tune_tasks([_context(strategy, seed)], [1.0], db, trials, 4, cost_model=None,
                      task_scheduler="round-robin", seed=seed, **kwargs)  # type: ignore[arg-type]


def _traces(db: SQLiteDatabase) -> list[str]:
    return [r.storage_fields()[0] for r in db.get_all_tuning_records()]


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["replay-trace", "evolutionary"])
def test_every_measurement_is_a_record_that_replays_builds_and_computes(tmp_path: Path, strategy: str) -> None:
    db = SQLiteDatabase(tmp_path / "t.sqlite")
    result = _tune(db, strategy, 6)
    records = db.get_all_tuning_records()
    assert len(records) == result.tasks[0].trials == 6
    assert {r.target for r in records} == {TARGET}
    for record in records:
        assert record.is_valid
        assert check_record(record) is None  # real build, compared with the reference interpreter
    best = result.tasks[0].best
    assert best is not None and best.mean_run_secs == min(r.mean_run_secs for r in records)
    assert "gmm" in result.table() and "Total trials: 6" in result.table()


def test_records_come_from_one_tune_source(tmp_path: Path) -> None:
    from sqlalchemy import text

    db = SQLiteDatabase(tmp_path / "t.sqlite")
    result = _tune(db, "replay-trace", 3, builder=FakeBuilder(), runner=FakeRunner())
    with db.engine.connect() as conn:
        sources = conn.execute(text("SELECT id, kind, msdb_version, host FROM source")).all()
        used = conn.execute(text("SELECT DISTINCT source_id FROM tuning_record")).all()
    assert [(s.kind, s.id) for s in sources] == [("tune", result.source_id)]
    assert sources[0].msdb_version and sources[0].host
    assert used == [(result.source_id,)]


def test_a_resumed_run_measures_no_module_twice(tmp_path: Path) -> None:
    db = SQLiteDatabase(tmp_path / "t.sqlite")
    _tune(db, "replay-trace", 5, seed=1, builder=FakeBuilder(), runner=FakeRunner())
    _tune(db, "replay-trace", 5, seed=1, builder=FakeBuilder(), runner=FakeRunner())  # same seed: same proposals
    _tune(db, "evolutionary", 5, seed=2, builder=FakeBuilder(), runner=FakeRunner())
    keys = []
    for record in db.get_all_tuning_records():
        sch = Schedule(record.workload.mod)
        record.trace.apply_to_schedule(sch)
        keys.append(module_key(sch.mod))
    assert len(keys) >= 10
    assert len(set(keys)) == len(keys)


@pytest.mark.slow
def test_the_same_seed_and_costs_give_the_same_candidates(tmp_path: Path) -> None:
    runs = []
    for name in ("a", "b"):
        db = SQLiteDatabase(tmp_path / f"{name}.sqlite")
        _tune(db, "evolutionary", 8, seed=7, builder=FakeBuilder(), runner=FakeRunner())
        runs.append(_traces(db))
    assert runs[0] == runs[1] and len(runs[0]) == 8
    db = SQLiteDatabase(tmp_path / "c.sqlite")
    _tune(db, "evolutionary", 8, seed=8, builder=FakeBuilder(), runner=FakeRunner())
    assert _traces(db) != runs[0]


def test_a_failed_build_is_a_failed_record_and_tuning_goes_on(tmp_path: Path) -> None:
    db = SQLiteDatabase(tmp_path / "t.sqlite")
    result = _tune(db, "replay-trace", 6, builder=_FailEveryOther(), runner=FakeRunner())
    runs = [r.run_secs for r in db.get_all_tuning_records()]
    assert len(runs) == 6 == result.tasks[0].trials
    assert runs.count((1e10,)) == 3
    assert result.tasks[0].best is not None and result.tasks[0].best.is_valid


class _FailEveryOther(FakeBuilder):
    def build(self, inputs):  # type: ignore[no-untyped-def]
        results = super().build(inputs)
        from msdb.tuner.measure.builder import BuilderResult

        return [r if (len(self.built) - len(results) + i) % 2 == 0 else BuilderResult(None, "fake failure")
                for i, r in enumerate(results)]


def test_tasks_share_the_global_budget(tmp_path: Path) -> None:
    db = SQLiteDatabase(tmp_path / "t.sqlite")
    from msdb.ir import zoo

    other = TuneContext(mod=zoo.build("GMM", 1, 16, 32, 16), target=TARGET, space_generator=TiledSpace(),
                        search_strategy=SearchStrategy.create("replay-trace"), task_name="small", rand_state=3)
    result = tune_tasks([_context("replay-trace", 1), other], [1.0, 2.0], db, 12, 4, cost_model=None,
                        task_scheduler="gradient", seed=0, builder=FakeBuilder(), runner=FakeRunner())
    assert sum(t.trials for t in result.tasks) == 12
    assert all(t.trials >= 4 for t in result.tasks)  # the first round robin serves every task
    assert len(db) == 12


def test_gradient_scheduler_prefers_the_task_with_more_to_gain() -> None:
    scheduler = GradientBased(alpha=0.2, window_size=3, seed=0)
    scheduler.tasks = [_Task(1.0), _Task(1.0)]
    assert [scheduler.next_task_id(), scheduler.next_task_id()] == [0, 1]  # round robin first
    scheduler._history = {0: [10.0, 9.0, 8.0, 7.0], 1: [1.0, 1.0, 1.0, 1.0]}
    assert scheduler.next_task_id() == 0
    scheduler.tasks[1].task_weight = 100.0
    assert scheduler.next_task_id() == 1
    scheduler.tasks[0].is_terminated = scheduler.tasks[1].is_terminated = True
    assert scheduler.next_task_id() == -1


def test_schedulers_judge_failures_by_the_ranking_rule() -> None:
    from msdb.records.ranking import FAILED_RUN_SECS
    from msdb.tuner.measure.runner import RunnerResult
    from msdb.tuner.task_scheduler.base import TaskRecord, _latency_ms, failed_ms

    results = [RunnerResult([0.002, 0.004], None), RunnerResult([FAILED_RUN_SECS], "build failed"),
               RunnerResult([], None), RunnerResult([float("nan")], None), RunnerResult([FAILED_RUN_SECS], None)]
    latencies = [_latency_ms(r) for r in results]
    assert latencies[0] == pytest.approx(3.0)
    assert [failed_ms(x) for x in latencies] == [False, True, True, True, True]
    task = TaskRecord(ctx=None, latency_ms=latencies)  # type: ignore[arg-type]
    assert task.best_ms == pytest.approx(3.0)
    assert TaskRecord(ctx=None, latency_ms=latencies[1:]).best_ms is None  # type: ignore[arg-type]
    scheduler = GradientBased()
    scheduler.tasks = [_Task(1.0)]
    scheduler._history = {0: [latencies[1]]}
    assert scheduler._gradient(0) == -1e9  # no valid measurement yet
    scheduler._history = {0: [latencies[0]]}
    assert scheduler._gradient(0) > 0


def test_round_robin_skips_finished_tasks() -> None:
    scheduler = RoundRobin()
    scheduler.tasks = [_Task(1.0), _Task(1.0), _Task(1.0)]
    scheduler.tasks[1].is_terminated = True
    assert [scheduler.next_task_id() for _ in range(4)] == [0, 2, 0, 2]


class _Task:
    def __init__(self, weight: float) -> None:
        self.task_weight = weight
        self.is_terminated = False


def test_unknown_kinds_are_one_clear_error() -> None:
    with pytest.raises(UnknownSearchStrategy, match="unknown search strategy 'annealing'; known: evolutionary"):
        SearchStrategy.create("annealing")
    with pytest.raises(UnknownTaskScheduler, match="unknown task scheduler 'fifo'; known: round-robin, gradient"):
        TaskScheduler.create("fifo")


def test_bad_budgets_are_refused_before_anything_is_written(tmp_path: Path) -> None:
    db = SQLiteDatabase(tmp_path / "t.sqlite")
    with pytest.raises(ValueError, match="max_trials_global"):
        _tune(db, "replay-trace", 0)
    assert len(db) == 0 and db.workloads() == []


def test_check_record_reports_a_trace_that_does_not_apply(tmp_path: Path) -> None:
    from msdb.ir import zoo
    from msdb.records import TuningRecord

    db = SQLiteDatabase(tmp_path / "t.sqlite")
    _tune(db, "replay-trace", 1, builder=FakeBuilder(), runner=FakeRunner())
    record = db.get_all_tuning_records()[0]
    other = db.commit_workload(zoo.build("SFM", 8, 16))  # softmax: no block "Z" for the trace
    wrong = TuningRecord(record.trace, other, [1e-5], TARGET)
    problem = check_record(wrong)
    assert problem is not None and problem.startswith("does not build")
