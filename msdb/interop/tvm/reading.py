"""Reading TVM work_dirs for an import, before (or without) a database: `read_import` (phase 1
of a two-phase import: everything read and checked, nothing written) and `replay_plan` (every
distinct trace replayed on its workload, as TVM does when it loads a log).

No trace is replayed or parsed into a `Trace` unless it must be rewritten (legacy `GetBlock`,
one-attribute `Split`) or a replay is asked for: TVM itself replays every trace while loading
(apache/tvm#11680), which is what makes it ~80x slower to load the same log. Writing what was
read is `msdb.database.tvm_import`'s job.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from msdb.errors import MsdbError
from msdb.interop.progress import ProgressFn
from msdb.interop.tvm.import_data import ImportPlan
from msdb.interop.tvm.import_reader import WorkDirReader, estimated_lines
from msdb.interop.tvm.workdir import BadLine, resolve_import_paths

__all__ = ["read_import", "replay_plan", "drop_lines", "expected_records", "in_file_order"]


def read_import(paths: Sequence[str | Path], *, opaque: bool = False, progress: ProgressFn | None = None,
                workers: int | None = None, unknown_kinds: bool = False) -> ImportPlan:
    """Read and check every work_dir; no database is touched. `paths` are work_dirs and files
    (see `msdb.interop.tvm.workdir.resolve_import_paths`). `workers`: processes that parse a
    big record file in parallel (None: one per CPU, up to 8, for files of more than 4,000
    lines; 1: none). The result does not depend on it. `unknown_kinds`: keep trace
    instructions of kinds TVM does not have instead of refusing their lines."""
    resolved = resolve_import_paths(paths)
    reader = WorkDirReader(opaque=opaque, progress=progress, total=expected_records(resolved), workers=workers,
                           unknown_kinds=unknown_kinds)
    workdirs = [reader.read(workload, record) for workload, record in resolved]
    if progress is not None:
        progress(reader.phase, reader.total, reader.total)
    return ImportPlan(workdirs, reader.targets, in_file_order(reader.bad, resolved))


def expected_records(pairs: list[tuple[Path, Path]]) -> int:
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


def in_file_order(bad: list[BadLine], pairs: list[tuple[Path, Path]]) -> list[BadLine]:
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


def drop_lines(plan: ImportPlan, lines: Sequence[BadLine]) -> None:
    """Remove the record rows of `lines` (record file and line) from the plan."""
    gone = {(line.path, line.line) for line in lines}
    for wd in plan.workdirs:
        if any(path == wd.record_path for path, _ in gone):
            wd.records = [row for row in wd.records if (wd.record_path, row[0]) not in gone]


def replay_plan(plan: ImportPlan, progress: ProgressFn | None = None) -> tuple[int, list[BadLine]]:
    """Replay every distinct (workload, trace) of the plan on the decoded workload, as TVM does
    when it loads a log; returns (replayed, the record lines whose replay failed, as
    `path:line: replay failed: reason`). Opaque workloads are never replayed."""
    from msdb.schedule import Schedule, Trace

    seen: dict[tuple[int, str], str | None] = {}
    failures: list[BadLine] = []
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
                failures.append(BadLine(wd.record_path, number, f"replay failed: {seen[key]}"))
            if progress is not None and done % 100 == 0:
                progress("replaying", done, total)
    if progress is not None:
        progress("replaying", total, total)
    return replayed, failures
