"""Fusion: TVM's FuseOps grouping and names on ResNet-18 (the layout TVM 0.27's "zero" pipeline
gives, checked against TVM itself in test_onnx_tvm.py), the partitioner's rules on small graphs,
and fold mode's batch-norm folding."""

from __future__ import annotations

import numpy as np
import pytest

from msdb.model import zoo
from msdb.model.fuse import fold_batch_norm, fuse_fold, fuse_tvm, pack_convs, partition
from msdb.model.lower import lower
from msdb.model.onnx_frontend import from_onnx
from msdb.model.ops import OpGraph, OpNode, OpPattern

from .conftest import ort_run, random_feeds, run_model

# What TVM 0.27 extracts from this ResNet-18 (relax.get_pipeline("zero"), then
# meta_schedule.relax_integration.extract_tasks): 27 tasks, 41 calls.
RESNET18_TVM = {
    "conv2d": 1, "conv2d1": 4, "conv2d2": 1, "conv2d3": 3, "conv2d4": 1, "conv2d5": 1, "conv2d6": 3,
    "conv2d7": 1, "conv2d8": 1, "conv2d9": 3, "conv2d10": 1, "max_pool2d": 1, "mean": 1, "reshape": 1,
    "fused_batch_norm_relu": 1, "fused_batch_norm1_relu1": 2, "fused_batch_norm1_add_relu1": 2,
    "fused_batch_norm2_relu2": 2, "fused_batch_norm2_batch_norm2_add1_relu2": 1, "fused_batch_norm2_add1_relu2": 1,
    "fused_batch_norm3_relu3": 2, "fused_batch_norm3_batch_norm3_add2_relu3": 1, "fused_batch_norm3_add2_relu3": 1,
    "fused_batch_norm4_relu4": 2, "fused_batch_norm4_batch_norm4_add3_relu4": 1, "fused_batch_norm4_add3_relu4": 1,
    "fused_matmul_add4": 1,
}


@pytest.fixture(scope="module")
def resnet18_graph() -> OpGraph:
    return from_onnx(zoo.resnet(18))


@pytest.mark.slow
def test_resnet18_tvm_mode_has_tvms_27_functions_and_call_counts(resnet18_graph):
    model = lower(resnet18_graph, "tvm")
    assert dict(model.call_counts()) == RESNET18_TVM
    assert len(model.calls) == 41
    # a conv stays alone (batch_norm is injective, not elementwise)
    conv = model.functions["conv2d1"]
    assert conv.attrs["op_pattern"] == int(OpPattern.OUT_EWISE_FUSABLE)
    assert model.inputs[0].shape == (1, 3, 224, 224) and model.values[model.outputs[0]].shape == (1, 1000)


def test_resnet18_tvm_groups(resnet18_graph):
    part = fuse_tvm(resnet18_graph)
    kinds = ["+".join(n.op for n in g) for g in part.groups]
    assert kinds.count("nn.conv2d") == 20
    assert kinds.count("nn.batch_norm+nn.relu") == 9
    assert kinds.count("nn.batch_norm+add+nn.relu") == 5
    assert kinds.count("nn.batch_norm+nn.batch_norm+add+nn.relu") == 3
    assert kinds[-3:] == ["mean", "reshape", "matmul+add"]
    # the Gemm's weight transpose was folded, not grouped
    assert [n.op for n in part.folded] == ["permute_dims"]


@pytest.mark.slow
def test_fused_function_blocks_are_named_as_fusetir_names_them(resnet18_graph):
    from msdb.ir import stmt as S
    from msdb.ir.functor import post_order_visit

    model = lower(resnet18_graph, "tvm")
    names: list[str] = []
    post_order_visit(model.functions["fused_batch_norm_relu"].body,
                     lambda n: names.append(n.name_hint) if isinstance(n, S.Block) else None)
    # batch_norm's own blocks (te.create_prim_func: T_reshape_1, ...), then relu's `compute`
    # renamed `compute1` (FuseTIR), the two moving-statistics outputs left as dead blocks
    assert names == ["T_reshape", "T_subtract", "T_reshape_1", "T_add", "compute", "T_divide", "T_reshape_2",
                     "T_multiply", "T_reshape_3", "T_add_1", "T_multiply_1", "T_multiply_2", "compute1", "root"]


@pytest.mark.slow
def test_resnet34_shares_resnet18_layers():
    m18 = lower(from_onnx(zoo.resnet(18, image=32, width=4, num_classes=10)), "tvm")
    m34 = lower(from_onnx(zoo.resnet(34, image=32, width=4, num_classes=10)), "tvm")
    assert set(m18.functions) == set(m34.functions)  # same layer shapes, more calls
    assert len(m34.calls) > len(m18.calls)


