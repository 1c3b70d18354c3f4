"""Merge msdb databases (`msdb merge DEST SRC...`): the team-wide database out of everyone's.

Rows are deduplicated (workloads by structural hash, targets by config, records by workload,
target, trace hash and run_secs), so merging is idempotent, and provenance is kept. DEST is
written in transactions of about `CHUNK_SECONDS` with the lock free `YIELD_SECONDS` between
them; a merge stopped part way keeps whole transactions. Pass one `DedupCache` when merging many
SRCs into one DEST. See docs/architecture.md, "Databases".
"""

from __future__ import annotations

import contextlib
import functools
import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

from sqlalchemy import func, select

from msdb.database import models as M
from msdb.database.errors import DatabaseError
from msdb.database.location import where
from msdb.database.rows import (
    default_host, default_user, ensure_task, family_columns, find_workload_id, flops_or_none, insert_row, insert_source,
    is_opaque, record_keys_of,
)
from msdb.database.bulk import insert_record_rows
from msdb.interop.progress import ProgressFn
from msdb.interop.tvm.import_data import failed_runs

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from msdb.database.sql import SQLiteDatabase
    from msdb.ir.function import IRModule

__all__ = ["MergeSummary", "DedupCache", "merge_databases"]

_BATCH = 5000
#: How long one transaction of a merge may hold DEST's write lock, about (module docstring).
CHUNK_SECONDS = 2.0
#: How long a merge leaves the lock free between two transactions: longer than the 100 ms a
#: waiting writer sleeps between tries (SQLite's busy handler, `SQLiteDatabase._write`), so one
#: that waits gets its turn; SQLite's lock is not fair, and a merge that began again at once
#: would starve it anyway.
YIELD_SECONDS = 0.15
_SOURCE_FIELDS = ("kind", "location", "sha256", "workload_sha256", "username", "host", "tvm_version", "msdb_version",
                  "created_at")
_WORKLOAD_FIELDS = ("shash", "ignore_tensor_hash", "anchor_hash", "name", "flops", "script", "ir_format", "ir_blob",
                    "tvm_payload", "tvm_shash", "created_at", "family_hash", "family_extents")


@dataclass
class MergeSummary:
    """What merging one SRC into DEST did. `refused`: what the admission rule left out (with
    `skip_bad`), one line each; `records_refused` counts the records left out, those of a
    refused workload included."""

    source: str
    workloads_new: int = 0
    workloads_known: int = 0
    records_new: int = 0
    records_duplicate: int = 0
    records_invalid: int = 0
    records_refused: int = 0
    sources_copied: int = 0
    seconds: float = 0.0
    refused: list[str] = field(default_factory=list)

    def line(self) -> str:
        refused = f", {self.records_refused} refused" if self.records_refused or self.refused else ""
        return (f"{self.source}: workloads: {self.workloads_new} new, {self.workloads_known} known; records: "
                f"{self.records_new} new, {self.records_duplicate} duplicate, {failed_runs(self.records_invalid)}"
                f"{refused}; {self.seconds:.2f} s")


@dataclass
class DedupCache:
    """DEST's dedup keys, kept across merges into the same DEST (module docstring): `keys` holds
    every record key of the workloads in `loaded`, as of DEST's record `last_id`."""

    keys: set[tuple[Any, ...]] = field(default_factory=set)
    loaded: set[int] = field(default_factory=set)
    last_id: int | None = None

    def learn(self, conn: Connection) -> None:
        """Add the keys of records DEST got since `last_id` (other writers) to `keys`."""
        if self.last_id is None:
            return
        r = M.tuning_record.c
        for row in conn.execute(select(r.workload_id, r.target_id, r.trace_hash, r.run_secs)
                                .where(r.id > self.last_id)):
            if row.workload_id in self.loaded:
                self.keys.add((row.workload_id, row.target_id, row.trace_hash, row.run_secs))

    def reset(self) -> None:
        """Forget everything (a merge that failed may have rolled back keys it noted)."""
        self.keys.clear()
        self.loaded.clear()
        self.last_id = None


