"""The getters: blocks and loops around, under and next to a block, as functions over the
schedule state. Blocks are named by their names, loops by their variables (what BlockRVs and
LoopRVs stand for); the answers come from the scope analysis (`msdb.schedule.analysis`)."""

from __future__ import annotations

from msdb.ir import expr as E
from msdb.schedule import analysis as A
from msdb.schedule.state import ScheduleState

__all__ = ["get_loops", "get_child_blocks", "get_producers", "get_consumers"]


def get_loops(state: ScheduleState, func_name: str, block_name: str) -> list[E.Var]:
    """The loops around the block, outermost first, up to its scope block."""
    return [loop.loop_var for loop in A.loops_above(state, func_name, state.realize(func_name, block_name))]


def get_child_blocks(state: ScheduleState, func_name: str, parent: str | E.Var) -> list[str]:
    """The blocks directly under a block or loop, in execution order."""
    node = state.block(func_name, parent) if isinstance(parent, str) else state.loop(func_name, parent)
    return [r.block.name_hint for r in A.child_block_realizes(node.body)]


def get_producers(state: ScheduleState, func_name: str, block_name: str) -> list[str]:
    """The block's producers in its scope, in TVM's order."""
    block = state.block(func_name, block_name)
    return [b.name_hint for b in A.scope_of(state, func_name, block).producers(block)]


def get_consumers(state: ScheduleState, func_name: str, block_name: str) -> list[str]:
    """The block's consumers in its scope, in TVM's order."""
    block = state.block(func_name, block_name)
    return [b.name_hint for b in A.scope_of(state, func_name, block).consumers(block)]
