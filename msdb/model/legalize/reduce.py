"""Reductions: `sum` and `mean` (docs/architecture.md, "Legalization").

topi's CommReduce (include/tvm/topi/reduction.h) names the block `<input>_red`, its spatial
axes ax0, ... over the output shape and its reduce axes k<d> after the reduced input dimension
d; `mean` divides that sum by the number of reduced elements in a `T_divide` block.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np

from msdb.ir import expr as E
from msdb.ir import te
from msdb.model.graph import ModelError
from msdb.model.legalize.common import ax_compute, expect_tensor, i64, scalar_binary, static_shape
from msdb.model.legalize.registry import Legalized, Operand, register
from msdb.model.ops import OpPattern

__all__ = ["topi_sum"]


def _real_axes(axis: Any, ndim: int, op: str) -> list[int]:
    if axis is None:
        return list(range(ndim))
    values = [int(axis)] if isinstance(axis, (int, np.integer)) else [int(a) for a in axis]
    real = []
    for a in values:
        if not -ndim <= a < ndim:
            raise ModelError(f"{op}: axis {a} out of range for a {ndim}-d input")
        real.append(a + ndim if a < 0 else a)
    return sorted(set(real))


def topi_sum(x: te.Tensor, axes: list[int], keepdims: bool, op: str) -> te.Tensor:
    """topi.sum over `axes` (sorted, non-negative)."""
    shape = static_shape(x, op)
    reduce_axes = [te.reduce_axis((i64(0), i64(shape[d])), name=f"k{d}") for d in axes]
    if keepdims:
        out_shape = [1 if d in axes else n for d, n in enumerate(shape)]
    else:
        out_shape = [n for d, n in enumerate(shape) if d not in axes]

    def body(*out: E.PrimExpr) -> E.PrimExpr:
        index: list[E.PrimExpr] = []
        arg, red = 0, 0
        for d in range(len(shape)):
            if d in axes:
                index.append(reduce_axes[red])
                red += 1
                arg += 1 if keepdims else 0
                continue
            index.append(out[arg])
            arg += 1
        return te.sum(x[tuple(index)], axis=reduce_axes)

    return ax_compute(out_shape, body, name=x.name + "_red")


@register("sum", OpPattern.COMM_REDUCE, (1, 1))
def sum_(inputs: Sequence[Operand], attrs: Mapping[str, Any], constants: Mapping[str, np.ndarray]) -> Legalized:
    """`sum(x)`, attrs `axis` (int list, None = all) and `keepdims` (bool, default False)."""
    x = expect_tensor(inputs[0], "sum", 0)
    axes = _real_axes(attrs.get("axis"), x.ndim, "sum")
    return topi_sum(x, axes, bool(attrs.get("keepdims", False)), "sum")


@register("mean", OpPattern.OUT_EWISE_FUSABLE, (1, 1))
def mean(inputs: Sequence[Operand], attrs: Mapping[str, Any], constants: Mapping[str, np.ndarray]) -> Legalized:
    """`mean(x)`, attrs `axis` (int list, None = all) and `keepdims` (bool, default False):
    `<x>_red` then `T_divide` by the reduced element count. (ONNX GlobalAveragePool arrives
    as `mean(axis=[2, 3], keepdims=True)`.)"""
    x = expect_tensor(inputs[0], "mean", 0)
    axes = _real_axes(attrs.get("axis"), x.ndim, "mean")
    shape = static_shape(x, "mean")
    count = math.prod(shape[d] for d in axes)
    total = topi_sum(x, axes, bool(attrs.get("keepdims", False)), "mean")
    return scalar_binary(lambda a, b: a / b, total, E.make_const(count, x.dtype), "T_divide", scalar_first=False)
