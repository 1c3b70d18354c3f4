"""The one rule for what enters a database, whatever the door: `msdb import`, `msdb pull`,
`msdb merge`, and `Database.commit_tuning_record` / `commit_workload`.

A record is admitted when its stored form is a record line TVM's grammar accepts
(`msdb.interop.tvm.grammar.LineParser.record`) and its derived columns are what it gives; a
workload when its hashes are what its script gives. `Admission` is what a door holds: one parser,
the source's name, and either `AdmissionError` or, with `skip_bad`, a `refused` list. See
docs/architecture.md, "One record's way".
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping

from msdb.database.errors import DatabaseError
from msdb.errors import MsdbError

if TYPE_CHECKING:
    from msdb.ir.function import IRModule
    from msdb.records import TuningRecord, Workload

#: `TuningRecord.storage_fields()`: trace text, trace hash, run_secs text, mean, valid.
StorageFields = tuple[str, str, "str | None", "float | None", bool]

__all__ = ["AdmissionError", "Admission", "AdmittedWorkload", "workload_problem"]

_TRACE_HASH = re.compile(r"[0-9a-f]{16}")
_SHASH = re.compile(r"[0-9a-f]{16}")
#: The longest workload script, IR blob or TVM payload admitted, in characters (bytes): as
#: `msdb.interop.tvm.grammar.MAX_LINE_CHARS` for a whole workload line.
MAX_WORKLOAD_CHARS = 1 << 25
#: The longest workload name admitted.
MAX_NAME_CHARS = 1000


class AdmissionError(DatabaseError):
    """A source holds a record or workload no database admits, and skipping was not asked for;
    the message names the source and the item. Nothing of that source was written."""


@dataclass
class AdmittedWorkload:
    """A workload row that passed the rule: its IR (None for an opaque one) and its hashes,
    recomputed."""

    mod: IRModule | None
    hashes: dict[str, str]


class _Opaque:
    """The workload entry of records of an opaque workload: not checked against its blocks."""


_OPAQUE = _Opaque()


@dataclass
class Admission:
    """The rule, as one door applies it to one source (see the module docstring). `source`
    names the source in messages (a file, a URL); `skip_bad`: leave bad items out and list them
    in `refused` instead of raising; `unknown_kinds`: admit instruction kinds TVM does not have."""

    source: str
    skip_bad: bool = False
    unknown_kinds: bool = False
    #: what the error adds after the bad item: what the door wrote, and how to go on
    refusal: str = " nothing of it was written (--skip-bad writes the rest)"
    refused: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        from msdb.interop.tvm.grammar import LineParser

        self._lines = LineParser(unknown_kinds=self.unknown_kinds)
        self._loads: dict[str, Any] = {}
        self._args_texts: dict[int, Any] = {}
        self._args_owners: list[object] = []

    # ---- verdicts ----
    def refuse(self, what: str, reason: str) -> bool:
        """A bad item: raise `AdmissionError`, or (with `skip_bad`) note it and return False."""
        line = f"{what}: {reason}"
        if not self.skip_bad:
            raise AdmissionError(f"{self.source}: {line};{self.refusal}")
        self.refused.append(line)
        return False

    # ---- workloads ----
    def workload_row(self, what: str, row: Mapping[Any, Any]) -> AdmittedWorkload | None:
        """The admitted form of a stored workload row (columns `shash`, `ignore_tensor_hash`,
        `anchor_hash`, `name`, `script`, `ir_format`, `ir_blob`, `tvm_payload`, `tvm_shash`), or
        None when it is refused and skipped."""
        checked = _workload_row(row)
        if isinstance(checked, str):
            self.refuse(what, checked)
            return None
        return checked

    def workload(self, workload: Workload) -> None:
        """Refuse (raise) a `Workload` whose claimed hashes or TVM payload are not its IR's."""
        problem = workload_problem(workload)
        if problem is not None:
            self.refuse(f"workload {workload.name or workload.hash('structural')}", problem)

    # ---- records ----
    def record_row(self, what: str, row: Mapping[Any, Any], target_config: Any, workload: object) -> bool:
        """Whether a stored record row (columns `trace`, `trace_hash`, `run_secs`,
        `mean_run_secs`, `is_valid`, `args_info`) of target `target_config` (canonical config
        JSON, `null` for none) is admitted. `workload`: its admitted workload (an
        `AdmittedWorkload`, or anything with a `mod`, whose blocks the trace must fit)."""
        problem = self._row_problem(row, target_config, workload)
        return True if problem is None else self.refuse(what, problem)

    def record(self, what: str, record: TuningRecord) -> StorageFields | None:
        """The stored fields of a `TuningRecord` about to be committed (`storage_fields`: the
        committer stores these, computed once), or, when the rule refuses it, `AdmissionError`
        (None with `skip_bad`). Arg infos shared by the records of a batch are serialized once
        per object."""
        from msdb.records import RecordFormatError
        from msdb.schedule.tvm_json import dumps

        try:
            fields = record.storage_fields()
            args_key = record.args_info_key()
            args = self._args_texts.get(id(args_key), _MISSING) if args_key is not None else None
            if args is _MISSING:
                args_json = record.args_info_json()
                args = self._args_texts[id(args_key)] = None if args_json is None else dumps(args_json)
                self._args_owners.append(args_key)  # keeps the id valid while the cache lives
        except RecordFormatError as exc:  # a trace text that is not JSON (what the rule says below)
            self.refuse(what, "trace is not JSON" if "trace" in str(exc) else str(exc))
            return None
        trace, trace_hash, run_text, mean, valid = fields
        target = record.target
        row = {"trace": trace, "trace_hash": trace_hash, "run_secs": run_text, "mean_run_secs": mean,
               "is_valid": valid, "args_info": args}
        # run_secs, target config and args_info texts are msdb's own spelling of parsed values
        problem = self._row_problem(row, "null" if target is None else target.canonical_json(), record.workload,
                                    own_texts=True)
        if problem is not None:
            self.refuse(what, problem)
            return None
        return fields

    def _row_problem(self, row: Mapping[Any, Any], target_config: Any, workload: object, *,
                     own_texts: bool = False) -> str | None:
        """Why a record in its stored form is refused (None: admitted). `own_texts`: its
        run_secs, args_info and target config texts are msdb's own serialization of values
        already parsed (a `TuningRecord`'s), so each is one JSON value by construction."""
        trace, trace_hash, run_secs, args = row["trace"], row["trace_hash"], row["run_secs"], row["args_info"]
        if type(trace) is not str:
            return f"trace must be JSON text, got {_short(trace)}"
        if type(trace_hash) is not str or not _TRACE_HASH.fullmatch(trace_hash):
            return f"trace_hash {_short(trace_hash)} is not 16 hex digits"
        if run_secs is not None and type(run_secs) is not str:
            return f"run_secs must be JSON text or null, got {_short(run_secs)}"
        if args is not None and type(args) is not str:
            return f"args_info must be JSON text or null, got {_short(args)}"
        if type(target_config) is not str:
            return f"target config must be JSON text, got {_short(target_config)}"
        # each of the four texts must be one JSON value on its own, so that the line below
        # splits into exactly these fields (a text cannot smuggle the next field in)
        for name, text in () if own_texts else (("run_secs", run_secs), ("args_info", args),
                                                  ("target config", target_config)):
            if text is not None and self._load(text) is _BAD:
                return f"{name} {_short(text)} is not JSON"
        if isinstance(workload, AdmittedWorkload):
            entry: object = workload if workload.mod is not None else _OPAQUE
        else:
            entry = workload
        line = f"[0,[{trace},{run_secs if run_secs is not None else 'null'},{target_config},{args or 'null'}]]"
        fields = self._lines.record(line, [entry if entry is not None else _OPAQUE], "its workload")
        if isinstance(fields, str):
            if fields.startswith(("invalid JSON", "truncated JSON")):
                return "trace is not JSON"  # the other fields were read above: the trace is what fails
            return fields.replace(" of its workload (is the record file paired with its own workload file?)",
                                  " of its workload")
        _, _, trace_text, fresh_hash, _, mean, valid, _ = fields
        if trace_text != trace:
            # the grammar re-spelled the trace (whitespace, a legacy kind): it is stored as sent,
            # so check that it is one JSON value and hash what is stored
            from msdb.interop.tvm.grammar import _loads_tvm

            try:
                _loads_tvm(trace)
            except (ValueError, RecursionError):
                return "trace is not one JSON value"
            from msdb.records.record import trace_json_hash

            fresh_hash = trace_json_hash(trace)
        if trace_hash != fresh_hash:
            return f"trace_hash {trace_hash} is not the hash of its trace ({fresh_hash})"
        stored_mean = row["mean_run_secs"]
        if (mean is None) != (stored_mean is None) or (mean is not None and not (
                type(stored_mean) in (int, float) and math.isclose(mean, stored_mean, rel_tol=1e-12, abs_tol=0.0))):
            return f"mean_run_secs {_short(stored_mean)} is not the mean of its run_secs ({mean})"
        if row["is_valid"] not in (0, 1) or bool(row["is_valid"]) != valid:
            return f"is_valid {_short(row['is_valid'])} but TVM's rule says {valid}"
        return None

    def _load(self, text: str) -> Any:
        value = self._loads.get(text, _MISSING)
        if value is _MISSING:
            try:
                value = json.loads(text)
            except (ValueError, RecursionError):
                value = _BAD
            if len(self._loads) < 4096:
                self._loads[text] = value
        return value


