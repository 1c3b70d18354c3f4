"""The ONNX frontend: each supported op imports as TVM's Relax frontend imports it (ops,
attributes, shapes) and computes what onnxruntime computes; bad models are one clear error."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from msdb.model.graph import ModelError
from msdb.model.onnx_frontend import from_onnx

RNG = np.random.default_rng(7)


def _w(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype("float32")


def single(op_type: str, inputs: list[tuple[str, list[int]]], inits: dict[str, np.ndarray] | None = None,
           opset: int = 13, n_out: int = 1, **attrs: object) -> onnx.ModelProto:
    """A model of one `op_type` node named "n" reading `inputs` (graph inputs) and `inits`."""
    inits = inits or {}
    names = [n for n, _ in inputs] + list(inits)
    outs = ["y"] + [f"y{i}" for i in range(1, n_out)]
    node = helper.make_node(op_type, names, outs, name="n", **attrs)
    graph = helper.make_graph(
        [node], "single",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs],
        [numpy_helper.from_array(np.require(v, requirements="C"), k) for k, v in inits.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


X = ("x", [1, 4, 8, 8])

# (id, model, expected Relax ops in order)
CASES = [
    ("conv", single("Conv", [X], {"w": _w(6, 4, 3, 3)}, pads=[1, 1, 1, 1]), ["nn.conv2d"]),
    ("conv-bias-stride-asym-pad", single("Conv", [X], {"w": _w(6, 4, 3, 3), "b": _w(6)}, strides=[2, 2],
                                         pads=[0, 1, 2, 1]), ["nn.conv2d", "reshape", "add"]),
    ("conv-groups-dilation", single("Conv", [X], {"w": _w(6, 2, 3, 3)}, group=2, dilations=[2, 2], pads=[2, 2, 2, 2]),
     ["nn.conv2d"]),
    ("conv-depthwise", single("Conv", [X], {"w": _w(4, 1, 3, 3), "b": _w(4)}, group=4, pads=[1, 1, 1, 1]),
     ["nn.conv2d", "reshape", "add"]),
    ("batch_norm", single("BatchNormalization", [X], {"g": _w(4) + 2, "b": _w(4), "m": _w(4),
                                                      "v": np.abs(_w(4)) + 0.5}, epsilon=1e-3), ["nn.batch_norm"]),
    ("relu", single("Relu", [X]), ["nn.relu"]),
    ("clip-13", single("Clip", [X], {"lo": np.array(-0.5, "float32"), "hi": np.array(0.5, "float32")}),
     ["isnan", "where", "maximum", "isnan", "where", "minimum"]),
    ("clip-13-min-only", single("Clip", [X, ("lo", [])]), None),  # lo is a graph input: error below
    ("clip-10-attrs", single("Clip", [X], opset=10, min=-0.25, max=0.75), ["maximum", "minimum"]),
    ("add-broadcast", single("Add", [X], {"c": _w(4, 1, 1)}), ["add"]),
    ("mul", single("Mul", [X, ("z", [1, 4, 8, 8])]), ["multiply"]),
    ("sub", single("Sub", [X], {"c": _w(8)}), ["subtract"]),
    ("div", single("Div", [X], {"c": np.abs(_w(1, 4, 1, 1)) + 1}), ["divide"]),
    ("max_pool", single("MaxPool", [X], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]), ["nn.max_pool2d"]),
    ("avg_pool", single("AveragePool", [X], kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1]),
     ["nn.avg_pool2d"]),
    ("avg_pool-include-pad", single("AveragePool", [X], kernel_shape=[2, 2], strides=[2, 2], pads=[1, 1, 1, 1],
                                    count_include_pad=1), ["nn.avg_pool2d"]),
    ("global_average_pool", single("GlobalAveragePool", [X]), ["mean"]),
    ("flatten", single("Flatten", [X]), ["reshape"]),
    ("flatten-axis2", single("Flatten", [X], axis=2), ["reshape"]),
    ("reshape", single("Reshape", [X], {"s": np.array([0, -1, 4], "int64")}), ["reshape"]),
    ("gemm", single("Gemm", [("a", [2, 5])], {"b": _w(3, 5), "c": _w(3)}, transB=1), ["permute_dims", "matmul", "add"]),
    ("gemm-alpha-beta-transA", single("Gemm", [("a", [5, 2])], {"b": _w(5, 3), "c": _w(2, 3)}, transA=1, alpha=0.5,
                                      beta=2.0), ["multiply", "permute_dims", "matmul", "multiply", "add"]),
    ("matmul", single("MatMul", [("a", [2, 3, 5])], {"b": _w(5, 4)}), ["matmul"]),
    ("softmax-13", single("Softmax", [X], axis=1), ["nn.softmax"]),
    ("softmax-11", single("Softmax", [("x", [2, 3, 4])], opset=11, axis=1), ["reshape", "nn.softmax", "reshape"]),
    ("concat", single("Concat", [X, ("z", [1, 2, 8, 8])], axis=1), ["concat"]),
]
GOOD = [c for c in CASES if c[2] is not None]


@pytest.mark.parametrize("case,proto,ops", GOOD, ids=[c[0] for c in GOOD])
def test_each_op_imports_as_tvm_does_and_matches_onnxruntime(case, proto, ops, check_against_ort):
    graph = from_onnx(proto)
    assert [n.op for n in graph.nodes] == ops
    # msdb's own shape inference agrees with ONNX's
    inferred = onnx.shape_inference.infer_shapes(proto, strict_mode=True)
    out = inferred.graph.output[0].type.tensor_type.shape
    assert graph.shapes[graph.outputs[0]] == tuple(d.dim_value for d in out.dim)
    check_against_ort(proto)


def test_conv_attributes_follow_relax_names():
    graph = from_onnx(CASES[1][1])
    conv = graph.nodes[0]
    assert conv.attrs["strides"] == (2, 2)
    assert conv.attrs["padding"] == (0, 1, 2, 1)  # ONNX pads = (top, left, bottom, right), as Relax
    assert conv.attrs["groups"] == 1 and conv.attrs["dilation"] == (1, 1)
    assert graph.nodes[1].attrs["shape"] == (1, 6, 1, 1)
    assert graph.shapes["y"] == (1, 6, 4, 4)


def test_global_average_pool_is_a_mean_with_keepdims():
    node = from_onnx(single("GlobalAveragePool", [X])).nodes[0]
    assert (node.op, node.attrs) == ("mean", {"axis": (2, 3), "keepdims": True})


def test_reshape_resolves_zero_and_minus_one():
    graph = from_onnx(single("Reshape", [X], {"s": np.array([0, -1, 4], "int64")}))
    assert graph.nodes[0].attrs["shape"] == (1, 64, 4)


def test_identity_and_constant_need_no_ops(check_against_ort):
    nodes = [
        helper.make_node("Constant", [], ["c"], name="const", value=numpy_helper.from_array(_w(1, 4, 1, 1))),
        helper.make_node("Identity", ["x"], ["xi"], name="ident"),
        helper.make_node("Add", ["xi", "c"], ["y"], name="add"),
    ]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, X[1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    proto.ir_version = 8
    imported = from_onnx(proto)
    assert [n.op for n in imported.nodes] == ["add"] and imported.nodes[0].inputs == ("x", "c")
    check_against_ort(proto)


def test_constant_only_binary_ops_are_computed_at_import():
    inits = {"a": _w(4), "b": _w(4)}
    nodes = [helper.make_node("Mul", ["a", "b"], ["ab"], name="mul"), helper.make_node("Add", ["x", "ab"], ["y"], name="add")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(v, k) for k, v in inits.items()])
    imported = from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]))
    assert [n.op for n in imported.nodes] == ["add"]
    np.testing.assert_array_equal(imported.constants["ab"], inits["a"] * inits["b"])


def test_input_shapes_fix_symbolic_dimensions():
    proto = single("Relu", [("x", ["batch", 4])])
    assert from_onnx(proto, input_shapes={"x": (3, 4)}).shapes["y"] == (3, 4)


# ---- errors: one line each, naming the file, the node and the op ---------------------------


def _error(call) -> str:
    with pytest.raises(ModelError) as info:
        call()
    message = str(info.value)
    assert "\n" not in message
    return message


def test_truncated_file_is_one_clear_error(tmp_path):
    from msdb.model import zoo

    path = tmp_path / "cut.onnx"
    path.write_bytes(zoo.mlp(features=8, hidden=(4,), num_classes=2).SerializeToString()[:-37])
    message = _error(lambda: from_onnx(path))
    assert str(path) in message and ("truncated" in message or "corrupt" in message)


def test_missing_file(tmp_path):
    assert "no such file" in _error(lambda: from_onnx(tmp_path / "none.onnx"))


def test_unsupported_op_names_node_and_op(tmp_path):
    path = tmp_path / "lrn.onnx"
    onnx.save(single("LRN", [X], size=3), path)
    message = _error(lambda: from_onnx(path))
    assert str(path) in message and "'n'" in message and "(LRN)" in message and "unsupported operator" in message


def test_dynamic_input_dimension_names_input_and_dim(tmp_path):
    path = tmp_path / "dyn.onnx"
    onnx.save(single("Relu", [("x", ["batch", 4])]), path)
    message = _error(lambda: from_onnx(path))
    assert str(path) in message and "'x'" in message and "dimension 0" in message and "'batch'" in message


def test_bad_opset(tmp_path):
    path = tmp_path / "old.onnx"
    onnx.save(single("Relu", [X], opset=5), path)
    message = _error(lambda: from_onnx(path))
    assert str(path) in message and "opset 5" in message


def test_clip_bound_from_a_graph_input_is_a_clear_error():
    message = _error(lambda: from_onnx(CASES[7][1]))
    assert "'n' (Clip)" in message and "must be a constant" in message


def test_computed_reshape_shape_is_a_dynamic_shape_error():
    proto = single("Reshape", [X, ("s", [3])])
    message = _error(lambda: from_onnx(proto))
    assert "(Reshape)" in message and "dynamic" in message


def test_auto_pad_same_on_conv_is_refused():
    message = _error(lambda: from_onnx(single("Conv", [X], {"w": _w(2, 4, 3, 3)}, auto_pad="SAME_UPPER")))
    assert "(Conv)" in message and "auto_pad" in message