def merge_databases(dest: SQLiteDatabase, src: SQLiteDatabase, *, user: str | None = None, host: str | None = None,
                    progress: ProgressFn | None = None, cache: DedupCache | None = None, skip_bad: bool = False,
                    admitted: bool = False) -> MergeSummary:
    """Copy what `src` has and `dest` lacks into `dest`, in one transaction (module docstring).
    `cache`: DEST's dedup keys from earlier merges into it, updated by this one.

    Every workload and record of `src` must pass the admission rule (`msdb.database.admission`)
    before anything is written: a bad one raises `AdmissionError` naming `src` and the row
    (DEST unchanged), or with `skip_bad` is left out and listed in the summary's `refused`.
    `admitted`: the caller already applied the rule to every row of `src` (`msdb pull` does,
    to the hub's rows, before staging them)."""
    start = time.perf_counter()
    if (dest.path is not None and dest.path == src.path) or (dest.path is None and dest.url == src.url):
        raise DatabaseError(f"cannot merge {where(src)} into itself")
    summary = MergeSummary(where(src))
    w, r = M.workload.c, M.tuning_record.c
    with src.engine.connect() as read:
        src_workloads = read.execute(select(w.id, *[w[name] for name in _WORKLOAD_FIELDS]).order_by(w.id)).all()
        src_targets = {row.id: row.config for row in read.execute(select(M.target.c.id, M.target.c.config))}
        verdict = _Verdict() if admitted else _admit(read, dest, src_workloads, src_targets, summary, skip_bad)
        src_workloads = [row for row in src_workloads if row.id not in verdict.bad_workloads]
        src_targets = {tid: config for tid, config in src_targets.items() if tid in verdict.targets or admitted}
        src_sources = {row.id: row for row in read.execute(select(M.source.c.id, *[M.source.c[f] for f in _SOURCE_FIELDS]))}
        src_tasks = read.execute(select(M.model.c.name.label("model"), M.task.c.name, M.task.c.workload_id,
                                        M.task.c.weight).join(M.model, M.model.c.id == M.task.c.model_id)
                                 .order_by(M.task.c.id)).all()
        total = int(read.execute(select(func.count()).select_from(M.tuning_record)).scalar() or 0)
        chunks = _Chunks(dest, total)
        try:
            conn = chunks.begin()
            workload_map, known = _merge_workloads(conn, src_workloads, summary, verdict.mods)
            target_map = {tid: dest.target_row_id_for_config(conn, config) for tid, config in src_targets.items()}
            sources = _SourceMap(conn, src_sources, summary, location=where(src), user=user, host=host)
            if cache is not None:
                cache.learn(conn)
            keys: set[tuple[Any, ...]] = cache.keys if cache is not None else set()
            loaded: set[int] = cache.loaded if cache is not None else set()
            done = 0
            bad = verdict.bad_records
            result = read.execution_options(stream_results=True, yield_per=_BATCH).execute(
                select(r.id, r.workload_id, r.target_id, r.source_id, r.trace, r.trace_hash, r.run_secs,
                       r.mean_run_secs, r.is_valid, r.args_info).order_by(r.id))
            for batch in result.partitions(_BATCH):
                if chunks.due():
                    conn = sources.conn = chunks.next(keys, set(workload_map.values()))
                rows = []
                for row in batch:
                    if bad and row.id in bad:
                        continue
                    workload_id = workload_map[row.workload_id]
                    if workload_id in known and workload_id not in loaded:
                        keys |= record_keys_of(conn, workload_id)
                        loaded.add(workload_id)
                    target_id = target_map[row.target_id]
                    key = (workload_id, target_id, row.trace_hash, row.run_secs)
                    if key in keys:
                        summary.records_duplicate += 1
                        continue
                    keys.add(key)
                    rows.append((workload_id, target_id, sources.id_for(row.source_id), row.trace, row.trace_hash,
                                 row.run_secs, row.mean_run_secs, bool(row.is_valid), row.args_info))
                    if not row.is_valid:
                        summary.records_invalid += 1
                insert_record_rows(conn, rows)
                summary.records_new += len(rows)
                done += len(batch)
                if progress is not None:
                    progress("merging", done, total)
            for task in src_tasks:
                if task.workload_id in workload_map:  # not one of a refused workload
                    ensure_task(conn, task.model, workload_map[task.workload_id], task.name, task.weight,
                                keep_weight=True)
            if cache is not None:
                # new workloads' keys are all in `keys`: they have no records but those merged
                loaded |= set(workload_map.values()) - known
                cache.last_id = int(conn.execute(select(func.max(r.id))).scalar() or 0)
        except BaseException:
            if cache is not None:  # what this merge noted may be rolled back: start over next time
                cache.reset()
            chunks.abort(*sys.exc_info())
            raise
        try:
            chunks.commit()
        except BaseException:
            if cache is not None:
                cache.reset()
            raise
    summary.seconds = time.perf_counter() - start
    return summary


