"""Canonical simplification of integer expressions: TVM's canonical form, the one msdb uses.

msdb simplifies exactly where and the way TVM's `arith.Analyzer` does, so TE-built workloads are
structurally TVM's and bindings print as TVM prints them; a rewrite applies only when it holds
for every value within the bounds. The form, its printing order and the two deliberate
differences from TVM: see docs/architecture.md, "Integer arithmetic".
"""

from __future__ import annotations

from math import gcd
from typing import Any, Callable, Iterator, Literal, Mapping, Union, final

from msdb.ir import expr as E
from msdb.ir.arith import interval as iv
from msdb.ir.arith.fold import compare_values, fold_binary, fold_cast
from msdb.ir.arith.interval import Bound, ExprBounds
from msdb.ir.arith.keys import expr_equal, expr_key
from msdb.ir.arith.limits import int_range, is_integer
from msdb.ir.dtype import is_integer_like

__all__ = ["Simplifier", "Order", "ORDERS"]

Order = Literal["canonical", "binding"]


# ---------------------------------------------------------------------------------------------
# Split terms and sums
# ---------------------------------------------------------------------------------------------


@final
class _Split:
    """`((index % upper) // lower) * scale`; `upper` None means no modulo. Immutable."""

    __slots__ = ("index", "key", "lower", "upper", "scale", "dtype")

    def __init__(self, index: E.PrimExpr, key: Any, lower: int, upper: int | None, scale: int, dtype: str) -> None:
        self.index = index
        self.key = key
        self.lower = lower
        self.upper = upper
        self.scale = scale
        self.dtype = dtype

    def replace(self, *, lower: int | None = None, scale: int | None = None) -> _Split:
        return _Split(self.index, self.key, self.lower if lower is None else lower, self.upper,
                      self.scale if scale is None else scale, self.dtype)

    def with_upper(self, upper: int | None) -> _Split:
        return _Split(self.index, self.key, self.lower, upper, self.scale, self.dtype)

    def scaled(self, c: int) -> _Split:
        return self if c == 1 else _Split(self.index, self.key, self.lower, self.upper, self.scale * c, self.dtype)

    def same_digit(self, other: _Split) -> bool:
        return self.lower == other.lower and self.upper == other.upper

    def normalize(self, sign: int = 1) -> E.PrimExpr:
        """The expression of `sign * self`."""
        scale = self.scale * sign
        if scale == 0:
            return E.IntImm(self.dtype, 0)
        res = self.index
        dtype = self.dtype
        if self.upper is not None:
            res = _op(E.FloorMod, res, E.IntImm(dtype, self.upper))
        if self.lower != 1:
            res = _op(E.FloorDiv, res, E.IntImm(dtype, self.lower))
        if scale != 1:  # (and not 0): only a constant index folds
            res = _op(E.Mul, res, E.IntImm(dtype, scale)) if isinstance(res, _IMMEDIATES) else E.Mul(res, E.IntImm(dtype, scale), dtype)
        return res


def _canonical_key(t: _Split) -> tuple[int, int, float]:
    """TVM's canonical order: scale, then lower factor, then upper factor, all descending."""
    return (-t.scale, -t.lower, -(float("inf") if t.upper is None else t.upper))


def _binding_key(t: _Split) -> int:
    """The order of TVM's IterMapSimplify (block bindings): scale descending, ties in the
    order the terms first appeared."""
    return -t.scale


#: How a canonical sum orders its terms when it becomes an expression again.
ORDERS: dict[str, Callable[[_Split], Any]] = {"canonical": _canonical_key, "binding": _binding_key}