_BAD = object()
_MISSING = object()


def _short(value: Any) -> str:
    from msdb.interop.tvm.trace_check import short_json

    return short_json(value)


def _workload_row(row: Mapping[Any, Any]) -> AdmittedWorkload | str:
    from msdb.database.rows import is_opaque, opaque_shash

    claimed = {"structural": row["shash"], "ignore-tensor": row["ignore_tensor_hash"],
               "anchor-block": row["anchor_hash"]}
    for mode, value in claimed.items():
        if type(value) is not str or not _SHASH.fullmatch(value):
            return f"its {mode} hash {_short(value)} is not 16 hex digits"
    name, payload, tvm_shash = row.get("name"), row.get("tvm_payload"), row.get("tvm_shash")
    if name is not None and (type(name) is not str or len(name) > MAX_NAME_CHARS):
        return f"its name {_short(name)} is not a name"
    if payload is not None and (type(payload) is not str or len(payload) > MAX_WORKLOAD_CHARS):
        return f"its TVM payload is not text of at most {MAX_WORKLOAD_CHARS:,} characters"
    if tvm_shash is not None and (type(tvm_shash) is not str or not tvm_shash.isdigit() or len(tvm_shash) > 20):
        return f"its TVM shash {_short(tvm_shash)} is not a decimal integer"
    ir_format = row.get("ir_format")
    if ir_format is not None and type(ir_format) is not str:
        return f"its ir_format {_short(ir_format)} is not text"
    if is_opaque(ir_format):
        from msdb.interop.tvm.payload import PayloadError, payload_bytes

        if payload is None or tvm_shash is None:
            return "an opaque workload without its TVM payload and shash"
        key = opaque_shash(tvm_shash)
        if set(claimed.values()) != {key}:
            return f"an opaque workload is keyed by its TVM shash ({key}), not {claimed['structural']}"
        try:
            payload_bytes(payload)
        except PayloadError as exc:
            return f"its opaque payload does not unframe: {exc}"
        return AdmittedWorkload(None, claimed)
    script, blob = row.get("script"), row.get("ir_blob")
    if type(script) is not str or len(script) > MAX_WORKLOAD_CHARS:
        return f"its script is not text of at most {MAX_WORKLOAD_CHARS:,} characters"
    if blob is not None and (not isinstance(blob, (bytes, bytearray, memoryview)) or len(blob) > MAX_WORKLOAD_CHARS):
        return f"its IR blob is not bytes of at most {MAX_WORKLOAD_CHARS:,}"
    from msdb.hashing import structural_hash
    from msdb.ir.script import from_script
    from msdb.records.workload import HASH_MODES

    try:
        mod = from_script(script)
        hashes = {mode: structural_hash(mod, mode) for mode in HASH_MODES}
    except MsdbError as exc:
        return f"its script is not a workload msdb reads: {exc}"
    except (RecursionError, ValueError, TypeError, SyntaxError) as exc:
        return f"its script is not a workload msdb reads: {type(exc).__name__}: {exc}"
    for mode, value in claimed.items():
        if hashes[mode] != value:
            return f"it claims {mode} hash {value}, but its script hashes to {hashes[mode]}"
    from msdb.ir.codec import IR_FORMAT

    if blob is not None and ir_format == IR_FORMAT:
        problem = _blob_problem(bytes(blob), hashes["structural"])
        if problem is not None:
            return problem
    if payload is not None:
        problem = _payload_problem(payload, hashes["structural"])
        if problem is not None:
            return problem
    return AdmittedWorkload(mod, hashes)


