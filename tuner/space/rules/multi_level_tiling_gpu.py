"""`MultiLevelTiling` for GPUs (TVM's rule with `tile_binds`, `reuse_read` and
`vector_load_lens`, as `ScheduleRule::DefaultCUDA` configures it; docs/architecture.md,
"Tuner"): the main design space of matmul- and conv-like blocks on a GPU.

Structure "SSSRRSRS": each spatial loop is split in five and each reduction loop in three; the
first three spatial tile levels are fused and bound to blockIdx.x, vthread.x and threadIdx.x;
the accumulator lives in registers (a "local" write cache at the threadIdx level); every input
is staged through shared memory at the outer reduction tile, its copy loops fused into one that
RewriteCooperativeFetch later spreads over the block's threads with a sampled vector width; on
sm_80 and newer two more variants pipeline the outer reduction loop (cp.async stages 4 and 5).
The block is annotated with the thread-count bounds VerifyGPUCode checks.

The instructions are TVM's, in TVM's order, so that TVM replays the traces msdb finds.
"""

from __future__ import annotations

from msdb.ir import expr as E
from msdb.ir import stmt as S
from msdb.schedule.rv import BlockRV, LoopRV
from msdb.schedule.schedule import Schedule
from msdb.tuner.space import analysis as SA
from msdb.tuner.space.gpu_target import gpu_target_of
from msdb.tuner.space.rules.multi_level_tiling import MultiLevelTiling, ReuseConfig, _State

__all__ = ["MultiLevelTilingGPU", "COOPERATIVE_FETCH", "THREAD_EXTENT_LOW", "THREAD_EXTENT_HIGH"]

COOPERATIVE_FETCH = "meta_schedule.cooperative_fetch"
THREAD_EXTENT_LOW = "meta_schedule.thread_extent_low_inclusive"
THREAD_EXTENT_HIGH = "meta_schedule.thread_extent_high_inclusive"
SOFTWARE_PIPELINE_STAGE = "software_pipeline_stage"
SOFTWARE_PIPELINE_ORDER = "software_pipeline_order"
SOFTWARE_PIPELINE_ASYNC_STAGES = "software_pipeline_async_stages"
#: The cp.async pipeline depths TVM tries on sm_80 and newer.
ASYNC_STAGES = (4, 5)


