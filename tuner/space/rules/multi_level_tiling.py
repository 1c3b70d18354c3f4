"""`MultiLevelTiling` (TVM's rule, tvm-tuner-facts.md section 2): the CPU's main design space
for matmul- and conv-like blocks. Each spatial loop is split in four by a sampled perfect tile
and each reduction loop in two, reordered as "SSRSRS" (S0 S1 R0 S2 R1 S3: outer spatial tiles
for parallelism, a register-sized inner tile for vectorization), and a write cache is tried at
the end of the first and of the second spatial tile level ("may" reuse: three variants).

The instructions are TVM's, in TVM's order, so that TVM replays the traces msdb finds."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

from msdb.ir import stmt as S
from msdb.schedule.rv import BlockRV, ExprRV, LoopRV
from msdb.schedule.schedule import Schedule
from msdb.tuner.space import analysis as SA
from msdb.tuner.space.rules.base import ScheduleRule

__all__ = ["MultiLevelTiling", "ReuseConfig"]

WRITE_CACHE_LEVEL = "s_tir.meta_schedule.write_cache_level"


@dataclass(frozen=True)
class ReuseConfig:
    """Where a cache may go: `req` "no", "may" or "must"; `levels` the tile levels (1-based)
    after whose last loop the cache is placed; `scope` its storage scope."""

    req: str = "no"
    levels: tuple[int, ...] = ()
    scope: str = "global"


@dataclass
class _State:
    """One design space in the making (TVM's `State`): the schedule, the block, its tile levels
    (loops, outermost first), the sampled factors of each level (one per tiled loop), the
    loops left out of the tiling (outer spatial loops, TVM's `tile_inner_most_space_loop_num`)
    and the caches added so far (by read index; write index 0)."""

    sch: Schedule
    block: BlockRV
    tiles: list[list[LoopRV]] = field(default_factory=list)
    factors: list[list[ExprRV]] = field(default_factory=list)
    skipped: list[LoopRV] = field(default_factory=list)
    read_reuse: dict[int, BlockRV] = field(default_factory=dict)
    write_reuse: dict[int, BlockRV] = field(default_factory=dict)

    def copy(self) -> _State:
        twin = copy.copy(self)
        twin.sch = self.sch.copy()
        twin.tiles = [list(t) for t in self.tiles]
        twin.factors = [list(f) for f in self.factors]
        twin.skipped = list(self.skipped)
        twin.read_reuse = dict(self.read_reuse)
        twin.write_reuse = dict(self.write_reuse)
        return twin


class MultiLevelTiling(ScheduleRule):
    """Tile a block that needs multi-level tiling by `structure` ("S" spatial, "R" reduction
    levels) and add the write cache variants of `reuse_write`."""

    def __init__(self, structure: str = "SSRSRS", max_innermost_factor: int = 64,
                 reuse_write: ReuseConfig = ReuseConfig("may", (1, 2), "global")) -> None:
        if set(structure) - {"S", "R"} or "S" not in structure:
            raise ValueError(f"MultiLevelTiling: structure {structure!r} must be letters S and R with at least one S")
        self.structure = structure
        self.max_innermost_factor = max_innermost_factor
        self.reuse_write = reuse_write
        self.s_indices = [i for i, c in enumerate(structure) if c == "S"]
        self.r_indices = [i for i, c in enumerate(structure) if c == "R"]

    def apply(self, sch: Schedule, block: BlockRV) -> list[Schedule]:
        if SA.is_root(sch, block) or not SA.needs_multi_level_tiling(sch, SA.block_of(sch, block)):
            return [sch]
        sch.annotate(block, SA.TILING_STRUCTURE, self.structure)
        states = [_State(sch, block)]
        states = [out for state in states for out in self._tile_loop_nest(state)]
        states = [out for state in states for out in self._add_write_reuse(state)]
        return [state.sch for state in states]

    def _tile_loop_nest(self, state: _State, inner_spatial: int = -1) -> list[_State]:
        """TVM's TileLoopNest: split each loop by a sampled perfect tile into its levels and
        reorder the levels; with `inner_spatial` >= 0 only the innermost that many spatial
        loops are tiled and the outer ones are left out (`state.skipped`)."""
        sch = state.sch
        loops = sch.get_loops(state.block)
        node = SA.block_of(sch, state.block)
        tiles: list[list[LoopRV]] = [[] for _ in self.structure]
        factors_of: list[list[ExprRV]] = [[] for _ in self.structure]
        n_spatial = sum(1 for iv in node.iter_vars if iv.iter_type == S.IterType.DATA_PAR)
        to_skip = n_spatial - inner_spatial if inner_spatial >= 0 else 0
        skipped: list[LoopRV] = []
        for loop, iv in zip(loops, node.iter_vars):
            if iv.iter_type == S.IterType.DATA_PAR and to_skip > 0:
                skipped.append(loop)
                to_skip -= 1
                continue
            if iv.iter_type == S.IterType.DATA_PAR:
                indices = self.s_indices
            elif iv.iter_type == S.IterType.COMM_REDUCE:
                indices = self.r_indices
            else:
                continue
            if len(indices) == 1:
                tiles[indices[0]].append(loop)
                continue
            factors = sch.sample_perfect_tile(loop, n=len(indices), max_innermost_factor=self.max_innermost_factor)
            for index, piece, factor in zip(indices, sch.split(loop, list(factors)), factors):
                tiles[index].append(piece)
                factors_of[index].append(factor)
        sch.reorder(*[loop for tile in tiles for loop in tile])
        state.tiles, state.factors, state.skipped = tiles, factors_of, skipped
        return [state]

    def _add_write_reuse(self, state: _State) -> list[_State]:
        config = self.reuse_write
        req, levels = config.req, config.levels
        forced = SA.block_of(state.sch, state.block).annotations.get(WRITE_CACHE_LEVEL)
        if forced is not None:
            req, levels = "must", tuple(int(v) for v in forced)
        if req == "no":
            return [state]
        results: list[_State] = []
        if req == "may":
            consumers = state.sch.get_consumers(state.block)
            if len(consumers) == 1 and SA.is_write_cache(SA.block_of(state.sch, consumers[0])):
                for level in levels:
                    variant = state.copy()
                    variant.sch.reverse_compute_at(consumers[0], variant.tiles[level - 1][-1], preserve_unit_loops=True)
                    results.append(variant)
                state.write_reuse[0] = consumers[0]
                results.append(state)
                return results
            results.append(state.copy())
        cache = state.sch.cache_write(state.block, 0, config.scope)
        state.write_reuse[0] = cache
        for level in levels:
            variant = state.copy()
            variant.sch.reverse_compute_at(cache, variant.tiles[level - 1][-1], preserve_unit_loops=True)
            results.append(variant)
        return results
