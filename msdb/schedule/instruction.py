"""One step of a trace (`Instruction`) and what msdb knows about its kind (`InstructionKind`).

An instruction follows its TVM `InstructionKind`'s layout exactly (docs/tvm-formats.md), so a
recorded instruction serializes to the JSON TVM writes: e.g. Split has inputs `[loop,
*factors]` (each factor an ExprRV, an int or None), attrs `[preserve_unit_iters,
disable_predication]`, outputs the new loops.

An `InstructionKind` holds every rule of a kind as data: its spellings across TVM generations
(kind name and Python method), its parameters in the order of the primitive's Python call
(each an input, an attribute or the decision, with its layout type, how it prints and how it
is passed back on replay, and for attributes the generation that added it), its outputs,
purity, post-processing role and decision check. The generic operations below (layout check,
printing, JSON forms, normalizing between generations, replay) read those rules; nothing
elsewhere branches on a kind's name. The registry of kinds is `msdb.schedule.instructions`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, Callable, Sequence

from msdb.errors import ScheduleError
from msdb.schedule.rv import RV, BlockRV, ExprRV, LoopRV

if TYPE_CHECKING:
    from msdb.schedule.schedule import Schedule

__all__ = [
    "Instruction",
    "RawInput",
    "IndexMapInput",
    "Generation",
    "Form",
    "Param",
    "input_param",
    "attr_param",
    "decision_param",
    "Spelling",
    "InstructionKind",
    "format_value",
    "token_text",
    "RV_TYPES_BY_PREFIX",
]

RV_TYPES_BY_PREFIX: dict[str, type[RV]] = {"b": BlockRV, "l": LoopRV, "v": ExprRV}


@dataclass(frozen=True, eq=False)
class Instruction:
    """`kind` is TVM's instruction name ("Split", "GetSBlock", ...). `inputs` hold RVs, None,
    ints, floats, strings or (nested) lists of them; `attrs` hold plain values; `outputs`
    hold the RVs the instruction defines. Identity equality: a trace's decisions are keyed by
    the instruction object."""

    kind: str
    inputs: tuple[Any, ...]
    attrs: tuple[Any, ...]
    outputs: tuple[Any, ...]


class RawInput(str):
    """An input TVM writes as an unquoted JSON string that is neither an RV name nor "None":
    a serialized IndexMap (`{"root": ...}`), as TransformLayout records it. Kept verbatim."""

    __slots__ = ()


class IndexMapInput(RawInput):
    """A serialized IndexMap input (TVM 0.27's object graph, as TransformLayout records it)
    whose free variables name sampled variables of the trace: `rvs` maps each such name, as
    the text spells it, to the RV. Written back with the names the RVs have then."""

    rvs: dict[str, RV]

    def __new__(cls, text: str, rvs: dict[str, RV]) -> IndexMapInput:
        obj = super().__new__(cls, text)
        obj.rvs = dict(rvs)
        return obj

    def with_rvs(self, rv_map: Callable[[RV], RV]) -> IndexMapInput:
        """The same map with each RV replaced by `rv_map(rv)` (KeyError when it has none)."""
        return IndexMapInput(str(self), {name: rv_map(rv) for name, rv in self.rvs.items()})

    def text(self, names: dict[RV, str]) -> str:
        """The serialized map with each RV's variable named as `names` says (LookupError for
        an RV without a name)."""
        from msdb.schedule.index_map import rename_free_vars

        renames = {}
        for name, rv in self.rvs.items():
            if rv not in names:
                raise LookupError(rv)
            if names[rv] != name:
                renames[name] = names[rv]
        return rename_free_vars(str(self), renames)


class Generation(enum.IntEnum):
    """The TVM generations whose traces are spelled differently, oldest first."""

    BEFORE_0_17 = 0  #: `GetBlock`; Split without `disable_predication`
    BEFORE_0_24 = 1  #: `GetBlock`; Split with `disable_predication`
    CURRENT = 2  #: TVM 0.24 to 0.27: `GetSBlock`


class Form(enum.Enum):
    """How a parameter prints in TVM's Python and how replay passes it to the primitive."""

    VALUE = "value"  #: printed as TVM prints a value; passed as is
    STR = "str"  #: printed in double quotes; passed as is
    BOOL = "bool"  #: printed True/False; passed as a bool
    LIST = "list"  #: printed and passed as a list
    ANNOTATION = "annotation"  #: an annotation value: a bool prints (and goes to JSON) as 0/1
    INDEX_MAP = "index_map"  #: a serialized IndexMap: printed as TVM prints it, `lambda i, j: (...)`


