"""The register tile of a default schedule's reduction (docs/architecture.md, "Default
schedules"): the vector lanes and accumulator registers of the target's CPU, asked of LLVM
(`msdb.tuner.codegen.jit.vector_register_bits`), and the tile sizes that fill them."""

from __future__ import annotations

from dataclasses import dataclass

from msdb.records.target import Target
from msdb.schedule.sampling import divisors

__all__ = ["RegisterTile", "choose_tile", "vector_part", "is_full_width", "vector_lanes", "accumulator_registers",
           "ACCUMULATOR_REGISTERS", "ACCUMULATOR_REGISTERS_AVX2", "BLOCK_PAIR_ACCUMULATORS", "MAX_UNROLL"]

#: Vector registers the accumulators of one register tile may take, of the 32 that AVX-512 has
#: (the rest hold the broadcast operand and the loaded input vectors).
ACCUMULATOR_REGISTERS = 16

#: The same with AVX2's (and SSE's) 16 vector registers: 12 accumulators leave one register for
#: the broadcast operand and up to three for loaded vectors (the 6 x 2 and 4 x 3 micro-kernels
#: of BLAS libraries for AVX2); 16 accumulators spilled to the stack on every FMA.
ACCUMULATOR_REGISTERS_AVX2 = 12

#: A rows-first tile of two rows of blocks (`choose_tile(block_pairs=True)`: a blocked conv's
#: pixels x two output-channel blocks) takes up to this many of AVX-512's 32 registers: per
#: reduction step it loads two weight vectors and broadcasts one input value per pixel, 16
#: loads for 28 FMAs where one row of 14 needs 15 for 14 (an FMA's broadcast operand is a load
#: too). Measured on ResNet-50's NCHW16c convs: 14 x 2 tiles 130-174 GFLOPS, 14 x 1 84-139.
BLOCK_PAIR_ACCUMULATORS = 28

#: The most a register tile unrolls along `u`.
MAX_UNROLL = 16


