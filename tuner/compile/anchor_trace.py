"""Applying a trace tuned on one fusion of an operator to another fusion of it: TVM 0.27's
`ScheduleUsingAnchorTrace` (docs/architecture.md, "Compile"; the steps below follow TVM's).

Why it exists: with `anchor-block` module equality a record tuned on `conv2d + add + relu`
answers a query for `conv2d + add + add + relu` (same conv, the anchor block). Replaying the
trace as is would fail (the blocks differ), so TVM's procedure adapts it:

1. `_inline_post_blocks`: every spatial block the trace never names (by `GetSBlock`) that is
   not the anchor or one of its transitive producers goes through the target's default
   `AutoInline` rule; the output block among them goes last, so that its producers are inlined
   before it may have to be reverse-inlined.
2. `_apply_anchor_trace`: replay every instruction (post-processing included) with its recorded
   decision, skipping those that touch a "foreign" block or loop (one the query lacks) and
   marking their outputs foreign in turn; blocks are matched by name only. A
   `ReverseComputeInline` that cannot apply becomes a `ComputeInline`; a `ComputeInline` that
   cannot apply is only allowed on an output block, which is then reverse-inlined if possible
   and otherwise left alone. `GetChildBlocks` maps only the first len(old outputs) results.
3. At most one block may remain unscheduled (same loop count and loop kinds as before the
   replay): TVM aborts the process otherwise; msdb raises `AnchorTraceError`.
4. That block is reverse-inlined into its producer when it has exactly one spatial producer,
   else its loops are fused and the fused loop made parallel (CPU), or bound to GPU threads by
   the `AutoBind` rule (GPU targets).

Differences from TVM, none of which changes the resulting module:
- TVM visits the query's blocks in the order of a hash set (its result has to be independent
  of it since TVM PR #13329); msdb visits them in program order.
- TVM's own lookups (`GetSBlock` of every block, `GetProducers` while testing ancestry) are
  recorded in its trace; msdb asks the schedule state and records only the instructions that
  change the schedule (with the `GetSBlock` lookups they need), so the resulting trace replays
  on the query module as a plain trace.
- An input random variable the schedule never bound (TVM would crash translating it) makes the
  instruction foreign, like a foreign block or loop.
"""

from __future__ import annotations

import logging
from typing import Any, Sequence

from msdb.errors import ScheduleError
from msdb.hashing.anchor import find_anchor_block
from msdb.ir import stmt as S
from msdb.records.target import Target
from msdb.schedule import analysis as A
from msdb.schedule.instruction import Instruction
from msdb.schedule.instructions import kind_of
from msdb.schedule.rv import RV, BlockRV, LoopRV
from msdb.schedule.schedule import Schedule
from msdb.schedule.trace import Trace
from msdb.tuner.space import analysis as SA

__all__ = ["AnchorTraceError", "schedule_using_anchor_trace", "GPU_KINDS"]

logger = logging.getLogger(__name__)

#: Target kinds TVM treats as GPUs (`IsGPUTarget`): their last block would be thread-bound.
GPU_KINDS = frozenset({"cuda", "rocm", "vulkan", "metal", "opencl", "webgpu"})

#: Target kinds whose last unscheduled block gets `Parallel(Fuse(loops))`.
_CPU_KINDS = frozenset({"llvm", "hexagon"})


class AnchorTraceError(ScheduleError):
    """An anchor-block trace cannot be applied to the query function. Unlike other schedule
    errors, the schedule is left partly transformed: apply the trace to a fresh Schedule."""


def schedule_using_anchor_trace(sch: Schedule, anchor_trace: Trace, target: Target | str | dict[str, Any]) -> None:
    """Schedule `sch` (the query function) with `anchor_trace`, a trace tuned on another
    function with the same anchor block (see the module docstring for the steps).

    Requires: a target whose default schedule rules msdb has ("llvm", or a GPU kind with
    "cuda"'s). Raises `AnchorTraceError` when a step cannot apply (the message names the
    instruction), leaving `sch` partly transformed.
    """
    coerced = _checked_target(target)
    _inline_post_blocks(sch, anchor_trace, coerced.kind)
    unscheduled = _apply_anchor_trace(sch, anchor_trace)
    if len(unscheduled) > 1:
        raise AnchorTraceError(
            f"applying the anchor trace left {len(unscheduled)} blocks unscheduled ({', '.join(unscheduled)}); "
            "all blocks should have been scheduled or only one (fused) spatial block can remain unscheduled "
            "(TVM aborts here): the trace does not fit this function")
    if unscheduled:
        _schedule_last_block(sch, unscheduled[0], coerced)


# ------------------------------------------------------------------------------- target


def _checked_target(target: Target | str | dict[str, Any]) -> Target:
    """The target, refused when msdb lacks its default AutoInline rule (TVM's
    GetDefaultAutoInline raises "Unsupported target" for such kinds)."""
    coerced = Target.coerce(target)
    if coerced is None:
        raise AnchorTraceError("schedule_using_anchor_trace needs a target (e.g. 'llvm -num-cores=1'), got None")
    _default_auto_inline(coerced.kind)
    return coerced


