"""The generic part of TVM 0.27's `ScheduleUsingAnchorTrace`: replaying a trace tuned on one
function on another whose blocks differ, skipping what does not apply.

`replay_anchor_trace` (step 2) and `check_unscheduled` (step 3) live here, below the database,
because re-fitting a record to a relative (`msdb.schedule.refit`) replays through them too; the
tuner's `msdb.tuner.space.anchor_trace` adds the steps that need its schedule rules. See
docs/architecture.md, "Anchor traces".
"""

from __future__ import annotations

import logging
from typing import Any, Sequence

from msdb.errors import ScheduleError
from msdb.ir import stmt as S
from msdb.schedule import analysis as A
from msdb.schedule.instruction import Instruction
from msdb.schedule.instructions import kind_for
from msdb.schedule.rv import RV, BlockRV
from msdb.schedule.schedule import Schedule
from msdb.schedule.trace import DecisionProvider, Trace

__all__ = ["AnchorTraceError", "replay_anchor_trace", "check_unscheduled", "block_names", "block", "producers", "rvs_in",
           "is_root", "is_output_block", "loop_kinds", "traced_block_names"]

logger = logging.getLogger(__name__)


class AnchorTraceError(ScheduleError):
    """An anchor-block trace cannot be applied to the query function. Unlike other schedule
    errors, the schedule is left partly transformed: apply the trace to a fresh Schedule."""

    def __init__(self, message: str, index: int | None = None) -> None:
        #: The trace instruction that could not apply, when one is to blame.
        self.index = index
        super().__init__(message)


# ------------------------------------------------------------------------------- state queries


def block_names(sch: Schedule) -> list[str]:
    """Every block of the function worked on, root included, in program order."""
    return list(sch.state.index(sch.func_name).blocks)


def block(sch: Schedule, name: str) -> S.Block:
    return sch.state.block(sch.func_name, name)


def is_root(sch: Schedule, name: str) -> bool:
    return sch.state.parent(sch.func_name, sch.state.realize(sch.func_name, name)) is None


def producers(sch: Schedule, name: str) -> list[S.Block]:
    """The block's producers in its scope (TVM's GetProducers, not recorded)."""
    node = block(sch, name)
    if is_root(sch, name):
        return []
    return A.scope_of(sch.state, sch.func_name, node).producers(node)


def is_output_block(sch: Schedule, name: str) -> bool:
    """Whether the block writes an output of its scope (TVM's IsOutputBlock)."""
    if is_root(sch, name):
        return False
    node = block(sch, name)
    scope = sch.state.scope_block(sch.func_name, node)
    root_scope = A.is_root_scope(sch.state, sch.func_name, scope)
    return A.is_output_block(sch.state.func(sch.func_name), scope, node, root_scope)


def loop_kinds(sch: Schedule, name: str) -> list[S.ForKind]:
    realize = sch.state.realize(sch.func_name, name)
    return [loop.kind for loop in A.loops_above(sch.state, sch.func_name, realize)]


def traced_block_names(trace: Trace) -> set[str]:
    """attrs[0] of every GetSBlock (or older GetBlock) instruction of the trace."""
    return {str(inst.attrs[0]) for inst in trace.insts
            if kind_for(inst).name == "GetSBlock" and inst.attrs}


# ------------------------------------------------------------------------------- step 2


def rvs_in(value: Any) -> list[RV]:
    """The random variables in an instruction's inputs (nested lists and tuples), in order."""
    if isinstance(value, RV):
        return [value]
    if isinstance(value, (list, tuple)):
        return [rv for item in value for rv in rvs_in(item)]
    return []


def _translate(value: Any, rv_map: dict[RV, RV]) -> Any:
    if isinstance(value, RV):
        return rv_map[value]
    if isinstance(value, (list, tuple)):
        return [_translate(v, rv_map) for v in value]
    return value


def _where(index: int, inst: Instruction) -> str:
    return f"anchor trace instruction {index} ({inst.kind})"