class _Chunks:
    """DEST's write transactions of one merge, one after another, each held about
    `CHUNK_SECONDS` (module docstring)."""

    def __init__(self, dest: SQLiteDatabase, total: int) -> None:
        self.dest = dest
        self.total = total
        self.stack = contextlib.ExitStack()
        self.conn: Connection | None = None
        self.started = 0.0

    def begin(self) -> Connection:
        self.stack = contextlib.ExitStack()
        self.conn = conn = self.stack.enter_context(self.dest.write_transaction(records=self.total))
        self.started = time.monotonic()
        return conn

    def due(self) -> bool:
        return time.monotonic() - self.started >= CHUNK_SECONDS

    def next(self, keys: set[tuple[Any, ...]], workload_ids: set[int]) -> Connection:
        """Commit the current transaction and begin the next; `keys` learns the records other
        writers added in between to the workloads of `workload_ids`."""
        r = M.tuning_record.c
        assert self.conn is not None
        last_id = int(self.conn.execute(select(func.max(r.id))).scalar() or 0)
        self.commit()
        time.sleep(YIELD_SECONDS)
        conn = self.begin()
        for row in conn.execute(select(r.workload_id, r.target_id, r.trace_hash, r.run_secs).where(r.id > last_id)):
            if row.workload_id in workload_ids:
                keys.add((row.workload_id, row.target_id, row.trace_hash, row.run_secs))
        return conn

    def commit(self) -> None:
        self.stack.close()

    def abort(self, *exc_info: Any) -> None:
        self.stack.__exit__(*exc_info)


def _merge_workloads(conn: Connection, rows: Sequence[Any], summary: MergeSummary,
                     mods: dict[int, IRModule]) -> tuple[dict[int, int], set[int]]:
    """src workload id -> dest workload id (copying new ones), and the dest ids that existed.
    `mods`: the admitted IR of src workloads, whose derived columns (FLOPs, family) are
    computed here rather than copied."""
    mapping: dict[int, int] = {}
    known: set[int] = set()
    for row in rows:
        # the admission rule recomputed src's hashes from its IR (or the caller did), and DEST's
        # were computed when it stored its rows: a structural hash match is the same workload
        match = find_workload_id(conn, row.shash, None if is_opaque(row.ir_format) else _same_hash)
        if match is None:
            values = {name: getattr(row, name) for name in _WORKLOAD_FIELDS}
            mod = mods.get(row.id)
            if mod is not None:
                values.update(flops=flops_or_none(mod), **family_columns(mod))
            match = insert_row(conn, M.workload, values)
            summary.workloads_new += 1
        else:
            known.add(match)
            summary.workloads_known += 1
        mapping[row.id] = match
    return mapping, known


def _same_hash(_workload_id: int) -> bool:
    return True


@dataclass
class _Verdict:
    """What the admission pass of a merge decided about SRC (`_admit`)."""

    bad_workloads: set[int] = field(default_factory=set)
    bad_records: set[int] = field(default_factory=set)
    #: src target ids that admitted records use
    targets: set[int] = field(default_factory=set)
    #: the IR of admitted src workloads, by src id (not for opaque ones or ones DEST has as is)
    mods: dict[int, IRModule] = field(default_factory=dict)