def _default_auto_inline(kind: str) -> Any:
    """The AutoInline rule among the target kind's default schedule rules (TVM's
    GetDefaultAutoInline: DefaultLLVM for "llvm", DefaultCUDA for every GPU kind)."""
    from msdb.tuner.kinds import UnknownKind
    from msdb.tuner.space.rules.auto_inline import AutoInline
    from msdb.tuner.space.rules.base import create

    rules_kind = "cuda" if kind in GPU_KINDS else kind
    try:
        rules = create(rules_kind)
    except UnknownKind:
        raise AnchorTraceError(f"applying an anchor-block trace needs the default schedule rules of target kind "
                               f"{kind!r}, which msdb does not have (it has them for 'llvm' and 'cuda')") from None
    for rule in rules:
        if isinstance(rule, AutoInline):
            return rule
    raise AnchorTraceError(f"the default schedule rules of target kind {kind!r} have no AutoInline rule")


# ------------------------------------------------------------------------------- state queries


def _block_names(sch: Schedule) -> list[str]:
    """Every block of the function worked on, root included, in program order."""
    return list(sch.state.index(sch.func_name).blocks)


def _block(sch: Schedule, name: str) -> S.Block:
    return sch.state.block(sch.func_name, name)


def _producers(sch: Schedule, name: str) -> list[S.Block]:
    """The block's producers in its scope (TVM's GetProducers, not recorded)."""
    node = _block(sch, name)
    if _is_root(sch, name):
        return []
    return A.scope_of(sch.state, sch.func_name, node).producers(node)


def _is_root(sch: Schedule, name: str) -> bool:
    return sch.state.parent(sch.func_name, sch.state.realize(sch.func_name, name)) is None


def _is_output_block(sch: Schedule, name: str) -> bool:
    """Whether the block writes an output of its scope (TVM's IsOutputBlock)."""
    if _is_root(sch, name):
        return False
    node = _block(sch, name)
    scope = sch.state.scope_block(sch.func_name, node)
    root_scope = A.is_root_scope(sch.state, sch.func_name, scope)
    return A.is_output_block(sch.state.func(sch.func_name), scope, node, root_scope)


def _transitive_producers(sch: Schedule, anchor: str) -> set[str]:
    """The anchor and every block it depends on through producers (TVM's IsAncestor, asked of
    each block in turn; one walk here)."""
    seen = {anchor}
    todo = [anchor]
    while todo:
        for producer in _producers(sch, todo.pop()):
            if producer.name_hint not in seen:
                seen.add(producer.name_hint)
                todo.append(producer.name_hint)
    return seen


def _loop_kinds(sch: Schedule, name: str) -> list[S.ForKind]:
    realize = sch.state.realize(sch.func_name, name)
    return [loop.kind for loop in A.loops_above(sch.state, sch.func_name, realize)]


# ------------------------------------------------------------------------------- step 1


def _traced_block_names(trace: Trace) -> set[str]:
    """attrs[0] of every GetSBlock (or older GetBlock) instruction of the trace."""
    return {str(inst.attrs[0]) for inst in trace.insts
            if kind_of(inst.kind).name == "GetSBlock" and inst.attrs}


def _inline_post_blocks(sch: Schedule, trace: Trace, kind: str) -> None:
    """Step 1: inline the spatial blocks the trace does not schedule (module docstring)."""
    traced = _traced_block_names(trace)
    anchor = find_anchor_block(sch.mod.functions[sch.func_name])
    keep = _transitive_producers(sch, anchor.name_hint) if anchor is not None else set()
    todo: list[str] = []
    last: int | None = None
    for name in _block_names(sch):
        if name in keep or name in traced or _is_root(sch, name):
            continue  # AutoInline never touches the root block
        if not SA.is_spatial(_block(sch, name)):
            continue
        if _is_output_block(sch, name):
            last = len(todo)
        todo.append(name)
    if last is not None:
        # The output block can only be reverse-inlined: its producers go first (TVM swaps it
        # with the last entry).
        todo[last], todo[-1] = todo[-1], todo[last]
    rule = _default_auto_inline(kind)
    for name in todo:
        if name in sch.state.index(sch.func_name).blocks:
            rule.apply(sch, sch.get_block(name))
    logger.debug("anchor trace: auto-inline ran on %s", todo)


# ------------------------------------------------------------------------------- step 2


def _rvs_in(value: Any) -> list[RV]:
    if isinstance(value, RV):
        return [value]
    if isinstance(value, (list, tuple)):
        return [rv for item in value for rv in _rvs_in(item)]
    return []


def _translate(value: Any, rv_map: dict[RV, RV]) -> Any:
    if isinstance(value, RV):
        return rv_map[value]
    if isinstance(value, (list, tuple)):
        return [_translate(v, rv_map) for v in value]
    return value


def _where(index: int, inst: Instruction) -> str:
    return f"anchor trace instruction {index} ({inst.kind})"


