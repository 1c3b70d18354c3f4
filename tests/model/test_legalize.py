"""Legalization numerics: each op's lowered PrimFunc, run by msdb's interpreter, computes what
NumPy computes; fused chains too; bad ops and attributes are clear ModelErrors
(docs/architecture.md, "Legalization"). Structure against TVM is in test_legalize_tvm.py."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from msdb.ir import expr as E
from msdb.ir import te
from msdb.ir.function import PrimFunc
from msdb.ir.interpreter import interpret
from msdb.model import ModelError
from msdb.model.legalize import known_ops, legalize_op, op_pattern, tir_op_pattern
from msdb.model.ops import OpPattern
from tests.model.conftest import block_names

RNG = np.random.default_rng(12)


def placeholder(name: str, shape: tuple[int, ...], dtype: str = "float32") -> te.Tensor:
    return te.placeholder(tuple(E.make_const(d, "int64") for d in shape), dtype, name)


def run(op: str, arrays: dict[str, np.ndarray], attrs: dict[str, Any] | None = None, extra: dict[int, Any] | None = None,
        constants: dict[str, np.ndarray] | None = None) -> tuple[list[np.ndarray], PrimFunc]:
    """Lower `op` on placeholders for `arrays` (plus Python scalars at positions of `extra`),
    run it, and return its outputs and the function."""
    holders = [placeholder(n, a.shape, str(a.dtype)) for n, a in arrays.items()]
    operands: list[Any] = list(holders)
    for position, value in sorted((extra or {}).items()):
        operands.insert(position, value)
    out = legalize_op(op, operands, attrs or {}, constants=constants)
    outs = list(out) if isinstance(out, tuple) else [out]
    func = te.create_prim_func(holders + outs)
    results = [np.zeros(tuple(E.const_int(d) for d in t.shape), dtype=t.dtype) for t in outs]
    interpret(func, *arrays.values(), *results)
    return results, func


def rand(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


# ---- NumPy references ---------------------------------------------------------------------


def ref_conv(x: np.ndarray, w: np.ndarray, strides=(1, 1), pads=(0, 0, 0, 0), dil=(1, 1), groups=1) -> np.ndarray:
    n, c, h, wd = x.shape
    f, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    oh = (h + pads[0] + pads[2] - (kh - 1) * dil[0] - 1) // strides[0] + 1
    ow = (wd + pads[1] + pads[3] - (kw - 1) * dil[1] - 1) // strides[1] + 1
    out = np.zeros((n, f, oh, ow), np.float64)
    fg = f // groups
    for ff in range(f):
        g = ff // fg
        for ry in range(kh):
            for rx in range(kw):
                patch = xp[:, g * cg:(g + 1) * cg, ry * dil[0]: ry * dil[0] + strides[0] * oh: strides[0],
                           rx * dil[1]: rx * dil[1] + strides[1] * ow: strides[1]]
                out[:, ff] += np.einsum("nchw,c->nhw", patch, w[ff, :, ry, rx])
    return out.astype(np.float32)


def ref_pool(x: np.ndarray, kind: str, k, s, pads, ceil=False, include_pad=False) -> np.ndarray:
    n, c, h, w = x.shape
    def size(d, kk, ss, pb, pe):
        out = (d + pb + pe - kk + (ss - 1 if ceil else 0)) // ss + 1
        if ceil and (out - 1) * ss >= d + pb:
            out -= 1
        return out
    oh, ow = size(h, k[0], s[0], pads[0], pads[2]), size(w, k[1], s[1], pads[1], pads[3])
    out = np.zeros((n, c, oh, ow), np.float32)
    for i in range(oh):
        for j in range(ow):
            y0, x0 = i * s[0] - pads[0], j * s[1] - pads[1]
            ys, xs = slice(max(y0, 0), min(y0 + k[0], h)), slice(max(x0, 0), min(x0 + k[1], w))
            window = x[:, :, ys, xs]
            if kind == "max":
                out[:, :, i, j] = window.max(axis=(2, 3))
            else:
                if include_pad:
                    count = (min(y0 + k[0], h + pads[2]) - y0) * (min(x0 + k[1], w + pads[3]) - x0)
                else:
                    count = window.shape[2] * window.shape[3]
                out[:, :, i, j] = window.sum(axis=(2, 3)) / max(count, 1)
    return out


# ---- per-op numerics ----------------------------------------------------------------------

CONV_CASES = [
    ((1, 4, 8, 8), (8, 4, 3, 3), {"strides": (1, 1), "padding": (1, 1, 1, 1)}),
    ((1, 4, 9, 9), (8, 4, 3, 3), {"strides": (2, 2), "padding": (1, 1, 1, 1)}),
    ((1, 4, 8, 8), (8, 4, 1, 1), {"strides": (2, 2)}),
    ((1, 4, 8, 8), (4, 1, 3, 3), {"padding": (1, 1, 1, 1), "groups": 4}),
    ((1, 4, 9, 9), (6, 2, 3, 3), {"strides": (1, 2), "padding": (1, 0, 2, 1), "dilation": (2, 1), "groups": 2}),
]


@pytest.mark.parametrize("xs,ws,attrs", CONV_CASES)
def test_conv2d_computes_the_convolution(xs, ws, attrs):
    x, w = rand(*xs), rand(*ws)
    (out,), func = run("nn.conv2d", {"x": x, "w": w}, attrs)
    pads = attrs.get("padding", (0, 0, 0, 0))
    expected = ref_conv(x, w, attrs.get("strides", (1, 1)), pads, attrs.get("dilation", (1, 1)), attrs.get("groups", 1))
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)
    groups = attrs.get("groups", 1)
    assert block_names(func) == ["pad_temp", "group_conv2d_nchw" if groups > 1 else "conv2d_nchw"]
    assert tir_op_pattern(func) == op_pattern("nn.conv2d") == OpPattern.OUT_EWISE_FUSABLE


POOL_CASES = [
    ("max", {"pool_size": (3, 3), "strides": (2, 2), "padding": (1, 1, 1, 1)}),
    ("max", {"pool_size": (2, 2), "strides": (2, 2)}),
    ("max", {"pool_size": (2, 2), "strides": (2, 2), "ceil_mode": True}),
    ("avg", {"pool_size": (2, 2), "strides": (2, 2)}),
    ("avg", {"pool_size": (3, 3), "strides": (2, 2), "padding": (1, 1, 1, 1)}),
    ("avg", {"pool_size": (3, 3), "strides": (2, 2), "padding": (1, 1, 1, 1), "count_include_pad": True}),
]


@pytest.mark.parametrize("kind,attrs", POOL_CASES)
def test_pools_compute_max_and_average(kind, attrs):
    x = rand(1, 2, 7, 7)
    (out,), func = run(f"nn.{kind}_pool2d", {"x": x}, attrs)
    expected = ref_pool(x, kind, attrs["pool_size"], attrs["strides"], attrs.get("padding", (0, 0, 0, 0)),
                        attrs.get("ceil_mode", False), attrs.get("count_include_pad", False))
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)
    names = block_names(func)
    assert names[-1] == f"pool_{kind}"
    assert ("pad_temp" in names) == bool(any(attrs.get("padding", ())) or attrs.get("ceil_mode"))
    assert tir_op_pattern(func) == OpPattern.OUT_EWISE_FUSABLE


def test_mean_and_sum_reduce_the_named_axes():
    x = rand(2, 3, 4, 5)
    (out,), func = run("mean", {"x": x}, {"axis": [2, 3], "keepdims": True})
    np.testing.assert_allclose(out, x.mean(axis=(2, 3), keepdims=True), rtol=1e-5, atol=1e-6)
    assert block_names(func) == ["x_red", "T_divide"]
    (out,), _ = run("mean", {"x": x}, {"axis": [-1]})
    np.testing.assert_allclose(out, x.mean(axis=-1), rtol=1e-5, atol=1e-6)
    (out,), func = run("sum", {"x": x}, {"axis": [1]})
    np.testing.assert_allclose(out, x.sum(axis=1), rtol=1e-5, atol=1e-5)
    assert tir_op_pattern(func) == op_pattern("sum") == OpPattern.COMM_REDUCE


def test_shape_ops_move_data():
    x = rand(2, 4, 3, 3)
    (out,), func = run("reshape", {"x": x}, {"shape": (2, -1)})
    np.testing.assert_array_equal(out, x.reshape(2, 36))
    assert block_names(func) == ["T_reshape"] and tir_op_pattern(func) == OpPattern.INJECTIVE
    (out,), _ = run("flatten", {"x": x})
    np.testing.assert_array_equal(out, x.reshape(-1))
    (out,), func = run("permute_dims", {"x": x}, {"axes": [2, 0, 3, 1]})
    np.testing.assert_array_equal(out, x.transpose(2, 0, 3, 1))
    assert block_names(func) == ["T_transpose"]
    (out,), _ = run("permute_dims", {"x": x})
    np.testing.assert_array_equal(out, x.transpose())
    y, z = rand(2, 1, 3, 3), rand(2, 2, 3, 3)
    (out,), func = run("concat", {"x": x, "y": y, "z": z}, {"axis": 1})
    np.testing.assert_array_equal(out, np.concatenate([x, y, z], axis=1))
    assert block_names(func) == ["T_concat"] and tir_op_pattern(func) == OpPattern.INJECTIVE


@pytest.mark.parametrize("a_shape,b_shape", [((3, 4), (4, 5)), ((2, 1, 3, 4), (5, 4, 6)), ((4,), (3, 4, 5)), ((3, 4), (4,))])
def test_matmul_broadcasts_batches_like_numpy(a_shape, b_shape):
    a, b = rand(*a_shape), rand(*b_shape)
    (out,), func = run("matmul", {"a": a, "b": b})
    np.testing.assert_allclose(out, np.matmul(a, b), rtol=1e-5, atol=1e-5)
    assert block_names(func) == ["matmul"]


def test_softmax_normalizes_along_the_axis():
    x = rand(3, 5, 2)
    (out,), func = run("nn.softmax", {"x": x}, {"axis": -2})
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(out, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-6)
    assert block_names(func) == ["T_softmax_maxelem", "T_softmax_exp", "T_softmax_expsum", "T_softmax_norm"]


def test_batch_norm_inference_has_three_outputs():
    x, g, b, m = rand(2, 3, 4, 4), rand(3), rand(3), rand(3)
    v = np.abs(rand(3)) + 0.5
    (out, mean, var), func = run("nn.batch_norm", {"x": x, "g": g, "b": b, "m": m, "v": v}, {"epsilon": 1e-3})
    shape = (1, 3, 1, 1)
    expected = (x - m.reshape(shape)) / np.sqrt(v.reshape(shape) + 1e-3) * g.reshape(shape) + b.reshape(shape)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(mean, m)
    np.testing.assert_array_equal(var, v)
    assert block_names(func) == ["T_reshape", "T_subtract", "T_reshape_1", "T_add", "compute", "T_divide",
                                 "T_reshape_2", "T_multiply", "T_reshape_3", "T_add_1", "T_multiply_1", "T_multiply_2"]
    assert tir_op_pattern(func) == op_pattern("nn.batch_norm") == OpPattern.INJECTIVE


@pytest.mark.parametrize("op,fn", [("add", np.add), ("subtract", np.subtract), ("multiply", np.multiply),
                                   ("divide", np.divide), ("maximum", np.maximum), ("minimum", np.minimum)])
@pytest.mark.parametrize("a_shape,b_shape", [((2, 3, 4), (2, 3, 4)), ((1, 3, 4, 4), (1, 3, 1, 1)), ((2, 5), (5,)),
                                             ((3, 1), (1, 4)), ((2, 3), ())])
def test_binary_ops_broadcast_like_numpy(op, fn, a_shape, b_shape):
    a, b = rand(*a_shape), rand(*b_shape) + (3.0 if op == "divide" else 0.0)
    b = np.asarray(b, np.float32)
    (out,), func = run(op, {"a": a, "b": b})
    np.testing.assert_allclose(out, fn(a, b), rtol=1e-6)
    assert block_names(func) == ["T_" + op]
    expected = OpPattern.BROADCAST if (a_shape, b_shape) == ((3, 1), (1, 4)) else OpPattern.ELEMWISE
    assert tir_op_pattern(func) == expected


def test_scalar_constants_and_numbers_fold_into_the_block():
    x = rand(2, 3)
    two = np.asarray(2.0, np.float32)
    (out,), func = run("multiply", {"x": x, "c": two}, constants={"c": two})
    np.testing.assert_allclose(out, x * 2)
    assert len(func.params) == 3  # the constant's buffer stays a parameter, unread
    (out,), func = run("subtract", {"x": x}, extra={0: 1.5})
    np.testing.assert_allclose(out, 1.5 - x)
    assert len(func.params) == 2
    (out,), _ = run("maximum", {"x": x}, extra={1: 0.0})
    np.testing.assert_allclose(out, np.maximum(x, 0))
    # Only a 0-d constant folds; a 1-element vector is a tensor.
    vec = np.asarray([2.0], np.float32)
    (out,), func = run("multiply", {"x": x, "c": vec}, constants={"c": vec})
    np.testing.assert_allclose(out, x * vec)


def test_relu_sqrt_and_clip():
    x = rand(2, 3, 4)
    (out,), func = run("nn.relu", {"x": x})
    np.testing.assert_array_equal(out, np.maximum(x, 0))
    assert block_names(func) == ["compute"] and tir_op_pattern(func) == op_pattern("nn.relu") == OpPattern.ELEMWISE
    (out,), _ = run("sqrt", {"x": np.abs(x)})
    np.testing.assert_allclose(out, np.sqrt(np.abs(x)), rtol=1e-6)
    (out,), _ = run("clip", {"x": x * 5}, {"min": 0.0, "max": 6.0})
    np.testing.assert_allclose(out, np.clip(x * 5, 0, 6))


def test_ops_accept_computed_tensors_and_fuse_like_fusetir():
    """conv -> bias add -> batch_norm -> relu chained on te outputs, lowered as one function."""
    x, w, bias = rand(1, 3, 6, 6), rand(4, 3, 3, 3), rand(1, 4, 1, 1)
    g, b, m, v = rand(4), rand(4), rand(4), np.abs(rand(4)) + 0.5
    arrays = {"x": x, "w": w, "bias": bias, "g": g, "b": b, "m": m, "v": v}
    p = {n: placeholder(n, a.shape) for n, a in arrays.items()}
    conv = legalize_op("nn.conv2d", [p["x"], p["w"]], {"padding": (1, 1, 1, 1)})
    added = legalize_op("add", [conv, p["bias"]], {})
    normed = legalize_op("nn.batch_norm", [added, p["g"], p["b"], p["m"], p["v"]], {})
    assert isinstance(conv, te.Tensor) and isinstance(added, te.Tensor) and isinstance(normed, tuple)
    relu = legalize_op("nn.relu", [normed[0]], {})
    assert isinstance(relu, te.Tensor)
    func = te.create_fused_prim_func(list(p.values()) + [relu], [[conv], [added], list(normed), [relu]])
    out = np.zeros((1, 4, 6, 6), np.float32)
    interpret(func, *arrays.values(), out)
    y = ref_conv(x, w, pads=(1, 1, 1, 1)) + bias
    s = (1, 4, 1, 1)
    expected = np.maximum((y - m.reshape(s)) / np.sqrt(v.reshape(s) + 1e-5) * g.reshape(s) + b.reshape(s), 0)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)
    # FuseTIR's names: stage-local `_1` suffixes, then a trailing number across stages.
    assert block_names(func) == [
        "pad_temp", "conv2d_nchw", "T_add", "T_reshape", "T_subtract", "T_reshape_1", "T_add1", "compute",
        "T_divide", "T_reshape_2", "T_multiply", "T_reshape_3", "T_add_1", "T_multiply_1", "T_multiply_2", "compute1"]
    assert [buf.name for buf in func.buffers][-1] == "compute_intermediate"


def test_unknown_ops_and_bad_attributes_are_model_errors():
    x = placeholder("x", (1, 4, 8, 8))
    with pytest.raises(ModelError, match="'nn.conv3d'"):
        legalize_op("nn.conv3d", [x], {})
    with pytest.raises(ModelError, match="'nn.conv3d'"):
        op_pattern("nn.conv3d", {})
    with pytest.raises(ModelError, match="nn.relu: takes 1 inputs, got 2"):
        legalize_op("nn.relu", [x, x], {})
    with pytest.raises(ModelError, match="padding"):
        legalize_op("nn.conv2d", [x, placeholder("w", (4, 4, 3, 3))], {"padding": (1, 1, 1)})
    with pytest.raises(ModelError, match="groups=3"):
        legalize_op("nn.conv2d", [x, placeholder("w", (4, 4, 3, 3))], {"groups": 3})
    with pytest.raises(ModelError, match="data_layout='NCHW'"):
        legalize_op("nn.conv2d", [x, placeholder("w", (4, 4, 3, 3))], {"data_layout": "NHWC"})
    with pytest.raises(ModelError, match="cannot broadcast"):
        legalize_op("add", [x, placeholder("y", (1, 3, 1, 1))], {})
    with pytest.raises(ModelError, match="cannot reshape"):
        legalize_op("reshape", [x], {"shape": (3, -1)})
    with pytest.raises(ModelError, match="pool_size"):
        legalize_op("nn.max_pool2d", [x], {})
    with pytest.raises(ModelError, match="training"):
        legalize_op("nn.batch_norm", [x] + [placeholder(n, (4,)) for n in "gbmv"], {"training": True})
    with pytest.raises(ModelError, match="reduction dimensions"):
        legalize_op("matmul", [placeholder("a", (2, 3)), placeholder("b", (4, 5))], {})
    assert {"nn.conv2d", "add", "nn.batch_norm", "nn.softmax", "matmul", "mean"} <= set(known_ops())


def test_fused_block_names_follow_fusetir_trailing_numbers():
    """A taken name loses its trailing digits and takes the next free number after them."""
    x = placeholder("x", (4,))
    first = te.compute(x.shape, lambda i: x[i] + 1.0, name="T_add_1")
    second = te.compute(x.shape, lambda i: first[i] * 2.0, name="T_add_1")
    third = te.compute(x.shape, lambda i: second[i] - 1.0, name="T_add")
    fourth = te.compute(x.shape, lambda i: third[i] - 1.0, name="T_add")
    func = te.create_fused_prim_func([x, fourth], [[first], [second], [third], [fourth]])
    assert block_names(func) == ["T_add_1", "T_add_2", "T_add", "T_add1"]
    # Buffer names as TVM's printer shows them: the parameter is named first.
    assert [b.name for b in func.buffers] == ["x", "T_add_intermediate"]
    assert [b.name for b in func.root_block.alloc_buffers] == [
        "T_add_1_intermediate", "T_add_1_intermediate_1", "T_add_intermediate_1"]
    out = np.zeros(4, np.float32)
    interpret(func, np.arange(4, dtype=np.float32), out)
    np.testing.assert_array_equal(out, (np.arange(4) + 1.0) * 2.0 - 2.0)


def test_fused_lowering_rejects_inconsistent_stages():
    x = placeholder("x", (4,))
    y = placeholder("y", (4,))
    a = te.compute(x.shape, lambda i: x[i] + y[i], name="a")
    b = te.compute(x.shape, lambda i: a[i] * 2.0, name="b")
    with pytest.raises(te.TEError, match="'y' is read"):
        te.create_fused_prim_func([x, b], [[a], [b]])
    with pytest.raises(te.TEError, match="'a' is read before"):
        te.create_fused_prim_func([x, y, b], [[b], [a]])
    with pytest.raises(te.TEError, match="not a stage output"):
        te.create_fused_prim_func([x, y, b], [[a]])
