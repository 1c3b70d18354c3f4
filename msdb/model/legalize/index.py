"""Indexing: `take` (ONNX Gather), `strided_slice` (Slice) and `where` (docs/architecture.md,
"Legalization"). All are topi's C++ computes (include/tvm/topi/transform.h,
broadcast.h): blocks `T_take`, `T_strided_slice_with_axes`, `T_where`, axes ax0, ax1, ...
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from msdb.ir import expr as E
from msdb.ir import te
from msdb.model.graph import ModelError
from msdb.model.legalize.common import attr_int, ax_compute, expect_tensor, i64, static_shape
from msdb.model.legalize.registry import Legalized, Operand, register
from msdb.model.ops import OpPattern

__all__ = ["slice_bounds", "broadcast_index"]


@register("take", OpPattern.OPAQUE, (2, 2))
def take(inputs: Sequence[Operand], attrs: Mapping[str, Any], constants: Mapping[str, np.ndarray]) -> Legalized:
    """`take(data, indices)`, attrs `axis` (int) and `mode` ("fast", "wrap" or "clip"): the
    output is data.shape[:axis] + indices.shape + data.shape[axis+1:], the indices read as
    they are ("fast"), wrapped (`truncmod(truncmod(i, n) + n, n)`) or clamped. A 0-d index
    tensor stays a buffer (TVM passes the constant, it does not fold it)."""
    data, indices = expect_tensor(inputs[0], "take", 0), expect_tensor(inputs[1], "take", 1)
    shape = static_shape(data, "take")
    axis = attr_int(attrs, "axis", 0, "take")
    if not -len(shape) <= axis < len(shape):
        raise ModelError(f"take: axis {axis} out of range for a {len(shape)}-d input")
    axis %= len(shape)
    mode = str(attrs.get("mode", "fast"))
    if mode not in ("fast", "wrap", "clip"):
        raise ModelError(f"take: mode {mode!r} is not fast, wrap or clip")
    ishape = static_shape(indices, "take")
    n = i64(shape[axis])
    out_shape = list(shape[:axis]) + list(ishape) + list(shape[axis + 1:])

    def body(*out: E.PrimExpr) -> E.PrimExpr:
        index: E.PrimExpr = indices[tuple(out[axis:axis + len(ishape)])]
        if mode == "wrap":
            index = te.truncmod(te.truncmod(index, n) + n, n)
        elif mode == "clip":
            index = E.Min(*E._binary_operands(E.Max(*E._binary_operands(index, i64(0))), i64(shape[axis] - 1)))
        return data[tuple(out[:axis]) + (index,) + tuple(out[axis + len(ishape):])]

    return ax_compute(out_shape, body, "T_take")


def slice_bounds(extent: int, begin: int, end: int, stride: int) -> tuple[int, int]:
    """topi's canonical begin and the output extent of one sliced axis (Python's slicing,
    begin/end clamped to the axis; `stride` non-zero)."""
    start, _, _ = slice(begin, end, stride).indices(extent)
    return start, len(range(*slice(begin, end, stride).indices(extent)))


@register("strided_slice", OpPattern.INJECTIVE, (1, 1))
def strided_slice(inputs: Sequence[Operand], attrs: Mapping[str, Any], constants: Mapping[str, np.ndarray]) -> Legalized:
    """`strided_slice(x)`, attrs `axes`, `begin`, `end`, `strides` (int lists): topi's
    StridedSliceWithAxes, `out[i] = x[begin + i * stride]` on the sliced axes."""
    x = expect_tensor(inputs[0], "strided_slice", 0)
    shape = static_shape(x, "strided_slice")
    axes = [int(a) % len(shape) for a in attrs.get("axes", ())]
    begins = [int(v) for v in attrs.get("begin", ())]
    ends = [int(v) for v in attrs.get("end", ())]
    strides = [int(v) for v in attrs.get("strides", [1] * len(axes))]
    if not len(axes) == len(begins) == len(ends) == len(strides) or 0 in strides:
        raise ModelError(f"strided_slice: axes {axes}, begin {begins}, end {ends}, strides {strides} do not match")
    out_shape = list(shape)
    start: dict[int, tuple[int, int]] = {}
    for a, b, e, s in zip(axes, begins, ends, strides):
        first, out_shape[a] = slice_bounds(shape[a], b, e, s)
        start[a] = (first, s)

    def body(*out: E.PrimExpr) -> E.PrimExpr:
        index: list[E.PrimExpr] = []
        for d, v in enumerate(out):
            if d not in start:
                index.append(v)
                continue
            first, step = start[d]
            term = v if step == 1 else v * i64(step)
            index.append(term if first == 0 else term + i64(first))
        return x[tuple(index)]

    return ax_compute(out_shape, body, "T_strided_slice_with_axes")


def broadcast_index(out: Sequence[E.PrimExpr], out_shape: Sequence[int], shape: Sequence[int]) -> tuple[E.PrimExpr, ...]:
    """The index of a tensor of `shape` broadcast (right-aligned) to `out_shape`: a dimension
    of 1 under a larger output dimension reads 0 (topi's broadcast index)."""
    lead = len(out_shape) - len(shape)
    return tuple(out[lead + d] if n == out_shape[lead + d] else i64(0) for d, n in enumerate(shape))


@register("where", OpPattern.BROADCAST, (3, 3))
def where(inputs: Sequence[Operand], attrs: Mapping[str, Any], constants: Mapping[str, np.ndarray]) -> Legalized:
    """`where(cond, x, y)`, no attrs: topi.where with numpy broadcasting, block `T_where` =
    `Select(0 < int64(cond), x, y)` (a 0-d constant stays a buffer)."""
    cond, x, y = (expect_tensor(t, "where", i) for i, t in enumerate(inputs))
    shapes = [static_shape(t, "where") for t in (cond, x, y)]
    try:
        out_shape = [int(d) for d in np.broadcast_shapes(*shapes)]
    except ValueError:
        raise ModelError(f"where: cannot broadcast shapes {[list(s) for s in shapes]}") from None

    def body(*out: E.PrimExpr) -> E.PrimExpr:
        c, a, b = (t[broadcast_index(out, out_shape, s)] for t, s in zip((cond, x, y), shapes))
        test = c if c.dtype == "int64" else E.Cast("int64", c)
        return E.Select(E.LT(i64(0), test), a, b)

    return ax_compute(out_shape, body, "T_where")