def _format_float(value: float) -> str:
    # TVM prints floats through a C++ stream with precision 17, i.e. C's "%.17g".
    return "%.17g" % value


def token_text(value: Any, names: dict[RV, str], in_dict: bool = False) -> str | None:
    """How TVM writes a token the same way in its Python print and in its trace JSON: an RV
    by name (LookupError when it has none), None as "None", a raw input verbatim, a string in
    double quotes without escaping (as it is inside a dict: TVM does not translate map
    contents). None for any other value."""
    if isinstance(value, RV):
        try:
            return names[value]
        except KeyError:
            raise LookupError(value) from None
    if value is None:
        return "None"
    if isinstance(value, IndexMapInput):
        return value.text(names)
    if isinstance(value, RawInput):
        return str(value)
    if isinstance(value, str):
        return value if in_dict else '"' + value + '"'
    return None


def format_value(value: Any, names: dict[RV, str], in_dict: bool = False) -> str:
    """A value the way TVM's Python printer writes it: tokens as `token_text` says, floats
    with 17 significant digits, lists in brackets."""
    text = token_text(value, names, in_dict)
    if text is not None:
        return text
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, float):
        return _format_float(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(format_value(v, names, in_dict) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f'"{k}": {format_value(v, names, True)}' for k, v in value.items()) + "}"
    return str(value)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


#: Layout types: the check and the words an error uses.
_TYPES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "block": (lambda v: isinstance(v, BlockRV), "a block"),
    "loop": (lambda v: isinstance(v, LoopRV), "a loop"),
    "block_or_loop": (lambda v: isinstance(v, (BlockRV, LoopRV)), "a block or a loop"),
    "value": (lambda v: not isinstance(v, (BlockRV, LoopRV)), "a value"),
    "blocks": (lambda v: isinstance(v, (list, tuple)) and all(isinstance(b, BlockRV) for b in v), "a list of blocks"),
    "factor": (lambda v: v is None or isinstance(v, ExprRV) or _is_int(v),
               "a factor (sampled variable, integer or None)"),
    "str": (lambda v: isinstance(v, str), "a string"),
    "bool": (lambda v: isinstance(v, int), "a boolean (0/1)"),
    "int": (_is_int, "an integer"),
    "list": (lambda v: isinstance(v, (list, tuple)), "a list"),
    "numbers": (lambda v: isinstance(v, (list, tuple))
                and all(isinstance(p, (int, float)) and not isinstance(p, bool) for p in v), "a list of numbers"),
    "any": (lambda v: True, "anything"),
}


def _describe(value: Any) -> str:
    if isinstance(value, RV):
        return {BlockRV: "a block", LoopRV: "a loop", ExprRV: "a sampled variable"}.get(type(value), "an RV")
    return repr(value)


_INPUT, _ATTR, _DECISION = "input", "attr", "decision"


@dataclass(frozen=True)
class Param:
    """One parameter of a kind's primitive, in the order of its Python call.

    `source` says where its value lives: an "input" (inputs hold RVs), an "attr" (plain
    values) or the "decision". `keyword` is the primitive's keyword (None: positional).
    `type` is the layout type (a key of `_TYPES`); `rest` takes every remaining input or
    attribute, passed as one list or, with `splat`, as separate positional arguments. An
    attribute added by a later TVM generation has `since` and the `default` that older traces
    mean. `omit_empty` leaves an empty value out of the printed call (and replays None)."""

    keyword: str | None
    source: str
    type: str = "any"
    form: Form = Form.VALUE
    rest: bool = False
    splat: bool = False
    since: Generation = Generation.BEFORE_0_17
    default: Any = None
    omit_empty: bool = False

    def check(self, value: Any) -> str | None:
        """The expected kind of value when `value` does not fit the layout type."""
        ok, want = _TYPES[self.type]
        return None if ok(value) else want

    def print_value(self, value: Any, names: dict[RV, str]) -> str:
        if self.form is Form.STR:
            return '"' + str(value) + '"'
        if self.form is Form.BOOL:
            return "True" if value else "False"
        if self.form is Form.LIST:
            return format_value(list(value), names)
        if self.form is Form.ANNOTATION and isinstance(value, bool):
            return str(int(value))  # TVM stores a boolean annotation as an integer
        if self.form is Form.INDEX_MAP and isinstance(value, str):
            return _index_map_lambda(value, names)
        return format_value(value, names)


