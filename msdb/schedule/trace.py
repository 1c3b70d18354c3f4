"""`Trace`: the instructions a schedule ran plus its sampling decisions, in TVM's formats.

Frozen data: what a tuning record stores, what the tuner mutates (`with_decision`) and what
replays a schedule (`apply_to_schedule`). JSON (`as_json` / `from_json`, every TVM generation
byte for byte; `normalized()` for TVM 0.27's form) and Python (`as_python`, `str(trace)`). See
docs/tvm-formats.md section 1 and docs/architecture.md, "Schedules and traces".
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, NamedTuple, Sequence

from msdb.errors import MsdbError, ScheduleError
from msdb.identity_cache import KeyCache
from msdb.schedule.instruction import (RV_TYPES_BY_PREFIX, Generation, IndexMapInput, Instruction, InstructionKind,
                                       RawInput,
                                      token_text)
from msdb.schedule.instructions import check_layout, kind_for, legacy_instruction, normalize_instruction, print_style
from msdb.schedule.rv import RV

if TYPE_CHECKING:
    from msdb.schedule.schedule import Schedule

__all__ = ["Trace", "TraceError", "DecisionProvider", "replay_problem"]

logger = logging.getLogger(__name__)

DecisionProvider = Callable[[Instruction, list[Any], tuple[Any, ...], Any], Any]


class TraceError(MsdbError):
    """A trace (usually its JSON) is malformed: the message names the instruction index and
    what is wrong with it."""

    def __init__(self, message: str, index: int | None = None) -> None:
        self.index = index
        super().__init__(message)


def _where(index: int, kind: str | None) -> str:
    return f"trace instruction {index}" + (f" ({kind})" if kind else "")


class Trace:
    """An immutable sequence of instructions with the decisions of its sampling instructions
    (keyed by the Instruction object, which has identity equality)."""

    __slots__ = ("_insts", "_decisions")

    def __init__(self, insts: Iterable[Instruction] = (), decisions: Mapping[Instruction, Any] | None = None) -> None:
        self._insts: tuple[Instruction, ...] = tuple(insts)
        self._decisions: dict[Instruction, Any] = dict(decisions or {})

    # ---------------------------------------------------------------- basics
    @property
    def insts(self) -> tuple[Instruction, ...]:
        return self._insts

    @property
    def decisions(self) -> dict[Instruction, Any]:
        """A copy: the trace itself never changes."""
        return dict(self._decisions)

    def get_decision(self, inst: Instruction) -> Any:
        return self._decisions.get(inst)

    def __len__(self) -> int:
        return len(self._insts)

    def __repr__(self) -> str:
        return f"<Trace {len(self._insts)} instructions, {len(self._decisions)} decisions>"

    def __str__(self) -> str:
        return self.as_python()

    def _valid_prefix(self, remove_postproc: bool) -> tuple[Instruction, ...]:
        """The instructions kept when post-processing is dropped: everything before the first
        EnterPostproc (which is dropped too), as TVM does."""
        if not remove_postproc:
            return self._insts
        for i, inst in enumerate(self._insts):
            if kind_for(inst).postproc:
                return self._insts[:i]
        return self._insts

    @property
    def replayed_insts(self) -> tuple[Instruction, ...]:
        """The instructions a replay without post-processing runs (`apply_to_schedule(...,
        remove_postproc=True)`): their positions are the replay's instruction indices."""
        return self._valid_prefix(True)

    @property
    def is_current(self) -> bool:
        """True when every instruction is in TVM 0.27's form (no GetBlock, no 1-attr Split)."""
        return all(normalize_instruction(inst) is inst for inst in self._insts)

    def normalized(self) -> Trace:
        """This trace in TVM 0.27's form (`GetBlock` -> `GetSBlock`, `Split` attrs padded with
        `disable_predication` = 0); the same RVs, decisions carried over. A trace already in
        that form is returned as is."""
        if self.is_current:
            return self
        return self._map_insts(normalize_instruction)

    def legacy(self, style: bool | str = True) -> Trace:
        """This trace as an older TVM records it (see `as_python` for `style`): what msdb
        writes when it exports for an older TVM."""
        form = print_style(style)
        return self.normalized()._map_insts(lambda inst: legacy_instruction(inst, form))

    def _map_insts(self, fn: Callable[[Instruction], Instruction]) -> Trace:
        insts = []
        decisions = {}
        for inst in self._insts:
            new = fn(inst)
            insts.append(new)
            if inst in self._decisions:
                decisions[new] = self._decisions[inst]
        return Trace(insts, decisions)

    # ---------------------------------------------------------------- JSON
    def as_json(self, remove_postproc: bool = False) -> list[Any]:
        """TVM's JSON object `[insts, decisions]` (plain lists, ints, floats, strings)."""
        names: dict[RV, str] = {}
        insts_json: list[Any] = []
        decisions_json: list[Any] = []
        for index, inst in enumerate(self._valid_prefix(remove_postproc)):
            kind = kind_for(inst)
            try:
                inputs = [_input_to_json(v, names, kind.input_bools_as_ints(i)) for i, v in enumerate(inst.inputs)]
            except LookupError as exc:
                raise TraceError(f"{_where(index, inst.kind)}: input {exc.args[0]!r} is not defined by an earlier instruction",
                                 index) from None
            attrs = kind.attrs_to_json(inst.attrs)
            outputs = _name_outputs(inst.outputs, names, index, inst.kind)
            insts_json.append([inst.kind, inputs, attrs, outputs])
            if inst in self._decisions and self._decisions[inst] is not None:
                decisions_json.append([index, _plain(self._decisions[inst])])
        return [insts_json, decisions_json]

    def decided_json(self) -> str | None:
        """The compact JSON text of `simplified(remove_postproc=True).as_json()` when every
        sampling instruction it keeps has a decision, else None (replaying it draws): what a
        search remembers a replay by.

        Which instructions the simplification keeps and their JSON depend on the instructions
        only, not on the decisions, and a mutant shares its parent's instruction objects; so
        that part is worked out once per sequence of instructions (by their identities) and a
        mutant's key serializes only its decisions (docs/architecture.md, "Search")."""
        insts = self._valid_prefix(True)
        structure = _decided_structure(insts)
        decisions = self._decisions
        if any(inst not in decisions for inst in structure.sampling):
            return None
        if isinstance(structure.insts_json, TraceError):  # an input no instruction defines
            raise TraceError(str(structure.insts_json), structure.insts_json.index)
        decided = [[index, _plain(decisions[inst])] for index, inst in enumerate(structure.kept)
                   if decisions.get(inst) is not None]
        return f"[{structure.insts_json},{json.dumps(decided, separators=(',', ':'))}]"

    @classmethod
    def from_json(cls, obj: Any) -> Trace:
        """Parse TVM's trace JSON of any generation, keeping each instruction as written (see
        the module docstring). `obj` is the parsed JSON (parse with `tvm_json.loads` to keep
        float spellings for byte-exact round trips) or its text. Raises `TraceError` naming the
        instruction and the problem."""
        if isinstance(obj, (str, bytes, bytearray)):
            from msdb.schedule import tvm_json

            try:
                obj = tvm_json.loads(bytes(obj) if isinstance(obj, bytearray) else obj)
            except ValueError as exc:
                raise TraceError(f"a trace must be JSON text or its parsed value; the text is not valid JSON ({exc})") from None
        if not isinstance(obj, (list, tuple)) or len(obj) != 2 or not all(isinstance(x, (list, tuple)) for x in obj):
            raise TraceError(f"a trace must be a JSON array [instructions, decisions], got {_short(obj)}")
        insts_json, decisions_json = obj
        names: dict[str, RV] = {}
        insts: list[Instruction] = []
        for index, item in enumerate(insts_json):
            insts.append(_inst_from_json(item, index, names))
        decisions: dict[Instruction, Any] = {}
        for position, item in enumerate(decisions_json):
            if not (isinstance(item, (list, tuple)) and len(item) == 2 and _is_int(item[0])):
                raise TraceError(f"trace decision {position}: expected [instruction_index, decision], got {_short(item)}")
            index, decision = item
            if not 0 <= index < len(insts):
                raise TraceError(f"trace decision {position}: instruction index {index} is out of range "
                                 f"(the trace has {len(insts)} instructions)", index)
            inst = insts[index]
            kind = kind_for(inst)
            if kind.known and not kind.is_sampling:
                raise TraceError(f"{_where(index, inst.kind)}: has a decision {_short(decision)} but is not a sampling instruction",
                                 index)
            if inst in decisions:
                raise TraceError(f"{_where(index, inst.kind)}: has two decisions", index)
            decision = _decision_from_json(decision)
            if kind.check_decision is not None:
                problem = kind.check_decision(inst, decision)
                if problem:
                    raise TraceError(f"{_where(index, inst.kind)}: bad decision: {problem}", index)
            decisions[inst] = decision
        return cls(insts, decisions)

    # ---------------------------------------------------------------- Python
    def python_lines(self, remove_postproc: bool = False, legacy: bool | str = False) -> list[str]:
        """One line of Python per instruction, as TVM's `Trace.as_python()` returns them.

        `legacy`: False prints TVM 0.24+ (`sch.get_sblock`, Split with
        `disable_predication`); "pre0.24" prints TVM 0.17-0.23 (`sch.get_block`); True (or
        "pre0.17") prints older TVM (`sch.get_block`, no `disable_predication`)."""
        style = print_style(legacy)
        names: dict[RV, str] = {}
        lines = []
        for index, inst in enumerate(self._valid_prefix(remove_postproc)):
            kind = kind_for(inst)
            try:
                args = kind.print_args(inst, self._decisions.get(inst), names, style)
            except LookupError as exc:
                raise TraceError(f"{_where(index, inst.kind)}: input {exc.args[0]!r} is not defined by an earlier instruction",
                                 index) from None
            except (IndexError, TypeError) as exc:
                raise TraceError(f"{_where(index, inst.kind)}: cannot print instruction with inputs {list(inst.inputs)!r} "
                                 f"and attrs {list(inst.attrs)!r}: {exc}", index) from None
            outputs = _name_outputs(inst.outputs, names, index, inst.kind)
            lines.append(_python_line(kind, style, args, outputs))
        return lines

    def as_python(self, remove_postproc: bool = False, legacy: bool | str = False) -> str:
        """The trace as Python, one statement per line (what `str(trace)` gives)."""
        return "\n".join(self.python_lines(remove_postproc, legacy))

    def as_apply_trace(self, remove_postproc: bool = False, legacy: bool | str = False) -> str:
        """The trace wrapped in `def apply_trace(sch)`, exactly as `str()` of a TVM trace
        prints it (TVM 0.24+ imports `s_tir`, older TVM `tir`)."""
        module = "s_tir" if print_style(legacy) is Generation.CURRENT else "tir"
        body = self.python_lines(remove_postproc, legacy) or ["pass"]
        header = f"# from tvm import {module}\ndef apply_trace(sch: {module}.Schedule) -> None:\n"
        return header + "\n".join("  " + line for line in body)

    # ---------------------------------------------------------------- transformations
    def with_decision(self, inst: Instruction, decision: Any, remove_postproc: bool) -> Trace:
        """A copy with `inst`'s decision replaced (TVM's `Trace.with_decision`); post-processing
        dropped when `remove_postproc`."""
        insts = self._valid_prefix(remove_postproc)
        index = next((i for i, x in enumerate(insts) if x is inst), None)
        if index is None:
            raise TraceError(f"with_decision: instruction {inst.kind} is not part of this trace"
                             + (" (before post-processing)" if remove_postproc else ""))
        kind = kind_for(inst)
        if kind.check_decision is not None:
            problem = kind.check_decision(inst, decision)
            if problem:
                raise TraceError(f"{_where(index, inst.kind)}: bad decision: {problem}", index)
        decisions = {x: self._decisions[x] for x in insts if x in self._decisions}
        decisions[inst] = decision
        return Trace(insts, decisions)

    def simplified(self, remove_postproc: bool) -> Trace:
        """TVM's dead-code elimination: walking backwards, drop every pure instruction (the
        get_* lookups and sampling) none of whose outputs is used later."""
        insts = self._valid_prefix(remove_postproc)
        used: set[RV] = set()
        kept: list[Instruction] = []
        for inst in reversed(insts):
            if kind_for(inst).pure and not any(out in used for out in inst.outputs if out is not None):
                continue
            kept.append(inst)
            _collect_rvs(inst.inputs, used)
        kept.reverse()
        decisions = {inst: self._decisions[inst] for inst in kept if inst in self._decisions}
        return Trace(kept, decisions)

    # ---------------------------------------------------------------- replay
    def apply_to_schedule(self, sch: Schedule, remove_postproc: bool = False,
                          decision_provider: DecisionProvider | None = None, *, start: int = 0,
                          branch_point: Callable[[int, Schedule], None] | None = None) -> None:
        """Replay the trace on `sch`: each instruction calls the schedule's public primitive
        with this trace's RVs rebound to the new ones. `decision_provider(inst, inputs, attrs,
        decision)` may return a different decision (TVM's hook). A primitive's ScheduleError
        is re-raised naming the instruction; kinds msdb cannot replay raise ScheduleError.

        `start` resumes a replay after the trace's first `start` instructions: `sch` must be a
        copy (`Schedule.copy`) of a schedule that replayed the same instructions with the same
        decisions, so it already binds their output RVs. `branch_point(index, sch)` is called
        before each sampling instruction, where a mutant of this trace can first differ from
        it, and once after the last instruction (`index` = the number replayed), where
        post-processing starts (docs/architecture.md, "Search")."""
        insts = self._valid_prefix(remove_postproc)
        if not 0 <= start <= len(insts):
            raise TraceError(f"cannot resume a replay at instruction {start} of {len(insts)}", start)
        rv_map: dict[RV, RV] = {rv: rv for inst in insts[:start] for rv in inst.outputs if rv is not None}
        for index in range(start, len(insts)):
            inst = insts[index]
            kind = kind_for(inst)
            if branch_point is not None and kind.is_sampling:
                branch_point(index, sch)
            try:
                inputs = [_translate(v, rv_map) for v in inst.inputs]
            except LookupError as exc:
                raise TraceError(f"{_where(index, inst.kind)}: input {exc.args[0]!r} is not defined by an earlier instruction",
                                 index) from None
            decision = self._decisions.get(inst)
            if decision_provider is not None:
                decision = decision_provider(inst, inputs, inst.attrs, decision)
            try:
                outputs = kind.apply(sch, inputs, inst.attrs, decision)
            except ScheduleError as exc:
                raise ScheduleError(f"replaying {_where(index, inst.kind)}: {exc}") from exc
            if len(outputs) != len(inst.outputs):
                raise ScheduleError(f"replaying {_where(index, inst.kind)}: the schedule produced {len(outputs)} output(s), "
                                    f"the trace expects {len(inst.outputs)}; is this the trace's workload?")
            for old, new in zip(inst.outputs, outputs):
                if old is not None:
                    rv_map[old] = new
        if branch_point is not None:
            branch_point(len(insts), sch)
        logger.debug("replayed %d of %d instructions", len(insts), len(self._insts))


