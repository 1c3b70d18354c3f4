"""Transformer ops of the ONNX frontend (docs/architecture.md, "Models"): each op against
onnxruntime (values and shapes, with broadcasting and negative axes), the shape arithmetic
folded at import, unsupported ops and attributes as one error naming the node, and tiny
BERT- and GPT-2-style models compiled with default schedules against onnxruntime."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from msdb.model.graph import ModelError
from msdb.model.lower import lower
from msdb.model.onnx_frontend import from_onnx
from tests.model.conftest import ort_run, run_model

pytest.importorskip("onnxruntime")

RNG = np.random.default_rng(30)
_TYPES = {"float32": TensorProto.FLOAT, "int64": TensorProto.INT64, "bool": TensorProto.BOOL}


def _w(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype("float32")


def graph(nodes: list[Any], inputs: dict[str, tuple[list[int], str]], outputs: list[str],
          inits: dict[str, np.ndarray] | None = None, opset: int = 14) -> onnx.ModelProto:
    """A model of `nodes` (helper.make_node) with typed graph inputs and float32 outputs."""
    g = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info(n, _TYPES[d], s) for n, (s, d) in inputs.items()],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in (inits or {}).items()],
    )
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8 if opset <= 17 else 9
    return model


def node(op: str, inputs: list[str], outputs: list[str] | None = None, **attrs: Any) -> Any:
    return helper.make_node(op, inputs, outputs or ["y"], name=f"{op.lower()}_node", **attrs)


def feeds_for(proto: onnx.ModelProto, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    out = {}
    for info in proto.graph.input:
        shape = [d.dim_value for d in info.type.tensor_type.shape.dim]
        elem = info.type.tensor_type.elem_type
        if elem == TensorProto.INT64:
            out[info.name] = rng.integers(-3, 6, size=shape).astype("int64")
        elif elem == TensorProto.BOOL:
            out[info.name] = rng.integers(0, 2, size=shape).astype(bool)
        else:
            out[info.name] = (rng.standard_normal(shape) + (2.0 if info.name.startswith("pos") else 0.0)).astype("float32")
    return out


def check(proto: onnx.ModelProto, feeds: dict[str, np.ndarray] | None = None) -> Any:
    """Lower `proto` (TVM's pipeline), run it call by call, compare with onnxruntime."""
    feeds = feeds if feeds is not None else feeds_for(proto)
    model = lower(from_onnx(proto))
    ours, theirs = run_model(model, feeds), ort_run(proto, feeds)
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert a.shape == b.shape and a.dtype == b.dtype
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    return model


F = "float32"
X3 = {"x": ([2, 3, 4], F)}

CASES: dict[str, Any] = {
    "matmul-3d-2d": graph([node("MatMul", ["x", "w"])], X3, ["y"], {"w": _w(4, 5)}),
    "matmul-4d-4d": graph([node("MatMul", ["x", "z"])], {"x": ([1, 2, 3, 4], F), "z": ([1, 2, 4, 3], F)}, ["y"]),
    "matmul-batch-broadcast": graph([node("MatMul", ["x", "z"])], {"x": ([2, 1, 3, 4], F), "z": ([5, 4, 6], F)}, ["y"]),
    "matmul-3d-3d": graph([node("MatMul", ["x", "z"])], {"x": ([2, 3, 4], F), "z": ([2, 4, 3], F)}, ["y"]),
    "transpose-perm": graph([node("Transpose", ["x"], perm=[0, 2, 1])], X3, ["y"]),
    "transpose-default": graph([node("Transpose", ["x"])], X3, ["y"]),
    "reshape-zero-minus-one": graph([node("Reshape", ["x", "s"])], X3, ["y"], {"s": np.array([0, -1, 2], "int64")}),
    "gather-embedding": graph([node("Gather", ["table", "ids"], axis=0)], {"ids": ([2, 5], "int64")}, ["y"],
                              {"table": _w(6, 4)}),
    "gather-axis-negative": graph([node("Gather", ["x", "ids"], axis=-1)], {"x": ([2, 3, 6], F), "ids": ([4], "int64")},
                                  ["y"]),
    "slice-negative": graph([node("Slice", ["x", "st", "en", "ax", "sp"])], X3, ["y"],
                            {"st": np.array([-3, 0], "int64"), "en": np.array([100, -1], "int64"),
                             "ax": np.array([-1, 1], "int64"), "sp": np.array([2, 1], "int64")}),
    "slice-constant": graph([node("Slice", ["c", "st", "en"], ["s"]), node("Add", ["x", "s"])], X3, ["y"],
                            {"c": _w(2, 3, 8), "st": np.array([0, 0, 2], "int64"), "en": np.array([2, 3, 6], "int64")}),
    "split-sizes": graph([node("Split", ["x", "sp"], ["a", "b"], axis=-1)], X3, ["a", "b"],
                         {"sp": np.array([1, 3], "int64")}),
    "split-equal-opset11": graph([node("Split", ["x"], ["a", "b"], axis=2)], X3, ["a", "b"], opset=11),
    "squeeze-input": graph([node("Squeeze", ["x", "ax"])], {"x": ([2, 1, 4, 1], F)}, ["y"],
                           {"ax": np.array([-1, 1], "int64")}),
    "squeeze-all-opset11": graph([node("Squeeze", ["x"])], {"x": ([2, 1, 4, 1], F)}, ["y"], opset=11),
    "unsqueeze-input": graph([node("Unsqueeze", ["x", "ax"])], X3, ["y"], {"ax": np.array([-1, 0], "int64")}),
    "unsqueeze-attr-opset11": graph([node("Unsqueeze", ["x"], axes=[1, 3])], X3, ["y"], opset=11),
    "concat-negative": graph([node("Concat", ["x", "z"], axis=-2)], {"x": ([2, 3, 4], F), "z": ([2, 1, 4], F)}, ["y"]),
    "expand": graph([node("Expand", ["x", "s"])], {"x": ([3, 1], F)}, ["y"], {"s": np.array([2, 1, 4], "int64")}),
    "where-broadcast": graph([node("Where", ["c", "x", "z"])], {"c": ([1, 4], "bool"), "x": ([3, 1], F), "z": ([3, 4], F)},
                             ["y"]),
    "cast-int-to-float": graph([node("Cast", ["i"], to=TensorProto.FLOAT)], {"i": ([2, 3], "int64")}, ["y"]),
    "cast-bool-to-float": graph([node("Cast", ["c"], to=TensorProto.FLOAT)], {"c": ([2, 3], "bool")}, ["y"]),
    "sub-broadcast": graph([node("Sub", ["x", "c"])], X3, ["y"], {"c": _w(3, 1)}),
    "div-broadcast": graph([node("Div", ["x", "c"])], X3, ["y"], {"c": np.abs(_w(4)) + 1}),
    "pow-scalar": graph([node("Pow", ["pos", "c"])], {"pos": ([2, 3], F)}, ["y"], {"c": np.array(3.0, "float32")}),
    "pow-broadcast": graph([node("Pow", ["pos", "c"])], {"pos": ([2, 3], F)}, ["y"], {"c": np.array([1.0, 2.0, 0.5], "float32")}),
    "sqrt": graph([node("Sqrt", ["pos"])], {"pos": ([2, 3], F)}, ["y"]),
    "erf": graph([node("Erf", ["x"])], X3, ["y"]),
    "tanh": graph([node("Tanh", ["x"])], X3, ["y"]),
    "reduce-mean-negative": graph([node("ReduceMean", ["x"], axes=[-1], keepdims=1)], X3, ["y"]),
    "reduce-mean-no-keepdims": graph([node("ReduceMean", ["x"], axes=[0, -1], keepdims=0)], X3, ["y"]),
    "reduce-mean-opset18": graph([node("ReduceMean", ["x", "ax"], keepdims=1)], X3, ["y"],
                                 {"ax": np.array([-2], "int64")}, opset=18),
    "layer-norm": graph([node("LayerNormalization", ["x", "g", "b"], axis=-1, epsilon=1e-5)], X3, ["y"],
                        {"g": _w(4), "b": _w(4)}, opset=17),
    "layer-norm-two-axes-no-bias": graph([node("LayerNormalization", ["x", "g"], axis=-2)], X3, ["y"],
                                         {"g": _w(3, 4)}, opset=17),
    "softmax-axis1-4d": graph([node("Softmax", ["x"], axis=1)], {"x": ([2, 3, 4, 5], F)}, ["y"]),
    "softmax-negative": graph([node("Softmax", ["x"], axis=-2)], {"x": ([2, 3, 4, 5], F)}, ["y"]),
    "gelu": graph([node("Gelu", ["x"])], X3, ["y"], opset=20),
    "gelu-tanh": graph([node("Gelu", ["x"], approximate="tanh")], X3, ["y"], opset=20),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_op_matches_onnxruntime(case):
    check(CASES[case])


def test_shape_arithmetic_folds_to_static_shapes():
    """Shape -> Gather -> Unsqueeze -> Concat -> Reshape (a dynamic-axes export's head split),
    ConstantOfShape, Range and Cast/Mul on constants: no op is left but the reshape."""
    nodes = [
        node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["b"], name="g0", axis=0),
        helper.make_node("Unsqueeze", ["b", "ax0"], ["bu"], name="u0"),
        helper.make_node("Concat", ["bu", "tail"], ["shape"], name="c0", axis=0),
        helper.make_node("Reshape", ["x", "shape"], ["r"], name="r0"),
        helper.make_node("Range", ["zero", "four", "one"], ["rng"], name="range0"),
        helper.make_node("Cast", ["rng"], ["rngf"], name="cast0", to=TensorProto.FLOAT),
        helper.make_node("ConstantOfShape", ["four1"], ["ones"], name="cos0",
                         value=numpy_helper.from_array(np.array([2.0], "float32"))),
        helper.make_node("Mul", ["rngf", "ones"], ["scale"], name="mul0"),
        helper.make_node("Mul", ["r", "scale"], ["y"], name="mul1"),
    ]
    inits = {"zero": np.array(0, "int64"), "ax0": np.array([0], "int64"), "tail": np.array([-1, 4], "int64"),
             "four": np.array(4, "int64"), "one": np.array(1, "int64"), "four1": np.array([4], "int64")}
    proto = graph(nodes, {"x": ([2, 3, 4], F)}, ["y"], inits)
    ops = [n.op for n in from_onnx(proto).nodes]
    assert ops == ["reshape", "multiply"]
    check(proto)


def test_dimension_arithmetic_on_shapes_is_folded():
    """Sub of two dimensions read from a shape, unsqueezed into a Slice bound (GPT-2's causal
    mask): computed here, the Slice reads constant bounds."""
    nodes = [
        node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "one"], ["n"], name="g1", axis=0),
        helper.make_node("Sub", ["n", "two"], ["m"], name="sub0"),
        helper.make_node("Unsqueeze", ["m", "ax0"], ["end"], name="u1"),
        helper.make_node("Slice", ["x", "ax0", "end", "ax1"], ["y"], name="slice0"),
    ]
    inits = {"one": np.array(1, "int64"), "two": np.array(2, "int64"), "ax0": np.array([0], "int64"),
             "ax1": np.array([1], "int64")}
    proto = graph(nodes, {"x": ([2, 6], F)}, ["y"], inits)
    assert [(n.op, n.attrs["end"]) for n in from_onnx(proto).nodes] == [("strided_slice", (4,))]
    check(proto)