def _index_map_lambda(value: str, names: dict[RV, str]) -> str:
    """A serialized IndexMap as TVM's Python print writes it, its sampled variables under their
    current names; the text itself when it is no IndexMap msdb reads."""
    from msdb.schedule.index_map import IndexMap

    text = value.text(names) if isinstance(value, IndexMapInput) else str(value)
    try:
        return IndexMap.from_json(text).as_lambda()
    except ScheduleError:
        return format_value(value, names)


def input_param(keyword: str | None, type: str = "any", form: Form = Form.VALUE, **kw: Any) -> Param:
    """A parameter that lives in the instruction's inputs."""
    return Param(keyword, _INPUT, type, form, **kw)


def attr_param(keyword: str | None, type: str = "any", form: Form = Form.VALUE, **kw: Any) -> Param:
    """A parameter that lives in the instruction's attributes."""
    return Param(keyword, _ATTR, type, form, **kw)


def decision_param(form: Form = Form.VALUE) -> Param:
    """The decision of a sampling instruction, passed as `decision=`."""
    return Param("decision", _DECISION, form=form)


@dataclass(frozen=True)
class Spelling:
    """How TVM spells a kind from generation `since` on: its name and its Python method."""

    since: Generation
    name: str
    method: str


InstCheck = Callable[[Instruction], "str | None"]
DecisionCheck = Callable[[Instruction, Any], "str | None"]