def vector_lanes(target: Target | None, dtype_bits: int = 32) -> int:
    """How many `dtype_bits`-wide lanes one vector register of the target's CPU holds."""
    from msdb.tuner.codegen.jit import spec_for, vector_register_bits

    return max(1, vector_register_bits(spec_for(target)) // dtype_bits)


def accumulator_registers(target: Target | None) -> int:
    """How many vector registers one register tile's accumulators may take on the target's CPU
    (`ACCUMULATOR_REGISTERS` with AVX-512's 32 registers, `ACCUMULATOR_REGISTERS_AVX2` with 16)."""
    from msdb.tuner.codegen.jit import spec_for, vector_register_bits

    return ACCUMULATOR_REGISTERS if vector_register_bits(spec_for(target)) >= 512 else ACCUMULATOR_REGISTERS_AVX2


@dataclass(frozen=True)
class RegisterTile:
    """The register tile of a reduction: `u_inner` x `w_inner` x (`v_outer` x `v_vector`)
    accumulators."""

    u_inner: int
    v_outer: int
    v_vector: int
    w_inner: int = 1

    def registers(self, lanes: int) -> int:
        """The vector registers its accumulators take with `lanes`-lane registers."""
        return self.u_inner * self.w_inner * self.v_outer * -(-self.v_vector // lanes)


def choose_tile(u_extent: int, v_extent: int, lanes: int, strided: bool = False, w_extent: int = 1,
                broadcast_rows_first: bool = False, accumulators: int = ACCUMULATOR_REGISTERS,
                block_pairs: bool = False) -> RegisterTile:
    """Tile sizes dividing the extents: the vector part of `v` (`vector_part`), then the `u`
    rows and `w` rows that fill the accumulator registers with the fewest loads per FMA (each
    step loads `w_inner` input vectors and `u_inner` broadcast weights for `u_inner * w_inner`
    FMAs), then `v` vectors for what registers remain. `broadcast_rows_first`: the vectors are
    the operand streamed from L2 on every sweep (a packed conv's weights), so as many `u`
    rows as fit come first, each loaded vector then serving the most FMAs (measured on
    ResNet-18's packed convs: 14x1 and 7x2 tiles 165-198 GFLOPS, 4x4 144-175, 2x8 97-115).

    With full-width vectors, `u` rows and `v` vectors are also chosen together when that
    needs fewer loads per FMA (a matmul's 4 x 3 tile on AVX2, 7 loads for 12 FMAs, not 8 x 1,
    9 for 8); the caller asks for rows first only where it pays (`DefaultPlanner.tile_reduction`).

    `block_pairs` (with rows first, on AVX-512): two `w` rows when `w_extent` is even, each of
    as many `u` rows as `BLOCK_PAIR_ACCUMULATORS` allows."""
    v_vector = vector_part(v_extent, lanes, strided)
    regs_per_vector = -(-v_vector // lanes)
    if broadcast_rows_first and block_pairs and w_extent % 2 == 0 and v_vector == lanes:
        most = min(MAX_UNROLL, BLOCK_PAIR_ACCUMULATORS // 2)
        return RegisterTile(max(d for d in divisors(u_extent) if d <= most), 1, v_vector, 2)
    budget = max(1, accumulators // regs_per_vector)
    best: tuple[tuple[float, ...], int, int] | None = None
    for u in divisors(u_extent):
        for w in divisors(w_extent):
            if u > MAX_UNROLL or u * w > budget:
                continue
            loads_per_fma = _loads_per_fma(RegisterTile(u, 1, v_vector, w), regs_per_vector)
            # then prefer u rows: they reuse the loaded vector
            key = (-u, loads_per_fma, w) if broadcast_rows_first else (loads_per_fma, -u, w)
            if best is None or key < best[0]:
                best = (key, u, w)
    assert best is not None  # u = w = 1 always fits
    _, u_inner, w_inner = best
    v_outer = max(d for d in divisors(v_extent // v_vector) if d * u_inner * w_inner <= budget)
    tile = RegisterTile(u_inner, v_outer, v_vector, w_inner)
    if broadcast_rows_first or not is_full_width(v_vector, strided):
        return tile
    for u in divisors(u_extent):
        for w in divisors(w_extent):
            for v in divisors(v_extent // v_vector):
                candidate = RegisterTile(u, v, v_vector, w)
                if u <= MAX_UNROLL and u * w * v <= budget and \
                        _loads_per_fma(candidate, regs_per_vector) < _loads_per_fma(tile, regs_per_vector):
                    tile = candidate
    return tile


def _loads_per_fma(tile: RegisterTile, regs_per_vector: int) -> float:
    """Per reduction step a tile loads `u_inner` broadcast values and `w_inner * v_outer`
    vectors for `u_inner * w_inner * v_outer` vector FMAs."""
    vectors = tile.w_inner * tile.v_outer * regs_per_vector
    return (tile.u_inner + vectors) / (tile.u_inner * vectors)


def is_full_width(v_vector: int, strided: bool = False) -> bool:
    """Whether vectors of `v_vector` lanes are unmasked (a power of two) and contiguous: only
    those keep a tile's accumulators in registers across loop iterations."""
    return v_vector & (v_vector - 1) == 0 and not strided


def vector_part(extent: int, lanes: int, strided: bool = False) -> int:
    """The vector length along a loop of `extent` (dividing it). The code generator pads a
    length that is not a power of two to one with masked lanes, and masked accumulators cannot
    stay in registers across loop iterations, so a power of two of at least 8 lanes comes
    first. Below that, a contiguous loop is vectorized whole (up to two registers: 28, 14, 7
    lanes beat 4); a strided one (each lane a separate load) by a power of two of at least 4,
    else whole when it fits one register (the caller then leaves that loop rolled)."""
    power = 1
    while power * 2 <= lanes and extent % (power * 2) == 0:
        power *= 2
    if power >= 8:
        return power
    if strided:
        return power if power >= 4 or extent > lanes else extent
    if extent <= 2 * lanes:
        return extent
    widest = max(d for d in divisors(extent) if d <= lanes)
    # several masked vectors along a row (28 = 4 x 7 lanes with AVX2's 8) lose their
    # accumulators to memory on every step: unmasked half-width vectors instead (4 x 7: a
    # depthwise 28 x 28 conv 11.4x -> 0.76x onnxruntime, docs/benchmarks.md)
    return power if not is_full_width(widest) and power >= 4 else widest

