"""The registry of instruction kinds: one `InstructionKind` entry per TVM kind, all data.

Each entry lists the kind's spellings across TVM generations (docs/tvm-formats.md: `GetBlock`
before 0.24, `GetSBlock` since; Split's `disable_predication` attribute since 0.17) and the
parameters of its primitive in the order TVM's Python API takes them. Supporting a new kind
means adding one entry here; the trace module and replay read the rules through `kind_of`.

Kinds msdb cannot replay (any kind it does not know, such as PadEinsum) are still parsed,
printed and written back unchanged; replaying them raises `ScheduleError`.
"""

from __future__ import annotations

import re
from typing import Any

from msdb.schedule.instruction import (
    RV_TYPES_BY_PREFIX,
    Form,
    Generation,
    Instruction,
    InstructionKind,
    RawInput,
    Spelling,
    attr_param,
    decision_param,
    format_value,
    input_param,
)

__all__ = [
    "RawInput",
    "InstructionKind",
    "Generation",
    "kind_of",
    "kind_for",
    "spec_for",
    "known_kinds",
    "normalize_instruction",
    "needs_normalizing",
    "legacy_instruction",
    "check_layout",
    "print_style",
    "format_value",
    "RV_TYPES_BY_PREFIX",
]

_CURRENT = Generation.CURRENT
_OLDEST = Generation.BEFORE_0_17


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# ---------------------------------------------------------------- rules across parameters


def _check_tile_decision(inst: Instruction, decision: Any) -> str | None:
    if not isinstance(decision, (list, tuple)) or not all(_is_int(d) for d in decision):
        return f"SamplePerfectTile decision must be a list of integers, got {decision!r}"
    if len(decision) != len(inst.outputs):
        return (f"SamplePerfectTile decision {list(decision)} has {len(decision)} factors, the instruction samples "
                f"{len(inst.outputs)}")
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
        return ("SampleComputeLocation decision must be an integer >= -2 (-2 inline, -1 root, i the i-th loop), "
                f"got {decision!r}")
    return None


def _split_outputs(inst: Instruction) -> str | None:
    if len(inst.outputs) != len(inst.inputs) - 1:
        return f"splits into {len(inst.inputs) - 1} factors but defines {len(inst.outputs)} loops"
    return None


def _tile_outputs(inst: Instruction) -> str | None:
    n = inst.attrs[0] if inst.attrs else None
    if _is_int(n) and len(inst.outputs) != n:
        return f"samples n={n} factors but defines {len(inst.outputs)} variables"
    return None


def _categorical_attrs(inst: Instruction) -> str | None:
    candidates, probs = inst.attrs
    if len(candidates) != len(probs) or not candidates:
        return f"has {len(candidates)} candidates and {len(probs)} probabilities"
    return None


# ---------------------------------------------------------------- the registry


def _kind(name: str, method: str, *params: Any, outputs: str = "", **rules: Any) -> InstructionKind:
    """A kind spelled the same in every generation."""
    return InstructionKind((Spelling(_OLDEST, name, method),), tuple(params), outputs, **rules)


_BLOCK = input_param("block", "block")
_LOOP = input_param("loop", "loop")
_BLOCK_OR_LOOP = input_param("block_or_loop", "block_or_loop")
_PURE: dict[str, Any] = {"pure": True}

