"""Read a TVM MetaSchedule work_dir (`database_workload.json` + `database_tuning_record.json`)
line by line, with every problem reported as `path:line: reason`.

This is the parsing half of `msdb import`: it turns the two JSON-lines files into plain entries
and collects bad lines instead of stopping at the first, so the importer can either refuse the
whole file (the default: one transaction, nothing written) or skip the bad lines and list them.
It is more forgiving than TVM's own reader where TVM is fragile (TVM 0.27 segfaults on a blank
line and aborts the whole load on a truncated one) and stricter where TVM is silent (a record
that points at a workload line that does not exist).
"""

from __future__ import annotations

import hashlib
import json
import pathlib
from dataclasses import dataclass, field
from typing import Any

from msdb.errors import MsdbError
from msdb.interop.tvm.payload import PayloadError, graph_tvm_version, load_graph

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


@dataclass(frozen=True)
class WorkloadEntry:
    """One line of the workload file: TVM's advisory shash and the base64 payload, plus the
    graph's TVM version when the payload decodes as JSON."""

    line: int
    tvm_shash: str
    payload: str
    tvm_version: str | None


@dataclass(frozen=True)
class RecordEntry:
    """One line of the record file, shape-checked but not yet interpreted."""

    line: int
    workload_index: int
    trace: Any
    run_secs: list[float] | None
    target: Any
    args_info: Any


@dataclass
class WorkDir:
    """What was read from one work_dir: usable entries, bad lines, and the files' digests."""

    workload_path: pathlib.Path
    record_path: pathlib.Path
    workloads: list[WorkloadEntry] = field(default_factory=list)
    records: list[RecordEntry] = field(default_factory=list)
    bad_lines: list[BadLine] = field(default_factory=list)
    workload_sha256: str = ""
    record_sha256: str = ""

    @property
    def tvm_version(self) -> str | None:
        versions = {w.tvm_version for w in self.workloads if w.tvm_version}
        return sorted(versions)[-1] if versions else None


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


def read_workdir(path: str | pathlib.Path, second: str | pathlib.Path | None = None) -> WorkDir:
    """Read both files; bad lines are collected in `bad_lines`, never raised."""
    workload_path, record_path = resolve_paths(path, second)
    result = WorkDir(workload_path, record_path)
    workload_bytes = workload_path.read_bytes()
    record_bytes = record_path.read_bytes()
    result.workload_sha256 = hashlib.sha256(workload_bytes).hexdigest()
    result.record_sha256 = hashlib.sha256(record_bytes).hexdigest()

    workload_lines: list[int] = []  # workload index -> line number (only non-blank lines count)
    for number, text in _lines(workload_path, workload_bytes, result.bad_lines):
        workload_lines.append(number)
        entry = _workload_entry(number, text)
        if isinstance(entry, str):
            result.bad_lines.append(BadLine(workload_path, number, entry))
        else:
            result.workloads.append(entry)
    bad_workload_lines = {b.line for b in result.bad_lines if b.path == workload_path}

    for number, text in _lines(record_path, record_bytes, result.bad_lines):
        entry = _record_entry(number, text)
        if isinstance(entry, str):
            result.bad_lines.append(BadLine(record_path, number, entry))
            continue
        if not 0 <= entry.workload_index < len(workload_lines):
            result.bad_lines.append(BadLine(record_path, number, f"record points at workload index {entry.workload_index}, but {workload_path.name} has {len(workload_lines)} workload(s)"))
            continue
        if workload_lines[entry.workload_index] in bad_workload_lines:
            result.bad_lines.append(BadLine(record_path, number, f"record points at workload index {entry.workload_index}, whose line {workload_lines[entry.workload_index]} is bad"))
            continue
        result.records.append(entry)
    return result


def _lines(path: pathlib.Path, data: bytes, bad: list[BadLine]) -> list[tuple[int, str]]:
    """Non-blank lines with their 1-based numbers; undecodable lines are reported."""
    out = []
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        try:
            out.append((number, raw.decode("utf-8")))
        except UnicodeDecodeError:
            bad.append(BadLine(path, number, "line is not UTF-8 text"))
    return out


def _parse_json(text: str) -> Any | str:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        if exc.msg.startswith("Unterminated") or exc.pos >= len(text.rstrip()) - 1:
            return f"truncated JSON ({exc.msg} at column {exc.colno})"
        return f"invalid JSON ({exc.msg} at column {exc.colno})"


def _workload_entry(number: int, text: str) -> WorkloadEntry | str:
    value = _parse_json(text)
    if isinstance(value, str):
        return value
    if not (isinstance(value, list) and len(value) == 2 and all(isinstance(v, str) for v in value)):
        return 'expected a workload line ["<shash>", "<base64 payload>"]'
    shash, payload = value
    if not shash.isdigit():
        return f"workload shash {shash!r} is not a decimal integer"
    try:
        graph = load_graph(payload)
    except PayloadError as exc:
        return str(exc)
    return WorkloadEntry(number, shash, payload, graph_tvm_version(graph))


def _record_entry(number: int, text: str) -> RecordEntry | str:
    value = _parse_json(text)
    if isinstance(value, str):
        return value
    if not (isinstance(value, list) and len(value) == 2 and isinstance(value[0], int) and not isinstance(value[0], bool)):
        return "expected a record line [workload_index, [trace, run_secs, target, args_info]]"
    index, body = value
    if not (isinstance(body, list) and 1 <= len(body) <= 4):
        return "expected [trace, run_secs, target, args_info] after the workload index"
    body = list(body) + [None] * (4 - len(body))
    trace, run_secs, target, args_info = body
    if not (isinstance(trace, list) and len(trace) == 2 and isinstance(trace[0], list) and isinstance(trace[1], list)):
        return "trace must be [instructions, decisions]"
    if run_secs is not None:
        if not isinstance(run_secs, list) or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in run_secs):
            return f"run_secs must be a list of numbers or null, got {json.dumps(run_secs)[:60]}"
        run_secs = [float(x) for x in run_secs]
    if target is not None and not isinstance(target, (dict, str)):
        return f"target must be a config object or a target string, got {json.dumps(target)[:60]}"
    if args_info is not None and not isinstance(args_info, list):
        return "args_info must be a list"
    return RecordEntry(number, index, trace, run_secs, target, args_info)
