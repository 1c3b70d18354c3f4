"""The `nchwc` mode (`msdb.model.nchwc`, `msdb.model.legalize.nchwc`): activations in blocks of 16
channels between convs, checked against onnxruntime through the interpreter and through msdb's
code generator (default schedules, every ISA level this host runs), and the graph it makes."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from msdb.model import zoo
from msdb.model.fuse import fold_batch_norm
from msdb.model.graph import ModelError
from msdb.model.lower import lower
from msdb.model.nchwc import block_channels
from msdb.model.onnx_frontend import from_onnx
from msdb.records.target import Target

from .conftest import ort_run, random_feeds, run_model

onnx = pytest.importorskip("onnx", reason="models are built with onnx.helper (msdb[onnx])")


def _edge_model() -> object:
    """Every rule of the pass on one small graph (24 and 40 channels: padded blocks):

    stem conv 3 -> 24 /2 (NCHW data) + relu, depthwise 3x3 /2, divide by a per-channel constant
    (padding lanes divided by 1), subtract a [1, C, 1, 1] constant, max-pool 3x3 pad 1, average
    pool 2x2 /2, 1x1 conv 24 -> 40 (`y`); a grouped conv of `y` (stays NCHW: `y` unblocked);
    relu(y) + 1 divides a constant (a blocked divisor stays NCHW: its padding lanes would give
    inf); the sum of the two, then a 1x1 conv 40 -> 24 whose blocked output is the graph's."""
    b = zoo._Builder(seed=5)
    rng = np.random.default_rng(7)
    x = b.node("Relu", [b.conv("data", 3, 24, 3, 2, "stem", bias=True)], "stem.relu")
    x = b.conv(x, 24, 24, 3, 2, "dw", group=24, bias=True)
    x = b.node("Div", [x, b.init("scale", rng.uniform(0.5, 2.0, (24, 1, 1)).astype("float32"))], "div")
    x = b.node("Sub", [x, b.init("shift", rng.standard_normal((1, 24, 1, 1)).astype("float32"))], "sub")
    x = b.node("MaxPool", [x], "maxpool", kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1])
    x = b.node("AveragePool", [x], "avgpool", kernel_shape=[2, 2], strides=[2, 2])
    y = b.conv(x, 24, 40, 1, 1, "expand", bias=True)
    grouped = b.conv(y, 40, 40, 3, 1, "grouped", group=2)
    one = b.init("one", np.array(1.0, dtype="float32"))
    t = b.node("Add", [b.node("Relu", [y], "expand.relu"), one], "expand.plus1")
    u = b.node("Div", [b.init("numerator", rng.uniform(1.0, 2.0, (1, 40, 1, 1)).astype("float32")), t], "recip")
    v = b.node("Add", [u, grouped], "sum")
    out = b.conv(v, 40, 24, 1, 1, "project", bias=True)
    return b.model("edges", [("data", [2, 3, 32, 32])], out, [2, 24, 4, 4])


def test_the_pass_blocks_what_works_per_channel_and_unblocks_the_rest_once():
    graph = block_channels(fold_batch_norm(from_onnx(_edge_model())))
    ops = Counter(n.op for n in graph.nodes)
    assert ops["nn.conv2d_nchwc"] == 3 and ops["nn.depthwise_conv2d_nchwc"] == 1
    assert ops["nn.conv2d"] == 1  # the grouped conv
    assert ops["nn.to_nchwc"] == 0  # the stem reads NCHW data and writes blocks
    # y for the grouped conv, relu(y) + 1 for the division, and the graph's output
    unblocked = [n.outputs[0] for n in graph.nodes if n.op == "nn.from_nchwc"]
    assert sorted(unblocked) == ["expand", "expand.plus1", "project"]
    divides = {n.outputs[0].removesuffix(".nchw16c"): n for n in graph.nodes if n.op == "divide"}
    assert len(graph.shapes[divides["div"].inputs[0]]) == 5  # blocked
    assert len(graph.shapes[divides["recip"].inputs[1]]) == 4  # the divisor stays NCHW
    scale = graph.constants[divides["div"].inputs[1]]
    assert scale.shape == (1, 2, 1, 1, 16) and np.all(scale[0, 1, 0, 0, 8:] == 1.0)  # 24 channels: lanes 8-15 padding
    pools = [n for n in graph.nodes if n.op in ("nn.max_pool2d", "nn.avg_pool2d")]
    assert [n.attrs["layout"] for n in pools] == ["NCHW16c", "NCHW16c"]
    assert graph.outputs == ("project",) and graph.shapes["project"] == (2, 24, 4, 4)


