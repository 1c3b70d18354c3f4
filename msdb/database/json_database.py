"""`JSONDatabase`: TVM's two-file work_dir layout, read and appended safely.

Layout (reference/tvm-metaschedule.md section 1): `database_workload.json` holds one
`[shash, base64]` line per workload; `database_tuning_record.json` one `[workload_index,
[trace, run_secs, target, args_info]]` line per record, `workload_index` being the 0-based line
number in the workload file. Lines are written in TVM's own JSON spelling
(`msdb.schedule.tvm_json`), so TVM 0.27 loads what msdb writes.

Differences from TVM, on purpose:
- Loading never replays traces; each is checked for shape and kept as its original text until
  used (big logs load fast, apache/tvm#11680, and a record whose trace cannot be applied does not
  abort the load, #16288).
- A bad line (truncated, not JSON, an unknown workload index, an undecodable payload, an empty
  line) is logged as `file:line: reason`, collected in `load_errors`, and the rest loads.
- Appends take an exclusive `fcntl.flock` on the file. Before appending a workload, lines other
  processes appended since this database read the file are read first, so every record line
  points at the right workload line (TVM keeps its own count and can point records at another
  process's workload). Records appended by other processes after loading are not seen until
  the database is opened again.
- A line left half-written by a killed writer is closed with a newline before the next append,
  so it spoils only itself.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Iterable, Iterator

from msdb.database.errors import BadRecordLine, DatabaseOpenError
from msdb.database.memory import MemoryDatabase
from msdb.errors import MsdbError
from msdb.records import Target, TuningRecord, Workload
from msdb.records.record import check_trace_json

if TYPE_CHECKING:
    from msdb.ir.function import IRModule, PrimFunc

__all__ = ["JSONDatabase", "WORKLOAD_FILE", "RECORD_FILE", "record_line", "RecordLineParser"]

logger = logging.getLogger(__name__)

WORKLOAD_FILE = "database_workload.json"
RECORD_FILE = "database_tuning_record.json"

_LINE_HEAD = re.compile(r"\s*\[\s*(-?\d+)\s*,\s*\[\s*")
_SEP = re.compile(r"\s*,\s*")
_TAIL = re.compile(r"\s*\]\s*\]\s*$")


@contextlib.contextmanager
def _locked(path: Path, mode: str) -> Iterator[BinaryIO]:
    """The file opened in binary `mode` under an exclusive flock (released on close)."""
    with open(path, mode) as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield handle  # type: ignore[misc]
        finally:
            handle.flush()
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _ends_without_newline(handle: BinaryIO) -> bool:
    size = handle.seek(0, os.SEEK_END)
    if size == 0:
        return False
    handle.seek(size - 1)
    last = handle.read(1)
    handle.seek(0, os.SEEK_END)
    return last != b"\n"


def record_line(workload_index: int, record: TuningRecord) -> str:
    """One line of `database_tuning_record.json`, in TVM's spelling, without the newline."""
    from msdb.schedule.tvm_json import dumps

    run_secs = dumps(list(record.run_secs)) if record.run_secs is not None else "null"
    target = record.target.canonical_json() if record.target is not None else "null"
    args = record.args_info_json()
    return f"[{workload_index},[{record.trace_text},{run_secs},{target},{dumps(args) if args is not None else 'null'}]]"


