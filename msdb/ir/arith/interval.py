"""Integer intervals: inclusive `(lo, hi)` bounds of integer expressions, the one interval
arithmetic of msdb.

Unbounded ends are exact integers far outside every dtype (`NEG_INF`, `POS_INF`). `ExprBounds`
evaluates an expression's interval from its variables' (leaves by dtype unless
`leaves_by_dtype=False`). See docs/architecture.md, "Integer arithmetic".
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from msdb.ir import expr as E
from msdb.ir.arith.fold import truncdiv
from msdb.ir.arith.limits import int_range, is_integer
from msdb.ir.dtype import bits

__all__ = [
    "Bound", "NEG_INF", "POS_INF", "EVERYTHING", "is_finite", "finite_or_none", "point", "add", "sub", "neg",
    "scale", "mul", "floordiv", "floormod", "truncdiv_bound", "truncmod_bound", "absolute", "minimum", "maximum",
    "union",
    "dtype_bound", "cast_bound", "clamp_to_dtype", "ExprBounds", "numeric_range",
]

#: Unbounded ends: exact integers far beyond any dtype's range.
POS_INF = 1 << 200
NEG_INF = -POS_INF

Bound = tuple[int, int]
EVERYTHING: Bound = (NEG_INF, POS_INF)


def _clamp(v: int) -> int:
    if v >= POS_INF:
        return POS_INF
    if v <= NEG_INF:
        return NEG_INF
    return v


def is_finite(v: int) -> bool:
    return NEG_INF < v < POS_INF


def finite_or_none(b: Bound) -> Bound | None:
    """`b` when both ends are finite, else None."""
    return b if NEG_INF < b[0] and b[1] < POS_INF else None


def point(value: int) -> Bound:
    return value, value


def add(x: Bound, y: Bound) -> Bound:
    lo = NEG_INF if (x[0] == NEG_INF or y[0] == NEG_INF) else _clamp(x[0] + y[0])
    hi = POS_INF if (x[1] == POS_INF or y[1] == POS_INF) else _clamp(x[1] + y[1])
    return lo, hi


def neg(x: Bound) -> Bound:
    return -x[1], -x[0]


def sub(x: Bound, y: Bound) -> Bound:
    return add(x, neg(y))


def scale(x: Bound, c: int) -> Bound:
    """`x * c` for a constant `c`."""
    if c == 0:
        return 0, 0
    lo = _clamp(x[0] * c) if is_finite(x[0]) else (NEG_INF if c > 0 else POS_INF)
    hi = _clamp(x[1] * c) if is_finite(x[1]) else (POS_INF if c > 0 else NEG_INF)
    return (lo, hi) if c > 0 else (hi, lo)


def _times(a: int, b: int) -> int:
    if a == 0 or b == 0:
        return 0
    if is_finite(a) and is_finite(b):
        return _clamp(a * b)
    return POS_INF if (a > 0) == (b > 0) else NEG_INF


def mul(x: Bound, y: Bound) -> Bound:
    if x[0] == x[1] and is_finite(x[0]):
        return scale(y, x[0])
    if y[0] == y[1] and is_finite(y[0]):
        return scale(x, y[0])
    corners = [_times(a, b) for a in x for b in y]
    return min(corners), max(corners)


def _divisors(y: Bound) -> list[int]:
    """The divisor values at which a quotient over `y` takes its extremes (zero left out)."""
    found = [d for d in y if d != 0]
    if y[0] <= 0 <= y[1]:
        found += [d for d in (-1, 1) if y[0] <= d <= y[1]]
    return found


def _quotient(a: int, d: int, trunc: bool) -> int:
    if not is_finite(a):
        return POS_INF if (a > 0) == (d > 0) else NEG_INF
    if not is_finite(d):
        return 0 if trunc or (a >= 0) == (d > 0) else -1
    return truncdiv(a, d) if trunc else a // d


def _divide(x: Bound, y: Bound, trunc: bool) -> Bound:
    divisors = _divisors(y)
    if not divisors:
        return EVERYTHING
    values = [_quotient(a, d, trunc) for a in x for d in divisors]
    return min(values), max(values)


def floordiv(x: Bound, y: Bound) -> Bound:
    """`x // y` (floor division); quotients monotone in each operand on each side of zero, so
    the corners bound it."""
    return _divide(x, y, trunc=False)


def truncdiv_bound(x: Bound, y: Bound) -> Bound:
    """`x / y` with C's truncating division."""
    return _divide(x, y, trunc=True)


