"""The one grammar of TVM's work_dir lines (docs/tvm-formats.md section 1), read and written.

`LineParser.workload(text)` reads a workload line into a `ParsedWorkload`,
`LineParser.record(text, workloads, workload_file)` a record line into `RecordFields` (the
importer's row; `tuning_record` makes a `TuningRecord`); a line that breaks the grammar gives the
reason as a string, never an exception. `record_line`, `workload_line` and `payload_of` write what
TVM 0.27 loads. `msdb import` and `JSONDatabase` both read through it, so they accept and reject
the same lines. Its fast path: see docs/architecture.md, "TVM interop".
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

from msdb.errors import MsdbError
from msdb.interop.tvm.payload import PayloadError, decode_graph, graph_tvm_version, load_graph, payload_kind
from msdb.interop.tvm.trace_check import (
    legacy_kinds, needs_rewrite, normalize_trace_json, postproc_pattern, scan_trace, short_json, tvm_kinds,
    unknown_kind, well_formed,
)
from msdb.interop.tvm.trace_fit import TraceRefs, WorkloadBlocks, misfit, trace_refs, workload_blocks
from msdb.records.ranking import FAILED_RUN_SECS, mean_run_secs, ran, run_secs_text, sketch_is_valid
from msdb.records.record import trace_hasher, trace_json_hash

if TYPE_CHECKING:
    from msdb.ir.function import IRModule
    from msdb.records import Target, TuningRecord, Workload

__all__ = [
    "MAX_LINE_CHARS", "TOO_DEEP", "BadTvmLine", "ParsedWorkload", "RecordFields", "LineParser", "blocks_of",
    "trace_offset", "record_from_line", "record_line", "format_record_line",
    "workload_line", "format_workload_line", "payload_of", "tvm_shash_of", "target_text", "workload_from_line",
]


class BadTvmLine(MsdbError, ValueError):
    """A work_dir line that does not follow TVM's grammar; the message says why."""


@dataclass
class ParsedWorkload:
    """A workload line that follows the grammar: decoded (`mod`, `hashes`), or a payload msdb
    keeps only as bytes (`opaque_kind`, see `msdb.interop.tvm.payload.payload_kind`, and why:
    `opaque_reason`)."""

    line: int
    tvm_shash: str
    payload: str
    tvm_version: str | None
    mod: IRModule | None = None
    hashes: dict[str, str] | None = None
    opaque_kind: str | None = None
    opaque_reason: str | None = None

    @property
    def is_opaque(self) -> bool:
        return self.opaque_kind is not None

    def undecodable(self) -> str:
        """Why an opaque workload is a bad line for a reader that does not keep opaque ones."""
        return f"{self.opaque_reason}; msdb cannot decode this workload"


#: A record line's fields: (workload_index, target_key, trace_text, trace_hash, run_secs_text,
#: mean_run_secs, is_valid, args_info_text). `target_key` is the line's target text, parsed once
#: into `LineParser.targets[target_key]`. Tuples, not objects: an import holds 100k of them.
RecordFields = tuple[int, str, str, str, "str | None", "float | None", bool, "str | None"]

#: `[index,[` at a record line's start; the index as JSON spells an integer (not `00`, ASCII digits).
_RECORD_HEAD = re.compile(r"\[(-?(?:0|[1-9][0-9]*)),\[")
#: The C scanner behind json.loads: `(value, end)` at an offset, StopIteration/ValueError on bad
#: JSON. Used directly to find where a record line's trace ends without copying it.
_scan_once: Any = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
_FLOAT_INT = {float, int}
_INT_ONLY = {int}
_TWO = {2}
#: Distinct line tails and sketches remembered by a parser (a log has a few per task).
_MAX_TAILS = 4096
_MAX_SKETCHES = 50000
_ENTER_POSTPROC = ',["EnterPostproc",[],[],[]]'
#: (trace, workload) verdicts remembered by a parser (`LineParser._misfit`).
_MAX_FITS = 65536

