"""`TuningRecord` and `ArgInfo`: one measured schedule of a workload, in TVM's terms.

Validity and ranking are TVM's exactly (docs/tvm-formats.md section 2), with the rules in
`msdb.records.ranking`: a record is valid when its trace has at least one instruction before
`EnterPostproc` and some run time is not the failure mark 1e10; `None`, `[]` and `[1e10]` are
invalid. Records rank by the mean of all run times, failures included.

The trace is kept in whatever form it arrived (a `Trace`, TVM's JSON list, or JSON text from
a database column) and converted on first use: loading a million records must not parse a
million traces (TVM replays every trace at load time, apache/tvm#11680). Reading a record from
a TVM log line is the job of the one TVM line grammar, `msdb.interop.tvm.grammar`.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from hashlib import blake2b as _blake2b
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from msdb.errors import MsdbError
from msdb.records.ranking import FAILED_RUN_SECS, mean_run_secs, ran, run_secs_text, sketch_is_valid, \
    trace_text_sketch_is_valid
from msdb.records.target import Target
from msdb.records.workload import Workload

if TYPE_CHECKING:
    from msdb.ir.function import IRModule, PrimFunc
    from msdb.schedule.trace import Trace

__all__ = ["ArgInfo", "TuningRecord", "RecordFormatError", "FAILED_RUN_SECS", "TRACE_HASH_BYTES", "trace_hasher",
           "trace_json_hash"]


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


#: Bytes of a trace hash (16 hex digits).
TRACE_HASH_BYTES = 8


def trace_hasher(text: str = "") -> Any:
    """A blake2b state fed `text`: the trace hash of `text` + whatever is fed next (the importer
    hashes a shared sketch once and continues from its state)."""
    return _blake2b(text.encode("utf-8"), digest_size=TRACE_HASH_BYTES)


def trace_json_hash(trace_json: Any) -> str:
    """A 16-hex hash of a trace's JSON text (or of its compact sorted JSON): the dedup key."""
    text = trace_json if isinstance(trace_json, str) else json.dumps(trace_json, separators=(",", ":"), sort_keys=True)
    return trace_hasher(text).hexdigest()


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
        if not ran(self.run_secs):
            return False
        if self._trace_json is None and self._trace_text is not None:
            quick = trace_text_sketch_is_valid(self._trace_text)
            if quick is not None:
                return quick
        if self._trace is not None and self._trace_json is None and self._trace_text is None:
            insts = self._trace.insts
            return bool(insts) and insts[0].kind != "EnterPostproc"
        trace_json = self.trace_json
        return type(trace_json) is list and bool(trace_json) and sketch_is_valid(trace_json[0])

    @property
    def mean_run_secs(self) -> float:
        """Mean of all run times, 1e10 failures included; inf without run times."""
        if self._mean is None:
            mean = mean_run_secs(self.run_secs)
            self._mean = math.inf if mean is None else mean
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
        digest = _blake2b(text.encode(), digest_size=TRACE_HASH_BYTES).hexdigest()
        run_secs = self.run_secs
        run_text = run_secs_text(run_secs)
        if not run_secs:
            self._valid = False
            return text, digest, run_text, None, False
        # a plain float: SQLite drivers take exactly float without an adapter lookup
        mean = float(run_secs[0]) if len(run_secs) == 1 else mean_run_secs(run_secs)
        valid = self._valid
        if valid is None:
            if not ran(run_secs):
                valid = False
            elif self._trace_json is None and self._trace is None:
                quick = trace_text_sketch_is_valid(text)
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

    def __repr__(self) -> str:
        target = f" {self.target.kind}" if self.target is not None else ""
        return f"<TuningRecord {self.workload!r}{target} mean={self.mean_run_secs:.4g}s valid={self.is_valid}>"
