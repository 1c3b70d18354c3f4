"""Shared pieces of the legalizers: int64 index constants, static shapes, attribute reading and
topi's elementwise/broadcast computes (docs/architecture.md, "Legalization").

Why int64 everywhere: Relax shapes are int64 and `bb.call_te` lowers with
`index_dtype_override="int64"`, so every loop, iter var and index constant of a legalized
PrimFunc is int64; building the te graph in int64 from the start gives the same IR.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import numpy as np

from msdb.ir import expr as E
from msdb.ir import te
from msdb.model.graph import ModelError
from msdb.model.legalize.registry import Operand

__all__ = [
    "INDEX", "i64", "static_shape", "ax_names", "ax_compute", "int_list", "attr_int", "expect_tensor",
    "broadcast_binary", "scalar_binary", "fold_scalar",
]

INDEX = "int64"


def i64(value: int) -> E.PrimExpr:
    """An int64 immediate (Relax's index type)."""
    return E.make_const(int(value), INDEX)


def static_shape(tensor: te.Tensor, op: str) -> tuple[int, ...]:
    """The tensor's shape as ints; legalization needs static shapes (as msdb's models have)."""
    dims = []
    for d in tensor.shape:
        value = E.const_int(d)
        if value is None:
            raise ModelError(f"{op}: input {tensor.name!r} has a symbolic shape; only static shapes are supported")
        dims.append(value)
    return tuple(dims)


def ax_names(ndim: int) -> list[str]:
    """The axis names TVM's C++ `te::compute` gives (ax0, ax1, ...); topi's C++ ops use them."""
    return [f"ax{i}" for i in range(ndim)]


def ax_compute(shape: Sequence[int | E.PrimExpr], body: Callable[..., Any], name: str,
               attrs: dict[str, Any] | None = None) -> te.Tensor:
    """A compute as topi's C++ operators build it: int64 shape, axes ax0, ax1, ..."""
    dims = tuple(i64(d) if isinstance(d, int) else d for d in shape)
    return te.compute(dims, body, name=name, attrs=attrs, varargs_names=ax_names(len(dims)))


def int_list(attrs: Mapping[str, Any], key: str, default: Sequence[int], length: int, op: str) -> list[int]:
    """An int-tuple attribute; a single int is repeated `length` times (Relax accepts both)."""
    value = attrs.get(key, default)
    if isinstance(value, (int, np.integer)):
        return [int(value)] * length
    try:
        values = [int(v) for v in value]
    except (TypeError, ValueError):
        raise ModelError(f"{op}: attribute {key!r} must be ints, got {value!r}") from None
    if len(values) == 1 and length > 1:
        values = values * length
    if len(values) != length:
        raise ModelError(f"{op}: attribute {key!r} needs {length} values, got {values}")
    return values


def attr_int(attrs: Mapping[str, Any], key: str, default: int, op: str) -> int:
    value = attrs.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ModelError(f"{op}: attribute {key!r} must be an int, got {value!r}")
    return int(value)


def expect_tensor(value: Operand, op: str, position: int) -> te.Tensor:
    if not isinstance(value, te.Tensor):
        raise ModelError(f"{op}: input {position} must be a tensor, got {value!r}")
    return value


def fold_scalar(value: Operand, constants: Mapping[str, np.ndarray], other_dtype: str) -> E.PrimExpr | None:
    """The immediate TVM's `_try_convert_to_scalar_const` folds in: a 0-d constant (by tensor
    name in `constants`) keeps its own dtype; a Python scalar takes the other operand's dtype
    (what topi does with a Python number). None when `value` stays a tensor."""
    if isinstance(value, te.Tensor):
        array = constants.get(value.name)
        if array is None or isinstance(value.op, te.ComputeOp):
            return None
        array = np.asarray(array)
        if array.ndim != 0:
            return None
        return E.make_const(array.item(), str(array.dtype))
    if isinstance(value, (bool, np.bool_)):
        return E.make_const(bool(value), other_dtype)
    if isinstance(value, (int, float, np.integer, np.floating)):
        return E.make_const(value.item() if isinstance(value, np.generic) else value, other_dtype)
    raise ModelError(f"expected a tensor or a scalar, got {value!r}")


BinaryFn = Callable[[E.PrimExpr, E.PrimExpr], E.PrimExpr]


def broadcast_binary(fn: BinaryFn, a: te.Tensor, b: te.Tensor, name: str, op: str) -> te.Tensor:
    """topi's `WithBroadcast` (include/tvm/topi/detail/broadcast.h): align shapes from the
    right; a dimension of 1 against a larger one reads index 0, equal dimensions share the
    output axis, extra leading dimensions belong to the longer operand."""
    sa, sb = static_shape(a, op), static_shape(b, op)
    out: list[int] = []
    # For each output position (right-aligned): does a / b use the output axis there?
    uses_a: list[bool] = []
    uses_b: list[bool] = []
    for i in range(1, min(len(sa), len(sb)) + 1):
        da, db = sa[-i], sb[-i]
        if da == db:
            out.insert(0, da)
            uses_a.insert(0, True)
            uses_b.insert(0, True)
        elif da == 1:
            out.insert(0, db)
            uses_a.insert(0, False)
            uses_b.insert(0, True)
        elif db == 1:
            out.insert(0, da)
            uses_a.insert(0, True)
            uses_b.insert(0, False)
        else:
            raise ModelError(f"{op}: cannot broadcast shapes {list(sa)} and {list(sb)}")
    longer = sa if len(sa) > len(sb) else sb
    for i in range(min(len(sa), len(sb)) + 1, max(len(sa), len(sb)) + 1):
        out.insert(0, longer[-i])
        uses_a.insert(0, len(sa) > len(sb))
        uses_b.insert(0, len(sb) > len(sa))
    n = len(out)

    def index(ovars: tuple[E.PrimExpr, ...], ndim: int, uses: list[bool]) -> tuple[E.PrimExpr, ...]:
        picked: list[E.PrimExpr] = []
        for i in range(n):
            if uses[i] and n - i <= ndim:
                picked.append(ovars[i])
            elif n - i <= ndim:
                picked.append(E.make_const(0, ovars[i].dtype))
        return tuple(picked)

    return ax_compute(out, lambda *ov: fn(a[index(ov, len(sa), uses_a)], b[index(ov, len(sb), uses_b)]), name)


def scalar_binary(fn: BinaryFn, tensor: te.Tensor, scalar: E.PrimExpr, name: str, scalar_first: bool) -> te.Tensor:
    """topi's tensor-with-scalar form: `fn(x[i], s)` (or `fn(s, x[i])`) over the tensor's shape."""
    if scalar_first:
        return ax_compute(tensor.shape, lambda *i: fn(scalar, tensor[i]), name)
    return ax_compute(tensor.shape, lambda *i: fn(tensor[i], scalar), name)