def _graph(ops: list[tuple[str, tuple[str, ...], str]], outputs: tuple[str, ...]) -> OpGraph:
    nodes = [OpNode(op, ins, (out,), {}, out) for op, ins, out in ops]
    names = {"x"} | {out for _, _, out in ops}
    return OpGraph("g", ("x",), outputs, nodes, {n: (4,) for n in names}, {n: "float32" for n in names})


PATTERNS = {"conv": OpPattern.OUT_EWISE_FUSABLE, "ew": OpPattern.ELEMWISE, "inj": OpPattern.INJECTIVE,
            "red": OpPattern.COMM_REDUCE, "opq": OpPattern.OPAQUE}


def _groups(graph: OpGraph) -> list[list[str]]:
    groups, _ = partition(graph, lambda n: PATTERNS[n.op])
    return [[n.outputs[0] for n in g] for g in groups]


def test_anchor_takes_an_elementwise_diamond():
    # conv -> (ew a, ew b) -> ew c: the post-dominator of conv is c, every path elementwise
    g = _graph([("conv", ("x",), "k"), ("ew", ("k",), "a"), ("ew", ("k",), "b"), ("ew", ("a", "b"), "c")], ("c",))
    assert _groups(g) == [["k", "a", "b", "c"]]


def test_anchor_does_not_take_an_injective_epilogue():
    g = _graph([("conv", ("x",), "k"), ("inj", ("k",), "a"), ("ew", ("a",), "b")], ("b",))
    assert _groups(g) == [["k"], ["a", "b"]]


def test_two_anchors_never_share_a_group():
    g = _graph([("conv", ("x",), "k1"), ("conv", ("k1",), "k2"), ("ew", ("k2",), "e")], ("e",))
    assert _groups(g) == [["k1"], ["k2", "e"]]


def test_an_output_read_by_a_later_op_ends_its_group():
    g = _graph([("ew", ("x",), "a"), ("ew", ("a",), "b"), ("opq", ("a",), "c")], ("b", "c"))
    assert _groups(g) == [["a"], ["b"], ["c"]]


# ---- fold mode --------------------------------------------------------------------------------


def test_fold_mode_folds_batch_norm_into_the_conv():
    proto = zoo.resnet(18, image=16, width=4, num_classes=10)
    graph = from_onnx(proto)
    folded = fold_batch_norm(graph)
    assert not any(n.op == "nn.batch_norm" for n in folded.nodes)
    # the stem: conv(x, W') then reshape(b') and add, W' = W * gamma / sqrt(var + eps)
    conv = folded.nodes[0]
    assert conv.op == "nn.conv2d" and [n.op for n in folded.nodes[1:3]] == ["reshape", "add"]
    w = graph.constants["conv1.weight"]
    gamma, beta, mean, var = (graph.constants[f"bn1.{p}"].astype(np.float64)
                              for p in ("weight", "bias", "running_mean", "running_var"))
    scale = gamma / np.sqrt(var + 1e-5)
    np.testing.assert_allclose(folded.constants[conv.inputs[1]], w * scale[:, None, None, None], rtol=1e-6)
    np.testing.assert_allclose(folded.constants[folded.nodes[1].inputs[0]], beta - mean * scale, rtol=1e-5, atol=1e-7)


def test_fold_mode_groups_conv_bias_residual_relu_with_the_conv_first():
    part = fuse_fold(from_onnx(zoo.resnet(18, image=32, width=4, num_classes=10)))
    kinds = ["+".join(n.op for n in g) for g in part.groups]
    assert "nn.conv2d+add+add+nn.relu" in kinds and "nn.conv2d+add+nn.relu" in kinds
    for group in part.groups:
        convs = [n for n in group if n.op == "nn.conv2d"]
        assert len(convs) <= 1 and (not convs or group[0] is convs[0])
    assert len(part.groups) == 24


@pytest.mark.slow
@pytest.mark.parametrize("fuse", ["tvm", "fold", "packed", "winograd", "nchwc"])
def test_small_resnet_runs_as_onnxruntime_in_every_mode(fuse):
    proto = zoo.resnet(18, image=16, width=4, num_classes=10)
    feeds = random_feeds(proto)
    model = lower(from_onnx(proto), fuse)
    np.testing.assert_allclose(run_model(model, feeds)[0], ort_run(proto, feeds)[0], rtol=1e-4, atol=1e-5)


# ---- packed mode ------------------------------------------------------------------------------


