"""What msdb knows about each TVM instruction kind: its layout, how TVM prints it as Python, how
its attributes go to JSON, which older spelling it had, and how to replay it on a `Schedule`.

One `KindSpec` per kind, looked up with `spec_for(kind)`. The trace module does the generic
work (naming random variables, JSON, dead-code elimination) and asks the spec for everything
kind-specific, so supporting a new kind means adding one entry here.

Generations of TVM spell some instructions differently (reference/tvm-metaschedule.md section
1): `GetBlock` before 0.24 (`GetSBlock` since), `Split` with one attribute before 0.17 (two
since: `disable_predication` was added). Both spellings are accepted everywhere;
`normalize_instruction` rewrites an old one into the 0.27 form.

Kinds msdb cannot replay (Blockize, Tensorize and any kind it does not know) are still parsed,
printed and written back unchanged; replaying them raises `ScheduleError`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Sequence

from msdb.errors import ScheduleError
from msdb.schedule.instruction import Instruction
from msdb.schedule.rv import RV, BlockRV, ExprRV, LoopRV

if TYPE_CHECKING:
    from msdb.schedule.schedule import Schedule

__all__ = [
    "RawInput",
    "KindSpec",
    "spec_for",
    "known_kinds",
    "normalize_instruction",
    "PrintStyle",
    "print_style",
    "format_value",
    "RV_TYPES_BY_PREFIX",
]

RV_TYPES_BY_PREFIX: dict[str, type[RV]] = {"b": BlockRV, "l": LoopRV, "v": ExprRV}


class RawInput(str):
    """An input TVM writes as an unquoted JSON string that is neither an RV name nor "None":
    a serialized IndexMap (`{"root": ...}`), as TransformLayout records it. Kept verbatim."""

    __slots__ = ()


# ------------------------------------------------------------------ printing helpers

PrintStyle = str  # "0.27" | "pre0.24" | "pre0.17"


def print_style(legacy: bool | str) -> PrintStyle:
    """Map `as_python(legacy=...)` to a style: False -> TVM 0.24+ (`get_sblock`, Split with
    `disable_predication`); "pre0.24" -> TVM 0.17-0.23 (`get_block`, with
    `disable_predication`); True or "pre0.17" -> older TVM (`get_block`, no
    `disable_predication` unless it is set)."""
    if legacy is False or legacy in ("0.27", "current"):
        return "0.27"
    if legacy is True or legacy == "pre0.17":
        return "pre0.17"
    if legacy == "pre0.24":
        return "pre0.24"
    raise ValueError(f"legacy must be False, True, 'pre0.24' or 'pre0.17', got {legacy!r}")


def _format_float(value: float) -> str:
    # TVM prints floats through a C++ stream with precision 17, i.e. C's "%.17g".
    return "%.17g" % value


def format_value(value: Any, names: dict[RV, str], in_dict: bool = False) -> str:
    """An input value the way TVM's Python printer writes it: RVs by name, strings in double
    quotes without escaping, floats with 17 significant digits, lists in brackets. Inside a
    dict TVM leaves string values unquoted (it does not translate map contents)."""
    if isinstance(value, RV):
        try:
            return names[value]
        except KeyError:
            raise LookupError(value) from None
    if value is None:
        return "None"
    if isinstance(value, RawInput):
        return str(value)
    if isinstance(value, str):
        return value if in_dict else '"' + value + '"'
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


def _attr_str(value: Any) -> str:
    return '"' + str(value) + '"'


def _attr_bool(value: Any) -> str:
    return "True" if value else "False"


def _attr_value(value: Any) -> str:
    """An attribute printed as a Python literal (strings quoted)."""
    if isinstance(value, str):
        return _attr_str(value)
    return format_value(value, {})


# ------------------------------------------------------------------ the spec

Args = list[tuple[str | None, str]]  # (keyword or None for positional, printed value)
Printer = Callable[["PrintContext"], Args]
Applier = Callable[["Schedule", list[Any], tuple[Any, ...], Any], Any]
DecisionCheck = Callable[[Instruction, Any], "str | None"]


@dataclass
class PrintContext:
    """What a kind's printer sees: the instruction's inputs and attrs, the decision, RV names
    and the style to print in."""

    inst: Instruction
    decision: Any
    names: dict[RV, str]
    style: PrintStyle

    def value(self, v: Any) -> str:
        return format_value(v, self.names)

    def input(self, i: int) -> str:
        return self.value(self.inst.inputs[i])

    @property
    def attrs(self) -> tuple[Any, ...]:
        return self.inst.attrs

    def with_decision(self, args: Args) -> Args:
        # TVM prints `decision=` only when the instruction has one.
        if self.decision is not None:
            args.append(("decision", format_value(self.decision, self.names)))
        return args


@dataclass(frozen=True)
class KindSpec:
    """Everything kind-specific about one instruction kind.

    `inputs`: one code per input -- "b" BlockRV, "l" LoopRV, "x" block or loop, "a" any value
    (an annotation value), "B" a list of BlockRVs, "l*" one or more LoopRVs to the end,
    "f*" one or more split factors (ExprRV, int or None) to the end, "*" anything (unknown
    kinds). `outputs`: "", "b", "l", "v" (exactly one) or "b*", "l*", "v*" (any number), "*"
    (unknown kinds). `n_attrs`: the accepted attribute counts. `int_bool_attrs`: positions of
    boolean attributes that TVM writes as 0/1 in JSON (others it writes as true/false).
    """

    name: str
    method: str
    inputs: tuple[str, ...]
    n_attrs: tuple[int, ...]
    outputs: str
    printer: Printer
    apply: Applier | None = None
    pure: bool = False
    postproc: bool = False
    check_decision: DecisionCheck | None = None
    int_bool_attrs: tuple[int, ...] = ()
    list_outputs: bool = False
    known: bool = True
    legacy_names: tuple[str, ...] = field(default=())

    @property
    def is_sampling(self) -> bool:
        return self.check_decision is not None

    def method_for(self, style: PrintStyle) -> str:
        if self.name == "GetSBlock" and style != "0.27":
            return "get_block"
        return self.method

    def attrs_to_json(self, attrs: Sequence[Any]) -> list[Any]:
        """Attributes as TVM writes them: Python bools become 0/1 where TVM records an Integer."""
        out = [_plain_json(a) for a in attrs]
        for i in self.int_bool_attrs:
            if i < len(out) and isinstance(out[i], bool):
                out[i] = int(out[i])
        return out


def _plain_json(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_plain_json(v) for v in value]
    if isinstance(value, list):
        return [_plain_json(v) for v in value]
    return value


# ------------------------------------------------------------------ decisions


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_tile_decision(inst: Instruction, decision: Any) -> str | None:
    if not isinstance(decision, (list, tuple)) or not all(_is_int(d) for d in decision):
        return f"SamplePerfectTile decision must be a list of integers, got {decision!r}"
    if len(decision) != len(inst.outputs):
        return f"SamplePerfectTile decision {list(decision)} has {len(decision)} factors, the instruction samples {len(inst.outputs)}"
    if any(d < 1 for d in decision if d != -1):
        return f"SamplePerfectTile decision {list(decision)} has a factor below 1"
    return None


def _check_categorical_decision(inst: Instruction, decision: Any) -> str | None:
    if not _is_int(decision):
        return f"SampleCategorical decision must be an integer index into the candidates, got {decision!r}"
    candidates = inst.attrs[0] if inst.attrs else ()
    if not 0 <= decision < len(candidates):
        return f"SampleCategorical decision {decision} is out of range for {len(candidates)} candidates"
    return None


def _check_location_decision(inst: Instruction, decision: Any) -> str | None:
    if not _is_int(decision) or decision < -2:
        return f"SampleComputeLocation decision must be an integer >= -2 (-2 inline, -1 root, i the i-th loop), got {decision!r}"
    return None


# ------------------------------------------------------------------ printers


def _p_get_sblock(c: PrintContext) -> Args:
    return [("name", _attr_str(c.attrs[0])), ("func_name", _attr_str(c.attrs[1]))]


def _p_block(c: PrintContext) -> Args:
    return [("block", c.input(0))]


def _p_loop(c: PrintContext) -> Args:
    return [("loop", c.input(0))]


def _p_get_child_blocks(c: PrintContext) -> Args:
    return [(None, c.input(0))]


def _p_split(c: PrintContext) -> Args:
    args: Args = [("loop", c.input(0)), ("factors", c.value(list(c.inst.inputs[1:]))),
                  ("preserve_unit_iters", _attr_bool(c.attrs[0]))]
    disable = bool(c.attrs[1]) if len(c.attrs) > 1 else False
    if c.style != "pre0.17" or disable:
        args.append(("disable_predication", _attr_bool(disable)))
    return args


def _p_fuse(c: PrintContext) -> Args:
    return [(None, c.value(v)) for v in c.inst.inputs] + [("preserve_unit_iters", _attr_bool(c.attrs[0]))]


def _p_reorder(c: PrintContext) -> Args:
    return [(None, c.value(v)) for v in c.inst.inputs]


def _p_bind(c: PrintContext) -> Args:
    return [("loop", c.input(0)), ("thread_axis", _attr_str(c.attrs[0]))]


def _annotation_value(value: Any) -> Any:
    # TVM stores a boolean annotation as an integer, and prints and writes it as 0/1.
    return int(value) if isinstance(value, bool) else value


def _p_annotate(c: PrintContext) -> Args:
    return [("block_or_loop", c.input(0)), ("ann_key", _attr_str(c.attrs[0])),
            ("ann_val", c.value(_annotation_value(c.inst.inputs[1])))]


def _p_unannotate(c: PrintContext) -> Args:
    return [("block_or_loop", c.input(0)), ("ann_key", _attr_str(c.attrs[0]))]


def _p_cache(index_name: str) -> Printer:
    def printer(c: PrintContext) -> Args:
        args: Args = [("block", c.input(0)), (index_name, _attr_value(c.attrs[0])), ("storage_scope", _attr_str(c.attrs[1]))]
        consumers = c.inst.inputs[1] if len(c.inst.inputs) > 1 else None
        if consumers:
            args.append(("consumer_blocks", c.value(list(consumers))))
        return args

    return printer


def _p_compute_at(c: PrintContext) -> Args:
    return [("block", c.input(0)), ("loop", c.input(1)), ("preserve_unit_loops", _attr_bool(c.attrs[0])),
            ("index", _attr_value(c.attrs[1]))]


def _p_decompose_reduction(c: PrintContext) -> Args:
    return [("block", c.input(0)), ("loop", c.input(1))]


def _p_rfactor(c: PrintContext) -> Args:
    return [("loop", c.input(0)), ("factor_axis", _attr_value(c.attrs[0]))]


def _p_storage_align(c: PrintContext) -> Args:
    keys = ("buffer_index", "axis", "factor", "offset")
    return [("block", c.input(0))] + [(k, _attr_value(v)) for k, v in zip(keys, c.attrs)]


def _p_sample_perfect_tile(c: PrintContext) -> Args:
    return c.with_decision([("loop", c.input(0)), ("n", _attr_value(c.attrs[0])),
                            ("max_innermost_factor", _attr_value(c.attrs[1]))])


def _p_sample_categorical(c: PrintContext) -> Args:
    return c.with_decision([("candidates", c.value(list(c.attrs[0]))), ("probs", c.value(list(c.attrs[1])))])


def _p_sample_compute_location(c: PrintContext) -> Args:
    return c.with_decision([("block", c.input(0))])


def _p_nothing(c: PrintContext) -> Args:
    return []


def _p_blockize(c: PrintContext) -> Args:
    return [("target", c.input(0)), ("preserve_unit_iters", _attr_bool(c.attrs[0]))]


def _p_tensorize(c: PrintContext) -> Args:
    return [("block_or_loop", c.input(0)), ("tensor_intrin", _attr_str(c.attrs[0])),
            ("preserve_unit_iters", _attr_bool(c.attrs[1]))]


def _p_generic(c: PrintContext) -> Args:
    args: Args = [(None, c.value(v)) for v in c.inst.inputs]
    args += [(None, _attr_value(a)) for a in c.attrs]
    return c.with_decision(args)


# ------------------------------------------------------------------ replay


def _as_list(result: Any) -> list[Any]:
    if result is None:
        return []
    if isinstance(result, (list, tuple)):
        return list(result)
    return [result]


def _a_get_sblock(sch: Schedule, inputs: list[Any], attrs: tuple[Any, ...], decision: Any) -> Any:
    getter = getattr(sch, "get_sblock", None) or sch.get_block  # type: ignore[attr-defined]
    return getter(name=attrs[0], func_name=attrs[1])


def _a_split(sch: Schedule, inputs: list[Any], attrs: tuple[Any, ...], decision: Any) -> Any:
    disable = bool(attrs[1]) if len(attrs) > 1 else False
    return sch.split(loop=inputs[0], factors=list(inputs[1:]), preserve_unit_iters=bool(attrs[0]),  # type: ignore[attr-defined]
                     disable_predication=disable)


def _a_cache(method: str, index_name: str) -> Applier:
    def apply(sch: Schedule, inputs: list[Any], attrs: tuple[Any, ...], decision: Any) -> Any:
        consumers = list(inputs[1]) if len(inputs) > 1 and inputs[1] else None
        return getattr(sch, method)(**{"block": inputs[0], index_name: attrs[0], "storage_scope": attrs[1],
                                       "consumer_blocks": consumers})

    return apply


def _a_compute_at(method: str) -> Applier:
    def apply(sch: Schedule, inputs: list[Any], attrs: tuple[Any, ...], decision: Any) -> Any:
        return getattr(sch, method)(block=inputs[0], loop=inputs[1], preserve_unit_loops=bool(attrs[0]), index=attrs[1])

    return apply


def _a_one(method: str, keyword: str) -> Applier:
    def apply(sch: Schedule, inputs: list[Any], attrs: tuple[Any, ...], decision: Any) -> Any:
        return getattr(sch, method)(**{keyword: inputs[0]})

    return apply


_APPLY: dict[str, Applier] = {
    "GetSBlock": _a_get_sblock,
    "GetLoops": _a_one("get_loops", "block"),
    "GetChildBlocks": lambda sch, i, a, d: sch.get_child_blocks(i[0]),  # type: ignore[attr-defined]
    "GetProducers": _a_one("get_producers", "block"),
    "GetConsumers": _a_one("get_consumers", "block"),
    "Split": _a_split,
    "Fuse": lambda sch, i, a, d: sch.fuse(*i, preserve_unit_iters=bool(a[0])),  # type: ignore[attr-defined]
    "Reorder": lambda sch, i, a, d: sch.reorder(*i),  # type: ignore[attr-defined]
    "Parallel": _a_one("parallel", "loop"),
    "Vectorize": _a_one("vectorize", "loop"),
    "Unroll": _a_one("unroll", "loop"),
    "Bind": lambda sch, i, a, d: sch.bind(loop=i[0], thread_axis=a[0]),  # type: ignore[attr-defined]
    "Annotate": lambda sch, i, a, d: sch.annotate(block_or_loop=i[0], ann_key=a[0], ann_val=i[1]),  # type: ignore[attr-defined]
    "Unannotate": lambda sch, i, a, d: sch.unannotate(block_or_loop=i[0], ann_key=a[0]),  # type: ignore[attr-defined]
    "CacheRead": _a_cache("cache_read", "read_buffer_index"),
    "CacheWrite": _a_cache("cache_write", "write_buffer_index"),
    "ComputeAt": _a_compute_at("compute_at"),
    "ReverseComputeAt": _a_compute_at("reverse_compute_at"),
    "ComputeInline": _a_one("compute_inline", "block"),
    "ReverseComputeInline": _a_one("reverse_compute_inline", "block"),
    "DecomposeReduction": lambda sch, i, a, d: sch.decompose_reduction(block=i[0], loop=i[1]),  # type: ignore[attr-defined]
    "RFactor": lambda sch, i, a, d: sch.rfactor(loop=i[0], factor_axis=a[0]),  # type: ignore[attr-defined]
    "StorageAlign": lambda sch, i, a, d: sch.storage_align(block=i[0], buffer_index=a[0], axis=a[1], factor=a[2],  # type: ignore[attr-defined]
                                                           offset=a[3]),
    "SamplePerfectTile": lambda sch, i, a, d: sch.sample_perfect_tile(  # type: ignore[attr-defined]
        loop=i[0], n=a[0], max_innermost_factor=a[1], decision=None if d is None else list(d)),
    "SampleCategorical": lambda sch, i, a, d: sch.sample_categorical(  # type: ignore[attr-defined]
        candidates=list(a[0]), probs=list(a[1]), decision=d),
    "SampleComputeLocation": lambda sch, i, a, d: sch.sample_compute_location(block=i[0], decision=d),  # type: ignore[attr-defined]
    "EnterPostproc": lambda sch, i, a, d: sch.enter_postproc(),  # type: ignore[attr-defined]
}


def apply_instruction(spec: KindSpec, sch: Schedule, inputs: list[Any], attrs: tuple[Any, ...], decision: Any) -> list[Any]:
    """Run one instruction on `sch` through its public primitive; the new outputs as a list."""
    if spec.apply is None:
        raise ScheduleError(f"instruction {spec.name} is not supported for replay")
    return _as_list(spec.apply(sch, inputs, attrs, decision))


# ------------------------------------------------------------------ the registry


def _spec(name: str, method: str, inputs: str, n_attrs: int | tuple[int, ...], outputs: str, printer: Printer, **kw: Any) -> KindSpec:
    codes = tuple(inputs.split()) if inputs else ()
    attrs = (n_attrs,) if isinstance(n_attrs, int) else n_attrs
    apply = _APPLY.get(name)
    return KindSpec(name, method, codes, attrs, outputs, printer, apply=apply,
                    list_outputs=outputs.endswith("*"), **kw)


_PURE = {"pure": True}
_SPECS: dict[str, KindSpec] = {
    s.name: s
    for s in [
        _spec("GetSBlock", "get_sblock", "", 2, "b", _p_get_sblock, legacy_names=("GetBlock",), **_PURE),
        _spec("GetLoops", "get_loops", "b", 0, "l*", _p_block, **_PURE),
        _spec("GetChildBlocks", "get_child_blocks", "x", 0, "b*", _p_get_child_blocks, **_PURE),
        _spec("GetProducers", "get_producers", "b", 0, "b*", _p_block, **_PURE),
        _spec("GetConsumers", "get_consumers", "b", 0, "b*", _p_block, **_PURE),
        _spec("Split", "split", "l f*", (1, 2), "l*", _p_split, int_bool_attrs=(0, 1)),
        _spec("Fuse", "fuse", "l*", 1, "l", _p_fuse, int_bool_attrs=(0,)),
        _spec("Reorder", "reorder", "l*", 0, "", _p_reorder),
        _spec("Parallel", "parallel", "l", 0, "", _p_loop),
        _spec("Vectorize", "vectorize", "l", 0, "", _p_loop),
        _spec("Unroll", "unroll", "l", 0, "", _p_loop),
        _spec("Bind", "bind", "l", 1, "", _p_bind),
        _spec("Annotate", "annotate", "x a", 1, "", _p_annotate),
        _spec("Unannotate", "unannotate", "x", 1, "", _p_unannotate),
        _spec("CacheRead", "cache_read", "b B", 2, "b", _p_cache("read_buffer_index")),
        _spec("CacheWrite", "cache_write", "b B", 2, "b", _p_cache("write_buffer_index")),
        _spec("ComputeAt", "compute_at", "b l", 2, "", _p_compute_at, int_bool_attrs=(0,)),
        _spec("ReverseComputeAt", "reverse_compute_at", "b l", 2, "", _p_compute_at, int_bool_attrs=(0,)),
        _spec("ComputeInline", "compute_inline", "b", 0, "", _p_block),
        _spec("ReverseComputeInline", "reverse_compute_inline", "b", 0, "", _p_block),
        _spec("DecomposeReduction", "decompose_reduction", "b l", 0, "b", _p_decompose_reduction),
        _spec("RFactor", "rfactor", "l", 1, "b", _p_rfactor),
        _spec("StorageAlign", "storage_align", "b", 4, "", _p_storage_align),
        _spec("SamplePerfectTile", "sample_perfect_tile", "l", 2, "v*", _p_sample_perfect_tile,
              check_decision=_check_tile_decision, **_PURE),
        _spec("SampleCategorical", "sample_categorical", "", 2, "v", _p_sample_categorical,
              check_decision=_check_categorical_decision, **_PURE),
        _spec("SampleComputeLocation", "sample_compute_location", "b", 0, "l", _p_sample_compute_location,
              check_decision=_check_location_decision, **_PURE),
        _spec("EnterPostproc", "enter_postproc", "", 0, "", _p_nothing, postproc=True),
        # Seen in older CUDA logs: parsed, printed and written, never replayed.
        _spec("Blockize", "blockize", "*", 1, "b", _p_blockize),
        _spec("Tensorize", "tensorize", "x", 2, "", _p_tensorize),
    ]
}
_LEGACY: dict[str, KindSpec] = {old: s for s in _SPECS.values() for old in s.legacy_names}

# Kinds TVM marks pure that msdb does not otherwise know: simplification may drop them.
_OTHER_PURE_KINDS = {"GetOutputBlocks", "SamplePartitionedTile", "GetBlockLevelProducers"}


def _snake(kind: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", kind).lower()


def spec_for(kind: str) -> KindSpec:
    """The spec of `kind` (old spellings included); an unknown kind gets a generic spec that
    accepts any layout, prints positionally and cannot be replayed."""
    spec = _SPECS.get(kind) or _LEGACY.get(kind) or _GENERIC.get(kind)
    if spec is None:
        spec = KindSpec(kind, _snake(kind), ("*",), (), "*", _p_generic, pure=kind in _OTHER_PURE_KINDS, known=False)
        if len(_GENERIC) < 256:  # bounded: kinds come from user files
            _GENERIC[kind] = spec
    return spec


_GENERIC: dict[str, KindSpec] = {}


def known_kinds() -> list[str]:
    """Every kind with a dedicated spec, old spellings included."""
    return sorted(set(_SPECS) | set(_LEGACY))


def normalize_instruction(inst: Instruction) -> Instruction:
    """`inst` in TVM 0.27's form: `GetBlock` becomes `GetSBlock`, a one-attribute `Split` gets
    `disable_predication` = 0. Returns `inst` itself when it is already current."""
    if inst.kind in _LEGACY:
        return Instruction(_LEGACY[inst.kind].name, inst.inputs, inst.attrs, inst.outputs)
    if inst.kind == "Split" and len(inst.attrs) == 1:
        preserve = inst.attrs[0]
        disable: Any = False if isinstance(preserve, bool) else 0
        return Instruction("Split", inst.inputs, (preserve, disable), inst.outputs)
    return inst


def legacy_instruction(inst: Instruction, style: PrintStyle) -> Instruction:
    """`inst` as an older TVM would record it (the inverse of `normalize_instruction`):
    `GetSBlock` -> `GetBlock` for "pre0.24" and "pre0.17", Split with one attribute for
    "pre0.17" when `disable_predication` is off."""
    if style == "0.27":
        return inst
    if inst.kind == "GetSBlock":
        return Instruction("GetBlock", inst.inputs, inst.attrs, inst.outputs)
    if style == "pre0.17" and inst.kind == "Split" and len(inst.attrs) == 2 and not inst.attrs[1]:
        return Instruction("Split", inst.inputs, inst.attrs[:1], inst.outputs)
    return inst


def check_layout(spec: KindSpec, inst: Instruction) -> str | None:
    """Why `inst` does not fit its kind's layout, or None when it does. Checks arities and
    the types of RV inputs and outputs (unknown kinds are not checked)."""
    if not spec.known:
        return None
    if len(inst.attrs) not in spec.n_attrs:
        expected = " or ".join(str(n) for n in spec.n_attrs)
        return f"expects {expected} attribute(s), got {len(inst.attrs)}: {list(inst.attrs)!r}"
    problem = _check_inputs(spec, inst.inputs)
    if problem:
        return problem
    problem = _check_outputs(spec, inst)
    if problem:
        return problem
    return _check_attrs(spec, inst)


def _type_name(value: Any) -> str:
    return type(value).__name__


def _check_inputs(spec: KindSpec, inputs: Sequence[Any]) -> str | None:
    codes = spec.inputs
    if codes == ("*",):
        return None
    variadic = codes[-1].endswith("*") if codes else False
    fixed = len(codes) - 1 if variadic else len(codes)
    if variadic and len(inputs) < fixed + 1:
        return f"expects at least {fixed + 1} input(s), got {len(inputs)}"
    if not variadic and len(inputs) != fixed:
        return f"expects {fixed} input(s), got {len(inputs)}"
    for i, value in enumerate(inputs):
        code = codes[min(i, len(codes) - 1)] if variadic else codes[i]
        ok = {
            "b": isinstance(value, BlockRV),
            "l": isinstance(value, LoopRV),
            "l*": isinstance(value, LoopRV),
            "x": isinstance(value, (BlockRV, LoopRV)),
            "a": not isinstance(value, (BlockRV, LoopRV)),
            "B": isinstance(value, (list, tuple)) and all(isinstance(v, BlockRV) for v in value),
            "f*": value is None or isinstance(value, ExprRV) or _is_int(value),
            "*": True,
        }[code]
        if not ok:
            want = {"b": "a block", "l": "a loop", "l*": "a loop", "x": "a block or a loop", "a": "a value",
                    "B": "a list of blocks", "f*": "a factor (sampled variable, integer or None)"}[code]
            return f"input {i} must be {want}, got {_describe(value)}"
    return None


def _describe(value: Any) -> str:
    if isinstance(value, RV):
        return {BlockRV: "a block", LoopRV: "a loop", ExprRV: "a sampled variable"}.get(type(value), "an RV")
    return repr(value)


def _check_outputs(spec: KindSpec, inst: Instruction) -> str | None:
    kind = spec.outputs
    outputs = inst.outputs
    if kind == "*":
        return None
    if kind == "":
        if outputs:
            return f"defines no outputs, got {len(outputs)}"
        return None
    want = RV_TYPES_BY_PREFIX[kind[0]]
    if not kind.endswith("*") and len(outputs) != 1:
        return f"defines exactly one output, got {len(outputs)}"
    for i, rv in enumerate(outputs):
        if rv is not None and not isinstance(rv, want):
            return f"output {i} must be {_describe(want())}, got {_describe(rv)}"
    if spec.name == "Split" and len(outputs) != len(inst.inputs) - 1:
        return f"splits into {len(inst.inputs) - 1} factors but defines {len(outputs)} loops"
    if spec.name == "SamplePerfectTile" and inst.attrs and _is_int(inst.attrs[0]) and len(outputs) != inst.attrs[0]:
        return f"samples n={inst.attrs[0]} factors but defines {len(outputs)} variables"
    return None


def _check_attrs(spec: KindSpec, inst: Instruction) -> str | None:
    attrs = inst.attrs
    name = spec.name
    if name == "GetSBlock" and not all(isinstance(a, str) for a in attrs):
        return f"attributes must be [block_name, func_name] strings, got {list(attrs)!r}"
    if name in ("Bind", "Annotate", "Unannotate") and not isinstance(attrs[0], str):
        return f"attribute must be a string, got {attrs[0]!r}"
    if name in ("Split", "Fuse") and not all(isinstance(a, int) for a in attrs):
        return f"attributes must be booleans (0/1), got {list(attrs)!r}"
    if name in ("ComputeAt", "ReverseComputeAt") and not (isinstance(attrs[0], int) and _is_int(attrs[1])):
        return f"attributes must be [preserve_unit_loops, index], got {list(attrs)!r}"
    if name in ("CacheRead", "CacheWrite") and not (_is_int(attrs[0]) and isinstance(attrs[1], str)):
        return f"attributes must be [buffer_index, storage_scope], got {list(attrs)!r}"
    if name in ("RFactor", "StorageAlign") and not all(_is_int(a) for a in attrs):
        return f"attributes must be integers, got {list(attrs)!r}"
    if name == "SamplePerfectTile" and not all(_is_int(a) for a in attrs):
        return f"attributes must be [n, max_innermost_factor] integers, got {list(attrs)!r}"
    if name == "SampleCategorical":
        candidates, probs = attrs
        if not isinstance(candidates, (list, tuple)) or not isinstance(probs, (list, tuple)):
            return f"attributes must be [candidates, probs] lists, got {list(attrs)!r}"
        if len(candidates) != len(probs) or not candidates:
            return f"has {len(candidates)} candidates and {len(probs)} probabilities"
        if not all(isinstance(p, (int, float)) and not isinstance(p, bool) for p in probs):
            return f"probabilities must be numbers, got {list(probs)!r}"
    return None