def test_the_edge_model_computes_what_onnxruntime_computes():
    proto = _edge_model()
    feeds = random_feeds(proto)
    model = lower(from_onnx(proto), "nchwc")
    np.testing.assert_allclose(run_model(model, feeds)[0], ort_run(proto, feeds)[0], rtol=1e-4, atol=1e-5)


def _compile_and_check(proto: object, tmp_path: Path, target: Target) -> object:
    from msdb.tuner.compile import compile_model
    from msdb.tuner.compile.reference import onnxruntime_session

    path = tmp_path / "model.onnx"
    onnx.save(proto, str(path))
    compiled = compile_model(path, None, target, fuse="nchwc")
    feeds = random_feeds(proto)
    (expected,) = onnxruntime_session(path).run(None, feeds)
    (actual,) = compiled.run(feeds)  # type: ignore[attr-defined]
    np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=1e-4 * float(np.max(np.abs(expected))))
    return compiled


@pytest.mark.slow
def test_the_edge_model_compiles_to_what_onnxruntime_computes(isa_target: Target, tmp_path: Path) -> None:
    _compile_and_check(_edge_model(), tmp_path, isa_target)


@pytest.mark.slow
def test_a_mobilenet_v2_keeps_its_activations_blocked_and_matches_onnxruntime(isa_target: Target,
                                                                              tmp_path: Path) -> None:
    """Depthwise convs at 7 to 28 pixels a row (the default schedule's NCHW16c tile of up to 7
    pixels, its padding inlined), strides 2, 24-channel layers (padded blocks), residual adds,
    ReLU6 with 0-d bounds; one unblocking, before Flatten."""
    compiled = _compile_and_check(zoo.mobilenet_v2(image=56, width=0.5, num_classes=10), tmp_path, isa_target)
    functions = compiled.model.functions  # type: ignore[attr-defined]
    assert sum("depthwise_conv2d_nchwc" in name for name in functions) >= 5
    assert [name for name in functions if "from_nchwc" in name] == ["fused_from_nchwc_reshape"]
    assert not [name for name in functions if "to_nchwc" in name.replace("from_nchwc", "")]


def _winograd_model() -> object:
    """3x3 convs of each kind `nchwc` decides between (24 and 40 channels: padded blocks):

    stem 3 -> 24 at 28 (NCHW data: direct) + relu; 24 -> 24 at 28 + bias + the stem's output +
    relu (blocked data, 28 = 7 tiles of 4: F(4, 3)); 24 -> 40 /2 (a stride: direct) + relu;
    40 -> 40 at 14 + bias (F(2, 3)); 40 -> 40 /2 + relu (direct); 40 -> 40 at 7 (F(2, 3) in
    partial tiles: 8 x 8 computed for 7 x 7); 40 -> 40 at 7 without padding, 5 x 5 out (partial
    tiles would compute 36 for 25: direct), the graph's output."""
    b = zoo._Builder(seed=11)
    stem = b.node("Relu", [b.conv("data", 3, 24, 3, 1, "stem")], "stem.relu")
    x = b.node("Add", [b.conv(stem, 24, 24, 3, 1, "w4", bias=True), stem], "w4.residual")
    x = b.node("Relu", [x], "w4.relu")
    x = b.node("Relu", [b.conv(x, 24, 40, 3, 2, "down1")], "down1.relu")
    x = b.conv(x, 40, 40, 3, 1, "w2", bias=True)
    x = b.node("Relu", [b.conv(x, 40, 40, 3, 2, "down2")], "down2.relu")
    x = b.conv(x, 40, 40, 3, 1, "partial")
    weight = (b.rng.standard_normal((40, 40, 3, 3)) * 0.07).astype("float32")
    out = b.node("Conv", [x, b.init("last.weight", weight)], "last", kernel_shape=[3, 3], pads=[0, 0, 0, 0])
    return b.model("winograd", [("data", [1, 3, 28, 28])], out, [1, 40, 5, 5])


