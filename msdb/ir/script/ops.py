"""How TVMScript turns Python operators and `T.` helpers into IR nodes.

TVM's parser does not build a node for every operator it sees: arithmetic goes through TVM's
`tvm::add`/`mul`/... which first promote mismatched operand types (`BinaryOpMatchTypes`) and
then fold constants and identities (`TryConstFold`: `x * 1 -> x`, `x + 0 -> x`, `2 * 3 -> 6`),
while comparisons, `and`/`or`/`not` and the capitalised constructors (`T.Add`, `T.Cast`,
`T.Select`) build the node as written. The parser needs those rules to produce the same IR as
TVM, and the printer needs them to know when operator sugar would not read back as the same
node (then it prints the constructor form, as TVM's printer does). Both import this module, so
the two sides cannot drift apart.
"""

from __future__ import annotations

import math
from typing import Union

from msdb.ir import expr as E
from msdb.ir.dtype import bits, default_int_dtype, is_float, is_int, is_uint

Scalar = Union[int, float, bool]
Operand = Union[E.PrimExpr, int, float, bool]

#: Arithmetic node classes whose operator form folds constants (TVM's `TryConstFold`).
FOLDING_ARITH = (E.Add, E.Sub, E.Mul, E.Div, E.Mod, E.FloorDiv, E.FloorMod, E.Min, E.Max)


def literal(value: Scalar, other: E.PrimExpr | None = None) -> E.PrimExpr:
    """A Python literal as an immediate, typed after the other operand where TVM does so:
    ints take an integer/float partner's dtype, floats a float partner's dtype, bools stay bool;
    with no partner ints are int32 (int64 when they need it) and floats float32."""
    if isinstance(value, bool):
        return E.IntImm("bool", int(value))
    if isinstance(value, int):
        if other is not None and other.dtype != "bool" and (
            is_float(other.dtype) or _fits(value, other.dtype)
        ):
            return E.make_const(value, other.dtype)
        # A literal too wide for its partner stays int64; type matching then widens the partner.
        return E.IntImm(default_int_dtype(value), value)
    if isinstance(value, float):
        if other is not None and is_float(other.dtype):
            return E.FloatImm(other.dtype, value)
        return E.FloatImm("float32", value)
    raise TypeError(f"cannot use {value!r} as an expression")


def _fits(value: int, dtype: str) -> bool:
    if is_int(dtype):
        n = bits(dtype)
        return -(1 << (n - 1)) <= value < (1 << (n - 1))
    if is_uint(dtype):
        return 0 <= value < (1 << bits(dtype))
    return False


def operands(a: Operand, b: Operand) -> tuple[E.PrimExpr, E.PrimExpr]:
    """Convert Python literals against the other operand (the `_auto_broadcast` rule)."""
    if not isinstance(a, E.PrimExpr):
        a = literal(a, b if isinstance(b, E.PrimExpr) else None)
    if not isinstance(b, E.PrimExpr):
        b = literal(b, a)
    return a, b


def cast(dtype: str, value: E.PrimExpr) -> E.PrimExpr:
    """TVM's folding `cast`: same dtype is a no-op, constants convert, anything else is a Cast."""
    if value.dtype == dtype:
        return value
    if isinstance(value, (E.IntImm, E.FloatImm)):
        if is_float(dtype):
            return E.FloatImm(dtype, float(value.value))
        if dtype == "bool":
            return E.IntImm("bool", int(value.value != 0))
        if is_int(dtype) or is_uint(dtype):
            return E.IntImm(dtype, int(value.value))  # int() truncates like static_cast
    return E.Cast(dtype, value)


def match_types(a: E.PrimExpr, b: E.PrimExpr) -> tuple[E.PrimExpr, E.PrimExpr]:
    """TVM's `BinaryOpMatchTypes`: int meets float -> float; narrower int widens; bool (a 1-bit
    unsigned in TVM) widens to the integer partner."""
    ta, tb = a.dtype, b.dtype
    if ta == tb:
        return a, b
    fa, fb = is_float(ta), is_float(tb)
    if fb and not fa:
        return cast(tb, a), b
    if fa and not fb:
        return a, cast(ta, b)
    if bits(ta) < bits(tb):
        return cast(tb, a), b
    if bits(ta) > bits(tb):
        return a, cast(ta, b)
    if fa and fb:
        return a, b  # e.g. float16 vs bfloat16: left to the node
    unsigned = "uint" + str(bits(ta))
    return cast(unsigned, a), cast(unsigned, b)


def _const(expr: E.PrimExpr) -> int | float | None:
    if isinstance(expr, (E.IntImm, E.FloatImm)):
        return expr.value
    return None


