"""Merging msdb databases: the same result as importing every log into one, idempotent, with
provenance kept."""

from __future__ import annotations

import pathlib

import pytest

from msdb.database.errors import DatabaseError
from msdb.database.location import open_database
from msdb.database.merge import merge_databases
from msdb.database.tvm_import import import_tvm
from msdb.ir import zoo
from msdb.records import TuningRecord
from msdb.schedule import Schedule
from tests.cli.helpers import TEAMS, query, record_keys, row_counts, snapshot


def _db_with(path: pathlib.Path, *teams: str, **options) -> pathlib.Path:
    db = open_database(path, create=True)
    try:
        if teams:
            import_tvm(db, [TEAMS[t] for t in teams], **options)
    finally:
        db.close()
    return path


def _merge(dest: pathlib.Path, src: pathlib.Path):
    a, b = open_database(dest, create=True), open_database(src)
    try:
        return merge_databases(a, b)
    finally:
        a.close()
        b.close()


@pytest.fixture(scope="module")
def team_dbs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, pathlib.Path]:
    root = tmp_path_factory.mktemp("merge")
    return {
        "a": _db_with(root / "a.sqlite", "team_a", user="alice", host="lab1", model="mlp"),
        "b": _db_with(root / "b.sqlite", "team_b", user="bob", host="lab2"),
        "c": _db_with(root / "c.sqlite", "team_c", user="carol", host="lab3"),
        "abc": _db_with(root / "abc.sqlite", "team_a", "team_b", "team_c"),
    }


def test_merging_equals_importing_into_one(team_dbs: dict[str, pathlib.Path], tmp_path: pathlib.Path) -> None:
    dest = tmp_path / "team.sqlite"
    summaries = [_merge(dest, team_dbs[name]) for name in "abc"]
    assert [(s.workloads_new, s.workloads_known) for s in summaries] == [(2, 0), (1, 1), (2, 0)]
    assert [s.records_new for s in summaries] == [128, 128, 128]
    counts = row_counts(dest)
    assert (counts["workload"], counts["tuning_record"], counts["source"]) == (5, 384, 3)
    assert record_keys(dest) == record_keys(team_dbs["abc"])  # provenance (file, sha256) included


def test_merge_is_idempotent(team_dbs: dict[str, pathlib.Path], tmp_path: pathlib.Path) -> None:
    dest = tmp_path / "team.sqlite"
    _merge(dest, team_dbs["a"])
    _merge(dest, team_dbs["b"])
    before = snapshot(dest)
    again = [_merge(dest, team_dbs[name]) for name in "ba"]
    assert [(s.records_new, s.records_duplicate, s.workloads_new) for s in again] == [(0, 128, 0), (0, 128, 0)]
    assert snapshot(dest)[1:] == before[1:]
    # and merging the database imported directly adds nothing either
    assert _merge(dest, team_dbs["abc"]).records_new == 128  # only team_c is new


def test_provenance_and_tasks_are_preserved(team_dbs: dict[str, pathlib.Path], tmp_path: pathlib.Path) -> None:
    dest = tmp_path / "team.sqlite"
    _merge(dest, team_dbs["a"])
    _merge(dest, team_dbs["b"])
    sources = query(dest, "SELECT kind, username, host, sha256, created_at FROM source ORDER BY id")
    originals = query(team_dbs["a"], "SELECT kind, username, host, sha256, created_at FROM source") + \
        query(team_dbs["b"], "SELECT kind, username, host, sha256, created_at FROM source")
    assert sources == originals
    assert [row[1:3] for row in sources] == [("alice", "lab1"), ("bob", "lab2")]
    by_user = query(dest, "SELECT s.username, COUNT(*) FROM tuning_record r JOIN source s ON s.id = r.source_id "
                          "GROUP BY s.username ORDER BY s.username")
    assert by_user == [("alice", 128), ("bob", 128)]
    assert query(dest, "SELECT m.name, t.name FROM task t JOIN model m ON m.id = t.model_id ORDER BY t.id") == [
        ("mlp", "GMM"), ("mlp", "linear")]


def test_records_without_provenance_get_a_merge_source(tmp_path: pathlib.Path) -> None:
    src = tmp_path / "tuned.sqlite"
    db = open_database(src, create=True)
    try:
        mod = zoo.workload("matmul")
        workload = db.commit_workload(mod)
        sch = Schedule(mod)
        sch.get_loops(sch.get_block("C"))
        db.commit_tuning_record(TuningRecord(sch.trace, workload, [2e-4], "llvm"))
    finally:
        db.close()
    summary = _merge(tmp_path / "dest.sqlite", src)
    assert (summary.workloads_new, summary.records_new) == (1, 1)
    rows = query(tmp_path / "dest.sqlite", "SELECT s.kind, s.location FROM tuning_record r JOIN source s ON s.id = r.source_id")
    assert rows == [("merge", str(src.resolve()))]


def test_merging_a_database_into_itself_is_refused(team_dbs: dict[str, pathlib.Path]) -> None:
    with pytest.raises(DatabaseError, match="into itself"):
        _merge(team_dbs["a"], team_dbs["a"])