@final
class _Sum:
    """`sum(terms) + base`; terms of one index are adjacent, larger `lower` first. Treated as
    immutable: the operations build new sums."""

    __slots__ = ("terms", "base", "dtype")

    def __init__(self, terms: list[_Split], base: int, dtype: str) -> None:
        self.terms = terms
        self.base = base
        self.dtype = dtype

    def is_zero(self) -> bool:
        return self.base == 0 and not self.terms

    def copy(self) -> _Sum:
        return _Sum(list(self.terms), self.base, self.dtype)

    def add_term(self, other: _Split, sign: int) -> None:
        """self += sign * other, keeping the terms of one index together (in place)."""
        if other.scale == 0:
            return
        terms = self.terms
        start = 0
        while start < len(terms) and terms[start].key != other.key:
            start += 1
        for j in range(start, len(terms)):
            t = terms[j]
            if t.key != other.key or other.lower > t.lower:
                terms.insert(j, other.scaled(sign))
                return
            if other.same_digit(t):
                terms[j] = t.replace(scale=t.scale + other.scale * sign)
                return
        terms.append(other.scaled(sign))

    def plus(self, other: _Sum, sign: int) -> _Sum:
        out = self.copy()
        for t in other.terms:
            out.add_term(t, sign)
        out.base += other.base * sign
        return out

    def scaled(self, c: int) -> _Sum:
        return _Sum([t.scaled(c) for t in self.terms], self.base * c, self.dtype)

    def divisible_by(self, c: int) -> bool:
        return self.base % c == 0 and all(t.scale % c == 0 for t in self.terms)

    def divided(self, c: int) -> _Sum:
        """Exact division by `c` (every scale and the base divisible)."""
        return _Sum([t.replace(scale=_exact_div(t.scale, c)) for t in self.terms], _exact_div(self.base, c), self.dtype)

    def separate(self, c: int) -> tuple[_Sum, _Sum]:
        """(the terms and base divisible by `c`, the rest), in order."""
        div, rest = _Sum([], 0, self.dtype), _Sum([], 0, self.dtype)
        for t in self.terms:
            (div if t.scale % c == 0 else rest).terms.append(t)
        if self.base % c == 0:
            div.base = self.base
        else:
            rest.base = self.base
        return div, rest

    def normalize(self, order: Callable[[_Split], Any] = _canonical_key) -> E.PrimExpr:
        if not self.terms:
            return E.IntImm(self.dtype, self.base)
        terms = sorted(_merge_digits(self.terms), key=order)
        if order is _canonical_key and len(terms) > 1:
            terms = _settle(self.dtype, terms)
        dtype = self.dtype
        lowest = int_range(dtype)[0] if is_integer(dtype) else None
        at_min = self.base == lowest
        res: E.PrimExpr = E.IntImm(dtype, 0)
        first = True
        for t in terms:
            if t.scale > 0:
                res = t.normalize() if first else _op(E.Add, res, t.normalize())  # 0 + t is t
                first = False
        if self.base > 0 or at_min:
            res = _op(E.Add, res, E.IntImm(dtype, self.base))
        for t in terms:
            if t.scale < 0:
                res = _op(E.Sub, res, t.normalize(-1))
        if self.base < 0 and not at_min:
            res = _op(E.Sub, res, E.IntImm(dtype, -self.base))
        return res


def _settle(dtype: str, terms: list[_Split]) -> list[_Split]:
    """The terms as TVM's Analyzer.simplify leaves them: it canonicalizes, rewrites and
    canonicalizes again, and the second pass regroups the terms of one index that the first
    pass's sort left apart (`(h + k) + k // 8` is `k // 8 + k + h`, not `k // 8 + h + k`).
    Re-adding the printed terms (positive ones first, as they print) and sorting again gives
    that second pass's order."""
    again = _Sum([], 0, dtype)
    for t in terms:
        if t.scale > 0:
            again.add_term(t, 1)
    for t in terms:
        if t.scale < 0:
            again.add_term(t, 1)
    return sorted(_merge_digits(again.terms), key=_canonical_key)


def _exact_div(a: int, c: int) -> int:
    """a / c for a divisible by c (C and Python agree then)."""
    return a // c


def _merge_digits(terms: list[_Split]) -> list[_Split]:
    """Merge adjacent digits of one index: equal digits add up, and
    `(x % (c * s)) // c * s * k + (x % c') ...` style neighbours become one digit
    (`x // 8 * 8 + x % 8` is `x`). Relies on the segment order of `_Sum`."""
    if all(terms[i].key is not terms[i + 1].key and terms[i].key != terms[i + 1].key for i in range(len(terms) - 1)):
        return terms  # no index has two terms: nothing to merge
    items = list(terms)
    for i in range(len(items)):
        if items[i].scale == 0:
            continue
        for j in range(i + 1, len(items)):
            lhs, rhs = items[i], items[j]
            if lhs.key != rhs.key:
                break
            if lhs.upper is not None and rhs.lower > lhs.upper:
                break
            if lhs.same_digit(rhs):
                items[j] = rhs.replace(scale=rhs.scale + lhs.scale)
                items[i] = lhs.replace(scale=0)
            elif (lhs.lower == rhs.upper and rhs.scale != 0 and lhs.scale % rhs.scale == 0
                    and lhs.lower == _exact_div(lhs.scale, rhs.scale) * rhs.lower):
                items[j] = rhs.with_upper(lhs.upper)
                items[i] = lhs.replace(scale=0)
                break
    return items


_IMMEDIATES = (E.IntImm, E.FloatImm)


def _op(cls: type, a: E.PrimExpr, b: E.PrimExpr) -> E.PrimExpr:
    """`cls(a, b)` built the way TVM's operators build it (constants and identities folded)."""
    if type(a) in _IMMEDIATES or type(b) in _IMMEDIATES:  # folding needs a constant
        folded = fold_binary(cls, a, b)
        if folded is not None:
            return folded
    return cls(a, b, a.dtype)


Canon = Union[E.PrimExpr, _Sum, _Split]


def _bool(value: bool) -> E.IntImm:
    return E.IntImm("bool", 1 if value else 0)


def _is_const_bool(e: E.PrimExpr, value: bool) -> bool:
    return isinstance(e, E.IntImm) and e.dtype == "bool" and (e.value != 0) == value


# ---------------------------------------------------------------------------------------------
# The simplifier
# ---------------------------------------------------------------------------------------------


