"""The reading half of `msdb import`: TVM work_dirs into `ParsedWorkDir`s, fast.

`WorkDirReader.read` decodes each distinct workload payload once into msdb IR and hashes it, then
parses every record line once: its trace shape-checked and normalized to TVM 0.27's form (see
`msdb.interop.tvm.trace_check`), its target parsed once per distinct target, its run_secs
spelled as TVM does. Problems are collected as `BadLine`s (`path:line: reason`), never raised
half-way. Rows go to the caller's sink (`ImportWriter`) in batches as they are parsed, or are
kept in the `ParsedWorkDir`.

Speed (DESIGN.md section 11, >= 20k records/s): the trace is stored as the exact text the file
holds (TVM's own writer output), so its dedup hash is that of TVM's bytes. A trace's sketch (the
instructions before EnterPostproc, shared by the records of a design space) is checked once per
distinct text; the rest is checked as text by one regular expression, and only the decisions
and run_secs are scanned into Python values (`WorkDirReader._quick`). Lines not in TVM's compact form,
or that need rewriting or reporting, take a slower path with the same result. A big record file
is parsed by forked worker processes, a stretch of lines each (`_parse_chunk`).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
from hashlib import blake2b
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from msdb.errors import MsdbError
from msdb.interop.tvm.import_data import FAILED_RUN_SECS, ParsedWorkDir, ParsedWorkload
from msdb.interop.tvm.payload import (
    LegacyPayloadError, PayloadError, UnsupportedNodeError, decode_graph, graph_tvm_version, load_graph,
)
from msdb.interop.tvm.trace_check import (
    legacy_kinds, needs_rewrite, normalize_trace_json, postproc_pattern, scan_trace, short_json, well_formed,
)
from msdb.interop.tvm.workdir import BadLine, WorkDirError
from msdb.ops.store import OPAQUE_LEGACY, OPAQUE_UNSUPPORTED, ProgressFn
from msdb.schedule.tvm_json import JsonFloat

if TYPE_CHECKING:
    from msdb.interop.tvm.import_writer import ImportWriter
    from msdb.records import Target

__all__ = ["ImportWorkerError", "WorkDirReader", "estimated_lines"]


class ImportWorkerError(MsdbError):
    """A worker process parsing a record file died (killed from outside); nothing was written."""


#: Record lines per progress report (and per batch handed to a sink, on one process).
_PROGRESS_EVERY = 2000
#: `[index,[` at a record line's start; the index as JSON spells an integer (not `00`, ASCII digits).
_RECORD_HEAD = re.compile(r"\[(-?(?:0|[1-9][0-9]*)),\[")
#: The C scanner behind json.loads: `(value, end)` at an offset, StopIteration/ValueError on bad
#: JSON. Used directly to find where a record line's trace ends without copying it.
_scan_once = json.JSONDecoder().scan_once
#: Number types a parsed run_secs list may hold (JsonFloat: from TVM's `\\xHH` JSON dialect).
_NUMBER_TYPES = {int, float, JsonFloat}
_FLOAT_INT = {float, int}
_INT_ONLY = {int}
_TWO = {2}
#: Distinct line tails and sketches remembered by `WorkDirReader` (a log has a few per task).
_MAX_TAILS = 4096
_MAX_SKETCHES = 50000
_ENTER_POSTPROC = ',["EnterPostproc",[],[],[]]'


def _all_finite(numbers: list[Any]) -> bool:
    """Whether every number is finite as a float (an integer too big for one is not)."""
    try:
        return all(map(math.isfinite, numbers))
    except OverflowError:
        return False


def _json_problem(text: str, exc: ValueError) -> str:
    if isinstance(exc, json.JSONDecodeError):
        if exc.msg.startswith("Unterminated") or exc.pos >= len(text.rstrip()) - 1:
            return f"truncated JSON ({exc.msg} at column {exc.colno})"
        return f"invalid JSON ({exc.msg} at column {exc.colno})"
    return f"invalid JSON ({exc})"


def _loads_tvm(text: str) -> Any:
    """Standard JSON, or TVM's dialect (`\\xHH` string escapes) when the text uses it."""
    if "\\x" in text:
        from msdb.schedule import tvm_json

        return tvm_json.loads(text)
    return json.loads(text)


