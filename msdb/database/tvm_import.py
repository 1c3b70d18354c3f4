"""`msdb import`: TVM MetaSchedule work_dirs (any generation) into an msdb SQL database.

`import_logs(location, paths)` is the command (how to run the import, which database);
`import_tvm(db, paths)` imports into an opened database, in one transaction, as one stream: the
one reader (`msdb.interop.tvm.import_reader`) hands rows to `ImportWriter` (through the replay
pass, `ReplayCheck`, with `verify=True`) while it parses. A bad line anywhere writes nothing
(`ImportAborted`), and re-importing a file adds nothing; `opaque=True` keeps payloads msdb
cannot decode. See docs/architecture.md, "One record's way".
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

from sqlalchemy import select, update

from msdb.database import models as M
from msdb.database.location import database_file, is_behind, open_database, refuse_in_memory
from msdb.database.rows import (
    default_host, default_user, ensure_task, find_workload_id, insert_row, insert_source, keep_tvm_payload, opaque_shash,
    opaque_workload_row, record_keys_of, stored_ir, workload_row,
)
from msdb.errors import MsdbError
from msdb.interrupts import SigintHold, in_main_thread
from msdb.interop.progress import ProgressFn
from msdb.interop.tvm.import_data import Discard, ImportAborted, ImportSummary, ParsedWorkDir, RecordRow, RecordSink
from msdb.interop.tvm.import_reader import expected_records, in_file_order, read_pairs
from msdb.interop.tvm.replay_check import ReplayCheck
from msdb.interop.tvm.workdir import BadLine, resolve_import_paths

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from msdb.database.sql import SQLiteDatabase
    from msdb.interop.tvm.grammar import ParsedWorkload

__all__ = ["ImportAborted", "ImportInterrupted", "ImportSummary", "ImportWriter", "import_tvm", "check_import",
           "import_logs"]

logger = logging.getLogger(__name__)

class ImportWriter:
    """Writes parsed work_dirs into `conn`, an open write transaction of `db`, counting into
    `summary`: first a work_dir's workloads (`workloads`), then its record rows in batches
    (`records`), then its end (`done`). A `msdb.interop.tvm.import_data.RecordSink`."""

    def __init__(self, db: SQLiteDatabase, conn: Connection, summary: ImportSummary, *, user: str | None,
                 host: str | None, model: str | None) -> None:
        self.db = db
        self.conn = conn
        self.summary = summary
        self.user = user if user is not None else default_user()
        self.host = host if host is not None else default_host()
        self.model = model
        self.target_ids: dict[str, int] = {}
        self.by_key: dict[tuple[str, bool], int] = {}  # (shash, opaque) -> row id, this import
        self.keys: set[tuple[int, int, str, str | None]] = set()
        self.keys_loaded: set[int] = set()
        self.row_ids: dict[int, list[int | None]] = {}  # id(work_dir) -> workload row ids by line
        self.sources: dict[int, int] = {}  # id(work_dir) -> its source row

    def workloads(self, wd: ParsedWorkDir) -> None:
        """Insert (or find) the work_dir's workloads; before any of its records."""
        row_ids: list[int | None] = []
        for workload in wd.workloads:
            if workload is None:
                row_ids.append(None)
                continue
            workload_id, is_new, name = self._workload_id(workload)
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
                ensure_task(self.conn, self.model, workload_id, name or f"workload{workload_id}", keep_weight=True)
        self.row_ids[id(wd)] = row_ids

    def _workload_id(self, workload: ParsedWorkload) -> tuple[int, bool, str | None]:
        """(row id, inserted now, name) of a parsed workload, inserting it when new."""
        conn = self.conn
        if workload.is_opaque:
            shash = opaque_shash(workload.tvm_shash)
        else:
            assert workload.hashes is not None
            shash = workload.hashes["structural"]
        key = (shash, workload.is_opaque)
        known = self.by_key.get(key)
        if known is None:
            known = find_workload_id(conn, shash, None if workload.is_opaque else lambda wid: self._same(wid, workload))
        if known is not None:
            self.by_key[key] = known
            keep_tvm_payload(conn, known, workload.payload, workload.tvm_shash)
            return known, False, conn.execute(select(M.workload.c.name).where(M.workload.c.id == known)).scalar()
        if workload.is_opaque:
            assert workload.opaque_kind is not None
            row = opaque_workload_row(tvm_shash=workload.tvm_shash, payload=workload.payload,
                                      payload_kind=workload.opaque_kind, reason=workload.opaque_reason or "")
        else:
            from msdb.database.naming import workload_name

            assert workload.mod is not None and workload.hashes is not None
            row = workload_row(workload.mod, hashes=workload.hashes, name=workload_name(workload.mod, shash),
                               tvm_payload=workload.payload, tvm_shash=workload.tvm_shash)
        workload_id = insert_row(conn, M.workload, row)
        self.by_key[key] = workload_id
        return workload_id, True, row["name"]

    def _same(self, workload_id: int, workload: ParsedWorkload) -> bool:
        """Whether stored workload `workload_id` is structurally equal to the decoded one; a row
        whose IR cannot be read back is taken as equal (its hash matched)."""
        from msdb.hashing import structural_equal

        try:
            stored = stored_ir(self.conn, workload_id)
        except MsdbError as exc:
            logger.warning("workload %d cannot be read back (%s); taking the hash match as equality", workload_id, exc)
            return True
        assert workload.mod is not None
        return structural_equal(stored, workload.mod)

    def records(self, wd: ParsedWorkDir, rows: Sequence[RecordRow]) -> None:
        """Insert the rows that are neither in the database nor earlier in this import."""
        from msdb.database.bulk import insert_record_rows

        row_ids = self.row_ids[id(wd)]
        keys, summary = self.keys, self.summary
        new: list[tuple[Any, ...]] = []
        source_id = self.sources.get(id(wd))
        for _number, index, target_key, trace_text, trace_hash, run_text, mean, valid, args_text in rows:
            workload_id = row_ids[index]
            assert workload_id is not None
            if workload_id not in self.keys_loaded:
                keys |= record_keys_of(self.conn, workload_id)
                self.keys_loaded.add(workload_id)
            target_id = self.target_ids.get(target_key)
            if target_id is None:
                target_id = self.target_ids[target_key] = self.db.target_row_id(self.conn, wd.targets[target_key])
            key = (workload_id, target_id, trace_hash, run_text)
            if key in keys:
                summary.records_duplicate += 1
                continue
            keys.add(key)
            if source_id is None:
                source_id = self.sources[id(wd)] = insert_source(
                    self.conn, kind="import", location=wd.location, sha256=wd.record_sha256 or None,
                    workload_sha256=wd.workload_sha256, username=self.user, host=self.host,
                    tvm_version=wd.tvm_version)
                summary.sources.append(source_id)
            new.append((workload_id, target_id, source_id, trace_text, trace_hash, run_text, mean, valid, args_text))
            if not valid:
                summary.records_invalid += 1
        insert_record_rows(self.conn, new)
        summary.records_new += len(new)

    def done(self, wd: ParsedWorkDir) -> None:
        """The work_dir is complete: its source row gets the record file's sha256 (known only
        once the whole file was hashed, after the records a streaming import wrote)."""
        del self.row_ids[id(wd)]  # ids are keys only while their work_dir lives
        source_id = self.sources.pop(id(wd), None)
        if source_id is not None and wd.record_sha256:
            self.conn.execute(update(M.source).where(M.source.c.id == source_id).values(sha256=wd.record_sha256))