def test_the_pass_computes_3x3_stride_1_convs_of_blocked_data_in_winograd_tiles():
    from msdb.model.legalize.nchwc import pad_weight_channels
    from msdb.model.legalize.winograd import winograd_weight

    graph = block_channels(fold_batch_norm(from_onnx(_winograd_model())))
    convs = {n.outputs[0].split(".")[0]: n for n in graph.nodes if n.op.startswith("nn.conv2d")}
    assert {name: n.op for name, n in convs.items()} == {
        "stem": "nn.conv2d_nchwc", "w4": "nn.conv2d_winograd", "down1": "nn.conv2d_nchwc",
        "w2": "nn.conv2d_winograd", "down2": "nn.conv2d_nchwc", "partial": "nn.conv2d_winograd",
        "last": "nn.conv2d_nchwc"}
    assert len(graph.shapes[convs["w4"].inputs[0]]) == 5  # reads the stem's blocks
    source = from_onnx(_winograd_model()).constants["w4.weight"]
    transformed = graph.constants[convs["w4"].inputs[1]]
    assert transformed.shape == (6, 6, 2, 32, 16)  # F(4, 3); 24 channels in two blocks, in and out
    np.testing.assert_array_equal(transformed, winograd_weight(pad_weight_channels(source), 4))
    assert graph.constants[convs["w2"].inputs[1]].shape == (4, 4, 3, 48, 16)  # F(2, 3); 40 in three blocks
    assert graph.constants[convs["partial"].inputs[1]].shape == (4, 4, 3, 48, 16)
    assert [n.op for n in graph.nodes].count("nn.to_nchwc") == 0 and graph.outputs == ("last",)


@pytest.mark.parametrize("out,packed,blocked", [
    (56, 4, 4), (28, 4, 4), (14, 2, 2), (6, 2, 2),  # whole tiles: F(4, 3), else F(2, 3)
    (7, None, 2), (9, None, 2), (11, None, 2),      # partial F(2, 3) tiles: 64/49, 100/81, 144/121 of the outputs
    (5, None, None), (3, None, None), (1, None, None),  # 36/25, 16/9, 4/1: direct
])
def test_partial_winograd_tiles_only_in_blocks_and_only_where_they_compute_few_extra_outputs(
        out: int, packed: int | None, blocked: int | None) -> None:
    """`winograd`'s rule (whole tiles only, measured against the packed direct conv) and
    `nchwc`'s (F(2, 3) in partial tiles too, while they compute at most `PARTIAL_TILE_WASTE`
    times the outputs: measured against the blocked direct conv)."""
    from msdb.model.legalize.winograd import winograd_tile

    assert winograd_tile(out, out) == packed
    assert winograd_tile(out, out, partial=True) == blocked


@pytest.mark.parametrize("h,w,blocked", [(7, 14, 2), (5, 14, 2), (3, 14, None)])
def test_partial_winograd_tiles_of_a_rectangle_count_both_sides(h: int, w: int, blocked: int | None) -> None:
    """8 x 14 computed for 7 x 14 (112 for 98), 6 x 14 for 5 x 14 (84 for 70): at most 64/49;
    4 x 14 for 3 x 14 (56 for 42) is more."""
    from msdb.model.legalize.winograd import winograd_tile

    assert winograd_tile(h, w, partial=True) == blocked


def test_a_dilated_3x3_conv_of_blocked_data_stays_direct():
    """Winograd's F(m, 3) needs stride and dilation 1: a dilated 3x3 conv at 16 x 16 (whole
    tiles) keeps the blocked direct conv."""
    b = zoo._Builder(seed=3)
    stem = b.node("Relu", [b.conv("data", 3, 16, 3, 1, "stem")], "stem.relu")
    weight = (b.rng.standard_normal((16, 16, 3, 3)) * 0.1).astype("float32")
    out = b.node("Conv", [stem, b.init("dilated.weight", weight)], "dilated", kernel_shape=[3, 3],
                 pads=[2, 2, 2, 2], dilations=[2, 2])
    graph = block_channels(fold_batch_norm(from_onnx(b.model("dilated", [("data", [1, 3, 16, 16])], out,
                                                             [1, 16, 16, 16]))))
    assert [n.op for n in graph.nodes if n.op.startswith("nn.conv2d")] == ["nn.conv2d_nchwc", "nn.conv2d_nchwc"]


