"""Constant folding with TVM's semantics: what TVM's expression constructors fold
(`TryConstFold`: `2 * 3 -> 6`, `x * 1 -> x`, `x + 0 -> x`) and how constants cast.

The TVMScript parser and printer (operator sugar folds, constructors do not), the TE builder and
the simplifier all fold through this module, so a constant expression has one value everywhere:
integer results wrap to their dtype's width (TVM's `GetFoldResultInt64Repr`), `Div`/`Mod`
truncate toward zero and `FloorDiv`/`FloorMod` floor, a division by a zero constant is left as
a node (TVM reports it at run time), and float `Mod`/`FloorMod` are never folded (TVM leaves
them too).
"""

from __future__ import annotations

import math
import operator
from typing import Any, Callable

from msdb.ir import expr as E
from msdb.ir.arith.limits import is_integer, wrap
from msdb.ir.dtype import is_float

__all__ = [
    "truncdiv", "truncmod", "eval_binary", "fold_binary", "cast_constant", "fold_cast", "compare_values", "FOLDING_ARITH",
]

Number = int | float

#: Arithmetic node classes whose operator form folds constants (TVM's `TryConstFold`).
FOLDING_ARITH = (E.Add, E.Sub, E.Mul, E.Div, E.Mod, E.FloorDiv, E.FloorMod, E.Min, E.Max)


def truncdiv(x: int, y: int) -> int:
    """C's integer division (toward zero)."""
    q = abs(x) // abs(y)
    return q if (x >= 0) == (y >= 0) else -q


def truncmod(x: int, y: int) -> int:
    """C's remainder: the sign of the dividend."""
    return x - truncdiv(x, y) * y


#: Operations every dtype folds, and the divisions, which fold only by a non-zero constant.
_ALWAYS: dict[type, Callable[[Any, Any], Any]] = {
    E.Add: operator.add, E.Sub: operator.sub, E.Mul: operator.mul, E.Min: min, E.Max: max,
}
_INT_DIVISION: dict[type, Callable[[int, int], int]] = {
    E.Div: truncdiv, E.Mod: truncmod, E.FloorDiv: operator.floordiv, E.FloorMod: operator.mod,
}
_FLOAT_DIVISION: dict[type, Callable[[float, float], float]] = {  # float Mod / FloorMod: TVM keeps the node
    E.Div: operator.truediv, E.FloorDiv: lambda x, y: float(math.floor(x / y)),
}


def eval_binary(cls: type, x: Number, y: Number, dtype: str) -> Number | None:
    """The value of `x op y` in `dtype` (integers wrapped to the dtype), or None where TVM
    leaves the node unfolded (a division by zero, a float modulo)."""
    if is_float(dtype):
        fx, fy = float(x), float(y)
        fop = _ALWAYS.get(cls) or (_FLOAT_DIVISION.get(cls) if fy != 0 else None)
        return None if fop is None else fop(fx, fy)
    ix, iy = int(x), int(y)
    iop = _ALWAYS.get(cls) or (_INT_DIVISION.get(cls) if iy != 0 else None)
    if iop is None:
        return None
    value: int = iop(ix, iy)
    return wrap(value, dtype) if is_integer(dtype) or dtype == "bool" else value


def _const(e: E.PrimExpr) -> Number | None:
    if isinstance(e, (E.IntImm, E.FloatImm)):
        return e.value
    return None


def fold_binary(cls: type, a: E.PrimExpr, b: E.PrimExpr) -> E.PrimExpr | None:
    """What TVM's `TryConstFold` makes of `cls(a, b)` (operands of one dtype): a constant, one
    of the operands (`x * 1`, `0 + x`, `x // 1`), `0` for `x % 1`; None when it builds the
    node unchanged."""
    ca, cb = _const(a), _const(b)
    dtype = a.dtype
    if ca is not None and cb is not None:
        value = eval_binary(cls, ca, cb, dtype)
        if value is not None:
            return E.make_const(value, dtype)
    rule = _IDENTITIES.get(cls)
    return rule(a, b, ca, cb) if rule is not None else None


def _add_identity(a: E.PrimExpr, b: E.PrimExpr, ca: Number | None, cb: Number | None) -> E.PrimExpr | None:
    if ca == 0:
        return b
    if cb == 0:
        return a
    return None


def _sub_identity(a: E.PrimExpr, b: E.PrimExpr, ca: Number | None, cb: Number | None) -> E.PrimExpr | None:
    return a if cb == 0 else None


def _mul_identity(a: E.PrimExpr, b: E.PrimExpr, ca: Number | None, cb: Number | None) -> E.PrimExpr | None:
    if ca == 1:
        return b
    if ca == 0:
        return a
    if cb == 1:
        return a
    if cb == 0:
        return b
    return None


def _div_identity(a: E.PrimExpr, b: E.PrimExpr, ca: Number | None, cb: Number | None) -> E.PrimExpr | None:
    if ca == 0 and cb != 0:
        return a
    if cb == 1:
        return a
    return None


def _mod_identity(a: E.PrimExpr, b: E.PrimExpr, ca: Number | None, cb: Number | None) -> E.PrimExpr | None:
    if isinstance(a, E.IntImm) and a.value == 0 and cb != 0:
        return a
    if isinstance(b, E.IntImm) and b.value == 1:
        return E.make_const(0, a.dtype)
    return None


_IDENTITIES: dict[type, Callable[[E.PrimExpr, E.PrimExpr, Number | None, Number | None], E.PrimExpr | None]] = {
    E.Add: _add_identity,
    E.Sub: _sub_identity,
    E.Mul: _mul_identity,
    E.Div: _div_identity,
    E.FloorDiv: _div_identity,
    E.Mod: _mod_identity,
    E.FloorMod: _mod_identity,
}


def cast_constant(value: Number, dtype: str) -> Number | None:
    """A constant converted to `dtype` the way TVM folds a cast: to a float as is, to bool by
    truth, to an integer wrapped to its width (floats truncated toward zero first); None for a
    NaN or infinity cast to an integer, or a dtype that is neither."""
    if is_float(dtype):
        return float(value)
    if dtype == "bool":
        return int(value != 0)
    if is_integer(dtype):
        if isinstance(value, float):
            if not math.isfinite(value):
                return None
            value = int(value)
        return wrap(int(value), dtype)
    return None


def fold_cast(dtype: str, value: E.PrimExpr) -> E.PrimExpr | None:
    """`value` cast to `dtype` when that folds: the value itself when the dtype already
    matches, a constant for a constant (`cast_constant`); None when a `Cast` node is needed."""
    if value.dtype == dtype:
        return value
    c = _const(value)
    if c is None:
        return None
    folded = cast_constant(c, dtype)
    if folded is None:
        return None
    return E.FloatImm(dtype, float(folded)) if is_float(dtype) else E.IntImm(dtype, int(folded))


def compare_values(cls: type, x: Number, y: Number) -> bool:
    """`x op y` for a comparison node class."""
    if cls is E.LT:
        return x < y
    if cls is E.LE:
        return x <= y
    if cls is E.GT:
        return x > y
    if cls is E.GE:
        return x >= y
    if cls is E.EQ:
        return x == y
    if cls is E.NE:
        return x != y
    raise TypeError(f"{cls.__name__} is not a comparison")
