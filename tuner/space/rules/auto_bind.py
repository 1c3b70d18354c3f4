"""`AutoBind` (TVM's rule, the last of `ScheduleRule::DefaultCUDA`; docs/architecture.md,
"Tuner"): every block that no earlier rule bound to GPU threads gets its leading spatial loops
fused and split into blockIdx.x and a sampled number of threadIdx.x
(`msdb.tuner.space.thread_bind`), so each design space is a kernel the GPU can launch and the
search explores the block size."""

from __future__ import annotations

import logging

from msdb.errors import ScheduleError
from msdb.schedule.rv import BlockRV
from msdb.schedule.schedule import Schedule
from msdb.tuner.space.gpu_target import gpu_target_of
from msdb.tuner.space.rules.base import ScheduleRule
from msdb.tuner.space.thread_bind import bind_block_threads, factor_sampler

__all__ = ["AutoBind"]

logger = logging.getLogger(__name__)


class AutoBind(ScheduleRule):
    """Bind a block's loops to (blockIdx.x, threadIdx.x), the threads per block drawn from
    `thread_extents` (those up to the loop's extent and the target's `max_threads_per_block`),
    at most `max_threadblocks` blocks before a serial loop takes the rest."""

    def __init__(self, max_threadblocks: int = 256, thread_extents: tuple[int, ...] = (32, 64, 128, 256, 512, 1024),
                 max_threads_per_block: int = -1) -> None:
        self.max_threadblocks = max_threadblocks
        self.thread_extents = tuple(thread_extents)
        self.max_threads_per_block = max_threads_per_block

    def apply(self, sch: Schedule, block: BlockRV) -> list[Schedule]:
        threads = self.max_threads_per_block
        if threads == -1:
            threads = gpu_target_of(self.context).max_threads_per_block
        try:
            bind_block_threads(sch, block, self.max_threadblocks, threads, factor_sampler(sch, self.thread_extents))
        except ScheduleError as exc:
            # left unbound: RewriteUnboundBlock tries again and rejects the candidate if it must
            logger.debug("AutoBind leaves a block unbound: %s", exc)
        return [sch]