def _apply_anchor_trace(sch: Schedule, trace: Trace) -> list[str]:
    """Step 2: replay what applies (module docstring); the names of the blocks left
    unscheduled, in program order."""
    names_before = _block_names(sch)
    loops_before = {name: _loop_kinds(sch, name) for name in names_before}
    rv_map: dict[RV, RV] = {}
    foreign: set[RV] = set()
    for index, inst in enumerate(trace.insts):
        kind = kind_of(inst.kind)
        if any(rv in foreign or rv not in rv_map for rv in _rvs_in(inst.inputs)):
            foreign.update(out for out in inst.outputs if out is not None)
            continue
        inputs = [_translate(v, rv_map) for v in inst.inputs]
        name = kind.name
        if name == "GetSBlock" and str(inst.attrs[0]) not in sch.state.index(sch.func_name).blocks:
            foreign.update(out for out in inst.outputs if out is not None)
            continue
        try:
            if name == "ReverseComputeInline" and _reverse_inline_or_inline(sch, inputs[0], index, inst):
                continue
            if name == "ComputeInline" and _inline_or_reverse_inline(sch, inputs[0], index, inst):
                continue
            outputs = kind.apply(sch, inputs, inst.attrs, trace.get_decision(inst))
        except AnchorTraceError:
            raise
        except ScheduleError as exc:
            raise AnchorTraceError(f"{_where(index, inst)} does not apply to this function: {exc}") from exc
        if name == "GetChildBlocks":
            if len(outputs) < len(inst.outputs):
                raise AnchorTraceError(f"{_where(index, inst)}: the function has {len(outputs)} child blocks there, "
                                       f"the trace expects at least {len(inst.outputs)}")
            outputs = outputs[:len(inst.outputs)]
        elif len(outputs) != len(inst.outputs):
            raise AnchorTraceError(f"{_where(index, inst)}: the schedule produced {len(outputs)} output(s), the trace "
                                   f"expects {len(inst.outputs)}")
        for old, new in zip(inst.outputs, outputs):
            if old is not None:
                rv_map[old] = new
    names_now = set(_block_names(sch))
    return [name for name in names_before
            if name in names_now and not _is_root(sch, name) and _loop_kinds(sch, name) == loops_before[name]]


def _reverse_inline_or_inline(sch: Schedule, block: BlockRV, index: int, inst: Instruction) -> bool:
    """A ReverseComputeInline the block does not allow becomes a ComputeInline (which must
    apply). True when handled here, False to replay the instruction as recorded."""
    if _can(sch, "reverse_compute_inline", block):
        return False
    try:
        sch.compute_inline(block)
    except ScheduleError as exc:
        raise AnchorTraceError(f"{_where(index, inst)}: block {sch.get(block).name_hint!r} can be neither "
                               f"reverse-inlined nor inlined here: {exc}") from exc
    return True


def _inline_or_reverse_inline(sch: Schedule, block: BlockRV, index: int, inst: Instruction) -> bool:
    """A ComputeInline the block does not allow is only expected of an output block, which is
    reverse-inlined if it can be and otherwise left alone. True when handled here."""
    if _can(sch, "compute_inline", block):
        return False
    name = sch.get(block).name_hint
    if not _is_output_block(sch, name):
        raise AnchorTraceError(f"{_where(index, inst)}: block {name!r} cannot be inlined here and is not an output "
                               "block (a spatial block that cannot be inlined should be the output block)")
    try:
        sch.reverse_compute_inline(block)
    except ScheduleError:
        logger.debug("anchor trace: output block %s stays (neither inline applies)", name)
    return True


def _can(sch: Schedule, primitive: str, block: BlockRV) -> bool:
    """Whether an inlining primitive applies (TVM's CanComputeInline / CanReverseComputeInline),
    asked of a copy so that the schedule and its trace stay as they are."""
    probe = sch.copy()
    try:
        getattr(probe, primitive)(block)
    except ScheduleError:
        return False
    return True


# ------------------------------------------------------------------------------- step 4


def _schedule_last_block(sch: Schedule, name: str, target: Target) -> None:
    """Step 4: the one block the trace left alone."""
    block = sch.get_block(name)
    producers = _producers(sch, name)
    try:
        if len(producers) == 1 and SA.is_spatial(producers[0]):
            sch.reverse_compute_inline(block)  # into the cache-write stage
        elif target.kind in _CPU_KINDS:
            loops: Sequence[LoopRV] = sch.get_loops(block)
            if loops:
                sch.parallel(sch.fuse(*loops))
        elif target.kind in GPU_KINDS:
            _auto_bind(target).apply(sch, block)
    except ScheduleError as exc:
        raise AnchorTraceError(f"scheduling block {name!r}, the one the anchor trace left unscheduled: {exc}") from exc


def _auto_bind(target: Target) -> Any:
    """TVM's AutoBind(256 thread blocks, 32..1024 threads, the target's max threads per block)."""
    from msdb.tuner.space.gpu_target import GpuTarget
    from msdb.tuner.space.rules.auto_bind import AutoBind

    threads = GpuTarget.from_config(target.config).max_threads_per_block
    return AutoBind(max_threadblocks=256, thread_extents=(32, 64, 128, 256, 512, 1024), max_threads_per_block=threads)
