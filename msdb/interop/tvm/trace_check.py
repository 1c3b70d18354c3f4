"""Checks of a TVM trace's JSON for `msdb import`: its shape, whether it needs rewriting to
TVM 0.27's form, and the rewrite.

A trace is `[[[kind, [inputs], [attrs], [outputs]], ...], [[inst_index, decision], ...]]`. An
import checks 100k of them of ~50 instructions, so these checks work on whole columns in C
(`map`, `zip`, `set`) or on the text with one regular expression; the per-item walks only run
to name what is wrong. Old spellings (`GetBlock`, one-attribute `Split`) are rewritten with the
instruction registry's rules, without building a `Trace`.
"""

from __future__ import annotations

import functools
import itertools
import json
import operator
import re
from typing import Any

__all__ = ["TVM_KINDS", "legacy_kinds", "tvm_kinds", "needs_rewrite", "normalize_trace_json", "postproc_pattern",
           "scan_trace", "short_json", "unknown_kind", "well_formed"]

#: The instruction kinds TVM 0.27 registers (`InstructionKind.get` accepts exactly these), plus
#: kinds of older TVMs it dropped or renamed. A kind outside them and msdb's own registry
#: cannot come from a MetaSchedule log: `msdb import` refuses it unless asked not to.
TVM_KINDS = frozenset({
    "AddUnitLoop", "Annotate", "AnnotateBufferAccess", "Bind", "Blockize", "CacheIndex", "CacheInplace", "CacheRead",
    "CacheWrite", "ComputeAt", "ComputeInline", "DecomposePadding", "DecomposeReduction", "EnterPostproc", "Fuse",
    "FuseReductionEpilogue", "GetChildBlocks", "GetConsumers", "GetLoops", "GetOutputBlocks", "GetProducers",
    "GetSBlock", "LoopPartition", "Merge", "PadEinsum", "Parallel", "RFactor", "ReIndex", "ReadAt", "ReindexCacheRead",
    "ReindexCacheWrite", "Reorder", "ReorderBlockIterVar", "ReverseComputeAt", "ReverseComputeInline",
    "RollingBuffer", "SampleCategorical", "SampleComputeLocation", "SamplePartitionedTile", "SamplePerfectTile",
    "SetScope", "Split", "StorageAlign", "Tensorize", "TransformBlockLayout", "TransformLayout", "Unannotate",
    "Unroll", "UnsafeHideBufferAccess", "UnsafeSetDType", "Vectorize", "WriteAt",
    # older TVMs
    "GetBlock", "SetAxisSeparator", "GetBlockLevelProducers",
})


@functools.lru_cache(maxsize=1)
def legacy_kinds() -> frozenset[str]:
    """Old spellings of instruction kinds (`GetBlock`), from the instruction registry."""
    from msdb.schedule.instructions import known_kinds, spec_for

    return frozenset(kind for kind in known_kinds() if spec_for(kind).name != kind)


@functools.lru_cache(maxsize=1)
def tvm_kinds() -> frozenset[str]:
    """Every instruction kind a TVM log may hold: `TVM_KINDS` and the kinds of msdb's registry."""
    from msdb.schedule.instructions import known_kinds

    return TVM_KINDS | frozenset(known_kinds())


def unknown_kind(insts: list[list[Any]], kinds: frozenset[str]) -> str | None:
    """Why well-formed instructions hold a kind outside `kinds` (naming the first), or None."""
    if kinds.issuperset(map(_first, insts)):
        return None
    for i, inst in enumerate(insts):
        if inst[0] not in kinds:
            return (f"trace instruction {i} is of kind {short_json(inst[0])}, which TVM does not have "
                    "(--unknown-kinds imports it; it can never be replayed)")
    return None  # pragma: no cover


def normalize_trace_json(trace: list[Any]) -> list[Any]:
    """TVM 0.27's form of a trace's JSON (`GetBlock` -> `GetSBlock`, `Split` attrs padded with
    `disable_predication`), rewriting only the instructions that need it, with the rules of
    `msdb.schedule.instructions.normalize_instruction` (the same as `Trace.normalized()`, without
    building a `Trace`)."""
    from msdb.schedule.instruction import Instruction
    from msdb.schedule.instructions import needs_normalizing, normalize_instruction

    insts = []
    for inst in trace[0]:
        kind, inputs, attrs, outputs = inst
        if needs_normalizing(kind, len(attrs)):
            new = normalize_instruction(Instruction(kind, tuple(inputs), tuple(attrs), tuple(outputs)))
            insts.append([new.kind, inputs, list(new.attrs), outputs])
        else:
            insts.append(inst)
    return [insts, trace[1]]


_first = operator.itemgetter(0)
_LIST_ONLY = {list}
_INT_ONLY = {int}
_FOUR = {4}
#: (str, list, list, list) * n: the types of n instructions' fields, flattened, by n.
_INST_PATTERNS: dict[int, tuple[type, ...]] = {}
_chain = itertools.chain.from_iterable