def _admit(read: Connection, dest: SQLiteDatabase, workloads: Sequence[Any], targets: dict[int, str],
           summary: MergeSummary, skip_bad: bool) -> _Verdict:
    """Apply the admission rule to every workload and record of SRC (read through `read`),
    before DEST is written: raises `AdmissionError` at the first bad one, or with `skip_bad`
    lists it in `summary.refused` and returns what to leave out.

    A workload whose row DEST holds byte for byte (it passed the rule when DEST stored it) is
    not parsed and hashed again; the others are, once each. Records take one pass of the record
    grammar each (`msdb.database.admission`)."""
    from msdb.database.admission import Admission, AdmittedWorkload
    from msdb.database.rows import load_workload_ir
    from msdb.records import Workload

    admission = Admission(summary.source, skip_bad=skip_bad)
    verdict = _Verdict()
    entries: dict[int, object] = {}
    same = _held_by(dest, workloads)
    for row in workloads:
        what = f"workload {row.id} ({row.shash})"
        if row.id in same:
            if is_opaque(row.ir_format):
                entries[row.id] = AdmittedWorkload(None, {})
            else:
                entries[row.id] = Workload(hashes={"structural": row.shash}, loader=functools.partial(
                    load_workload_ir, row.ir_format, row.ir_blob, row.script, label=what))
            continue
        admitted = admission.workload_row(what, row._mapping)
        if admitted is None:
            verdict.bad_workloads.add(row.id)
            continue
        entries[row.id] = admitted
        if admitted.mod is not None:
            verdict.mods[row.id] = admitted.mod
    r = M.tuning_record.c
    result = read.execution_options(stream_results=True, yield_per=_BATCH).execute(
        select(r.id, r.workload_id, r.target_id, r.trace, r.trace_hash, r.run_secs, r.mean_run_secs, r.is_valid,
               r.args_info).order_by(r.id))
    for batch in result.partitions(_BATCH):
        for row in batch:
            entry = entries.get(row.workload_id)
            if entry is None:
                verdict.bad_records.add(row.id)
                summary.records_refused += 1
                if row.workload_id not in verdict.bad_workloads:
                    admission.refuse(f"record {row.id}", f"its workload {row.workload_id} does not exist")
                continue
            if admission.record_row(f"record {row.id}", row._mapping, targets.get(row.target_id), entry):
                verdict.targets.add(row.target_id)
            else:
                verdict.bad_records.add(row.id)
                summary.records_refused += 1
    summary.refused = admission.refused
    return verdict


def _held_by(dest: SQLiteDatabase, workloads: Sequence[Any]) -> set[int]:
    """The src workloads whose row DEST holds with the same hashes, IR and payload."""
    w = M.workload.c
    columns = ("shash", "ignore_tensor_hash", "anchor_hash", "script", "ir_format", "ir_blob", "tvm_payload",
               "tvm_shash")
    by_hash: dict[str, list[Any]] = {}
    for row in workloads:
        by_hash.setdefault(row.shash, []).append(row)
    held: set[int] = set()
    keys = sorted(by_hash)
    with dest.engine.connect() as conn:
        for i in range(0, len(keys), 500):
            for have in conn.execute(select(*[w[c] for c in columns]).where(w.shash.in_(keys[i:i + 500]))):
                for row in by_hash[have.shash]:
                    if all(_same_value(getattr(row, c), getattr(have, c)) for c in columns):
                        held.add(row.id)
    return held


def _same_value(a: Any, b: Any) -> bool:
    if isinstance(a, (bytes, bytearray, memoryview)) and isinstance(b, (bytes, bytearray, memoryview)):
        return bytes(a) == bytes(b)
    return type(a) is type(b) and a == b


class _SourceMap:
    """src source id -> dest source id, copying a source row the first time a new record needs
    it (matched on every column, so merging twice copies nothing)."""

    def __init__(self, conn: Connection, rows: dict[int, Any], summary: MergeSummary, *, location: str,
                 user: str | None, host: str | None) -> None:
        self.conn = conn
        self.rows = rows
        self.summary = summary
        self.location = location
        self.user = user
        self.host = host
        self.ids: dict[int | None, int] = {}

    def id_for(self, source_id: int | None) -> int:
        known = self.ids.get(source_id)
        if known is not None:
            return known
        if source_id is None or source_id not in self.rows:
            dest_id = insert_source(
                self.conn, kind="merge", location=self.location,
                username=self.user if self.user is not None else default_user(),
                host=self.host if self.host is not None else default_host())
        else:
            dest_id = self._find_or_copy(self.rows[source_id])
        self.ids[source_id] = dest_id
        return dest_id

    def _find_or_copy(self, row: Any) -> int:
        s = M.source.c
        conditions = [(s[f].is_(None) if getattr(row, f) is None else s[f] == getattr(row, f)) for f in _SOURCE_FIELDS]
        found = self.conn.execute(select(s.id).where(*conditions).order_by(s.id)).scalar()
        if found is not None:
            return int(found)
        self.summary.sources_copied += 1
        values = {f: getattr(row, f) for f in _SOURCE_FIELDS}
        return insert_source(self.conn, **values)


