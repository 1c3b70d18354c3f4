"""The entry points of integer simplification: `simplify`, `const_int_bound` and `Analyzer`
(TVM's `arith.Analyzer`: variable ranges and bindings, simplification, proofs, bounds).

Variable ranges come as a `Range`, an int extent meaning [0, extent), or a (min, extent) pair;
the canonical form itself is `msdb.ir.arith.canonical`'s (docs/architecture.md, "Integer
arithmetic").
"""

from __future__ import annotations

from typing import Any, Mapping, Union

from msdb.ir import expr as E
from msdb.ir.arith import interval as iv
from msdb.ir.arith.canonical import Order, Simplifier
from msdb.ir.arith.interval import Bound, ExprBounds
from msdb.ir.arith.keys import expr_equal
from msdb.ir.arith.limits import is_integer

__all__ = ["simplify", "const_int_bound", "Analyzer", "RangeLike", "ANALYZER_ORDER"]

RangeLike = Union[E.Range, int, tuple[Any, Any]]


def _range_bound(rng: RangeLike, ev: ExprBounds) -> Bound:
    """Inclusive bounds of a variable ranging over `rng` (a Range, an int extent meaning
    [0, extent), or a (min, extent) pair)."""
    if isinstance(rng, int):
        return (0, rng - 1) if rng > 0 else (0, 0)
    if isinstance(rng, tuple):
        rng = E.Range(E.convert(rng[0]), E.convert(rng[1]))
    mn, ext = rng.min, rng.extent
    if isinstance(mn, E.IntImm) and isinstance(ext, E.IntImm):  # the common case: a constant loop
        return (mn.value, mn.value + ext.value - 1) if ext.value > 0 else (mn.value, mn.value)
    lo_min, hi_min = ev.of(rng.min)
    lo_ext, hi_ext = ev.of(rng.extent)
    if lo_ext == hi_ext and lo_ext <= 0:
        return lo_min, lo_min
    hi = iv.POS_INF if not (iv.is_finite(hi_min) and iv.is_finite(hi_ext)) else hi_min + hi_ext - 1
    return lo_min, hi


def _bounds_from(ranges: Mapping[E.Var, RangeLike] | None) -> dict[E.Var, Bound]:
    bounds: dict[E.Var, Bound] = {}
    if ranges:
        ev = ExprBounds(bounds)
        for var, rng in ranges.items():
            bounds[var] = _range_bound(rng, ev)
    return bounds


def simplify(expr: E.PrimExpr | int, ranges: Mapping[E.Var, RangeLike] | None = None, *,
             order: Order = "canonical") -> E.PrimExpr:
    """The canonical simplified form of `expr` (TVM's `arith.Analyzer().simplify`); `ranges`
    bounds variables (a `Range`, an int extent meaning [0, extent), or a (min, extent) pair).
    Exact: the result equals `expr` for every value of the variables within their ranges.
    Returns `expr` itself when nothing changes. `order="binding"` prints sums the way TVM's
    IterMapSimplify prints block bindings (scale descending, ties in first-seen order)."""
    if not isinstance(expr, E.PrimExpr):
        return E.convert(expr)
    if isinstance(expr, (E.IntImm, E.Var, E.FloatImm)):
        return expr
    return Simplifier(_bounds_from(ranges), order=order).simplify(expr)


def const_int_bound(expr: E.PrimExpr, ranges: Mapping[E.Var, RangeLike] | None = None) -> tuple[int, int]:
    """Inclusive (lo, hi) bounds of an integer expression; unknown ends are the dtype's limits,
    as TVM reports them."""
    return Analyzer(ranges).const_int_bound(expr)


#: The order an `Analyzer` prints sums in unless told otherwise: "canonical", TVM's
#: `Analyzer.simplify`. The schedule's loop rewriting asks for `order="binding"` (TVM's
#: IterMapSimplify order for block bindings) itself.
ANALYZER_ORDER: Order = "canonical"


class Analyzer:
    """Bound-aware simplification and proving over a set of variable ranges (TVM's
    `arith.Analyzer`). `order` says how simplified sums print (see `simplify`); the canonical
    form is the same either way, only the order of equal-scale terms differs."""

    def __init__(self, ranges: Mapping[E.Var, RangeLike] | None = None, *, order: Order = ANALYZER_ORDER) -> None:
        self.order: Order = order
        self._bounds: dict[E.Var, Bound] = _bounds_from(ranges)
        self._subst: dict[E.Var, E.PrimExpr] = {}
        self._sim = Simplifier(self._bounds, self._subst, order)

    def bind(self, var: E.Var, value: RangeLike | E.PrimExpr) -> None:
        """Bind `var` to a range (`Range`, int extent, or (min, extent)) or to an expression
        (substituted wherever `var` appears). A later bind replaces an earlier one."""
        if isinstance(value, E.PrimExpr):
            self._subst[var] = value
            if isinstance(value, E.IntImm):
                self._bounds[var] = (value.value, value.value)
            else:
                self._bounds.pop(var, None)
            return
        self._subst.pop(var, None)
        self._bounds[var] = _range_bound(value, self._sim.ev)

    def unbind(self, var: E.Var) -> None:
        """Forget what is known about `var` (leaving a loop's scope)."""
        self._bounds.pop(var, None)
        self._subst.pop(var, None)

    def knowledge(self, var: E.Var) -> tuple[Any, ...] | None:
        """All the analyzer knows of `var`, as a hashable value: its bounds, or the constant
        it is bound to, or `()` for nothing; None when it is bound to an expression of other
        variables (then what it simplifies to depends on more than `var`). Two variables
        with equal knowledge simplify alike (`msdb.schedule.iter_order.simplified_binding`)."""
        value = self._subst.get(var)
        if value is not None:
            return ("value", value.value) if isinstance(value, E.IntImm) else None
        bound = self._bounds.get(var)
        return () if bound is None else bound

    def bounds_of(self, var: E.Var) -> tuple[int, int] | None:
        """The inclusive bounds bound to `var`, if finite ones are known."""
        b = self._bounds.get(var)
        return None if b is None else iv.finite_or_none(b)

    def simplify(self, expr: E.PrimExpr | int) -> E.PrimExpr:
        if not isinstance(expr, E.PrimExpr):
            return E.convert(expr)
        return self._sim.simplify(expr)

    def can_prove(self, cond: E.PrimExpr | bool) -> bool:
        """True only if `cond` holds for every value of the bound variables."""
        if isinstance(cond, bool):
            return cond
        result = self._sim.simplify(cond)
        return isinstance(result, E.IntImm) and result.value != 0

    def can_prove_equal(self, a: E.PrimExpr | int, b: E.PrimExpr | int) -> bool:
        x, y = E.convert(a), E.convert(b)
        if not (is_integer(x.dtype) and is_integer(y.dtype)):
            return expr_equal(x, y)
        sim = self._sim
        lo, hi = sim.bound_sum(sim.to_sum(sim.mutate(x)).plus(sim.to_sum(sim.mutate(y)), -1))
        return lo == hi == 0

    def const_int_bound(self, expr: E.PrimExpr | int) -> tuple[int, int]:
        """Inclusive (lo, hi) bounds of `expr`; unknown ends are the dtype's limits."""
        e = E.convert(expr)
        sim = self._sim
        b = sim.ev.of(e)
        if is_integer(e.dtype):
            lo, hi = sim.bound_canon(sim.mutate(e))
            b = max(b[0], lo), min(b[1], hi)
        return iv.clamp_to_dtype(b, e.dtype)
