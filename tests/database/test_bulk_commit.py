"""SQLite bulk commits: the fast insert path stores exactly what the record API says (every
column, NULLs as NULL, commit order), arg infos are never mixed up between records, a failing
batch leaves nothing behind, the larger page cache lasts only for the transaction, and an
older database loses the write-only trace-hash index on open."""

from __future__ import annotations

import math
import sqlite3
from pathlib import Path

import pytest
from alembic import command
from sqlalchemy import create_engine, inspect

import msdb.database.bulk as bulk_module
import msdb.database.engine as engine_module
from msdb.database import SQLiteDatabase, WorkloadNotCommitted
from msdb.database.migrate import alembic_config, current_revision
from msdb.records import ArgInfo, TuningRecord
from msdb.records.record import trace_json_hash
from msdb.schedule.tvm_json import dumps, format_float, loads
from msdb.schema import HEAD

from .helpers import CPU, GPU, matmul, postproc_only_trace, split_trace

COLUMNS = "workload_id, target_id, source_id, trace, trace_hash, run_secs, mean_run_secs, is_valid, args_info"
RUN_SECS = (None, [], [2.5e-4], [1e10], [1e10, 3e-4], [1e-3, 2e-3, 4e-3], loads("[0.2]"),
            [0.0], [7], [1.25e-5, 1e10])


def _raw_rows(path: Path) -> list[tuple]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(f"SELECT {COLUMNS}, typeof(source_id), typeof(run_secs), typeof(mean_run_secs), "
                            "typeof(args_info) FROM tuning_record ORDER BY id").fetchall()
    finally:
        conn.close()


def _batch(workload, count: int) -> list[TuningRecord]:
    """`count` records cycling through every form a record can take: trace as a `Trace`, as
    TVM's JSON list and as text (valid and postproc-only), every shape of run times, targets
    and none, arg infos as objects, as JSON and none."""
    mod = workload.mod
    traces = [split_trace(mod, inner) for inner in (1, 2, 4, 8)]
    forms = [traces[0], traces[1].as_json(), dumps(traces[2].as_json()), dumps(postproc_only_trace(mod).as_json()),
             traces[3]]
    targets = (CPU, GPU, None)
    out = []
    for i in range(count):
        args = (None if i % 3 == 0 else [ArgInfo("float32", (16, 16 + i % 4))] * 3 if i % 3 == 1
                else [["TENSOR", "float16", [i % 5 + 1, 16]]])
        out.append(TuningRecord(forms[i % len(forms)], workload, RUN_SECS[i % len(RUN_SECS)], targets[i % 3], args))
    return out


def _expected(record: TuningRecord) -> tuple:
    """The column values the record API defines, on a fresh copy (nothing cached by a commit)."""
    fresh = TuningRecord(record.trace_text, record.workload, record.run_secs, record.target, record.args_info_json())
    run_secs = fresh.run_secs
    run_text = None if run_secs is None else "[" + ",".join(map(format_float, run_secs)) + "]"
    mean = math.fsum(run_secs) / len(run_secs) if run_secs else None
    args = fresh.args_info_json()
    return (fresh.trace_text, trace_json_hash(fresh.trace_text), run_text, mean, int(fresh.is_valid),
            None if args is None else dumps(args))


@pytest.mark.parametrize("count", [1, 99, 257, 1000])
def test_stored_columns_are_what_the_record_api_says(tmp_path, count):
    db = SQLiteDatabase(tmp_path / "t.db")
    workload = db.commit_workload(matmul())
    records = _batch(workload, count)
    source = db.add_source("import", "log.json")
    assert db.commit_tuning_records(records, source_id=source if count % 2 else None) == count
    rows = _raw_rows(tmp_path / "t.db")
    db.close()
    assert len(rows) == count
    for record, row in zip(records, rows):  # ORDER BY id: the order the records were given in
        (_, _, source_id, trace, trace_hash, run_secs, mean, valid, args, source_type, run_type, mean_type,
         args_type) = row
        assert (trace, trace_hash, run_secs, mean, valid, args) == _expected(record)
        assert source_id == (source if count % 2 else None)
        # NULL is stored as NULL, never as the empty string the insert binds in its place
        assert (source_type == "null") == (source_id is None)
        assert (run_type == "null") == (record.run_secs is None)
        assert (mean_type == "null") == (not record.run_secs)
        assert (args_type == "null") == (record.args_info_json() is None)
        assert valid in (0, 1)


def test_records_read_back_rank_and_validate_as_committed(tmp_path):
    db = SQLiteDatabase(tmp_path / "t.db")
    workload = db.commit_workload(matmul())
    records = _batch(workload, 300)
    db.commit_tuning_records(records)
    back = db.get_all_tuning_records()
    assert [r.trace_text for r in back] == [r.trace_text for r in records]
    assert [r.is_valid for r in back] == [r.is_valid for r in records]
    assert [r.run_secs for r in back] == [r.run_secs for r in records]
    valid = [r for r in records if r.is_valid and r.target == CPU]
    best = min(valid, key=lambda r: r.mean_run_secs)
    top = db.get_top_k(matmul(), 1, CPU)
    assert top[0].mean_run_secs == best.mean_run_secs
    db.close()