def replay_anchor_trace(sch: Schedule, trace: Trace, *,
                        decision_provider: DecisionProvider | None = None) -> list[str]:
    """Step 2 (module docstring): replay what applies of `trace` on `sch`; the names of the
    blocks left unscheduled, in program order.

    `decision_provider(inst, inputs, attrs, decision)` may replace an instruction's recorded
    decision, as in `Trace.apply_to_schedule`; it is called only for instructions that apply.
    Raises `AnchorTraceError` (its `index` the instruction) when one that should apply cannot,
    leaving `sch` partly transformed."""
    names_before = block_names(sch)
    loops_before = {name: loop_kinds(sch, name) for name in names_before}
    rv_map: dict[RV, RV] = {}
    foreign: set[RV] = set()
    for index, inst in enumerate(trace.insts):
        kind = kind_for(inst)
        if any(rv in foreign or rv not in rv_map for rv in rvs_in(inst.inputs)):
            foreign.update(out for out in inst.outputs if out is not None)
            continue
        inputs = [_translate(v, rv_map) for v in inst.inputs]
        name = kind.name
        if name == "GetSBlock" and str(inst.attrs[0]) not in sch.state.index(sch.func_name).blocks:
            foreign.update(out for out in inst.outputs if out is not None)
            continue
        decision = trace.get_decision(inst)
        try:
            if name == "ReverseComputeInline" and _reverse_inline_or_inline(sch, inputs[0], index, inst):
                continue
            if name == "ComputeInline" and _inline_or_reverse_inline(sch, inputs[0], index, inst):
                continue
            if decision_provider is not None:
                decision = decision_provider(inst, inputs, inst.attrs, decision)
            outputs = kind.apply(sch, inputs, inst.attrs, decision)
        except AnchorTraceError:
            raise
        except ScheduleError as exc:
            raise AnchorTraceError(f"{_where(index, inst)} does not apply to this function: {exc}", index) from exc
        if name == "GetChildBlocks":
            if len(outputs) < len(inst.outputs):
                raise AnchorTraceError(f"{_where(index, inst)}: the function has {len(outputs)} child blocks there, "
                                       f"the trace expects at least {len(inst.outputs)}", index)
            outputs = outputs[:len(inst.outputs)]
        elif len(outputs) != len(inst.outputs):
            raise AnchorTraceError(f"{_where(index, inst)}: the schedule produced {len(outputs)} output(s), the trace "
                                   f"expects {len(inst.outputs)}", index)
        for old, new in zip(inst.outputs, outputs):
            if old is not None:
                rv_map[old] = new
    names_now = set(block_names(sch))
    return [name for name in names_before
            if name in names_now and not is_root(sch, name) and loop_kinds(sch, name) == loops_before[name]]


def _reverse_inline_or_inline(sch: Schedule, block_rv: BlockRV, index: int, inst: Instruction) -> bool:
    """A ReverseComputeInline the block does not allow becomes a ComputeInline (which must
    apply). True when handled here, False to replay the instruction as recorded."""
    if _can(sch, "reverse_compute_inline", block_rv):
        return False
    try:
        sch.compute_inline(block_rv)
    except ScheduleError as exc:
        raise AnchorTraceError(f"{_where(index, inst)}: block {sch.get(block_rv).name_hint!r} can be neither "
                               f"reverse-inlined nor inlined here: {exc}", index) from exc
    return True


def _inline_or_reverse_inline(sch: Schedule, block_rv: BlockRV, index: int, inst: Instruction) -> bool:
    """A ComputeInline the block does not allow is only expected of an output block, which is
    reverse-inlined if it can be and otherwise left alone. True when handled here."""
    if _can(sch, "compute_inline", block_rv):
        return False
    name = sch.get(block_rv).name_hint
    if not is_output_block(sch, name):
        raise AnchorTraceError(f"{_where(index, inst)}: block {name!r} cannot be inlined here and is not an output "
                               "block (a spatial block that cannot be inlined should be the output block)", index)
    try:
        sch.reverse_compute_inline(block_rv)
    except ScheduleError:
        logger.debug("anchor trace: output block %s stays (neither inline applies)", name)
    return True


def _can(sch: Schedule, primitive: str, block_rv: BlockRV) -> bool:
    """Whether an inlining primitive applies (TVM's CanComputeInline / CanReverseComputeInline),
    asked of a copy so that the schedule and its trace stay as they are."""
    probe = sch.copy()
    try:
        getattr(probe, primitive)(block_rv)
    except ScheduleError:
        return False
    return True


# ------------------------------------------------------------------------------- step 3


def check_unscheduled(unscheduled: Sequence[str]) -> None:
    """Step 3: raise `AnchorTraceError` when more than one block was left unscheduled."""
    if len(unscheduled) > 1:
        raise AnchorTraceError(
            f"applying the anchor trace left {len(unscheduled)} blocks unscheduled ({', '.join(unscheduled)}); "
            "all blocks should have been scheduled or only one (fused) spatial block can remain unscheduled "
            "(TVM aborts here): the trace does not fit this function")
