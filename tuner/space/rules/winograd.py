"""The design space of a Winograd conv's transforms (`fuse="winograd"`,
`msdb.model.legalize.winograd`; docs/architecture.md, "Tuner"): custom rules, as TVM schedules
its own Winograd convs (`ApplyCustomRule` runs the function registered for a block's
`schedule_rule` annotation; TVM registers `conv2d_nchw_winograd_data_pack` and
`conv2d_nchw_winograd_inverse` for "cpu" the same way).

Why: the transforms choose one of their (m + 2)^2 or m^2 sums with an `if_then_else` tree on
their small loops, which folds to one sum only where those loops are unrolled. Left to the
default rules, a random compute location or a partial unroll keeps the whole tree in every
copy of an unrolled body: tens of thousands of instructions, minutes of LLVM. So each rule
unrolls the small loops explicitly, inside a sampled two-level tiling of the others and outside
the contiguous loop (the tile column of `data_pack`, or its input channels for NCHW16c data; the
tile column and 16 lanes of `inverse`), as TVM's rules do; the padding copy gets a sampled
compute location.
"""

from __future__ import annotations

from msdb.model.legalize.conv import PACK_BLOCK
from msdb.model.legalize.winograd import WINOGRAD_RULES, channels_innermost
from msdb.schedule.rv import BlockRV, LoopRV
from msdb.schedule.schedule import Schedule
from msdb.tuner.space.rules.apply_custom_rule import register_custom_rule

__all__ = ["schedule_data_pack", "schedule_inverse"]

#: TVM's `max_innermost_factor` for the sampled tiles of its Winograd rules.
MAX_INNERMOST_FACTOR = 64


def _tiled(sch: Schedule, loop: LoopRV) -> tuple[LoopRV, LoopRV]:
    """`loop` split in two by a sampled perfect tile."""
    factors = sch.sample_perfect_tile(loop, n=2, max_innermost_factor=MAX_INNERMOST_FACTOR)
    outer, inner = sch.split(loop, list(factors))
    return outer, inner


def schedule_data_pack(sch: Schedule, block: BlockRV) -> list[Schedule]:
    """`data_pack` of NCHW data, [n, th, eps, nu, c, tw]: c and th tiled, then eps and nu
    unrolled, the tile column tw innermost. Of NCHW16c data (`fuse="nchwc"`), [n, th, eps, nu,
    tw, c]: c split into blocks of 16 channels, the blocks and th tiled, the tile column outside
    the unrolled eps and nu, the 16 channels of a block innermost (contiguous in both the input
    and the transform; all C channels as the vector would be 36 vectors of C lanes, one per
    window value: 64 lanes measured 3x slower, docs/benchmarks.md, stop 40). Either way the
    padding copy (its producer) goes to a sampled location."""
    loops = sch.get_loops(block)
    if len(loops) != 6:  # not the transform's own nest
        return [sch]
    blocked = channels_innermost(sch.get(block))
    _, th, eps, nu, *inner = loops
    tw, c = inner if blocked else reversed(inner)
    lanes = None
    if blocked:
        c, lanes = sch.split(c, [None, PACK_BLOCK])
    c0, c1 = _tiled(sch, c)
    th0, th1 = _tiled(sch, th)
    sch.unroll(eps)
    sch.unroll(nu)
    if lanes is not None:
        sch.reorder(c0, th0, c1, th1, tw, eps, nu, lanes)
    else:
        sch.reorder(c0, th0, c1, th1, eps, nu, tw)
    for producer in sch.get_producers(block):
        sch.compute_at(producer, sch.sample_compute_location(producer), preserve_unit_loops=True)
    return [sch]


def schedule_inverse(sch: Schedule, block: BlockRV) -> list[Schedule]:
    """`inverse` [n, fo, th, i, tw, j, fi]: th and tw tiled, i and j unrolled above the inner
    tile column, the 16 lanes fi innermost (j next to fi would be fused into the vector by
    RewriteParallelVectorizeUnroll, and then differ per lane)."""
    loops = sch.get_loops(block)
    if len(loops) != 7:
        return [sch]
    _, _, th, i, tw, j, fi = loops
    th0, th1 = _tiled(sch, th)
    tw0, tw1 = _tiled(sch, tw)
    sch.unroll(i)
    sch.unroll(j)
    sch.reorder(th0, tw0, th1, i, j, tw1, fi)
    return [sch]


register_custom_rule(WINOGRAD_RULES["data_pack"], "cpu", schedule_data_pack)
register_custom_rule(WINOGRAD_RULES["inverse"], "cpu", schedule_inverse)