def _is(expr: E.PrimExpr, value: int) -> bool:
    c = _const(expr)
    return c is not None and c == value


def _trunc_div(x: int, y: int) -> int:
    q = abs(x) // abs(y)
    return q if (x >= 0) == (y >= 0) else -q


def fold(cls: type, a: E.PrimExpr, b: E.PrimExpr) -> E.PrimExpr | None:
    """What TVM's `TryConstFold` makes of `cls(a, b)` (operands already type-matched), or None
    when it builds the node unchanged."""
    ca, cb = _const(a), _const(b)
    dtype = a.dtype
    if ca is not None and cb is not None:
        value = _fold_values(cls, ca, cb, dtype)
        if value is not None:
            return E.make_const(value, dtype)
    if cls is E.Add:
        if _is(a, 0):
            return b
        if _is(b, 0):
            return a
    elif cls is E.Sub:
        if _is(b, 0):
            return a
    elif cls is E.Mul:
        if _is(a, 1):
            return b
        if _is(a, 0):
            return a
        if _is(b, 1):
            return a
        if _is(b, 0):
            return b
    elif cls in (E.Div, E.FloorDiv):
        if _is(a, 0) and not _is(b, 0):
            return a
        if _is(b, 1):
            return a
    elif cls in (E.Mod, E.FloorMod):
        if isinstance(a, E.IntImm) and a.value == 0 and not _is(b, 0):
            return a
        if isinstance(b, E.IntImm) and b.value == 1:
            return E.make_const(0, dtype)
    return None


def _fold_values(cls: type, x: int | float, y: int | float, dtype: str) -> int | float | None:
    integer = not is_float(dtype)
    if cls is E.Add:
        return x + y
    if cls is E.Sub:
        return x - y
    if cls is E.Mul:
        return x * y
    if cls is E.Min:
        return min(x, y)
    if cls is E.Max:
        return max(x, y)
    if y == 0:
        return None  # left as a node; TVM reports division by zero at run time
    if cls is E.Div:
        return _trunc_div(int(x), int(y)) if integer else x / y
    if cls is E.Mod:
        return int(x) - _trunc_div(int(x), int(y)) * int(y) if integer else None
    if cls is E.FloorDiv:
        return int(x) // int(y) if integer else float(math.floor(x / y))
    if cls is E.FloorMod:
        return int(x) % int(y) if integer else None
    return None


def arith(cls: type, a: Operand, b: Operand) -> E.PrimExpr:
    """Operator-form arithmetic (`+ - * / // %`, `T.max`, `T.floordiv`, ...): convert literals,
    match types, fold."""
    x, y = match_types(*operands(a, b))
    folded = fold(cls, x, y)
    return folded if folded is not None else cls(x, y)


def raw(cls: type, a: Operand, b: Operand) -> E.PrimExpr:
    """Constructor-form node (`T.Add(a, b)`, comparisons, `and`/`or`): literals converted,
    nothing else touched."""
    x, y = operands(a, b)
    return cls(x, y)


def negate(value: E.PrimExpr) -> E.PrimExpr:
    """`-x` on an expression is `x * -1` in TVM (folded for constants)."""
    return arith(E.Mul, value, E.make_const(-1, value.dtype))


def sugar_reads_back(node: E.BinaryOp) -> bool:
    """True when printing `node` with its operator/function sugar parses back to the same node
    (same operand dtypes and no folding); otherwise the printer uses the constructor form."""
    if node.a.dtype != node.b.dtype:
        return False
    if isinstance(node, FOLDING_ARITH):
        return node.dtype == node.a.dtype and fold(type(node), node.a, node.b) is None
    return True


def max_value(dtype: str) -> E.PrimExpr:
    """`T.max_value(dtype)`: a constant in TVM, not a call."""
    return E.make_const(_limit(dtype, True), dtype)


def min_value(dtype: str) -> E.PrimExpr:
    """`T.min_value(dtype)`: a constant in TVM, not a call."""
    return E.make_const(_limit(dtype, False), dtype)


_FLOAT_LIMITS = {
    "float16": 65504.0,
    "bfloat16": 3.3895313892515355e38,
    "float32": 3.4028234663852886e38,
    "float64": 1.7976931348623157e308,
}


def _limit(dtype: str, upper: bool) -> int | float:
    if dtype == "bool":
        return 1 if upper else 0
    if is_float(dtype):
        limit = _FLOAT_LIMITS.get(dtype.split("x")[0])
        if limit is None:
            raise ValueError(f"no limits known for dtype {dtype!r}")
        return limit if upper else -limit
    n = bits(dtype)
    if is_uint(dtype):
        return (1 << n) - 1 if upper else 0
    return (1 << (n - 1)) - 1 if upper else -(1 << (n - 1))