if TYPE_CHECKING:  # `merge_into`'s callback type
    from typing import Callable


def merge_into(dest: str, sources: Sequence[SQLiteDatabase], *, user: str | None = None, host: str | None = None,
               progress: ProgressFn | None = None, merged: Callable[[MergeSummary], None] | None = None,
               skip_bad: bool = False) -> list[MergeSummary]:
    """`msdb merge DEST SRC...`: merge each of `sources` in turn into the database at `dest` (a
    path or URL; created if missing); `merged(summary)` is called once a SRC is in DEST for good.
    `skip_bad`: rows the one rule of what enters a database refuses are left out and listed in
    each summary's `refused` (else the first refuses its whole SRC: `merge_databases`).

    A DEST file that does not exist is built as `msdb import` builds one: in a locked staging
    folder beside it (`.DEST.merge-*`, `msdb.staging.stage_new_database`), linked into place
    once every SRC is merged, never over a file another process created meanwhile (the merge
    then goes into that file). A failed, interrupted or killed merge into a new file leaves no
    file, and the next merge or import into it removes a killed one's folder.

    Ctrl-C raises `KeyboardInterrupt` whose message says, in one line, what DEST kept: nothing
    for a new file; else the SRCs merged in full (`merged` was called for them) and how many
    records DEST gained during the SRC stopped part way, in the transactions it committed
    (records other writers committed meanwhile count too); merging again adds the rest
    (docs/architecture.md, "Processes, temporary files and interrupts")."""
    from msdb.database.location import database_file, open_database, stage_new_file
    from msdb.database.tvm_import import _checkpoint, _link_no_replace
    from msdb.staging import sweep_new_database

    report = merged or (lambda _summary: None)
    file = database_file(dest)
    if file is not None and not file.exists():
        stage, temp, temp_location = stage_new_file(file, "merge", dest)
        placed = False
        try:
            staged = open_database(temp_location, create=True)
            try:
                summaries = [merge_databases(staged, src, user=user, host=host, progress=progress, skip_bad=skip_bad)
                             for src in sources]
            finally:
                staged.close()
            _checkpoint(temp)
            placed = _link_no_replace(temp, file)
        except KeyboardInterrupt:
            if placed:
                raise KeyboardInterrupt(f"merged in full into the new {file}") from None
            raise KeyboardInterrupt(f"nothing was merged; {file} was not created") from None
        finally:
            stage.remove()
        if placed:
            for summary in summaries:
                report(summary)
            return summaries
        # another process created `file` meanwhile: merge into it instead
    elif file is not None:
        sweep_new_database(file)
    target = open_database(dest, create=True)
    summaries = []
    current: SQLiteDatabase | None = None
    before = 0
    try:
        for src in sources:
            with target.engine.connect() as conn:
                before = int(conn.execute(select(func.max(M.tuning_record.c.id))).scalar() or 0)
            current = src
            summary = merge_databases(target, src, user=user, host=host, progress=progress, skip_bad=skip_bad)
            current = None
            summaries.append(summary)
            report(summary)
    except KeyboardInterrupt:
        kept = [f"merged in full: {', '.join(s.source for s in summaries)}"] if summaries else []
        if current is not None:
            with target.engine.connect() as conn:
                gained = int(conn.execute(select(func.count()).select_from(M.tuning_record)
                                          .where(M.tuning_record.c.id > before)).scalar() or 0)
            kept.append(f"{where(current)} stopped part way: {where(target)} gained {gained} records meanwhile, in "
                        f"the transactions it committed (merging {where(current)} again adds the rest)")
        raise KeyboardInterrupt("; ".join(kept) or "nothing was merged") from None
    finally:
        target.close()
    return summaries