#: The longest line msdb reads, in characters: a thousand times the longest workload line of a
#: real log (a big fused workload's payload is tens of KB, a trace a few KB). Anything longer is
#: a bad line before it is parsed, so a corrupted or hostile file cannot make msdb hold many
#: copies of one huge value.
MAX_LINE_CHARS = 1 << 25
#: Why a line whose JSON nests deeper than Python's JSON scanner goes (~1000 levels) is bad;
#: a TVM line nests a few levels.
TOO_DEEP = "JSON nested too deeply (a TVM line nests a few levels; this one goes past a thousand)"


def _too_long(text: str) -> str:
    return f"line is {len(text):,} characters long; msdb reads lines of at most {MAX_LINE_CHARS:,}"


def _all_finite(numbers: list[Any]) -> bool:
    """Whether every number is finite as a float (an integer too big for one is not)."""
    try:
        return all(map(math.isfinite, numbers))
    except OverflowError:
        return False


def _compact(text: str) -> bool:
    """Whether JSON text has no whitespace: what TVM's writer produces."""
    return not (" " in text or "\n" in text or "\t" in text or "\r" in text)


def _json_problem(text: str, exc: ValueError) -> str:
    if isinstance(exc, json.JSONDecodeError):
        where = "column" if exc.msg.endswith(" at") else "at column"  # "Unterminated string starting at"
        if exc.msg.startswith("Unterminated") or exc.pos >= len(text.rstrip()) - 1:
            return f"truncated JSON ({exc.msg} {where} {exc.colno})"
        return f"invalid JSON ({exc.msg} {where} {exc.colno})"
    return f"invalid JSON ({exc})"


def _loads_tvm(text: str) -> Any:
    """Standard JSON, or TVM's dialect (`\\xHH` string escapes) when the text uses it."""
    if "\\x" in text:
        from msdb.schedule import tvm_json

        return tvm_json.loads(text)
    return json.loads(text)


def blocks_of(workload: object) -> WorkloadBlocks | None:
    """The blocks of a workload with decoded IR (a `ParsedWorkload`, a `Workload`), for
    `trace_fit`; None for an opaque one or a placeholder."""
    from msdb.ir.function import IRModule

    try:
        mod = getattr(workload, "mod", None)
    except MsdbError:
        return None  # a stored workload whose IR cannot be read: replay reports it
    return workload_blocks(mod) if isinstance(mod, IRModule) else None


def trace_offset(line: str) -> int | None:
    """Where the trace of a record line in TVM's compact form starts (after `[index,[`), or None
    for a line in another form."""
    head = _RECORD_HEAD.match(line)
    return None if head is None else head.end()