class RecordLineParser:
    """Parses record lines (`parse(line) -> (workload_index, parts)`), keeping each trace as its
    original text. Targets and arg infos repeat across lines, so their parsed values are shared
    by text; identical trace texts share one string."""

    def __init__(self) -> None:
        from msdb.schedule.tvm_json import JsonFloat

        self._decoder = json.JSONDecoder(parse_float=JsonFloat)  # run times keep their spelling
        self._trace_decoder = json.JSONDecoder()  # all C; the trace is kept as its original text anyway
        self._targets: dict[str, Target | None] = {}
        self._args: dict[str, Any] = {}
        self._traces: dict[str, str] = {}

    def _value(self, line: str, pos: int) -> tuple[Any, str, int]:
        match = _SEP.match(line, pos)
        if match is None:
            raise ValueError(f"expected ',' at column {pos + 1}")
        start = match.end()
        value, end = self._decoder.raw_decode(line, start)
        return value, line[start:end], end

    def parse(self, line: str) -> tuple[int, TuningRecordParts]:
        if "\\x" in line:  # TVM's byte escapes are not standard JSON: take the slow, general path
            return self._parse_general(line)
        head = _LINE_HEAD.match(line)
        if head is None:
            return self._parse_general(line)
        start = head.end()  # where the trace begins
        trace, end = self._trace_decoder.raw_decode(line, start)
        trace_text = line[start:end]
        seen = self._traces.get(trace_text)
        if seen is None:  # identical texts share one string, checked once
            check_trace_json(trace)
            seen = self._traces[trace_text] = trace_text
        trace_text = seen
        run_secs, _, end = self._value(line, end)
        target_value, target_text, end = self._value(line, end)
        args_value, args_text, end = self._value(line, end)
        if _TAIL.match(line, end) is None:
            raise ValueError("a record line is [workload_index, [trace, run_secs, target, args_info]]")
        return int(head.group(1)), self._parts(trace_text, run_secs, target_value, target_text, args_value, args_text)

    def _parse_general(self, line: str) -> tuple[int, TuningRecordParts]:
        from msdb.schedule.tvm_json import dumps, loads

        obj = loads(line)
        if not (isinstance(obj, list) and len(obj) == 2 and isinstance(obj[0], int) and isinstance(obj[1], list)):
            raise ValueError("a record line is [workload_index, [trace, run_secs, target, args_info]]")
        fields = (list(obj[1]) + [None] * 4)[:4]
        trace, run_secs, target, args = fields
        check_trace_json(trace)
        return obj[0], self._parts(dumps(trace), run_secs, target, dumps(target), args, dumps(args))

    def _parts(self, trace_text: str, run_secs: Any, target_value: Any, target_text: str,
               args_value: Any, args_text: str) -> TuningRecordParts:
        if run_secs is not None and not (isinstance(run_secs, list) and all(
                isinstance(r, (int, float)) and not isinstance(r, bool) for r in run_secs)):
            raise ValueError(f"run_secs must be a list of numbers or null, got {args_text[:60]}")
        if target_text not in self._targets:
            if target_value is None or target_value == {}:
                self._targets[target_text] = None
            else:
                self._targets[target_text] = Target(target_value)
        target = self._targets[target_text]
        if args_value is not None and not isinstance(args_value, list):
            raise ValueError("args_info must be a list or null")
        args = self._args.setdefault(args_text, args_value)
        return TuningRecordParts(trace_text, run_secs, target, args)


class TuningRecordParts:
    """The fields of a parsed record line, before its workload is attached."""

    __slots__ = ("trace_text", "run_secs", "target", "args")

    def __init__(self, trace_text: str, run_secs: Any, target: Target | None, args: Any) -> None:
        self.trace_text = trace_text
        self.run_secs = run_secs
        self.target = target
        self.args = args