# -------------------------------------------------------------------- helpers


class _DecidedStructure(NamedTuple):
    """What `Trace.decided_json` needs of a sequence of instructions: the sequence itself (its
    objects keep their identities alive), the instructions `simplified` keeps, their JSON text
    (or why they have none) and the sampling instructions among them."""

    insts: tuple[Instruction, ...]
    kept: tuple[Instruction, ...]
    insts_json: str | TraceError
    sampling: tuple[Instruction, ...]


#: By the identities of the instructions (an entry is checked against its sequence before use).
_DECIDED_STRUCTURES: KeyCache[_DecidedStructure] = KeyCache(1024)


def _decided_structure(insts: tuple[Instruction, ...]) -> _DecidedStructure:
    def make() -> _DecidedStructure:
        kept = Trace(insts).simplified(remove_postproc=False)
        text: str | TraceError
        try:
            text = json.dumps(kept.as_json()[0], separators=(",", ":"))
        except TraceError as exc:  # raised only for a fully decided trace, as `as_json` would
            text = exc
        return _DecidedStructure(insts, kept.insts, text,
                                 tuple(inst for inst in kept.insts if kind_for(inst).is_sampling))

    structure = _DECIDED_STRUCTURES.get(tuple(map(id, insts)), make)
    if structure.insts is not insts and any(a is not b for a, b in zip(structure.insts, insts)):
        return make()  # another sequence whose objects reuse the identities: not remembered
    return structure


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _plain(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _collect_rvs(value: Any, used: set[RV]) -> None:
    if isinstance(value, RV):
        used.add(value)
    elif isinstance(value, IndexMapInput):
        used.update(value.rvs.values())
    elif isinstance(value, (list, tuple)):
        for item in value:
            _collect_rvs(item, used)
    elif isinstance(value, dict):
        for item in value.values():
            _collect_rvs(item, used)


def _translate(value: Any, rv_map: dict[RV, RV]) -> Any:
    if isinstance(value, RV):
        try:
            return rv_map[value]
        except KeyError:
            raise LookupError(value) from None
    if isinstance(value, IndexMapInput):
        try:
            return value.with_rvs(rv_map.__getitem__)
        except KeyError as exc:
            raise LookupError(exc.args[0]) from None
    if isinstance(value, (list, tuple)):
        return [_translate(v, rv_map) for v in value]
    return value


def _input_to_json(value: Any, names: dict[RV, str], bools_as_ints: bool, in_dict: bool = False) -> Any:
    """An input as TVM writes it: RVs by name, None as "None", string literals quoted (but
    strings inside a dict as they are: TVM does not translate map contents), and with
    `bools_as_ints` (an annotation value) bools as 0/1."""
    text = token_text(value, names, in_dict)
    if text is not None:
        return text
    if isinstance(value, bool) and bools_as_ints and not in_dict:
        return int(value)  # TVM stores boolean annotations as integers
    if isinstance(value, (list, tuple)):
        return [_input_to_json(v, names, bools_as_ints, in_dict) for v in value]
    if isinstance(value, dict):
        return {k: _input_to_json(v, names, bools_as_ints, True) for k, v in value.items()}
    return value


def _name_outputs(outputs: Sequence[Any], names: dict[RV, str], index: int, kind: str) -> list[str]:
    result = []
    for out in outputs:
        if out is None:
            result.append("_")
            continue
        if not isinstance(out, RV):
            raise TraceError(f"{_where(index, kind)}: output {_short(out)} is not a random variable", index)
        if out in names:
            raise TraceError(f"{_where(index, kind)}: output {names[out]} was already defined by an earlier instruction", index)
        name = f"{out.prefix}{len(names)}"
        names[out] = name
        result.append(name)
    return result


def _python_line(kind: InstructionKind, generation: Generation, args: list[tuple[str | None, str]],
                 outputs: list[str]) -> str:
    call = f"sch.{kind.spelled(generation).method}(" + ", ".join(v if k is None else f"{k}={v}" for k, v in args) + ")"
    if not outputs:
        return call
    if kind.list_outputs or (not kind.known and len(outputs) != 1):
        if len(outputs) == 1:
            return f"{outputs[0]}, = {call}"
        return ", ".join(outputs) + " = " + call
    return f"{outputs[0]} = {call}"


def _input_from_json(value: Any, names: dict[str, RV], index: int, kind: str, in_dict: bool = False) -> Any:
    if isinstance(value, str):
        if in_dict:
            return value
        if value == "None":
            return None
        if len(value) >= 2 and value[0] == '"' and value[-1] == '"':
            return value[1:-1]
        if value.startswith("{"):
            return _raw_input(value, names)
        try:
            return names[value]
        except KeyError:
            raise TraceError(f"{_where(index, kind)}: input {value!r} is not defined by an earlier instruction", index) from None
    if isinstance(value, list):
        return [_input_from_json(v, names, index, kind, in_dict) for v in value]
    if isinstance(value, dict):
        return {k: _input_from_json(v, names, index, kind, True) for k, v in value.items()}
    if value is None or isinstance(value, (bool, int, float)):
        return value
    raise TraceError(f"{_where(index, kind)}: unsupported input {_short(value)}", index)


def _raw_input(text: str, names: dict[str, RV]) -> RawInput:
    """A serialized IndexMap, its free variables bound to the RVs they name (TVM's trace
    reader substitutes them the same way); any other raw input verbatim."""
    from msdb.schedule.index_map import IndexMap

    try:
        free = IndexMap.from_json(text).free_vars()
    except ScheduleError:
        return RawInput(text)
    return IndexMapInput(text, {v.name: names[v.name] for v in free if v.name in names})


def _inst_from_json(item: Any, index: int, names: dict[str, RV]) -> Instruction:
    if not (isinstance(item, (list, tuple)) and len(item) == 4):
        raise TraceError(f"{_where(index, None)}: expected [kind, inputs, attrs, outputs], got {_short(item)}", index)
    kind, inputs_json, attrs_json, outputs_json = item
    if not isinstance(kind, str) or not kind:
        raise TraceError(f"{_where(index, None)}: the instruction kind must be a non-empty string, got {_short(kind)}", index)
    for label, part in (("inputs", inputs_json), ("attrs", attrs_json), ("outputs", outputs_json)):
        if not isinstance(part, (list, tuple)):
            raise TraceError(f"{_where(index, kind)}: {label} must be an array, got {_short(part)}", index)
    inputs = tuple(_input_from_json(v, names, index, kind) for v in inputs_json)
    attrs = tuple(attrs_json)  # plain values; SampleCategorical's nested lists stay lists
    outputs: list[RV | None] = []
    for name in outputs_json:
        if name == "_":
            outputs.append(None)
            continue
        if not isinstance(name, str) or name[:1] not in RV_TYPES_BY_PREFIX:
            raise TraceError(f"{_where(index, kind)}: output name {_short(name)} must start with b (block), l (loop) "
                             f"or v (variable)", index)
        if name in names:
            raise TraceError(f"{_where(index, kind)}: output {name} is already defined by an earlier instruction", index)
        rv = RV_TYPES_BY_PREFIX[name[0]]()
        names[name] = rv
        outputs.append(rv)
    inst = Instruction(kind, inputs, attrs, tuple(outputs))
    problem = check_layout(inst)
    if problem:
        raise TraceError(f"{_where(index, kind)}: {problem}", index)
    return inst


def _decision_from_json(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def replay_problem(mod: Any, trace_json: str) -> str | None:
    """Why the trace `trace_json` (TVM's JSON text) does not replay on the module `mod`, or None
    when it does (post-processing instructions included, as TVM replays a record when it loads
    a log). The one replay check of an import's `--verify` and of `msdb verify`: a bug in a
    replay is reported as the record's problem (its type named), never raised past the check."""
    from msdb.schedule.schedule import Schedule

    try:
        Trace.from_json(trace_json).apply_to_schedule(Schedule(mod), remove_postproc=False)
    except MsdbError as exc:
        return str(exc)
    except Exception as exc:  # noqa: BLE001 - a replay bug must not stop the check
        return f"{type(exc).__name__}: {exc}"
    return None
