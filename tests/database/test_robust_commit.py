"""In the library: a Ctrl-C (a real SIGINT to this process) at each moment of
an import leaves the database either untouched or committed, and says which; a new file
appears only whole (docs/architecture.md, "Processes, temporary files and interrupts")."""

from __future__ import annotations

import os
import pathlib
import signal
import sqlite3
import threading
from typing import Any

import pytest
from sqlalchemy import event

from msdb.database import tvm_import
from msdb.database.location import open_database
from msdb.database.sql import SQLiteDatabase
from msdb.database.tvm_import import import_logs, import_tvm
from tests.cli.helpers import TEAMS

pytestmark = pytest.mark.skipif(threading.current_thread() is not threading.main_thread(),
                                reason="signals reach the main thread only")


def ctrl_c() -> None:
    os.kill(os.getpid(), signal.SIGINT)


def records(db: pathlib.Path) -> int:
    conn = sqlite3.connect(db)
    try:
        return int(conn.execute("SELECT count(*) FROM tuning_record").fetchone()[0])
    finally:
        conn.close()


def committed(interrupt: KeyboardInterrupt) -> Any:
    """The summary an interrupt after the commit carries (`ImportInterrupted`)."""
    summary = getattr(interrupt, "summary", None)
    assert summary is not None and summary.committed, f"{type(interrupt).__name__} does not say what was committed"
    return summary


@pytest.fixture
def existing(tmp_path: pathlib.Path) -> pathlib.Path:
    path = tmp_path / "db.sqlite"
    import_logs(str(path), [TEAMS["team_c"]])
    return path


def test_ctrl_c_while_reading_writes_nothing(existing: pathlib.Path, tmp_path: pathlib.Path) -> None:
    def progress(phase: str, done: int, total: int) -> None:
        ctrl_c()

    with pytest.raises(KeyboardInterrupt) as caught:
        import_logs(str(existing), [TEAMS["team_a"]], progress=progress)
    assert type(caught.value) is KeyboardInterrupt
    assert records(existing) == 128
    with pytest.raises(KeyboardInterrupt) as caught:
        import_logs(str(tmp_path / "new.sqlite"), [TEAMS["team_a"]], progress=progress)
    assert type(caught.value) is KeyboardInterrupt
    assert sorted(p.name for p in tmp_path.iterdir()) == ["db.sqlite"]


@pytest.mark.parametrize("new_file", [False, True], ids=["existing-db", "new-file"])
def test_ctrl_c_after_the_commit_reports_what_was_committed(existing: pathlib.Path, tmp_path: pathlib.Path,
                                                            monkeypatch: pytest.MonkeyPatch, new_file: bool) -> None:
    """The SIGINT arrives while the database is closed after the commit (SQLite then folds the
    WAL into the file, the slow moment after a big import): it waits until the import is done."""
    db = tmp_path / "new.sqlite" if new_file else existing
    close = SQLiteDatabase.close

    def interrupted_close(self: SQLiteDatabase) -> None:
        ctrl_c()
        close(self)

    monkeypatch.setattr(SQLiteDatabase, "close", interrupted_close)
    with pytest.raises(KeyboardInterrupt) as caught:
        import_logs(str(db), [TEAMS["team_a"]])
    monkeypatch.undo()
    summary = committed(caught.value)
    assert summary.records_new == 128
    assert records(db) == 128 + (0 if new_file else 128)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging folder left


def test_ctrl_c_during_the_commit_waits_for_it(existing: pathlib.Path) -> None:
    db = open_database(str(existing))
    fired: list[Any] = []

    @event.listens_for(db.engine, "commit")
    def on_commit(conn: Any) -> None:  # just before SQLite's COMMIT
        fired.append(conn)
        ctrl_c()

    try:
        with pytest.raises(KeyboardInterrupt) as caught:
            import_tvm(db, [TEAMS["team_a"]])
    finally:
        db.close()
    assert fired and committed(caught.value).records_new == 128
    assert records(existing) == 256


def test_a_new_file_appears_only_whole(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """While an import into a new file runs, nothing has its name; the file appears with all its
    records or not at all."""
    db = tmp_path / "new.sqlite"
    seen: list[bool] = []
    original = tvm_import.ImportWriter.records

    def watching(self: Any, wd: Any, rows: Any) -> None:
        seen.append(db.exists())
        original(self, wd, rows)

    monkeypatch.setattr(tvm_import.ImportWriter, "records", watching)
    import_logs(str(db), [TEAMS["team_a"]])
    assert seen and not any(seen)
    assert records(db) == 128
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new.sqlite"]
