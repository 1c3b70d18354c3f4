"""Ctrl-C (a real SIGINT to this process) at the worst moment of a tune: just after a record's
commit, before the tuner has counted it. What `TuneInterrupted` reports is what the database
holds (docs/architecture.md, "Processes, temporary files and interrupts"); and the hold itself
(`msdb.interrupts`)."""

from __future__ import annotations

import os
import pathlib
import signal
import sqlite3
import threading
from typing import Any

import pytest

from msdb import SQLiteDatabase
from msdb.interrupts import interrupts_held
from msdb.ir import zoo
from msdb.tuner.tune import TuneInterrupted, tune_tir

pytestmark = pytest.mark.skipif(threading.current_thread() is not threading.main_thread(),
                                reason="signals reach the main thread only")


def ctrl_c() -> None:
    os.kill(os.getpid(), signal.SIGINT)


def test_a_ctrl_c_right_after_a_commit_is_counted_with_it(tmp_path: pathlib.Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "t.sqlite"
    commit = SQLiteDatabase.commit_tuning_record
    commits = []

    def interrupted_commit(self: SQLiteDatabase, *args: Any, **kwargs: Any) -> None:
        commit(self, *args, **kwargs)
        commits.append(1)
        if len(commits) == 2:
            ctrl_c()  # the row is in the file; the tuner has not counted it yet

    monkeypatch.setattr(SQLiteDatabase, "commit_tuning_record", interrupted_commit)
    db = SQLiteDatabase(path)
    try:
        with pytest.raises(TuneInterrupted) as caught:
            tune_tir(zoo.build("GMM", 1, 16, 16, 16), "llvm -num-cores=1", db, 8, 4, seed=0,
                     strategy="replay-trace", cost_model="random", task_name="gmm", check_best=False)
    finally:
        db.close()
    conn = sqlite3.connect(path)
    try:
        stored = int(conn.execute("SELECT count(*) FROM tuning_record").fetchone()[0])
    finally:
        conn.close()
    assert caught.value.committed.per_task == {"gmm": 2} and stored == 2
    assert caught.value.committed.line().startswith("2 measurements committed (gmm: 2")


def test_a_held_ctrl_c_is_raised_once_the_block_is_done() -> None:
    done = []
    with pytest.raises(KeyboardInterrupt):
        with interrupts_held():
            ctrl_c()
            done.append("after the signal")
    assert done == ["after the signal"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back
    with interrupts_held():  # nothing came: nothing is raised
        done.append("quiet")
    assert done[-1] == "quiet"


def test_the_blocks_own_error_goes_first_and_the_handler_is_put_back() -> None:
    with pytest.raises(ValueError, match="its own"):
        with interrupts_held():
            ctrl_c()
            raise ValueError("its own")
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_someone_elses_handler_stays_theirs() -> None:
    seen: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: seen.append(signum))
    try:
        with interrupts_held():
            ctrl_c()
        assert seen == [signal.SIGINT]  # their handler ran, at once; nothing was held
    finally:
        signal.signal(signal.SIGINT, previous)


def test_outside_the_main_thread_holding_does_nothing() -> None:
    result: list[object] = []

    def worker() -> None:
        with interrupts_held():
            result.append(signal.getsignal(signal.SIGINT))

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    assert result == [signal.default_int_handler]
