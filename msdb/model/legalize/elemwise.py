"""Elementwise ops: the broadcasting binaries (with `power` and `less`), relu, clip, sqrt, erf,
tanh and astype (docs/architecture.md, "Legalization").

TVM legalizes `add`, `subtract`, `multiply`, `divide`, `maximum`, `minimum` through topi's
broadcast operators (blocks `T_add`, ...), first folding a 0-d constant operand into an
immediate (the second operand first, else the first). ONNX Clip is not an op here: TVM's
frontend emits topi `maximum` then `minimum` directly, so the frontend calls those two with the
bounds as 0-d tensors (not folded: TVM sees variables there) or, for opset 6, as numbers.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import numpy as np

from msdb.ir import expr as E
from msdb.ir import te
from msdb.model.graph import ModelError
from msdb.model.legalize.common import broadcast_binary, expect_tensor, fold_scalar, scalar_binary
from msdb.model.legalize.registry import Legalized, Operand, register
from msdb.model.ops import OpPattern

__all__: list[str] = []

_BINARY: dict[str, tuple[str, Callable[[E.PrimExpr, E.PrimExpr], E.PrimExpr]]] = {
    "add": ("T_add", lambda a, b: a + b),
    "subtract": ("T_subtract", lambda a, b: a - b),
    "multiply": ("T_multiply", lambda a, b: a * b),
    "divide": ("T_divide", lambda a, b: a / b),
    "maximum": ("T_maximum", lambda a, b: E.Max(*E._binary_operands(a, b))),
    "minimum": ("T_minimum", lambda a, b: E.Min(*E._binary_operands(a, b))),
    "power": ("T_power", te.power),
    "less": ("T_less", lambda a, b: E.LT(*E._binary_operands(a, b))),
}


def _binary_legalizer(op: str) -> Callable[[Sequence[Operand], Mapping[str, Any], Mapping[str, np.ndarray]], Legalized]:
    name, fn = _BINARY[op]

    def build(inputs: Sequence[Operand], attrs: Mapping[str, Any], constants: Mapping[str, np.ndarray]) -> Legalized:
        """`op(lhs, rhs)` with numpy broadcasting. No attrs. A 0-d constant input (named in
        `constants`) or a Python number is folded into the block as an immediate."""
        lhs, rhs = inputs
        if not isinstance(lhs, te.Tensor) and not isinstance(rhs, te.Tensor):
            raise ModelError(f"{op}: at least one input must be a tensor")
        if isinstance(lhs, te.Tensor):
            right = fold_scalar(rhs, constants, lhs.dtype)
            if right is not None:
                return scalar_binary(fn, lhs, right, name, scalar_first=False)
        if isinstance(rhs, te.Tensor):
            left = fold_scalar(lhs, constants, rhs.dtype)
            if left is not None:
                return scalar_binary(fn, rhs, left, name, scalar_first=True)
        a, b = expect_tensor(lhs, op, 0), expect_tensor(rhs, op, 1)
        return broadcast_binary(fn, a, b, name, op)

    build.__doc__ = f"`{op}`: " + (build.__doc__ or "")
    return build


for _op in _BINARY:
    register(_op, OpPattern.ELEMWISE, (2, 2))(_binary_legalizer(_op))


@register("nn.relu", OpPattern.ELEMWISE, (1, 1))
def relu(inputs: Sequence[Operand], attrs: Mapping[str, Any], constants: Mapping[str, np.ndarray]) -> Legalized:
    """`nn.relu(x)`, no attrs: topi.nn.relu, block `compute` = max(x, 0) over i0, i1, ..."""
    return te.relu(expect_tensor(inputs[0], "nn.relu", 0))


@register("sqrt", OpPattern.ELEMWISE, (1, 1))
def sqrt(inputs: Sequence[Operand], attrs: Mapping[str, Any], constants: Mapping[str, np.ndarray]) -> Legalized:
    """`sqrt(x)`, no attrs: topi.sqrt, block `compute`."""
    x = expect_tensor(inputs[0], "sqrt", 0)
    return te.compute(x.shape, lambda *i: te.sqrt(x[i]))


def _unary(op: str, fn: Any) -> None:
    def build(inputs: Sequence[Operand], attrs: Mapping[str, Any], constants: Mapping[str, np.ndarray]) -> Legalized:
        x = expect_tensor(inputs[0], op, 0)
        return te.compute(x.shape, lambda *i: fn(x[i]))

    build.__doc__ = f"`{op}(x)`, no attrs: topi.{op}, block `compute`."
    register(op, OpPattern.ELEMWISE, (1, 1))(build)


_unary("erf", te.erf)
_unary("tanh", te.tanh)


@register("astype", OpPattern.ELEMWISE, (1, 1))
def astype(inputs: Sequence[Operand], attrs: Mapping[str, Any], constants: Mapping[str, np.ndarray]) -> Legalized:
    """`astype(x)`, attr `dtype`: topi.cast, block `compute` = Cast(dtype, x)."""
    x = expect_tensor(inputs[0], "astype", 0)
    dtype = str(attrs.get("dtype", ""))
    if dtype not in ("float32", "int64", "int32", "bool"):
        raise ModelError(f"astype: dtype {dtype!r} is not supported")
    return te.compute(x.shape, lambda *i: x[i].astype(dtype))


@register("clip", OpPattern.ELEMWISE, (1, 1))
def clip(inputs: Sequence[Operand], attrs: Mapping[str, Any], constants: Mapping[str, np.ndarray]) -> Legalized:
    """Relax `clip(x, min, max)`, attrs `min`, `max` (numbers): topi.clip, block `compute` =
    max(min(x, max), min). (ONNX Clip does not come here; see the module docstring.)"""
    x = expect_tensor(inputs[0], "clip", 0)
    if "min" not in attrs or "max" not in attrs:
        raise ModelError("clip: attributes 'min' and 'max' are required")
    lo = E.make_const(float(attrs["min"]), x.dtype)
    hi = E.make_const(float(attrs["max"]), x.dtype)
    return te.compute(x.shape, lambda *i: E.Max(E.Min(x[i], hi), lo))
