"""The reading half of `msdb import`, its one reader: TVM work_dirs into `ParsedWorkDir`s, fast.

`read_import(paths, sink=...)` reads every work_dir named; `WorkDirReader.read` reads each work_dir's two files and hands every line to the one TVM line
grammar (`msdb.interop.tvm.grammar.LineParser`, shared with `JSONDatabase`): each distinct
workload payload is decoded and hashed once, each record line parsed once. Problems are
collected as `BadLine`s (`path:line: reason`), never raised half-way. Rows go to the caller's
sink (`RecordSink`: the database's import writer, `--verify`'s `ReplayCheck` before it, or a
check that keeps nothing) in batches as they are parsed, or without a sink are kept in the
`ParsedWorkDir`.

Speed (>= 20k records/s, docs/benchmarks.md): besides the grammar's quick path, a big record
file is parsed by forked worker processes, a stretch of lines each (`_parse_chunk`), while the
parent hands finished stretches to the sink and hashes the file in a thread. The workers die
with the parent however it ends and leave Ctrl-C to it (`_start_worker`).
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Sequence

from msdb.errors import MsdbError
from msdb.interop.progress import ProgressFn
from msdb.interop.tvm.grammar import LineParser, ParsedWorkload, blocks_of, trace_offset
from msdb.interop.tvm.import_data import ImportPlan, ParsedWorkDir, RecordSink
from msdb.interop.tvm.workdir import NOT_UTF8, BadLine, WorkDirError, file_lines, nonblank_lines, resolve_import_paths
from msdb.lifeline import close_write_end, ignore_sigint, lifeline_fds, sigint_blocked, watch_parent

if TYPE_CHECKING:
    from msdb.records import Target

__all__ = ["ImportWorkerError", "WorkDirReader", "read_import", "read_pairs", "expected_records", "in_file_order", "estimated_lines"]


class ImportWorkerError(MsdbError):
    """A worker process parsing a record file died (killed from outside); nothing was written."""


#: Record lines per progress report (and per batch handed to a sink, on one process).
_PROGRESS_EVERY = 2000


def read_import(paths: Sequence[str | Path], *, sink: RecordSink | None = None, opaque: bool = False,
                progress: ProgressFn | None = None, workers: int | None = None, unknown_kinds: bool = False,
                phase: str = "reading") -> ImportPlan:
    """Read and check every work_dir of `paths` (work_dirs and files, see
    `msdb.interop.tvm.workdir.resolve_import_paths`); no database is touched. With a `sink`,
    each work_dir's rows are handed to it as they are parsed (not kept in the result).
    `workers`: processes that parse a big record file in parallel (None: one per CPU, up to 8,
    for files of more than 4,000 lines; 1: none); the result does not depend on it.
    `unknown_kinds`: keep trace instructions of kinds TVM does not have instead of refusing
    their lines. `phase` names the progress reports. Bad lines come in file order."""
    pairs = resolve_import_paths(paths)
    return read_pairs(pairs, expected_records(pairs), sink=sink, opaque=opaque, progress=progress, workers=workers,
                      unknown_kinds=unknown_kinds, phase=phase)


def read_pairs(pairs: list[tuple[Path, Path]], total: int, *, sink: RecordSink | None = None, opaque: bool = False,
               progress: ProgressFn | None = None, workers: int | None = None, unknown_kinds: bool = False,
               phase: str = "reading") -> ImportPlan:
    """`read_import` of work_dirs already resolved into (workload file, record file) pairs,
    `total` their `expected_records` (for a caller that needs both before reading)."""
    reader = WorkDirReader(opaque=opaque, progress=progress, total=total, workers=workers, unknown_kinds=unknown_kinds)
    reader.phase = phase
    workdirs = [reader.read(workload, record, sink) for workload, record in pairs]
    if progress is not None:
        progress(reader.phase, reader.total, reader.total)
    return ImportPlan(workdirs, reader.targets, in_file_order(reader.bad, pairs))


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


def in_file_order(bad: Sequence[BadLine], pairs: list[tuple[Path, Path]]) -> list[BadLine]:
    """Bad lines in the order of the files given, then of their lines (parallel parsing and a
    replay pass find them out of order)."""
    order: dict[Path, int] = {}
    for i, (workload, record) in enumerate(pairs):
        order.setdefault(workload, 2 * i)
        order.setdefault(record, 2 * i + 1)
    return sorted(bad, key=lambda b: (order.get(b.path, 2 * len(pairs)), b.line))


class WorkDirReader:
    """Reads work_dirs, one `read` call each, into `ParsedWorkDir`s or a sink; keeps one line
    parser across lines and files (`lines`: what repeats, decoded payloads, parsed targets,
    checked sketches, is learnt once) and the bad lines found (`bad`).

    `opaque`: a payload msdb cannot decode (TVM's <= 0.21 graph format, a node type msdb's IR
    lacks) is kept as an opaque workload instead of being a bad line. `unknown_kinds`: a trace
    instruction of a kind TVM does not have is kept instead of making its line bad."""

    def __init__(self, *, opaque: bool, progress: ProgressFn | None, total: int, workers: int | None = 1,
                 unknown_kinds: bool = False) -> None:
        self.lines = LineParser(unknown_kinds=unknown_kinds)
        self.unknown_kinds = unknown_kinds
        self.workers = workers
        self.opaque = opaque
        self.progress = progress
        self.bad: list[BadLine] = []
        #: The progress phase this reader reports.
        self.phase = "reading"
        self.done = 0
        self.total = total

    @property
    def targets(self) -> dict[str, Target | None]:
        """The targets of the record rows read so far, by their `target_key`."""
        return self.lines.targets

    # ---- lines ----
    def workload_line(self, path: Path, number: int, text: str) -> ParsedWorkload | None:
        parsed = self.lines.workload(text, number)
        if isinstance(parsed, str):
            self._bad(path, number, parsed)
            return None
        if parsed.is_opaque and not self.opaque:
            self._bad(path, number, f"{parsed.undecodable()} (--opaque imports it as an opaque payload keyed by TVM's "
                                    f"shash {parsed.tvm_shash}, excluded from replay)")
            return None
        return parsed

    def _bad(self, path: Path, number: int, reason: str) -> None:
        self.bad.append(BadLine(path, number, reason))

    def record_line(self, wd: ParsedWorkDir, path: Path, number: int, text: str, workload_file: str) -> None:
        """One record line (number `number` of `path`) into `wd.records` or `bad`; `workload_file`
        names the workload file in reasons."""
        fields = self.lines.record(text, wd.workloads, workload_file)
        if type(fields) is tuple:
            wd.records.append((number,) + fields)
        else:
            self.bad.append(BadLine(path, number, fields))  # type: ignore[arg-type]

    # ---- files ----
    def read(self, workload_path: Path, record_path: Path, sink: RecordSink | None = None) -> ParsedWorkDir:
        """Parse one work_dir. With a `sink`, its workloads, then its record rows in batches
        (not kept in the result), then its end are handed to the sink as they are parsed."""
        try:
            workload_bytes = workload_path.read_bytes()
            record_bytes = record_path.read_bytes()
        except OSError as exc:
            raise WorkDirError(f"{exc.filename}: cannot read ({exc.strerror})") from None
        wd = ParsedWorkDir(workload_path, record_path, hashlib.sha256(workload_bytes).hexdigest(), "",
                           targets=self.targets)
        for number, text in file_lines(workload_bytes):
            # a line that is not UTF-8 still holds its index: the records after it keep theirs
            if text is None:
                self._bad(workload_path, number, NOT_UTF8)
            wd.workloads.append(None if text is None else self.workload_line(workload_path, number, text))
        if sink is not None:
            sink.workloads(wd)
        normalized = self.lines.normalized
        digest = _Sha256(record_bytes)
        try:
            text = record_bytes.decode("utf-8")
        except UnicodeDecodeError:
            # line by line, naming the lines that are not UTF-8
            lines = []
            for number, line in file_lines(record_bytes):
                if line is None:
                    self._bad(record_path, number, NOT_UTF8)
                else:
                    lines.append((number, line))
        else:
            del record_bytes  # a big log: hold the bytes, the text and its lines no longer than needed
            workers = _worker_count(self.workers, _estimated_lines(text))
            if workers > 1:
                self.done += self._read_records_parallel(wd, record_path, text, workers, digest, sink)
                return self._finish(wd, digest, sink)
            lines = nonblank_lines(text.split("\n"))
            del text
        digest.start()
        progress, every = self.progress, _PROGRESS_EVERY
        workload_file = wd.workload_path.name
        for count, (number, text) in enumerate(lines, start=1):
            self.record_line(wd, record_path, number, text, workload_file)
            if count % every == 0:
                if progress is not None:
                    progress(self.phase, min(self.done + count, self.total), self.total)
                if sink is not None:
                    sink.records(wd, wd.records)
                    wd.records = []
        self.done += len(lines)
        wd.normalized += self.lines.normalized - normalized
        return self._finish(wd, digest, sink)

    @staticmethod
    def _finish(wd: ParsedWorkDir, digest: _Sha256, sink: RecordSink | None) -> ParsedWorkDir:
        wd.record_sha256 = digest.hexdigest()
        if sink is not None:
            sink.records(wd, wd.records)
            wd.records = []
            sink.done(wd)
        return wd

    def _read_records_parallel(self, wd: ParsedWorkDir, path: Path, text: str, workers: int, digest: _Sha256,
                               sink: RecordSink | None) -> int:
        """`record_line` for every line of the record file's `text`, in forked worker processes
        (the trace checks are most of an import's time); returns the number of lines.

        Workers inherit `text` through fork and each splits its own stretch of it into lines:
        handing them a list of 100k line strings instead made every worker dirty (copy) the
        page of each line it touched, through the reference count, which cost more than the
        parsing it saved. Rows come back compact: a trace that is the line's own text comes
        back as offsets into `text`, not as text."""
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        global _FORK_TEXT
        # what each workload line is to a worker: None (a bad line), its blocks (the traces
        # pointing at it are checked against them) or True (not checked: opaque)
        shapes = [None if w is None else (blocks_of(w) or True) for w in wd.workloads]
        # several chunks per worker even for a smaller log, so that writing the first chunks
        # overlaps parsing the last ones
        per_chunk = min(_CHUNK, max(_MIN_CHUNK, _estimated_lines(text) // (4 * workers)))
        tasks = [(lo, hi, str(path), wd.workload_path.name, shapes, self.unknown_kinds)
                 for lo, hi in _line_chunks(text, per_chunk)]
        _FORK_TEXT = text
        n_lines = 0  # lines of the chunks done so far: the number of the next chunk's first line, minus one
        try:
            # an executor, not multiprocessing.Pool: a worker killed from outside (the OOM
            # killer) raises BrokenProcessPool here instead of leaving the import, and the
            # write transaction it holds open, waiting forever
            # each worker dies with this process, whatever kills it, and leaves Ctrl-C to it
            # (docs/architecture.md, "Processes, temporary files and interrupts")
            read_end, write_end = lifeline_fds()
            pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"),
                                       initializer=_start_worker, initargs=(os.getpid(), read_end, write_end))
            try:
                with sigint_blocked():  # the workers start with Ctrl-C blocked, then ignore it
                    results = pool.map(_parse_chunk, tasks)  # forks the workers (all at once, under "fork")
                digest.start()  # its thread starts after the fork: a forked child has only the main thread
                for count, records, bad, targets, errors, normalized in _checked(results, path):
                    rows = []
                    for row in records:
                        trace = row[3]
                        if type(trace) is tuple:
                            trace = text[trace[0]:trace[1]]
                        rows.append((row[0] + n_lines, row[1], row[2], trace) + row[4:])
                    self.bad.extend(BadLine(b.path, b.line + n_lines, b.reason) for b in bad)
                    for key, config in targets.items():
                        if key not in self.lines.targets:
                            self.lines.targets[key] = None if config is None else _target_from_canonical(config)
                    if sink is not None:
                        sink.records(wd, rows)  # the workers parse the next chunks meanwhile
                    else:
                        wd.records.extend(rows)
                    self.lines.target_errors.update(errors)
                    wd.normalized += normalized
                    n_lines += count
                    if self.progress is not None:
                        self.progress(self.phase, min(self.done + n_lines, self.total), self.total)
            finally:
                # on an error (the sink's, a bad worker), chunks not started are dropped instead
                # of parsed to the end first
                pool.shutdown(wait=True, cancel_futures=True)
        finally:
            _FORK_TEXT = None
        return n_lines


class _Sha256:
    """The sha256 of a record file, computed in a thread while its lines are parsed: hashlib
    releases the GIL on large buffers, so on a second core the 250 MB of a 100k-record log
    hash for free instead of adding a tenth to the import."""

    def __init__(self, data: bytes) -> None:
        self._data: bytes | None = data
        self._hash = hashlib.sha256()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="msdb-import-sha256", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        assert self._data is not None
        self._hash.update(self._data)
        self._data = None

    def hexdigest(self) -> str:
        if self._thread is None:
            self._run()
        else:
            self._thread.join()
        return self._hash.hexdigest()


#: Lines per parallel parsing task (about), and the smallest record file worth forking for.
_CHUNK = 5000
_MIN_CHUNK = 500
_PARALLEL_MIN_LINES = 4000
_MAX_WORKERS = 8
#: The record file's text a forked worker reads (set by the parent just before forking).
_FORK_TEXT: str | None = None


def _worker_count(requested: int | None, n_lines: int) -> int:
    import multiprocessing

    if requested is not None:
        wanted = requested
    else:
        if n_lines < _PARALLEL_MIN_LINES:
            return 1
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        wanted = min(cpus, _MAX_WORKERS)
    if wanted <= 1 or "fork" not in multiprocessing.get_all_start_methods():
        return 1
    return min(wanted, max(1, (n_lines + _CHUNK - 1) // _CHUNK))


def _checked(results: Iterator[tuple[Any, ...]], path: Path) -> Iterator[tuple[Any, ...]]:
    """`results`, with a parsing worker's death told as an `MsdbError` naming the file."""
    from concurrent.futures.process import BrokenProcessPool

    try:
        yield from results
    except BrokenProcessPool as exc:
        raise ImportWorkerError(f"{path}: a process parsing this file died ({exc}); nothing was imported") from None


def estimated_lines(sample: str | bytes, size: int) -> int:
    """About how many lines a text (or file) of `size` characters (or bytes) holds whose start
    is `sample`: its size over the mean line length in the sample. Counting the newlines of a
    250 MB log costs a tenth of a second; this only decides how to split the work and how long
    a progress bar is."""
    newlines = sample.count(b"\n") if isinstance(sample, bytes) else sample.count("\n")
    return max(1, size * (newlines + 1) // max(1, len(sample)))


def _estimated_lines(text: str) -> int:
    return estimated_lines(text[:1 << 16], len(text))


def _line_chunks(text: str, lines_per_chunk: int) -> list[tuple[int, int]]:
    """(start, end) of stretches of `text` of about `lines_per_chunk` whole lines each."""
    step = max(1, len(text) * lines_per_chunk // _estimated_lines(text))
    chunks = []
    lo = 0
    while lo < len(text):
        cut = text.find("\n", min(lo + step, len(text)) - 1)
        hi = len(text) if cut < 0 else cut + 1
        chunks.append((lo, hi))
        lo = hi
    return chunks


def _parse_chunk(task: tuple[Any, ...]) -> tuple[Any, ...]:
    """Worker: the record lines of text[lo:hi] of the forked parent's `_FORK_TEXT` through the
    grammar. Line numbers are counted from the chunk's start (the parent adds the lines before
    it); a trace that is its line's own text comes back as offsets into the text."""
    lo, hi, path_text, workload_file, shapes, unknown_kinds = task
    text = _FORK_TEXT
    assert text is not None
    path = Path(path_text)
    parser = _worker_parser(unknown_kinds)
    normalized = parser.normalized
    workloads = [_PLACEHOLDER if shape is True else shape for shape in shapes]
    out: list[tuple[Any, ...]] = []
    bad: list[BadLine] = []
    lines = text[lo:hi].split("\n")
    if lines[-1] == "":
        lines.pop()  # the chunk ends with a newline: no line after it
    offset = lo
    for number, line in enumerate(lines, start=1):
        fields = parser.record(line, workloads, workload_file) if line and not line.isspace() else None
        if isinstance(fields, str):
            bad.append(BadLine(path, number, fields))
        elif fields is not None:
            trace = fields[2]
            start = trace_offset(line)
            if start is not None and line.startswith(trace, start):
                start += offset
                out.append((number, *fields[:2], (start, start + len(trace)), *fields[3:]))
            else:
                out.append((number, *fields))
        offset += len(line) + 1
    targets = {key: (None if t is None else t.canonical_json()) for key, t in parser.targets.items()}
    return len(lines), out, bad, targets, parser.target_errors, parser.normalized - normalized


def _start_worker(parent_pid: int, read_end: int, write_end: int) -> None:
    """Worker: watch the parent (a worker must not outlive an import killed even by SIGKILL)
    and ignore SIGINT (Ctrl-C reaches the whole process group; the parent alone decides what it
    means, so a worker prints no traceback)."""
    ignore_sigint()
    close_write_end(write_end)
    watch_parent(parent_pid, read_end)


_PLACEHOLDER = object()
#: A worker process's line parser, kept across its tasks: what it learnt (sketches, line tails,
#: targets) is the same for every chunk of a log, and learning it again per chunk cost a
#: tenth of the parse.
_WORKER_PARSER: dict[bool, LineParser] = {}


def _worker_parser(unknown_kinds: bool) -> LineParser:
    parser = _WORKER_PARSER.get(unknown_kinds)
    if parser is None:
        parser = _WORKER_PARSER[unknown_kinds] = LineParser(unknown_kinds=unknown_kinds)
    return parser


def _target_from_canonical(config: str) -> Target:
    from msdb.records import Target

    return Target(json.loads(config))
