"""Applying a trace tuned on one fusion of an operator to another fusion of it: TVM 0.27's
`ScheduleUsingAnchorTrace` (`schedule_using_anchor_trace`).

This is the whole procedure: it inlines the blocks the trace never names, replays through the
generic part (`msdb.schedule.anchor_replay`, below the database) and schedules the one block left
over with the target's rules. The steps and the differences from TVM: see docs/architecture.md,
"Anchor traces".
"""

from __future__ import annotations

import logging
from typing import Any, Sequence

from msdb.errors import ScheduleError
from msdb.hashing.anchor import find_anchor_block
from msdb.records.target import Target
from msdb.schedule.anchor_replay import (AnchorTraceError, block, block_names, check_unscheduled, is_output_block,
                                         is_root, producers, replay_anchor_trace, traced_block_names)
from msdb.schedule.rv import LoopRV
from msdb.schedule.schedule import Schedule
from msdb.schedule.trace import DecisionProvider, Trace
from msdb.tuner.space import analysis as SA

__all__ = ["AnchorTraceError", "schedule_using_anchor_trace", "GPU_KINDS"]

logger = logging.getLogger(__name__)

#: Target kinds TVM treats as GPUs (`IsGPUTarget`): their last block would be thread-bound.
GPU_KINDS = frozenset({"cuda", "rocm", "vulkan", "metal", "opencl", "webgpu"})

#: Target kinds whose last unscheduled block gets `Parallel(Fuse(loops))`.
_CPU_KINDS = frozenset({"llvm", "hexagon"})


def schedule_using_anchor_trace(sch: Schedule, anchor_trace: Trace, target: Target | str | dict[str, Any], *,
                                decision_provider: DecisionProvider | None = None) -> None:
    """Schedule `sch` (the query function) with `anchor_trace`, a trace tuned on another
    function with the same anchor block (see the module docstring for the steps).

    Requires: a target whose default schedule rules msdb has ("llvm", or a GPU kind with
    "cuda"'s). `decision_provider` may replace the trace's decisions as they replay (what
    `msdb.schedule.refit` passes to re-fit tiles to other extents). Raises `AnchorTraceError`
    when a step cannot apply (the message names the instruction), leaving `sch` partly
    transformed.
    """
    coerced = _checked_target(target)
    _inline_post_blocks(sch, anchor_trace, coerced.kind)
    unscheduled = replay_anchor_trace(sch, anchor_trace, decision_provider=decision_provider)
    check_unscheduled(unscheduled)
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
    from msdb.kinds import UnknownKind
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


# ------------------------------------------------------------------------------- step 1


def _transitive_producers(sch: Schedule, anchor: str) -> set[str]:
    """The anchor and every block it depends on through producers (TVM's IsAncestor, asked of
    each block in turn; one walk here)."""
    seen = {anchor}
    todo = [anchor]
    while todo:
        for producer in producers(sch, todo.pop()):
            if producer.name_hint not in seen:
                seen.add(producer.name_hint)
                todo.append(producer.name_hint)
    return seen


def _inline_post_blocks(sch: Schedule, trace: Trace, kind: str) -> None:
    """Step 1: inline the spatial blocks the trace does not schedule (module docstring)."""
    traced = traced_block_names(trace)
    anchor = find_anchor_block(sch.mod.functions[sch.func_name])
    keep = _transitive_producers(sch, anchor.name_hint) if anchor is not None else set()
    todo: list[str] = []
    last: int | None = None
    for name in block_names(sch):
        if name in keep or name in traced or is_root(sch, name):
            continue  # AutoInline never touches the root block
        if not SA.is_spatial(block(sch, name)):
            continue
        if is_output_block(sch, name):
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


# ------------------------------------------------------------------------------- step 4


def _schedule_last_block(sch: Schedule, name: str, target: Target) -> None:
    """Step 4: the one block the trace left alone."""
    block_rv = sch.get_block(name)
    its_producers = producers(sch, name)
    try:
        if len(its_producers) == 1 and SA.is_spatial(its_producers[0]):
            sch.reverse_compute_inline(block_rv)  # into the cache-write stage
        elif target.kind in _CPU_KINDS:
            loops: Sequence[LoopRV] = sch.get_loops(block_rv)
            if loops:
                sch.parallel(sch.fuse(*loops))
        elif target.kind in GPU_KINDS:
            _auto_bind(target).apply(sch, block_rv)
    except ScheduleError as exc:
        raise AnchorTraceError(f"scheduling block {name!r}, the one the anchor trace left unscheduled: {exc}") from exc


def _auto_bind(target: Target) -> Any:
    """TVM's AutoBind(256 thread blocks, 32..1024 threads, the target's max threads per block)."""
    from msdb.tuner.space.gpu_target import GpuTarget
    from msdb.tuner.space.rules.auto_bind import AutoBind

    threads = GpuTarget.from_config(target.config).max_threads_per_block
    return AutoBind(max_threadblocks=256, thread_extents=(32, 64, 128, 256, 512, 1024), max_threads_per_block=threads)
