"""Affine forms `sum(coef * term) + const` of integer index expressions.

The schedule primitives need symbolic intervals whose ends are affine in the loops outside
(`[l * 32, l * 32 + 31]`), the code generator needs the stride of an index in a lane variable
(vectorization, buffer compaction), and region inference needs the part of an index that moves
with the loops inside a block. All three read index expressions the same way, here
(docs/architecture.md, "Integer arithmetic"): `+`, `-`, multiplication by a constant and
integer casts that cannot change a value are affine; anything else (`floordiv`, `floormod`,
products of variables, `min`, `select`, loads) is a term of its own, an `Atom`, equal to another
atom when the expressions are structurally equal (`expr_equal`).
"""

from __future__ import annotations

from typing import Generic, Iterable, Mapping, TypeVar, overload

from msdb.ir import expr as E
from msdb.ir.arith.interval import Bound, numeric_range
from msdb.ir.arith.keys import expr_key
from msdb.ir.arith.limits import cast_preserves_value, is_integer
from msdb.ir.functor import free_vars

__all__ = ["Atom", "Term", "Affine", "term_expr", "affine_form", "as_affine", "stride_of", "split_linear"]


class Atom:
    """A non-affine integer expression used as a term of an affine form (equal to another atom
    when the expressions are structurally equal)."""

    __slots__ = ("expr", "key")

    def __init__(self, expr: E.PrimExpr) -> None:
        self.expr = expr
        self.key = expr_key(expr)

    @property
    def dtype(self) -> str:
        return self.expr.dtype

    @property
    def name(self) -> str:
        return f"<{type(self.expr).__name__}>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Atom) and other.key == self.key

    def __hash__(self) -> int:
        return hash(("atom", self.key))

    def __repr__(self) -> str:
        return f"Atom({self.name})"


Term = E.Var | Atom
#: The terms of an affine form: `Term` in general, `E.Var` in the forms `as_affine` returns.
T = TypeVar("T", E.Var, Term)


def term_expr(term: Term) -> E.PrimExpr:
    """The expression a term of an affine form stands for."""
    return term.expr if isinstance(term, Atom) else term


