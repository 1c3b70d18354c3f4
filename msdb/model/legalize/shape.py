"""Data movement: `reshape`, `flatten`, `permute_dims`, `concat` (docs/architecture.md,
"Legalization"). All are topi's C++ injective computes (include/tvm/topi/transform.h).
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np

from msdb.ir import expr as E
from msdb.ir import te
from msdb.model.graph import ModelError
from msdb.model.legalize.common import attr_int, ax_compute, expect_tensor, i64, static_shape
from msdb.model.legalize.registry import Legalized, Operand, register
from msdb.model.ops import OpPattern

__all__ = ["topi_reshape", "resolve_shape"]


def resolve_shape(shape: Sequence[int], source: tuple[int, ...], op: str) -> list[int]:
    """Relax reshape semantics: at most one -1 (inferred); the element count must match."""
    target = [int(d) for d in shape]
    total = math.prod(source)
    if target.count(-1) > 1 or any(d < -1 for d in target):
        raise ModelError(f"{op}: invalid target shape {target}")
    if -1 in target:
        known = math.prod(d for d in target if d != -1)
        if known == 0 or total % known:
            raise ModelError(f"{op}: cannot reshape {list(source)} to {target}")
        target[target.index(-1)] = total // known
    if math.prod(target) != total:
        raise ModelError(f"{op}: cannot reshape {list(source)} ({total} elements) to {target}")
    return target


def topi_reshape(x: te.Tensor, target: Sequence[int], op: str = "reshape") -> te.Tensor:
    """topi.reshape: `x[unravel(ravel(out_index, target), x.shape)]`, block `T_reshape`."""
    source = static_shape(x, op)

    def body(*out: E.PrimExpr) -> E.PrimExpr:
        flat: E.PrimExpr = i64(0) if not out else out[0]
        for d in range(1, len(out)):
            flat = flat * i64(target[d]) + out[d]
        index: list[E.PrimExpr] = []
        for n in reversed(source):
            index.append(te.floormod(flat, i64(n)))
            flat = te.floordiv(flat, i64(n))
        return x[tuple(reversed(index))]

    return ax_compute(list(target), body, name="T_reshape")


@register("reshape", OpPattern.INJECTIVE, (1, 1))
def reshape(inputs: Sequence[Operand], attrs: Mapping[str, Any], constants: Mapping[str, np.ndarray]) -> Legalized:
    """`reshape(x)`, attr `shape` (int list; one -1 is inferred)."""
    x = expect_tensor(inputs[0], "reshape", 0)
    if "shape" not in attrs:
        raise ModelError("reshape: attribute 'shape' is required")
    return topi_reshape(x, resolve_shape(attrs["shape"], static_shape(x, "reshape"), "reshape"))


@register("flatten", OpPattern.INJECTIVE, (1, 1))
def flatten(inputs: Sequence[Operand], attrs: Mapping[str, Any], constants: Mapping[str, np.ndarray]) -> Legalized:
    """Relax `flatten(x)` (to one dimension), no attrs: topi.reshape to `[size]`. (ONNX
    Flatten arrives as `reshape` to 2-D.)"""
    x = expect_tensor(inputs[0], "flatten", 0)
    return topi_reshape(x, [math.prod(static_shape(x, "flatten"))], "flatten")


@register("permute_dims", OpPattern.INJECTIVE, (1, 1))
def permute_dims(inputs: Sequence[Operand], attrs: Mapping[str, Any], constants: Mapping[str, np.ndarray]) -> Legalized:
    """`permute_dims(x)`, attr `axes` (int list, None = reverse): topi.transpose, block
    `T_transpose` with `out[i...] = x[...]`, input dimension axes[j] read at output axis j."""
    x = expect_tensor(inputs[0], "permute_dims", 0)
    ndim = x.ndim
    axes_attr = attrs.get("axes")
    axes = list(range(ndim - 1, -1, -1)) if axes_attr is None else [int(a) for a in axes_attr]
    axes = [a + ndim if a < 0 else a for a in axes]
    if sorted(axes) != list(range(ndim)):
        raise ModelError(f"permute_dims: axes {list(axes_attr or [])} are not a permutation of {ndim} dimensions")
    shape = static_shape(x, "permute_dims")

    def body(*out: E.PrimExpr) -> E.PrimExpr:
        index: list[E.PrimExpr] = [out[0]] * ndim
        for j, a in enumerate(axes):
            index[a] = out[j]
        return x[tuple(index)]

    return ax_compute([shape[a] for a in axes], body, name="T_transpose")


@register("concat", OpPattern.INJECTIVE, (1, 1 << 16))
def concat(inputs: Sequence[Operand], attrs: Mapping[str, Any], constants: Mapping[str, np.ndarray]) -> Legalized:
    """`concat(xs)`, attr `axis` (int, default 0): topi.concatenate, block `T_concat` choosing
    the last input whose offset is reached (`if_then_else(axis_index >= offset, ...)`)."""
    tensors = [expect_tensor(t, "concat", i) for i, t in enumerate(inputs)]
    shapes = [static_shape(t, "concat") for t in tensors]
    ndim = len(shapes[0])
    axis = attr_int(attrs, "axis", 0, "concat")
    if not -ndim <= axis < ndim:
        raise ModelError(f"concat: axis {axis} out of range for {ndim}-d inputs")
    axis %= ndim
    for s in shapes[1:]:
        if len(s) != ndim or any(a != b for d, (a, b) in enumerate(zip(s, shapes[0])) if d != axis):
            raise ModelError(f"concat: shapes {[list(s) for s in shapes]} differ outside axis {axis}")
    sizes = [s[axis] for s in shapes]
    out_shape = list(shapes[0])
    out_shape[axis] = sum(sizes)

    def body(*out: E.PrimExpr) -> E.PrimExpr:
        result: E.PrimExpr = tensors[0][out]
        position: E.PrimExpr = out[axis]
        for i in range(len(tensors) - 1):
            position = position - i64(sizes[i])
            index = out[:axis] + (position,) + out[axis + 1:]
            result = te.if_then_else(position >= i64(0), tensors[i + 1][index], result)
        return result

    return ax_compute(out_shape, body, name="T_concat")