def floormod(x: Bound, y: Bound) -> Bound:
    """`x % y` with the divisor's sign (Python's `%`)."""
    if y[0] > 0:
        if y[0] == y[1] and is_finite(x[0]) and is_finite(x[1]) and x[0] // y[0] == x[1] // y[0]:
            return x[0] % y[0], x[1] % y[0]  # one period: exact
        if x[0] >= 0 and x[1] < y[0]:
            return x
        top = y[1] - 1 if is_finite(y[1]) else POS_INF
        return 0, min(top, x[1]) if x[0] >= 0 else top
    if y[1] < 0:
        return (y[0] + 1 if is_finite(y[0]) else NEG_INF), 0
    return min(y[0] + 1, 0) if is_finite(y[0]) else NEG_INF, max(y[1] - 1, 0) if is_finite(y[1]) else POS_INF


def truncmod_bound(x: Bound, y: Bound) -> Bound:
    """C's remainder: the dividend's sign, a magnitude below the divisor's."""
    if x[0] >= 0 and y[0] > 0:
        return floormod(x, y)
    mag = max(abs(y[0]), abs(y[1]))
    top = mag - 1 if is_finite(mag) else POS_INF
    lo = 0 if x[0] >= 0 else max(x[0], -top)
    hi = 0 if x[1] <= 0 else min(x[1], top)
    return min(lo, 0), max(hi, 0)


def absolute(x: Bound) -> Bound:
    """`abs(x)`."""
    if x[0] >= 0:
        return x
    if x[1] <= 0:
        return neg(x)
    return 0, max(-x[0], x[1])


def minimum(x: Bound, y: Bound) -> Bound:
    return min(x[0], y[0]), min(x[1], y[1])


def maximum(x: Bound, y: Bound) -> Bound:
    return max(x[0], y[0]), max(x[1], y[1])


def union(x: Bound, y: Bound) -> Bound:
    return min(x[0], y[0]), max(x[1], y[1])


def dtype_bound(dtype: str) -> Bound:
    """What a value of `dtype` can be, TVM's way: integers narrower than 64 bits their range,
    64-bit integers unbounded (unsigned ones from 0), bool 0..1, anything else unbounded."""
    if dtype == "bool":
        return 0, 1
    if not is_integer(dtype):
        return EVERYTHING
    lo, hi = int_range(dtype)
    if bits(dtype) >= 64:
        return (lo if lo == 0 else NEG_INF), POS_INF
    return lo, hi


def cast_bound(inner: Bound, dtype: str) -> Bound:
    """An integer value in `inner` cast to the integer `dtype`: unchanged when it fits, else
    (wrap-around) anything the dtype holds."""
    lo, hi = dtype_bound(dtype)
    return inner if lo <= inner[0] and inner[1] <= hi else (lo, hi)


def clamp_to_dtype(b: Bound, dtype: str) -> Bound:
    """`b` with unbounded ends replaced by the dtype's limits (how TVM reports bounds)."""
    lo, hi = int_range(dtype) if is_integer(dtype) or dtype == "bool" else EVERYTHING
    return (b[0] if is_finite(b[0]) else lo), (b[1] if is_finite(b[1]) else hi)


# ---------------------------------------------------------------------------------------------
# Expressions
# ---------------------------------------------------------------------------------------------