@functools.lru_cache(maxsize=4)
def postproc_pattern(legacy: frozenset[str], kinds: frozenset[str] | None = None) -> re.Pattern[str]:
    """A regex matching, from a trace's `,["EnterPostproc",...`, the rest of its instruction
    list in TVM's compact form and the `],` before the decisions, when every instruction is
    `[kind, [inputs], [attrs], [outputs]]` with plain JSON scalars or lists of them (two levels
    deep at most), no legacy kind, and no one-attribute Split (those need rewriting).

    This is the per-line check of the quick path: it validates as text, building no objects,
    in half the time of scanning the same text into lists and checking their shape. Anything
    it does not match (string escapes, NaN, deeper nesting, whitespace) goes the general way,
    which decides the same things with the JSON scanner; so it may refuse more, never less.
    `kinds`: the instruction kinds accepted (None: any name)."""
    string = r'"[^"\\\x00-\x1f]*+"'
    number = r"-?+(?:0|[1-9][0-9]*+)(?:\.[0-9]++)?+(?:[eE][-+]?+[0-9]++)?+"
    scalar = rf"(?:{string}|{number}|null|true|false)"
    flat = rf"\[(?:{scalar}(?:,{scalar})*+)?+\]"
    item = rf"(?:{scalar}|\[(?:(?:{scalar}|{flat})(?:,(?:{scalar}|{flat}))*+)?+\])"
    items = rf"\[(?:{item}(?:,{item})*+)?+\]"
    excluded = "|".join(re.escape(kind) for kind in sorted(legacy | {"Split"}))
    if kinds is None:
        kind = rf'"(?!(?:{excluded})")[A-Za-z_][A-Za-z0-9_]*+"'
    else:
        kind = rf'"{_trie(sorted(kinds - legacy - {"Split"}))}"'
    split = rf'"Split",{items},\[{item}(?:,{item})++\]'
    return re.compile(rf"(?:,\[(?:{split}|{kind},{items},{items}),{items}\])++\],")


def _trie(words: list[str]) -> str:
    """A regex matching exactly `words` (sorted, none empty), as a trie: each alternative starts
    with a different character, so matching takes no backtracking over the alternatives (a
    flat alternation of fifty kinds cost the quick path a tenth of its time)."""
    groups: dict[str, list[str]] = {}
    for word in words:
        groups.setdefault(word[0], []).append(word[1:])
    alternatives = []
    for first, rests in groups.items():
        ends = "" in rests
        rest = [r for r in rests if r]
        tail = _trie(rest) if rest else ""
        if rest and ends:
            tail = f"(?:{tail})?"
        alternatives.append(re.escape(first) + tail)
    return alternatives[0] if len(alternatives) == 1 else "(?:" + "|".join(alternatives) + ")"


def well_formed(insts: Any) -> bool:
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


def needs_rewrite(insts: list[list[Any]], legacy: frozenset[str]) -> bool:
    """Whether well-formed instructions hold one TVM 0.27 spells differently (a legacy kind, a
    one-attribute `Split`). Decided per parsed instruction, never on the text: a
    `["Split",[],[x],[]]` inside an input or decision list is not an instruction, and
    `"Get\u0042lock"` is one."""
    if not insts:
        return False
    kinds, _, attrs, _ = zip(*insts)
    return not legacy.isdisjoint(kinds) or ("Split" in kinds and any(
        k == "Split" and len(a) == 1 for k, a in zip(kinds, attrs)))


def scan_trace(trace: Any, legacy: frozenset[str], kinds: frozenset[str] | None = None) -> tuple[str | None, bool]:
    """(why the trace JSON is malformed or None, whether it needs normalizing). `kinds`: the
    instruction kinds accepted (None: any name).

    A trace is `[[[kind, [inputs], [attrs], [outputs]], ...], [[inst_index, decision], ...]]`.
    The common case is checked column-wise with C-level `map`/`zip` (an import checks 100k
    traces of ~50 instructions); the per-item walk only runs to name what is wrong."""
    if type(trace) is not list or len(trace) != 2 or type(trace[0]) is not list or type(trace[1]) is not list:
        return "trace must be [instructions, decisions]", False
    insts, decisions = trace
    if insts and not well_formed(insts):
        return _explain_insts(insts), False
    if kinds is not None:
        problem = unknown_kind(insts, kinds)
        if problem is not None:
            return problem, False
    needs = needs_rewrite(insts, legacy)
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
            return f"trace instruction {i} is not [kind, [inputs], [attrs], [outputs]]: {short_json(inst)}"
    return "trace instructions are malformed"  # pragma: no cover - callers only ask when one is


def _explain_decisions(decisions: list[Any], n: int) -> str:
    for j, item in enumerate(decisions):
        if type(item) is not list or len(item) != 2 or type(item[0]) is not int:
            return f"trace decision {j} is not [instruction_index, decision]: {short_json(item)}"
        if not 0 <= item[0] < n:
            return f"trace decision {j} points at instruction {item[0]}, but the trace has {n}"
    return "trace decisions are malformed"  # pragma: no cover


def short_json(value: Any, limit: int = 60) -> str:
    """`value` as JSON, cut to `limit` characters, to quote it in a bad-line reason."""
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