class WorkDirReader:
    """Reads work_dirs, one `read` call each, into `ParsedWorkDir`s or a sink; keeps what
    repeats across lines and files (decoded payloads, parsed targets, checked sketches and line
    tails) and the bad lines found (`bad`)."""

    def __init__(self, *, opaque: bool, progress: ProgressFn | None, total: int, workers: int | None = 1) -> None:
        self.legacy = legacy_kinds()
        self.workers = workers
        self.opaque = opaque
        self.progress = progress
        self.targets: dict[str, Target | None] = {}
        self.target_errors: dict[str, str] = {}
        self.args_texts: dict[str, str | tuple[str]] = {}
        self.payloads: dict[str, ParsedWorkload | str] = {}
        #: `target,args_info]]` tails of record lines -> (target key, args_info text), see `_quick`.
        self.tails: dict[str, tuple[str, str | None]] = {}
        #: trace texts up to `,["EnterPostproc"` -> what `_sketch` found, see `_quick`.
        self.sketches: dict[str, tuple[int, bool, Any] | tuple[()]] = {}
        self.postproc = postproc_pattern(self.legacy)
        self.bad: list[BadLine] = []
        #: The progress phase this reader reports.
        self.phase = "reading"
        self.done = 0
        self.total = total

    # ---- workloads ----
    def workload_line(self, path: Path, number: int, text: str) -> ParsedWorkload | None:
        try:
            value = json.loads(text)
        except ValueError as exc:
            return self._bad(path, number, _json_problem(text, exc))
        if not (isinstance(value, list) and len(value) == 2 and all(isinstance(v, str) for v in value)):
            return self._bad(path, number, 'expected a workload line ["<shash>", "<base64 payload>"]')
        shash, payload = value
        if not shash.isdigit():
            return self._bad(path, number, f"workload shash {shash!r} is not a decimal integer")
        cached = self.payloads.get(payload)
        if cached is None:
            cached = self.payloads[payload] = self._decode(shash, payload)
        if isinstance(cached, str):
            return self._bad(path, number, cached.replace("{shash}", shash))
        return ParsedWorkload(number, shash, payload, cached.tvm_version, cached.mod, cached.hashes,
                              cached.opaque_format, cached.opaque_reason)

    def _decode(self, shash: str, payload: str) -> ParsedWorkload | str:
        try:
            graph = load_graph(payload)
        except PayloadError as exc:
            return str(exc)
        version = graph_tvm_version(graph)
        try:
            mod = decode_graph(graph)
        except (LegacyPayloadError, UnsupportedNodeError) as exc:
            kind = OPAQUE_LEGACY if isinstance(exc, LegacyPayloadError) else OPAQUE_UNSUPPORTED
            if self.opaque:
                return ParsedWorkload(0, shash, payload, version, opaque_format=kind, opaque_reason=str(exc))
            return (f"{exc}; msdb cannot decode this workload (--opaque imports it as an opaque payload keyed by "
                    "TVM's shash {shash}, excluded from replay)")
        except PayloadError as exc:
            return str(exc)
        from msdb.hashing import structural_hash
        from msdb.records.workload import HASH_MODES

        try:
            hashes = {mode: structural_hash(mod, mode) for mode in HASH_MODES}
        except MsdbError as exc:
            return f"workload decoded but cannot be hashed: {exc}"
        return ParsedWorkload(0, shash, payload, version, mod=mod, hashes=hashes)

    def _bad(self, path: Path, number: int, reason: str) -> None:
        self.bad.append(BadLine(path, number, reason))
        return None

    # ---- records ----
    def record_line(self, wd: ParsedWorkDir, path: Path, number: int, text: str, n_workloads: int) -> None:
        row = self._quick(text, n_workloads, wd.workloads)
        if row is not None:
            wd.records.append((number,) + row)
            return
        fast = self._fast(text)
        if fast is None:
            slow = self._slow(text)
            if isinstance(slow, str):
                self.bad.append(BadLine(path, number, slow))
                return
            fast = slow
        index, trace, trace_text, run_secs, target, target_key, args, args_key = fast
        if not 0 <= index < n_workloads:
            self.bad.append(BadLine(path, number, f"record points at workload index {index}, but "
                                                  f"{wd.workload_path.name} has {n_workloads} workload(s)"))
            return
        if wd.workloads[index] is None:
            self.bad.append(BadLine(path, number, f"record points at workload index {index}, which is a bad line of "
                                                  f"{wd.workload_path.name}"))
            return
        if trace_text is not None and (" " in trace_text or "\n" in trace_text or "\t" in trace_text
                                       or "\r" in trace_text):
            trace_text = None  # not TVM's compact writer output: store (and hash) TVM's spelling
        problem, needs_normalizing = scan_trace(trace, self.legacy)
        if problem is not None:
            self.bad.append(BadLine(path, number, problem))
            return
        if needs_normalizing:
            trace = normalize_trace_json(trace)
            wd.normalized += 1
            trace_text = None
        if trace_text is None:
            from msdb.schedule.tvm_json import dumps

            trace_text = dumps(trace)
        if run_secs is None:
            run_text, mean, valid = None, None, False
        else:
            if type(run_secs) is not list or not set(map(type, run_secs)) <= _NUMBER_TYPES:
                self.bad.append(BadLine(path, number, f"run_secs must be a list of numbers or null, got "
                                                      f"{short_json(run_secs)}"))
                return
            if not _all_finite(run_secs):
                self.bad.append(BadLine(path, number, f"run_secs {short_json(run_secs)} holds a value that is not a "
                                                      "finite number"))
                return
            if run_secs:
                # TVM's spelling: `%.20g`, which also prints the failure mark 1e10 as 10000000000
                run_text = "[" + ",".join(["%.20g" % x for x in run_secs]) + "]"
                mean = math.fsum(run_secs) / len(run_secs)
                valid = min(run_secs) < FAILED_RUN_SECS
            else:
                run_text, mean, valid = "[]", None, False
        if valid:
            insts = trace[0]
            valid = bool(insts) and insts[0][0] != "EnterPostproc"
        if target_key not in self.targets:
            problem = self.target_errors.get(target_key) or self._parse_target(target_key, target)
            if problem is not None:
                self.bad.append(BadLine(path, number, problem))
                return
        args_text: str | None = None
        if args is not None:
            cached = self.args_texts.get(args_key)
            if cached is None:
                cached = self.args_texts[args_key] = self._check_args(args)
            if type(cached) is tuple:
                self.bad.append(BadLine(path, number, cached[0]))
                return
            args_text = cached  # type: ignore[assignment]
        trace_hash = blake2b(trace_text.encode(), digest_size=8).hexdigest()
        wd.records.append((number, index, target_key, trace_text, trace_hash, run_text, mean, valid, args_text))

    def _quick(self, text: str, n_workloads: int, workloads: list[Any]) -> tuple[Any, ...] | None:
        """The row of a record line in TVM 0.27's compact form whose target and args_info were
        seen before and whose trace needs no rewriting: the common case of a big log, taken
        with as little Python per line as possible. None for anything else (legacy traces, a
        first target, lines to report): `record_line`'s general path then gives the same row or
        the bad-line reason.

        Scanning the trace into Python lists is most of the cost, so the trace is scanned in
        two parts: its sketch (the instructions before `EnterPostproc`, shared by the many
        records a design space yields: a real log has a few per task) is checked once per
        distinct text and then looked up; only the postprocessing instructions and the
        decisions are scanned per line. The line's tail (`,target,args_info]]`), the same for
        all records of a task, is looked up as text too."""
        head = _RECORD_HEAD.match(text)
        if head is None:
            return None
        index = int(head.group(1))
        if not 0 <= index < n_workloads or workloads[index] is None:
            return None
        start = head.end()
        enter = text.find(_ENTER_POSTPROC, start)
        try:
            if enter > start:
                sketch = self.sketches.get(text[start:enter])
                if sketch is None:
                    sketch = self._sketch(text[start:enter])
                if not sketch:
                    return None
                n_insts, sketch_ok, sketch_hash = sketch
                # the sketch is a complete list of instructions: `enter` lies between two of them;
                # the rest of the instructions are checked as text (no legacy kind, no
                # one-attribute Split), then the decisions are scanned; decisions may only point
                # into the sketch here (where sampling instructions are), else the general path
                post = self.postproc.match(text, enter)
                if post is None:
                    return None
                decisions, end = _scan_once(text, post.end())
                if text[end:end + 1] != "]":
                    return None
                end += 1
            else:
                trace, end = _scan_once(text, start)
                if type(trace) is not list or len(trace) != 2:
                    return None
                insts, decisions = trace
                if not well_formed(insts):
                    return None
                if needs_rewrite(insts, self.legacy):
                    return None  # the general path rewrites it
                n_insts, sketch_ok, sketch_hash = len(insts), insts[0][0] != "EnterPostproc", None
            if text[end:end + 1] != ",":
                return None
            run_secs, end2 = _scan_once(text, end + 1)
        except (StopIteration, ValueError, TypeError, IndexError, KeyError):
            return None
        if text[end2:end2 + 1] != "," or type(decisions) is not list:
            return None
        tail = self.tails.get(text[end2 + 1:])
        if tail is None:
            tail = self._tail(text, end2 + 1)
            if tail is None:
                return None
        if decisions:
            try:
                if set(map(len, decisions)) != _TWO:
                    return None
                indexes = [d[0] for d in decisions]
            except (TypeError, KeyError):
                return None
            if set(map(type, indexes)) != _INT_ONLY or min(indexes) < 0 or max(indexes) >= n_insts:
                return None
        trace_text = text[start:end]
        if " " in trace_text or "\n" in trace_text or "\t" in trace_text or "\r" in trace_text:
            return None
        if type(run_secs) is not list or not run_secs or not set(map(type, run_secs)) <= _FLOAT_INT:
            return None
        if len(run_secs) == 1:
            try:
                mean = float(run_secs[0])
            except OverflowError:
                return None  # an integer beyond floats: the general path reports it
            if not math.isfinite(mean):
                return None
            run_text = "[%.20g]" % run_secs[0]
        else:
            if not _all_finite(run_secs):
                return None
            run_text = "[" + ",".join(["%.20g" % x for x in run_secs]) + "]"
            mean = math.fsum(run_secs) / len(run_secs)
        valid = sketch_ok and min(run_secs) < FAILED_RUN_SECS
        if sketch_hash is None:
            trace_hash = blake2b(trace_text.encode(), digest_size=8).hexdigest()
        else:  # the same digest: the hash state after the sketch's bytes, fed the rest
            hasher = sketch_hash.copy()
            hasher.update(text[enter:end].encode())
            trace_hash = hasher.hexdigest()
        return index, tail[0], trace_text, trace_hash, run_text, mean, valid, tail[1]

    def _sketch(self, text: str) -> tuple[int, bool, Any] | tuple[()]:
        """(instruction count, whether the first is not EnterPostproc, the trace hash's state
        after these bytes) of a trace's text up to its first `,["EnterPostproc",...`, when that
        is `[[` and whole, well-formed, compact instructions that need no rewriting; () when not
        (the line then takes another path). Remembered per text."""
        result: tuple[int, bool, Any] | tuple[()] = ()
        if text.startswith("[[") and not (" " in text or "\n" in text or "\t" in text or "\r" in text):
            try:
                insts, end = _scan_once(text[1:] + "]", 0)
            except (StopIteration, ValueError):
                insts, end = None, -1
            if end == len(text) and well_formed(insts) and not needs_rewrite(insts, self.legacy):
                result = (len(insts), insts[0][0] != "EnterPostproc", blake2b(text.encode(), digest_size=8))
        if len(self.sketches) < _MAX_SKETCHES:
            self.sketches[text] = result
        return result

    def _tail(self, text: str, start: int) -> tuple[str, str | None] | None:
        """(target key, args_info text) of a line's tail `target,args_info]]` from `start`, when
        both were seen and accepted before (then the tail is remembered as text); else None."""
        try:
            target, end3 = _scan_once(text, start)
            if text[end3:end3 + 1] != ",":
                return None
            args, end4 = _scan_once(text, end3 + 1)
        except (StopIteration, ValueError):
            return None
        if text[end4:] != "]]":
            return None
        target_key = text[start:end3]
        if target_key not in self.targets:
            return None
        args_text: str | None = None
        if args is not None:
            cached = self.args_texts.get(text[end3 + 1:end4])
            if type(cached) is not str:
                return None
            args_text = cached
        tail = (target_key, args_text)
        if len(self.tails) < _MAX_TAILS:
            self.tails[text[start:]] = tail
        return tail

    @staticmethod
    def _fast(text: str) -> tuple[Any, ...] | None:
        """Split a line in TVM's compact form `[i,[trace,run_secs,target,args]]`; None when the
        line is anything else (the slow path then parses it or says what is wrong)."""
        head = _RECORD_HEAD.match(text)
        if head is None:
            return None
        start = head.end()
        scan = _scan_once
        try:
            trace, end = scan(text, start)
            if text[end] != ",":
                return None
            run_secs, end2 = scan(text, end + 1)
            if text[end2] != ",":
                return None
            target, end3 = scan(text, end2 + 1)
            if text[end3] != ",":
                return None
            args, end4 = scan(text, end3 + 1)
        except (StopIteration, ValueError, IndexError):
            return None
        if text[end4:end4 + 2] != "]]" or (len(text) > end4 + 2 and text[end4 + 2:].strip()):
            return None
        return (int(head.group(1)), trace, text[start:end], run_secs, target, text[end2 + 1:end3], args,
                text[end3 + 1:end4])

    @staticmethod
    def _slow(text: str) -> tuple[Any, ...] | str:
        """Any JSON spelling of a record line, or the reason it is not one."""
        try:
            value = _loads_tvm(text)
        except ValueError as exc:
            return _json_problem(text, exc)
        if not (isinstance(value, list) and len(value) == 2 and type(value[0]) is int):
            return "expected a record line [workload_index, [trace, run_secs, target, args_info]]"
        index, body = value
        if not (isinstance(body, list) and 1 <= len(body) <= 4):
            return "expected [trace, run_secs, target, args_info] after the workload index"
        trace, run_secs, target, args = (list(body) + [None, None, None])[:4]
        target_key = json.dumps(target, sort_keys=True)
        args_key = json.dumps(args, sort_keys=True)
        return index, trace, None, run_secs, target, target_key, args, args_key

    def _parse_target(self, key: str, target: Any) -> str | None:
        from msdb.records import Target, TargetError

        if target is None or (isinstance(target, dict) and not target):
            self.targets[key] = None
            return None
        if not isinstance(target, (dict, str)):
            problem = f"target must be a config object or a target string, got {short_json(target)}"
            self.target_errors[key] = problem
            return problem
        try:
            self.targets[key] = Target(target)
        except TargetError as exc:
            problem = f"bad target: {exc}"
            self.target_errors[key] = problem
            return problem
        return None

    @staticmethod
    def _check_args(args: Any) -> str | tuple[str]:
        from msdb.records import ArgInfo
        from msdb.records.record import RecordFormatError
        from msdb.schedule.tvm_json import dumps

        if type(args) is not list:
            return (f"args_info must be a list or null, got {short_json(args)}",)
        try:
            for arg in args:
                ArgInfo.from_json(arg)
        except RecordFormatError as exc:
            return (f"args_info: {exc}",)
        return dumps(args)

    # ---- files ----
    def read(self, workload_path: Path, record_path: Path, sink: ImportWriter | None = None) -> ParsedWorkDir:
        """Parse one work_dir. With a `sink`, its workloads, then its record rows in batches
        (not kept in the result), then its end are handed to the sink as they are parsed."""
        try:
            workload_bytes = workload_path.read_bytes()
            record_bytes = record_path.read_bytes()
        except OSError as exc:
            raise WorkDirError(f"{exc.filename}: cannot read ({exc.strerror})") from None
        wd = ParsedWorkDir(workload_path, record_path, hashlib.sha256(workload_bytes).hexdigest(), "")
        for number, text in self._lines(workload_path, workload_bytes):
            # a line that is not UTF-8 still holds its index: the records after it keep theirs
            wd.workloads.append(None if text is None else self.workload_line(workload_path, number, text))
        n_workloads = len(wd.workloads)
        if sink is not None:
            sink.workloads(wd)
        digest = _Sha256(record_bytes)
        try:
            text = record_bytes.decode("utf-8")
        except UnicodeDecodeError:
            # line by line, naming the lines that are not UTF-8
            lines = [(number, line) for number, line in self._lines(record_path, record_bytes) if line is not None]
        else:
            del record_bytes  # a big log: hold the bytes, the text and its lines no longer than needed
            workers = _worker_count(self.workers, _estimated_lines(text))
            if workers > 1:
                self.done += self._read_records_parallel(wd, record_path, text, n_workloads, workers, digest, sink)
                return self._finish(wd, digest, sink)
            lines = _nonblank(text.split("\n"))
            del text
        digest.start()
        progress, every = self.progress, _PROGRESS_EVERY
        for count, (number, text) in enumerate(lines, start=1):
            self.record_line(wd, record_path, number, text, n_workloads)
            if count % every == 0:
                if progress is not None:
                    progress(self.phase, min(self.done + count, self.total), self.total)
                if sink is not None:
                    sink.records(wd, wd.records)
                    wd.records = []
        self.done += len(lines)
        return self._finish(wd, digest, sink)

    @staticmethod
    def _finish(wd: ParsedWorkDir, digest: _Sha256, sink: ImportWriter | None) -> ParsedWorkDir:
        wd.record_sha256 = digest.hexdigest()
        if sink is not None:
            sink.records(wd, wd.records)
            wd.records = []
            sink.done(wd)
        return wd

    def _read_records_parallel(self, wd: ParsedWorkDir, path: Path, text: str, n_workloads: int, workers: int,
                               digest: _Sha256, sink: ImportWriter | None) -> int:
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
        valid = [w is not None for w in wd.workloads]
        # several chunks per worker even for a smaller log, so that writing the first chunks
        # overlaps parsing the last ones
        per_chunk = min(_CHUNK, max(_MIN_CHUNK, _estimated_lines(text) // (4 * workers)))
        tasks = [(lo, hi, str(path), str(wd.workload_path), n_workloads, valid, self.opaque)
                 for lo, hi in _line_chunks(text, per_chunk)]
        _FORK_TEXT = text
        n_lines = 0  # lines of the chunks done so far: the number of the next chunk's first line, minus one
        try:
            # an executor, not multiprocessing.Pool: a worker killed from outside (the OOM
            # killer) raises BrokenProcessPool here instead of leaving the import, and the
            # write transaction it holds open, waiting forever
            pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"))
            try:
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
                        if key not in self.targets:
                            self.targets[key] = None if config is None else _target_from_canonical(config)
                    if sink is not None:
                        sink.records(wd, rows)  # the workers parse the next chunks meanwhile
                    else:
                        wd.records.extend(rows)
                    self.target_errors.update(errors)
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

    def _lines(self, path: Path, data: bytes) -> list[tuple[int, str | None]]:
        """Non-blank lines with their 1-based numbers (TVM 0.27 segfaults on a blank line; msdb
        skips it); a line that is not UTF-8 is reported, and comes back as None."""
        try:
            return _nonblank(data.decode("utf-8").split("\n"))
        except UnicodeDecodeError:
            pass
        out = []
        for number, raw in enumerate(data.split(b"\n"), start=1):
            if not raw.strip():
                continue
            try:
                out.append((number, raw.decode("utf-8")))
            except UnicodeDecodeError:
                self._bad(path, number, "line is not UTF-8 text")
                out.append((number, None))
        return out


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


def _nonblank(lines: list[str]) -> list[tuple[int, str]]:
    return [(number, line) for number, line in enumerate(lines, start=1) if line and not line.isspace()]


#: Lines per parallel parsing task (about), and the smallest record file worth forking for.
_CHUNK = 5000
_MIN_CHUNK = 500
_PARALLEL_MIN_LINES = 4000
_MAX_WORKERS = 8
#: The record file's text a forked worker reads (set by the parent just before forking).
_FORK_TEXT: str | None = None


def _worker_count(requested: int | None, n_lines: int) -> int:
    import multiprocessing
    import os

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
    newlines = sample.count(b"\n" if isinstance(sample, bytes) else "\n")
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
    """Worker: `record_line` over the lines of text[lo:hi] of the forked parent's `_FORK_TEXT`.
    Line numbers are counted from the chunk's start (the parent adds the lines before it);
    a trace that is its line's own text comes back as offsets into the text."""
    lo, hi, path_text, workload_path, n_workloads, valid, opaque = task
    text = _FORK_TEXT
    assert text is not None
    path = Path(path_text)
    reader = _worker_reader(opaque)
    reader.bad = []
    wd = ParsedWorkDir(Path(workload_path), path, "", "")
    wd.workloads = [_PLACEHOLDER if ok else None for ok in valid]  # type: ignore[misc]
    out = []
    lines = text[lo:hi].split("\n")
    if lines[-1] == "":
        lines.pop()  # the chunk ends with a newline: no line after it
    offset = lo
    for number, line in enumerate(lines, start=1):
        if line and not line.isspace():
            before = len(wd.records)
            reader.record_line(wd, path, number, line, n_workloads)
            if len(wd.records) > before:
                row = wd.records[-1]
                head = _RECORD_HEAD.match(line)
                if head is not None and line.startswith(row[3], head.end()):
                    start = offset + head.end()
                    row = row[:3] + ((start, start + len(row[3])),) + row[4:]
                out.append(row)
        offset += len(line) + 1
    targets = {key: (None if t is None else t.canonical_json()) for key, t in reader.targets.items()}
    return len(lines), out, reader.bad, targets, reader.target_errors, wd.normalized


_PLACEHOLDER = object()
#: A worker process's `WorkDirReader`, kept across its tasks: what it learnt (sketches, line tails,
#: targets) is the same for every chunk of a log, and learning it again per chunk cost a
#: tenth of the parse.
_WORKER_READERS: dict[bool, WorkDirReader] = {}


def _worker_reader(opaque: bool) -> WorkDirReader:
    reader = _WORKER_READERS.get(opaque)
    if reader is None:
        reader = _WORKER_READERS[opaque] = WorkDirReader(opaque=opaque, progress=None, total=0)
    return reader


def _target_from_canonical(config: str) -> Target:
    from msdb.records import Target

    return Target(json.loads(config))