def import_tvm(db: SQLiteDatabase, paths: Sequence[str | Path], *, skip_bad: bool = False, opaque: bool = False,
               user: str | None = None, host: str | None = None, model: str | None = None, verify: bool = False,
               progress: ProgressFn | None = None, workers: int | None = None,
               unknown_kinds: bool = False) -> ImportSummary:
    """Import TVM work_dirs (or file pairs) into `db` in one transaction; see the module
    docstring. Raises `ImportAborted` (nothing written: the transaction is rolled back) when a
    line is bad and `skip_bad` is False, `WorkDirError` for a path that is not a work_dir.

    Rows are written while the lines are still being parsed (in worker processes for a big
    log: `workers`, as in `read_import`), so that SQLite's share of the work overlaps the
    parsing. `verify`: every distinct trace is replayed on its workload before its rows go on
    to the writer; a record whose replay fails is a bad line like any other (listed in
    `replay_failures`). `unknown_kinds`: keep trace instructions of kinds TVM does not have
    (never replayable) instead of refusing their lines."""
    start = time.perf_counter()
    resolved = resolve_import_paths(paths)
    total = expected_records(resolved)
    summary = ImportSummary()
    with _commit_hold(summary) as hold:
        with db.write_transaction(records=total) as conn:
            writer = ImportWriter(db, conn, summary, user=user, host=host, model=model)
            replay = ReplayCheck(writer) if verify else None
            sink: RecordSink = writer if replay is None else replay
            plan = read_pairs(resolved, total, sink=sink, opaque=opaque, progress=progress, workers=workers,
                              unknown_kinds=unknown_kinds, phase="importing")
            failures = replay.failures if replay is not None else []
            _refuse_bad(plan.bad_lines, failures, resolved, skip_bad)
            summary.bad_lines = plan.bad_lines
            if replay is not None:
                summary.replayed, summary.replay_failures = replay.replayed, [str(f) for f in failures]
            hold()  # from here a Ctrl-C waits: the commit and `committed` are one step
        summary.committed = True
    summary.seconds = time.perf_counter() - start
    logger.info("import: %s", summary.line())
    return summary


