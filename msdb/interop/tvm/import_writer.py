"""Phase 2 of `msdb import`: parsed work_dirs into database rows, inside one write transaction.

`ImportWriter` receives what `msdb.interop.tvm.import_reader.WorkDirReader` found, work_dir by work_dir:
first its workloads (`workloads`), then its record rows in batches (`records`), then the end
of the work_dir (`done`, when the record file's sha256 is known). It can therefore run after
the whole import was read (`commit_import`: the two-phase import that `--verify` needs), or
while the lines are still being parsed in worker processes (`import_tvm`'s streaming import:
SQLite's share of the work then overlaps the parsing; a bad line rolls the transaction back,
so the database is unchanged either way).

Rules (DESIGN.md section 6): workloads are deduplicated by structural hash confirmed by
structural equality (imported ones keep TVM's payload and shash; opaque ones are keyed by TVM's
shash); records by (workload, target, trace hash, run_secs) against the database and within the
import; one `source` row per work_dir that adds records.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Sequence

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from msdb.interop.tvm.import_data import ImportSummary, ParsedWorkDir, ParsedWorkload, RecordRow
    from msdb.ops.store import ProgressFn
    from msdb.records import Target

__all__ = ["ImportWriter"]

logger = logging.getLogger(__name__)


class ImportWriter:
    """Writes parsed work_dirs into `conn`'s open write transaction, counting into `summary`.

    `targets` maps a record row's target key to its parsed target; it may still grow while
    records arrive (a streaming import parses targets as it meets them)."""

    def __init__(self, conn: Connection, targets: dict[str, Target | None], summary: ImportSummary, *,
                 user: str, host: str, model: str | None, progress: ProgressFn | None = None,
                 total: int = 0) -> None:
        from msdb.ops import store

        self.conn = conn
        self.targets = targets
        self.summary = summary
        self.user, self.host, self.model = user, host, model
        self.progress, self.total, self.written = progress, total, 0
        self.target_rows = store.TargetRows(conn)
        self.target_ids: dict[str, int] = {}
        self.by_key: dict[tuple[str, bool], int] = {}  # (shash, opaque) -> row id, this import
        self.keys: set[tuple[int, int, str, str | None]] = set()
        self.keys_loaded: set[int] = set()
        self.row_ids: dict[int, list[int | None]] = {}  # id(work_dir) -> workload row ids by line
        self.sources: dict[int, int] = {}  # id(work_dir) -> its source row

    def workloads(self, wd: ParsedWorkDir) -> None:
        """Insert (or find) the work_dir's workloads; before any of its records."""
        from msdb.ops import store

        row_ids: list[int | None] = []
        for workload in wd.workloads:
            if workload is None:
                row_ids.append(None)
                continue
            workload_id, is_new, name = _workload_id(self.conn, workload, self.by_key)
            row_ids.append(workload_id)
            if is_new:
                self.summary.workloads_new += 1
                self.keys_loaded.add(workload_id)  # a new workload has no stored records
                if workload.is_opaque:
                    self.summary.opaque.append(f"{wd.workload_path}:{workload.line}: imported as an opaque payload "
                                               f"(TVM shash {workload.tvm_shash}): {workload.opaque_reason}")
            else:
                self.summary.workloads_known += 1
            if self.model is not None:
                store.ensure_task(self.conn, self.model, workload_id, name or f"workload{workload_id}")
        self.row_ids[id(wd)] = row_ids

    def records(self, wd: ParsedWorkDir, rows: Sequence[RecordRow]) -> None:
        """Insert the rows that are neither in the database nor earlier in this import."""
        from msdb.database.sqlite import insert_record_rows
        from msdb.ops import store

        row_ids = self.row_ids[id(wd)]
        keys, summary = self.keys, self.summary
        new: list[tuple[Any, ...]] = []
        source_id = self.sources.get(id(wd))
        for _number, index, target_key, trace_text, trace_hash, run_text, mean, valid, args_text in rows:
            workload_id = row_ids[index]
            assert workload_id is not None
            if workload_id not in self.keys_loaded:
                keys |= store.record_keys_of(self.conn, workload_id)
                self.keys_loaded.add(workload_id)
            target_id = self.target_ids.get(target_key)
            if target_id is None:
                target_id = self.target_ids[target_key] = self.target_rows.id_for(self.targets[target_key])
            key = (workload_id, target_id, trace_hash, run_text)
            if key in keys:
                summary.records_duplicate += 1
                continue
            keys.add(key)
            if source_id is None:
                source_id = self.sources[id(wd)] = store.insert_source(
                    self.conn, kind="import", location=wd.location, sha256=wd.record_sha256 or None,
                    workload_sha256=wd.workload_sha256, username=self.user, host=self.host,
                    tvm_version=wd.tvm_version)
                summary.sources.append(source_id)
            new.append((workload_id, target_id, source_id, trace_text, trace_hash, run_text, mean, valid, args_text))
            if not valid:
                summary.records_invalid += 1
        insert_record_rows(self.conn, new)
        summary.records_new += len(new)
        self.written += len(rows)
        if self.progress is not None:
            self.progress("writing", min(self.written, self.total), self.total)

    def done(self, wd: ParsedWorkDir) -> None:
        """The work_dir is complete: its source row gets the record file's sha256 (known only
        once the whole file was hashed, after the records a streaming import wrote)."""
        from sqlalchemy import update

        from msdb.database import models as M

        del self.row_ids[id(wd)]  # ids are keys only while their work_dir lives
        source_id = self.sources.pop(id(wd), None)
        if source_id is not None and wd.record_sha256:
            self.conn.execute(update(M.source).where(M.source.c.id == source_id).values(sha256=wd.record_sha256))


def _workload_id(conn: Connection, workload: ParsedWorkload,
                 by_key: dict[tuple[str, bool], int]) -> tuple[int, bool, str | None]:
    """(row id, inserted now, name) of a parsed workload, inserting it when new."""
    from sqlalchemy import insert, select, update

    from msdb.database import models as M
    from msdb.ops import store

    if workload.is_opaque:
        shash = store.opaque_shash(workload.tvm_shash)
        mod = None
    else:
        assert workload.hashes is not None
        shash = workload.hashes["structural"]
        mod = workload.mod
    key = (shash, workload.is_opaque)
    known = by_key.get(key)
    if known is None:
        known = store.find_workload_id(conn, shash, mod)
    if known is not None:
        by_key[key] = known
        w = M.workload.c
        row = conn.execute(select(w.name, w.tvm_payload).where(w.id == known)).one()
        if row.tvm_payload is None:
            # msdb had this workload (tuned or created here); from now on an export hands TVM
            # the payload TVM itself wrote for it
            conn.execute(update(M.workload).where(w.id == known).values(tvm_payload=workload.payload,
                                                                        tvm_shash=workload.tvm_shash))
        return known, False, row.name
    if workload.is_opaque:
        assert workload.opaque_format is not None
        row = store.opaque_workload_row(tvm_shash=workload.tvm_shash, payload=workload.payload,
                                        ir_format=workload.opaque_format, reason=workload.opaque_reason or "")
    else:
        from msdb.ops.naming import workload_name

        assert mod is not None and workload.hashes is not None
        row = store.workload_row(mod, hashes=workload.hashes, name=workload_name(mod, shash),
                                 tvm_payload=workload.payload, tvm_shash=workload.tvm_shash)
    workload_id = int(conn.execute(insert(M.workload).values(**row)).inserted_primary_key[0])
    by_key[key] = workload_id
    return workload_id, True, row["name"]
