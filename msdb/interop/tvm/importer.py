"""Import TVM MetaSchedule work_dirs (any generation) into an msdb SQL database.

`import_tvm(db, paths)` is `msdb import`. Its two halves:

1. Reading (`msdb.interop.tvm.import_reader.WorkDirReader`): workload payloads decoded into
   msdb IR and hashed, record lines parsed and checked, traces normalized to TVM 0.27's form,
   problems collected as `path:line: reason`.
2. Writing (`msdb.interop.tvm.import_writer.ImportWriter`), in ONE transaction: workloads
   (deduplicated by structural hash confirmed by structural equality; imported ones keep TVM's
   payload and shash), targets, one `source` row per work_dir that adds records (files' sha256,
   user, host, TVM version, time), and the records, deduplicated by (workload, target, trace,
   run_secs) against the database and within the import, so re-importing a file adds nothing.

By default the two run as one stream: rows are written inside the open transaction while
forked worker processes parse the next stretches of the log, and bad lines that are not to be
skipped raise `ImportAborted` at the end, which rolls the transaction back, so a bad line
anywhere still writes nothing (DESIGN.md section 6). With `verify=True` (and through
`read_import` + `import_plan`) the whole import is read first, then replayed, then written.

No trace is replayed or parsed into a `Trace` unless it must be rewritten (legacy `GetBlock`,
one-attribute `Split`) or `verify=True` asks for replays: TVM itself replays every trace while
loading (apache/tvm#11680), which is what makes it ~80x slower to load the same log.

Payloads msdb cannot decode (TVM's <= 0.21 graph format, or a node type msdb's IR lacks) stop
the import with an error naming the format or node type, unless `opaque=True`: then the workload
is stored as an opaque payload keyed by TVM's shash (flagged in `workload.ir_format`, see
`msdb.ops.store`), with its records, and never replayed.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from msdb.errors import MsdbError
from msdb.interop.tvm.import_data import ImportAborted, ImportPlan, ImportSummary, ParsedWorkDir, ParsedWorkload
from msdb.interop.tvm.import_reader import WorkDirReader, estimated_lines
from msdb.interop.tvm.trace_check import legacy_kinds, normalize_trace_json, scan_trace
from msdb.interop.tvm.workdir import RECORD_FILE, WORKLOAD_FILE, BadLine, WorkDirError, resolve_paths
from msdb.ops.store import ProgressFn

if TYPE_CHECKING:
    from msdb.database.sqlite import SQLiteDatabase

__all__ = [
    "ImportAborted", "ImportPlan", "ImportSummary", "ParsedWorkDir", "ParsedWorkload", "commit_import",
    "import_plan", "import_tvm", "legacy_kinds", "normalize_trace_json", "read_import", "replay_plan", "resolve_import_paths",
    "scan_trace",
]

logger = logging.getLogger(__name__)


def resolve_import_paths(paths: Sequence[str | Path]) -> list[tuple[Path, Path]]:
    """(workload file, record file) for each work_dir in `paths`; consecutive files pair up as
    (workload file, record file). Raises `WorkDirError` naming the path."""
    pairs: list[tuple[Path, Path]] = []
    pending: Path | None = None
    for raw in paths:
        path = Path(raw)
        if path.is_file() or (pending is not None and not path.is_dir()):
            if pending is None:
                pending = path
                continue
            first, second = pending, path
            if first.name == RECORD_FILE and second.name == WORKLOAD_FILE:
                first, second = second, first
            pairs.append(resolve_paths(first, second))
            pending = None
            continue
        if pending is not None:
            raise WorkDirError(f"{pending}: a file must be followed by its partner (the workload file, then the record "
                               f"file), got {path}")
        pairs.append(resolve_paths(path))
    if pending is not None:
        raise WorkDirError(f"{pending}: a file needs its partner: pass a work_dir, or the workload file followed by "
                           "the record file")
    if not pairs:
        raise WorkDirError("nothing to import: give a work_dir or a workload file and a record file")
    return pairs


def read_import(paths: Sequence[str | Path], *, opaque: bool = False, progress: ProgressFn | None = None,
                workers: int | None = None) -> ImportPlan:
    """Phase 1: read and check every work_dir; the database is not touched. `paths` are
    work_dirs and files (see `resolve_import_paths`). `workers`: processes that parse a big
    record file in parallel (None: one per CPU, up to 8, for files of more than 4,000 lines;
    1: none). The result does not depend on it."""
    resolved = resolve_import_paths(paths)
    reader = WorkDirReader(opaque=opaque, progress=progress, total=_line_count(resolved), workers=workers)
    workdirs = [reader.read(workload, record) for workload, record in resolved]
    if progress is not None:
        progress(reader.phase, reader.total, reader.total)
    return ImportPlan(workdirs, reader.targets, _in_file_order(reader.bad, resolved))


def _line_count(pairs: list[tuple[Path, Path]]) -> int:
    """About how many record lines the work_dirs hold (a progress bar's length, the page cache
    of a streaming import), from the first 64 KiB of each record file."""
    total = 0
    for _, record in pairs:
        try:
            with open(record, "rb") as handle:
                sample = handle.read(1 << 16)
            total += estimated_lines(sample, record.stat().st_size)
        except OSError:
            pass  # reading it says what is wrong
    return total


def _in_file_order(bad: list[BadLine], pairs: list[tuple[Path, Path]]) -> list[BadLine]:
    """Bad lines in the order of the files given, then of their lines (parallel parsing finds
    them out of order)."""
    return sorted(bad, key=lambda b: (_order(pairs, b.path), b.line))


def _order(pairs: list[tuple[Path, Path]], path: Path) -> int:
    for i, (workload, record) in enumerate(pairs):
        if path == workload:
            return 2 * i
        if path == record:
            return 2 * i + 1
    return len(pairs) * 2


# ---------------------------------------------------------------- replay


def replay_plan(plan: ImportPlan, progress: ProgressFn | None = None) -> tuple[int, list[str]]:
    """Replay every distinct (workload, trace) of the plan on the decoded workload, as TVM does
    when it loads a log; returns (replayed, ["path:line: replay failed: reason", ...]). Opaque
    workloads are never replayed."""
    from msdb.schedule import Schedule, Trace

    seen: dict[tuple[int, str], str | None] = {}
    failures: list[str] = []
    total = plan.n_records
    done = replayed = 0
    for wd in plan.workdirs:
        for row in wd.records:
            done += 1
            number, index, _, trace_text, trace_hash = row[:5]
            workload = wd.workloads[index]
            if workload is None or workload.mod is None:
                continue
            key = (id(workload.mod), trace_hash)
            if key not in seen:
                try:
                    sch = Schedule(workload.mod)
                    Trace.from_json(trace_text).apply_to_schedule(sch, remove_postproc=False)
                    seen[key] = None
                except MsdbError as exc:
                    seen[key] = str(exc)
                except Exception as exc:  # noqa: BLE001 - a replay bug must not abort the import
                    seen[key] = f"{type(exc).__name__}: {exc}"
                replayed += 1
            if seen[key] is not None:
                failures.append(f"{wd.record_path}:{number}: replay failed: {seen[key]}")
            if progress is not None and done % 100 == 0:
                progress("replaying", done, total)
    if progress is not None:
        progress("replaying", total, total)
    return replayed, failures


# ---------------------------------------------------------------- writing


#: Records per INSERT call of an import (a progress step).
_WRITE_CHUNK = 20000


def commit_import(db: SQLiteDatabase, plan: ImportPlan, *, user: str | None = None, host: str | None = None,
                  model: str | None = None, summary: ImportSummary | None = None,
                  progress: ProgressFn | None = None) -> ImportSummary:
    """Phase 2: write the plan's good lines in one transaction (see the module docstring)."""
    from msdb.interop.tvm.import_writer import ImportWriter
    from msdb.ops import store

    summary = summary if summary is not None else ImportSummary()
    total = plan.n_records
    with db.write_transaction(records=total) as conn:
        writer = ImportWriter(conn, plan.targets, summary, user=user or store.default_user(),
                              host=host or store.default_host(), model=model, progress=progress, total=total)
        for wd in plan.workdirs:
            writer.workloads(wd)
            for rows in store.chunks(wd.records, _WRITE_CHUNK):
                writer.records(wd, rows)
            writer.done(wd)
    return summary