def check_import(paths: Sequence[str | Path], *, skip_bad: bool = False, opaque: bool = False, verify: bool = False,
                 progress: ProgressFn | None = None, unknown_kinds: bool = False) -> None:
    """A reading pass that writes nothing and keeps nothing: raises `ImportAborted` when
    `import_tvm` with the same options would (bad lines, and with `verify` replay failures)."""
    resolved = resolve_import_paths(paths)
    replay = ReplayCheck(None) if verify else None
    sink: RecordSink = Discard() if replay is None else replay
    plan = read_pairs(resolved, expected_records(resolved), sink=sink, opaque=opaque, progress=progress,
                      unknown_kinds=unknown_kinds, phase="checking")
    _refuse_bad(plan.bad_lines, [] if replay is None else replay.failures, resolved, skip_bad)


def _refuse_bad(bad: list[BadLine], failures: list[BadLine], resolved: list[tuple[Path, Path]],
                skip_bad: bool) -> None:
    """`ImportAborted` naming the bad lines and failed replays, in file order, unless `skip_bad`."""
    if (bad or failures) and not skip_bad:
        raise ImportAborted(in_file_order(bad + failures, resolved))


def import_logs(location: str, paths: Sequence[str | Path], *, skip_bad: bool = False, opaque: bool = False,
                user: str | None = None, host: str | None = None, model: str | None = None, verify: bool = False,
                progress: ProgressFn | None = None, unknown_kinds: bool = False) -> ImportSummary:
    """`msdb import LOCATION PATH...`: import TVM work_dirs into the database at `location` (a
    path or URL; a missing file is created).

    The policy of the command, in one place:
    - a missing or incomplete work_dir, and an in-memory database (the import would vanish
      with the process), are refused before anything is opened;
    - the import is one stream, rows written while the lines are read (`import_tvm`); when the
      database has an older schema (which opening migrates), a first pass that writes nothing
      (`check_import`) reads (and with `verify` replays) every line before the database is
      opened, so a refused import does not even migrate it;
    - a new file is built in a locked staging folder beside it and linked into place only once
      committed, never over a file another process made meanwhile (then the import goes into
      that file). A refused, failed or killed import into a new file leaves no file, and no
      import ever deletes one (the next import removes a killed one's staging folder);
    - Ctrl-C: before the commit nothing is written and `KeyboardInterrupt` is raised; once the
      rows are committed where asked, an interrupt waits for the import to finish and raises
      `ImportInterrupted` with the summary (docs/architecture.md, "Processes, temporary files
      and interrupts").
    `seconds` of the summary covers all of it."""
    global _SESSION
    start = time.perf_counter()
    resolve_import_paths(paths)
    refuse_in_memory(location, "msdb import")
    if is_behind(location):
        check_import(paths, skip_bad=skip_bad, opaque=opaque, verify=verify, progress=progress,
                     unknown_kinds=unknown_kinds)
    options: dict[str, Any] = dict(skip_bad=skip_bad, opaque=opaque, user=user, host=host, model=model,
                                   verify=verify, progress=progress, unknown_kinds=unknown_kinds)
    session = _Interrupts() if _SESSION is None and in_main_thread() else None
    if session is not None:
        _SESSION = session
    try:
        file = database_file(location)
        summary = None
        if file is not None and not file.exists():
            summary = _import_into_new_file(location, file, paths, options)
            if session is not None:
                session.raise_pending()  # an interrupt while a new file was placed: nothing more
        if summary is None:  # an existing database, or one another process created meanwhile
            summary = _import_in_place(location, paths, options)
    finally:
        if session is not None:
            _SESSION = None
            session.end()  # an interrupt held since the commit: raised now, with what was committed
    summary.seconds = time.perf_counter() - start
    return summary


