"""`ParallelizeVectorizeUnroll` (TVM's rule, tvm-tuner-facts.md section 2): on the root block
only, record how far the post-processor may parallelize (cores x jobs per core) and vectorize,
and sample an unroll depth for functions with a reduction. The loops themselves are rewritten
later by `RewriteParallelVectorizeUnroll`, once the loop nest is final."""

from __future__ import annotations

from msdb.schedule.rv import BlockRV
from msdb.schedule.schedule import Schedule
from msdb.tuner.space import analysis as SA
from msdb.tuner.space.rules.base import ScheduleRule

__all__ = ["ParallelizeVectorizeUnroll"]


class ParallelizeVectorizeUnroll(ScheduleRule):
    """Annotate the root block with `meta_schedule.parallel`, `.vectorize` and a sampled
    `.unroll_explicit` (or `.unroll_implicit`)."""

    def __init__(self, max_jobs_per_core: int = 16, max_vectorize_extent: int = 64,
                 unroll_max_steps: tuple[int, ...] = (0, 16, 64, 512), unroll_explicit: bool = True) -> None:
        self.max_jobs_per_core = max_jobs_per_core
        self.max_vectorize_extent = max_vectorize_extent
        self.unroll_max_steps = tuple(unroll_max_steps)
        self.unroll_explicit = unroll_explicit

    def apply(self, sch: Schedule, block: BlockRV) -> list[Schedule]:
        if not SA.is_root(sch, block):
            return [sch]
        if self.max_jobs_per_core != -1:
            sch.annotate(block, "meta_schedule.parallel", self._num_cores() * self.max_jobs_per_core)
        if self.max_vectorize_extent != -1:
            sch.annotate(block, "meta_schedule.vectorize", self.max_vectorize_extent)
        if self.unroll_max_steps and not SA.is_spatial_prim_func(sch.state.func(sch.func_name)):
            n = len(self.unroll_max_steps)
            step = sch.sample_categorical(list(self.unroll_max_steps), [1.0 / n] * n)
            key = "meta_schedule.unroll_explicit" if self.unroll_explicit else "meta_schedule.unroll_implicit"
            sch.annotate(block, key, step)
        return [sch]
