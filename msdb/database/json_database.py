"""`JSONDatabase`: TVM's two-file work_dir layout (docs/tvm-formats.md section 1), read and
appended safely.

Lines go through the one TVM line grammar (`msdb.interop.tvm.grammar`), as in `msdb import`.
Loading replays no trace and keeps going past bad lines (`load_errors`); appends hold a file
lock. How and why it differs from TVM's: docs/architecture.md, "Databases".
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Iterable, Iterator

from msdb.database.errors import BadRecordLine, DatabaseOpenError
from msdb.database.memory import MemoryDatabase
from msdb.interop.tvm.workdir import NOT_UTF8, RECORD_FILE, WORKLOAD_FILE
from msdb.records import TuningRecord, Workload

if TYPE_CHECKING:
    from msdb.ir.function import IRModule, PrimFunc

__all__ = ["JSONDatabase", "WORKLOAD_FILE", "RECORD_FILE"]

logger = logging.getLogger(__name__)

#: Why a blank line is noted while loading.
_BLANK = "empty line (TVM 0.27 crashes on it)"


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


def _lines(data: bytes, first_number: int) -> list[tuple[int, str | None]]:
    """Every line of `data` (but the empty one after a last newline) with its number: its
    text, "" when blank, None when it is not UTF-8."""
    raw_lines = data.split(b"\n")
    if raw_lines and raw_lines[-1] == b"":
        raw_lines.pop()
    try:
        texts: list[str | None] = list(data.decode("utf-8").split("\n")[:len(raw_lines)])
    except UnicodeDecodeError:
        texts = []
        for raw in raw_lines:
            try:
                texts.append(raw.decode("utf-8"))
            except UnicodeDecodeError:
                texts.append(None)
    return [(number, "" if text is not None and text.isspace() else text)
            for number, text in enumerate(texts, start=first_number)]


def _count_lines(data: bytes) -> int:
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


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
        from msdb.interop.tvm.grammar import LineParser  # the grammar loads the trace checks: on first use

        self._parser = LineParser()
        # workload line (blank lines are none) -> store index (None: a bad line), and store
        # index -> its first line
        self._line_to_index: list[int | None] = []
        self._index_to_line: dict[int, int] = {}
        self._workload_file_lines = 0  # lines read, blank ones included (for line numbers)
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
        path = self.path_workload
        for number, text in _lines(data, self._workload_file_lines + 1):
            if text == "":
                self._bad(path, number, _BLANK)
                continue
            index = None
            parsed = NOT_UTF8 if text is None else self._parser.workload(text, number)
            if isinstance(parsed, str):
                self._bad(path, number, parsed)
            elif parsed.mod is None:
                self._bad(path, number, parsed.undecodable())
            else:
                workload = Workload(parsed.mod, hashes=parsed.hashes, tvm_payload=parsed.payload,
                                    tvm_shash=parsed.tvm_shash)
                index = self._find(workload)
                if index is None:
                    index = self._store_workload(workload)
                    self._index_to_line[index] = len(self._line_to_index)
            self._line_to_index.append(index)
        self._workload_file_lines += _count_lines(data)
        self._workload_offset = start + len(data)
        self._partial_tail = bool(data) and not data.endswith(b"\n")

    def _read_records(self) -> None:
        path = self.path_tuning_record
        workloads = [None if index is None else self._workloads[index] for index in self._line_to_index]
        for number, text in _lines(path.read_bytes(), 1):
            if not text:
                self._bad(path, number, NOT_UTF8 if text is None else _BLANK)
                continue
            record = self._parser.tuning_record(text, workloads, self.path_workload.name)
            if isinstance(record, str):
                self._bad(path, number, record)
                continue
            self._append_record(record.workload._db_ids[self._key], record)

    # ---- appends ----
    def commit_workload(self, mod: IRModule | PrimFunc | Workload) -> Workload:
        workload = Workload.coerce(mod)
        index = self._find(workload)
        if index is not None:
            return self._workloads[index]
        from msdb.interop.tvm.grammar import workload_line

        line = workload_line(workload, self.module_equality)
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
            self._workload_file_lines += 1
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
        from msdb.interop.tvm.grammar import record_line

        text = "".join(record_line(self._index_to_line[index], record) + "\n" for index, record in resolved)
        with _locked(self.path_tuning_record, "a+b") as handle:
            prefix = b"\n" if _ends_without_newline(handle) else b""
            handle.write(prefix + text.encode("utf-8", errors="surrogateescape"))
        for index, record in resolved:
            self._append_record(index, record)
        return len(resolved)
