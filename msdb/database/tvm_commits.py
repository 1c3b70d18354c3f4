"""What TVM commits through `msdb.tvm.as_tvm_database`, written as ordinary rows of an SQL
database.

`TVMCommits(db, tvm_version=...)` is one TVM session's door into `db`: records go through
`commit_tuning_records` (the one admission rule) under one `source` row of kind `tvm`, made at
the first new record; a record already stored is not stored again. See docs/architecture.md,
"TVM uses msdb".
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from msdb.database.sql import SQLiteDatabase
    from msdb.records import TuningRecord

__all__ = ["TVMCommits", "SOURCE_KIND"]

#: `source.kind` of the records TVM commits through `msdb.tvm`.
SOURCE_KIND = "tvm"


class TVMCommits:
    """Records committed by one TVM session into `db` (see the module docstring)."""

    def __init__(self, db: SQLiteDatabase, *, tvm_version: str | None, location: str | None = None) -> None:
        self.db = db
        self.tvm_version = tvm_version
        self.location = location
        #: the `source` row of this session's records; made with the first record
        self.source_id: int | None = None
        #: the admission rule of this session's commits, kept so that it learns each sketch once
        self.admission = db.new_admission()
        #: records committed and records found already stored, in this session
        self.committed = 0
        self.duplicates = 0

    def commit(self, record: TuningRecord) -> bool:
        """Store `record` (its workload is a token `db.commit_workload` returned) unless it is
        stored already; whether it was stored."""
        if self.source_id is None:
            if self._is_stored(record):
                self.duplicates += 1
                return False
            self.source_id = self.db.add_source(SOURCE_KIND, self.location, tvm_version=self.tvm_version)
        stored = self.db.commit_tuning_records([record], source_id=self.source_id, admission=self.admission,
                                               skip_stored=True)
        if stored:
            self.committed += 1
        else:
            self.duplicates += 1
        return bool(stored)

    def _is_stored(self, record: TuningRecord) -> bool:
        from msdb.database.rows import stored_record_id

        with self.db.engine.connect() as conn:
            workload_id = self.db.stored_workload_id(conn, record.workload)
            target_id = self.db.stored_target_id(conn, record.target)
            return (workload_id is not None and target_id is not None
                    and stored_record_id(conn, workload_id, target_id, record.storage_fields()) is not None)
