"""`RandomComputeLocation` (TVM's rule, tvm-tuner-facts.md section 2): a producer that was
neither inlined nor tiled (a padding block, an rfactor block) is computed at a sampled loop of
its consumer, so the search decides how much of it stays in cache."""

from __future__ import annotations

from msdb.schedule import analysis as A
from msdb.schedule.rv import BlockRV
from msdb.schedule.schedule import Schedule
from msdb.tuner.space import analysis as SA
from msdb.tuner.space.rules.base import ScheduleRule

__all__ = ["RandomComputeLocation"]


class RandomComputeLocation(ScheduleRule):
    """SampleComputeLocation + ComputeAt for a top-level, untiled block with consumers (and
    for the rfactor producer of a block annotated `meta_schedule.random_compute_producer`)."""

    def apply(self, sch: Schedule, block: BlockRV) -> list[Schedule]:
        if not self._applies(sch, block):
            return [sch]
        producers: list[BlockRV] | None = None
        if SA.block_of(sch, block).annotations.get(SA.RANDOM_COMPUTE_PRODUCER):
            producers = sch.get_producers(block)
            sch.unannotate(block, SA.RANDOM_COMPUTE_PRODUCER)
        _compute_at_sampled(sch, block)
        if producers is not None and len(producers) == 1:
            _compute_at_sampled(sch, producers[0])
        return [sch]

    @staticmethod
    def _applies(sch: Schedule, block: BlockRV) -> bool:
        if SA.is_root(sch, block):
            return False
        node = SA.block_of(sch, block)
        state, func = sch.state, sch.func_name
        scope_block = state.scope_block(func, node)
        if not A.is_root_scope(state, func, scope_block):
            return False
        loops = SA.loops_of(sch, node)
        if not loops or len(A.child_block_realizes(loops[0].body)) > 1:
            return False
        if SA.is_tiled(node):
            return False
        return bool(SA.consumers(sch, node))


def _compute_at_sampled(sch: Schedule, block: BlockRV) -> None:
    location = sch.sample_compute_location(block)
    sch.compute_at(block, location, preserve_unit_loops=True)