@pytest.mark.parametrize("proto,match", [
    (graph([node("Einsum", ["x", "x"], equation="ij,jk->ik")], {"x": ([2, 2], F)}, ["y"]),
     r"node 'einsum_node' \(Einsum\): unsupported operator"),
    (graph([node("Gelu", ["x"], approximate="fast")], X3, ["y"], opset=20),
     r"node 'gelu_node' \(Gelu\): attribute 'approximate' = 'fast'"),
    (graph([node("LayerNormalization", ["x", "g"], stash_type=0)], X3, ["y"], {"g": _w(4)}, opset=17),
     r"node 'layernormalization_node' \(LayerNormalization\): attribute 'stash_type' = 0"),
    (graph([node("Cast", ["x"], to=TensorProto.FLOAT16)], X3, ["y"]),
     r"node 'cast_node' \(Cast\): attribute 'to' = 10"),
    (graph([node("Reshape", ["x", "s"])], {"x": ([2, 3, 4], F), "s": ([3], "int64")}, ["y"]),
     r"node 'reshape_node' \(Reshape\): the target shape \('s'\) must be a constant"),
    (graph([node("Squeeze", ["x", "ax"])], X3, ["y"], {"ax": np.array([1], "int64")}),
     r"node 'squeeze_node' \(Squeeze\): axis 1 has size 3"),
    (graph([node("Transpose", ["x"], perm=[0, 3, 1])], X3, ["y"]),
     r"node 'transpose_node' \(Transpose\): perm axis 3 is out of range for rank 3"),
], ids=["op", "gelu-approximate", "layer-norm-stash-type", "cast-float16", "dynamic-reshape", "squeeze-non-unit",
        "transpose-perm"])
