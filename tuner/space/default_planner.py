"""The steps of a default schedule on one function (docs/architecture.md, "Default schedules"):
`DefaultPlanner` inlines, tiles the anchor reduction for registers (`register_tile`), places
the epilogue under the tile, vectorizes and parallelizes the rest, and recognizes Winograd convs."""

from __future__ import annotations

import logging
from functools import partial
from typing import Any, Callable, Sequence

from msdb.errors import ScheduleError
from msdb.hashing.anchor import find_anchor_block
from msdb.ir import expr as E
from msdb.ir import stmt as S
from msdb.ir.arith.affine import stride_of
from msdb.ir.function import PrimFunc
from msdb.records.target import Target
from msdb.schedule import analysis as A
from msdb.schedule.rv import BlockRV, LoopRV
from msdb.schedule.sampling import divisors
from msdb.schedule.schedule import Schedule
from msdb.tuner.space import analysis as SA
from msdb.tuner.space.register_tile import (ACCUMULATOR_REGISTERS, RegisterTile, accumulator_registers, choose_tile,
                                           is_full_width, vector_lanes, vector_part)

__all__ = ["DefaultPlanner"]

logger = logging.getLogger(__name__)

#: Bytes of the reused operand (a block of conv weights) that should stay in L1 while a register
#: tile sweeps the rows (half of a 32-48 KiB L1 data cache).
L1_REUSE_BYTES = 16 * 1024

#: An operand larger than this (a Zen 4 core's L2, twice a Zen 3 core's) is taken to stream from
#: memory, not from L2, in `DefaultPlanner._streamed_first`.
L2_STREAM_BYTES = 1024 * 1024

#: Weight rows a matrix-vector product reads a step (`DefaultPlanner.row_stream`).
STREAM_ROWS = 8

#: The largest kernel window (product of the reduction extents after the first) unrolled.
MAX_WINDOW_UNROLL = 16

#: The most output rows a tile with nothing to reuse across its vectors unrolls (depthwise
#: convs: 2 to 7 rows measured alike at 28 x 28 and 56 x 56, 4 best at 112 x 112).
MAX_ROWS = 4

#: The most pixels an NCHW16c depthwise conv's tile takes (one accumulator vector each, the
#: weight vector shared): 7 measured best on AVX-512 at 112, 56, 14 and 7 pixels a row (32 x
#: 112 x 112: 1 pixel 0.184 ms, 7 0.121, 8 0.234, 14 0.126, 16 0.222, 28 0.242); on AVX2 (two vectors a
#: pixel) 7 measured best too (4: 0.231 ms, 6: 0.227, 7: 0.204, 14: 0.219).
MAX_PIXELS = 7


# ------------------------------------------------------------------------------- helpers


def _attempt(what: str, step: Callable[[], Any]) -> Any:
    """Run one schedule step; a refused primitive skips the step (the schedule stays valid)."""
    try:
        return step()
    except ScheduleError as exc:
        logger.debug("default schedule: %s skipped: %s", what, exc)
        return None


def _applied(what: str, step: Callable[[], Any]) -> bool:
    """`_attempt` for primitives that return nothing: whether the step applied."""
    try:
        step()
    except ScheduleError as exc:
        logger.debug("default schedule: %s skipped: %s", what, exc)
        return False
    return True


def _product(values: Sequence[int]) -> int:
    result = 1
    for v in values:
        result *= v
    return result


def _extent(loop: S.For) -> int | None:
    ext = loop.extent
    return ext.value if hasattr(ext, "value") and isinstance(ext.value, int) else None


def _buffer_elements(buffer: Any) -> int:
    """Elements of a buffer of constant shape (1 per dimension that is not constant)."""
    return _product([getattr(dim, "value", 1) for dim in buffer.shape])


def _moving_reads(node: S.Block) -> list[S.BufferRegion]:
    """The reads of a reduction block that move with its reduction (its operands, not the
    output it accumulates into)."""
    out = node.writes[0].buffer
    reduce_vars = [iv.var for iv in node.iter_vars if iv.iter_type == S.IterType.COMM_REDUCE]
    return [r for r in node.reads if r.buffer is not out and any(_uses(r, var) for var in reduce_vars)]


def _read_step(region: S.BufferRegion, var: Any) -> int | None:
    """How many elements the read moves in memory per step of `var` (None: not affine in it, or
    a dimension of unknown size)."""
    step, inner = 0, 1
    for rng, dim in zip(reversed(region.region), reversed(region.buffer.shape)):
        coeff = stride_of(rng.min, var)
        size = getattr(dim, "value", None)
        if coeff is None or not isinstance(size, int):
            return None
        step += coeff * inner
        inner *= size
    return step


def _wider_than(buffer: S.Buffer, width: int) -> bool:
    """Whether the rows of `buffer` (its last dimension) are longer than `width` elements."""
    last = E.const_int(buffer.shape[-1]) if buffer.shape else None
    return last is not None and last > width


