"""Binding a block's loops to GPU threads (TVM's `BindBlockThreadIdx` and `BindSpatialLoop`,
shared by the AutoBind rule and the RewriteUnboundBlock post-processor; docs/architecture.md,
"Tuner").

A block that no rule tiled for the GPU (an elementwise block, a reduction that
CrossThreadReduction left alone, a cache copy) still has to run on threads: its leading
spatial loops, up to the first loop that is not serial or holds more than one statement, are
fused and split into (blockIdx.x, threadIdx.x), with the threads per block chosen by
`get_factor`. A block already under threadIdx only gets its outer loops bound to blockIdx.x.
Every step is a traced Schedule primitive, in TVM's order, so TVM replays the trace.
"""

from __future__ import annotations

from typing import Callable, Sequence

from msdb.errors import ScheduleError
from msdb.ir import expr as E
from msdb.ir import stmt as S
from msdb.schedule import analysis as A
from msdb.schedule.rv import BlockRV, ExprRV, LoopRV
from msdb.schedule.schedule import Schedule
from msdb.tuner.space import analysis as SA

__all__ = ["FactorFn", "factor_sampler", "bind_spatial_loop", "bind_block_threads", "thread_tag_of"]

#: Threads per block for a loop of at most the given extent: a constant or a sampled ExprRV.
FactorFn = Callable[[int], "int | ExprRV"]

#: Stands for a loop whose extent is not a constant (TVM: INT64_MAX).
_UNKNOWN_EXTENT = 2 ** 63 - 1


def thread_tag_of(loop: S.For) -> str:
    """The thread axis a loop is bound to ("" when it is not bound)."""
    return loop.thread_binding.thread_tag if loop.kind == S.ForKind.THREAD_BINDING and loop.thread_binding else ""


def factor_sampler(sch: Schedule, thread_extents: Sequence[int]) -> FactorFn:
    """TVM's MakeFactorSampler: the candidates up to the loop's extent, drawn uniformly by a
    traced SampleCategorical; one candidate is used as is, none gives the extent itself."""

    def get_factor(max_extent: int) -> int | ExprRV:
        extents = [e for e in thread_extents if e <= max_extent]
        if not extents:
            return max_extent
        if len(extents) == 1:
            return extents[0]
        return sch.sample_categorical(extents, [1.0 / len(extents)] * len(extents))

    return get_factor


def bind_spatial_loop(sch: Schedule, loop: LoopRV, max_threadblocks: int, max_threads_per_block: int,
                      get_factor: FactorFn) -> list[LoopRV]:
    """Split `loop` into blockIdx.x x threadIdx.x (threads from `get_factor`), or, when it is
    longer than the grid can cover, into (serial, blockIdx.x, threadIdx.x) with the serial part
    moved innermost."""
    extent = E.const_int(sch.get(loop).extent)
    extent = _UNKNOWN_EXTENT if extent is None else extent
    if extent <= max_threadblocks * max_threads_per_block:
        factor = get_factor(min(extent, max_threads_per_block))
        outer, inner = sch.split(loop, [None, factor])
        sch.bind(outer, "blockIdx.x")
        sch.bind(inner, "threadIdx.x")
        return [outer, inner]
    serial, blocks, threads = sch.split(loop, [None, max_threadblocks, max_threads_per_block])
    sch.reorder(blocks, threads, serial)
    sch.bind(blocks, "blockIdx.x")
    sch.bind(threads, "threadIdx.x")
    return [blocks, threads, serial]


def _is_single_stmt(body: S.Stmt) -> bool:
    return not isinstance(body, S.SeqStmt) or len(body.seq) == 1


def bind_block_threads(sch: Schedule, block: BlockRV, max_threadblocks: int, max_threads_per_block: int,
                       get_factor: FactorFn) -> None:
    """TVM's BindBlockThreadIdx: give `block` a blockIdx.x and a threadIdx.x loop unless it has
    both, is the root, or was tiled by MultiLevelTiling (which binds its own)."""
    if SA.is_root(sch, block):
        return
    node = SA.block_of(sch, block)
    if SA.is_tiled(node):
        return
    loops = SA.loops_of(sch, node)
    n = len(loops)
    i_block_idx = i_thread_idx = i_multi_child = i_spatial_loop = -1
    for i, loop in enumerate(loops):
        tag = thread_tag_of(loop)
        if tag.startswith("blockIdx.") and i_block_idx == -1:
            i_block_idx = i
        if tag.startswith("threadIdx.") and i_thread_idx == -1:
            i_thread_idx = i
        if loop.kind != S.ForKind.SERIAL and i_multi_child == -1:
            i_multi_child = i
        if not _is_single_stmt(loop.body) and i_multi_child == -1:
            i_multi_child = i + 1
        if A.loop_iter_type(loop) == S.IterType.DATA_PAR and i_spatial_loop == i - 1:
            i_spatial_loop += 1
    if i_multi_child == -1:
        i_multi_child = n
    if i_block_idx != -1 and i_thread_idx != -1:
        return
    # both refusals come before any traced primitive, so a refused block leaves the trace as it was
    if i_block_idx != -1:
        raise ScheduleError(f"binding block {node.name_hint!r} to threads: it is under blockIdx but not threadIdx, "
                            "which TVM's BindBlockThreadIdx does not support")
    if i_spatial_loop == -1:
        # TVM adds a unit loop here (AddUnitLoop), a primitive msdb's Schedule does not have
        raise ScheduleError(f"binding block {node.name_hint!r} to threads: its outermost loop is not spatial, so "
                            "TVM would add a unit loop (AddUnitLoop), which msdb's Schedule does not have")
    loop_rvs = sch.get_loops(block)
    if i_thread_idx != -1:
        num_fuse = min(i_multi_child, i_thread_idx, i_spatial_loop + 1)
        loop_rvs = sch.get_loops(block)
        fused = sch.fuse(*loop_rvs[:num_fuse])
        sch.bind(fused, "blockIdx.x")
        return
    num_fuse = min(i_multi_child, i_spatial_loop + 1)
    fused = sch.fuse(*loop_rvs[:num_fuse])
    bind_spatial_loop(sch, fused, max_threadblocks, max_threads_per_block, get_factor)
