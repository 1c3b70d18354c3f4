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
    from msdb.database.sqlite import SQLiteDatabase

__all__ = ["PruneSummary", "MigrateResult", "prune", "migrate"]


@dataclass
class PruneSummary:
    kept: int
    deleted: int
    seconds: float

    def line(self) -> str:
        return f"kept {self.kept} records, deleted {self.deleted}; {self.seconds:.2f} s"


def prune(db: SQLiteDatabase, *, top_k: int) -> PruneSummary:
    """Keep the best `top_k` valid records per workload and target; delete the rest."""
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
    return PruneSummary(before - deleted, deleted, time.perf_counter() - start)


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