class LineParser:
    """Reads work_dir lines (see the module docstring) and keeps what repeats across lines and
    files: decoded payloads, parsed targets (`targets`: target text -> `Target` or None),
    checked arg infos, sketches and line tails. `normalized` counts the record lines whose
    trace was rewritten to TVM 0.27's form.

    Besides the grammar, a record line is bad when its run_secs hold a negative time or one
    beyond TVM's failure mark (`msdb.records.ranking.FAILED_RUN_SECS`), when its
    trace holds an instruction kind TVM does not have (`unknown_kinds=True` accepts those), and
    when its trace cannot belong to the workload it points at (`msdb.interop.tvm.trace_fit`):
    none of them can come from a MetaSchedule run, and each would mislead every later query."""

    def __init__(self, *, unknown_kinds: bool = False) -> None:
        self.legacy = legacy_kinds()
        #: the instruction kinds accepted (None: any)
        self.kinds: frozenset[str] | None = None if unknown_kinds else tvm_kinds()
        self.targets: dict[str, Target | None] = {}
        self.target_errors: dict[str, str] = {}
        self.args_texts: dict[str, str | tuple[str]] = {}
        self.payloads: dict[str, ParsedWorkload | str] = {}
        #: `target,args_info]]` tails of record lines -> (target key, args_info text), see `_quick`.
        self.tails: dict[str, tuple[str, str | None]] = {}
        #: trace texts up to `,["EnterPostproc"` -> what `_sketch` found, see `_quick`.
        self.sketches: dict[str, tuple[int, bool, Any, TraceRefs | None] | tuple[()]] = {}
        self.postproc = postproc_pattern(self.legacy, self.kinds)
        self.normalized = 0
        #: identical trace texts share one string; arg infos parsed once per text
        self._trace_texts: dict[str, str] = {}
        self._args_values: dict[str, Any] = {}
        #: id(workload or its module) -> (it, its blocks or None: not checked); see `_blocks`
        self._block_tables: dict[int, tuple[object, WorkloadBlocks | None]] = {}
        #: (id(refs) or refs, id(workload)) -> (workload, refs, why they do not fit or None)
        self._fits: dict[tuple[Any, int], tuple[object, TraceRefs, str | None]] = {}
        #: the last (refs, workload) the quick path found to fit: most lines repeat it
        self._fit_refs: TraceRefs | None = None
        self._fit_workload: object = None

    # ---- workload lines ----
    def workload(self, text: str, line: int = 0) -> ParsedWorkload | str:
        """The workload of a line (number `line`), or why the line is bad. A payload msdb cannot
        decode but can keep (`ParsedWorkload.is_opaque`) is the caller's to accept or refuse."""
        if len(text) > MAX_LINE_CHARS:
            return _too_long(text)
        try:
            value = json.loads(text)
        except ValueError as exc:
            return _json_problem(text, exc)
        except RecursionError:
            return TOO_DEEP
        if not (isinstance(value, list) and len(value) == 2 and all(isinstance(v, str) for v in value)):
            return 'expected a workload line ["<shash>", "<base64 payload>"]'
        shash, payload = value
        if not shash.isdigit():
            return f"workload shash {shash!r} is not a decimal integer"
        cached = self.payloads.get(payload)
        if cached is None:
            cached = self.payloads[payload] = self._decode(payload)
        if isinstance(cached, str):
            return cached
        return ParsedWorkload(line, shash, payload, cached.tvm_version, cached.mod, cached.hashes, cached.opaque_kind,
                              cached.opaque_reason)

    @staticmethod
    def _decode(payload: str) -> ParsedWorkload | str:
        try:
            graph = load_graph(payload)
        except PayloadError as exc:
            return str(exc)
        except RecursionError:
            return f"workload payload: {TOO_DEEP}"
        version = graph_tvm_version(graph)
        try:
            mod = decode_graph(graph)
        except RecursionError:
            return "workload graph nested too deeply to decode (more than about a thousand levels)"
        except PayloadError as exc:
            kind = payload_kind(exc)
            if kind is None:
                return str(exc)
            return ParsedWorkload(0, "", payload, version, opaque_kind=kind, opaque_reason=str(exc))
        from msdb.hashing import structural_hash
        from msdb.records.workload import HASH_MODES

        try:
            hashes = {mode: structural_hash(mod, mode) for mode in HASH_MODES}
        except MsdbError as exc:
            return f"workload decoded but cannot be hashed: {exc}"
        except RecursionError:
            return "workload decoded but nested too deeply to hash (more than about a thousand levels)"
        return ParsedWorkload(0, "", payload, version, mod=mod, hashes=hashes)

    # ---- record lines ----
    def record(self, text: str, workloads: Sequence[object | None], workload_file: str) -> RecordFields | str:
        """The fields of a record line, or why it is bad. `workloads[i]` is None when line `i`
        of the workload file (named `workload_file` in reasons) is bad: a record pointing at it
        is bad too. A workload is checked against the traces pointing at it when it is a
        `WorkloadBlocks` or has a decoded `mod` (else it is a placeholder: not checked)."""
        if len(text) > MAX_LINE_CHARS:
            return _too_long(text)
        try:  # costs nothing unless raised (a line nested past the JSON scanner's limit)
            n_workloads = len(workloads)
            quick = self._quick(text, n_workloads, workloads)
            if quick is not None:
                return quick
            split = self._fast(text)
            if split is None:
                slow = self._slow(text)
                if isinstance(slow, str):
                    return slow
                split = slow
            index, trace, trace_text, run_secs, target, target_key, args, args_key = split
            if not 0 <= index < n_workloads:
                return f"record points at workload index {index}, but {workload_file} has {n_workloads} workload(s)"
            if workloads[index] is None:
                return f"record points at workload index {index}, which is a bad line of {workload_file}"
            if trace_text is not None and not _compact(trace_text):
                trace_text = None  # not TVM's compact writer output: store (and hash) TVM's spelling
            problem, needs_normalizing = scan_trace(trace, self.legacy, self.kinds)
            if problem is not None:
                return problem
            refs = trace_refs(trace[0])
            if refs is not None:
                problem = self._misfit(refs, refs, workloads[index])
                if problem is not None:
                    return (f"{problem}: this record cannot belong to workload {index} of {workload_file} "
                            "(is the record file paired with its own workload file?)")
            if needs_normalizing:
                trace = normalize_trace_json(trace)
                self.normalized += 1
                trace_text = None
            if trace_text is None:
                from msdb.schedule.tvm_json import dumps

                trace_text = dumps(trace)
            if run_secs is not None:
                types = set(map(type, run_secs)) if type(run_secs) is list else {str}
                if not types <= _FLOAT_INT:
                    # numbers read from TVM's `\\xHH` dialect are `JsonFloat`s (float subclasses)
                    if not all(t is int or issubclass(t, float) for t in types):
                        return f"run_secs must be a list of numbers or null, got {short_json(run_secs)}"
                    run_secs = [float(x) for x in run_secs]  # TVM 0.27 spells the value, not the text read
                if not _all_finite(run_secs):
                    return f"run_secs {short_json(run_secs)} holds a value that is not a finite number"
                if run_secs and min(run_secs) < 0:
                    return f"run_secs {short_json(run_secs)} holds a negative time"
                if run_secs and max(run_secs) > FAILED_RUN_SECS:
                    return (f"run_secs {short_json(run_secs)} holds a time beyond TVM's failure mark "
                            f"{FAILED_RUN_SECS:g} s")
            valid = ran(run_secs) and sketch_is_valid(trace[0])
            if target_key not in self.targets:
                problem = self.target_errors.get(target_key) or self._parse_target(target_key, target)
                if problem is not None:
                    return problem
            args_text: str | None = None
            if args is not None:
                cached = self.args_texts.get(args_key)
                if cached is None:
                    cached = self.args_texts[args_key] = self._check_args(args)
                if type(cached) is tuple:
                    return cached[0]
                args_text = cached  # type: ignore[assignment]
            return (index, target_key, trace_text, trace_json_hash(trace_text), run_secs_text(run_secs),
                    mean_run_secs(run_secs), valid, args_text)
        except RecursionError:
            return TOO_DEEP

    def tuning_record(self, text: str, workloads: Sequence[Workload | None], workload_file: str) -> TuningRecord | str:
        """The `TuningRecord` of a record line, of the workload it points at (`record`'s
        checks), or why the line is bad. Identical traces share one string: a log of a million
        records holds a few hundred distinct traces."""
        from msdb.records import TuningRecord

        fields = self.record(text, workloads, workload_file)
        if isinstance(fields, str):
            return fields
        index, target_key, trace_text, _, run_text, _, _, args_text = fields
        workload = workloads[index]
        assert workload is not None
        args = None
        if args_text is not None:
            args = self._args_values.get(args_text)
            if args is None:
                from msdb.schedule.tvm_json import loads

                args = self._args_values[args_text] = loads(args_text)
        # run_text is TVM's `%.20g` spelling: plain floats read back to the same values and text
        return TuningRecord(self._trace_texts.setdefault(trace_text, trace_text), workload,
                            None if run_text is None else json.loads(run_text), self.targets[target_key], args)

    def _quick(self, text: str, n_workloads: int, workloads: Sequence[object | None]) -> tuple[Any, ...] | None:
        """The fields of a record line in TVM 0.27's compact form whose target and args_info were
        seen before and whose trace needs no rewriting: the common case of a big log, taken
        with as little Python per line as possible. None for anything else (legacy traces, a
        first target, lines to report): `record`'s general path then gives the same fields or
        the reason.

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
                n_insts, sketch_ok, sketch_hash, refs = sketch
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
                if self.kinds is not None and unknown_kind(insts, self.kinds) is not None:
                    return None
                n_insts, sketch_ok, sketch_hash, refs = len(insts), sketch_is_valid(insts), None, trace_refs(insts)
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
        if not _compact(trace_text):
            return None
        if type(run_secs) is not list or not run_secs or not set(map(type, run_secs)) <= _FLOAT_INT \
                or not _all_finite(run_secs) or min(run_secs) < 0 or max(run_secs) > FAILED_RUN_SECS:
            return None  # the general path reports it (or takes null and [])
        if refs is not None:
            workload = workloads[index]
            if refs is not self._fit_refs or workload is not self._fit_workload:  # not the last line's pair
                if self._misfit(id(refs), refs, workload) is not None:
                    return None  # the general path says why
                self._fit_refs, self._fit_workload = refs, workload
        if sketch_hash is None:
            trace_hash = trace_json_hash(trace_text)
        else:  # the same digest: the hash state after the sketch's bytes, fed the rest
            hasher = sketch_hash.copy()
            hasher.update(text[enter:end].encode())
            trace_hash = hasher.hexdigest()
        return (index, tail[0], trace_text, trace_hash, run_secs_text(run_secs), mean_run_secs(run_secs),
                sketch_ok and ran(run_secs), tail[1])

    def _sketch(self, text: str) -> tuple[int, bool, Any, TraceRefs | None] | tuple[()]:
        """(instruction count, whether the first is not EnterPostproc, the trace hash's state
        after these bytes, what the instructions say about their workload) of a trace's text up
        to its first `,["EnterPostproc",...`, when that is `[[` and whole, well-formed, compact
        instructions of known kinds that need no rewriting; () when not (the line then takes
        another path). Remembered per text."""
        result: tuple[int, bool, Any, TraceRefs | None] | tuple[()] = ()
        if text.startswith("[[") and _compact(text):
            try:
                insts, end = _scan_once(text[1:] + "]", 0)
            except (StopIteration, ValueError):
                insts, end = None, -1
            if end == len(text) and well_formed(insts) and not needs_rewrite(insts, self.legacy) and (
                    self.kinds is None or unknown_kind(insts, self.kinds) is None):
                result = (len(insts), sketch_is_valid(insts), trace_hasher(text), trace_refs(insts))
        if len(self.sketches) < _MAX_SKETCHES:
            self.sketches[text] = result
        return result

    def _tail(self, text: str, start: int) -> tuple[str, str | None] | None:
        """(target key, args_info text) of a line's tail `target,args_info]]` from `start`, when
        both were seen and accepted before (then the tail is remembered as text); else None."""
        try:
            _, end3 = _scan_once(text, start)
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

    def _misfit(self, key: Any, refs: TraceRefs, workload: object) -> str | None:
        """Why a trace saying `refs` cannot belong to `workload` (`trace_fit.misfit`), or None;
        remembered per (`key`, workload): `key` is `refs` or, for the quick path's long-lived
        sketch refs, their id."""
        cache_key = (key, id(workload))
        hit = self._fits.get(cache_key)
        if hit is not None and hit[0] is workload and (hit[1] is refs or hit[1] == refs):
            return hit[2]
        blocks = self._blocks(workload)
        problem = None if blocks is None else misfit(refs, blocks)
        if len(self._fits) < _MAX_FITS:
            self._fits[cache_key] = (workload, refs, problem)
        return problem

    def _blocks(self, workload: object) -> WorkloadBlocks | None:
        """The blocks of a workload entry (see `record`), or None when it is not checked."""
        if type(workload) is WorkloadBlocks:
            return workload
        hit = self._block_tables.get(id(workload))
        if hit is not None and hit[0] is workload:
            return hit[1]
        # ParsedWorkloads of one payload share its decoded module: walk each module once
        mod = getattr(workload, "mod", None) if isinstance(workload, ParsedWorkload) else None
        known = self._block_tables.get(id(mod)) if mod is not None else None
        blocks = known[1] if known is not None and known[0] is mod else blocks_of(workload)
        if mod is not None:
            self._block_tables[id(mod)] = (mod, blocks)
        self._block_tables[id(workload)] = (workload, blocks)  # one entry per workload line read
        return blocks

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


# ---------------------------------------------------------------- writing


def format_record_line(workload_index: int, trace_text: str, run_secs_text: str | None, target_text: str,
                       args_text: str | None) -> str:
    """A record line from its parts, each already in TVM's spelling (no newline)."""
    return (f"[{workload_index},[{trace_text},{run_secs_text if run_secs_text is not None else 'null'},"
            f"{target_text},{args_text if args_text is not None else 'null'}]]")