def test_packed_mode_packs_the_weights_of_convs_with_whole_channel_blocks():
    """width 8: the stem (8 channels) and layer1 stay plain convs, layers 2-4 (16, 32, 64
    channels) get their weights packed as [F/16, C, KH, KW, 16] with the same values."""
    from msdb.model.legalize.conv import PACK_BLOCK

    folded = fold_batch_norm(from_onnx(zoo.resnet(18, image=32, width=8, num_classes=10)))
    packed = pack_convs(folded)
    before = [n for n in folded.nodes if n.op == "nn.conv2d"]
    after = [n for n in packed.nodes if n.op in ("nn.conv2d", "nn.conv2d_packed")]
    assert [n.outputs for n in after] == [n.outputs for n in before]  # same tensors, same order
    for old, new in zip(before, after):
        weight = folded.constants[old.inputs[1]]
        if weight.shape[0] % PACK_BLOCK:
            assert new.op == "nn.conv2d" and new.inputs == old.inputs
            continue
        assert new.op == "nn.conv2d_packed" and new.attrs == old.attrs and new.inputs[0] == old.inputs[0]
        got = packed.constants[new.inputs[1]]
        f, c, kh, kw = weight.shape
        assert got.shape == packed.shapes[new.inputs[1]] == (f // PACK_BLOCK, c, kh, kw, PACK_BLOCK)
        assert got.flags.c_contiguous
        for o in (0, f - 1):  # output channel o is block o // 16, lane o % 16
            np.testing.assert_array_equal(got[o // PACK_BLOCK, ..., o % PACK_BLOCK], weight[o])
        assert old.inputs[1] not in packed.constants  # the plain weights are not kept beside the packed ones
    assert sum(n.op == "nn.conv2d_packed" for n in after) == 15


def test_packed_mode_leaves_grouped_and_depthwise_convs_alone():
    folded = fold_batch_norm(from_onnx(zoo.mobilenet_like(image=32, width=16, num_classes=10)))
    packed = pack_convs(folded)
    for node in packed.nodes:
        if node.op == "nn.conv2d":
            assert int(node.attrs.get("groups", 1)) > 1  # every plain conv here has 16k channels
    assert any(n.op == "nn.conv2d_packed" for n in packed.nodes)
    proto = zoo.mobilenet_like(image=16, width=16, num_classes=10)
    feeds = random_feeds(proto)
    model = lower(from_onnx(proto), "packed")
    np.testing.assert_allclose(run_model(model, feeds)[0], ort_run(proto, feeds)[0], rtol=1e-4, atol=1e-5)


@pytest.mark.slow
def test_packed_conv_functions_fuse_their_epilogue_as_fold_does():
    fold = lower(from_onnx(zoo.resnet(18, image=32, width=16, num_classes=10)), "fold")
    packed = lower(from_onnx(zoo.resnet(18, image=32, width=16, num_classes=10)), "packed")
    assert len(packed.calls) == len(fold.calls)
    assert [c.function.replace("conv2d_packed", "conv2d") for c in packed.calls] == [c.function for c in fold.calls]
    blocks = [b.name_hint for b in _blocks(packed.functions["fused_conv2d_packed_add_relu"])]
    assert blocks[:3] == ["pad_temp", "conv2d_NCHWc", "conv2d_unpack"] and "T_add" in blocks


def test_a_packed_conv_with_weights_of_the_wrong_shape_is_a_clear_error():
    from msdb.ir import te
    from msdb.model.graph import ModelError
    from msdb.model.legalize import legalize_op

    data = te.placeholder((1, 8, 6, 6), name="data")
    plain = te.placeholder((16, 8, 3, 3), name="w")
    with pytest.raises(ModelError, match=r"nn.conv2d_packed: expects 4-d NCHW data and 5-d packed weights"):
        legalize_op("nn.conv2d_packed", [data, plain], {})
    wrong = te.placeholder((1, 4, 3, 3, 16), name="w")
    with pytest.raises(ModelError, match=r"weights \[1, 4, 3, 3, 16\] do not pack 8 input channels"):
        legalize_op("nn.conv2d_packed", [data, wrong], {})


def _blocks(func):
    from msdb.ir.functor import IRVisitor

    found = []

    class Collect(IRVisitor):
        def visit_Block(self, node):
            if node.name_hint != "root":
                found.append(node)
            super().visit_Block(node)

    Collect().visit(func.body)
    return found


def _conv_output(graph: OpGraph, node: OpNode) -> tuple[int, int]:
    return tuple(graph.shapes[node.outputs[0]][2:])  # type: ignore[return-value]


def test_winograd_mode_transforms_exactly_the_3x3_stride_1_convs_with_whole_tiles():
    """ResNet-18 at 32x32 (width 16): its 3x3 stride-1 convs at 8x8 and 4x4 take F(4, 3), at
    2x2 F(2, 3); the stem (7x7), the stride-2 and 1x1 convs, and the 3x3 ones with a 1x1 output
    (no whole 2x2 tile) stay packed. Each transformed weight is [m+2, m+2, F/16, C, 16]."""
    folded = fold_batch_norm(from_onnx(zoo.resnet(18, image=32, width=16, num_classes=10)))
    packed = pack_convs(folded, winograd=True)
    tiles: dict[tuple[int, int], int] = {}
    for before, after in zip(folded.nodes, packed.nodes):
        if before.op != "nn.conv2d":
            assert after.op == before.op
            continue
        weight = folded.constants[before.inputs[1]]
        f, c, kh, _ = weight.shape
        stride_1 = [int(s) for s in before.attrs.get("strides", (1, 1))] == [1, 1]
        out = _conv_output(folded, before)
        if kh == 3 and stride_1 and out[0] % 2 == 0:
            m = 4 if out[0] % 4 == 0 else 2
            assert after.op == "nn.conv2d_winograd"
            assert packed.constants[after.inputs[1]].shape == (m + 2, m + 2, f // 16, c, 16)
            tiles[out] = m
        else:
            assert after.op == "nn.conv2d_packed"
    assert tiles == {(8, 8): 4, (4, 4): 4, (2, 2): 2}
    assert any(n.op == "nn.conv2d_packed" and folded.constants[o.inputs[1]].shape[2] == 3
               for n, o in zip(packed.nodes, folded.nodes))  # the 1x1-output 3x3 convs


@pytest.mark.slow
def test_winograd_mode_computes_what_onnxruntime_computes():
    """The unscheduled functions (msdb's interpreter) of a small ResNet in winograd mode against
    onnxruntime: the transforms are exact up to float rounding."""
    proto = zoo.resnet(18, image=32, width=16, num_classes=10)
    feeds = random_feeds(proto)
    model = lower(from_onnx(proto), "winograd")
    assert any(name.startswith("fused_conv2d_winograd") for name in model.functions)
    expected = ort_run(proto, feeds)[0]
    np.testing.assert_allclose(run_model(model, feeds)[0], expected, rtol=1e-4,
                               atol=1e-4 * float(np.max(np.abs(expected))))


def test_a_winograd_conv_that_cannot_be_one_is_a_clear_error():
    from msdb.ir import te
    from msdb.model.graph import ModelError
    from msdb.model.legalize import legalize_op
    from msdb.model.legalize.winograd import winograd_weight

    data = te.placeholder((1, 16, 6, 6), name="data")
    expects = r"nn.conv2d_winograd: expects NCHW data or NCHW16c data \(\[N, C/16, H, W, 16\]\) and 5-d transformed weights"
    with pytest.raises(ModelError, match=expects + r" .*, got data \[1, 16, 6, 6\] and weights \[16, 16, 3, 3\]"):
        legalize_op("nn.conv2d_winograd", [data, te.placeholder((16, 16, 3, 3), name="w")], {"padding": (1,) * 4})
    with pytest.raises(ModelError, match=expects):
        legalize_op("nn.conv2d_winograd", [te.placeholder((16, 6, 6), name="data"),
                                           te.placeholder((6, 6, 1, 16, 16), name="w")], {"padding": (1,) * 4})
    with pytest.raises(ModelError, match=expects + r" .*, got data \[1, 2, 6, 6, 8\]"):  # blocks of 8, not 16
        legalize_op("nn.conv2d_winograd", [te.placeholder((1, 2, 6, 6, 8), name="data"),
                                           te.placeholder((6, 6, 1, 16, 16), name="w")], {"padding": (1,) * 4})
    with pytest.raises(ModelError, match=r"weights \[6, 6, 1, 16, 16\] are not F\(m, 3\) transforms .* of 32 input"):
        legalize_op("nn.conv2d_winograd", [te.placeholder((1, 2, 6, 6, 16), name="data"),  # 32 channels in blocks
                                           te.placeholder((6, 6, 1, 16, 16), name="w")], {"padding": (1,) * 4})
    six = te.placeholder((6, 6, 1, 16, 16), name="w")
    with pytest.raises(ModelError, match=r"nn.conv2d_winograd: kernel and padding give an empty output \(0x0\)"):
        legalize_op("nn.conv2d_winograd", [te.placeholder((1, 16, 2, 2), name="data"), six], {"padding": (0,) * 4})
    with pytest.raises(ModelError, match=r"nn.conv2d_winograd: strides must be \(1, 1\)"):
        legalize_op("nn.conv2d_winograd", [data, six], {"padding": (1,) * 4, "strides": (2, 2)})
    with pytest.raises(ModelError, match=r"weights \[6, 6, 1, 8, 16\] are not F\(m, 3\) transforms"):
        legalize_op("nn.conv2d_winograd", [data, te.placeholder((6, 6, 1, 8, 16), name="w")], {"padding": (1,) * 4})
    with pytest.raises(ModelError, match=r"weights \[16, 16, 5, 5\] are not 3x3"):
        winograd_weight(np.zeros((16, 16, 5, 5), np.float32), 4)