def _balanced_parts(vectors: int, cores: int) -> int:
    """How many parallel parts a row of `vectors` vectors is cut into for `cores` cores: a divisor,
    at least `cores`, that leaves the busiest core the smallest share (the parallel loop gives
    each core a contiguous run of ceil(parts / cores) parts), the fewest parts on a tie, each
    part at least two vectors where a divisor allows (a part is a column strip walked down
    every row). ResNet-50's 1000 classes are 125 vectors of 8: 5 parts left one of two cores 3
    of them (60% of the work); 25 parts leave it 13 (52%): 0.53-0.56 -> 0.48-0.50 ms on two
    threads, in the model, same runs."""
    if cores <= 1:
        return 1
    fitting = [d for d in divisors(vectors) if d >= cores]
    wide = [d for d in fitting if vectors // d >= 2] or fitting
    return min(wide, key=lambda d: (-(-d // cores) / d, d), default=vectors)


def _uses(region: S.BufferRegion, var: Any) -> bool:
    return any(A.uses_var(r.min, var) or A.uses_var(r.extent, var) for r in region.region)


# ------------------------------------------------------------------------------- the plan


class DefaultPlanner:
    """The steps of docs/architecture.md, "Default schedules", on one schedule: `run` them, then
    take `sch`."""

    def __init__(self, sch: Schedule, target: Target) -> None:
        self.sch = sch
        self.target = target
        self.cores = int(target.get("num-cores", 1) or 1)
        self.accumulators = accumulator_registers(target)
        self.done: set[str] = set()  # blocks whose loops are final

    # ---- state queries (not recorded)
    def func(self) -> PrimFunc:
        return self.sch.state.func(self.sch.func_name)

    def names(self) -> list[str]:
        return list(self.sch.state.index(self.sch.func_name).blocks)

    def block(self, name: str) -> S.Block:
        return self.sch.state.block(self.sch.func_name, name)

    def is_root(self, name: str) -> bool:
        return self.sch.state.parent(self.sch.func_name, self.sch.state.realize(self.sch.func_name, name)) is None

    def loops(self, name: str) -> list[S.For]:
        realize = self.sch.state.realize(self.sch.func_name, name)
        return A.loops_above(self.sch.state, self.sch.func_name, realize)

    def dtype_bytes(self, name: str) -> int:
        writes = self.block(name).writes
        if not writes:
            return 4
        digits = "".join(c for c in writes[0].buffer.dtype if c.isdigit())
        return max(1, int(digits) // 8) if digits else 4

    def lanes_for(self, name: str) -> int:
        return vector_lanes(self.target, 8 * self.dtype_bytes(name))

    # ---- steps
    def run(self) -> None:
        if self.winograd():
            anchor = None
        else:
            self.inline()
            anchor = find_anchor_block(self.func())
        if anchor is not None:
            before = self.sch.copy()
            try:
                if self.tile_reduction(anchor.name_hint):
                    self.done.add(anchor.name_hint)
            except ScheduleError as exc:  # a shape the tiling does not fit: keep the plain nest
                logger.debug("default schedule: tiling %s skipped: %s", anchor.name_hint, exc)
                self.sch = before
                self.done = {name for name in self.done if name in self.names()}
        for name in self.names():
            if name not in self.done and not self.is_root(name) and name in self.sch.state.index(self.sch.func_name).blocks:
                if not SA.is_spatial(self.block(name)):
                    self.row_reduction(name)  # the other row reductions (a softmax's sum)
                    continue
                self.vectorize_padding(name)
                self.parallelize_elementwise(name)

    def inline(self, keep: Sequence[str] = ()) -> None:
        """Step 1: TVM's default CPU AutoInline on every block but `keep`, producers first."""
        from msdb.tuner.space.rules.defaults import llvm_rules
        from msdb.tuner.space.rules.auto_inline import AutoInline

        rule = next(r for r in llvm_rules() if isinstance(r, AutoInline))
        for name in self.names():
            if name in keep:
                continue
            present = name in self.sch.state.index(self.sch.func_name).blocks
            if present and not self.is_root(name) and SA.is_spatial(self.block(name)):  # the rule only inlines those
                rule.apply(self.sch, self.sch.get_block(name))

    def tile_reduction(self, name: str) -> bool:
        """Step 2 (and 3): the register tiling of a reduction block; False when it does not fit."""
        sch = self.sch
        node = self.block(name)
        loops = self.loops(name)
        if not SA.is_trivial_binding(sch, node) or len(loops) != len(node.iter_vars):
            return False
        extents = [_extent(lp) for lp in loops]
        if any(e is None for e in extents):
            return False
        spatial = [i for i, iv in enumerate(node.iter_vars) if iv.iter_type == S.IterType.DATA_PAR]
        reduce = [i for i, iv in enumerate(node.iter_vars) if iv.iter_type == S.IterType.COMM_REDUCE]
        if not reduce or not spatial or len(spatial) + len(reduce) != len(loops):
            return False
        big = [i for i in spatial if (extents[i] or 1) > 1]
        if not big:
            return False
        v = big[-1]
        u = self._innermost_reused(node, v, [i for i in big if i != v])
        lanes = self.lanes_for(name)
        strided = self._strided(node, v)
        if strided and u is None:
            if self.row_reduction(name):
                return True
            # Nothing to reuse across a tile (pooling): the separate lane loads of an explicit
            # vector lose to LLVM's own vectorizer on the plain nest (measured: 0.58 vs 0.93 ms
            # for ResNet's max-pool), once the output row is the innermost loop.
            return self.pool(name, spatial, reduce, v)
        if u is None and big == [v] and any(not _uses(r, node.iter_vars[v].var) for r in _moving_reads(node)):
            return self.row_stream(name, reduce, v, extents)
        # A second row loop `w` in the tile (fewer loads per FMA) pays only with full-width
        # vectors: with masked or strided ones, LLVM stops forwarding the accumulators through
        # the larger unrolled body (measured: 14x slower on ResNet's 28x28 conv).
        rows = [i for i in big if i not in (u, v)]
        v_vector = vector_part(extents[v] or 1, lanes, strided)
        full_width = is_full_width(v_vector, strided)
        w = self._innermost_reused(node, u, rows) if u is not None and full_width else None
        if u is None and full_width:
            # nothing to reuse across `v` (a depthwise conv): rows of the output the broadcast
            # operand (the channel's weights) does not move with give independent accumulators;
            # a row's vectors in one tile, each reading its own window, measured slower
            # (depthwise 144 x 56 x 56: 1.01x -> 0.59x onnxruntime, 192 x 28 x 28: 1.22x -> 0.73x)
            w = self._broadcast_row(node, v, rows)
            if w is None and rows and self._outside_window(node, v):
                # nothing broadcast at all (an NCHW16c max-pool): still several pixels a tile,
                # with the padding inlined as the depthwise conv's (ResNet-50's 3x3 stride-2
                # max-pool 0.45 -> 0.20 ms)
                w = rows[-1]
        reused, reused_buffer = self._reused_operand(node, spatial, u) if u is not None else ([], None)
        # Rows first when the vectors come from a packed layout's narrow block (a packed conv's
        # 16 output channels); a wide reused operand (a matmul's weights) is blocked in L1 and
        # packed there instead (`pack_reused_block`), and its tile is chosen for fewest loads.
        # On AVX2 a 1x1 conv's tile is chosen for fewest loads too: an AVX-512 FMA takes its
        # broadcast operand from memory in the same instruction ({1to16}), AVX2 broadcasts with
        # an instruction of its own (ResNet-50's packed 1x1 convs 19-27 -> 24-33 GFLOPS); a
        # conv with a window keeps rows first there (as fast, and LLVM compiled the other tile
        # 5x slower).
        window = _product([extents[i] or 1 for i in reduce[1:]])
        rows_first = v in reused and (extents[v] or 1) <= 2 * lanes and \
            (self.accumulators >= ACCUMULATOR_REGISTERS or window > 1)
        tile = choose_tile(extents[u] or 1 if u is not None else 1, extents[v] or 1, lanes, strided,
                           extents[w] or 1 if w is not None else 1, broadcast_rows_first=rows_first,
                           accumulators=self.accumulators, block_pairs=self.accumulators >= ACCUMULATOR_REGISTERS)
        if u is None and w is not None:
            # a whole NCHW16c channel block in one or two full vectors: a pixel per step of `w`
            per_pixel = (extents[v] or 1) // tile.v_vector
            pixels = per_pixel <= 2 and per_pixel * tile.v_vector == extents[v] and self._outside_window(node, v)
            most = MAX_PIXELS if pixels else MAX_ROWS
            tile = RegisterTile(1, per_pixel if pixels else 1, tile.v_vector,
                                max(d for d in divisors(extents[w] or 1) if d <= most))
            if pixels:
                self._inline_padding(name)
        tile_extent = {v: tile.v_outer * tile.v_vector}
        if u is not None:
            tile_extent[u] = tile.u_inner
            reused, reused_buffer = self._reused_operand(node, spatial, u, [e or 1 for e in extents], tile_extent)

        block = sch.get_block(name)
        rvs = sch.get_loops(block)
        v_outer, v_io, v_ii = sch.split(rvs[v], [None, tile.v_outer, tile.v_vector])
        if u is not None:
            u_outer, u_inner = sch.split(rvs[u], [None, tile.u_inner])
        if w is not None:
            w_outer, w_inner = sch.split(rvs[w], [None, tile.w_inner])
        outer: list[LoopRV] = []
        for i in spatial:
            if i == v:
                outer.append(v_outer)
            elif i == u:
                outer.append(u_outer)
            elif i == w:
                outer.append(w_outer)
            else:
                outer.append(rvs[i])
        inner = ([u_inner] if u is not None else []) + ([w_inner] if w is not None else []) + [v_io, v_ii]
        reduce_rvs = [rvs[i] for i in reduce]
        # Reduction blocking: when the operand the tile reuses across `v` (the conv's weights
        # for u_inner output channels) is too big for L1 over the whole reduction, the first
        # reduction loop is split and its outer part moved above the other spatial loops, so
        # that the block of weights stays in cache while the tile sweeps the rows.
        head = len(outer)
        r_outer: LoopRV | None = None
        if u is not None:
            r_extents = [extents[i] or 1 for i in reduce]
            inner_extent = {v: tile.v_outer * tile.v_vector, u: tile.u_inner}
            if w is not None:
                inner_extent[w] = tile.w_inner
            rest = (_product([inner_extent.get(i, 1) for i in reused]) * _product(r_extents[1:])
                    * self.dtype_bytes(name))
            # a block that is part of wider rows (a matmul's columns) is blocked from L1_REUSE_BYTES
            # on (and packed, below): its rows, a multiple of 512 bytes apart, share a few L1 sets
            # (GMM 128^3, a 128 x 64 block of 32 KiB: 35 -> 29 us); a block of whole rows (a
            # blocked conv's weights) from twice that
            wide = v in reused and reused_buffer is not None and _wider_than(reused_buffer, inner_extent[v])
            if rest * r_extents[0] > L1_REUSE_BYTES * (1 if wide else 2):
                r_inner = max(d for d in divisors(r_extents[0]) if d * rest <= L1_REUSE_BYTES or d == 1)
                if r_inner < r_extents[0]:
                    r_outer, r_in = sch.split(reduce_rvs[0], [None, r_inner])
                    reduce_rvs = [r_in] + reduce_rvs[1:]
                    # above the loops the reused block does not depend on (unit loops aside)
                    positions = [spatial.index(i) for i in reused
                                 if (extents[i] or 1) > inner_extent.get(i, 1)] or [spatial.index(reused[0])]
                    head = max(positions) + 1
                    # a loop the block does not depend on that came before it (a matmul's rows,
                    # a packed conv's output rows, when the weights are the reused block) moves
                    # below the reduction's outer part, so the block stays in cache while that
                    # loop sweeps (ResNet-50 packed: 1.36x -> 1.22x onnxruntime)
                    sweeping = [k for k in range(head) if spatial[k] not in reused and (extents[spatial[k]] or 1) > 1]
                    kept = [outer[k] for k in range(head) if k not in sweeping]
                    outer = kept + [r_outer] + [outer[k] for k in sweeping] + outer[head:]
                    head = len(kept)
        if r_outer is None and reused_buffer is not None:
            outer = self._streamed_first(node, spatial, outer, reused, reused_buffer)
        sch.reorder(*outer, *reduce_rvs, *inner)
        if r_outer is not None and v in reused and reused_buffer is not None:
            self.pack_reused_block(block, r_outer, reused_buffer, tile_extent[v])
        first_reduce = outer[head] if head < len(outer) else reduce_rvs[0]
        spatial_outer = outer[:head]
        self.epilogue(name, spatial_outer, tile)
        # Loop kinds before the init is split off: the init's loops copy them (TVM's order too:
        # RewriteParallelVectorizeUnroll runs before RewriteReductionBlock).
        for part in inner[:-1]:
            _applied("unroll the register tile", partial(sch.unroll, part))
        masked = not is_full_width(tile.v_vector)
        # A strided read into a masked vector is a masked hardware gather. Alone it is slower
        # than what LLVM makes of the plain loop (4.7 vs 16.6 ms on ResNet's last stride-2 conv,
        # and 1x1 stride-2 convs stay rolled); with the kernel window unrolled around it, each
        # gather's accumulators stay in registers through the window and it pays (ResNet's
        # 3x3 stride-2 convs to 14x14 and 7x7: 2.57 -> 1.37 ms and 3.73 -> 2.50 ms).
        gather_window = strided and masked and window > 1
        if not (strided and masked) or gather_window:
            _applied("vectorize the register tile", lambda: sch.vectorize(v_ii))
        if (not strided or gather_window) and tile.registers(lanes) <= ACCUMULATOR_REGISTERS:
            # (a tile of more accumulators keeps its window rolled: a 1x1 conv's 16 input
            # channels unrolled around a 14 x 2 tile spilled, 160 -> 34 GFLOPS)
            self._unroll_window(reduce_rvs, masked)
        # parallel before the init is split off (TVM's order, as above): a loop over both the
        # init and the update of one output is refused as parallel (no compact dataflow),
        # which left every blocked matmul on one thread
        self.parallelize(spatial_outer)
        self.split_init(block, first_reduce)
        return True

    def row_stream(self, name: str, reduce: Sequence[int], v: int, extents: Sequence[int | None]) -> bool:
        """A matrix-vector product (one output row, a classifier's `x @ W`): each weight is
        used once, so the time is the weights' stream from memory. The weights are read row
        after row (`STREAM_ROWS` rows a step, each a run of vectors along `v`) while the
        output row's accumulators stay in L1, instead of a tile of columns walking down all
        rows (one cache line per 4 KiB row, which the prefetchers do not follow across
        pages). Measured in ResNet-50, where its 2048 x 1000 weights come from memory: 0.88-1.01
        -> 0.77-0.97 ms (onnxruntime's 0.69). With several cores the row is cut in parallel
        parts first (`_balanced_parts`)."""
        sch = self.sch
        block = sch.get_block(name)
        rvs = sch.get_loops(block)
        v_vector = vector_part(extents[v] or 1, self.lanes_for(name))
        vectors = (extents[v] or 1) // v_vector
        parts = _balanced_parts(vectors, self.cores)
        v_par, v_outer, v_inner = sch.split(rvs[v], [parts, None, v_vector])
        last = rvs[reduce[-1]]
        rows = max(d for d in divisors(_extent(sch.get(last)) or 1) if d <= STREAM_ROWS)
        r_outer, r_inner = sch.split(last, [None, rows])
        others = [rvs[i] for i in range(len(rvs)) if i != v and i not in reduce]
        reduce_outer = [rvs[i] for i in reduce[:-1]] + [r_outer]
        sch.reorder(*others, v_par, *reduce_outer, v_outer, r_inner, v_inner)
        _applied("unroll the rows", partial(sch.unroll, r_inner))
        _applied("vectorize the row", lambda: sch.vectorize(v_inner))
        self.parallelize([*others, v_par])
        self.split_init(block, reduce_outer[0])
        return True

    def split_init(self, block: Any, loop: LoopRV) -> None:
        """The reduction's init split off above `loop` (`decompose_reduction`) and its innermost
        loop vectorized, unless it already is (its loops copy the update's kinds)."""
        sch = self.sch
        init = _attempt("decompose_reduction", lambda: sch.decompose_reduction(block, loop))
        if init is None:
            return
        self.done.add(sch.get(init).name_hint)
        init_loops = sch.get_loops(init)
        if sch.get(init_loops[-1]).kind != S.ForKind.VECTORIZED:
            _applied("vectorize the init", lambda: sch.vectorize(init_loops[-1]))

    def winograd(self) -> bool:
        """A Winograd conv (`fuse="winograd"`, or `fuse="nchwc"`'s of NCHW16c data,
        `msdb.model.legalize.winograd`): its own recipe instead of steps 1-3; False when the
        function is not one.

        - The loop nest is the `inverse`'s, with the product computed under it (`compute_at`
          of `bgemm`, not `reverse_compute_at` of `inverse`: the inverse reads every (eps, nu)
          of a tile, a constant range that TVM's reverse_compute_at cannot invert, so that
          trace would not replay in TVM).
        - Its outer loop is the tile row `th` when the transformed weights are the smaller
          operand (early layers: many tiles, few channels): `data_pack` is then computed per
          tile row, under it, and the row's transformed input stays in L2 while every channel
          block reads it. Otherwise (deep layers) the channel block `fo` is outside and
          `data_pack` runs whole first, so each block of weights is read once.
        - `bgemm`, per (tile row, channel blocks), gets the packed conv's register tile
          (`choose_tile`): the 16 output channels of a block the vector, tile columns `tw` the
          broadcast rows, channel blocks the second row loop, the reduction over input
          channels outside the tile.
        - The epilogue (the unpack inlined into it) goes under the same loop as the product,
          reading the inverse's tiles while they are in cache.
        - `data_pack` and `inverse` run with their (eps, nu) and (i, j) loops unrolled, which
          folds their if_then_else trees to one sum each and lets LLVM share the loads, and
          their tile column (`data_pack` of NCHW data), input channels split by the vector
          width (`data_pack` of NCHW16c data, the tile column outside the unrolled loops) or
          lane (`inverse`) loop vectorized.
        Measured (one thread, AVX-512, bias + relu epilogue), against the packed direct conv:
        64x56x56 F(4, 3) 0.73-0.75 vs 1.37-1.42 ms, 128x28x28 F(4, 3) 0.61-0.66 vs 1.24-1.31 ms,
        256x14x14 F(2, 3) 0.83-0.87 vs 1.19-1.21 ms."""
        from msdb.model.legalize.winograd import WINOGRAD_BLOCKS, WINOGRAD_RULES
        from msdb.tuner.space.rules.apply_custom_rule import SCHEDULE_RULE

        data_pack, gemm_name, inverse = WINOGRAD_BLOCKS
        blocks = self.sch.state.index(self.sch.func_name).blocks
        if not all(name in blocks and not self.is_root(name) for name in WINOGRAD_BLOCKS):
            return False
        if any(self.block(name).annotations.get(SCHEDULE_RULE) != rule for name, rule in WINOGRAD_RULES.items()):
            return False  # blocks named so, but not `conv2d_winograd`'s
        extents = [_extent(lp) for lp in self.loops(gemm_name)]
        if len(extents) != 8 or any(e is None for e in extents) or len(self.loops(inverse)) != 7:
            return False
        before = self.sch.copy()
        try:
            self._winograd_recipe([int(e) for e in extents if e is not None])
        except ScheduleError as exc:  # named like one, but not a Winograd conv's nest: the generic steps
            logger.debug("default schedule: the Winograd recipe skipped: %s", exc)
            self.sch, self.done = before, set()
            return False
        return True

    def _winograd_recipe(self, gemm_extents: list[int]) -> None:
        """`winograd`'s steps, on a function it recognized; `gemm_extents` are the extents of
        `bgemm`'s loops (n, th, eps, nu, fo, tw, fi, rc)."""
        from msdb.model.legalize.winograd import WINOGRAD_BLOCKS, channels_innermost

        data_pack, gemm_name, inverse = WINOGRAD_BLOCKS
        sch = self.sch
        self.inline(keep=(*WINOGRAD_BLOCKS, "conv2d_unpack"))
        _, tiles_h, _, _, blocks_f, tiles_w, lanes_f, _ = gemm_extents
        tile = choose_tile(tiles_w, lanes_f, self.lanes_for(gemm_name), w_extent=blocks_f, broadcast_rows_first=True,
                           accumulators=self.accumulators)
        inv = sch.get_block(inverse)
        n, fo, th, i, tw, j, fi = sch.get_loops(inv)
        fo_o, fo_i = sch.split(fo, [None, tile.w_inner])
        rows_outside = blocks_f * lanes_f < tiles_h * tiles_w  # U [a, a, F, C] smaller than V [a, a, C, tiles]
        if rows_outside:
            sch.reorder(th, fo_o, fo_i)
            outer, at = [n, th], fo_o
        else:
            sch.reorder(fo_o, th, fo_i)
            outer, at = [n, fo_o], th
        gemm = sch.get_block(gemm_name)
        sch.compute_at(gemm, at, preserve_unit_loops=True)
        if rows_outside:
            _applied("compute data_pack per tile row",
                     lambda: sch.compute_at(sch.get_block(data_pack), th, preserve_unit_loops=True))
        self.epilogue(inverse, [at])
        *_, eps, nu, g_fo, g_tw, g_fi, rc = sch.get_loops(gemm)
        fi_o, fi_io, fi_ii = sch.split(g_fi, [None, tile.v_outer, tile.v_vector])
        tw_o, tw_i = sch.split(g_tw, [None, tile.u_inner])
        sch.reorder(eps, nu, tw_o, fi_o, rc, tw_i, g_fo, fi_io, fi_ii)
        for part in (tw_i, g_fo, fi_io):
            _applied("unroll the register tile", partial(sch.unroll, part))
        _applied("vectorize the register tile", lambda: sch.vectorize(fi_ii))
        # parallel before the init is split off (as `tile_reduction`): a loop over both the
        # product's init and its update is refused as parallel (no compact dataflow), which
        # left every Winograd conv on one thread
        self.parallelize(outer)
        self.split_init(gemm, rc)
        pack_block = sch.get_block(data_pack)
        if channels_innermost(self.block(data_pack)):
            # NCHW16c data: channels innermost, the tile column outside the unrolled window
            *data_outer, e_loop, v_loop, t_loop, c_loop = sch.get_loops(pack_block)
            c_outer, c_lanes = sch.split(c_loop, [None, self.lanes_for(data_pack)])
            self._transform_loops([c_outer, e_loop, v_loop, c_lanes], outside=[t_loop])
        else:
            *data_outer, e_loop, v_loop, c_loop, t_loop = sch.get_loops(pack_block)
            self._transform_loops([c_loop, e_loop, v_loop, t_loop])
        self._transform_loops([tw, i, j, fi])
        self.done.update(WINOGRAD_BLOCKS)
        if not rows_outside:  # data_pack runs first, at the root: its own outer loops
            self.parallelize(data_outer)

    def _transform_loops(self, order: Sequence[LoopRV], outside: Sequence[LoopRV] = ()) -> None:
        """A Winograd transform's loops in `order`, with `outside` between the first and the
        rest; the two after the first unrolled, the last vectorized (`winograd`)."""
        sch = self.sch
        _applied("reorder the transform", lambda: sch.reorder(order[0], *outside, *order[1:]))
        for loop in order[1:3]:
            _applied("unroll the transform", partial(sch.unroll, loop))
        _applied("vectorize the transform", lambda: sch.vectorize(order[3]))

    def _streamed_first(self, node: S.Block, spatial: Sequence[int], outer: list[LoopRV], reused: Sequence[int],
                        reused_buffer: S.Buffer) -> list[LoopRV]:
        """The tile's outer loops (one per spatial iter var, in `spatial`'s order) with those
        only the reused operand moves with (a blocked conv's output-channel blocks) moved
        inside the others: each tile of the streamed operand (the input pixels of a row, all
        input channels) then stays in L1 while every block of the reused one passes it from
        L2, instead of the whole input being read again from memory for each output-channel
        block (ResNet-50's 1x1 256 -> 128 conv at 56 x 56: 2.15 -> 1.71 ms). Only when the
        streamed operand is larger than `L2_STREAM_BYTES` and the reused one is not: with an
        input that stays in L2, or weights that do not, the reordered nest measured slower."""
        streamed = [r for r in _moving_reads(node) if r.buffer is not reused_buffer]
        element = self.dtype_bytes(node.name_hint)
        if not streamed or _buffer_elements(reused_buffer) * element > L2_STREAM_BYTES or \
                sum(_buffer_elements(r.buffer) for r in streamed) * element <= L2_STREAM_BYTES:
            return outer  # (an input that stays in L2 anyway, or weights that would not)
        inside = [k for k, i in enumerate(spatial) if i in reused and
                  not any(_uses(r, node.iter_vars[i].var) for r in streamed)]
        return [outer[k] for k in range(len(outer)) if k not in inside] + [outer[k] for k in inside]

    def pack_reused_block(self, block: BlockRV, r_outer: LoopRV, buffer: S.Buffer, tile_width: int) -> None:
        """Step 2's packing: when the reused block is part of each row of a wider operand (a
        matmul's weights, 24 columns of 768 or 3072; a packed conv's weights on AVX2, 8 of each
        row's 16 channels), its rows lie a row's stride apart and, with a stride of a multiple
        of 4 KiB, in the same few L1 sets, which evict each other while the tile sweeps. A copy
        of the block (`cache_read` computed at the reduction's outer loop, which the code
        generator allocates at the block's size) makes it contiguous, as BLAS libraries pack
        their panels (measured: BERT's 128 x 3072 x 768 24.4 -> 33.9 GFLOPS; MobileNetV2
        packed 1.93x -> 1.75x onnxruntime)."""
        sch = self.sch
        if not _wider_than(buffer, tile_width):
            return
        index = next((i for i, r in enumerate(sch.get(block).reads) if r.buffer is buffer), None)
        if index is None:
            return
        copy = _attempt("cache the reused block", lambda: sch.cache_read(block, index, "global"))
        if copy is None:
            return
        if _applied("compute the packed block at the reduction's outer loop", lambda: sch.compute_at(copy, r_outer)):
            self.done.add(sch.get(copy).name_hint)

    def _reuses(self, node: S.Block, v: int, u: int) -> bool:
        """Whether some read depends on `v` and no read that does depends on `u`."""
        out = node.writes[0].buffer
        v_var, u_var = node.iter_vars[v].var, node.iter_vars[u].var
        vector_reads = [r for r in node.reads if r.buffer is not out and _uses(r, v_var)]
        return bool(vector_reads) and not any(_uses(r, u_var) for r in vector_reads)

    def _unroll_window(self, reduce_rvs: list[LoopRV], masked: bool) -> None:
        """Unroll the kernel window (the reduction loops after the first, when small): LLVM
        then forwards each accumulator from one step to the next inside the unrolled body, which
        it cannot do across loop iterations for the masked loads and stores of a vector whose
        length is not a power of two. For those, two steps of the first reduction loop are
        unrolled too. (A strided tile with full vectors is left rolled: each lane is a separate
        load, and the unrolled code only grows; a masked one is unrolled, see `tile_reduction`.)"""
        sch = self.sch
        extents = [_extent(sch.get(rv)) or 1 for rv in reduce_rvs]
        if len(reduce_rvs) < 2 or _product(extents[1:]) > MAX_WINDOW_UNROLL:
            return
        for rv in reduce_rvs[1:]:
            _applied("unroll the kernel window", partial(sch.unroll, rv))
        if masked and extents[0] % 2 == 0:
            pair = _attempt("split the first reduction loop", lambda: sch.split(reduce_rvs[0], [None, 2]))
            if pair is not None:
                _applied("unroll two reduction steps", lambda: sch.unroll(pair[1]))

    def _reused_operand(self, node: S.Block, spatial: Sequence[int], u: int, extents: Sequence[int] | None = None,
                        tile_extent: dict[int, int] | None = None) -> tuple[list[int], S.Buffer | None]:
        """The spatial iter vars (indices) and the buffer of the operand the tile keeps reusing while the outer
        loops sweep the rest: of the reads that move with the reduction, the one that depends
        on the fewest spatial iter vars (the conv's weights). On a tie, given the loops'
        `extents` and the register tile's (`tile_extent`), the one whose reuse streams the
        least of the others from memory (each other read is read again for every tile of the
        reused operand's iter vars: a 128-row matmul reuses its weights, not its 128 x K
        input); without them, the one along `u`."""
        moving = _moving_reads(node)
        best: tuple[int, float, list[int], S.Buffer] | None = None
        for region in moving:
            dims = [i for i in spatial if _uses(region, node.iter_vars[i].var)]
            if extents is not None and tile_extent is not None:
                sweeps = _product([-(-extents[i] // tile_extent.get(i, 1)) for i in dims])
                tie: float = sweeps * sum(_buffer_elements(r.buffer) for r in moving if r is not region)
            else:
                tie = 0 if u in dims else 1
            key = (len(dims), tie, dims, region.buffer)
            if best is None or key[:2] < best[:2]:
                best = key
        return (best[2], best[3]) if best is not None else ([u], None)

    def _broadcast_row(self, node: S.Block, v: int, candidates: Sequence[int]) -> int | None:
        """The innermost of `candidates` that some read moving with the reduction does not
        depend on: a depthwise conv's weights, broadcast across the lanes of an NCHW row (`v`
        the image column) and shared by its rows, or one vector (`v` the channels of an NCHW16c
        block) shared by the pixels of a row."""
        shared = _moving_reads(node)
        for i in reversed(candidates):
            if any(not _uses(r, node.iter_vars[i].var) for r in shared):
                return i
        return None

    def _outside_window(self, node: S.Block, v: int) -> bool:
        """Whether no read indexes `v`'s dimension together with a reduction variable: `v`
        is then the channels of an NCHW16c block, not an image row slid over by the kernel
        window (an NCHW depthwise conv's `xx * s + rx`)."""
        v_var = node.iter_vars[v].var
        reduce_vars = [iv.var for iv in node.iter_vars if iv.iter_type == S.IterType.COMM_REDUCE]
        return not any(A.uses_var(r.min, v_var) and any(A.uses_var(r.min, var) for var in reduce_vars)
                       for region in _moving_reads(node) for r in region.region)

    def _inline_padding(self, name: str) -> None:
        """Inline the spatial producers only `name` reads (its padding) into it: `pool`'s, and an
        NCHW16c depthwise conv's, whose bounds test is one scalar test per loaded vector (the
        border is the same for all 16 channels), cheaper than writing and reading back a padded
        copy of the whole input (96 x 112 x 112 stride 2: 0.57 -> 0.23 ms; 32 x 112 x 112:
        0.23 -> 0.12 ms)."""
        sch = self.sch
        for producer in sch.get_producers(sch.get_block(name)):
            node = sch.get(producer)
            if SA.is_spatial(node) and len(A.scope_of(sch.state, sch.func_name, node).consumers(node)) == 1:
                _applied("inline the padding", lambda: sch.compute_inline(producer))

    def _innermost_reused(self, node: S.Block, along: int, candidates: Sequence[int]) -> int | None:
        """The innermost of `candidates` that the reads along `along` do not depend on, so that
        each value those reads load serves every step of it; None when there is none.

        The tile's `u` is this along `v`: each loaded vector serves every `u` row (the NCHW
        conv's output channel; none for depthwise conv and pooling, where more vectors along
        `v` fill the registers instead). Its `w` is this along `u`: each broadcast value serves
        every `w` row (the NCHW conv's output row: the weights do not move with it; a packed
        conv's output-channel block: its input does not)."""
        for i in reversed(candidates):
            if self._reuses(node, along, i):
                return i
        return None

    def _strided(self, node: S.Block, v: int) -> bool:
        """Whether some read moves by more than one element in memory per step of iter var `v`
        (a strided conv's input, a reduction over inner dimensions): each vector lane is then
        a separate load."""
        var = node.iter_vars[v].var
        return any(_read_step(region, var) not in (0, 1) for region in node.reads
                   if region.buffer is not node.writes[0].buffer and region.region)

    def epilogue(self, anchor: str, outer: Sequence[LoopRV], tile: RegisterTile | None = None) -> None:
        """Step 3: the anchor's single consumer (its fused epilogue) under the tile; laid out
        as the register `tile` when it covers just one (`_epilogue_as_tile`)."""
        sch = self.sch
        node = self.block(anchor)
        consumers = A.scope_of(sch.state, sch.func_name, node).consumers(node)
        if len(consumers) != 1 or not outer:
            return
        if self._is_layout_copy(consumers[0], node):
            # a packed conv's unpack (`msdb.model.legalize.conv.conv2d_packed`): inlined into the
            # epilogue, which then reads the tile's output-channel blocks directly
            copy = sch.get_block(consumers[0].name_hint)
            if _applied("inline the layout copy", lambda: sch.compute_inline(copy)):
                consumers = A.scope_of(sch.state, sch.func_name, self.block(anchor)).consumers(self.block(anchor))
                if len(consumers) != 1:
                    return
        name = consumers[0].name_hint
        block = sch.get_block(name)
        if _applied("reverse_compute_at the epilogue",
                    lambda: sch.reverse_compute_at(block, outer[-1], preserve_unit_loops=True)):
            self.done.add(name)  # its loops under the tile are LLVM's to vectorize (as step 4)
            if tile is not None:
                self._epilogue_as_tile(name, outer[-1], tile)

    def _epilogue_as_tile(self, name: str, at: LoopRV, tile: RegisterTile) -> None:
        """An epilogue under `at` that covers one register tile gets the tile's loop kinds (its
        loops unrolled, the innermost vectorized): each output of the tile is then a constant
        position of the compacted tile buffer, which LLVM keeps in registers from the
        reduction through the epilogue instead of storing the accumulators and loading them
        back (ResNet-50's 64 -> 256 1x1 conv at 56 x 56 with its residual add: 0.78-0.82 ->
        0.75-0.78 ms). An epilogue over several tiles (under a blocked reduction's sweep) stays
        LLVM's."""
        sch = self.sch
        loops = sch.get_loops(sch.get_block(name))
        anchor_var = sch.get(at).loop_var
        below = next((i + 1 for i, lp in enumerate(loops) if sch.get(lp).loop_var is anchor_var), None)
        own = loops[below:] if below is not None else []
        extents = [_extent(sch.get(lp)) for lp in own]
        if not own or any(e is None for e in extents):
            return
        lanes = self.lanes_for(name)
        vectors = _product([e or 1 for e in extents[:-1]]) * -(-(extents[-1] or 1) // lanes)
        if vectors > tile.registers(lanes):
            return
        for loop in own[:-1]:
            _applied("unroll the epilogue", partial(sch.unroll, loop))
        _applied("vectorize the epilogue", lambda: sch.vectorize(own[-1]))

    def row_reduction(self, name: str) -> bool:
        """A reduction along the rows of its input (a softmax's max and sum, a layer norm's
        mean: the last reduction loop walks the innermost, contiguous dimension): that loop is
        split into vectors and factored out (`rfactor`), so that each lane accumulates every
        `lanes`-th element of the row, one vector load a step, and the lanes are added up at
        the end. False when the last reduction loop is not contiguous or not a multiple of
        two vectors (`pool` then takes it)."""
        node = self.block(name)
        nest = self.loops(name)
        reduce = [i for i, iv in enumerate(node.iter_vars) if iv.iter_type == S.IterType.COMM_REDUCE]
        if not reduce or len(nest) != len(node.iter_vars) or not SA.is_trivial_binding(self.sch, node):
            return False
        last = reduce[-1]
        lanes = self.lanes_for(name)
        extent = _extent(nest[last]) or 1
        if extent % lanes or extent < 2 * lanes or not self._contiguous(node, last):
            return False
        sch = self.sch.copy()  # kept only if every step applies
        try:
            _, lane = sch.split(sch.get_loops(sch.get_block(name))[last], [None, lanes])
            spatial_count = sum(iv.iter_type == S.IterType.DATA_PAR for iv in node.iter_vars)
            rf = sch.rfactor(lane, spatial_count)  # the lanes innermost in the partial sums
            rf_loops = sch.get_loops(rf)  # the spatial loops, the reduction's (the last split), the lanes
            rf_spatial, rf_outer, rf_lane = rf_loops[:spatial_count], rf_loops[spatial_count], rf_loops[-1]
            sch.vectorize(rf_lane)
        except ScheduleError as exc:
            logger.debug("default schedule: row reduction of %s skipped: %s", name, exc)
            return False
        self.sch = sch
        self.parallelize(rf_spatial)  # before the init is split off (`tile_reduction`)
        init = _attempt("decompose the partial sums", lambda: sch.decompose_reduction(rf, rf_outer))
        self.done.update({name, sch.get(rf).name_hint})
        if init is not None:
            self.done.add(sch.get(init).name_hint)
            init_loops = sch.get_loops(init)
            if sch.get(init_loops[-1]).kind != S.ForKind.VECTORIZED:
                _applied("vectorize the partial sums' init", lambda: sch.vectorize(init_loops[-1]))
        return True

    def _contiguous(self, node: S.Block, i: int) -> bool:
        """Whether some read moving with the reduction steps by one element per step of iter
        var `i` (it walks the innermost dimension)."""
        var = node.iter_vars[i].var
        return any(_read_step(region, var) == 1 for region in _moving_reads(node))

    def pool(self, name: str, spatial: Sequence[int], reduce: Sequence[int], v: int) -> bool:
        """A strided reduction with nothing to reuse (max- or sum-pooling): its padding
        inlined (no copy of the whole input; the bounds test it leaves in the loop costs less),
        the window loops moved outside the output row `v`, so that LLVM's loop vectorizer
        takes the row with each window step a strided load, and the init split off above the
        window. Measured on ResNet-18's max-pool: 0.60 -> 0.39 ms (the copy and a window-
        innermost nest; onnxruntime's NCHWc pool: 0.17 ms)."""
        sch = self.sch
        self._inline_padding(name)
        block = sch.get_block(name)
        rvs = sch.get_loops(block)
        outer = [rvs[i] for i in spatial if i != v]
        window = [rvs[i] for i in reduce]
        sch.reorder(*outer, *window, rvs[v])
        init = _attempt("decompose_reduction", lambda: sch.decompose_reduction(block, window[0]))
        if init is not None:
            self.done.add(sch.get(init).name_hint)
        self.parallelize(outer)
        return True

    def _is_layout_copy(self, block: S.Block, producer: S.Block) -> bool:
        """Whether `block` only copies `producer`'s output into another layout (a spatial block
        with one read, of that output) and writes an intermediate buffer that others read."""
        func = self.func()
        outputs = set(func.buffer_map.values())
        return (SA.is_spatial(block) and len(block.reads) == 1 and len(block.writes) == 1
                and block.reads[0].buffer is producer.writes[0].buffer
                and block.writes[0].buffer not in outputs)

    def vectorize_padding(self, name: str) -> None:
        """Step 4's one exception: a padding copy whose rows are wider than eight vectors gets
        its row loop vectorized (the code generator masks the border lanes). LLVM's own
        vectorizer keeps the bounds test per element there (measured: the stem's 3x230x230
        copy 0.086 -> 0.026 ms; a depthwise 32 x 112 x 112 conv with it 1.15x -> 0.99x
        onnxruntime). Narrower rows stay LLVM's: vectorized, rows of 58 and 30 made the
        depthwise conv reading them twice as slow (144 x 56 x 56: 0.61x -> 1.21x onnxruntime,
        192 x 28 x 28: 0.71x -> 1.22x) and a dense conv no faster."""
        node = self.block(name)
        if not SA.is_spatial(node) or not SA.has_if_then_else(node):
            return
        loops = self.sch.get_loops(self.sch.get_block(name))
        extent = _extent(self.sch.get(loops[-1])) if loops else None
        if extent is not None and extent > 8 * self.lanes_for(name):
            _applied("vectorize the padding row", lambda: self.sch.vectorize(loops[-1]))

    def parallelize_elementwise(self, name: str) -> None:
        """Step 4: with several cores, fuse the loops above the innermost one of a spatial block
        and make them parallel. The innermost loop is left to LLVM's loop vectorizer, which
        measured faster than explicit vectors on these plain nests (relu 0.030 vs 0.038 ms),
        wide padding rows aside (`vectorize_padding`)."""
        sch = self.sch
        node = self.block(name)
        if self.cores <= 1 or not SA.is_spatial(node):
            return
        loops = self.loops(name)
        if len(loops) < 2 or any(_extent(lp) is None for lp in loops):
            return
        outer = sch.get_loops(sch.get_block(name))[:-1]
        fused = _attempt("fuse the outer loops", lambda: sch.fuse(*outer)) if len(outer) > 1 else outer[0]
        if fused is not None:
            self.parallelize([fused])
        self.done.add(name)

    def parallelize(self, outer: Sequence[LoopRV]) -> None:
        """Step 5: parallel outer loops, only with more than one core."""
        if self.cores <= 1 or not outer:
            return
        sch = self.sch
        fused = outer[0] if len(outer) == 1 else _attempt("fuse the parallel loops", lambda: sch.fuse(*outer))
        if fused is not None:
            _attempt("parallel", lambda: sch.parallel(fused))