_KINDS: tuple[InstructionKind, ...] = (
    InstructionKind((Spelling(_OLDEST, "GetBlock", "get_block"), Spelling(_CURRENT, "GetSBlock", "get_sblock")),
                    (attr_param("name", "str", Form.STR), attr_param("func_name", "str", Form.STR)), "b", **_PURE),
    _kind("GetLoops", "get_loops", _BLOCK, outputs="l*", **_PURE),
    _kind("GetChildBlocks", "get_child_blocks", input_param(None, "block_or_loop"), outputs="b*", **_PURE),
    _kind("GetProducers", "get_producers", _BLOCK, outputs="b*", **_PURE),
    _kind("GetConsumers", "get_consumers", _BLOCK, outputs="b*", **_PURE),
    _kind("Split", "split", _LOOP, input_param("factors", "factor", Form.LIST, rest=True),
          attr_param("preserve_unit_iters", "bool", Form.BOOL),
          attr_param("disable_predication", "bool", Form.BOOL, since=Generation.BEFORE_0_24, default=False),
          outputs="l*", check_outputs=_split_outputs),
    _kind("Fuse", "fuse", input_param(None, "loop", rest=True, splat=True),
          attr_param("preserve_unit_iters", "bool", Form.BOOL), outputs="l"),
    _kind("Reorder", "reorder", input_param(None, "loop", rest=True, splat=True)),
    _kind("Parallel", "parallel", _LOOP),
    _kind("Vectorize", "vectorize", _LOOP),
    _kind("Unroll", "unroll", _LOOP),
    _kind("Bind", "bind", _LOOP, attr_param("thread_axis", "str", Form.STR)),
    _kind("Annotate", "annotate", _BLOCK_OR_LOOP, attr_param("ann_key", "str", Form.STR),
          input_param("ann_val", "value", Form.ANNOTATION)),
    _kind("Unannotate", "unannotate", _BLOCK_OR_LOOP, attr_param("ann_key", "str", Form.STR)),
    _kind("CacheRead", "cache_read", _BLOCK, attr_param("read_buffer_index", "int"),
          attr_param("storage_scope", "str", Form.STR),
          input_param("consumer_blocks", "blocks", Form.LIST, omit_empty=True), outputs="b"),
    _kind("CacheWrite", "cache_write", _BLOCK, attr_param("write_buffer_index", "int"),
          attr_param("storage_scope", "str", Form.STR),
          input_param("consumer_blocks", "blocks", Form.LIST, omit_empty=True), outputs="b"),
    _kind("ComputeAt", "compute_at", _BLOCK, _LOOP, attr_param("preserve_unit_loops", "bool", Form.BOOL),
          attr_param("index", "int")),
    _kind("ReverseComputeAt", "reverse_compute_at", _BLOCK, _LOOP,
          attr_param("preserve_unit_loops", "bool", Form.BOOL), attr_param("index", "int")),
    _kind("ComputeInline", "compute_inline", _BLOCK),
    _kind("ReverseComputeInline", "reverse_compute_inline", _BLOCK),
    _kind("DecomposeReduction", "decompose_reduction", _BLOCK, _LOOP, outputs="b"),
    _kind("RFactor", "rfactor", _LOOP, attr_param("factor_axis", "int"), outputs="b"),
    _kind("StorageAlign", "storage_align", _BLOCK,
          *(attr_param(k, "int") for k in ("buffer_index", "axis", "factor", "offset"))),
    _kind("SetScope", "set_scope", _BLOCK, attr_param("buffer_index", "int"),
          attr_param("storage_scope", "str", Form.STR)),
    _kind("SamplePerfectTile", "sample_perfect_tile", _LOOP, attr_param("n", "int"),
          attr_param("max_innermost_factor", "int"), decision_param(Form.LIST), outputs="v*",
          check_decision=_check_tile_decision, check_outputs=_tile_outputs, **_PURE),
    _kind("SampleCategorical", "sample_categorical", attr_param("candidates", "list", Form.LIST),
          attr_param("probs", "numbers", Form.LIST), decision_param(), outputs="v",
          check_decision=_check_categorical_decision, check_attrs=_categorical_attrs, **_PURE),
    _kind("SampleComputeLocation", "sample_compute_location", _BLOCK, decision_param(), outputs="l",
          check_decision=_check_location_decision, **_PURE),
    _kind("EnterPostproc", "enter_postproc", postproc=True),
    _kind("Blockize", "blockize", input_param("target"), attr_param("preserve_unit_iters", form=Form.BOOL),
          outputs="b"),
    _kind("Tensorize", "tensorize", _BLOCK_OR_LOOP, attr_param("tensor_intrin", form=Form.STR),
          attr_param("preserve_unit_iters", form=Form.BOOL)),
    # layouts (TVM's tensor-core rule); `buffer` is the index, `buffer_index_type` 0 read / 1 write.
    # TVM before 0.13 laid TransformLayout out otherwise: such instructions stay opaque.
    _kind("ReIndex", "reindex", _BLOCK, attr_param("buffer", "int"), attr_param("buffer_index_type", "int"),
          outputs="b", opaque_other_layouts=True),
    _kind("TransformLayout", "transform_layout", _BLOCK, attr_param("buffer", "int"),
          attr_param("buffer_index_type", "int"), input_param("index_map", "str", Form.INDEX_MAP), attr_param("pad_value"),
          attr_param("assume_injective_transform", "bool", Form.BOOL), opaque_other_layouts=True),
    _kind("TransformBlockLayout", "transform_block_layout", _BLOCK, attr_param("index_map", "str", Form.INDEX_MAP),
          opaque_other_layouts=True),
)


