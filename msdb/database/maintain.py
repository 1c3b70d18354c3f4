"""Database upkeep: `prune` (keep the best records) and `migrate` (schema upgrade).

`prune(db, top_k)` keeps, for every workload and target, the `top_k` best valid records (TVM's
ranking: ascending mean run time, ties in commit order) and deletes every other record, failed
ones included, in one transaction. Workloads, targets, sources, models and tasks stay (a pruned
workload is still known, and provenance is a log). This is `dump_pruned` in place.

`migrate(location)` brings a database's schema to the newest Alembic revision shipped in
`msdb.schema` (opening any database does that too; this says what it did) and reports the
revision before and after.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import create_engine, delete, func, select, true
from sqlalchemy import exc as sa_exc

from msdb.database import models as M
from msdb.database.errors import DatabaseError, DatabaseOpenError
from msdb.database.location import database_file, open_database, where
from msdb.database.migrate import current_revision, schema_state

if TYPE_CHECKING:
    from msdb.database.sql import SQLiteDatabase

__all__ = ["PruneSummary", "MigrateResult", "prune", "migrate"]


#: How long compacting after a prune waits for other connections (seconds).
COMPACT_WAIT_S = 2.0


@dataclass
class PruneSummary:
    kept: int
    deleted: int
    seconds: float
    #: The database file's size before and after (None: not a file, or not compacted).
    size_before: int | None = None
    size_after: int | None = None
    #: Why the space was not given back, and how to do it (None when it was, or nothing to do).
    space_note: str | None = None

    def line(self) -> str:
        text = f"kept {self.kept} records, deleted {self.deleted}"
        if self.size_before is not None and self.size_after is not None:
            text += f"; file {_size(self.size_before)} -> {_size(self.size_after)}"
        if self.space_note is not None:
            text += f"; {self.space_note}"
        return text + f"; {self.seconds:.2f} s"


def _size(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 100_000 else f"{n / 1e3:.1f} kB"


def prune(db: SQLiteDatabase, *, top_k: int, compact: bool = True) -> PruneSummary:
    """Keep the best `top_k` valid records per workload and target; delete the rest. With
    `compact`, an SQLite file is then compacted (`VACUUM`) so the deleted records' space goes
    back to the disk instead of staying inside the file; when that cannot run (another
    connection is using the file, the disk is full), the summary says so and how to do it."""
    if top_k < 1:
        raise DatabaseError(f"--top-k must be at least 1 (got {top_k}); prune never deletes every record")
    start = time.perf_counter()
    r = M.tuning_record.c
    ranked = (select(r.id, func.row_number().over(partition_by=(r.workload_id, r.target_id),
                                                  order_by=(r.mean_run_secs, r.id)).label("rank"))
              .where(r.is_valid == true()).subquery())
    keep = select(ranked.c.id).where(ranked.c.rank <= top_k)
    with db.write_transaction() as conn:
        before = int(conn.execute(select(func.count()).select_from(M.tuning_record)).scalar() or 0)
        deleted = conn.execute(delete(M.tuning_record).where(r.id.not_in(keep))).rowcount
    summary = PruneSummary(before - deleted, deleted, 0.0)
    if compact:
        _compact(db, summary)
    summary.seconds = time.perf_counter() - start
    return summary


def _compact(db: SQLiteDatabase, summary: PruneSummary) -> None:
    """VACUUM an SQLite file that has free pages, then fold the WAL back into it, so that the
    file shrinks now (summary: sizes, or a note saying how to do it later). Both wait at most
    `COMPACT_WAIT_S` for other connections: compacting is worth a retry, not a hang."""
    import sqlite3

    if db.engine.dialect.name != "sqlite":
        if summary.deleted:
            summary.space_note = "the server keeps the freed space until it vacuums the table (PostgreSQL: VACUUM FULL)"
        return
    path = db.path
    shown = str(path) if path is not None else "DB"
    raw = db.engine.raw_connection()
    try:
        cursor = raw.cursor()
        if int(cursor.execute("PRAGMA freelist_count").fetchone()[0]) == 0:
            return
        size_before = path.stat().st_size if path is not None else None
        waited = int(cursor.execute("PRAGMA busy_timeout").fetchone()[0])
        cursor.execute(f"PRAGMA busy_timeout = {int(COMPACT_WAIT_S * 1000)}")
        try:
            # outside any transaction (the connection is in autocommit; VACUUM refuses one)
            cursor.execute("VACUUM")
            busy = cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
            pages = int(cursor.execute("PRAGMA page_count").fetchone()[0])
            page_size = int(cursor.execute("PRAGMA page_size").fetchone()[0])
        finally:
            cursor.execute(f"PRAGMA busy_timeout = {waited}")
            cursor.close()
    except sqlite3.Error as exc:
        summary.space_note = (f"the file was not compacted ({exc}): run `msdb prune {shown} --top-k N` again, or "
                              f"`sqlite3 {shown} VACUUM`, when nothing else uses it")
        return
    finally:
        raw.close()
    if path is None or size_before is None:
        return
    summary.size_before = size_before
    if busy:  # another connection still reads the old pages: the compacted copy waits in the WAL
        summary.size_after = pages * page_size
        summary.space_note = "the file shrinks to that once the other processes reading it close it"
    else:
        summary.size_after = path.stat().st_size


@dataclass
class MigrateResult:
    location: str
    before: str | None
    after: str | None
    created: bool

    def line(self) -> str:
        if self.created:
            return f"{self.location}: created the schema at revision {self.after}"
        if self.before == self.after:
            return f"{self.location}: schema already at the newest revision {self.after}"
        return f"{self.location}: schema upgraded from revision {self.before} to {self.after}"


def migrate(location: str | os.PathLike[str]) -> MigrateResult:
    """Upgrade the database at `location` (path or URL, which must exist) to the newest schema."""
    text = os.fspath(location)
    before: str | None = None
    empty = False
    path = database_file(text)
    if path is not None and not path.exists():
        raise DatabaseOpenError(f"{path}: no such database file")
    url = f"sqlite:///{path.resolve()}" if path is not None and "://" not in text else text
    try:
        engine = create_engine(url)
        try:
            with engine.connect() as conn:
                _, before, tables = schema_state(conn)
                empty = not tables
        finally:
            engine.dispose()
    except (sa_exc.SQLAlchemyError, ImportError):
        pass  # opening below reports what is wrong with it, naming the location
    db = open_database(text)
    try:
        with db.engine.connect() as conn:
            after = current_revision(conn)
    finally:
        db.close()
    return MigrateResult(where(db), before, after, created=empty)
