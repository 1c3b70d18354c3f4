"""`InlineConstantScalars` (TVM's rule, in `ScheduleRule::DefaultCUDA`; docs/architecture.md,
"Tuner"): a block that only writes a constant into a zero-dimensional buffer (what a frontend
makes of a scalar constant) is inlined into its consumers, unless it is an output; on a GPU
such a block would otherwise need a kernel of its own."""

from __future__ import annotations

from msdb.schedule import analysis as A
from msdb.schedule.rv import BlockRV
from msdb.schedule.schedule import Schedule
from msdb.tuner.space import analysis as SA
from msdb.tuner.space.rules.base import ScheduleRule

__all__ = ["InlineConstantScalars"]


class InlineConstantScalars(ScheduleRule):
    """Compute-inline a block with no reads and one zero-dimensional write that is not an
    output of its scope."""

    def apply(self, sch: Schedule, block: BlockRV) -> list[Schedule]:
        if SA.is_root(sch, block):
            return [sch]
        node = SA.block_of(sch, block)
        if node.reads or len(node.writes) != 1 or len(node.writes[0].buffer.shape) != 0:
            return [sch]
        state, func_name = sch.state, sch.func_name
        scope_block = state.scope_block(func_name, node)
        if not A.is_output_block(state.func(func_name), scope_block, node,
                                 A.is_root_scope(state, func_name, scope_block)):
            sch.compute_inline(block)
        return [sch]
