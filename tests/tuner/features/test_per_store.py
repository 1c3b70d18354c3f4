"""PerStoreFeature on small workloads: exact entries before and after scheduling (every count
is log2(1 + x), so each expected value is written as `slog(x)` of the hand-counted number)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from msdb.ir import IRModule, from_script, zoo
from msdb.records.target import Target
from msdb.schedule.schedule import Schedule
from msdb.tuner.candidate import MeasureCandidate
from msdb.tuner.context import TuneContext
from msdb.tuner.features import (
    FeatureExtractor, PerStoreFeature, RandomFeatureExtractor, UnknownFeatureExtractor, feature_names,
)
from msdb.tuner.features.store_walk import LOOP_MULTIPLE_READ, READ, READ_WRITE, walk_function

NAMES = feature_names()
N = 32
ITERS = N * N * N  # the GMM's iterations (its batch loop has extent 1 and is not a loop)


def slog(x: float) -> float:
    return math.log2(abs(x) + 1)


def gmm() -> IRModule:
    return zoo.build("GMM", 1, N, N, N)


def rows(mod: IRModule) -> np.ndarray:
    return PerStoreFeature().extract_mod(mod)


def entry(row: np.ndarray, name: str) -> float:
    return float(row[NAMES.index(name)])


def buffer_slot(row: np.ndarray, kind: str) -> str:
    """The `B<i>` prefix of the one group-2 slot with the given access kind set."""
    slots = [f"B{b}" for b in range(5) if entry(row, f"B{b}.{kind}") == 1.0]
    assert len(slots) == 1, slots
    return slots[0]


def test_names_and_length() -> None:
    assert len(NAMES) == 164 == len(set(NAMES))
    assert PerStoreFeature().feature_vector_length == 164
    smaller = PerStoreFeature(buffers_per_store=2, arith_intensity_curve_num_samples=4)
    assert smaller.feature_vector_length == 57 + 2 * 18 + 4 + 4 + 3


def test_unscheduled_gmm() -> None:
    out = rows(gmm())
    assert out.shape == (1, 164) and out.dtype == np.float32  # one written buffer; the init's Z = 0 has no row
    row = out[0]
    assert entry(row, "float_add_sub") == pytest.approx(slog(ITERS))
    assert entry(row, "float_mul") == pytest.approx(slog(ITERS))
    assert entry(row, "int_add_sub") == 0.0 and entry(row, "int_mul") == 0.0  # plain loop variables as indices
    for kind in ("vec", "unroll", "parallel"):
        assert entry(row, f"{kind}_pos_none") == 1.0 and entry(row, f"{kind}_num") == 0.0
    assert entry(row, "num_loops") == pytest.approx(slog(3))
    assert entry(row, "outer_prod") == pytest.approx(slog(ITERS))
    # Group 2: Y[b, k, j] moves 32 elements per k step, so every access is a new cache line.
    assert entry(row, "B0.acc_read") == 1.0  # slots are sorted by lines: Y first
    assert entry(row, "B0.bytes") == pytest.approx(slog(4 * ITERS))
    assert entry(row, "B0.unique_bytes") == pytest.approx(slog(4 * N * N))
    assert entry(row, "B0.stride") == pytest.approx(slog(N))
    assert entry(row, "B0.lines") == pytest.approx(slog(ITERS))
    assert entry(row, "B0.reuse_loop_multiple_read") == 1.0  # Y does not use i
    assert entry(row, "B0.reuse_ct") == pytest.approx(slog(N))
    assert entry(row, "B0.reuse_dis_iter") == pytest.approx(slog(N * N))
    z = buffer_slot(row, "acc_read_write")
    assert entry(row, f"{z}.stride") == 0.0  # the innermost loop k does not move Z
    assert entry(row, f"{z}.lines") == pytest.approx(slog(ITERS / N * 4 / 64))
    # Group 4: Z is an argument: allocated once, outside every loop.
    assert entry(row, "alloc_size") == pytest.approx(slog(4 * N * N))
    assert entry(row, "alloc_outer_prod") == pytest.approx(slog(1))


def test_split_vectorize_parallel_unroll_change_their_entries() -> None:
    sch = Schedule(gmm(), seed=0)
    block = sch.get_block("Z")
    i, j, k = sch.get_loops(block)[-3:]
    j0, j1 = sch.split(j, [None, 8])
    sch.reorder(i, j0, k, j1)
    sch.vectorize(j1)
    sch.parallel(i)
    sch.annotate(j0, "pragma_auto_unroll_max_step", 16)
    row = rows(sch.mod)[0]
    assert entry(row, "vec_num") == pytest.approx(slog(1))
    assert entry(row, "vec_len") == pytest.approx(slog(8))
    assert entry(row, "vec_prod") == pytest.approx(slog(8))
    assert entry(row, "vec_pos_mixed") == 1.0 and entry(row, "vec_pos_none") == 0.0
    assert entry(row, "parallel_len") == pytest.approx(slog(N))
    assert entry(row, "unroll_pos_none") == 1.0
    assert entry(row, "auto_unroll_max_step") == pytest.approx(slog(16))
    assert entry(row, "num_loops") == pytest.approx(slog(4))
    # Y and Z are indexed with j0 * 8 + j1: one add and one multiply each, every iteration.
    assert entry(row, "int_add_sub") == pytest.approx(slog(2 * ITERS))
    assert entry(row, "int_mul") == pytest.approx(slog(2 * ITERS))
    assert entry(row, "float_add_sub") == pytest.approx(slog(ITERS))
    # The innermost loop is now j1: Y moves by 1 element along it (contiguous), X not at all.
    y = [f"B{b}" for b in range(3) if entry(row, f"B{b}.acc_read") == 1.0
         and entry(row, f"B{b}.stride") == pytest.approx(slog(1))]
    assert y
    unrolled = Schedule(gmm(), seed=0)
    k = unrolled.get_loops(unrolled.get_block("Z"))[-1]
    unrolled.unroll(k)
    row = rows(unrolled.mod)[0]
    assert entry(row, "unroll_num") == pytest.approx(slog(1)) and entry(row, "unroll_len") == pytest.approx(slog(N))


def test_decomposed_init_and_cache_write_rows() -> None:
    sch = Schedule(gmm(), seed=0)
    block = sch.get_block("Z")
    i, j, k = sch.get_loops(block)[-3:]
    sch.decompose_reduction(block, k)
    assert rows(sch.mod).shape == (1, 164)  # Z_init stores a constant: still one row
    sch = Schedule(gmm(), seed=0)
    block = sch.get_block("Z")
    cache = sch.cache_write(block, 0, "global")
    i = sch.get_loops(block)[-3]
    sch.reverse_compute_at(cache, i)
    out = rows(sch.mod)
    assert out.shape == (2, 164)  # one row per written buffer, in first-store order: Z_global, then Z
    stores = walk_function(sch.mod.main)
    assert [site.buffer.name for site in stores.sites] == ["Z_global", "Z"]
    # Z_global is allocated under the i loop (the deepest loop all its accesses share) and
    # compacted to one row of 32 elements.
    allocation = stores.allocations[stores.sites[0].buffer]
    assert allocation.shape == (1, 1, N) and allocation.outer_prod == N
    assert entry(out[0], "alloc_size") == pytest.approx(slog(4 * N))
    assert entry(out[0], "alloc_outer_prod") == pytest.approx(slog(N))
    assert entry(out[0], "alloc_inner_prod") == pytest.approx(slog(ITERS / N))
    # The copy back reads Z_global[0, 0, j] inside i: the i loop does not move the compacted index.
    copy_back = stores.sites[1]
    read = [a for a in copy_back.accesses if a.kind == READ][0]
    assert read.buffer.name == "Z_global" and read.reuse_type == LOOP_MULTIPLE_READ and read.reuse_ct == N


def test_padded_conv_counts_conditions_and_folds_constant_indices() -> None:
    mod = zoo.build("C2D", 1, 6, 6, 2, 4, 3, 1, 1)  # 6x6x2 -> 6x6x4, 3x3 kernel, stride 1, pad 1
    out = rows(mod)
    assert out.shape == (2, 164)
    pad = out[0]
    iters = 8 * 8 * 2
    # if_then_else(1 <= h and h < 7 and 1 <= w and w < 7, inputs[h - 1, w - 1], 0): none of the
    # four comparisons is decided on h, w in [0, 7].
    assert entry(pad, "float_math_func") == pytest.approx(slog(iters))
    assert entry(pad, "int_cmp") == pytest.approx(slog(4 * iters))
    assert entry(pad, "bool_op") == pytest.approx(slog(3 * iters))
    assert entry(pad, "int_add_sub") == pytest.approx(slog(2 * iters))
    # conv: PadInput[n, h + rh, w + rw, co // 4 * 2 + rc] with co < 4, so the channel index is
    # rc and PadInput is reused across the co loop.
    conv = walk_function(mod.main).sites[1]
    padded = [a for a in conv.accesses if a.buffer.name == "PadInput"][0]
    assert [loop.var.name for loop in conv.loops] == ["h", "w", "co", "rh", "rw", "rc"]  # n (extent 1) is no loop
    assert padded.reuse_type == LOOP_MULTIPLE_READ
    assert padded.reuse_ct == 4 and padded.reuse_dis_iter == 3 * 3 * 2
    assert [a.kind for a in conv.accesses if a.buffer.name == "conv2d_nhwc"] == [READ_WRITE]


def test_conditions_the_loops_decide_count_nothing() -> None:
    mod = from_script('''
@T.prim_func
def main(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    for i in range(16):
        with T.sblock("B"):
            v = T.axis.spatial(16, i)
            B[v] = T.if_then_else(v < 100, A[v], T.float32(0.0)) + T.if_then_else(v < 8, A[v], T.float32(0.0))
''')
    row = rows(mod)[0]
    assert entry(row, "float_math_func") == pytest.approx(slog(16))  # only the v < 8 one
    assert entry(row, "int_cmp") == pytest.approx(slog(16))
    assert entry(row, "float_add_sub") == pytest.approx(slog(16))


def test_extract_from_candidates_and_gpu_targets() -> None:
    sch = Schedule(gmm(), seed=0)
    candidates = [MeasureCandidate.of(sch), MeasureCandidate.of(Schedule(gmm(), seed=1))]
    cpu = PerStoreFeature().extract_from(TuneContext(mod=gmm(), target=Target("llvm"), rand_state=0), candidates)
    assert [x.shape for x in cpu] == [(1, 164), (1, 164)]
    assert entry(cpu[0][0], "is_gpu") == 0.0 and entry(cpu[0][0], "threadIdx_x_len") == 1.0  # slog(1): unbound
    gpu = PerStoreFeature().extract_from(TuneContext(mod=gmm(), target=Target("cuda"), rand_state=0), candidates)
    assert entry(gpu[0][0], "is_gpu") == 1.0


def test_rows_of_a_module_are_cached_and_read_only() -> None:
    extractor = PerStoreFeature()
    mod = gmm()
    first = extractor.extract_mod(mod)
    assert extractor.extract_mod(mod) is first
    assert not first.flags.writeable
    assert np.array_equal(PerStoreFeature().extract_mod(gmm()), first)


def test_create_and_random_extractor() -> None:
    assert isinstance(FeatureExtractor.create("per-store-feature"), PerStoreFeature)
    extractor = FeatureExtractor.create("random", feature_size=7, max_block_num=3, seed=5)
    assert isinstance(extractor, RandomFeatureExtractor)
    context = TuneContext(mod=gmm(), target=Target("llvm"), rand_state=0)
    candidates = [MeasureCandidate.of(Schedule(gmm(), seed=0))] * 4
    out = extractor.extract_from(context, candidates)
    assert all(x.dtype == np.float32 and x.shape[1] == 7 and 1 <= x.shape[0] <= 3 for x in out)
    again = RandomFeatureExtractor(feature_size=7, max_block_num=3, seed=5).extract_from(context, candidates)
    assert all(np.array_equal(a, b) for a, b in zip(out, again))
    with pytest.raises(UnknownFeatureExtractor, match=r"'per-block'.*per-store-feature, random"):
        FeatureExtractor.create("per-block")
