"""`AddRFactor` (TVM's rule, tvm-tuner-facts.md section 2): a reduction with too little
spatial parallelism (a sum over a long axis) gets variants that rfactor the fused, split
reduction loop, so the partial sums become a parallel, vectorizable block."""

from __future__ import annotations

from msdb.errors import ScheduleError
from msdb.ir import stmt as S
from msdb.schedule import analysis as A
from msdb.schedule.rv import BlockRV, LoopRV
from msdb.schedule.schedule import Schedule
from msdb.tuner.space import analysis as SA
from msdb.tuner.space.rules.base import ScheduleRule

__all__ = ["AddRFactor"]


class AddRFactor(ScheduleRule):
    """Variants [rfactor on the outer split loop, rfactor on the inner one (those that
    succeed), the block unchanged]."""

    def __init__(self, max_jobs_per_core: int = 16, max_innermost_factor: int = 64) -> None:
        self.max_jobs_per_core = max_jobs_per_core
        self.max_innermost_factor = max_innermost_factor

    def apply(self, sch: Schedule, block: BlockRV) -> list[Schedule]:
        if SA.is_root(sch, block):
            return [sch]
        max_parallel = self._num_cores() * self.max_jobs_per_core if self.max_jobs_per_core != -1 else -1
        if not SA.needs_rfactor(sch, SA.block_of(sch, block), max_parallel):
            return [sch]
        original = sch.copy()
        original.seed(sch.fork_seed())
        fused, num_spatial = _reorder_and_fuse_reduction_loops(sch, block)
        factors = sch.sample_perfect_tile(fused, n=2, max_innermost_factor=self.max_innermost_factor)
        results: list[Schedule] = []
        for loop in sch.split(fused, list(factors)):
            variant = sch.copy()
            variant.seed(sch.fork_seed())
            try:
                rf_block = variant.rfactor(loop, num_spatial)
                if len(variant.get_loops(rf_block)) <= num_spatial:
                    continue
                variant.annotate(block, SA.RANDOM_COMPUTE_PRODUCER, 1)
            except ScheduleError:
                continue
            results.append(variant)
        results.append(original)
        return results


def _reorder_and_fuse_reduction_loops(sch: Schedule, block: BlockRV) -> tuple[LoopRV, int]:
    """Spatial loops first, then the reduction loops fused into one (TVM's
    ReorderAndFuseReductionLoops): (the fused reduction loop, the number of spatial loops)."""
    loops = sch.get_loops(block)
    kinds = A.loop_iter_types([sch.get(loop) for loop in loops])
    spatial = [loop for loop, kind in zip(loops, kinds) if kind == S.IterType.DATA_PAR]
    reduction = [loop for loop, kind in zip(loops, kinds) if kind == S.IterType.COMM_REDUCE]
    order = spatial + reduction
    if any(a is not b for a, b in zip(order, loops)):
        sch.reorder(*order)
    fused = sch.fuse(*reduction) if len(reduction) > 1 else reduction[0]
    return fused, len(spatial)
