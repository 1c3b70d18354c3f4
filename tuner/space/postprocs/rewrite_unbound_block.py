"""`RewriteUnboundBlock` (TVM's post-processor, in `Postproc::DefaultCUDA`;
docs/architecture.md, "Tuner"): a block that is not under both a blockIdx and a threadIdx loop
once every rule and mutation has run (a cache copy a mutation moved, a block a user's rule left
alone) gets them, as AutoBind would bind it but with the most threads the loop allows
(`msdb.tuner.space.thread_bind`), so every candidate is a launchable kernel."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from msdb.errors import ScheduleError
from msdb.ir import stmt as S
from msdb.tuner.space.gpu_target import gpu_target_of
from msdb.tuner.space.postprocs.base import Postproc
from msdb.tuner.space.thread_bind import bind_block_threads, thread_tag_of

if TYPE_CHECKING:
    from msdb.ir.function import IRModule
    from msdb.schedule.schedule import Schedule

__all__ = ["RewriteUnboundBlock", "unbound_blocks"]

logger = logging.getLogger(__name__)


def unbound_blocks(mod: IRModule) -> list[tuple[str, str]]:
    """(function, block) of every block not nested in both a blockIdx and a threadIdx loop, in
    program order; the blocks inside such a block are its own business (TVM's
    UnboundBlockFinder)."""
    found: list[tuple[str, str]] = []
    for func_name, func in mod.functions.items():
        root = func.body.block if isinstance(func.body, S.BlockRealize) else None
        if root is None:
            continue

        def visit(stmt: S.Stmt, block_idx: int, thread_idx: int) -> None:
            if isinstance(stmt, S.For):
                tag = thread_tag_of(stmt)
                block_idx += tag.startswith("blockIdx.")
                thread_idx += tag.startswith("threadIdx.")
                if block_idx == 0 or thread_idx == 0:
                    visit(stmt.body, block_idx, thread_idx)
            elif isinstance(stmt, S.BlockRealize):
                found.append((func_name, stmt.block.name_hint))
            elif isinstance(stmt, S.SeqStmt):
                for child in stmt.seq:
                    visit(child, block_idx, thread_idx)
            elif isinstance(stmt, S.IfThenElse):
                visit(stmt.then_case, block_idx, thread_idx)
                if stmt.else_case is not None:
                    visit(stmt.else_case, block_idx, thread_idx)

        visit(root.body, 0, 0)
    return found


class RewriteUnboundBlock(Postproc):
    """Bind every unbound block to (blockIdx.x, threadIdx.x), at most `max_threadblocks`
    blocks (TVM's `RewriteUnboundBlock`)."""

    def __init__(self, max_threadblocks: int = 256) -> None:
        self.max_threadblocks = max_threadblocks

    def apply(self, sch: Schedule) -> bool:
        threads = gpu_target_of(self.context).max_threads_per_block
        try:
            for func_name, block_name in unbound_blocks(sch.mod):
                block = sch.get_block(block_name, func_name)
                bind_block_threads(sch, block, self.max_threadblocks, threads,
                                   lambda max_extent: min(threads, max_extent))
        except ScheduleError as exc:
            logger.debug("binding an unbound block failed: %s", exc)
            return False
        return True