class JSONDatabase(MemoryDatabase):
    """TVM's JSON database: `JSONDatabase(work_dir=...)` or explicit file paths.

    `allow_missing=True` creates missing files (and their folder); False raises
    `DatabaseOpenError`. `load_errors` lists the bad lines skipped while loading.
    """

    def __init__(self, path_workload: str | os.PathLike[str] | None = None,
                 path_tuning_record: str | os.PathLike[str] | None = None,
                 work_dir: str | os.PathLike[str] | None = None, allow_missing: bool = True,
                 module_equality: str = "structural") -> None:
        super().__init__(module_equality)
        if work_dir is not None:
            work = Path(work_dir)
            path_workload = path_workload if path_workload is not None else work / WORKLOAD_FILE
            path_tuning_record = path_tuning_record if path_tuning_record is not None else work / RECORD_FILE
        if path_workload is None or path_tuning_record is None:
            raise DatabaseOpenError("JSONDatabase needs work_dir=... or both path_workload= and path_tuning_record=")
        self.path_workload = Path(path_workload)
        self.path_tuning_record = Path(path_tuning_record)
        self.load_errors: list[BadRecordLine] = []
        # workload file line -> store index (None: a bad line), and store index -> first line
        self._line_to_index: list[int | None] = []
        self._index_to_line: dict[int, int] = {}
        self._workload_offset = 0
        self._partial_tail = False
        for path in (self.path_workload, self.path_tuning_record):
            if path.is_dir():
                raise DatabaseOpenError(f"{path} is a directory, not a JSON database file")
            if not path.exists():
                if not allow_missing:
                    raise DatabaseOpenError(f"{path} does not exist (pass allow_missing=True to create it)")
                path.parent.mkdir(parents=True, exist_ok=True)
                path.touch()
        self._read_workloads(self.path_workload.read_bytes(), 0)
        self._read_records()

    # ---- loading ----
    def _bad(self, path: Path, line: int, reason: str) -> None:
        error = BadRecordLine(str(path), line, reason)
        logger.warning("%s", error)
        self.load_errors.append(error)

    def _read_workloads(self, data: bytes, start: int) -> None:
        """Read the workload lines of `data` (the file from byte `start` on); a last line
        without a newline is read too and remembered, so the next append closes it first."""
        from msdb.schedule.tvm_json import loads

        lines = data.split(b"\n")
        if lines and lines[-1] == b"":
            lines.pop()
        for raw in lines:
            lineno = len(self._line_to_index) + 1
            index = None
            text = raw.decode("utf-8", errors="surrogateescape").strip()
            if not text:
                self._bad(self.path_workload, lineno, "empty line (TVM 0.27 crashes on it)")
            else:
                try:
                    workload = Workload.from_json(loads(text))
                except (ValueError, MsdbError) as exc:
                    self._bad(self.path_workload, lineno, f"bad workload line: {exc}")
                else:
                    index = self._find(workload)
                    if index is None:
                        index = self._store_workload(workload)
                        self._index_to_line[index] = lineno - 1
            self._line_to_index.append(index)
        self._workload_offset = start + len(data)
        self._partial_tail = bool(data) and not data.endswith(b"\n")

    def _read_records(self) -> None:
        data = self.path_tuning_record.read_bytes()
        parser = RecordLineParser()
        lines = data.split(b"\n")
        if lines and lines[-1] == b"":
            lines.pop()
        for lineno, raw in enumerate(lines, 1):
            text = raw.decode("utf-8", errors="surrogateescape")
            if not text.strip():
                self._bad(self.path_tuning_record, lineno, "empty line (TVM 0.27 crashes on it)")
                continue
            try:
                workload_line, parts = parser.parse(text)
            except (ValueError, MsdbError) as exc:
                self._bad(self.path_tuning_record, lineno, f"bad record line: {exc}")
                continue
            if not 0 <= workload_line < len(self._line_to_index):
                self._bad(self.path_tuning_record, lineno,
                          f"workload index {workload_line} is out of range (the workload file has {len(self._line_to_index)} lines)")
                continue
            index = self._line_to_index[workload_line]
            if index is None:
                self._bad(self.path_tuning_record, lineno, f"its workload (line {workload_line + 1}) could not be read")
                continue
            record = TuningRecord(parts.trace_text, self._workloads[index], parts.run_secs, parts.target, parts.args)
            self._append_record(index, record)

    # ---- appends ----
    def commit_workload(self, mod: IRModule | PrimFunc | Workload) -> Workload:
        workload = Workload.coerce(mod)
        index = self._find(workload)
        if index is not None:
            return self._workloads[index]
        line = json.dumps(workload.as_json(self.module_equality), separators=(",", ":"))
        with _locked(self.path_workload, "a+b") as handle:
            handle.seek(self._workload_offset)
            fresh = handle.read()
            if self._partial_tail:  # close the unterminated last line read at load time
                if fresh.startswith(b"\n"):
                    fresh = fresh[1:]
                elif not fresh:
                    handle.write(b"\n")
                self._workload_offset += 1
                self._partial_tail = False
            if fresh:  # other processes appended workloads since we read the file
                if not fresh.endswith(b"\n"):  # a writer died mid-line: end it, it spoils only itself
                    handle.write(b"\n")
                    fresh += b"\n"
                self._read_workloads(fresh, self._workload_offset)
                index = self._find(workload)
                if index is not None:
                    return self._workloads[index]
            handle.write(line.encode("utf-8") + b"\n")
            handle.flush()
            self._workload_offset = handle.tell()
        index = self._store_workload(workload)
        self._index_to_line[index] = len(self._line_to_index)
        self._line_to_index.append(index)
        return workload

    def commit_tuning_record(self, record: TuningRecord) -> None:
        self.commit_tuning_records([record])

    def commit_tuning_records(self, records: Iterable[TuningRecord]) -> int:
        resolved = [self._resolve(r) for r in records]
        if not resolved:
            return 0
        text = "".join(record_line(self._index_to_line[index], record) + "\n" for index, record in resolved)
        with _locked(self.path_tuning_record, "a+b") as handle:
            prefix = b"\n" if _ends_without_newline(handle) else b""
            handle.write(prefix + text.encode("utf-8", errors="surrogateescape"))
        for index, record in resolved:
            self._append_record(index, record)
        return len(resolved)
