"""`AutoInline` (TVM's rule of the same name, tvm-tuner-facts.md section 2): inline a spatial
block into its consumers when that loses nothing (an elementwise producer whose reads map onto
its write injectively and in order), so that the tiled reduction reads the original inputs
directly. TVM's DefaultLLVM settings: into consumers only, constant tensors always, no
if-then-else, no `exp` (outside all-spatial functions)."""

from __future__ import annotations

from msdb.errors import ScheduleError
from msdb.ir import stmt as S
from msdb.schedule import analysis as A
from msdb.schedule.rv import BlockRV
from msdb.schedule.schedule import Schedule
from msdb.tuner.space import analysis as SA
from msdb.tuner.space.rules.base import ScheduleRule

__all__ = ["AutoInline"]

INLINE_RULE = "meta_schedule.inline_rule"


class AutoInline(ScheduleRule):
    """Compute-inline (into consumers) or reverse-compute-inline (into the single producer)
    a block when TVM's conditions hold."""

    def __init__(self, into_producer: bool = False, into_consumer: bool = True, inline_const_tensor: bool = True,
                 disallow_if_then_else: bool = True, require_injective: bool = True, require_ordered: bool = True,
                 disallow_op: tuple[str, ...] = ("exp",)) -> None:
        self.into_producer = into_producer
        self.into_consumer = into_consumer
        self.inline_const_tensor = inline_const_tensor
        self.disallow_if_then_else = disallow_if_then_else
        self.require_injective = require_injective
        self.require_ordered = require_ordered
        self.disallow_op = frozenset(disallow_op)

    def apply(self, sch: Schedule, block: BlockRV) -> list[Schedule]:
        if SA.is_root(sch, block):
            return [sch]
        node = SA.block_of(sch, block)
        if len(node.writes) != 1:
            return [sch]
        if self.inline_const_tensor and not node.reads and SA.consumers(sch, node) and _try(sch.compute_inline, block):
            return [sch]
        if not self._allowed(sch, node):
            return [sch]
        if self.into_consumer and SA.consumers(sch, node) and _try(sch.compute_inline, block):
            return [sch]
        if self.into_producer:
            producers = SA.producers(sch, node)
            if len(producers) == 1 and _complete(sch, producers[0]):
                _try(sch.reverse_compute_inline, block)
        return [sch]

    def _allowed(self, sch: Schedule, node: S.Block) -> bool:
        """Conditions 3 to 6 of TVM's CheckInline (the first three waived in an all-spatial
        function)."""
        if not SA.is_spatial_prim_func(sch.state.func(sch.func_name)):
            if self.disallow_op and SA.uses_ops(node, self.disallow_op):
                return False
            if self.disallow_if_then_else and SA.has_if_then_else(node):
                return False
            if self.require_injective or self.require_ordered:
                for read in node.reads:
                    pattern = SA.read_write_pattern(read, node.writes[0])
                    if (self.require_injective and not pattern.injective) or \
                            (self.require_ordered and not pattern.ordered):
                        return False
        return node.annotations.get(INLINE_RULE) != "disable"


def _try(primitive: object, block: BlockRV) -> bool:
    """Apply an inlining primitive if it is legal (TVM's CanComputeInline check and the
    primitive in one: a failing primitive leaves the schedule and its trace unchanged)."""
    try:
        primitive(block)  # type: ignore[operator]
    except ScheduleError:
        return False
    return True


def _complete(sch: Schedule, node: S.Block) -> bool:
    return A.scope_of(sch.state, sch.func_name, node).is_complete_block(node)
