"""What TVM commits through `msdb.tvm.as_tvm_database`, written as ordinary rows of an SQL
database (docs/architecture.md, "TVM uses msdb").

`TVMCommits(db, tvm_version=...)` is one TVM session's door into `db`: its records go in
through `SQLiteDatabase.commit_tuning_records` (so the one admission rule applies, as to every
commit), under one `source` row of kind `tvm` (this user, this host, TVM's version) made at the
first record that is new. A record already stored (same workload, target, trace and run times:
the dedup key of `msdb import`, `msdb.database.rows.record_keys_of`) is not stored again; the
check is one lookup on the top-k index (`ix_tuning_record_top_k`: workload, target, validity
and mean run time are its leading columns), so a commit never reads a workload's records.

Several TVM tuners may commit into one SQLite file or PostgreSQL database at once: each commit
is its own transaction, as a tuner's are, and the writers queue (docs/architecture.md,
"Databases"). The duplicate check and the insert are two steps, so two processes committing
the same measurement in the same instant could both store it; TVM measures each candidate once
per process, so that takes two processes replaying one log into the same database at once.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from sqlalchemy import bindparam, select

from msdb.database import models as M

if TYPE_CHECKING:
    from msdb.database.sqlite import SQLiteDatabase
    from msdb.records import TuningRecord

__all__ = ["TVMCommits", "SOURCE_KIND"]

#: `source.kind` of the records TVM commits through `msdb.tvm`.
SOURCE_KIND = "tvm"


@functools.lru_cache(maxsize=4)
def _duplicate_statement(no_mean: bool, no_run_secs: bool) -> Any:
    """SELECT the id of a stored record with the dedup key of `:w, :t, :v, :m, :h, :r`; its
    leading conditions are the columns of the top-k index, in order."""
    r = M.tuning_record.c
    conditions = [r.workload_id == bindparam("w"), r.target_id == bindparam("t"), r.is_valid == bindparam("v"),
                  r.mean_run_secs.is_(None) if no_mean else r.mean_run_secs == bindparam("m"),
                  r.trace_hash == bindparam("h"),
                  r.run_secs.is_(None) if no_run_secs else r.run_secs == bindparam("r")]
    return select(r.id).where(*conditions).limit(1)


class TVMCommits:
    """Records committed by one TVM session into `db` (see the module docstring)."""

    def __init__(self, db: SQLiteDatabase, *, tvm_version: str | None, location: str | None = None) -> None:
        self.db = db
        self.tvm_version = tvm_version
        self.location = location
        #: the `source` row of this session's records; made with the first new record
        self.source_id: int | None = None
        #: records committed and records found already stored, in this session
        self.committed = 0
        self.duplicates = 0

    def commit(self, record: TuningRecord) -> bool:
        """Store `record` (its workload is a token `db.commit_workload` returned) unless it is
        stored already; whether it was stored."""
        if self._is_stored(record):
            self.duplicates += 1
            return False
        if self.source_id is None:
            self.source_id = self.db.add_source(SOURCE_KIND, self.location, tvm_version=self.tvm_version)
        self.db.commit_tuning_records([record], source_id=self.source_id)
        self.committed += 1
        return True

    def _is_stored(self, record: TuningRecord) -> bool:
        _text, trace_hash, run_text, mean, valid = record.storage_fields()
        with self.db.engine.connect() as conn:
            workload_id = self.db.stored_workload_id(conn, record.workload)
            target_id = self.db.stored_target_id(conn, record.target)
            if workload_id is None or target_id is None:
                return False
            statement = _duplicate_statement(mean is None, run_text is None)
            params: dict[str, Any] = {"w": workload_id, "t": target_id, "v": valid, "h": trace_hash}
            if mean is not None:
                params["m"] = mean
            if run_text is not None:
                params["r"] = run_text
            return conn.execute(statement, params).first() is not None