def test_the_two_forms_of_a_winograd_data_pack_are_told_apart_by_what_they_read():
    """`channels_innermost`: NCHW16c data's [n, th, eps, nu, tw, c] against NCHW data's
    [n, th, eps, nu, c, tw], whether the padded copy is its own block or inlined into the
    transform (as a sampled compute location may do)."""
    from msdb.ir import stmt as S
    from msdb.ir.function import IRModule
    from msdb.model.legalize.winograd import channels_innermost
    from msdb.schedule import Schedule
    from tests.workloads import conv_func

    for blocked in (False, True):
        sch = Schedule(IRModule.from_func(conv_func(1, 16, 8, 16, 3, 1, 1, winograd=4, blocked=blocked)))
        pack = sch.get(sch.get_block("data_pack"))
        assert isinstance(pack, S.Block) and channels_innermost(pack) is blocked
        sch.compute_inline(sch.get_block("pad_temp"))
        assert channels_innermost(sch.get(sch.get_block("data_pack"))) is blocked


def test_the_winograd_model_computes_what_onnxruntime_computes():
    proto = _winograd_model()
    feeds = random_feeds(proto)
    model = lower(from_onnx(proto), "nchwc")
    assert sum("conv2d_winograd" in name for name in model.functions) == 3
    np.testing.assert_allclose(run_model(model, feeds)[0], ort_run(proto, feeds)[0], rtol=1e-4, atol=1e-4)


@pytest.mark.slow
def test_the_winograd_model_compiles_to_what_onnxruntime_computes(isa_target: Target, tmp_path: Path) -> None:
    compiled = _compile_and_check(_winograd_model(), tmp_path, isa_target)
    assert sum("conv2d_winograd" in name for name in compiled.model.functions) == 3  # type: ignore[attr-defined]


def test_blocked_ops_refuse_operands_of_the_wrong_layout_by_name():
    from msdb.ir import te
    from msdb.model.legalize import legalize_op

    data = te.placeholder((1, 2, 6, 6, 16), name="data")
    with pytest.raises(ModelError, match=r"nn.conv2d_nchwc: weights \[2, 3, 1, 1, 16, 16\] are not \[F/16, 2,"):
        legalize_op("nn.conv2d_nchwc", [data, te.placeholder((2, 3, 1, 1, 16, 16), name="w")])
    with pytest.raises(ModelError, match=r"nn.depthwise_conv2d_nchwc: input 0 must be NCHW16c"):
        legalize_op("nn.depthwise_conv2d_nchwc", [te.placeholder((1, 32, 6, 6), name="x"),
                                                  te.placeholder((2, 3, 3, 16), name="w")])
    with pytest.raises(ModelError, match=r"nn.from_nchwc: channels=40 do not fill 2 blocks of 16"):
        legalize_op("nn.from_nchwc", [data], {"channels": 40})
    with pytest.raises(ModelError, match=r"nn.max_pool2d: a 5-d input needs layout='NCHW16c', got 'NCHW'"):
        legalize_op("nn.max_pool2d", [data], {"pool_size": (2, 2), "layout": "NCHW"})


