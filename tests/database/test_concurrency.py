"""Many processes write one SQLite file and lose nothing; a writer killed in the middle of a
batch leaves every earlier batch intact and the file usable. Synchronized with a barrier and
a pipe, never with sleeps."""

from __future__ import annotations

import multiprocessing
import os
import signal
import sqlite3
from pathlib import Path

import pytest

from msdb.database import SQLiteDatabase

from .helpers import CPU, matmul, record

PROCESSES = 4
RECORDS_EACH = 2500
BATCH = 50
KILL_BATCH = 2000


def _writer(path: str, proc: int, barrier) -> None:
    barrier.wait()  # all four open the brand-new file and race on schema, workload and target rows
    db = SQLiteDatabase(path)
    workload = db.commit_workload(matmul())
    template = record(workload, [1.0], CPU)
    done = 0
    while done < RECORDS_EACH:
        size = 1 if done % 500 == 0 else min(BATCH, RECORDS_EACH - done)  # single commits and batches
        batch = []
        for i in range(done, done + size):
            run = proc + i / 1e5  # identifies the writer and the record
            batch.append(type(template)(template.trace_text, workload, [run], CPU))
        db.commit_tuning_records(batch)
        done += size
    db.close()


def _killable_writer(path: str, conn) -> None:
    db = SQLiteDatabase(path)
    workload = db.commit_workload(matmul())
    template = record(workload, [1.0], CPU)
    batch_no = 0
    while True:
        batch = [type(template)(template.trace_text, workload, [1 + batch_no + i / 1e5], CPU) for i in range(KILL_BATCH)]
        conn.send(("start", batch_no))
        db.commit_tuning_records(batch)
        conn.send(("done", batch_no))
        batch_no += 1


def _integrity(path: Path) -> str:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        conn.close()


@pytest.mark.slow
def test_four_processes_commit_ten_thousand_records_and_lose_none(tmp_path):
    path = tmp_path / "shared.db"
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(PROCESSES)
    procs = [ctx.Process(target=_writer, args=(str(path), p, barrier)) for p in range(PROCESSES)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=600)
    assert [proc.exitcode for proc in procs] == [0] * PROCESSES
    db = SQLiteDatabase(path)
    assert len(db) == PROCESSES * RECORDS_EACH
    with db.engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT COUNT(*) FROM workload").scalar() == 1
        assert conn.exec_driver_sql("SELECT COUNT(*) FROM target").scalar() == 1
        runs = [row[0] for row in conn.exec_driver_sql("SELECT mean_run_secs FROM tuning_record")]
    expected = sorted(p + i / 1e5 for p in range(PROCESSES) for i in range(RECORDS_EACH))
    assert sorted(runs) == pytest.approx(expected, abs=1e-9)
    db.close()
    assert _integrity(path) == "ok"


@pytest.mark.slow
def test_a_writer_killed_mid_batch_leaves_earlier_batches_intact(tmp_path):
    path = tmp_path / "killed.db"
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_killable_writer, args=(str(path), child))
    proc.start()
    while True:  # kill as soon as the fourth batch has started (three are committed)
        event, batch_no = parent.recv()
        if event == "start" and batch_no == 3:
            os.kill(proc.pid, signal.SIGKILL)
            break
    proc.join()
    assert proc.exitcode == -signal.SIGKILL
    assert _integrity(path) == "ok"
    db = SQLiteDatabase(path)  # opens (WAL recovery) and stays writable
    with db.engine.connect() as conn:
        per_batch = dict(conn.exec_driver_sql(
            "SELECT CAST(mean_run_secs AS INTEGER), COUNT(*) FROM tuning_record GROUP BY 1").all())
    assert per_batch in ({1: KILL_BATCH, 2: KILL_BATCH, 3: KILL_BATCH},
                         {1: KILL_BATCH, 2: KILL_BATCH, 3: KILL_BATCH, 4: KILL_BATCH})
    workload = db.commit_workload(matmul())
    db.commit_tuning_record(record(workload, [1e-3], CPU))
    assert db.query_tuning_record(matmul(), CPU).mean_run_secs == 1e-3
    db.close()


def test_opening_a_new_file_while_another_connection_holds_a_write_lock(tmp_path, monkeypatch):
    """Switching a file to WAL gets "database is locked" at once (SQLite's busy handler is not
    asked) while another connection holds a write lock: several processes opening one new file
    race there. The opener retries; here the lock goes away when it first waits."""
    import time

    path = tmp_path / "new.db"
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # a writer of another process, mid-transaction
    waits: list[float] = []
    real_sleep = time.sleep

    def sleep_releasing_the_lock(seconds: float) -> None:
        waits.append(seconds)
        if other.in_transaction:
            other.execute("ROLLBACK")
        real_sleep(0)

    monkeypatch.setattr(time, "sleep", sleep_releasing_the_lock)
    db = SQLiteDatabase(path)
    try:
        assert waits  # the switch was refused once, then retried
        with db.engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        db.commit_workload(matmul())
    finally:
        db.close()
        other.close()
    assert _integrity(path) == "ok"


def test_a_write_lock_held_past_the_busy_timeout_is_an_error(tmp_path):
    from msdb.database.errors import DatabaseOpenError

    path = tmp_path / "new.db"
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(DatabaseOpenError, match=rf"^{path}: cannot switch to WAL mode: database is locked by "
                                                    r"another connection for over 0.05 s; nothing was changed$"):
            SQLiteDatabase(path, busy_timeout_s=0.05)
    finally:
        other.close()
