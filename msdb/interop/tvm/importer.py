"""Import TVM MetaSchedule work_dirs (any generation) into an msdb SQL database.

`import_tvm(db, paths)` is `msdb import`. Its two halves:

1. Reading (`_Reader`): each distinct workload payload is decoded once into msdb IR and hashed;
   each record line is parsed once, its trace shape-checked and normalized to TVM 0.27's form,
   its target parsed (once per distinct target), its run_secs spelled as TVM does. Problems are
   collected as `BadLine`s (`path:line: reason`), never raised half-way.
2. Writing (`msdb.interop.tvm.import_writer.ImportWriter`), in ONE transaction: workloads
   (deduplicated by structural hash confirmed by structural equality; imported ones keep TVM's
   payload and shash), targets, one `source` row per work_dir that adds records (file, sha256,
   user, host, TVM version, time), and the records, deduplicated by (workload, target, trace,
   run_secs) against the database and within the import, so re-importing a file adds nothing.

By default the two run as one stream: rows are written inside the open transaction while
forked worker processes parse the next stretches of the log, and bad lines that are not to be
skipped raise `ImportAborted` at the end, which rolls the transaction back, so a bad line
anywhere still writes nothing (DESIGN.md section 6). With `verify=True` (and through
`read_import` + `import_plan`) the whole import is read first, then replayed, then written.

Speed (DESIGN.md section 11, >= 20k records/s; TVM itself replays every trace while loading,
apache/tvm#11680): no trace is replayed or parsed into a `Trace` unless it must be rewritten
(legacy `GetBlock`, one-attribute `Split`) or `verify=True` asks for replays. The trace is stored
as the exact text the file holds, which is TVM's own writer output, so its dedup hash is that of
TVM's bytes. A trace's sketch (the instructions before EnterPostproc, shared by the records of a
design space) is checked once per distinct text; the rest of each trace is checked as text by
one regular expression, and only its decisions and run_secs are scanned into Python values
(`_Reader._quick`). Lines that are not in TVM's compact form, or that need rewriting or
reporting, take a slower path with the same result.

Payloads msdb cannot decode (TVM's <= 0.21 graph format, or a node type msdb's IR lacks) stop
the import with an error naming the format or node type, unless `opaque=True`: then the workload
is stored as an opaque payload keyed by TVM's shash (flagged in `workload.ir_format`, see
`msdb.ops.store`), with its records, and never replayed.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
import logging
import math
import re
import threading
import time
from dataclasses import dataclass, field
from hashlib import blake2b
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from msdb.errors import MsdbError
from msdb.interop.tvm.payload import (
    LegacyPayloadError, PayloadError, UnsupportedNodeError, decode_graph, graph_tvm_version, load_graph,
)
from msdb.interop.tvm.workdir import RECORD_FILE, WORKLOAD_FILE, BadLine, WorkDirError, resolve_paths
from msdb.ops.store import OPAQUE_LEGACY, OPAQUE_UNSUPPORTED, ProgressFn
from msdb.schedule.tvm_json import JsonFloat

if TYPE_CHECKING:
    from msdb.database.sqlite import SQLiteDatabase
    from msdb.interop.tvm.import_writer import ImportWriter
    from msdb.ir.function import IRModule
    from msdb.records import Target

__all__ = [
    "ImportAborted", "ImportPlan", "ImportSummary", "ParsedWorkDir", "ParsedWorkload", "commit_import",
    "import_plan", "import_tvm", "legacy_kinds", "normalize_trace_json", "read_import", "replay_plan", "resolve_import_paths",
    "scan_trace",
]

logger = logging.getLogger(__name__)

FAILED_RUN_SECS = 1e10
_PROGRESS_EVERY = 2000


class ImportAborted(MsdbError):
    """A TVM log has bad lines and skipping them was not asked for; nothing was written."""

    def __init__(self, bad_lines: Sequence[BadLine]) -> None:
        self.bad_lines = list(bad_lines)
        first = self.bad_lines[0]
        more = len(self.bad_lines) - 1
        tail = f" (and {more} more bad line{'s' if more != 1 else ''})" if more else ""
        super().__init__(f"{first}{tail}; nothing was imported (--skip-bad imports the other lines)")


# ---------------------------------------------------------------- paths


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


# ---------------------------------------------------------------- parsed data


@dataclass
class ParsedWorkload:
    """One usable workload line: decoded (`mod`, `hashes`) or opaque (`opaque_format`)."""

    line: int
    tvm_shash: str
    payload: str
    tvm_version: str | None
    mod: IRModule | None = None
    hashes: dict[str, str] | None = None
    opaque_format: str | None = None
    opaque_reason: str | None = None

    @property
    def is_opaque(self) -> bool:
        return self.opaque_format is not None


#: A parsed record: (line, workload_index, target_key, trace_text, trace_hash, run_secs_text,
#: mean_run_secs, is_valid, args_text). Tuples, not objects: an import holds 100k of them.
RecordRow = tuple[int, int, str, str, str, "str | None", "float | None", bool, "str | None"]


@dataclass
class ParsedWorkDir:
    """Everything read from one work_dir; `workloads[i]` is None for a bad workload line."""

    workload_path: Path
    record_path: Path
    workload_sha256: str
    record_sha256: str
    workloads: list[ParsedWorkload | None] = field(default_factory=list)
    records: list[RecordRow] = field(default_factory=list)
    normalized: int = 0

    @property
    def tvm_version(self) -> str | None:
        versions = sorted({w.tvm_version for w in self.workloads if w is not None and w.tvm_version})
        return versions[-1] if versions else None

    @property
    def location(self) -> str:
        return str(self.record_path.resolve())


@dataclass
class ImportPlan:
    """What `read_import` found: parsed work_dirs, the targets they name, and bad lines."""

    workdirs: list[ParsedWorkDir]
    targets: dict[str, Target | None]
    bad_lines: list[BadLine]

    @property
    def n_records(self) -> int:
        return sum(len(wd.records) for wd in self.workdirs)

    def check(self, skip_bad: bool) -> None:
        """Raise `ImportAborted` when there are bad lines and they are not to be skipped."""
        if self.bad_lines and not skip_bad:
            raise ImportAborted(self.bad_lines)


@dataclass
class ImportSummary:
    """What an import did. `records_invalid` counts the new records TVM ranks as invalid (failed
    builds or runs, no run_secs); they are stored as TVM stores them."""

    workloads_new: int = 0
    workloads_known: int = 0
    records_new: int = 0
    records_duplicate: int = 0
    records_invalid: int = 0
    bad_lines: list[BadLine] = field(default_factory=list)
    opaque: list[str] = field(default_factory=list)
    replayed: int = 0
    replay_failures: list[str] = field(default_factory=list)
    sources: list[int] = field(default_factory=list)
    seconds: float = 0.0

    def line(self) -> str:
        text = (f"workloads: {self.workloads_new} new, {self.workloads_known} known; records: {self.records_new} new, "
                f"{self.records_duplicate} duplicate, {self.records_invalid} invalid")
        if self.bad_lines:
            text += f"; {len(self.bad_lines)} bad line{'s' if len(self.bad_lines) != 1 else ''} skipped"
        if self.replayed or self.replay_failures:
            text += f"; {self.replayed} traces replayed, {len(self.replay_failures)} failed"
        return text + f"; {self.seconds:.2f} s"


# ---------------------------------------------------------------- reading


_RECORD_HEAD = re.compile(r"\[(-?\d+),\[")
#: The C scanner behind json.loads: `(value, end)` at an offset, StopIteration/ValueError on bad
#: JSON. Used directly to find where a record line's trace ends without copying it.
_scan_once = json.JSONDecoder().scan_once
#: Number types a parsed run_secs list may hold (JsonFloat: from TVM's `\\xHH` JSON dialect).
_NUMBER_TYPES = {int, float, JsonFloat}


@functools.lru_cache(maxsize=1)
def legacy_kinds() -> frozenset[str]:
    """Old spellings of instruction kinds (`GetBlock`), from the instruction registry."""
    from msdb.schedule.instructions import known_kinds, spec_for

    return frozenset(kind for kind in known_kinds() if spec_for(kind).name != kind)


def normalize_trace_json(trace: list[Any]) -> list[Any]:
    """TVM 0.27's form of a trace's JSON (`GetBlock` -> `GetSBlock`, `Split` attrs padded with
    `disable_predication`), rewriting only the instructions that need it, with the rules of
    `msdb.schedule.instructions.normalize_instruction` (the same as `Trace.normalized()`, without
    building a `Trace`)."""
    from msdb.schedule.instruction import Instruction
    from msdb.schedule.instructions import normalize_instruction

    legacy = legacy_kinds()
    insts = []
    for inst in trace[0]:
        kind, inputs, attrs, outputs = inst
        if kind in legacy or (kind == "Split" and len(attrs) == 1):
            new = normalize_instruction(Instruction(kind, tuple(inputs), tuple(attrs), tuple(outputs)))
            insts.append([new.kind, inputs, list(new.attrs), outputs])
        else:
            insts.append(inst)
    return [insts, trace[1]]


_SPLIT_ONE_ATTR = re.compile(r'\["Split",\[[^\[\]]*\],\[[^\[\],]*\],')
_LIST_ONLY = {list}
_FOUR = {4}
_TWO = {2}
_FLOAT_INT = {float, int}
#: (str, list, list, list) * n: the types of n instructions' fields, flattened, by n.
_INST_PATTERNS: dict[int, tuple[type, ...]] = {}
#: Distinct line tails remembered by `_Reader._tail` (a log has one per task).
_MAX_TAILS = 4096
_MAX_SKETCHES = 50000
_ENTER_POSTPROC = ',["EnterPostproc",[],[],[]]'
_chain = itertools.chain.from_iterable


@functools.lru_cache(maxsize=4)
def _postproc_pattern(legacy: frozenset[str]) -> re.Pattern[str]:
    """A regex matching, from a trace's `,["EnterPostproc",...`, the rest of its instruction
    list in TVM's compact form and the `],` before the decisions, when every instruction is
    `[kind, [inputs], [attrs], [outputs]]` with plain JSON scalars or lists of them (two levels
    deep at most), no legacy kind, and no one-attribute Split (those need rewriting).

    This is the per-line check of the quick path: it validates as text, building no objects,
    in half the time of scanning the same text into lists and checking their shape. Anything
    it does not match (string escapes, NaN, deeper nesting, whitespace) goes the general way,
    which decides the same things with the JSON scanner; so it may refuse more, never less."""
    string = r'"[^"\\\x00-\x1f]*+"'
    number = r"-?+(?:0|[1-9][0-9]*+)(?:\.[0-9]++)?+(?:[eE][-+]?+[0-9]++)?+"
    scalar = rf"(?:{string}|{number}|null|true|false)"
    flat = rf"\[(?:{scalar}(?:,{scalar})*+)?+\]"
    item = rf"(?:{scalar}|\[(?:(?:{scalar}|{flat})(?:,(?:{scalar}|{flat}))*+)?+\])"
    items = rf"\[(?:{item}(?:,{item})*+)?+\]"
    excluded = "|".join(re.escape(kind) for kind in sorted(legacy | {"Split"}))
    kind = rf'"(?!(?:{excluded})")[A-Za-z_][A-Za-z0-9_]*+"'
    split = rf'"Split",{items},\[{item}(?:,{item})++\]'
    return re.compile(rf"(?:,\[(?:{split}|{kind},{items},{items}),{items}\])++\],")


def _well_formed(insts: Any) -> bool:
    """Whether `insts` is a non-empty list of `[kind, [inputs], [attrs], [outputs]]` (checked
    column-wise in C: the flattened field types against `(str, list, list, list) * n`)."""
    if type(insts) is not list or not insts:
        return False
    try:
        if set(map(len, insts)) != _FOUR:
            return False
    except TypeError:
        return False
    n = len(insts)
    pattern = _INST_PATTERNS.get(n)
    if pattern is None:
        pattern = _INST_PATTERNS.setdefault(n, (str, list, list, list) * n)
    return tuple(map(type, _chain(insts))) == pattern
_STR_ONLY = {str}
_INT_ONLY = {int}


def scan_trace(trace: Any, legacy: frozenset[str], text: str | None = None) -> tuple[str | None, bool]:
    """(why the trace JSON is malformed or None, whether it needs normalizing).

    A trace is `[[[kind, [inputs], [attrs], [outputs]], ...], [[inst_index, decision], ...]]`.
    The common case is checked column-wise with C-level `map`/`zip` (an import checks 100k
    traces of ~50 instructions); the per-item walk only runs to name what is wrong. `text`, the
    trace's JSON text when known, lets a regex find one-attribute `Split`s."""
    if type(trace) is not list or len(trace) != 2 or type(trace[0]) is not list or type(trace[1]) is not list:
        return "trace must be [instructions, decisions]", False
    insts, decisions = trace
    if insts:
        if (set(map(type, insts)) != _LIST_ONLY or set(map(len, insts)) != {4}):
            return _explain_insts(insts), False
        kinds, inputs, attrs, outputs = zip(*insts)
        if (set(map(type, kinds)) != _STR_ONLY or set(map(type, inputs)) != _LIST_ONLY
                or set(map(type, attrs)) != _LIST_ONLY or set(map(type, outputs)) != _LIST_ONLY):
            return _explain_insts(insts), False
        needs = not legacy.isdisjoint(kinds)
        if not needs and "Split" in kinds:
            if text is not None:
                needs = _SPLIT_ONE_ATTR.search(text) is not None
            else:
                needs = any(k == "Split" and len(a) == 1 for k, a in zip(kinds, attrs))
    else:
        needs = False
    if decisions:
        if set(map(type, decisions)) != _LIST_ONLY or set(map(len, decisions)) != {2}:
            return _explain_decisions(decisions, len(insts)), False
        indexes = [d[0] for d in decisions]
        if set(map(type, indexes)) != _INT_ONLY or min(indexes) < 0 or max(indexes) >= len(insts):
            return _explain_decisions(decisions, len(insts)), False
    return None, needs


