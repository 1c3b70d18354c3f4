"""Transformer normalization and activations: `nn.layer_norm`, `nn.gelu`, `nn.gelu_tanh`
(docs/architecture.md, "Legalization").

`nn.layer_norm` is topi's C++ layer_norm: `<x>_sum` (reduce axes k<d>), `<x>_mean`,
`<x>_var_sum` (the sum of squared deviations) and `T_layer_norm` =
`(x - mean) * rsqrt(var_sum / n + eps) * gamma + beta`. The two GELUs are Relax's own te
functions (legalize_ops/nn.py), chains of topi broadcast ops with the constants folded in:
erf form `x * (0.5 + erf(x * sqrt(1/2)) * 0.5)`, tanh form
`0.5 * x * (1 + tanh(sqrt(2/pi) * x * (1 + 0.044715 * x * x)))`.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np

from msdb.ir import expr as E
from msdb.ir import te
from msdb.model.graph import ModelError
from msdb.model.legalize.common import ax_compute, broadcast_binary, expect_tensor, i64, scalar_binary, static_shape
from msdb.model.legalize.registry import Legalized, Operand, register
from msdb.model.ops import OpPattern

__all__: list[str] = []


@register("nn.layer_norm", OpPattern.OUT_EWISE_FUSABLE, (3, 3))
def layer_norm(inputs: Sequence[Operand], attrs: Mapping[str, Any], constants: Mapping[str, np.ndarray]) -> Legalized:
    """`nn.layer_norm(x, gamma, beta)`, attrs `axes` (int list) and `epsilon`."""
    x, gamma, beta = (expect_tensor(t, "nn.layer_norm", i) for i, t in enumerate(inputs))
    shape = static_shape(x, "nn.layer_norm")
    axes = sorted(int(a) % len(shape) for a in attrs.get("axes", [-1]))
    norm_shape = [shape[a] for a in axes]
    for p in (gamma, beta):
        if list(static_shape(p, "nn.layer_norm")) != norm_shape:
            raise ModelError(f"nn.layer_norm: {p.name!r} has shape {list(static_shape(p, 'nn.layer_norm'))}, "
                             f"expected {norm_shape}")
    eps = E.make_const(float(attrs.get("epsilon", 1e-5)), x.dtype)
    count = E.make_const(float(math.prod(norm_shape)), x.dtype)
    reduced = [n for d, n in enumerate(shape) if d not in axes]

    def full(out: Sequence[E.PrimExpr], ks: Sequence[E.PrimExpr]) -> tuple[E.PrimExpr, ...]:
        it, kt = iter(out), iter(ks)
        return tuple(next(kt) if d in axes else next(it) for d in range(len(shape)))

    def reduce_vars() -> list[Any]:
        return [te.reduce_axis((i64(0), i64(shape[d])), name=f"k{d}") for d in axes]

    k1 = reduce_vars()
    total = ax_compute(reduced, lambda *o: te.sum(x[full(o, k1)], axis=k1), x.name + "_sum")
    mean = ax_compute(reduced, lambda *o: total[o] / count, x.name + "_mean")
    k2 = reduce_vars()

    def var_body(*o: E.PrimExpr) -> E.PrimExpr:
        d = x[full(o, k2)] - mean[o]
        return te.sum(d * d, axis=k2)

    var_sum = ax_compute(reduced, var_body, x.name + "_var_sum")

    def out_body(*o: E.PrimExpr) -> E.PrimExpr:
        r = tuple(v for d, v in enumerate(o) if d not in axes)
        g = tuple(o[a] for a in axes)
        return (x[o] - mean[r]) * te.rsqrt(var_sum[r] / count + eps) * gamma[g] + beta[g]

    return ax_compute(shape, out_body, "T_layer_norm")


def _mul(a: Any, b: Any) -> E.PrimExpr:
    return a * b


def _add(a: Any, b: Any) -> E.PrimExpr:
    return a + b


@register("nn.gelu", OpPattern.ELEMWISE, (1, 1))
def gelu(inputs: Sequence[Operand], attrs: Mapping[str, Any], constants: Mapping[str, np.ndarray]) -> Legalized:
    """`nn.gelu(x)`, no attrs (the erf form)."""
    x = expect_tensor(inputs[0], "nn.gelu", 0)
    c = lambda v: E.make_const(v, x.dtype)  # noqa: E731
    y = scalar_binary(_mul, x, c(0.5 ** 0.5), "T_multiply", scalar_first=False)
    y = te.compute(y.shape, lambda *i: te.erf(y[i]))
    y = scalar_binary(_mul, y, c(0.5), "T_multiply", scalar_first=False)
    y = scalar_binary(_add, y, c(0.5), "T_add", scalar_first=True)
    return broadcast_binary(_mul, x, y, "T_multiply", "nn.gelu")


@register("nn.gelu_tanh", OpPattern.ELEMWISE, (1, 1))
def gelu_tanh(inputs: Sequence[Operand], attrs: Mapping[str, Any], constants: Mapping[str, np.ndarray]) -> Legalized:
    """`nn.gelu_tanh(x)`, no attrs."""
    x = expect_tensor(inputs[0], "nn.gelu_tanh", 0)
    c = lambda v: E.make_const(v, x.dtype)  # noqa: E731
    half = scalar_binary(_mul, x, c(0.5), "T_multiply", scalar_first=True)
    scaled = scalar_binary(_mul, x, c(math.sqrt(2.0 / math.pi)), "T_multiply", scalar_first=True)
    cube = scalar_binary(_mul, x, c(0.044715), "T_multiply", scalar_first=True)
    cube = broadcast_binary(_mul, cube, x, "T_multiply", "nn.gelu_tanh")
    inner = scalar_binary(_add, cube, c(1.0), "T_add", scalar_first=True)
    inner = broadcast_binary(_mul, scaled, inner, "T_multiply", "nn.gelu_tanh")
    t = te.compute(inner.shape, lambda *i: te.tanh(inner[i]))
    t = scalar_binary(_add, t, c(1.0), "T_add", scalar_first=True)
    return broadcast_binary(_mul, half, t, "T_multiply", "nn.gelu_tanh")