#: TVM's spelling of each target config written so far, by canonical JSON (a log has a few).
_TARGET_TEXTS: dict[str, str] = {}


def target_text(target: Target | None) -> str:
    """A record line's target: TVM's canonical config dict, `null` for none."""
    if target is None:
        return "null"
    key = target.canonical_json()
    text = _TARGET_TEXTS.get(key)
    if text is None:
        from msdb.schedule.tvm_json import dumps

        text = dumps(target.config)
        if len(_TARGET_TEXTS) < 1024:
            _TARGET_TEXTS[key] = text
    return text


def record_line(workload_index: int, record: TuningRecord) -> str:
    """The record line of `record` pointing at workload line `workload_index` (no newline).
    Run times keep the spelling they were read with (`JsonFloat`), so a copied log is the same
    bytes."""
    from msdb.schedule.tvm_json import dumps

    run_secs = dumps(list(record.run_secs)) if record.run_secs is not None else None
    args = record.args_info_json()
    return format_record_line(workload_index, record.trace_text, run_secs, target_text(record.target),
                              dumps(args) if args is not None else None)


def tvm_shash_of(shash: str) -> str:
    """msdb's 16-hex structural hash as the decimal uint64 a workload line holds (TVM rehashes
    on load, so the value is advisory there)."""
    return str(int(shash, 16))


