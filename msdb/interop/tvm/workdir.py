"""A TVM MetaSchedule work_dir: its two file names, how a path names one, and how a bad line
is reported (`path:line: reason`).

The reading itself is `msdb.interop.tvm.import_reader` (one reader for msdb import, fast on big
logs). It is more forgiving than TVM's own reader where TVM is fragile (TVM 0.27 segfaults on a
blank line and aborts the whole load on a truncated one) and stricter where TVM is silent (a
record that points at a workload line that does not exist).
"""

from __future__ import annotations

import pathlib
from dataclasses import dataclass

from msdb.errors import MsdbError

WORKLOAD_FILE = "database_workload.json"
RECORD_FILE = "database_tuning_record.json"


class WorkDirError(MsdbError):
    """A work_dir (or file pair) that cannot be read at all: missing files or directory."""


@dataclass(frozen=True)
class BadLine:
    """A line that could not be used, with where and why."""

    path: pathlib.Path
    line: int
    reason: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.reason}"


def resolve_paths(path: str | pathlib.Path, second: str | pathlib.Path | None = None) -> tuple[pathlib.Path, pathlib.Path]:
    """(workload file, record file) for a work_dir or an explicit pair of files."""
    first = pathlib.Path(path)
    if second is not None:
        pair = (first, pathlib.Path(second))
        for file in pair:
            if not file.is_file():
                raise WorkDirError(f"{file}: no such file")
        return pair
    if not first.exists():
        raise WorkDirError(f"{first}: no such file or directory")
    if not first.is_dir():
        raise WorkDirError(f"{first}: not a directory; pass a work_dir or the workload file and the record file")
    workload, record = first / WORKLOAD_FILE, first / RECORD_FILE
    missing = [p.name for p in (workload, record) if not p.is_file()]
    if missing:
        raise WorkDirError(f"{first}: not a MetaSchedule work_dir (missing {', '.join(missing)})")
    return workload, record
