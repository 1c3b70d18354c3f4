"""`matmul` as Relax's own legalization (python/tvm/relax/transform/legalize_ops/
linear_algebra.py): one te compute named `matmul`, axes i0, i1, ..., reduce axis `k`, batch
dimensions broadcast (a size-1 dimension reads index 0) (docs/architecture.md, "Legalization").
ONNX Gemm(transB) arrives as `permute_dims` + `matmul` + `add`.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from msdb.ir import expr as E
from msdb.ir import te
from msdb.model.graph import ModelError
from msdb.model.legalize.common import expect_tensor, i64, static_shape
from msdb.model.legalize.registry import Legalized, Operand, register
from msdb.model.ops import OpPattern

__all__: list[str] = []


def _output_shape(a: list[int], b: list[int], a_prepended: bool, b_appended: bool) -> list[int]:
    batch_a, batch_b = a[:-2], b[:-2]
    n = max(len(batch_a), len(batch_b))
    batch_a = [1] * (n - len(batch_a)) + batch_a
    batch_b = [1] * (n - len(batch_b)) + batch_b
    batch = []
    for x, y in zip(batch_a, batch_b):
        if x != y and x != 1 and y != 1:
            raise ModelError(f"matmul: batch dimensions {a[:-2]} and {b[:-2]} do not broadcast")
        batch.append(max(x, y))
    out = batch
    if not a_prepended:
        out.append(a[-2])
    if not b_appended:
        out.append(b[-1])
    return out


@register("matmul", OpPattern.OUT_EWISE_FUSABLE, (2, 2))
def matmul(inputs: Sequence[Operand], attrs: Mapping[str, Any], constants: Mapping[str, np.ndarray]) -> Legalized:
    """`matmul(a, b)`, attr `out_dtype` (None/"" or the inputs' dtype)."""
    a, b = expect_tensor(inputs[0], "matmul", 0), expect_tensor(inputs[1], "matmul", 1)
    out_dtype = attrs.get("out_dtype") or a.dtype
    if out_dtype != a.dtype or b.dtype != a.dtype:
        raise ModelError(f"matmul: mixed dtypes ({a.dtype}, {b.dtype} -> {out_dtype}) are not supported")
    a_shape, b_shape = list(static_shape(a, "matmul")), list(static_shape(b, "matmul"))
    if not a_shape or not b_shape:
        raise ModelError("matmul: inputs must have at least one dimension")
    a_prepended = len(a_shape) == 1
    b_appended = len(b_shape) == 1
    if a_prepended:
        a_shape.insert(0, 1)
    if b_appended:
        b_shape.append(1)
    if a_shape[-1] != b_shape[-2]:
        raise ModelError(f"matmul: reduction dimensions differ: {list(static_shape(a, 'matmul'))} x "
                         f"{list(static_shape(b, 'matmul'))}")
    is_a_larger = len(a_shape) > len(b_shape)
    offset = abs(len(a_shape) - len(b_shape))
    out_shape = _output_shape(a_shape, b_shape, a_prepended, b_appended)
    k = te.reduce_axis((i64(0), i64(a_shape[-1])), name="k")

    def body(*idx: E.PrimExpr) -> E.PrimExpr:
        a_index: list[E.PrimExpr] = []
        b_index: list[E.PrimExpr] = []
        for i in range(offset):
            (a_index if is_a_larger else b_index).append(idx[i])
        for i in range(offset, len(out_shape) - (2 - a_prepended - b_appended)):
            a_dim = a_shape[i if is_a_larger else i - offset]
            b_dim = b_shape[i if not is_a_larger else i - offset]
            if a_dim != b_dim:
                a_index.append(i64(0) if a_dim == 1 else idx[i])
                b_index.append(i64(0) if b_dim == 1 else idx[i])
            else:
                a_index.append(idx[i])
                b_index.append(idx[i])
        if not a_prepended:
            a_index.append(idx[-2 + b_appended])
        a_index.append(k)
        b_index.append(k)
        if not b_appended:
            b_index.append(idx[-1])
        return te.sum(a[tuple(a_index)] * b[tuple(b_index)], axis=k)

    return te.compute(tuple(i64(d) for d in out_shape), body, name="matmul")
