"""A TVM MetaSchedule work_dir as files (docs/tvm-formats.md section 1): its two file names, how
paths name work_dirs, how a file splits into lines, how a bad line is reported
(`path:line: reason`), and writing a work_dir atomically.

What a line means is `msdb.interop.tvm.grammar`'s job; reading whole work_dirs fast is
`msdb.interop.tvm.import_reader`'s. msdb is more forgiving than TVM's own reader where TVM is
fragile: a blank line is skipped (TVM 0.27 segfaults on it) and is no line at all, so it takes
no workload index; a line that is not UTF-8 is reported and still takes its index.
"""

from __future__ import annotations

import os
import pathlib
import shutil
from dataclasses import dataclass
from typing import Sequence

from msdb.errors import MsdbError

__all__ = [
    "WORKLOAD_FILE", "RECORD_FILE", "NOT_UTF8", "WorkDirError", "ExportError", "BadLine", "resolve_paths",
    "resolve_import_paths", "nonblank_lines", "file_lines", "check_output_dir", "write_workdir",
]

#: The workload file of a work_dir: one `[shash, payload]` line per workload.
WORKLOAD_FILE = "database_workload.json"
#: The record file of a work_dir: one `[workload_index, [trace, run_secs, target, args_info]]`
#: line per record.
RECORD_FILE = "database_tuning_record.json"
#: Why a line that is not UTF-8 text is bad.
NOT_UTF8 = "line is not UTF-8 text"


class WorkDirError(MsdbError):
    """A work_dir (or file pair) that cannot be read at all: missing files or directory."""


class ExportError(MsdbError):
    """A work_dir msdb refuses to write (a bad OUTDIR, k < 1); nothing was written."""


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


def resolve_import_paths(paths: Sequence[str | pathlib.Path]) -> list[tuple[pathlib.Path, pathlib.Path]]:
    """(workload file, record file) for each work_dir in `paths`; consecutive files pair up as
    (workload file, record file), in either order. Raises `WorkDirError` naming the path."""
    pairs: list[tuple[pathlib.Path, pathlib.Path]] = []
    pending: pathlib.Path | None = None
    for raw in paths:
        path = pathlib.Path(raw)
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


def nonblank_lines(lines: list[str]) -> list[tuple[int, str]]:
    """The lines that are not blank, with their 1-based numbers."""
    return [(number, line) for number, line in enumerate(lines, start=1) if line and not line.isspace()]


def file_lines(data: bytes, first_number: int = 1) -> list[tuple[int, str | None]]:
    """The non-blank lines of a file's bytes with their numbers (counted from `first_number`); a
    line that is not UTF-8 comes back as None (report it as `NOT_UTF8`: it still is a line).
    A last line without a newline is a line too."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    else:
        lines = text.split("\n")
        return [(number + first_number - 1, line) for number, line in nonblank_lines(lines)]
    out: list[tuple[int, str | None]] = []
    for number, raw in enumerate(data.split(b"\n"), start=first_number):
        if not raw.strip():
            continue
        try:
            out.append((number, raw.decode("utf-8")))
        except UnicodeDecodeError:
            out.append((number, None))
    return out


# ---------------------------------------------------------------- writing


def check_output_dir(out: pathlib.Path) -> None:
    """Refuse an OUTDIR that is not a work_dir to replace (`ExportError`, nothing written)."""
    if out.exists() and not out.is_dir():
        raise ExportError(f"{out} exists and is not a directory; give a new or work_dir path for the export")
    if out.is_dir():
        extra = sorted(p.name for p in out.iterdir() if p.name not in (WORKLOAD_FILE, RECORD_FILE))
        if extra:
            shown = ", ".join(extra[:5]) + (", ..." if len(extra) > 5 else "")
            raise ExportError(f"{out} holds other files ({shown}); msdb export only replaces a TVM work_dir; "
                              "choose another OUTDIR")
    if not out.parent.is_dir():
        raise ExportError(f"cannot export to {out}: folder {out.parent} does not exist")


def write_workdir(out: pathlib.Path, workload_text: str, record_text: str) -> None:
    """Write a work_dir's two files atomically: into a fresh directory beside `out`, flushed,
    then renamed into place (an existing `out` is moved aside first and removed after), so a
    killed writer leaves the old work_dir or the new one, never a half-written file TVM would
    abort on. Call `check_output_dir(out)` first.

    The folders beside `out` (`.OUT.export-*`, `.OUT.old-*`) are locked while in use; those a
    killed export left behind are removed first, and a moved-aside work_dir whose replacement
    never arrived is put back (`msdb.staging`; docs/architecture.md, "Processes, temporary
    files and interrupts")."""
    from msdb.staging import StagingDir, aside_name, lock_path, sweep, unlock

    parent = out.parent
    sweep(parent, (f".{out.name}.export-", f".{out.name}.old-"), keep=lambda path: _put_back(path, out))
    stage = StagingDir.create(parent, f".{out.name}.export-")
    staging = stage.path
    old: pathlib.Path | None = None
    old_lock: int | None = None
    try:
        for name, text in ((WORKLOAD_FILE, workload_text), (RECORD_FILE, record_text)):
            with open(staging / name, "w", encoding="utf-8", newline="\n") as handle:
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())
        os.chmod(staging, 0o755)
        if out.exists():
            # locked before it is moved: a concurrent export's sweep leaves it alone
            old_lock = lock_path(out, wait=True)
            old = aside_name(parent, f".{out.name}.old-")
            os.rename(out, old)
        try:
            os.rename(staging, out)
        except BaseException:
            if old is not None:
                os.rename(old, out)  # put the previous work_dir back
            raise
    except BaseException:
        stage.remove()
        unlock(old_lock)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    _fsync_dir(parent)
    unlock(old_lock)
    stage.release()


def _put_back(old: pathlib.Path, out: pathlib.Path) -> bool:
    """A moved-aside work_dir whose export was killed before the new one took its place: put
    it back when `out` is missing (True); otherwise it is a leftover (False)."""
    if old.name.startswith(f".{out.name}.old-") and not os.path.lexists(out):
        try:
            os.rename(old, out)
        except OSError:
            return False
        return True
    return False


def _fsync_dir(path: pathlib.Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)
