"""`CrossThreadReduction` (TVM's rule, in `ScheduleRule::DefaultCUDA`; docs/architecture.md,
"Tuner"): a reduction with too little spatial parallelism for a GPU (a softmax's row max, a
sum over a long axis) gets a variant in which the threads of a block reduce together: the
fused reduction loop is split by a sampled thread count and its inner part bound to
threadIdx.x (lowered to a warp/shared-memory all-reduce). When the reduction can be computed
inside its consumer's loop nest, it is moved there first, its result kept in shared memory,
and the consumer's innermost loop is bound to the same threads.

Each application returns [the variant, the block unchanged], as TVM does.
"""

from __future__ import annotations

from msdb.errors import ScheduleError
from msdb.ir import stmt as S
from msdb.schedule import analysis as A
from msdb.schedule.rv import BlockRV, ExprRV, LoopRV
from msdb.schedule.schedule import Schedule
from msdb.schedule.trace import Trace
from msdb.tuner.space import analysis as SA
from msdb.tuner.space.gpu_target import gpu_target_of
from msdb.tuner.space.rules.add_rfactor import _reorder_and_fuse_reduction_loops
from msdb.tuner.space.rules.base import ScheduleRule
from msdb.tuner.space.thread_bind import thread_tag_of

__all__ = ["CrossThreadReduction", "thread_x_extent_in_trace"]


class CrossThreadReduction(ScheduleRule):
    """Bind a reduction's fused reduction loop to threadIdx.x, with a thread count drawn from
    `thread_extents` (or the one its consumer already uses)."""

    def __init__(self, thread_extents: tuple[int, ...] = (4, 8, 16, 32, 64, 128, 256, 512)) -> None:
        if any(e <= 0 for e in thread_extents):
            raise ValueError(f"CrossThreadReduction: thread extents {thread_extents} must be positive")
        self.thread_extents = tuple(thread_extents)

    def apply(self, sch: Schedule, block: BlockRV) -> list[Schedule]:
        if SA.is_root(sch, block):
            return [sch]
        gpu = gpu_target_of(self.context)
        if not SA.needs_rfactor(sch, SA.block_of(sch, block), gpu.max_threads_per_block):
            return [sch]
        variant = sch.copy()
        variant.seed(sch.fork_seed())
        target = _compute_target(variant, block)
        n = len(self.thread_extents)
        thread_extent: ExprRV | int = variant.sample_categorical(list(self.thread_extents), [1.0 / n] * n)
        if target is not None:
            target_loop, target_block, innermost = target
            if not _in_thread_scope(variant, target_block):
                outer, inner = variant.split(innermost, [None, thread_extent])
                variant.bind(inner, "threadIdx.x")
                if innermost is target_loop:
                    target_loop = outer
            else:
                thread_extent = thread_x_extent_in_trace(variant.trace)
            variant.compute_at(block, target_loop, preserve_unit_loops=True)
            variant.set_scope(block, 0, "shared")
        fused, _ = _reorder_and_fuse_reduction_loops(variant, block)
        _, inner = variant.split(fused, [None, thread_extent])
        variant.bind(inner, "threadIdx.x")
        return [variant, sch]


def _in_thread_scope(sch: Schedule, block: BlockRV) -> bool:
    """Some loop around the block is bound to threadIdx (asked through the traced get_loops,
    as TVM does)."""
    return any(thread_tag_of(sch.get(loop)).startswith("threadIdx.") for loop in sch.get_loops(block))


def thread_x_extent_in_trace(trace: Trace) -> ExprRV | int:
    """The split factor that made the loop the trace first binds to threadIdx.x (TVM's
    GetThreadIdxExtentFromTrace), so a reduction computed inside a consumer uses the
    consumer's thread count."""
    splits = [inst for inst in trace.insts if inst.kind == "Split"]
    for inst in trace.insts:
        if inst.kind != "Bind" or inst.attrs[0] != "threadIdx.x":
            continue
        loop = inst.inputs[0]
        for split in splits:
            if loop in split.outputs:
                factor = split.inputs[1 + split.outputs.index(loop)]
                if factor is None:
                    raise ScheduleError("CrossThreadReduction: the threadIdx.x loop's extent was inferred by its split; "
                                        "extracting an inferred extent is not supported (as in TVM)")
                if not isinstance(factor, (ExprRV, int)):
                    raise ScheduleError(f"CrossThreadReduction: unexpected split factor {factor!r}")
                return factor
    raise ScheduleError('CrossThreadReduction: unable to get the extent of "threadIdx.x" from the trace')


def _sref_chain(sch: Schedule, node: S.Block) -> list[S.Stmt]:
    """The node and its enclosing loops and blocks, root first (TVM's sref path)."""
    chain: list[S.Stmt] = [node]
    chain += [a for a in sch.state.ancestors(sch.func_name, node) if isinstance(a, (S.For, S.Block))]
    chain.reverse()
    return chain


def _lowest_common_ancestor(sch: Schedule, nodes: list[S.Block]) -> S.Stmt:
    chains = [_sref_chain(sch, node) for node in nodes]
    lca = chains[0][0]
    for level in zip(*chains):
        if any(stmt is not level[0] for stmt in level):
            break
        lca = level[0]
    return lca


def _compute_target(sch: Schedule, block: BlockRV) -> tuple[LoopRV, BlockRV, LoopRV] | None:
    """TVM's GetComputeTargetLoopAndBlock: where the reduction can go inside its first
    consumer's loop nest — (the loop to compute it at, that consumer, the consumer's innermost
    loop) — or None when it cannot (several writes, no consumer, a consumer MultiLevelTiling
    will tile, consumers in separate nests, or no common spatial loop)."""
    if len(SA.block_of(sch, block).writes) != 1:
        return None
    consumers = sch.get_consumers(block)
    if not consumers or SA.needs_multi_level_tiling(sch, SA.block_of(sch, consumers[0])):
        return None
    lca = _lowest_common_ancestor(sch, [SA.block_of(sch, c) for c in consumers])
    if len(consumers) > 1 and isinstance(lca, S.Block):
        return None
    target_loops = sch.get_loops(consumers[0])
    block_loops = sch.get_loops(block)
    position = _compute_position(sch, block_loops, target_loops, lca)
    if position < 0:
        return None
    return target_loops[position], consumers[0], target_loops[-1]


def _compute_position(sch: Schedule, block_loops: list[LoopRV], target_loops: list[LoopRV], lca: S.Stmt) -> int:
    """The deepest shared position: the block's loops must stay spatial, and not go below the
    consumers' common loop (TVM's GetComputePosition)."""
    for i in range(min(len(block_loops), len(target_loops))):
        if A.loop_iter_type(sch.get(block_loops[i])) != S.IterType.DATA_PAR:
            return i - 1
        if sch.get(target_loops[i]) is lca:
            return i
    return min(len(block_loops), len(target_loops)) - 1