def format_workload_line(tvm_shash: str, payload: str) -> str:
    """A workload line from TVM's shash and the base64 payload (no newline)."""
    from msdb.schedule.tvm_json import dumps

    return dumps([tvm_shash, payload])


def payload_of(workload: Workload) -> str:
    """The base64 payload of a workload line: the original TVM payload when the workload came
    from a TVM log (byte for byte), else TVM 0.27's graph encoding of the IR."""
    if workload.tvm_payload is not None:
        return workload.tvm_payload
    from msdb.interop.tvm.encode import encode_workload

    return encode_workload(workload.mod)


def workload_line(workload: Workload, mode: str = "structural") -> str:
    """The workload line of `workload` (no newline): an imported workload keeps TVM's shash and
    payload, one msdb created gets its hash under `mode` and TVM 0.27's encoding."""
    shash = workload.tvm_shash if workload.tvm_shash is not None else tvm_shash_of(workload.hash(mode))
    return format_workload_line(shash, payload_of(workload))


def record_from_line(text: str, workloads: Sequence[Workload | None]) -> TuningRecord:
    """The record of one record line, whose index points into `workloads` (the workload
    file's lines); `BadTvmLine` naming what is wrong otherwise."""
    from msdb.interop.tvm.workdir import WORKLOAD_FILE

    record = LineParser().tuning_record(text, workloads, WORKLOAD_FILE)
    if isinstance(record, str):
        raise BadTvmLine(record)
    return record


def workload_from_line(text: str) -> Workload:
    """The workload of one workload line; `BadTvmLine` naming what is wrong otherwise (a
    payload msdb cannot decode included)."""
    from msdb.records import Workload

    parsed = LineParser().workload(text)
    if isinstance(parsed, str):
        raise BadTvmLine(parsed)
    if parsed.mod is None:
        raise BadTvmLine(parsed.undecodable())
    return Workload(parsed.mod, hashes=parsed.hashes, tvm_payload=parsed.payload, tvm_shash=parsed.tvm_shash)
