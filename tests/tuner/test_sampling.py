"""`sample_tasks`: random design-space samples of a tiny workload, really built and timed, land in
a real SQLite database as valid tuning records; one seed gives the same samples; a workload is
sampled once however many tasks share it; a second run adds new modules only."""

from __future__ import annotations

from pathlib import Path

import pytest

from msdb import SQLiteDatabase
from msdb.ir import zoo
from msdb.model.tasks import ExtractedTask, normalize_mod
from msdb.records import Target
from msdb.records.ranking import ran
from msdb.schedule import Schedule
from msdb.tuner.measure.builder import LocalBuilder
from msdb.tuner.model_tuning import MODEL_TIMING
from msdb.tuner.sampling import sample_tasks
from msdb.tuner.search.replay import module_key
from msdb.tuner.tune import check_record

TARGET = Target("llvm -num-cores=1")


def _task(name: str = "gmm16") -> ExtractedTask:
    return ExtractedTask(name, normalize_mod(zoo.build("GMM", 1, 16, 16, 16)), 1)


def _sample(db: SQLiteDatabase, per_workload: int, seed: int, tasks: list[ExtractedTask] | None = None):
    with LocalBuilder(max_workers=1) as builder:
        return sample_tasks([_task()] if tasks is None else tasks, TARGET, db, per_workload, seed=seed, builder=builder)


def _modules(db: SQLiteDatabase) -> list[str]:
    """The post-processed module of each stored record (its trace replayed), in commit order."""
    keys = []
    for record in db.get_all_tuning_records():
        sch = Schedule(record.workload.mod)
        record.trace.apply_to_schedule(sch, remove_postproc=False)
        keys.append(module_key(sch.mod))
    return keys


@pytest.mark.slow
def test_samples_are_distinct_valid_records_of_one_source(tmp_path: Path) -> None:
    db = SQLiteDatabase(tmp_path / "s.sqlite")
    result = _sample(db, 3, seed=0)
    records = db.get_all_tuning_records()
    assert (result.tasks, result.records, result.per_task) == (1, 3, {"gmm16": 3})
    assert len(records) == 3 and {r.target for r in records} == {TARGET}
    assert len(set(_modules(db))) == 3  # distinct modules
    assert result.failed == sum(not ran(r.run_secs) for r in records)
    for record in records:  # measured cold, as a model's tasks are tuned; right numbers when rebuilt
        assert record.as_json()[0] == record.trace_json  # TVM's record line
        if ran(record.run_secs):
            assert len(record.run_secs) == MODEL_TIMING["repeat"]
            assert check_record(record) is None
    assert result.source_id is not None and 0 < result.measure_s <= result.wall_s
    assert result.summary().startswith("1 task(s), 3 record(s) written (")


@pytest.mark.slow
def test_one_seed_gives_the_same_samples_and_another_seed_others(tmp_path: Path) -> None:
    runs = {}
    for name, seed in (("a", 5), ("b", 5), ("c", 6)):
        db = SQLiteDatabase(tmp_path / f"{name}.sqlite")
        _sample(db, 2, seed=seed)
        runs[name] = [r.trace_json for r in db.get_all_tuning_records()]
        db.close()
    assert runs["a"] == runs["b"] and len(runs["a"]) == 2
    assert runs["c"] != runs["a"]


@pytest.mark.slow
def test_a_shared_workload_is_sampled_once_and_a_second_run_adds_new_modules(tmp_path: Path) -> None:
    db = SQLiteDatabase(tmp_path / "s.sqlite")
    first = _sample(db, 2, seed=1, tasks=[_task("gmm16"), _task("same_gmm16")])
    assert (first.tasks, first.records, first.per_task) == (1, 2, {"gmm16": 2})
    second = _sample(db, 2, seed=1)  # same seed: its first draws are measured already, so it draws on
    assert second.records == 2
    modules = _modules(db)
    assert len(modules) == 4 and len(set(modules)) == 4


def test_no_task_and_a_bad_count(tmp_path: Path) -> None:
    db = SQLiteDatabase(tmp_path / "s.sqlite")
    empty = sample_tasks([], TARGET, db, 2, seed=0)
    assert (empty.tasks, empty.records, empty.seed) == (0, 0, 0)
    with pytest.raises(ValueError, match=r"per_workload \(0\) must be >= 1"):
        sample_tasks([_task()], TARGET, db, 0, seed=0)
    assert db.get_all_tuning_records() == []