class MultiLevelTilingGPU(MultiLevelTiling):
    """Tile, bind the outer tile levels to `tile_binds`, add the write cache ("must": one
    variant per level), the shared-memory read caches with cooperative fetching, and the
    software-pipeline variants."""

    def __init__(self, structure: str = "SSSRRSRS", tile_binds: tuple[str, ...] = ("blockIdx.x", "vthread.x",
                                                                                      "threadIdx.x"),
                 max_innermost_factor: int = 64, vector_load_lens: tuple[int, ...] = (1, 2, 3, 4, 8, 16),
                 reuse_read: ReuseConfig = ReuseConfig("must", (4,), "shared"),
                 reuse_write: ReuseConfig = ReuseConfig("must", (3,), "local")) -> None:
        super().__init__(structure, max_innermost_factor=max_innermost_factor, reuse_write=reuse_write)
        if reuse_read.req == "may":
            raise ValueError("MultiLevelTilingGPU: reuse_read req 'may' is not supported (TVM's rule asks 'no' or "
                             "'must')")
        self.tile_binds = tuple(tile_binds)
        self.vector_load_lens = tuple(vector_load_lens)
        self.reuse_read = reuse_read

    def apply(self, sch: Schedule, block: BlockRV) -> list[Schedule]:
        if SA.is_root(sch, block) or not SA.needs_multi_level_tiling(sch, SA.block_of(sch, block)):
            return [sch]
        sch.annotate(block, SA.TILING_STRUCTURE, self.structure)
        states = [_State(sch, block)]
        for sub_rule in (self._tile_and_bind, self._add_write_reuse, self._add_read_reuse, self._add_async_pipeline):
            states = [out for state in states for out in sub_rule(state)]
        return [state.sch for state in states]

    def _tile_and_bind(self, state: _State, inner_spatial: int = -1) -> list[_State]:
        """TVM's TileLoopNest with thread binds: tile as on the CPU, then fuse each of the first
        len(tile_binds) tile levels into one loop bound to its thread axis (the spatial loops
        left out of the tiling, see `inner_spatial`, join the first), and annotate the block
        with the thread counts the spatial size of its tiled loops allows."""
        sch = state.sch
        node = SA.block_of(sch, state.block)
        spatial = [loop for loop, iv in zip(SA.loops_of(sch, node), node.iter_vars)
                   if iv.iter_type == S.IterType.DATA_PAR]
        if inner_spatial >= 0:
            spatial = spatial[len(spatial) - inner_spatial:]
        spatial_product: int | None = 1
        for loop in spatial:
            extent = E.const_int(loop.extent)
            spatial_product = spatial_product * extent if spatial_product is not None and extent is not None else None
        state = self._tile_loop_nest(state, inner_spatial)[0]
        n_binds = min(len(self.tile_binds), len(state.tiles))
        if state.skipped and n_binds:
            state.tiles[0] = state.skipped + state.tiles[0]
        for i in range(n_binds):
            fused = sch.fuse(*state.tiles[i])
            sch.bind(fused, self.tile_binds[i])
            state.tiles[i] = [fused]
        gpu = gpu_target_of(self.context)
        # a small block may run fewer threads than a warp; an unknown size counts as small (TVM: -1)
        low = gpu.thread_warp_size if spatial_product is not None and spatial_product > 2 * gpu.thread_warp_size else 1
        sch.annotate(state.block, THREAD_EXTENT_LOW, low)
        sch.annotate(state.block, THREAD_EXTENT_HIGH, gpu.max_threads_per_block)
        return [state]

    def _add_read_reuse(self, state: _State) -> list[_State]:
        """TVM's AddReadReuse ("must"): for each level, every input buffer (not the one the
        block writes) is cached in `scope` and computed at the end of that tile level, its
        innermost (buffer-rank many) loops fused and annotated for cooperative fetching."""
        config = self.reuse_read
        if config.req == "no":
            return [state]
        results = []
        for level in config.levels:
            variant = state.copy()
            sch = variant.sch
            loop = state.tiles[level - 1][-1]
            node = SA.block_of(sch, variant.block)
            written = node.writes[0].buffer
            ndims = [len(read.buffer.shape) if read.buffer is not written else -1 for read in node.reads]
            for index, ndim in enumerate(ndims):
                if ndim == -1:
                    continue
                cache = sch.cache_read(variant.block, index, config.scope, [variant.block])
                sch.compute_at(cache, loop, preserve_unit_loops=True)
                loops = sch.get_loops(cache)
                sch.fuse(*loops[len(loops) - ndim:])
                self._annotate_cooperative_fetch(sch, cache)
                variant.read_reuse[index] = cache
            results.append(variant)
        return results

    def _annotate_cooperative_fetch(self, sch: Schedule, block: BlockRV) -> None:
        """Sample the vector width of the copy among the lengths its element type can load in
        one instruction (at most 16 bytes), and annotate the copy block with it."""
        dtype = SA.block_of(sch, block).writes[0].buffer.dtype
        lens = list(self.vector_load_lens)
        if dtype == "float32":
            lens = [n for n in lens if n <= 4]
        elif dtype == "float16":
            lens = [n for n in lens if (n == 1 or n % 2 == 0) and n <= 8]
        elif dtype == "int8":
            lens = [n for n in lens if n <= 16]
        if not lens:
            return
        width = sch.sample_categorical(lens, [1.0 / len(lens)] * len(lens))
        sch.annotate(block, COOPERATIVE_FETCH, width)

    def _add_async_pipeline(self, state: _State) -> list[_State]:
        """TVM's AddAsyncPipeline: on sm_80 and newer, when the outer reduction tile's last loop
        holds exactly the two shared-memory copies and the compute (three loops), add variants
        that fuse that tile and pipeline it with 4 and 5 stages (copies in stage 0, compute in
        stage - 2, the copies asynchronous)."""
        if not self.r_indices or not gpu_target_of(self.context).async_copy:
            return [state]
        loop: S.For = state.sch.get(state.tiles[self.r_indices[0]][-1])
        body = loop.body
        if not isinstance(body, S.SeqStmt) or len(body.seq) != 3 or \
                not all(isinstance(stmt, S.For) for stmt in body.seq):
            return [state]
        results = [state]
        for stage in ASYNC_STAGES:
            variant = state.copy()
            fused: LoopRV = variant.sch.fuse(*variant.tiles[self.r_indices[0]])
            variant.sch.annotate(fused, SOFTWARE_PIPELINE_STAGE, [0, 0, stage - 2])
            variant.sch.annotate(fused, SOFTWARE_PIPELINE_ORDER, [0, 1, 2])
            variant.sch.annotate(fused, SOFTWARE_PIPELINE_ASYNC_STAGES, [0])
            results.append(variant)
        return results
