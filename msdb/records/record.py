"""`TuningRecord` and `ArgInfo`: one measured schedule of a workload, in TVM's terms.

Validity and ranking are TVM's exactly (reference/tvm-metaschedule.md section 1): a record is
valid when its trace has at least one instruction before `EnterPostproc` and some run time is
not the failure marker 1e10; `None`, `[]` and `[1e10]` are invalid. Records rank by the mean
of all run times, failures included.

The trace is kept in whatever form it arrived (a `Trace`, TVM's JSON list, or JSON text from
a database column) and converted on first use: loading a million records must not parse a
million traces (TVM replays every trace at load time, apache/tvm#11680).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass
from hashlib import blake2b as _blake2b
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from msdb.errors import MsdbError
from msdb.records.target import Target
from msdb.records.workload import Workload

if TYPE_CHECKING:
    from msdb.ir.function import IRModule, PrimFunc
    from msdb.schedule.trace import Trace

__all__ = ["ArgInfo", "TuningRecord", "RecordFormatError", "FAILED_RUN_SECS", "trace_json_hash", "check_trace_json"]

#: TVM's run time for a failed build or run.
FAILED_RUN_SECS = 1e10


class RecordFormatError(MsdbError, ValueError):
    """A tuning record (TVM's JSON form) that does not have the expected shape."""


@dataclass(frozen=True, slots=True)
class ArgInfo:
    """One argument of the entry function, TVM's `TensorInfo`: `["TENSOR", dtype, shape]`."""

    dtype: str
    shape: tuple[int, ...]

    def as_json(self) -> list[Any]:
        return ["TENSOR", self.dtype, list(self.shape)]

    @staticmethod
    def from_json(obj: Any) -> ArgInfo:
        if (isinstance(obj, list) and len(obj) == 3 and obj[0] == "TENSOR" and isinstance(obj[1], str)
                and isinstance(obj[2], list) and all(isinstance(d, int) for d in obj[2])):
            return ArgInfo(obj[1], tuple(obj[2]))
        raise RecordFormatError(f'an arg info is ["TENSOR", dtype, [shape...]], got {json.dumps(obj)[:80]}')

    @staticmethod
    def from_prim_func(func: IRModule | PrimFunc) -> list[ArgInfo]:
        """The arg infos of a function's (or a module's entry function's) buffers, in
        parameter order, as TVM records them."""
        from msdb.ir.expr import const_int
        from msdb.ir.function import IRModule

        if isinstance(func, IRModule):
            func = func.main
        infos = []
        for buf in func.buffers:
            dims = [const_int(d) if not isinstance(d, int) else d for d in buf.shape]
            if any(d is None for d in dims):
                raise RecordFormatError(f"buffer {buf.name} has a symbolic shape; TVM's arg info needs static shapes")
            infos.append(ArgInfo(buf.dtype, tuple(int(d) for d in dims)))  # type: ignore[arg-type]
        return infos


def _coerce_run_secs(run_secs: Iterable[float] | None) -> tuple[float, ...] | None:
    if run_secs is None:
        return None
    try:
        values = tuple(r if isinstance(r, float) else float(r) for r in run_secs)
    except (TypeError, ValueError):
        raise RecordFormatError(f"run_secs must be a list of numbers or None, got {run_secs!r}") from None
    return values


def trace_json_hash(trace_json: Any) -> str:
    """A 16-hex hash of a trace's canonical JSON (instructions and decisions): the dedup key."""
    text = trace_json if isinstance(trace_json, str) else json.dumps(trace_json, separators=(",", ":"), sort_keys=True)
    return hashlib.blake2b(text.encode("utf-8"), digest_size=8).hexdigest()


def check_trace_json(trace: Any) -> None:
    """Raise `RecordFormatError` unless `trace` has the shape of TVM's trace JSON
    (`[[[kind, inputs, attrs, outputs], ...], [[inst_index, decision], ...]]`); cheap, no
    parsing of the instructions themselves."""
    if not (isinstance(trace, list) and len(trace) == 2 and isinstance(trace[0], list) and isinstance(trace[1], list)):
        raise RecordFormatError("a trace is [instructions, decisions]")
    for inst in trace[0]:
        if not (isinstance(inst, list) and len(inst) == 4 and isinstance(inst[0], str)):
            raise RecordFormatError(f"an instruction is [kind, inputs, attrs, outputs], got {json.dumps(inst)[:80]}")
    for decision in trace[1]:
        if not (isinstance(decision, list) and len(decision) == 2 and isinstance(decision[0], int)):
            raise RecordFormatError(f"a decision is [instruction_index, value], got {json.dumps(decision)[:80]}")


_FIRST_KIND = re.compile(r'\s*\[\s*\[\s*(?:(\])|\[\s*"([A-Za-z_][A-Za-z0-9_]*)")')


def _trace_text_is_valid_sketch(text: str) -> bool | None:
    """The same test on trace JSON text, from its first few bytes; None when the text does not
    start the usual way (then it is parsed). Text without whitespace (what TVM and msdb write)
    is read with plain string operations, anything else with `_FIRST_KIND`."""
    if text.startswith('[[["'):
        end = text.find('"', 4)
        kind = text[4:end]
        if end > 4 and kind.isascii() and kind.isidentifier():
            return kind != "EnterPostproc"
    match = _FIRST_KIND.match(text)
    if match is None:
        return None
    if match.group(1) is not None:
        return False  # no instructions at all
    return match.group(2) != "EnterPostproc"


def _trace_json_is_valid_sketch(trace_json: Any) -> bool:
    """>= 1 instruction before EnterPostproc, read off TVM's JSON without parsing the trace."""
    if not isinstance(trace_json, list) or not trace_json or not isinstance(trace_json[0], list):
        return False
    insts = trace_json[0]
    return bool(insts) and isinstance(insts[0], list) and bool(insts[0]) and insts[0][0] != "EnterPostproc"


class TuningRecord:
    """A measured schedule: `trace` applied to `workload` ran in `run_secs` seconds on `target`.

    `trace` may be a `msdb.schedule.Trace`, TVM's trace JSON (`[insts, decisions]`) or that JSON
    as text; it is converted lazily. `target` accepts anything `Target` does.
    """

    __slots__ = ("_trace", "_trace_json", "_trace_text", "workload", "run_secs", "target", "_args_info", "_args_json",
                 "_mean", "_valid")

    def __init__(self, trace: Trace | list[Any] | str, workload: Workload | IRModule | PrimFunc,
                 run_secs: Sequence[float] | None = None, target: Target | str | dict[str, Any] | None = None,
                 args_info: Sequence[ArgInfo] | list[Any] | None = None) -> None:
        self._trace: Trace | None = None
        self._trace_json: list[Any] | None = None
        self._trace_text: str | None = None
        if isinstance(trace, str):
            self._trace_text = trace
        elif isinstance(trace, list):
            self._trace_json = trace
        else:
            self._trace = trace
        self.workload: Workload = Workload.coerce(workload)
        self.run_secs: tuple[float, ...] | None = _coerce_run_secs(run_secs)
        self.target: Target | None = Target.coerce(target)
        self._args_info: tuple[ArgInfo, ...] | None = None
        self._args_json: list[Any] | None = None
        if args_info is not None:
            args = list(args_info)
            if all(isinstance(a, ArgInfo) for a in args):
                self._args_info = tuple(args)
            else:
                self._args_json = args
        self._mean: float | None = None
        self._valid: bool | None = None

    # ---- trace in its three forms ----
    @property
    def trace(self) -> Trace:
        """The trace as a `msdb.schedule.Trace` (parsed from JSON on first use)."""
        if self._trace is None:
            from msdb.schedule.trace import Trace

            self._trace = Trace.from_json(self.trace_json)
        return self._trace

    @property
    def trace_json(self) -> list[Any]:
        """TVM's trace JSON `[insts, decisions]`."""
        if self._trace_json is None:
            if self._trace_text is not None:
                from msdb.schedule.tvm_json import loads

                try:
                    self._trace_json = loads(self._trace_text)
                except ValueError as exc:
                    raise RecordFormatError(f"stored trace is not valid JSON ({exc})") from None
            else:
                assert self._trace is not None
                self._trace_json = self._trace.as_json()
        return self._trace_json

    @property
    def trace_text(self) -> str:
        """The trace JSON as text in TVM's spelling (what databases store)."""
        if self._trace_text is None:
            from msdb.schedule.tvm_json import dumps

            self._trace_text = dumps(self.trace_json)
        return self._trace_text

    # ---- args ----
    @property
    def args_info(self) -> tuple[ArgInfo, ...] | None:
        if self._args_info is None and self._args_json is not None:
            self._args_info = tuple(ArgInfo.from_json(a) for a in self._args_json)
        return self._args_info

    def args_info_key(self) -> object | None:
        """The object `args_info_json()` is built from (None without arg infos). It lives as long
        as the record, so its `id` can key a cache of the JSON text for a batch of records that
        share their arg infos; `args_info_json()` itself may return a new list on every call."""
        return self._args_json if self._args_json is not None else self._args_info

    def args_info_json(self) -> list[Any] | None:
        if self._args_json is not None:
            return self._args_json
        if self._args_info is None:
            return None
        return [a.as_json() for a in self._args_info]

    # ---- TVM's validity and ranking ----
    @property
    def is_valid(self) -> bool:
        """TVM's rule: a non-postproc instruction and some run time below the 1e10 failure mark."""
        if self._valid is None:
            self._valid = self._compute_valid()
        return self._valid

    def _compute_valid(self) -> bool:
        if not self.run_secs or not any(r < FAILED_RUN_SECS for r in self.run_secs):
            return False
        if self._trace_json is None and self._trace_text is not None:
            quick = _trace_text_is_valid_sketch(self._trace_text)
            if quick is not None:
                return quick
        if self._trace is not None and self._trace_json is None and self._trace_text is None:
            insts = self._trace.insts
            return bool(insts) and insts[0].kind != "EnterPostproc"
        return _trace_json_is_valid_sketch(self.trace_json)

    @property
    def mean_run_secs(self) -> float:
        """Mean of all run times, 1e10 failures included; inf without run times."""
        if self._mean is None:
            self._mean = math.fsum(self.run_secs) / len(self.run_secs) if self.run_secs else math.inf
        return self._mean

    def trace_hash(self) -> str:
        """16-hex hash of the trace JSON (instructions and decisions), for deduplication."""
        return trace_json_hash(self.trace_text)

    # ---- what a database stores ----
    def storage_fields(self) -> tuple[str, str, str | None, float | None, bool]:
        """`(trace text, trace hash, run_secs JSON text, mean run seconds, valid)`: the derived
        column values a database stores for this record; exactly `trace_text`, `trace_hash()`,
        `run_secs` in TVM's JSON spelling, `mean_run_secs` (None without run times) and
        `is_valid`.

        A bulk commit spends most of its Python time here, so the common case (trace given as
        text, one run time) takes a straight path: the trace is neither parsed nor
        re-serialized, hashed once, and validity is read off its first bytes.
        """
        text = self._trace_text
        if text is None:
            text = self.trace_text
        digest = _blake2b(text.encode(), digest_size=8).hexdigest()
        run_secs = self.run_secs
        if not run_secs:
            self._valid = False
            return text, digest, (None if run_secs is None else "[]"), None, False
        if len(run_secs) == 1:
            value = run_secs[0]
            spelled = "%.20g" % value if type(value) is float else ""
            if not spelled or spelled[-1] > "9":  # a JsonFloat keeps its spelling; inf and nan have names
                from msdb.schedule.tvm_json import format_float

                spelled = format_float(value)
            run_text = "[" + spelled + "]"
            mean = value if type(value) is float else float(value)
            ran = value < FAILED_RUN_SECS
        else:
            from msdb.schedule.tvm_json import format_float

            run_text = "[" + ",".join(map(format_float, run_secs)) + "]"
            mean = math.fsum(run_secs) / len(run_secs)
            ran = any(r < FAILED_RUN_SECS for r in run_secs)
        valid = self._valid
        if valid is None:
            if not ran:
                valid = False
            elif self._trace_json is None and self._trace is None:
                quick = _trace_text_is_valid_sketch(text)
                valid = quick if quick is not None else self._compute_valid()
            else:
                valid = self._compute_valid()
            self._valid = valid
        return text, digest, run_text, mean, valid

    def with_workload(self, workload: Workload) -> TuningRecord:
        """The same measurement attached to another (equal) stored workload."""
        clone = TuningRecord.__new__(TuningRecord)
        for slot in TuningRecord.__slots__:
            object.__setattr__(clone, slot, getattr(self, slot))
        clone.workload = workload
        return clone

    # ---- TVM's JSON ----
    def as_json(self) -> list[Any]:
        """TVM's `[trace, run_secs | null, target | null, args_info | null]`."""
        return [
            self.trace_json,
            list(self.run_secs) if self.run_secs is not None else None,
            self.target.as_json() if self.target is not None else None,
            self.args_info_json(),
        ]

    @staticmethod
    def from_json(obj: Any, workload: Workload | IRModule | PrimFunc) -> TuningRecord:
        """Parse TVM's `[trace, run_secs, target, args_info]` (the part of a record line after
        the workload index). Old logs with fewer fields or a CLI target string are accepted."""
        if not isinstance(obj, list) or not 1 <= len(obj) <= 4:
            raise RecordFormatError("a tuning record is [trace, run_secs, target, args_info]")
        trace, run_secs, target, args = (list(obj) + [None, None, None])[:4]
        check_trace_json(trace)
        if run_secs is not None and not (isinstance(run_secs, list) and all(
                isinstance(r, (int, float)) and not isinstance(r, bool) for r in run_secs)):
            raise RecordFormatError(f"run_secs must be a list of numbers or null, got {json.dumps(run_secs)[:80]}")
        if args is not None and not isinstance(args, list):
            raise RecordFormatError("args_info must be a list or null")
        if isinstance(target, dict) and not target:
            target = None
        return TuningRecord(trace, workload, run_secs, target, args)

    def __repr__(self) -> str:
        target = f" {self.target.kind}" if self.target is not None else ""
        return f"<TuningRecord {self.workload!r}{target} mean={self.mean_run_secs:.4g}s valid={self.is_valid}>"