@pytest.mark.parametrize("width", [14, 7, 8])
def test_a_blocked_depthwise_conv_tiles_pixels_with_its_padding_inlined(width: int, isa_target: Target) -> None:
    """The default schedule of an NCHW16c depthwise conv: up to `MAX_PIXELS` pixels of a row per
    tile (a divisor of the row), each a whole channel block (one AVX-512 vector, two AVX2
    ones) sharing the weight vector; no padded copy of the input (the bounds test is inlined)."""
    from msdb.ir import stmt as S
    from msdb.ir import te
    from msdb.model.legalize import legalize_op
    from msdb.tuner import build
    from msdb.tuner.space.default_planner import MAX_PIXELS
    from msdb.tuner.space.default_schedule import default_schedule
    from msdb.tuner.space.register_tile import vector_lanes

    data = te.placeholder((1, 2, width, width, 16), name="data")
    weight = te.placeholder((2, 3, 3, 16), name="weight")
    out = legalize_op("nn.depthwise_conv2d_nchwc", [data, weight], {"padding": (1, 1, 1, 1)})
    sch = default_schedule(te.create_prim_func([data, weight, out]), isa_target)
    assert "pad_temp" not in sch.state.index(sch.func_name).blocks
    loops = [sch.get(lp) for lp in sch.get_loops(sch.get_block("depthwise_conv2d_NCHWc_update"))]
    lanes = min(16, vector_lanes(isa_target))
    pixels = max(d for d in range(1, MAX_PIXELS + 1) if width % d == 0)
    assert loops[-1].kind == S.ForKind.VECTORIZED and loops[-1].extent.value == lanes
    assert (loops[-3].kind, loops[-3].extent.value) == (S.ForKind.UNROLLED, pixels)
    assert loops[-2].extent.value == 16 // lanes
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 2, width, width, 16)).astype("float32")
    w = rng.standard_normal((2, 3, 3, 16)).astype("float32")
    got = np.zeros((1, 2, width, width, 16), "float32")
    build(sch.mod, isa_target)(x, w, got)
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1), (0, 0)))
    expected = sum(padded[:, :, i:i + width, j:j + width, :] * w[None, :, i, j, None, None, :]
                   for i in range(3) for j in range(3))
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