def _explain_insts(insts: list[Any]) -> str:
    for i, inst in enumerate(insts):
        if (type(inst) is not list or len(inst) != 4 or type(inst[0]) is not str or type(inst[1]) is not list
                or type(inst[2]) is not list or type(inst[3]) is not list):
            return f"trace instruction {i} is not [kind, [inputs], [attrs], [outputs]]: {_short(inst)}"
    return "trace instructions are malformed"  # pragma: no cover - callers only ask when one is


def _explain_decisions(decisions: list[Any], n: int) -> str:
    for j, item in enumerate(decisions):
        if type(item) is not list or len(item) != 2 or type(item[0]) is not int:
            return f"trace decision {j} is not [instruction_index, decision]: {_short(item)}"
        if not 0 <= item[0] < n:
            return f"trace decision {j} points at instruction {item[0]}, but the trace has {n}"
    return "trace decisions are malformed"  # pragma: no cover


def _short(value: Any, limit: int = 60) -> str:
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


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


class _Reader:
    """Reads work_dirs into an `ImportPlan` (see the module docstring, phase 1)."""

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
        self.legacy_texts = tuple(json.dumps(kind) for kind in sorted(self.legacy))
        self.postproc = _postproc_pattern(self.legacy)
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
        problem, needs_normalizing = scan_trace(trace, self.legacy, trace_text)
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
                                                      f"{_short(run_secs)}"))
                return
            if not all(map(math.isfinite, run_secs)):
                self.bad.append(BadLine(path, number, f"run_secs {_short(run_secs)} holds a value that is not a "
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
                if not _well_formed(insts):
                    return None
                trace_text = text[start:end]
                if _SPLIT_ONE_ATTR.search(trace_text) is not None or any(k in trace_text for k in self.legacy_texts):
                    return None  # maybe a legacy instruction: the general path decides and rewrites
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
            mean = float(run_secs[0])
            if not math.isfinite(mean):
                return None
            run_text = "[%.20g]" % run_secs[0]
        else:
            if not all(map(math.isfinite, run_secs)):
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
            if (end == len(text) and _well_formed(insts) and all(text.find(k) < 0 for k in self.legacy_texts)
                    and _SPLIT_ONE_ATTR.search(text) is None):
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
            problem = f"target must be a config object or a target string, got {_short(target)}"
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
            return (f"args_info must be a list or null, got {_short(args)}",)
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
            wd.workloads.append(self.workload_line(workload_path, number, text))
        n_workloads = len(wd.workloads)
        if sink is not None:
            sink.workloads(wd)
        digest = _Sha256(record_bytes)
        try:
            text = record_bytes.decode("utf-8")
        except UnicodeDecodeError:
            lines = self._lines(record_path, record_bytes)  # line by line, naming the lines that are not UTF-8
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
            with multiprocessing.get_context("fork").Pool(workers) as pool:
                digest.start()  # its thread starts after the fork: a forked child has only the main thread
                for count, records, bad, targets, errors, normalized in pool.imap(_parse_chunk, tasks):
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
            _FORK_TEXT = None
        return n_lines

    def _lines(self, path: Path, data: bytes) -> list[tuple[int, str]]:
        """Non-blank lines with their 1-based numbers (TVM 0.27 segfaults on a blank line; msdb
        skips it); a line that is not UTF-8 is reported."""
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


def _estimated_lines(text: str) -> int:
    """About how many lines `text` has, from the line length of its first 64 KiB (counting
    the newlines of a 250 MB log costs a tenth of a second; this decides only how to split)."""
    sample = text[:1 << 16]
    return max(1, len(text) * (sample.count("\n") + 1) // max(1, len(sample)))


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
#: A worker process's `_Reader`, kept across its tasks: what it learnt (sketches, line tails,
#: targets) is the same for every chunk of a log, and learning it again per chunk cost a
#: tenth of the parse.
_WORKER_READERS: dict[bool, _Reader] = {}


def _worker_reader(opaque: bool) -> _Reader:
    reader = _WORKER_READERS.get(opaque)
    if reader is None:
        reader = _WORKER_READERS[opaque] = _Reader(opaque=opaque, progress=None, total=0)
    return reader


def _target_from_canonical(config: str) -> Target:
    from msdb.records import Target

    return Target(json.loads(config))


def read_import(paths: Sequence[str | Path], *, opaque: bool = False, progress: ProgressFn | None = None,
                workers: int | None = None) -> ImportPlan:
    """Phase 1: read and check every work_dir; the database is not touched. `paths` are
    work_dirs and files (see `resolve_import_paths`). `workers`: processes that parse a big
    record file in parallel (None: one per CPU, up to 8, for files of more than 20,000 lines;
    1: none). The result does not depend on it."""
    resolved = resolve_import_paths(paths)
    total = sum(_line_count(record) for _, record in resolved) if progress is not None else 0  # for the bar only
    reader = _Reader(opaque=opaque, progress=progress, total=total, workers=workers)
    workdirs = [reader.read(workload, record) for workload, record in resolved]
    if progress is not None:
        progress("reading", reader.total, reader.total)
    bad = sorted(reader.bad, key=lambda b: (_order(resolved, b.path), b.line))
    return ImportPlan(workdirs, reader.targets, bad)


def _line_count(path: Path) -> int:
    try:
        with open(path, "rb") as handle:
            return sum(chunk.count(b"\n") for chunk in iter(lambda: handle.read(1 << 20), b""))
    except OSError:
        return 0


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
    total = sum(_line_count(record) for _, record in resolved) if progress is not None else 0
    expected = sum(_file_size(record) for _, record in resolved) // _TYPICAL_LINE_BYTES
    reader = _Reader(opaque=opaque, progress=progress, total=total, workers=workers)
    reader.phase = "importing"  # one pass: reading and writing
    summary = ImportSummary()
    with db.write_transaction(records=expected) as conn:
        writer = ImportWriter(conn, reader.targets, summary, user=user or store.default_user(),
                              host=host or store.default_host(), model=model)
        for workload, record in resolved:
            reader.read(workload, record, sink=writer)
        if progress is not None:
            progress(reader.phase, reader.total, reader.total)
        bad = sorted(reader.bad, key=lambda b: (_order(resolved, b.path), b.line))
        if bad and not skip_bad:
            raise ImportAborted(bad)
        summary.bad_lines = bad
    return summary


#: About the bytes of one record line of a TVM log, to size SQLite's cache for an import
#: before its lines are counted.
_TYPICAL_LINE_BYTES = 2048


def _file_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0