def _snake(kind: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", kind).lower()


def _generic(kind: str, pure: bool = False) -> InstructionKind:
    """A kind msdb has no rules for: any layout, printed positionally, never replayed."""
    return InstructionKind((Spelling(_OLDEST, kind, _snake(kind)),),
                           (input_param(None, rest=True, splat=True), attr_param(None, rest=True, splat=True),
                            decision_param()),
                           "*", pure=pure, replayable=False, known=False)


#: Kinds TVM marks pure that msdb does not otherwise know: simplification may drop them.
_PURE_UNKNOWN = tuple(_generic(name, pure=True) for name in ("GetOutputBlocks", "SamplePartitionedTile",
                                                             "GetBlockLevelProducers"))

_BY_NAME: dict[str, InstructionKind] = {name: kind for kind in _KINDS for name in kind.names}
_BY_NAME.update((kind.name, kind) for kind in _PURE_UNKNOWN)
_GENERIC: dict[str, InstructionKind] = {}


def kind_of(name: str) -> InstructionKind:
    """The kind named `name` (any generation's spelling); an unknown name gets a generic kind
    that accepts any layout, prints positionally and cannot be replayed."""
    kind = _BY_NAME.get(name) or _GENERIC.get(name)
    if kind is None:
        kind = _generic(name)
        if len(_GENERIC) < 256:  # bounded: kinds come from user files
            _GENERIC[name] = kind
    return kind


_OPAQUE: dict[str, InstructionKind] = {}


def kind_for(inst: Instruction) -> InstructionKind:
    """The kind that governs `inst`: its kind, or, for an instruction in a layout an older TVM
    used that msdb does not know (`InstructionKind.opaque_other_layouts`), the generic kind of
    its name (parsed, printed positionally, written back unchanged, never replayed)."""
    kind = kind_of(inst.kind)
    if kind.opaque_other_layouts and kind.check(inst) is not None:
        generic = _OPAQUE.get(inst.kind)
        if generic is None:
            generic = _OPAQUE[inst.kind] = _generic(inst.kind)
        return generic
    return kind


#: The name callers outside this package use (msdb.interop.tvm.trace_check).
spec_for = kind_of


def known_kinds() -> list[str]:
    """Every kind name with a registry entry, older spellings included."""
    return sorted(name for kind in _KINDS for name in kind.names)


def normalize_instruction(inst: Instruction) -> Instruction:
    """`inst` in TVM 0.27's form (`GetBlock` becomes `GetSBlock`, a one-attribute `Split` gets
    `disable_predication` = 0); `inst` itself when it already is."""
    return kind_for(inst).normalized(inst)


def needs_normalizing(kind: str, n_attrs: int) -> bool:
    """Whether an instruction of `kind` with `n_attrs` attributes is spelled as an older TVM
    spells it (what `normalize_instruction` rewrites), without building it."""
    entry = kind_of(kind)
    return entry.name != kind or bool(entry.missing_attrs(n_attrs))


def legacy_instruction(inst: Instruction, generation: Generation) -> Instruction:
    """`inst` (in TVM 0.27's form) as TVM of `generation` records it (the inverse of
    `normalize_instruction`)."""
    return kind_for(inst).legacy(inst, generation)


def check_layout(inst: Instruction) -> str | None:
    """Why `inst` does not fit its kind's layout, or None when it does."""
    return kind_for(inst).check(inst)


def print_style(legacy: bool | str) -> Generation:
    """Map `as_python(legacy=...)` to a generation: False -> TVM 0.24+ (`get_sblock`, Split
    with `disable_predication`); "pre0.24" -> TVM 0.17-0.23 (`get_block`, with
    `disable_predication`); True or "pre0.17" -> older TVM (`get_block`, no
    `disable_predication` unless it is set)."""
    if legacy is False or legacy in ("0.27", "current"):
        return Generation.CURRENT
    if legacy is True or legacy == "pre0.17":
        return Generation.BEFORE_0_17
    if legacy == "pre0.24":
        return Generation.BEFORE_0_24
    raise ValueError(f"legacy must be False, True, 'pre0.24' or 'pre0.17', got {legacy!r}")