def _blob_problem(blob: bytes, shash: str) -> str | None:
    from msdb.hashing import structural_hash
    from msdb.ir.codec import load_ir
    from msdb.ir.function import IRModule
    from msdb.ir.tree_size import check_tree_size

    try:
        node = load_ir(blob)
        mod = node if isinstance(node, IRModule) else IRModule.from_func(node)
        check_tree_size(mod, "IR blob")
        fresh = structural_hash(mod)
    except Exception as exc:  # noqa: BLE001 - a hostile blob may make the unpickler raise anything
        return f"its IR blob does not read back ({type(exc).__name__}: {str(exc)[:200]})"
    if fresh != shash:
        return f"its IR blob is another workload (hash {fresh}) than its script ({shash})"
    return None


def _payload_problem(payload: str, shash: str) -> str | None:
    from msdb.hashing import structural_hash
    from msdb.interop.tvm.payload import decode_workload

    try:
        fresh = structural_hash(decode_workload(payload))
    except MsdbError as exc:
        return f"its TVM payload does not decode: {exc}"
    except RecursionError:
        return "its TVM payload is nested too deeply to decode"
    if fresh != shash:
        return f"its TVM payload is another workload (hash {fresh}) than its IR ({shash})"
    return None


def workload_problem(workload: Workload) -> str | None:
    """Why a `Workload` about to be committed is refused: hashes it claims (a workload built
    with `hashes=`) that are not its IR's, or a TVM payload of another workload; None when it
    is admitted. Hashing a module already hashed costs nothing (`Workload`'s cache)."""
    from msdb.records import Workload as _Workload

    fresh = _Workload(workload.mod).hashes
    for mode, value in fresh.items():
        claimed = workload.hash(mode)
        if claimed != value:
            return f"it claims {mode} hash {claimed}, but its IR hashes to {value}"
    if workload.tvm_payload is not None:
        return _payload_problem(workload.tvm_payload, fresh["structural"])
    return None