class Affine(Generic[T]):
    """`sum(coef * term) + const` with integer coefficients; terms are variables or atoms and
    keep first-seen order; zero coefficients are dropped."""

    __slots__ = ("terms", "const")

    @overload
    def __init__(self: Affine[Term], terms: None = None, const: int = 0) -> None: ...

    @overload
    def __init__(self, terms: Mapping[T, int], const: int = 0) -> None: ...

    def __init__(self, terms: Mapping[T, int] | None = None, const: int = 0) -> None:
        self.terms: dict[T, int] = {v: c for v, c in terms.items() if c != 0} if terms else {}
        self.const = int(const)

    @classmethod
    def _owning(cls, terms: dict[T, int], const: int) -> Affine[T]:
        """A form over `terms`, which the caller hands over with no zero coefficient and an
        int `const` (the arithmetic below builds millions of forms in a search round:
        docs/architecture.md, "Integer arithmetic")."""
        form = object.__new__(cls)
        form.terms = terms
        form.const = const
        return form

    @staticmethod
    def of(value: int | E.Var) -> Affine[Term]:
        if isinstance(value, E.Var):
            return _single(value)
        return Affine(None, value)

    def is_const(self) -> bool:
        return not self.terms

    def coef(self, term: T) -> int:
        """The coefficient of `term` (0 when absent)."""
        return self.terms.get(term, 0)

    def __add__(self, other: Affine[T] | int) -> Affine[T]:
        if not isinstance(other, Affine):
            return Affine._owning(dict(self.terms), int(self.const + other))
        terms = dict(self.terms)
        for var, coef in other.terms.items():
            total = terms.get(var, 0) + coef
            if total:
                terms[var] = total
            else:
                del terms[var]
        return Affine._owning(terms, self.const + other.const)

    def __sub__(self, other: Affine[T] | int) -> Affine[T]:
        if not isinstance(other, Affine):
            return Affine._owning(dict(self.terms), int(self.const - other))
        return self + other.scale(-1)

    def scale(self, k: int) -> Affine[T]:
        if not k:
            return Affine._owning({}, 0)
        return Affine._owning({v: c * k for v, c in self.terms.items()}, self.const * k)

    def same_terms(self, other: Affine[T]) -> bool:
        return self.terms == other.terms

    def divisible_by(self, c: int) -> bool:
        return self.const % c == 0 and all(coef % c == 0 for coef in self.terms.values())

    def exact_div(self, c: int) -> Affine[T]:
        return Affine({v: k // c for v, k in self.terms.items()}, self.const // c)

    def substitute_points(self, points: Mapping[E.Var, int]) -> Affine[T]:
        """Replace variables known to take a single value by that value."""
        if not any(v in points for v in self.terms):
            return self
        terms: dict[T, int] = {}
        const = self.const
        for var, coef in self.terms.items():
            if isinstance(var, E.Var) and var in points:
                const += coef * points[var]
            else:
                terms[var] = coef
        return Affine(terms, const)

    def numeric(self, bounds: Mapping[E.Var, Bound]) -> Bound | None:
        """Numeric (lo, hi) over `bounds`; None if some term is unbounded."""
        lo = hi = self.const
        for var, coef in self.terms.items():
            rng = numeric_range(var.expr, bounds) if isinstance(var, Atom) else bounds.get(var)
            if rng is None:
                return None
            a, b = coef * rng[0], coef * rng[1]
            lo += min(a, b)
            hi += max(a, b)
        return lo, hi

    def to_expr(self, dtype: str = "int32") -> E.PrimExpr:
        """The expression in TVM's canonical term order (largest coefficient first), the
        constant last; how generated loop bindings print."""
        items = sorted(self.terms.items(), key=lambda kv: -kv[1])
        result: E.PrimExpr | None = None
        for var, coef in items:
            mag = abs(coef)
            atom = term_expr(var)
            term: E.PrimExpr = atom if mag == 1 else E.Mul(atom, E.IntImm(var.dtype, mag))
            if result is None:
                result = term if coef > 0 else E.Mul(atom, E.IntImm(var.dtype, coef))
            else:
                result = E.Add(result, term) if coef > 0 else E.Sub(result, term)
        if result is None:
            return E.IntImm(dtype, self.const)
        if self.const > 0:
            result = E.Add(result, E.IntImm(result.dtype, self.const))
        elif self.const < 0:
            result = E.Sub(result, E.IntImm(result.dtype, -self.const))
        return result

    def render(self, dtype: str, terms: Iterable[T] | None = None, with_const: bool = True) -> E.PrimExpr:
        """`sum(coef * term)` over the chosen terms (all by default) in their order, each term
        cast to `dtype`, plus the constant: the shape the code generator emits."""
        out: E.PrimExpr | None = None
        chosen = self.terms if terms is None else {t: self.terms[t] for t in terms}
        for var, coef in chosen.items():
            atom = term_expr(var)
            if atom.dtype != dtype:
                atom = E.Cast(dtype, atom)
            part = atom if coef == 1 else E.Mul(atom, E.IntImm(dtype, coef))
            out = part if out is None else E.Add(out, part)
        if with_const and (self.const != 0 or out is None):
            c = E.IntImm(dtype, self.const)
            out = c if out is None else E.Add(out, c)
        assert out is not None
        return out

    def __repr__(self) -> str:
        parts = [f"{c}*{v.name}" for v, c in self.terms.items()]
        return "Affine(" + " + ".join(parts + [str(self.const)]) + ")"


# ---------------------------------------------------------------------------------------------
# Reading expressions
# ---------------------------------------------------------------------------------------------


def _single(term: Term) -> Affine[Term]:
    return Affine._owning({term: 1}, 0)


def _transparent_cast(e: E.Cast, assume_no_overflow: bool) -> bool:
    src, dst = e.value.dtype, e.dtype
    if assume_no_overflow:
        return is_integer(src) and is_integer(dst)
    return cast_preserves_value(src, dst)


def _read(e: E.PrimExpr, strict: bool, assume_no_overflow: bool) -> Affine[Term] | None:
    """The affine form of `e`; a non-affine part is an `Atom`, or makes the answer None when
    `strict`."""
    if isinstance(e, E.Var):
        return _single(e)
    if isinstance(e, E.IntImm):
        return Affine(None, e.value)
    if isinstance(e, (E.Add, E.Sub)):
        a = _read(e.a, strict, assume_no_overflow)
        b = _read(e.b, strict, assume_no_overflow) if a is not None else None
        if a is None or b is None:
            return None
        return a + b if isinstance(e, E.Add) else a - b
    if isinstance(e, E.Mul):
        a = _read(e.a, strict, assume_no_overflow)
        b = _read(e.b, strict, assume_no_overflow) if a is not None else None
        if a is not None and b is not None:
            if b.is_const():
                return a.scale(b.const)
            if a.is_const():
                return b.scale(a.const)
    elif isinstance(e, E.Cast) and _transparent_cast(e, assume_no_overflow):
        return _read(e.value, strict, assume_no_overflow)
    return None if strict else _single(Atom(e))


def affine_form(e: E.PrimExpr, *, assume_no_overflow: bool = False) -> Affine[Term]:
    """The affine form of an integer expression over variables and atoms. Exact: the form's
    value equals `e`'s. Integer casts are looked through when they cannot change a value, or
    always with `assume_no_overflow` (TVM's region analysis treats casts of indices that way)."""
    form = _read(e, False, assume_no_overflow)
    assert form is not None
    return form


def as_affine(e: E.PrimExpr) -> Affine[E.Var] | None:
    """The affine form of `e` when it is affine in its variables alone (no atoms), else None;
    index casts are looked through (`assume_no_overflow`), as the schedule's region analysis
    needs."""
    form = _read(e, True, True)
    if form is None:
        return None
    return Affine({v: c for v, c in form.terms.items() if isinstance(v, E.Var)}, form.const)


def stride_of(e: E.PrimExpr, var: E.Var) -> int | None:
    """How much `e` grows when `var` grows by one, if that is a constant (0 when `var` does
    not occur); None when `e` is not affine in `var`."""
    form = affine_form(e)
    for term in form.terms:
        if isinstance(term, Atom) and var in free_vars(term.expr):
            return None
    return form.coef(var)


def split_linear(e: E.PrimExpr, variables: Mapping[E.Var, object]) -> tuple[dict[E.Var, int], E.PrimExpr | None] | None:
    """`e` as `sum(coef * v for v in variables) + rest`, the rest free of `variables` and kept
    as written (region bounds print like TVM's); None when `e` is not affine in `variables`.
    The coefficients are `affine_form`'s for those variables."""
    if isinstance(e, E.Var) and e in variables:
        return {e: 1}, None
    if isinstance(e, (E.Add, E.Sub)):
        left = split_linear(e.a, variables)
        right = split_linear(e.b, variables) if left is not None else None
        if left is None or right is None:
            return None
        sign = 1 if isinstance(e, E.Add) else -1
        coefs = dict(left[0])
        for var, coef in right[0].items():
            coefs[var] = coefs.get(var, 0) + sign * coef
        rest_a, rest_b = left[1], right[1]
        rest: E.PrimExpr | None
        if rest_b is None:
            rest = rest_a
        elif rest_a is None:
            rest = rest_b if sign == 1 else E.make_const(0, rest_b.dtype) - rest_b
        else:
            rest = type(e)(rest_a, rest_b)
        return coefs, rest
    if isinstance(e, E.Mul):
        for const_side, other in ((e.a, e.b), (e.b, e.a)):
            c = E.const_int(const_side)
            if c is not None:
                inner = split_linear(other, variables)
                if inner is None:
                    return None
                return {v: k * c for v, k in inner[0].items()}, None if inner[1] is None else inner[1] * c
    if free_vars(e) & variables.keys():
        return None
    return {}, e
