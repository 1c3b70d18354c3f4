"""`nn.batch_norm` in inference form, as topi.nn.batch_norm (python/tvm/topi/nn/batch_norm.py)
with `training=False`, which is what TVM's ONNX frontend asks for (docs/architecture.md,
"Legalization").

Three outputs, as in TVM: the normalized data
`(x - reshape(mean)) / sqrt(reshape(var) + eps) * reshape(gamma) + reshape(beta)`
(blocks T_reshape, T_subtract, T_reshape_1, T_add, compute, T_divide, T_reshape_2, T_multiply,
T_reshape_3, T_add_1), then `moving_mean * 1` and `moving_var * 1` (T_multiply_1, T_multiply_2,
copies once the multiply by one is simplified away). The frontend uses output 0; TVM's FuseTIR
keeps the other two blocks in a fused function, so a fusion must keep them too.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from msdb.ir import expr as E
from msdb.ir import te
from msdb.model.graph import ModelError
from msdb.model.legalize.common import attr_int, broadcast_binary, expect_tensor, scalar_binary, static_shape
from msdb.model.legalize.registry import Legalized, Operand, register
from msdb.model.legalize.shape import topi_reshape
from msdb.model.ops import OpPattern

__all__: list[str] = []


def _pattern(attrs: Mapping[str, Any]) -> OpPattern:
    return OpPattern.OUT_EWISE_FUSABLE if attrs.get("training") else OpPattern.INJECTIVE


@register("nn.batch_norm", _pattern, (5, 5))
def batch_norm(inputs: Sequence[Operand], attrs: Mapping[str, Any], constants: Mapping[str, np.ndarray]) -> Legalized:
    """`nn.batch_norm(data, gamma, beta, moving_mean, moving_var)`, attrs: `axis` (int,
    default 1), `epsilon` (float, default 1e-5), `center`, `scale` (bools, default True),
    `momentum` (unused in inference), `training` (must be false). Returns 3 tensors."""
    op = "nn.batch_norm"
    data, gamma, beta, mean, var = (expect_tensor(t, op, i) for i, t in enumerate(inputs))
    if attrs.get("training", False):
        raise ModelError(f"{op}: training mode is not supported (inference models only)")
    ndim = data.ndim
    axis = attr_int(attrs, "axis", 1, op)
    if not -ndim <= axis < ndim:
        raise ModelError(f"{op}: axis {axis} out of range for a {ndim}-d input")
    axis %= ndim
    channels = static_shape(data, op)[axis]
    for name, t in (("gamma", gamma), ("beta", beta), ("moving_mean", mean), ("moving_var", var)):
        if static_shape(t, op) != (channels,):
            raise ModelError(f"{op}: {name} must have shape [{channels}], got {list(static_shape(t, op))}")
    epsilon = float(attrs.get("epsilon", 1e-5))
    shape = [1] * ndim
    shape[axis] = channels

    def sub(a: E.PrimExpr, b: E.PrimExpr) -> E.PrimExpr:
        return a - b

    def add(a: E.PrimExpr, b: E.PrimExpr) -> E.PrimExpr:
        return a + b

    def mul(a: E.PrimExpr, b: E.PrimExpr) -> E.PrimExpr:
        return a * b

    def div(a: E.PrimExpr, b: E.PrimExpr) -> E.PrimExpr:
        return a / b

    centered = broadcast_binary(sub, data, topi_reshape(mean, shape, op), "T_subtract", op)
    var_eps = scalar_binary(add, topi_reshape(var, shape, op), E.make_const(epsilon, data.dtype), "T_add",
                            scalar_first=False)
    std = te.compute(var_eps.shape, lambda *i: te.sqrt(var_eps[i]))
    out = broadcast_binary(div, centered, std, "T_divide", op)
    if attrs.get("scale", True):
        out = broadcast_binary(mul, out, topi_reshape(gamma, shape, op), "T_multiply", op)
    if attrs.get("center", True):
        out = broadcast_binary(add, out, topi_reshape(beta, shape, op), "T_add", op)
    one = E.make_const(1, mean.dtype)
    return (out, scalar_binary(mul, mean, one, "T_multiply", scalar_first=False),
            scalar_binary(mul, var, one, "T_multiply", scalar_first=False))