class Simplifier:
    """One simplification context: inclusive variable bounds and variable substitutions."""

    def __init__(self, bounds: dict[E.Var, Bound], subst: dict[E.Var, E.PrimExpr] | None = None,
                 order: Order = "canonical") -> None:
        self.bounds = bounds
        self.subst: dict[E.Var, E.PrimExpr] = subst if subst is not None else {}
        self.ev = ExprBounds(bounds, self.subst)
        self.order = ORDERS[order]

    # ---- entry points ----
    def simplify(self, e: E.PrimExpr) -> E.PrimExpr:
        t = type(e)
        if t is E.IntImm or (t is E.Var and e not in self.subst):
            return e
        linear = _linear_sum(e, self.subst) if t is E.Add or t is E.Sub else None
        result = self.normalize(linear if linear is not None else self.mutate(e))
        if result is not e and expr_equal(result, e):
            return e
        return result

    def normalize(self, c: Canon) -> E.PrimExpr:
        if isinstance(c, _Sum):
            return c.normalize(self.order)
        if isinstance(c, _Split):
            return c.normalize()
        return c

    def mutate(self, e: E.PrimExpr) -> Canon:
        """`e` simplified, as a canonical sum or split term where it is one."""
        handler = _HANDLERS.get(type(e))
        if handler is None:
            handler = _handler_for(type(e))
        return handler(self, e)

    def visit_var(self, e: E.Var) -> Canon:
        value = self.subst.get(e) if self.subst else None
        return e if value is None else self.mutate(value)

    # ---- conversions ----
    def to_split(self, c: Canon) -> _Split:
        if type(c) is _Split:
            return c
        if type(c) is _Sum:
            if c.base == 0 and len(c.terms) == 1:
                return c.terms[0]
            c = c.normalize(self.order)
        return _Split(c, c if type(c) is E.Var else expr_key(c), 1, None, 1, c.dtype)

    def to_sum(self, c: Canon) -> _Sum:
        if type(c) is _Sum:
            return c
        if type(c) is E.IntImm:
            return _Sum([], c.value, c.dtype)
        split = self.to_split(c)
        return _Sum([split], 0, split.dtype)

    # ---- bounds ----
    def bound(self, e: E.PrimExpr) -> Bound:
        return self.ev.of(e)

    def bound_split(self, t: _Split) -> Bound:
        b = self.ev.of(t.index)
        if t.upper is not None:
            b = iv.floormod(b, (t.upper, t.upper))
        if t.lower != 1:
            b = iv.floordiv(b, (t.lower, t.lower))
        return iv.scale(b, t.scale)

    def bound_sum(self, s: _Sum) -> Bound:
        result = (s.base, s.base)
        for t in s.terms:
            if t.scale:
                result = iv.add(result, self.bound_split(t))
        return result

    def bound_canon(self, c: Canon) -> Bound:
        if isinstance(c, _Sum):
            return self.bound_sum(c)
        if isinstance(c, _Split):
            return self.bound_split(c)
        return self.ev.of(c)

    # ---- + - * ----
    def visit_add(self, e: E.BinaryOp) -> Canon:
        return self._add_sub(e, 1) if is_integer(e.dtype) else self.visit_folding(e)

    def visit_sub(self, e: E.BinaryOp) -> Canon:
        return self._add_sub(e, -1) if is_integer(e.dtype) else self.visit_folding(e)

    def _add_sub(self, e: E.BinaryOp, sign: int) -> Canon:
        a, b = self.mutate(e.a), self.mutate(e.b)
        if isinstance(a, E.IntImm) and isinstance(b, E.IntImm):
            return _op(type(e), a, b)
        if isinstance(b, E.IntImm) and b.value == 0:
            return a
        if sign == 1 and isinstance(a, E.IntImm) and a.value == 0:
            return b
        result = a.copy() if isinstance(a, _Sum) else self.to_sum(a)
        if isinstance(b, E.IntImm):
            result.base += sign * b.value
        elif isinstance(b, _Sum):
            result = result.plus(b, sign)
        else:
            result.add_term(self.to_split(b), sign)
        return result

    def visit_mul(self, e: E.BinaryOp) -> Canon:
        if not is_integer(e.dtype):
            return self.visit_folding(e)
        a, b = self.mutate(e.a), self.mutate(e.b)
        if isinstance(a, E.IntImm) and not isinstance(b, E.IntImm):
            a, b = b, a
        if isinstance(b, E.IntImm):
            if isinstance(a, E.IntImm) or b.value == 0:
                return _op(E.Mul, self.normalize(a), b)
            if b.value == 1:
                return a
            if isinstance(a, _Sum):
                return a.scaled(b.value)
            return self.to_split(a).scaled(b.value)
        product, const = _product(self.normalize(a), self.normalize(b))
        if const != 1:
            # the constant factor is the term's scale (as TVM's second canonical pass sees it)
            if const == 0 or isinstance(product, E.IntImm):
                return _op(E.Mul, product, E.IntImm(e.dtype, const))
            return _Split(product, expr_key(product), 1, None, const, e.dtype)
        if isinstance(product, E.Mul) and product.a is e.a and product.b is e.b:
            return e
        return product

    # ---- floor division and modulo ----
    def _positive_divisor(self, b: Canon) -> int | None:
        return b.value if isinstance(b, E.IntImm) and b.value > 0 else None

    def _proved_in(self, e: E.PrimExpr, c: int) -> bool:
        """0 <= e < c for every value of the variables."""
        lo, hi = self.bound(e)
        return lo >= 0 and hi < c

    def visit_divmod(self, e: E.BinaryOp) -> Canon:
        """`FloorDiv` and `FloorMod`: by a positive constant in canonical form, else folded."""
        if not is_integer(e.dtype):
            return self.visit_folding(e)
        a, b = self.mutate(e.a), self.mutate(e.b)
        if isinstance(a, E.IntImm) and isinstance(b, E.IntImm):
            return _op(type(e), a, b)
        c = self._positive_divisor(b)
        if c is None:
            return self._rebuild(e, a, b)
        return self.floordiv_by(a, c, e.dtype) if isinstance(e, E.FloorDiv) else self.floormod_by(a, c, e.dtype)

    def floordiv_by(self, a: Canon, c: int, dtype: str) -> Canon:
        """a // c for a positive constant c."""
        if c == 1:
            return a
        if isinstance(a, _Sum):
            lhs, extra = a.separate(c)
            if extra.is_zero():
                return lhs.divided(c)
            lhs = lhs.divided(c)
            temp = self.normalize(extra)
            if isinstance(temp, E.IntImm):
                lhs.base += temp.value // c
            elif not self._proved_in(temp, c):
                smaller = self._divide_by_term(extra, c)
                if smaller is not None:
                    return lhs.plus(smaller, 1)
                lhs.add_term(self.split_div(self.to_split(temp), c), 1)
            return lhs
        if self._proved_in(self.normalize(a), c):
            return E.IntImm(dtype, 0)
        return self.split_div(self.to_split(a), c)

    def floormod_by(self, a: Canon, c: int, dtype: str) -> Canon:
        """a % c for a positive constant c."""
        if isinstance(a, _Sum):
            _, extra = a.separate(c)
            temp = self.normalize(extra)
            if isinstance(temp, E.IntImm):
                return E.IntImm(dtype, temp.value % c)
            if self._proved_in(temp, c):
                return temp
            digit = self._mod_by_term(extra, c)
            if digit is not None:
                return digit
            extra.base %= c
            live = _live_terms(extra)
            if extra.base == 0 and len(live) == 1 and live[0].scale > 1:
                extra = _Sum([_scale_mod(live[0], c)], 0, extra.dtype)
            if self._proved_in(self.normalize(extra), c):
                return extra  # congruent to the dividend and already in [0, c)
            return self.split_mod(self.to_split(extra), c)
        if self._proved_in(self.normalize(a), c):
            return a
        t = self.to_split(a)
        return self.split_mod(_scale_mod(t, c) if isinstance(a, _Split) else t, c)

    def _divide_by_term(self, s: _Sum, c: int) -> _Sum | None:
        """`s // c` as `x // (c / c1) + y // c` for a term `x * c1` of `s` with `c1` dividing
        `c` and the rest `y` of `s` provably below `c1` modulo `c` (exact: with `x = a * x' + b`
        and `y = d * c + e`, `0 <= b * c1 + e < c`). TVM's rewrite rule, so
        `(i * 16 + k * 2 + 1) // 4` is `i * 4 + k // 2`."""
        for t, c1, rest in _dividing_terms(s, c):
            _, hi = iv.floormod(self.bound_sum(rest), (c, c))
            if hi < c1:
                out = self.to_sum(self.floordiv_by(rest, c, rest.dtype)).copy()
                out.add_term(self.split_div(t.replace(scale=1), c // c1), 1)
                return out
        return None

    def _mod_by_term(self, s: _Sum, c: int) -> Canon | None:
        """`s % c` as `x % (c / c1) * c1 + y` for a term `x * c1` of `s` with `c1` dividing `c`
        and the rest `y` provably in [0, c1) (TVM's rewrite rule: `(h * 2 + 1) % 4` is
        `h % 2 * 2 + 1`)."""
        for t, c1, rest in _dividing_terms(s, c):
            lo, hi = self.bound_sum(rest)
            if lo >= 0 and hi < c1:
                out = _Sum([], 0, s.dtype)
                out.add_term(self.split_mod(t.replace(scale=1), c // c1).scaled(c1), 1)
                return out.plus(rest, 1)
        return None

    def _rebuild(self, e: E.BinaryOp, a: Canon, b: Canon) -> E.PrimExpr:
        na, nb = self.normalize(a), self.normalize(b)
        folded = fold_binary(type(e), na, nb) if na.dtype == nb.dtype else None
        if folded is not None:
            return folded
        if na is e.a and nb is e.b:
            return e
        return type(e)(na, nb, e.dtype)

    def split_div(self, t: _Split, c: int) -> _Split:
        """t // c as one split term."""
        if t.scale % c == 0:
            return t.replace(scale=_exact_div(t.scale, c))
        if c % t.scale == 0 and (t.scale > 0 or t.lower == 1):
            # (a negative factor only nests into a plain index: (x // 2 * -1) // 2 is not x // -4)
            scaled = _exact_div(c, t.scale)
            if t.upper is None or t.upper % (t.lower * scaled) == 0:
                return t.replace(scale=1, lower=t.lower * scaled)
            if t.upper <= t.lower * scaled:
                return t.replace(scale=0)  # (x % c1) // c2 is 0 when c2 >= c1
            index = _op(E.FloorMod, t.index, E.IntImm(t.dtype, t.upper))
            return _Split(index, expr_key(index), t.lower * scaled, None, 1, t.dtype)
        base = self.to_split(t.normalize())
        return base.replace(lower=base.lower * c)

    def split_mod(self, t: _Split, c: int) -> _Split:
        """t % c as one split term."""
        if t.scale % c == 0:
            return t.replace(scale=0)
        if c % t.scale == 0 and (t.scale > 0 or t.lower == 1):
            scaled = _exact_div(c, t.scale)
            new_upper = t.lower * scaled
            if t.upper is None or t.upper % new_upper == 0:
                if t.upper is not None and new_upper < t.upper:
                    # a smaller modulus may simplify the index further
                    inner = self.mutate(_op(E.FloorMod, t.index, E.IntImm(t.dtype, new_upper)))
                    updated = self.to_split(self.normalize(inner))
                    if t.lower != 1:
                        return self.split_div(updated, t.lower).scaled(t.scale)
                    return updated.scaled(t.scale)
                return t.with_upper(new_upper)
            if new_upper % t.upper == 0:
                return t  # (x % 2) % 4 is x % 2
        base = self.to_split(t.normalize())
        return base.with_upper(c)

    # ---- min / max ----
    def visit_minmax(self, e: E.BinaryOp) -> Canon:
        a, b = self.mutate(e.a), self.mutate(e.b)
        na, nb = self.normalize(a), self.normalize(b)
        if na.dtype == nb.dtype:
            folded = fold_binary(type(e), na, nb)
            if folded is not None:
                return folded
        if expr_equal(na, nb):
            return na
        if is_integer(e.dtype) and na.dtype == nb.dtype:
            lo, hi = self.bound_sum(self.to_sum(a).plus(self.to_sum(b), -1))
            first_smaller = hi <= 0
            first_larger = lo >= 0
            if first_smaller or first_larger:
                return na if first_smaller == isinstance(e, E.Min) else nb
        if na is e.a and nb is e.b:
            return e
        return type(e)(na, nb, e.dtype)

    # ---- other arithmetic: constant folding only ----
    def visit_folding(self, e: E.BinaryOp) -> Canon:
        return self._rebuild(e, self.mutate(e.a), self.mutate(e.b))

    # ---- conditions ----
    def visit_logic(self, e: E.BinaryOp) -> Canon:
        is_and = isinstance(e, E.And)
        a = self.simplify(e.a)
        if _is_const_bool(a, not is_and):  # false and ..., true or ...
            return a
        b = self.simplify(e.b)
        if _is_const_bool(a, is_and):
            return b
        if _is_const_bool(b, is_and):
            return a
        if _is_const_bool(b, not is_and):
            return b
        if expr_equal(a, b):
            return a
        if a is e.a and b is e.b:
            return e
        return type(e)(a, b, "bool")

    def visit_not(self, e: E.Not) -> Canon:
        a = self.simplify(e.a)
        if isinstance(a, E.IntImm):
            return _bool(a.value == 0)
        if isinstance(a, E.Not):
            return a.a
        if isinstance(a, (E.LT, E.LE, E.EQ, E.NE)) and is_integer_like(a.a.dtype) and is_integer_like(a.b.dtype):
            # (for floats `not a < b` is not `b <= a`: NaN compares false both ways)
            return _negate(a)
        return e if a is e.a else E.Not(a)

    def visit_compare(self, e: E.BinaryOp) -> Canon:
        cls: type = type(e)
        a, b = e.a, e.b
        if isinstance(e, E.GT):
            cls, a, b = E.LT, b, a
        elif isinstance(e, E.GE):
            cls, a, b = E.LE, b, a
        if is_integer(a.dtype) and a.dtype == b.dtype:
            return self.compare_ints(cls, self.mutate(a), self.mutate(b))
        sa, sb = self.simplify(a), self.simplify(b)
        if isinstance(sa, (E.IntImm, E.FloatImm)) and isinstance(sb, (E.IntImm, E.FloatImm)):
            return _bool(compare_values(cls, sa.value, sb.value))
        if cls is type(e) and sa is e.a and sb is e.b:
            return e
        return cls(sa, sb, "bool")

    def compare_ints(self, cls: type, a: Canon, b: Canon) -> E.PrimExpr:
        """`a cls b` for integers (cls one of LT, LE, EQ, NE) in TVM's normal form."""
        sa, sb = self.to_sum(a), self.to_sum(b)
        diff = sa.plus(sb, -1)
        decided = _decide(cls, self.bound_sum(diff))
        if decided is not None:
            return _bool(decided)
        if cls is E.LT or cls is E.LE:
            # TVM divides `a - b < 0` (for `a <= b`: `not (b - a < 0)`) by a common factor
            strict = cls is E.LT
            reduced = self._reduce_by_factor(diff if strict else sb.plus(sa, -1))
            if reduced is not None:
                result = self.compare_ints(E.LT, reduced, E.IntImm(diff.dtype, 0))
                return result if strict else _negate(result)
            if _has_terms(sa) and _has_terms(sb):
                return self._both_sides(cls, sa, sb, a, b)
            if not strict:
                return _negate(self.compare_ints(E.LT, b, a))
        return self._normal_form(cls, a, b, sa, sb, diff)

    def _both_sides(self, cls: type, sa: _Sum, sb: _Sum, a: Canon, b: Canon) -> E.PrimExpr:
        """`a < b` or `a <= b` with variables on both sides, as TVM's rewrite rules leave it: a
        lone subtracted term moves to the other side (`12 - x <= y` is `12 <= y + x`), the
        constants end up on one side, added (`x - 3 < y` is `x < y + 3`, `x < y - 3` is
        `x + 3 < y`), and a unit difference turns `<` into `<=` or back (`x < y + 1` is
        `x <= y`; `x + 1 <= y` and `x <= y - 1` are `x < y`)."""
        dtype = sa.dtype
        left, right = _live_terms(sa), _live_terms(sb)
        if len(left) == 1 and left[0].scale < 0:
            moved = _with_base(sb, sb.base)
            moved.add_term(left[0], -1)
            return self.compare_ints(cls, _Sum([], sa.base, dtype), moved)
        if len(right) == 1 and right[0].scale < 0:
            moved = _with_base(sa, sa.base)
            moved.add_term(right[0], -1)
            return self.compare_ints(cls, moved, _Sum([], sb.base, dtype))
        p, q = sa.base, sb.base
        if cls is E.LE and q == -1 and p >= 0:
            cls, q = E.LT, 0
        else:  # one constant, on the side where it is added
            net = q - p
            p, q = (-net, 0) if net < 0 else (0, net)
        if cls is E.LT and p == 0 and q == 1:
            cls, q = E.LE, 0
        elif cls is E.LE and p == 1 and q == 0:
            cls, p = E.LT, 0
        lhs = self.normalize(a) if p == sa.base else _with_base(sa, p).normalize(self.order)
        rhs = self.normalize(b) if q == sb.base else _with_base(sb, q).normalize(self.order)
        return cls(lhs, rhs, "bool")

    def _reduce_by_factor(self, diff: _Sum) -> _Sum | None:
        """For `diff < 0`: with `d` the gcd of the base and the scales that are not +-1, when
        the terms not divisible by `d` lie in [0, d), `diff < 0` iff `(divisible part) / d < 0`
        (`x * 8 + y < 16` with 0 <= y < 8 is `x < 2`)."""
        d = diff.base
        has_factor = False
        for t in diff.terms:
            if t.scale > 1 or t.scale < -1:
                has_factor = True
                d = gcd(d, abs(t.scale))
        if not has_factor or abs(d) <= 1:
            return None
        d = abs(d)
        divisible, extra = diff.separate(d)
        lo, hi = self.bound_sum(extra)
        if lo >= 0 and hi < d:
            return divisible.divided(d)
        return None

    def _normal_form(self, cls: type, a: Canon, b: Canon, sa: _Sum, sb: _Sum, diff: _Sum) -> E.PrimExpr:
        dtype = diff.dtype
        live = [t for t in diff.terms if t.scale != 0]
        if not live:
            return _bool(compare_values(cls, diff.base, 0))
        if _has_terms(sa) and _has_terms(sb):
            return cls(self.normalize(a), self.normalize(b), "bool")
        if len({t.scale > 0 for t in live}) == 2:
            # one side constant: move the other side's constant over
            var_left = _has_terms(sa)
            side, side_canon = (sa, a) if var_left else (sb, b)
            const = (sb.base - sa.base) if var_left else (sa.base - sb.base)
            expr = self.normalize(side_canon if side.base == 0 else _with_base(side, 0))
            const_expr = E.IntImm(dtype, const)
            return cls(expr, const_expr, "bool") if var_left or cls in (E.EQ, E.NE) else cls(const_expr, expr, "bool")
        positive = live[0].scale > 0
        terms = live if positive else [t.scaled(-1) for t in live]
        g = 0
        for t in terms:
            g = gcd(g, t.scale)
        bound = -diff.base if positive else diff.base  # V op bound (positive) / bound op V (negative)
        if g > 1:
            terms = [t.replace(scale=t.scale // g) for t in terms]
            if cls is E.EQ or cls is E.NE:
                if bound % g:
                    return _bool(cls is E.NE)
                bound //= g
            elif (cls is E.LT) == positive:  # V < b  or  b <= V: round up
                bound = -((-bound) // g)
            else:  # V <= b  or  b < V: round down
                bound //= g
        var_sum = _Sum(terms, 0, dtype)
        if len(terms) == 1 and cls is E.LT:
            t = terms[0]
            if t.scale == 1 and t.lower > 1 and t.upper is None:
                # x // l < b  ->  x < b * l;  b < x // l  ->  (b + 1) * l - 1 < x
                inner = self.mutate(t.replace(lower=1).normalize())
                if positive:
                    return self.compare_ints(E.LT, inner, E.IntImm(dtype, bound * t.lower))
                return self.compare_ints(E.LT, E.IntImm(dtype, (bound + 1) * t.lower - 1), inner)
        expr, const_expr = self.normalize(var_sum), E.IntImm(dtype, bound)
        if positive or cls in (E.EQ, E.NE):
            return cls(expr, const_expr, "bool")
        return cls(const_expr, expr, "bool")

    # ---- the rest ----
    def visit_select(self, e: E.Select) -> Canon:
        cond = self.simplify(e.condition)
        if _is_const_bool(cond, True):
            return self.simplify(e.true_value)
        if _is_const_bool(cond, False):
            return self.simplify(e.false_value)
        tv, fv = self.simplify(e.true_value), self.simplify(e.false_value)
        if cond is e.condition and tv is e.true_value and fv is e.false_value:
            return e
        return E.Select(cond, tv, fv)

    def visit_cast(self, e: E.Cast) -> Canon:
        value = self.simplify(e.value)
        folded = fold_cast(e.dtype, value)
        if folded is not None:
            return folded
        return e if value is e.value else E.Cast(e.dtype, value)

    def visit_call(self, e: E.Call) -> Canon:
        args = tuple(self.simplify(a) for a in e.args)
        if e.op == "if_then_else" and len(args) == 3:
            if _is_const_bool(args[0], True):
                return args[1]
            if _is_const_bool(args[0], False):
                return args[2]
        if all(x is y for x, y in zip(args, e.args)):
            return e
        return E.Call(e.dtype, e.op, args)

    def visit_load(self, e: E.BufferLoad) -> Canon:
        indices = tuple(self.simplify(i) for i in e.indices)
        if all(x is y for x, y in zip(indices, e.indices)):
            return e
        return E.BufferLoad(e.buffer, indices)

    def visit_opaque(self, e: E.PrimExpr) -> Canon:
        return e


def _linear_sum(e: E.PrimExpr, subst: Mapping[E.Var, E.PrimExpr]) -> _Sum | None:
    """The canonical sum of a sum or difference `e` of constant multiples of variables (the
    shape of most loop bindings), built directly: the same sum `Simplifier.mutate` builds
    (terms in first-seen order, each variable once), without its case analysis. None for
    anything else, and wherever `mutate` takes a shortcut (an operand that is zero, a term
    that cancels): a node other than +, -, * by a constant, a substituted variable, mixed
    dtypes."""
    coefs: dict[E.Var, int] = {}
    dtype = e.dtype
    found = _collect_linear(e, 1, coefs, subst, dtype)
    if found is None:
        return None
    terms = [_Split(v, v, 1, None, k, dtype) for v, k in coefs.items()]
    return _Sum(terms, found[0], dtype)


def _collect_linear(e: E.PrimExpr, scale: int, coefs: dict[E.Var, int], subst: Mapping[E.Var, E.PrimExpr],
                    dtype: str) -> tuple[int, bool] | None:
    """Adds `scale * e` to `coefs`; returns (its constant part, whether it has variables), or
    None when `e` is not linear."""
    if e.dtype != dtype:
        return None
    if isinstance(e, E.Var):
        if e in subst:
            return None
        coef = coefs.get(e, 0) + scale
        if coef == 0:
            return None  # a cancelled term: its place in the sum depends on how it cancelled
        coefs[e] = coef
        return 0, True
    if isinstance(e, E.IntImm):
        return scale * e.value, False
    t = type(e)
    if (t is E.Add or t is E.Sub) and isinstance(e, E.BinaryOp):
        left = _collect_linear(e.a, scale, coefs, subst, dtype)
        right = _collect_linear(e.b, scale if t is E.Add else -scale, coefs, subst, dtype) if left else None
        if left is None or right is None or right == (0, False) or (t is E.Add and left == (0, False)):
            return None  # (`x + 0` is `x` as it was: a scaled term stays one)
        return left[0] + right[0], left[1] or right[1]
    if t is E.Mul and isinstance(e, E.BinaryOp):
        a, b = e.a, e.b
        if isinstance(a, E.IntImm):
            a, b = b, a
        if isinstance(b, E.IntImm) and b.value != 0:  # (`x * 0` is 0: no term for x at all)
            return _collect_linear(a, scale * b.value, coefs, subst, dtype)
    return None


def _product(x: E.PrimExpr, y: E.PrimExpr) -> tuple[E.PrimExpr, int]:
    """x * y as (product of the non-constant factors, product of the constant factors):
    TVM's MulAndNormalize, which puts the constants last (`x * 2 * y` is `x * y * 2`)."""
    factors: list[E.PrimExpr] = []
    _unpack_product(x, factors)
    _unpack_product(y, factors)
    const = 1
    res: E.PrimExpr = E.IntImm(x.dtype, 1)
    for f in factors:
        if isinstance(f, E.IntImm):
            const *= f.value
        else:
            res = _op(E.Mul, res, f)
    return res, const


def _unpack_product(e: E.PrimExpr, out: list[E.PrimExpr]) -> None:
    if isinstance(e, E.Mul):
        _unpack_product(e.a, out)
        _unpack_product(e.b, out)
    else:
        out.append(e)


def _scale_mod(t: _Split, c: int) -> _Split:
    """`t` with its scale reduced modulo `c`, for `t % c`. TVM rewrites `x * c1 % c` (a scaled
    term, as canonical forms print one) to `x * (c1 % c) % c` between its canonical passes:
    `x * 6 % 4` is `x % 2 * 2`; `(5 - h) % 8` keeps its `- h`."""
    return t if t.scale in (0, 1) else t.replace(scale=t.scale % c)


def _dividing_terms(s: _Sum, c: int) -> Iterator[tuple[_Split, int, _Sum]]:
    """(term, its scale, the rest of `s`) for each term of `s` whose positive scale divides `c`."""
    for t in s.terms:
        if t.scale > 0 and c % t.scale == 0:
            rest = s.copy()
            rest.add_term(t, -1)
            yield t, t.scale, rest


def _live_terms(s: _Sum) -> list[_Split]:
    return [t for t in s.terms if t.scale != 0]


def _negate(cond: E.PrimExpr) -> E.PrimExpr:
    """`not cond` for a condition in normal form."""
    if isinstance(cond, E.IntImm):
        return _bool(cond.value == 0)
    if isinstance(cond, E.LT):
        return E.LE(cond.b, cond.a, "bool")
    if isinstance(cond, E.LE):
        return E.LT(cond.b, cond.a, "bool")
    if isinstance(cond, E.EQ):
        return E.NE(cond.a, cond.b, "bool")
    if isinstance(cond, E.NE):
        return E.EQ(cond.a, cond.b, "bool")
    return E.Not(cond)


def _has_terms(s: _Sum) -> bool:
    return any(t.scale != 0 for t in s.terms)


def _with_base(s: _Sum, base: int) -> _Sum:
    return _Sum(list(s.terms), base, s.dtype)


def _decide(cls: type, diff: Bound) -> bool | None:
    """`diff cls 0` when the bounds of `diff` decide it."""
    lo, hi = diff
    if cls is E.LT:
        return True if hi < 0 else False if lo >= 0 else None
    if cls is E.LE:
        return True if hi <= 0 else False if lo > 0 else None
    if cls is E.EQ:
        return True if lo == hi == 0 else False if lo > 0 or hi < 0 else None
    if cls is E.NE:
        return False if lo == hi == 0 else True if lo > 0 or hi < 0 else None
    return None


_Handler = Callable[[Simplifier, Any], Canon]


_HANDLERS: dict[type, _Handler] = {
    E.IntImm: Simplifier.visit_opaque,
    E.FloatImm: Simplifier.visit_opaque,
    E.StringImm: Simplifier.visit_opaque,
    E.Var: Simplifier.visit_var,
    E.Add: Simplifier.visit_add,
    E.Sub: Simplifier.visit_sub,
    E.Mul: Simplifier.visit_mul,
    E.FloorDiv: Simplifier.visit_divmod,
    E.FloorMod: Simplifier.visit_divmod,
    E.Div: Simplifier.visit_folding,
    E.Mod: Simplifier.visit_folding,
    E.Min: Simplifier.visit_minmax,
    E.Max: Simplifier.visit_minmax,
    E.And: Simplifier.visit_logic,
    E.Or: Simplifier.visit_logic,
    E.Not: Simplifier.visit_not,
    E.Select: Simplifier.visit_select,
    E.Cast: Simplifier.visit_cast,
    E.Call: Simplifier.visit_call,
    E.BufferLoad: Simplifier.visit_load,
    **{cls: Simplifier.visit_compare for cls in (E.EQ, E.NE, E.LT, E.LE, E.GT, E.GE)},
}


def _handler_for(cls: type) -> _Handler:
    """The handler of `cls`'s nearest known base (the TE builder's loads and axes); anything
    unknown is left as it is."""
    for klass in cls.__mro__[1:]:
        if klass is E.BinaryOp:
            break
        handler = _HANDLERS.get(klass)
        if handler is not None:
            break
    else:
        handler = None
    if handler is None:
        handler = Simplifier.visit_opaque
    _HANDLERS[cls] = handler
    return handler
