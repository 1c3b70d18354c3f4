"""Default schedules (no search): every operator kind of a ResNet-style model, scheduled by
`default_schedule` and built by msdb's code generator, computes what numpy computes, for each
ISA level the host can execute (`isa_target`, tests/isa.py); the schedule is a deterministic
trace; tiles divide the loops and fit the registers."""

from __future__ import annotations

import numpy as np
import pytest

from msdb.hashing import structural_equal
from msdb.ir import stmt as S
from msdb.ir import te
from msdb.ir.function import PrimFunc
from msdb.ir.functor import post_order_visit
from msdb.records.target import Target
from msdb.schedule import Schedule
from msdb.tuner.space.default_schedule import DefaultScheduleError, default_schedule
from msdb.tuner.space.register_tile import (ACCUMULATOR_REGISTERS, ACCUMULATOR_REGISTERS_AVX2, RegisterTile,
                                            accumulator_registers, choose_tile, vector_lanes, vector_part)
from msdb.model.legalize.nchwc import blocks_of
from tests.workloads import conv_func, matmul_func, max_pool_func, relu_func
from tests.isa import AVX2

ONE_CORE = Target({"kind": "llvm", "num-cores": 1})


def with_cores(target: Target, cores: int) -> Target:
    return Target({**target.config, "num-cores": cores})


def run(func: PrimFunc, inputs: list[np.ndarray], target: Target) -> np.ndarray:
    """`func` scheduled by `default_schedule` for `target`, built for it and run once."""
    from msdb.tuner import build

    sch = default_schedule(func, target)
    out_buf = func.buffers[-1]
    out = np.full(tuple(d.value for d in out_buf.shape), np.nan, dtype=out_buf.dtype)
    kernel = build(sch.mod, target)
    kernel.num_threads = 1
    kernel(*inputs, out)
    return out


def numpy_conv(x: np.ndarray, w: np.ndarray, stride: int, pad: int, groups: int = 1) -> np.ndarray:
    n, c, h, _ = x.shape
    f, cg, k, _ = w.shape
    padded = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    o = (h + 2 * pad - k) // stride + 1
    out = np.zeros((n, f, o, o), dtype=np.float64)
    per_group = f // groups
    for ff in range(f):
        g = ff // per_group
        for ry in range(k):
            for rx in range(k):
                window = padded[:, g * cg:(g + 1) * cg, ry:ry + stride * o:stride, rx:rx + stride * o:stride]
                out[:, ff] += np.einsum("nchw,c->nhw", window, w[ff, :, ry, rx])
    return out.astype(np.float32)


def rand(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed + sum(shape)).standard_normal(shape).astype("float32")


def with_epilogue(inputs: list[np.ndarray], expected: np.ndarray, epilogue: str) -> tuple[list[np.ndarray], np.ndarray]:
    """`conv_func`'s epilogue steps on numpy's conv: the arrays each step adds to the inputs (a
    bias for "b", a residual for "r") and the expected output after them ("u": relu)."""
    inputs = list(inputs)
    for step in epilogue:
        if step == "b":
            inputs.append(rand(1, expected.shape[1], 1, 1, seed=1))
        elif step == "r":
            inputs.append(rand(*expected.shape, seed=2))
        expected = np.maximum(expected, 0) if step == "u" else expected + inputs[-1]
    return inputs, expected