@dataclass(frozen=True)
class InstructionKind:
    """Every rule of one instruction kind, as data (see the module docstring).

    `outputs`: "" (none), "b", "l", "v" (exactly one), "b*", "l*", "v*" (any number) or "*"
    (unknown kinds). `check_outputs` / `check_attrs`: rules across parameters (how many loops
    a Split defines, candidates against probabilities), run after the per-parameter checks.
    `check_decision` marks a sampling kind. `known` is False for kinds msdb has no rules for:
    parsed, printed positionally and written back unchanged, never replayed."""

    spellings: tuple[Spelling, ...]
    params: tuple[Param, ...]
    outputs: str
    pure: bool = False
    postproc: bool = False
    replayable: bool = True
    known: bool = True
    check_decision: DecisionCheck | None = None
    check_outputs: InstCheck | None = None
    check_attrs: InstCheck | None = None
    #: Older TVM generations recorded the kind in layouts msdb does not know: an instruction
    #: that does not fit this layout is kept as an unknown kind (`instructions.kind_for`).
    opaque_other_layouts: bool = False

    # ---- names ----
    @property
    def name(self) -> str:
        """TVM 0.27's name of the kind."""
        return self.spellings[-1].name

    @property
    def method(self) -> str:
        """The Schedule method that replays it (TVM 0.27's spelling)."""
        return self.spellings[-1].method

    @cached_property
    def names(self) -> tuple[str, ...]:
        """Every name the kind had, oldest first."""
        return tuple(dict.fromkeys(s.name for s in self.spellings))

    def spelled(self, generation: Generation) -> Spelling:
        """How TVM of `generation` spells the kind."""
        chosen = self.spellings[0]
        for spelling in self.spellings:
            if spelling.since <= generation:
                chosen = spelling
        return chosen

    @cached_property
    def is_sampling(self) -> bool:
        return self.check_decision is not None

    @cached_property
    def list_outputs(self) -> bool:
        return self.outputs.endswith("*")

    # ---- layout ----
    @cached_property
    def input_params(self) -> tuple[Param, ...]:
        return tuple(p for p in self.params if p.source == _INPUT)

    @cached_property
    def attr_params(self) -> tuple[Param, ...]:
        return tuple(p for p in self.params if p.source == _ATTR)

    @cached_property
    def n_attrs(self) -> tuple[int, ...]:
        """The attribute counts TVM's generations record."""
        return tuple(sorted({sum(1 for p in self.attr_params if p.since <= g) for g in Generation}))

    def input_param_at(self, index: int) -> Param | None:
        params = self.input_params
        if index < len(params):
            return params[index]
        return params[-1] if params and params[-1].rest else None

    def check(self, inst: Instruction) -> str | None:
        """Why `inst` does not fit the kind's layout, or None when it does (unknown kinds are
        not checked)."""
        if not self.known:
            return None
        if len(inst.attrs) not in self.n_attrs:
            expected = " or ".join(str(n) for n in self.n_attrs)
            return f"expects {expected} attribute(s), got {len(inst.attrs)}: {list(inst.attrs)!r}"
        problem = self._check_operands(self.input_params, inst.inputs, "input")
        if problem:
            return problem
        problem = self._check_output_types(inst)
        if problem:
            return problem
        if self.check_outputs is not None:
            problem = self.check_outputs(inst)
            if problem:
                return problem
        for j, (param, value) in enumerate(zip(self.attr_params, inst.attrs)):
            want = param.check(value)
            if want is not None:
                return f"attribute {j} ({param.keyword}) must be {want}, got {value!r}"
        return self.check_attrs(inst) if self.check_attrs is not None else None

    @staticmethod
    def _check_operands(params: tuple[Param, ...], values: tuple[Any, ...], what: str) -> str | None:
        variadic = bool(params) and params[-1].rest
        fixed = len(params) - 1 if variadic else len(params)
        if variadic and len(values) < fixed + 1:
            return f"expects at least {fixed + 1} {what}(s), got {len(values)}"
        if not variadic and len(values) != fixed:
            return f"expects {fixed} {what}(s), got {len(values)}"
        for i, value in enumerate(values):
            want = params[min(i, len(params) - 1)].check(value)
            if want is not None:
                return f"{what} {i} must be {want}, got {_describe(value)}"
        return None

    def _check_output_types(self, inst: Instruction) -> str | None:
        kind, outputs = self.outputs, inst.outputs
        if kind == "*":
            return None
        if kind == "":
            return f"defines no outputs, got {len(outputs)}" if outputs else None
        want = RV_TYPES_BY_PREFIX[kind[0]]
        if not kind.endswith("*") and len(outputs) != 1:
            return f"defines exactly one output, got {len(outputs)}"
        for i, rv in enumerate(outputs):
            if rv is not None and not isinstance(rv, want):
                return f"output {i} must be {_describe(want())}, got {_describe(rv)}"
        return None

    # ---- reading parameters ----
    @cached_property
    def _positions(self) -> tuple[tuple[Param, int], ...]:
        """Each parameter with its position among the inputs or the attributes."""
        out: list[tuple[Param, int]] = []
        count = {_INPUT: 0, _ATTR: 0, _DECISION: 0}
        for param in self.params:
            out.append((param, count[param.source]))
            count[param.source] += 1
        return tuple(out)

    def _values(self, inputs: Sequence[Any], attrs: Sequence[Any], decision: Any) -> list[tuple[Param, Any]]:
        """Each parameter with its value (a rest parameter: the list of what remains; an
        attribute an older trace lacks: its default)."""
        out: list[tuple[Param, Any]] = []
        for param, at in self._positions:
            if param.source == _DECISION:
                out.append((param, decision))
                continue
            items = inputs if param.source == _INPUT else attrs
            if param.rest:
                out.append((param, list(items[at:])))
            else:
                out.append((param, items[at] if at < len(items) else param.default))
        return out

    # ---- printing ----
    def print_args(self, inst: Instruction, decision: Any, names: dict[RV, str],
                   generation: Generation) -> list[tuple[str | None, str]]:
        """The arguments of the Python call TVM of `generation` prints for `inst`:
        (keyword or None, printed value)."""
        args: list[tuple[str | None, str]] = []
        for param, value in self._values(inst.inputs, inst.attrs, decision):
            if param.splat:
                args.extend((None, param.print_value(v, names)) for v in value)
                continue
            if param.source == _DECISION and value is None:
                continue  # TVM prints `decision=` only when the instruction has one
            if param.omit_empty and not value:
                continue
            if param.since > generation and not value:
                continue  # an attribute that generation lacks, at its default
            args.append((param.keyword, param.print_value(value, names)))
        return args

    # ---- JSON ----
    def attrs_to_json(self, attrs: Sequence[Any]) -> list[Any]:
        """Attributes as TVM writes them: a Python bool becomes 0/1 where TVM records an
        Integer (the "bool" layout type)."""
        out = [_plain_json(a) for a in attrs]
        for j, param in enumerate(self.attr_params[:len(out)]):
            if param.type == "bool" and isinstance(out[j], bool):
                out[j] = int(out[j])
        return out

    def input_bools_as_ints(self, index: int) -> bool:
        """Whether TVM writes a bool in input `index` as an integer (an annotation value)."""
        param = self.input_param_at(index)
        return param is not None and param.form is Form.ANNOTATION

    # ---- generations ----
    def missing_attrs(self, n_attrs: int) -> tuple[Param, ...]:
        """The attributes an instruction with `n_attrs` attributes lacks because an older TVM
        generation recorded it (empty when it has them all, or when no generation records
        that many)."""
        params = self.attr_params
        if not self.known or n_attrs >= len(params) or n_attrs not in self.n_attrs:
            return ()
        return params[n_attrs:]

    def normalized(self, inst: Instruction) -> Instruction:
        """`inst` as TVM 0.27 records it: the current name, and the attributes later
        generations added filled in with the value older traces mean; `inst` itself when it
        already is."""
        attrs = inst.attrs
        missing = self.missing_attrs(len(attrs))
        if missing:
            # Written like the attributes present: JSON 0/1 unless they are Python bools.
            as_bool = any(isinstance(a, bool) for a, p in zip(attrs, self.attr_params) if p.type == "bool")
            attrs = attrs + tuple(p.default if p.type != "bool" or as_bool else int(p.default) for p in missing)
        if inst.kind == self.name and attrs is inst.attrs:
            return inst
        return Instruction(self.name, inst.inputs, attrs, inst.outputs)

    def legacy(self, inst: Instruction, generation: Generation) -> Instruction:
        """`inst` (in TVM 0.27's form) as TVM of `generation` records it: its name then, and
        without the attributes added later when they hold their default."""
        name = self.spelled(generation).name
        attrs = inst.attrs
        newer = [j for j, p in enumerate(self.attr_params) if p.since > generation and j < len(attrs)]
        if newer and newer[-1] == len(attrs) - 1 and all(not attrs[j] for j in newer):
            attrs = attrs[:newer[0]]
        if name == inst.kind and attrs is inst.attrs:
            return inst
        return Instruction(name, inst.inputs, attrs, inst.outputs)

    # ---- replay ----
    @cached_property
    def _replay_plan(self) -> tuple[tuple[str, int, bool, bool, str | None, Callable[[Any], Any] | None, Any], ...]:
        """The parameters reduced to what replay needs, once per kind: (source, position,
        rest, splat, keyword, conversion, default)."""
        return tuple((p.source, at, p.rest, p.splat, p.keyword, _REPLAY_CONVERSIONS.get((p.form, p.omit_empty)),
                      p.default) for p, at in self._positions)

    def apply(self, sch: Schedule, inputs: Sequence[Any], attrs: Sequence[Any], decision: Any) -> list[Any]:
        """Run the instruction on `sch` through its public primitive, with the keywords TVM's
        Python API uses; the new outputs as a list."""
        if not self.replayable:
            raise ScheduleError(f"instruction {self.name} is not supported for replay")
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        for source, at, rest, splat, keyword, convert, default in self._replay_plan:
            if source == _DECISION:
                value = decision
            else:
                items = inputs if source == _INPUT else attrs
                value = items[at:] if rest else items[at] if at < len(items) else default
            if convert is not None and value is not None:
                value = convert(value)
            if splat:
                args.extend(value)
            elif keyword is None:
                args.append(value)
            else:
                kwargs[keyword] = value
        result = getattr(sch, self.method)(*args, **kwargs)
        if result is None:
            return []
        if isinstance(result, (list, tuple)):
            return list(result)
        return [result]


def _list_or_none(value: Any) -> list[Any] | None:
    return list(value) if value else None


#: How replay converts a parameter's value, by (form, omit_empty); absent: passed as is.
_REPLAY_CONVERSIONS: dict[tuple[Form, bool], Callable[[Any], Any]] = {
    (Form.BOOL, False): bool,
    (Form.LIST, False): list,
    (Form.LIST, True): _list_or_none,
}


def _plain_json(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [_plain_json(v) for v in value]
    return value
