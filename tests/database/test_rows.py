"""The row helpers every writer shares (`msdb.database.rows`): where the former copies disagreed,
the one behaviour now pinned (a task name another workload has; a source's workload_sha256),
and the API and the importer writing the same workload row."""

from __future__ import annotations

import hashlib
import json
import pathlib

import pytest

from msdb.database import SQLiteDatabase
from msdb.database.location import open_database
from msdb.database.merge import merge_databases
from msdb.database.rows import ensure_task
from msdb.database.tvm_import import import_tvm
from msdb.interop.tvm.payload import decode_workload
from tests.cli.helpers import RECORD_FILE, TEAMS, WORKLOAD_FILE, query

from .helpers import matmul


def _tasks(path: pathlib.Path) -> list[tuple[str, str, str, float]]:
    return query(path, "SELECT m.name, t.name, w.shash, t.weight FROM task t JOIN model m ON m.id = t.model_id "
                       "JOIN workload w ON w.id = t.workload_id ORDER BY t.id")


def test_a_task_name_another_workload_has_gets_its_row_id(tmp_path: pathlib.Path) -> None:
    # SQLiteDatabase.add_task used to repoint the name at the new workload (the first one left
    # the model); the importer's and the merge's copy appended the row id. One rule now: a model
    # keeps every workload it uses.
    path = tmp_path / "t.db"
    db = SQLiteDatabase(path)
    first = db.add_task("bert", "ffn", matmul(), weight=2)
    second = db.add_task("bert", "ffn", matmul("matmul_relu"), weight=3)
    relu = db.commit_workload(matmul("matmul_relu"))
    assert second != first
    assert db.add_task("bert", "ffn", matmul("matmul_relu"), weight=4) == second  # the same workload: its task
    assert db.add_task("bert", "relu", matmul("matmul_relu")) == second  # under any name
    db.close()
    workload_id = query(path, f"SELECT id FROM workload WHERE shash = '{relu.shash}'")[0][0]
    assert _tasks(path) == [("bert", "ffn", matmul_shash(), 2.0), ("bert", f"ffn#{workload_id}", relu.shash, 1.0)]


def matmul_shash() -> str:
    from msdb.records import Workload

    return Workload(matmul()).shash


def test_an_import_and_a_merge_keep_the_weight_a_task_has(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "a.db"
    gmm = decode_workload(json.loads((TEAMS["team_a"] / WORKLOAD_FILE).read_text().splitlines()[0])[1])
    db = open_database(path, create=True)
    try:
        db.add_task("mlp", "layer0", gmm, weight=5)
        import_tvm(db, [TEAMS["team_a"]], model="mlp")  # knows no weights: GMM keeps its task and weight
    finally:
        db.close()
    assert [(t[1], t[3]) for t in _tasks(path)] == [("layer0", 5.0), ("linear", 1.0)]
    other = tmp_path / "b.db"
    db = open_database(other, create=True)
    try:
        db.add_task("mlp", "linear", gmm, weight=7)  # "linear" names another workload in a.db
    finally:
        db.close()
    dest, src = open_database(path), open_database(other)
    try:
        merge_databases(dest, src)
    finally:
        dest.close()
        src.close()
    assert [(t[1], t[3]) for t in _tasks(path)] == [("layer0", 5.0), ("linear", 1.0)]  # GMM had its task


def test_ensure_task_names_a_clash_after_the_workload_row(tmp_path: pathlib.Path) -> None:
    db = SQLiteDatabase(tmp_path / "t.db")
    a, b = db.commit_workload(matmul()), db.commit_workload(matmul("matmul_bias"))
    a_id, b_id = (query(tmp_path / "t.db", f"SELECT id FROM workload WHERE shash = '{w.shash}'")[0][0] for w in (a, b))
    with db.write_transaction() as conn:
        first = ensure_task(conn, "m", a_id, "dense")
        second = ensure_task(conn, "m", b_id, "dense", 2.0, keep_weight=True)
        assert ensure_task(conn, "m", b_id, "other", 9.0, keep_weight=True) == second
        assert ensure_task(conn, "m", a_id, "dense", 3.0) == first
    db.close()
    assert [(t[1], t[3]) for t in _tasks(tmp_path / "t.db")] == [("dense", 3.0), (f"dense#{b_id}", 2.0)]


def test_add_source_records_the_workload_files_sha256(tmp_path: pathlib.Path) -> None:
    # SQLiteDatabase.add_source never set it; the importer's copy did
    db = SQLiteDatabase(tmp_path / "t.db")
    db.add_source("import", "/logs/a", sha256="ab" * 32, workload_sha256="cd" * 32, tvm_version="0.27.0")
    db.close()
    assert query(tmp_path / "t.db", "SELECT kind, location, sha256, workload_sha256, tvm_version FROM source") == [
        ("import", "/logs/a", "ab" * 32, "cd" * 32, "0.27.0")]


def test_the_importer_writes_the_workload_row_the_api_writes(tmp_path: pathlib.Path) -> None:
    line = (TEAMS["team_c"] / WORKLOAD_FILE).read_text().splitlines()[1]
    columns = "shash, ignore_tensor_hash, anchor_hash, flops, script, ir_format, ir_blob"
    api = tmp_path / "api.db"
    db = SQLiteDatabase(api)
    db.commit_workload(decode_workload(json.loads(line)[1]))
    db.close()
    imported = tmp_path / "imported.db"
    db = open_database(imported, create=True)
    try:
        import_tvm(db, [TEAMS["team_c"]])
    finally:
        db.close()
    (row,) = query(api, f"SELECT {columns} FROM workload")
    assert row in query(imported, f"SELECT {columns} FROM workload")
    sha = hashlib.sha256((TEAMS["team_c"] / RECORD_FILE).read_bytes()).hexdigest()
    assert query(imported, "SELECT sha256 FROM source") == [(sha,)]


@pytest.mark.parametrize("leftover", ["", "-wal", "-shm"])
def test_a_refused_import_leaves_no_new_database_behind(tmp_path: pathlib.Path, leftover: str) -> None:
    from msdb.database.tvm_import import ImportAborted, import_logs

    wd = tmp_path / "wd"
    wd.mkdir()
    (wd / WORKLOAD_FILE).write_text((TEAMS["team_c"] / WORKLOAD_FILE).read_text())
    (wd / RECORD_FILE).write_text("not json\n")
    with pytest.raises(ImportAborted):
        import_logs(str(tmp_path / "new.sqlite"), [wd])
    assert not (tmp_path / f"new.sqlite{leftover}").exists()