def _blocked_conv(c: int, f: int, width: int, k: int, target: Target) -> tuple[object, object]:
    """An NCHW16c conv (stride 1, same padding), its default schedule for `target`, and a check
    that the kernel built from it computes numpy's conv."""
    from msdb.ir import te
    from msdb.model.legalize import legalize_op
    from msdb.tuner import build
    from msdb.tuner.space.default_schedule import default_schedule

    data = te.placeholder((1, c // 16, width, width, 16), name="data")
    weight = te.placeholder((f // 16, c // 16, k, k, 16, 16), name="weight")
    out = legalize_op("nn.conv2d_nchwc", [data, weight], {"padding": (k // 2,) * 4})
    sch = default_schedule(te.create_prim_func([data, weight, out]), target)

    def check() -> None:
        rng = np.random.default_rng(5)
        x = rng.standard_normal(tuple(int(d.value) for d in data.shape)).astype("float32")
        w = rng.standard_normal(tuple(int(d.value) for d in weight.shape)).astype("float32")
        got = np.zeros((1, f // 16, width, width, 16), "float32")
        build(sch.mod, target)(x, w, got)
        padded = np.pad(x, ((0, 0), (0, 0), (k // 2,) * 2, (k // 2,) * 2, (0, 0)))
        expected = sum(np.einsum("bchwi,fcio->bfhwo", padded[:, :, i:i + width, j:j + width, :], w[:, :, i, j])
                       for i in range(k) for j in range(k))
        np.testing.assert_allclose(got, expected, rtol=1e-3, atol=1e-3)

    return sch, check


@pytest.mark.parametrize("k", [1, 3])
def test_a_blocked_conv_tiles_pixels_by_two_channel_blocks_where_registers_allow(k: int, isa_target: Target) -> None:
    """The register tile of an NCHW16c conv: a row's pixels (broadcast input) by output-channel
    blocks (weight vectors). With AVX-512's 32 registers, 14 pixels x 2 blocks
    (`BLOCK_PAIR_ACCUMULATORS`), the window kept rolled around so many accumulators; with
    AVX2's 16, the tile `choose_tile` gives without block pairs."""
    from msdb.ir import stmt as S
    from msdb.tuner.space.register_tile import BLOCK_PAIR_ACCUMULATORS, accumulator_registers, vector_lanes

    sch, check = _blocked_conv(32, 64, 28, k, isa_target)
    loops = [sch.get(lp) for lp in sch.get_loops(sch.get_block("conv2d_NCHWc_update"))]
    lanes = vector_lanes(isa_target)
    assert (loops[-1].kind, loops[-1].extent.value) == (S.ForKind.VECTORIZED, min(16, lanes))
    if lanes == 16:
        assert [(lp.kind, lp.extent.value) for lp in loops[-4:-1]] == [
            (S.ForKind.UNROLLED, 14), (S.ForKind.UNROLLED, 2), (S.ForKind.UNROLLED, 1)]
        assert 14 * 2 <= BLOCK_PAIR_ACCUMULATORS
        assert all(lp.kind == S.ForKind.SERIAL for lp in loops[-8:-4])  # the window and the channels: rolled
    else:
        tile = [lp.extent.value for lp in loops[-4:]]
        assert tile[0] * tile[1] * tile[2] <= accumulator_registers(isa_target)
    check()


def test_a_blocked_conv_epilogue_over_one_register_tile_takes_the_tiles_loop_kinds(isa_target: Target) -> None:
    """A bias, a residual add and a relu under an NCHW16c conv's register tile: the epilogue's
    own loops unrolled and the innermost vectorized, as the tile's (`_epilogue_as_tile`), so
    LLVM keeps the tile in registers through it; the numbers are numpy's."""
    from msdb.ir import stmt as S
    from msdb.ir import te
    from msdb.model.legalize import legalize_op
    from msdb.tuner import build
    from msdb.tuner.space.default_schedule import default_schedule

    data = te.placeholder((1, 2, 14, 14, 16), name="data")
    weight = te.placeholder((4, 2, 1, 1, 16, 16), name="weight")
    bias = te.placeholder((1, 4, 1, 1, 16), name="bias")
    residual = te.placeholder((1, 4, 14, 14, 16), name="residual")
    conv = legalize_op("nn.conv2d_nchwc", [data, weight], {})
    biased = te.compute(conv.shape, lambda n, f, y, x, c: conv[n, f, y, x, c] + bias[0, f, 0, 0, c], name="T_add")
    added = te.compute(conv.shape, lambda *i: biased[i] + residual[i], name="T_add_1")
    out = te.compute(conv.shape, lambda *i: te.max(added[i], te.const(0.0, "float32")), name="T_relu")
    sch = default_schedule(te.create_prim_func([data, weight, bias, residual, out]), isa_target)
    epilogue = [sch.get(lp) for lp in sch.get_loops(sch.get_block("T_relu"))]
    conv_loops = [sch.get(lp) for lp in sch.get_loops(sch.get_block("conv2d_NCHWc_update"))]
    shared = next(i for i, (a, b) in enumerate(zip(epilogue, conv_loops)) if a.loop_var is not b.loop_var)
    own = epilogue[shared:]
    assert own[-1].kind == S.ForKind.VECTORIZED and all(lp.kind == S.ForKind.UNROLLED for lp in own[:-1])
    rng = np.random.default_rng(7)
    x, w, b, r = (rng.standard_normal(tuple(int(d.value) for d in t.shape)).astype("float32")
                  for t in (data, weight, bias, residual))
    got = np.zeros((1, 4, 14, 14, 16), "float32")
    build(sch.mod, isa_target)(x, w, b, r, got)
    expected = np.maximum(np.einsum("bchwi,fcio->bfhwo", x, w[:, :, 0, 0]) + b + r, 0)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


def test_a_blocked_1x1_conv_over_a_big_input_sweeps_the_channel_blocks_inside_the_pixels(isa_target: Target) -> None:
    """An input larger than `L2_STREAM_BYTES` (1.6 MiB here) with weights that fit: the loop
    over output-channel blocks runs inside the row's pixel loops, so each tile of the input
    stays in cache while every block of weights passes it (`_streamed_first`); a small input
    keeps the channel blocks outside."""
    from msdb.tuner.space.default_planner import L2_STREAM_BYTES

    def order(sch: object) -> list[str]:
        loops = sch.get_loops(sch.get_block("conv2d_NCHWc_update"))  # type: ignore[attr-defined]
        return [sch.get(lp).loop_var.name for lp in loops[:4]]  # type: ignore[attr-defined]

    assert 256 * 40 * 40 * 4 > L2_STREAM_BYTES
    big, check = _blocked_conv(256, 32, 40, 1, isa_target)
    assert [name.split("_")[0] for name in order(big)] == ["nn", "yy", "xx", "fo"]
    small, _ = _blocked_conv(32, 32, 14, 1, isa_target)
    assert [name.split("_")[0] for name in order(small)][:2] == ["nn", "fo"]
    check()


@pytest.mark.parametrize("width", [14, 8])
def test_a_blocked_max_pool_tiles_pixels_with_its_padding_inlined(width: int, isa_target: Target) -> None:
    """An NCHW16c max-pool (nothing broadcast): several pixels of a row a tile, each a whole
    channel block, and no padded copy of the input, as the blocked depthwise conv."""
    from msdb.ir import stmt as S
    from msdb.ir import te
    from msdb.model.legalize import legalize_op
    from msdb.tuner import build
    from msdb.tuner.space.default_schedule import default_schedule

    data = te.placeholder((1, 2, 2 * width, 2 * width, 16), name="data")
    out = legalize_op("nn.max_pool2d", [data], {"pool_size": (3, 3), "strides": (2, 2), "padding": (1, 1, 1, 1),
                                                "layout": "NCHW16c", "out_layout": "NCHW16c"})
    sch = default_schedule(te.create_prim_func([data, out]), isa_target)
    assert "pad_temp" not in sch.state.index(sch.func_name).blocks
    loops = [sch.get(lp) for lp in sch.get_loops(sch.get_block("pool_max_update"))]
    assert loops[-1].kind == S.ForKind.VECTORIZED
    assert loops[-3].kind == S.ForKind.UNROLLED and loops[-3].extent.value > 1
    x = np.random.default_rng(6).standard_normal((1, 2, 2 * width, 2 * width, 16)).astype("float32")
    got = np.zeros((1, 2, width, width, 16), "float32")
    build(sch.mod, isa_target)(x, got)
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1), (0, 0)), constant_values=-np.inf)
    expected = np.max([padded[:, :, i:i + 2 * width:2, j:j + 2 * width:2, :] for i in range(3) for j in range(3)],
                      axis=0)
    np.testing.assert_array_equal(got, expected)


def test_a_division_by_a_blocked_tensor_is_done_in_nchw():
    """24 channels: the padding lanes of both convs' outputs are 0, and 0 / 0 in a blocked
    division would be NaN that the next conv's zero weights spread to every channel."""
    b = zoo._Builder(seed=11)
    num = b.conv("data", 8, 24, 1, 1, "num", bias=True)
    den = b.node("Add", [b.node("Relu", [b.conv("data", 8, 24, 1, 1, "den", bias=True)], "den.relu"),
                         b.init("half", np.array(0.5, dtype="float32"))], "den.plus")
    out = b.conv(b.node("Div", [num, den], "ratio"), 24, 16, 1, 1, "out")
    proto = b.model("ratio", [("data", [1, 8, 6, 6])], out, [1, 16, 6, 6])
    graph = block_channels(fold_batch_norm(from_onnx(proto)))
    (divide,) = [n for n in graph.nodes if n.op == "divide"]
    assert all(len(graph.shapes[name]) == 4 for name in divide.inputs)
    feeds = random_feeds(proto)
    got = run_model(lower(from_onnx(proto), "nchwc"), feeds)[0]
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, ort_run(proto, feeds)[0], rtol=1e-4, atol=1e-4)


def test_a_pool_of_blocked_data_without_its_layout_is_a_clear_error():
    from msdb.ir import te
    from msdb.model.legalize import legalize_op

    with pytest.raises(ModelError, match=r"nn.max_pool2d: a 5-d input needs layout='NCHW16c', got 'NCHW'"):
        legalize_op("nn.max_pool2d", [te.placeholder((1, 2, 6, 6, 16), name="x")], {"pool_size": (2, 2)})
    with pytest.raises(ModelError, match=r"nn.avg_pool2d: a 5-d input must be NCHW16c, got shape \[1, 2, 6, 6, 8\]"):
        legalize_op("nn.avg_pool2d", [te.placeholder((1, 2, 6, 6, 8), name="x")],
                    {"pool_size": (2, 2), "layout": "NCHW16c", "out_layout": "NCHW16c"})