class ImportInterrupted(KeyboardInterrupt):
    """Ctrl-C arrived after the import was committed; `summary` says what is in the database."""

    def __init__(self, summary: ImportSummary) -> None:
        super().__init__("interrupted after the import was committed")
        self.summary = summary


def _import_in_place(location: str, paths: Sequence[str | Path], options: dict[str, Any]) -> ImportSummary:
    db = open_database(location, create=True)
    try:
        return import_tvm(db, paths, **options)
    finally:
        db.close()


def _import_into_new_file(location: str, file: Path, paths: Sequence[str | Path],
                          options: dict[str, Any]) -> ImportSummary | None:
    """Import into a new database in a staging folder beside `file`, then link it to `file`
    (which fails if the name is taken: a link never replaces). None when another process
    created `file` meanwhile: nothing was placed, import into that file instead."""
    from msdb.database.location import stage_new_file

    stage, temp, temp_location = stage_new_file(file, "import", location)  # also sweeps a killed merge's, pull's
    try:
        db = open_database(temp_location, create=True)
        try:
            summary = import_tvm(db, paths, **options)
        finally:
            db.close()
        summary.committed = False  # committed in the staging copy only, until it is in place
        _checkpoint(temp)
        summary.committed = _link_no_replace(temp, file)
    finally:
        stage.remove()
    if not summary.committed:
        logger.info("%s was created by another process during the import; importing into it", file)
        return None
    return summary


def _checkpoint(path: Path) -> None:
    """Fold a WAL left beside `path` into it, so that the file alone holds the database."""
    wal = path.with_name(path.name + "-wal")
    if wal.exists() and wal.stat().st_size > 0:
        import sqlite3

        conn = sqlite3.connect(str(path))
        try:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            conn.close()


def _link_no_replace(source: Path, dest: Path) -> bool:
    """Give `source` the name `dest` unless `dest` exists (False then). A hard link is atomic
    and never replaces; where the file system has none, a rename after a check (a tiny race)."""
    try:
        os.link(source, dest)
        return True
    except FileExistsError:
        return False
    except OSError:
        if os.path.lexists(dest):
            return False
        os.rename(source, dest)
        return True


class _Interrupts(SigintHold):
    """Ctrl-C around an import's commit (see `import_logs`). `hold()` (called just before the
    commit) makes SIGINT only noted (`msdb.interrupts.SigintHold`), so the commit and the note
    that it happened cannot be split; the note is raised at `end()` or `raise_pending()`: as
    `ImportInterrupted` when the summary is committed, else as `KeyboardInterrupt`."""

    def __init__(self) -> None:
        super().__init__()
        self.summary: ImportSummary | None = None

    def hold_for(self, summary: ImportSummary) -> None:
        self.summary = summary
        self.hold()

    def raise_pending(self) -> None:
        if self.pending:
            self.pending = False
            self.release()
            if self.summary is not None and self.summary.committed:
                raise ImportInterrupted(self.summary)
            raise KeyboardInterrupt

    def end(self) -> None:
        self.release()
        self.raise_pending()


#: The interrupt handling of the `import_logs` call running now in the main thread (None
#: outside one; other threads get no signals).
_SESSION: _Interrupts | None = None


@contextlib.contextmanager
def _commit_hold(summary: ImportSummary) -> Iterator[Callable[[], None]]:
    """A `hold()` to call just before a commit: from then on a Ctrl-C is held until the end of
    the `import_logs` call, or, without one, of this block (then raised, as `ImportInterrupted`
    once `summary.committed`)."""
    session = _SESSION if in_main_thread() else None
    own = session is None
    if session is None:
        session = _Interrupts()
    try:
        yield lambda: session.hold_for(summary)
    finally:
        if own:
            session.end()