def test_unsupported_op_or_attribute_is_one_clear_error(proto, match):
    with pytest.raises(ModelError, match=match) as info:
        from_onnx(proto)
    assert "\n" not in str(info.value)


def test_layer_norm_before_opset_17_is_refused():
    proto = graph([node("LayerNormalization", ["x", "g"])], X3, ["y"], {"g": _w(4)}, opset=16)
    with pytest.raises(ModelError, match=r"\(LayerNormalization\): LayerNormalization is an opset-17 op"):
        from_onnx(proto)


# ---------------------------------------------------------------------------------------------
# Tiny models
# ---------------------------------------------------------------------------------------------


def _feeds(proto: onnx.ModelProto, vocab: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    out = {}
    for info in proto.graph.input:
        shape = [d.dim_value for d in info.type.tensor_type.shape.dim]
        out[info.name] = rng.integers(0, vocab if info.name == "input_ids" else 2, size=shape).astype("int64")
    return out


def _tiny(kind: str, opset: int = 14) -> onnx.ModelProto:
    from msdb.model import zoo

    if kind == "bert":
        return zoo.bert(layers=1, hidden=64, heads=2, seq=16, vocab=100, opset=opset)
    return zoo.gpt2(layers=1, hidden=64, heads=2, seq=16, vocab=100, max_positions=32, opset=opset)


@pytest.mark.parametrize("kind,opset", [("bert", 14), ("bert", 17), ("bert", 20), ("gpt2", 14)])
def test_tiny_transformer_lowered_matches_onnxruntime(kind, opset):
    proto = _tiny(kind, opset)
    onnx.checker.check_model(proto, full_check=True)
    model = check(proto, _feeds(proto, 100))
    assert {i.name: i.dtype for i in model.inputs} == {i.name: "int64" for i in proto.graph.input}


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["bert", "gpt2"])
def test_tiny_transformer_compiles_with_default_schedules(kind):
    from msdb.tuner.compile.compiler import compile_model

    proto = _tiny(kind)
    feeds = _feeds(proto, 100, seed=1)
    compiled = compile_model(lower(from_onnx(proto)))
    ours, theirs = compiled.run(feeds), ort_run(proto, feeds)
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-4, atol=1e-5)


def test_zoo_transformers_are_seeded_and_sized():
    from msdb.model import zoo

    a, b = zoo.gpt2(layers=1, hidden=32, heads=2, seq=8, vocab=50, max_positions=16), zoo.gpt2(
        layers=1, hidden=32, heads=2, seq=8, vocab=50, max_positions=16)
    assert a.SerializeToString() == b.SerializeToString()
    bert = zoo.bert(layers=2, hidden=32, heads=4, seq=8, vocab=50)
    assert sum(n.op_type == "Softmax" for n in bert.graph.node) == 2
    assert [d.dim_value for d in bert.graph.output[0].type.tensor_type.shape.dim] == [1, 8, 32]