@pytest.mark.slow
@pytest.mark.parametrize("c,hw,f,k,stride,pad,groups,epilogue", [
    (8, 12, 16, 3, 1, 1, 1, ""),        # 3x3 conv, a 12-wide row (masked 12-lane vector)
    (8, 16, 16, 3, 1, 1, 1, "bu"),      # conv + bias + relu (epilogue under the tile)
    (4, 14, 8, 3, 2, 1, 1, "bru"),      # stride 2 + bias + residual + relu
    (8, 8, 16, 1, 2, 0, 1, "b"),        # 1x1 downsample
    (3, 20, 8, 7, 2, 3, 1, ""),         # the stem's 7x7 / 2
    (16, 10, 16, 3, 1, 1, 16, "bu"),    # depthwise
    (8, 28, 8, 3, 1, 1, 8, "bu"),       # depthwise, 28 wide: half-width vectors, rows unrolled
    (8, 16, 8, 3, 1, 1, 8, "u"),        # depthwise, full vectors: rows unrolled
    (8, 10, 8, 3, 1, 1, 2, ""),         # grouped
    (64, 7, 16, 3, 1, 1, 1, "u"),       # ResNet's last stage: 7 lanes, reduction blocking
])
def test_convolutions_compute_what_numpy_computes(c: int, hw: int, f: int, k: int, stride: int, pad: int, groups: int,
                                                  epilogue: str, isa_target: Target) -> None:
    func = conv_func(1, c, hw, f, k, stride, pad, groups=groups, epilogue=epilogue)
    x, w = rand(1, c, hw, hw), rand(f, c // groups, k, k)
    expected = numpy_conv(x, w, stride, pad, groups)
    inputs, expected = with_epilogue([x, w], expected, epilogue)
    np.testing.assert_allclose(run(func, inputs, isa_target), expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("c,hw,f,k,stride,pad,epilogue", [
    (8, 14, 32, 3, 1, 1, "bru"),   # 14 wide: one 14-row tile of one 16-channel block
    (64, 7, 32, 3, 1, 1, "bu"),    # 7 wide: 7 rows x 2 blocks, reduction blocking
    (8, 14, 16, 1, 2, 0, "b"),     # 1x1 stride 2: broadcast reads do not care about the stride
    (3, 20, 16, 7, 2, 3, "bu"),    # the stem
])
def test_packed_convolutions_compute_what_numpy_computes(c: int, hw: int, f: int, k: int, stride: int, pad: int,
                                                         epilogue: str, isa_target: Target) -> None:
    from msdb.model.legalize.conv import pack_weight

    func = conv_func(1, c, hw, f, k, stride, pad, epilogue=epilogue, packed=True)
    x, w = rand(1, c, hw, hw), rand(f, c, k, k)
    expected = numpy_conv(x, w, stride, pad)
    inputs, expected = with_epilogue([x, pack_weight(w)], expected, epilogue)
    np.testing.assert_allclose(run(func, inputs, isa_target), expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("cores", [1, 2])
def test_a_matrix_vector_product_streams_the_weights_row_after_row(cores: int, isa_target: Target) -> None:
    """A classifier's `x @ W + b` (one output row): the weight rows are the stream, `STREAM_ROWS`
    of them a step, unrolled, each a run of vectors along the output row, which stays in cache
    (`DefaultPlanner.row_stream`); with two cores the row is cut in parallel parts first."""
    from msdb.tuner.space.default_planner import STREAM_ROWS

    func = matmul_func(1, 200, 64, bias=True)
    target = with_cores(isa_target, cores)
    sch = default_schedule(func, target)
    loops = [sch.get(lp) for lp in sch.get_loops(sch.get_block("matmul_update"))]
    kinds = [lp.kind for lp in loops]
    assert kinds[-2:] == [S.ForKind.UNROLLED, S.ForKind.VECTORIZED]
    assert loops[-2].extent.value == STREAM_ROWS and 200 % loops[-1].extent.value == 0
    assert loops[-4].loop_var.name.startswith("k")  # the rows outside the run along the output row
    assert (S.ForKind.PARALLEL in kinds) is (cores > 1)
    x, w, b = rand(1, 64), rand(64, 200, seed=1), rand(1, 200, seed=2)
    np.testing.assert_allclose(run(func, [x, w, b], target), x @ w + b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("vectors, cores, parts", [
    (125, 2, 25),  # ResNet-50's 1000 classes in 8-lane vectors: 5 parts would give one core 3 of 5
    (125, 4, 25),
    (64, 2, 2),
    (64, 3, 32),   # 11 of 32 parts on the busiest core, against 2 of 4 or 3 of 8
    (7, 2, 7),     # no divisor leaves two vectors a part: the balance decides
    (1, 2, 1),
    (200, 1, 1),
])
def test_a_matrix_vector_products_parts_keep_the_cores_evenly_busy(vectors: int, cores: int, parts: int) -> None:
    """The parallel loop gives each core a contiguous run of ceil(parts / cores) parts, so the
    parts are the divisor that leaves the busiest core the smallest share (`_balanced_parts`)."""
    from msdb.tuner.space.default_planner import _balanced_parts

    assert _balanced_parts(vectors, cores) == parts


def test_a_classifier_on_two_cores_is_cut_into_parts_both_cores_share_evenly(isa_target: Target) -> None:
    """ResNet-50's classifier (1000 outputs) on two cores: 25 parallel parts (13 and 12), not 5
    (3 and 2), and the same numbers as numpy."""
    func = matmul_func(1, 1000, 64, bias=True)
    target = with_cores(isa_target, 2)
    sch = default_schedule(func, target)
    parallel = [sch.get(lp) for lp in sch.get_loops(sch.get_block("matmul_update"))
                if sch.get(lp).kind == S.ForKind.PARALLEL]
    assert [lp.extent.value for lp in parallel] == [25]
    x, w, b = rand(1, 64), rand(64, 1000, seed=1), rand(1, 1000, seed=2)
    np.testing.assert_allclose(run(func, [x, w, b], target), x @ w + b, rtol=1e-4, atol=1e-4)


def test_a_packed_conv_vectorizes_output_channels_with_its_epilogue_under_the_tile(isa_target: Target) -> None:
    """ResNet's last stage in packed form: 16 channels a vector, as many of the 7 output columns
    (broadcast) and channel blocks as the target's accumulator registers hold (`choose_tile`:
    7 x 2 with AVX-512's 16 accumulators), the unpack inlined and the epilogue under the tile."""
    func = conv_func(1, 64, 7, 64, 3, 1, 1, epilogue="bru", packed=True)
    sch = default_schedule(func, isa_target)
    blocks = []
    post_order_visit(sch.mod.main.body, lambda n: blocks.append(n.name_hint) if isinstance(n, S.Block) else None)
    assert "conv2d_unpack" not in blocks
    conv = sch.get_block("conv2d_NCHWc_update")
    loops = [sch.get(lp) for lp in sch.get_loops(conv)]
    tile = choose_tile(7, 16, vector_lanes(isa_target), w_extent=4, broadcast_rows_first=True,
                       accumulators=accumulator_registers(isa_target))
    assert [(lp.kind, lp.extent.value) for lp in loops[-4:]] == [
        (S.ForKind.UNROLLED, tile.u_inner), (S.ForKind.UNROLLED, tile.w_inner), (S.ForKind.UNROLLED, tile.v_outer),
        (S.ForKind.VECTORIZED, tile.v_vector)]
    assert 16 % (tile.v_outer * tile.v_vector) == 0 and tile.v_vector == min(16, vector_lanes(isa_target))
    if vector_lanes(isa_target) == 16:
        assert (tile.u_inner, tile.w_inner) == (7, 2)
    epilogue = [name for name in blocks if name not in ("root", "pad_temp") and not name.startswith("conv2d_NCHWc")]
    assert epilogue
    for name in epilogue:  # under the conv's outer (channel-block) loop, not at the root
        assert len(sch.get_loops(sch.get_block(name))) > 4


@pytest.mark.slow
@pytest.mark.parametrize("c,hw,f,m,epilogue,cores", [
    (16, 24, 16, "4", "bu", 1),    # 36 tiles, 16 channels: the tile row outside, data_pack under it
    (16, 8, 32, "4", "bru", 1),    # 4 tiles, 32 channels: the channel block outside, data_pack first
    (8, 6, 16, "2", "", 1),        # F(2, 3), no epilogue: the unpack writes the output
    (16, 10, 16, "2", "u", 2),     # two cores: the outer loop parallel
    (16, 7, 32, "4", "bu", 1),     # 7x7 in 4x4 tiles: partial tiles at the bottom and right
])
def test_winograd_convolutions_compute_what_numpy_computes(c: int, hw: int, f: int, m: str, epilogue: str,
                                                           cores: int, isa_target: Target) -> None:
    from msdb.model.legalize.winograd import winograd_weight

    func = conv_func(1, c, hw, f, 3, 1, 1, epilogue=epilogue, winograd=int(m))
    x, w = rand(1, c, hw, hw), rand(f, c, 3, 3)
    expected = numpy_conv(x, w, 1, 1)
    inputs, expected = with_epilogue([x, winograd_weight(w, int(m))], expected, epilogue)
    np.testing.assert_allclose(run(func, inputs, with_cores(isa_target, cores)), expected, rtol=1e-4, atol=1e-4)


def nchw16c(array: np.ndarray, padding: np.ndarray | None = None) -> np.ndarray:
    """NCHW `array` as NCHW16c, its channels padded to whole blocks with `padding`'s values
    (default zeros)."""
    n, c, h, w = array.shape
    full = np.zeros((n, blocks_of(c) * 16, h, w), array.dtype) if padding is None else padding.copy()
    full[:, :c] = array
    return np.ascontiguousarray(full.reshape(n, blocks_of(c), 16, h, w).transpose(0, 1, 3, 4, 2))


@pytest.mark.parametrize("n,c,hw,f,m,epilogue,cores", [
    (1, 16, 24, 16, 4, "bru", 1),  # 36 tiles, 16 channels: the tile row outside, data_pack under it
    (1, 24, 8, 32, 4, "bu", 1),    # a padded input block (not zeros in its padding lanes); the channel block outside
    (1, 40, 6, 16, 2, "", 2),      # F(2, 3), no epilogue, two cores
    (2, 16, 8, 16, 4, "ru", 2),    # a batch of two, two cores
    (1, 16, 7, 32, 2, "bru", 1),   # 7 x 7 in partial 2 x 2 tiles (nchwc's rule at 7 x 7)
])
def test_a_winograd_conv_of_blocked_data_computes_what_numpy_computes(n: int, c: int, hw: int, f: int, m: int,
                                                                      epilogue: str, cores: int,
                                                                      isa_target: Target) -> None:
    """`fuse="nchwc"`'s Winograd conv: NCHW16c data, bias, residual and output. The padding
    lanes of a padded input block hold values (as they may in a model: finite, unread) and the
    zero weights of the padded channels keep them out of every output."""
    from msdb.model.legalize.nchwc import pad_weight_channels
    from msdb.model.legalize.winograd import winograd_weight

    func = conv_func(n, c, hw, f, 3, 1, 1, epilogue=epilogue, winograd=m, blocked=True)
    x, w = rand(n, c, hw, hw), rand(f, c, 3, 3)
    inputs, expected = with_epilogue([x, w], numpy_conv(x, w, 1, 1), epilogue)
    inputs[0] = nchw16c(x, padding=rand(n, blocks_of(c) * 16, hw, hw, seed=3))
    inputs[1] = winograd_weight(pad_weight_channels(w), m)
    inputs[2:] = [nchw16c(a) for a in inputs[2:]]
    np.testing.assert_allclose(run(func, inputs, with_cores(isa_target, cores)), nchw16c(expected),
                               rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("hw,f,rows_outside,blocked", [(24, 16, True, False), (8, 32, False, False),
                                                       (24, 16, True, True), (8, 32, False, True)])
def test_a_winograd_conv_tiles_its_product_and_unrolls_its_transforms(hw: int, f: int, rows_outside: bool,
                                                                      blocked: bool, isa_target: Target) -> None:
    """The batched product gets the packed conv's register tile; data_pack sits under the tile
    row when the transformed input is the bigger operand, else runs first; the transforms
    unroll their (eps, nu) / (i, j) loops and vectorize the innermost one; the unpack is inlined
    into the epilogue, which runs under the product's outer loops with the inverse. Of
    NCHW16c data (`blocked`), data_pack's innermost loop is a vector of input channels (the
    channel loop split by the vector width) and its tile column sits above the unrolled loops."""
    func = conv_func(1, 16, hw, f, 3, 1, 1, epilogue="bu", winograd=4, blocked=blocked)
    sch = default_schedule(func, isa_target)
    blocks = []
    post_order_visit(sch.mod.main.body, lambda n: blocks.append(n.name_hint) if isinstance(n, S.Block) else None)
    assert "conv2d_unpack" not in blocks
    gemm = [sch.get(lp) for lp in sch.get_loops(sch.get_block("bgemm_update"))]
    tile = choose_tile(hw // 4, 16, vector_lanes(isa_target), w_extent=f // 16, broadcast_rows_first=True,
                       accumulators=accumulator_registers(isa_target))
    assert [lp.kind for lp in gemm[-4:]] == [S.ForKind.UNROLLED] * 3 + [S.ForKind.VECTORIZED]
    assert [lp.extent.value for lp in gemm[-4:]] == [tile.u_inner, tile.w_inner, tile.v_outer, tile.v_vector]
    assert tile.v_outer * tile.v_vector == 16 and tile.v_vector == min(16, vector_lanes(isa_target))
    for name in ("data_pack", "inverse"):
        loops = [sch.get(lp) for lp in sch.get_loops(sch.get_block(name))]
        assert [lp.kind for lp in loops[-3:]] == [S.ForKind.UNROLLED, S.ForKind.UNROLLED, S.ForKind.VECTORIZED]
    data_pack = [sch.get(lp) for lp in sch.get_loops(sch.get_block("data_pack"))]
    own = 6 + blocked  # the channel loop split in two
    assert (len(data_pack) > own) is rows_outside  # under the gemm's tile row, or at the root (its own loops)
    if blocked:
        assert data_pack[-1].extent.value == vector_lanes(isa_target)
        assert data_pack[-4].extent.value == hw // 4 and data_pack[-4].kind == S.ForKind.SERIAL  # the tile column
    epilogue = [name for name in blocks if name not in ("root", "pad_temp", "data_pack", "inverse")
                and not name.startswith("bgemm")]
    assert epilogue and all(len(sch.get_loops(sch.get_block(name))) > 4 for name in epilogue)


@pytest.mark.parametrize("hw,f", [(24, 16), (8, 32)])
def test_a_winograd_conv_runs_its_tiles_in_parallel_with_several_cores(hw: int, f: int, isa_target: Target) -> None:
    """The product's outer loops (tile rows or channel blocks) are made parallel before its init
    is split off: after, the loop over init and update was refused as parallel (no compact
    dataflow) and every Winograd conv ran on one thread (ResNet-18 on two threads 1.56x
    onnxruntime, one thread 1.02x)."""
    from msdb.model.legalize.winograd import winograd_weight

    func = conv_func(1, 16, hw, f, 3, 1, 1, epilogue="bu", winograd=4)
    several = default_schedule(func, Target({"kind": "llvm", "num-cores": 2}))
    gemm = [several.get(lp) for lp in several.get_loops(several.get_block("bgemm_update"))]
    assert S.ForKind.PARALLEL in [lp.kind for lp in gemm]
    x, w = rand(1, 16, hw, hw), rand(f, 16, 3, 3)
    inputs, expected = with_epilogue([x, winograd_weight(w, 4)], numpy_conv(x, w, 1, 1), "bu")
    np.testing.assert_allclose(run(func, inputs, with_cores(isa_target, 2)), expected, rtol=1e-4, atol=1e-4)


def test_blocks_merely_named_like_a_winograd_conv_get_the_generic_schedule() -> None:
    """`data_pack`, `bgemm` and `inverse` without `conv2d_winograd`'s schedule_rule annotations
    (here a matmul whose product writes the output): not the Winograd recipe, which would
    refuse it, but the generic steps, and the result is still numpy's."""
    a = te.placeholder((8, 16), name="A")
    b = te.placeholder((16, 32), name="B")
    packed = te.compute((8, 16), lambda i, k: a[i, k] * 2.0, name="data_pack")
    k = te.reduce_axis((0, 16), name="k")
    gemm = te.compute((8, 32), lambda i, j: te.sum(packed[i, k] * b[k, j], axis=[k]), name="bgemm")
    inverse = te.compute((8, 32), lambda i, j: gemm[i, j] + 1.0, name="inverse")
    func = te.create_prim_func([a, b, inverse])
    x, y = rand(8, 16), rand(16, 32)
    np.testing.assert_allclose(run(func, [x, y], AVX2.target()), (x * 2.0) @ y + 1.0, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("hw,vectorized", [(128, True), (56, False), (14, False)])
def test_a_padding_copy_with_wide_rows_is_vectorized(hw: int, vectorized: bool, isa_target: Target) -> None:
    """Rows of 130 (more than eight vectors, 8 or 16 lanes) are vectorized with masked border
    lanes; rows of 58 and 16 stay with LLVM's vectorizer (`vectorize_padding`). Either way the
    padded copy is exact."""
    func = conv_func(1, 16, hw, 16, 3, 1, 1, epilogue="u", packed=True)
    sch = default_schedule(func, isa_target)
    pad = sch.get_block("pad_temp")
    kinds = [sch.get(lp).kind for lp in sch.get_loops(pad)]
    assert (kinds[-1] == S.ForKind.VECTORIZED) is vectorized
    assert S.ForKind.VECTORIZED not in kinds[:-1]
    if vectorized:
        from msdb.model.legalize.conv import pack_weight

        x, w = rand(1, 16, hw, hw), rand(16, 16, 3, 3)
        np.testing.assert_allclose(run(func, [x, pack_weight(w)], isa_target), np.maximum(numpy_conv(x, w, 1, 1), 0),
                                   rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("m,n,k,bias", [(1, 100, 64, True), (4, 48, 24, False)])
def test_matmul_computes_what_numpy_computes(m: int, n: int, k: int, bias: bool, isa_target: Target) -> None:
    a, b = rand(m, k), rand(k, n)
    inputs = [a, b] + ([rand(1, n, seed=3)] if bias else [])
    expected = a @ b + (inputs[2] if bias else 0)
    np.testing.assert_allclose(run(matmul_func(m, n, k, bias=bias), inputs, isa_target), expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("batch", [(), (1,)], ids=["2-d", "transformer-3-d"])
def test_a_matmul_with_wide_weights_blocks_and_packs_them(batch: tuple[int, ...], isa_target: Target) -> None:
    """A linear layer whose weights do not fit L1 (K 1024 x N 512): the register tile is chosen
    for fewest loads per FMA (`choose_tile`), the reduction is blocked with the rows swept
    below its outer loop, and each block of weights is copied contiguous there
    (`pack_reused_block`); the numbers are numpy's."""
    func = matmul_func(32, 512, 1024, bias=True, batch=batch)
    sch = default_schedule(func, isa_target)
    lanes, registers = vector_lanes(isa_target), accumulator_registers(isa_target)
    tile = choose_tile(32, 512, lanes, accumulators=registers)
    assert tile.u_inner * tile.v_outer > registers // 2  # fills the accumulators (8 x 1 left a third unused)
    update = [sch.get(lp) for lp in sch.get_loops(sch.get_block("matmul_update"))]
    assert [lp.extent.value for lp in update[-3:]] == [tile.u_inner, tile.v_outer, tile.v_vector]
    shared = [sch.get(lp) for lp in sch.get_loops(sch.get_block("B_global"))][:-2]  # less the copy's own two
    assert [lp.loop_var.name for lp in shared] == [lp.loop_var.name for lp in update[:len(shared)]]
    assert shared[-1].loop_var.name.startswith("k") and shared[-1].extent.value > 1  # the reduction's outer loop
    assert update[len(shared)].extent.value == 32 // tile.u_inner  # the row tiles, swept below it
    a, b, c = rand(*batch, 32, 1024), rand(1024, 512), rand(1, 512, seed=3)
    np.testing.assert_allclose(run(func, [a, b, c], isa_target), a @ b + c, rtol=1e-4, atol=1e-4)


def test_a_matmul_whose_column_block_spans_more_than_l1_reuse_bytes_is_blocked_and_packed(isa_target: Target) -> None:
    """128 x 128 x 128: the tile's block of columns over the whole reduction (with AVX-512's
    64-column tile 32 KiB, twice `L1_REUSE_BYTES`) is part of wider rows, a multiple of 512
    bytes apart, so it is blocked from `L1_REUSE_BYTES` on and packed contiguous; a blocked
    conv's weights (whole rows) only from twice that."""
    from msdb.tuner.space.default_planner import L1_REUSE_BYTES

    func = matmul_func(128, 128, 128)
    sch = default_schedule(func, isa_target)
    tile = choose_tile(128, 128, vector_lanes(isa_target), accumulators=accumulator_registers(isa_target))
    width = tile.v_outer * tile.v_vector
    spans = 128 * width * 4 > L1_REUSE_BYTES
    assert spans or vector_lanes(isa_target) < 16  # AVX2's 32-column tile: 16 KiB, left whole
    assert ("B_global" in sch.state.index(sch.func_name).blocks) is spans
    a, b = rand(128, 128), rand(128, 128, seed=1)
    np.testing.assert_allclose(run(func, [a, b], isa_target), a @ b, rtol=1e-4, atol=1e-4)


def test_max_pool_computes_what_numpy_computes(isa_target: Target) -> None:
    x = rand(1, 8, 16, 16)
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=-np.inf)
    expected = np.max([padded[:, :, ry:ry + 16:2, rx:rx + 16:2] for ry in range(3) for rx in range(3)], axis=0)
    np.testing.assert_array_equal(run(max_pool_func(1, 8, 16, 3, 2, 1), [x], isa_target), expected)


def test_elementwise_and_softmax_compute_what_numpy_computes(isa_target: Target) -> None:
    x = rand(1, 8, 6, 10)
    np.testing.assert_array_equal(run(relu_func((1, 8, 6, 10)), [x], isa_target), np.maximum(x, 0))
    logits = te.placeholder((2, 100), name="x")
    func = te.create_prim_func([logits, te.softmax(logits)])
    y = rand(2, 100)
    expected = np.exp(y - y.max(axis=1, keepdims=True))
    np.testing.assert_allclose(run(func, [y], isa_target), expected / expected.sum(axis=1, keepdims=True), rtol=1e-5,
                               atol=1e-6)


def loop_kinds(sch: Schedule) -> list[S.ForKind]:
    kinds: list[S.ForKind] = []
    post_order_visit(sch.mod.main.body, lambda n: kinds.append(n.kind) if isinstance(n, S.For) else None)
    return kinds


def test_the_tile_is_vectorized_and_unrolled_and_parallel_only_with_several_cores(isa_target: Target) -> None:
    func = conv_func(1, 8, 16, 16, 3, 1, 1, epilogue="bu")
    one = default_schedule(func, ONE_CORE)
    assert S.ForKind.VECTORIZED in loop_kinds(one) and S.ForKind.UNROLLED in loop_kinds(one)
    assert S.ForKind.PARALLEL not in loop_kinds(one)
    several = default_schedule(func, Target({"kind": "llvm", "num-cores": 4}))
    assert S.ForKind.PARALLEL in loop_kinds(several)
    x, w, b = rand(1, 8, 16, 16), rand(16, 8, 3, 3), rand(1, 16, 1, 1)
    np.testing.assert_allclose(run(func, [x, w, b], with_cores(isa_target, 4)),
                               np.maximum(numpy_conv(x, w, 1, 1) + b, 0), rtol=1e-4, atol=1e-4)


def test_a_blocked_matmul_runs_its_weight_blocks_in_parallel_with_several_cores(isa_target: Target) -> None:
    """The parallel loop is made before the init is split off: a loop over both the init and
    the update of one output is refused as parallel, which left every blocked matmul (BERT's
    linear layers) on one thread."""
    func = matmul_func(32, 512, 1024, bias=True)
    several = default_schedule(func, Target({"kind": "llvm", "num-cores": 2}))
    assert S.ForKind.PARALLEL in loop_kinds(several)
    assert S.ForKind.PARALLEL not in loop_kinds(default_schedule(func, ONE_CORE))
    a, b, c = rand(32, 1024), rand(1024, 512), rand(1, 512, seed=3)
    np.testing.assert_allclose(run(func, [a, b, c], with_cores(isa_target, 2)), a @ b + c, rtol=1e-4, atol=1e-4)


def test_the_schedule_is_deterministic_and_replays_as_a_trace() -> None:
    func = conv_func(1, 8, 14, 16, 3, 1, 1, epilogue="bru")
    first, second = default_schedule(func, ONE_CORE), default_schedule(func, ONE_CORE)
    assert first.trace.as_json() == second.trace.as_json()
    assert structural_equal(first.mod, second.mod)
    replayed = Schedule(func)
    first.trace.apply_to_schedule(replayed)
    assert structural_equal(replayed.mod, first.mod)


@pytest.mark.parametrize("u,v,lanes", [(64, 56, 16), (512, 7, 16), (128, 28, 8), (1, 1000, 16), (3, 112, 4),
                                       (256, 14, 16), (10, 1, 8)])
def test_tiles_divide_the_loops_and_fit_the_accumulator_registers(u: int, v: int, lanes: int) -> None:
    for strided in (False, True):
        for accumulators in (ACCUMULATOR_REGISTERS, ACCUMULATOR_REGISTERS_AVX2):
            tile = choose_tile(u, v, lanes, strided, accumulators=accumulators)
            assert u % tile.u_inner == 0 and v % (tile.v_outer * tile.v_vector) == 0
            registers = tile.u_inner * tile.v_outer * -(-tile.v_vector // lanes)
            assert registers <= accumulators


@pytest.mark.parametrize("hw", [16, 28, 10])
def test_a_depthwise_conv_unrolls_output_rows_with_full_vectors(hw: int, isa_target: Target) -> None:
    """Nothing is reused across a depthwise conv's vectors: with full (power-of-two) vectors
    the tile takes up to `MAX_ROWS` output rows, each reading the same broadcast weight, and
    one vector of each row; a row that only fits masked vectors (10 wide) keeps its row tile."""
    from msdb.tuner.space.default_planner import MAX_ROWS

    func = conv_func(1, 8, hw, 8, 3, 1, 1, groups=8)
    sch = default_schedule(func, isa_target)
    loops = [sch.get(lp) for lp in sch.get_loops(sch.get_block("group_conv2d_nchw_update"))]
    v_vector = vector_part(hw, vector_lanes(isa_target))
    full = v_vector & (v_vector - 1) == 0
    assert loops[-1].kind == S.ForKind.VECTORIZED and loops[-1].extent.value == v_vector
    if full:
        rows = max(d for d in range(1, MAX_ROWS + 1) if hw % d == 0)
        assert [(lp.kind, lp.extent.value) for lp in loops[-3:-1]] == [(S.ForKind.UNROLLED, rows),
                                                                        (S.ForKind.UNROLLED, 1)]
    else:
        assert loops[-2].extent.value * v_vector == hw  # the row's vectors, no row tile
    x, w = rand(1, 8, hw, hw), rand(8, 1, 3, 3)
    np.testing.assert_allclose(run(func, [x, w], isa_target), numpy_conv(x, w, 1, 1, 8), rtol=1e-4, atol=1e-4)


def test_rows_of_several_masked_vectors_take_half_width_ones() -> None:
    """28 lanes on AVX2 were four masked 7-lane vectors (a 28 x 28 conv 3.8x onnxruntime): now
    seven unmasked 4-lane ones; AVX-512 takes the row whole (two registers), as before."""
    assert vector_part(28, 8) == 4 and vector_part(28, 16) == 28
    assert vector_part(56, 8) == 8 and vector_part(14, 8) == 14 and vector_part(7, 8) == 7
    assert vector_part(20, 8) == 4 and vector_part(36, 8) == 4 and vector_part(45, 8) == 5


def test_a_full_width_tile_takes_rows_and_vectors_together_for_fewest_loads() -> None:
    """A matmul's 4 x 3 vectors on AVX2 (7 loads for 12 FMAs) and 4 x 4 on AVX-512, not the
    rows-first 8 x 1 (9 loads for 8); a conv's tile, which already needs as few loads, and a
    packed conv's rows-first tile on AVX-512 stay as they were measured."""
    assert choose_tile(128, 768, 8, accumulators=ACCUMULATOR_REGISTERS_AVX2) == RegisterTile(4, 3, 8)
    assert choose_tile(128, 768, 16, accumulators=ACCUMULATOR_REGISTERS) == RegisterTile(4, 4, 16)
    assert choose_tile(64, 56, 8, w_extent=56, accumulators=ACCUMULATOR_REGISTERS_AVX2) == RegisterTile(4, 1, 8, 2)
    assert choose_tile(7, 16, 16, w_extent=4, broadcast_rows_first=True,
                       accumulators=ACCUMULATOR_REGISTERS) == RegisterTile(7, 1, 16, 2)
    # without rows first (a packed 1x1 conv on AVX2, which has no broadcast operand in its FMAs):
    # 6 loads for 8 FMAs, where rows first takes 8 x 1 (9 for 8)
    assert choose_tile(56, 16, 8, w_extent=16, accumulators=ACCUMULATOR_REGISTERS_AVX2) == RegisterTile(4, 1, 8, 2)
    assert choose_tile(56, 16, 8, w_extent=16, broadcast_rows_first=True,
                       accumulators=ACCUMULATOR_REGISTERS_AVX2) == RegisterTile(8, 1, 8, 1)


def test_vector_width_follows_the_targets_cpu_features() -> None:
    assert vector_lanes(Target({"kind": "llvm", "mcpu": "skylake-avx512", "mattr": ["+avx2", "+avx512f"]})) == 16
    assert vector_lanes(Target({"kind": "llvm", "mcpu": "haswell", "mattr": ["+avx2", "+fma"]})) == 8
    assert vector_lanes(Target({"kind": "llvm", "mcpu": "nehalem", "mattr": ["+sse4.2"]})) == 4
    assert vector_lanes(Target({"kind": "llvm", "mcpu": "haswell", "mattr": ["+avx2"]}), 64) == 4
    # a CPU named without -mattr: its features are LLVM's (before, it fell back to 4 lanes)
    assert vector_lanes(Target({"kind": "llvm", "mcpu": "znver4"})) == 16
    assert vector_lanes(Target({"kind": "llvm", "mcpu": "znver3"})) == 8
    assert vector_lanes(Target({"kind": "llvm", "mcpu": "x86-64"})) == 4
    # the host's own -avx512f is honoured
    assert vector_lanes(Target({"kind": "llvm", "mcpu": "znver4", "mattr": ["-avx512f"]})) == 8
    assert accumulator_registers(Target({"kind": "llvm", "mcpu": "znver4"})) == ACCUMULATOR_REGISTERS
    assert accumulator_registers(Target({"kind": "llvm", "mcpu": "znver3"})) == ACCUMULATOR_REGISTERS_AVX2


def test_a_gpu_target_is_one_clear_error() -> None:
    with pytest.raises(DefaultScheduleError, match="not a CPU target"):
        default_schedule(relu_func((4, 4)), Target({"kind": "cuda", "arch": "sm_90"}))


def test_a_reduction_the_tiling_does_not_fit_keeps_its_loops_and_its_numbers() -> None:
    # An annotated loop cannot be split: the tiling is dropped whole, the rest still applies.
    func = conv_func(1, 4, 8, 8, 3, 1, 1, epilogue="bu")
    pre = Schedule(func)
    pre.annotate(pre.get_loops(pre.get_block("conv2d_nchw"))[3], "pragma_keep", 1)
    sch = default_schedule(pre.mod, AVX2.target())
    assert [inst.kind for inst in sch.trace.insts].count("Split") == 0
    assert "ComputeInline" in [inst.kind for inst in sch.trace.insts]  # the bias add, into relu
    from msdb.tuner import build

    x, w, b = rand(1, 4, 8, 8), rand(8, 4, 3, 3), rand(1, 8, 1, 1)
    out = np.zeros((1, 8, 8, 8), "float32")
    build(sch.mod, AVX2.target())(x, w, b, out)
    np.testing.assert_allclose(out, np.maximum(numpy_conv(x, w, 1, 1) + b, 0), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("cores", [1, 2])
def test_row_reductions_sum_vectors_and_add_the_lanes_at_the_end(cores: int, isa_target: Target) -> None:
    """A softmax over rows of 128 (BERT's attention, masked scores of -10000 and -inf among
    them): its max and its sum are each split into vectors along the row (`rfactor`: one
    vector load a step into partial results, the lanes added up at the end), with several cores
    over rows in parallel; the result is numpy's, masked entries exactly 0."""
    from msdb.model.legalize import legalize_op

    x = te.placeholder((1, 4, 16, 128), name="x")
    func = te.create_prim_func([x, legalize_op("nn.softmax", [x], {"axis": -1})])
    sch = default_schedule(func, with_cores(Target({"kind": "llvm", "num-cores": 1}), cores))
    blocks = set(sch.state.index(sch.func_name).blocks)
    assert {"T_softmax_maxelem_rf_update", "T_softmax_expsum_rf_update"} <= blocks
    for name in ("T_softmax_maxelem_rf_update", "T_softmax_expsum_rf_update"):
        kinds = [sch.get(lp).kind for lp in sch.get_loops(sch.get_block(name))]
        assert kinds[-1] == S.ForKind.VECTORIZED and (S.ForKind.PARALLEL in kinds) is (cores > 1)
    data = rand(1, 4, 16, 128)
    data[0, :, :, 100:] = -10000.0
    data[0, 1, 3, :64] = -np.inf
    got = run(func, [data], with_cores(isa_target, cores))
    e = np.exp(data - data.max(-1, keepdims=True))
    np.testing.assert_allclose(got, e / e.sum(-1, keepdims=True), rtol=1e-5, atol=1e-7)
    assert np.all(got[0, :, :, 100:] == 0.0)