# ---------------------------------------------------------------- one call


def import_plan(db: SQLiteDatabase, plan: ImportPlan, *, skip_bad: bool = False, user: str | None = None,
                host: str | None = None, model: str | None = None, verify: bool = False,
                progress: ProgressFn | None = None) -> ImportSummary:
    """Phase 2 with its checks: refuse bad lines unless `skip_bad`, replay when `verify`, then
    `commit_import`. Raises `ImportAborted` before touching `db`."""
    start = time.perf_counter()
    plan.check(skip_bad)
    summary = ImportSummary(bad_lines=list(plan.bad_lines))
    if verify:
        summary.replayed, summary.replay_failures = replay_plan(plan, progress)
    commit_import(db, plan, user=user, host=host, model=model, summary=summary, progress=progress)
    summary.seconds = time.perf_counter() - start
    logger.info("import: %s", summary.line())
    return summary


def import_tvm(db: SQLiteDatabase, paths: Sequence[str | Path], *, skip_bad: bool = False, opaque: bool = False,
               user: str | None = None, host: str | None = None, model: str | None = None, verify: bool = False,
               progress: ProgressFn | None = None, workers: int | None = None) -> ImportSummary:
    """Import TVM work_dirs (or file pairs) into `db` in one transaction; see the module
    docstring. Raises `ImportAborted` (nothing written: the transaction is rolled back) when a
    line is bad and `skip_bad` is False, `WorkDirError` for a path that is not a work_dir.

    Without `verify`, rows are written while the lines are still being parsed (in worker
    processes for a big log: `workers`, as in `read_import`), so that SQLite's share of the
    work overlaps the parsing; with `verify`, every trace is replayed before anything is
    written (`read_import`, then `import_plan`)."""
    start = time.perf_counter()
    if verify:
        plan = read_import(paths, opaque=opaque, progress=progress, workers=workers)
        summary = import_plan(db, plan, skip_bad=skip_bad, user=user, host=host, model=model, verify=True,
                              progress=progress)
    else:
        summary = _import_streaming(db, paths, skip_bad=skip_bad, opaque=opaque, user=user, host=host, model=model,
                                    progress=progress, workers=workers)
    summary.seconds = time.perf_counter() - start
    logger.info("import: %s", summary.line())
    return summary


def _import_streaming(db: SQLiteDatabase, paths: Sequence[str | Path], *, skip_bad: bool, opaque: bool,
                      user: str | None, host: str | None, model: str | None, progress: ProgressFn | None,
                      workers: int | None) -> ImportSummary:
    """Read and write in one pass, inside one write transaction; bad lines that are not to be
    skipped raise `ImportAborted` at the end, which rolls everything back."""
    from msdb.interop.tvm.import_writer import ImportWriter
    from msdb.ops import store

    resolved = resolve_import_paths(paths)
    total = _line_count(resolved)
    reader = WorkDirReader(opaque=opaque, progress=progress, total=total, workers=workers)
    reader.phase = "importing"  # one pass: reading and writing
    summary = ImportSummary()
    with db.write_transaction(records=total) as conn:
        writer = ImportWriter(conn, reader.targets, summary, user=user or store.default_user(),
                              host=host or store.default_host(), model=model)
        for workload, record in resolved:
            reader.read(workload, record, sink=writer)
        if progress is not None:
            progress(reader.phase, reader.total, reader.total)
        bad = _in_file_order(reader.bad, resolved)
        if bad and not skip_bad:
            raise ImportAborted(bad)
        summary.bad_lines = bad
    return summary