def test_arg_infos_are_never_mixed_up_between_records(tmp_path):
    # records whose arg infos are ArgInfo objects get a fresh JSON list on every call, so a
    # cache keyed by that list's id() could hand one record another's arg infos
    db = SQLiteDatabase(tmp_path / "t.db")
    workload = db.commit_workload(matmul())
    text = dumps(split_trace(workload.mod, 4).as_json())
    records = [TuningRecord(text, workload, [1e-3], CPU, [ArgInfo("float32", (i, i + 1))]) for i in range(1, 400)]
    db.commit_tuning_records(records)
    stored = [row[8] for row in _raw_rows(tmp_path / "t.db")]
    assert stored == [dumps([["TENSOR", "float32", [i, i + 1]]]) for i in range(1, 400)]
    db.close()


def test_a_failing_batch_leaves_nothing_and_the_database_usable(tmp_path):
    db = SQLiteDatabase(tmp_path / "t.db")
    workload = db.commit_workload(matmul())
    records = _batch(workload, 1000)
    with pytest.raises(sqlite3.IntegrityError, match="FOREIGN KEY"):
        db.commit_tuning_records(records, source_id=12345)  # no such source: the first INSERT fails
    stranger = TuningRecord(records[0].trace_text, matmul(n=32), [1e-3], CPU)
    with pytest.raises(WorkloadNotCommitted):
        db.commit_tuning_records(records[:500] + [stranger] + records[500:])
    assert len(db) == 0
    assert db.commit_tuning_records(records) == 1000
    assert len(db) == 1000
    db.close()


@pytest.mark.slow
def test_the_larger_page_cache_lasts_only_for_the_bulk_transaction(tmp_path, monkeypatch):
    db = SQLiteDatabase(tmp_path / "t.db")
    workload = db.commit_workload(matmul())
    seen: list[int] = []
    insert = bulk_module._RECORD_INSERT

    def spy(conn, params):
        seen.append(conn.exec_driver_sql("PRAGMA cache_size").scalar())
        insert(conn, params)

    monkeypatch.setattr(bulk_module, "_RECORD_INSERT", spy)
    db.commit_tuning_records(_batch(workload, 20))
    db.commit_tuning_records(_batch(workload, 20_000))
    assert seen == [-engine_module.CACHE_KIB, -bulk_module.bulk_cache_kib(20_000)]
    assert bulk_module.bulk_cache_kib(20_000) > engine_module.CACHE_KIB
    assert bulk_module.bulk_cache_kib(10**7) == bulk_module.BULK_CACHE_KIB
    with db.engine.connect() as conn:  # the pooled connection the bulk commit used
        assert conn.exec_driver_sql("PRAGMA cache_size").scalar() == -engine_module.CACHE_KIB
    db.close()


def test_the_generic_insert_path_stores_the_same_rows(tmp_path):
    # a server database (named or pyformat parameters) takes the plain executemany path;
    # pysqlite with named parameters exercises it here
    fast = SQLiteDatabase(tmp_path / "fast.db")
    generic = SQLiteDatabase(tmp_path / "generic.db")
    generic._engine.dispose()
    generic._engine = create_engine(generic.url, paramstyle="named")
    engine_module.install_sqlite_settings(generic._engine, engine_module.BUSY_TIMEOUT_S)
    for db in (fast, generic):
        workload = db.commit_workload(matmul())
        db.commit_tuning_records(_batch(workload, 257), source_id=db.add_source("tune"))
        db.close()
    assert _raw_rows(tmp_path / "fast.db") == _raw_rows(tmp_path / "generic.db")


def test_an_older_database_loses_the_trace_hash_index_on_open(tmp_path):
    path = tmp_path / "t.db"
    db = SQLiteDatabase(path)
    workload = db.commit_workload(matmul())
    db.commit_tuning_records(_batch(workload, 10))
    with db.engine.begin() as conn:
        command.downgrade(alembic_config(conn), "2841e53b42af")
    with db.engine.connect() as conn:
        assert "ix_tuning_record_trace_hash" in {ix["name"] for ix in inspect(conn).get_indexes("tuning_record")}
    db.close()
    reopened = SQLiteDatabase(path)
    with reopened.engine.connect() as conn:
        assert current_revision(conn) == HEAD
        assert {ix["name"] for ix in inspect(conn).get_indexes("tuning_record")} == {"ix_tuning_record_top_k"}
    assert len(reopened) == 10
    reopened.close()


def test_skip_stored_stores_each_measurement_once(tmp_path):
    db = SQLiteDatabase(tmp_path / "t.db")
    check_skip_stored(db)
    db.close()


def check_skip_stored(db) -> None:
    """`skip_stored=True` (the door TVM's commits take): a record stored already, or a later
    copy in the same batch, is left out; the count is of the records stored."""
    workload = db.commit_workload(matmul())
    records = _batch(workload, 60)
    expected = len({(r.trace_text, r.run_secs, r.target) for r in records})
    assert db.commit_tuning_records(records + records[:7], skip_stored=True) == expected
    assert len(db) == expected
    again = [TuningRecord(r.trace_text, workload, r.run_secs, r.target, r.args_info_json()) for r in records]
    new = TuningRecord(records[2].trace_text, workload, [9e-4], CPU)
    other_target = TuningRecord(records[2].trace_text, workload, records[2].run_secs, {"kind": "llvm", "mcpu": "znver3"})
    assert db.commit_tuning_records(again + [new, other_target], skip_stored=True) == 2
    assert len(db) == expected + 2
    assert db.commit_tuning_records(again[:3]) == 3  # without it, every record is stored
    assert len(db) == expected + 5