class ExprBounds:
    """Interval of an integer expression from the intervals of its variables.

    `var_bounds` maps variables to intervals; `subst` maps variables to expressions standing
    for them (an `Analyzer` binding); `leaves_by_dtype` says what unknown leaves are (their
    dtype's range, or unbounded)."""

    __slots__ = ("var_bounds", "subst", "leaves_by_dtype")

    def __init__(self, var_bounds: Mapping[E.Var, Bound], subst: Mapping[E.Var, E.PrimExpr] | None = None,
                 leaves_by_dtype: bool = True) -> None:
        self.var_bounds = var_bounds
        self.subst = subst
        self.leaves_by_dtype = leaves_by_dtype

    def leaf(self, dtype: str) -> Bound:
        return dtype_bound(dtype) if self.leaves_by_dtype else EVERYTHING

    def var(self, v: E.Var) -> Bound:
        if self.subst and v in self.subst:
            return self.of(self.subst[v])
        b = self.var_bounds.get(v)
        return b if b is not None else self.leaf(v.dtype)

    def of(self, e: E.PrimExpr) -> Bound:
        if isinstance(e, E.IntImm):
            return e.value, e.value
        if isinstance(e, E.Var):
            return self.var(e)
        t = type(e)
        rule = _RULES.get(t)
        if rule is None:
            rule = _rule_for(t)
        return rule(self, e)


def _binary(op: Callable[[Bound, Bound], Bound]) -> Callable[[ExprBounds, Any], Bound]:
    def rule(ev: ExprBounds, e: E.BinaryOp) -> Bound:
        return op(ev.of(e.a), ev.of(e.b))

    return rule


def _division(op: Callable[[Bound, Bound], Bound]) -> Callable[[ExprBounds, Any], Bound]:
    def rule(ev: ExprBounds, e: E.BinaryOp) -> Bound:
        divisor = ev.of(e.b)
        if divisor == (0, 0):
            return ev.leaf(e.dtype)
        return op(ev.of(e.a), divisor)

    return rule


def _select(ev: ExprBounds, e: E.Select) -> Bound:
    return union(ev.of(e.true_value), ev.of(e.false_value))


def _cast(ev: ExprBounds, e: E.Cast) -> Bound:
    if is_integer(e.dtype) and is_integer(e.value.dtype):
        return cast_bound(ev.of(e.value), e.dtype)
    if e.dtype == "bool":
        return 0, 1
    return ev.leaf(e.dtype)


def _call(ev: ExprBounds, e: E.Call) -> Bound:
    if e.op == "if_then_else" and len(e.args) == 3:
        return union(ev.of(e.args[1]), ev.of(e.args[2]))
    return ev.leaf(e.dtype)


def _boolean(ev: ExprBounds, e: E.PrimExpr) -> Bound:
    return 0, 1


def _opaque(ev: ExprBounds, e: E.PrimExpr) -> Bound:
    return (0, 1) if e.dtype == "bool" else ev.leaf(e.dtype)


def _int_imm(ev: ExprBounds, e: E.IntImm) -> Bound:
    return e.value, e.value


def _var(ev: ExprBounds, e: E.Var) -> Bound:
    return ev.var(e)


_RULES: dict[type, Callable[[ExprBounds, Any], Bound]] = {
    E.IntImm: _int_imm,
    E.Var: _var,
    E.Add: _binary(add),
    E.Sub: _binary(sub),
    E.Mul: _binary(mul),
    E.FloorDiv: _division(floordiv),
    E.FloorMod: _division(floormod),
    E.Div: _division(truncdiv_bound),
    E.Mod: _division(truncmod_bound),
    E.Min: _binary(minimum),
    E.Max: _binary(maximum),
    E.Select: _select,
    E.Cast: _cast,
    E.Call: _call,
    E.Not: _boolean,
    **{cls: _boolean for cls in (E.EQ, E.NE, E.LT, E.LE, E.GT, E.GE, E.And, E.Or)},
}


def _rule_for(cls: type) -> Callable[[ExprBounds, Any], Bound]:
    """The rule of `cls`'s nearest known base (subclasses such as the TE builder's loads)."""
    for klass in cls.__mro__[1:]:
        rule = _RULES.get(klass)
        if rule is not None:
            break
    else:
        rule = _opaque
    _RULES[cls] = rule
    return rule


def numeric_range(expr: E.PrimExpr, bounds: Mapping[E.Var, Bound]) -> Bound | None:
    """Inclusive bounds of `expr` derived from the ranges of its variables in `bounds` only
    (a variable without one, a load or a call leaves the bound unknown); None if unknown."""
    return finite_or_none(ExprBounds(bounds, leaves_by_dtype=False).of(expr))
