"""Integer arithmetic: canonical simplification and bound analysis of index expressions.

Every loop transformation rewrites block bindings (`vi = i_0 * 16 + i_1`), and the fusing of
split loops has to come back to the original variable (`f // 8 * 8 + f % 8 // 4 * 4 + f % 4`
is `f`), so the schedule needs a simplifier that understands sums of products and
floor-division "digits" the way TVM's canonical simplifier does. Results are always exact:
a rewrite is only applied when it holds for every integer value of the variables within the
bounds given, never "usually".

The canonical form of an integer expression is a sum `c1*t1 + c2*t2 + ... + k` of terms with
constant coefficients. A term is a variable, a *digit* `(x % upper) // lower` of some base `x`
(`upper` may be absent), or an opaque expression (a product of variables, a min, a load, ...).
Like terms merge, and adjacent digits of one base merge back (`(x % 8) // 4 * 4 + x % 4` is
`x % 8`). Terms print in TVM's order: by coefficient, largest first, ties in first-seen order;
positive terms, then a positive constant, then the subtracted terms, then a negative constant.

Public API: `simplify(expr, ranges=None)`, `Analyzer` (`bind`, `simplify`, `can_prove`,
`can_prove_equal`, `const_int_bound`), `const_int_bound(expr, ranges=None)`.
"""

from __future__ import annotations

from math import gcd
from typing import Any, Mapping, Union

from msdb.ir import expr as E
from msdb.ir.dtype import is_int, is_uint

__all__ = ["simplify", "Analyzer", "const_int_bound", "structural_key"]

# Unbounded ends of an interval are represented by huge integers (exact, no None-branching);
# results are clamped to them so arithmetic never grows without limit.
_POS_INF = 1 << 200
_NEG_INF = -_POS_INF

Bound = tuple[int, int]
RangeLike = Union[E.Range, int, tuple]


def _clamp(v: int) -> int:
    if v >= _POS_INF:
        return _POS_INF
    if v <= _NEG_INF:
        return _NEG_INF
    return v


def _finite(v: int) -> bool:
    return _NEG_INF < v < _POS_INF


def _b_add(x: Bound, y: Bound) -> Bound:
    lo = _NEG_INF if (x[0] == _NEG_INF or y[0] == _NEG_INF) else _clamp(x[0] + y[0])
    hi = _POS_INF if (x[1] == _POS_INF or y[1] == _POS_INF) else _clamp(x[1] + y[1])
    return lo, hi


def _b_scale(x: Bound, c: int) -> Bound:
    if c == 0:
        return 0, 0
    lo = _clamp(x[0] * c) if _finite(x[0]) else (_NEG_INF if c > 0 else _POS_INF)
    hi = _clamp(x[1] * c) if _finite(x[1]) else (_POS_INF if c > 0 else _NEG_INF)
    return (lo, hi) if c > 0 else (hi, lo)


def _b_mul(x: Bound, y: Bound) -> Bound:
    if x[0] == x[1] and _finite(x[0]):
        return _b_scale(y, x[0])
    if y[0] == y[1] and _finite(y[0]):
        return _b_scale(x, y[0])
    cands = []
    for a in x:
        for b in y:
            if a == 0 or b == 0:
                cands.append(0)
            elif _finite(a) and _finite(b):
                cands.append(_clamp(a * b))
            else:
                cands.append(_POS_INF if (a > 0) == (b > 0) else _NEG_INF)
    return min(cands), max(cands)


def _b_floordiv(x: Bound, c: int) -> Bound:
    """x // c for a positive constant c."""
    lo = x[0] // c if _finite(x[0]) else _NEG_INF
    hi = x[1] // c if _finite(x[1]) else _POS_INF
    return lo, hi


def _b_floormod(x: Bound, c: int) -> Bound:
    """x % c for a positive constant c."""
    if _finite(x[0]) and _finite(x[1]) and x[0] // c == x[1] // c:
        return x[0] % c, x[1] % c
    return 0, c - 1


def _dtype_bound(dtype: str) -> Bound:
    if dtype == "bool":
        return 0, 1
    if is_uint(dtype):
        return 0, _POS_INF
    return _NEG_INF, _POS_INF


def _int_dtype(dtype: str) -> bool:
    return is_int(dtype) or is_uint(dtype)


def _wrap(value: int, dtype: str) -> int:
    """`value` converted to an integer dtype the way a cast does (two's complement wrap)."""
    if dtype == "bool":
        return int(value != 0)
    lo, hi = _dtype_limits(dtype)
    span = hi - lo + 1
    return (value - lo) % span + lo


def _truncdiv_const(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _truncmod_const(a: int, b: int) -> int:
    return a - _truncdiv_const(a, b) * b


# ---------------------------------------------------------------------------------------------
# Structural keys (for merging like terms)
# ---------------------------------------------------------------------------------------------


def structural_key(e: Any) -> Any:
    """A hashable key equal for structurally equal expressions (variables and buffers compared
    by identity, as within one function). Used to merge like terms."""
    t = type(e)
    if t is E.Var:
        return e
    if t is E.IntImm:
        return ("i", e.value, e.dtype)
    if t is E.FloatImm:
        return ("f", e.value, e.dtype)
    if isinstance(e, E.BinaryOp):
        return (t.__name__, structural_key(e.a), structural_key(e.b), e.dtype)
    if t is E.Not:
        return ("not", structural_key(e.a))
    if t is E.Select:
        return ("sel", structural_key(e.condition), structural_key(e.true_value), structural_key(e.false_value))
    if t is E.Cast:
        return ("cast", e.dtype, structural_key(e.value))
    if t is E.Call:
        return ("call", e.op, e.dtype, tuple(structural_key(a) for a in e.args))
    if t is E.BufferLoad:
        return ("load", e.buffer, tuple(structural_key(i) for i in e.indices))
    if t is E.StringImm:
        return ("str", e.value)
    return ("obj", e)


# ---------------------------------------------------------------------------------------------
# Canonical sums
# ---------------------------------------------------------------------------------------------


class _Digit:
    """`(base % upper) // lower` (no modulo when `upper` is None); `base` is an expression
    already in canonical form, `base_key` its structural key."""

    __slots__ = ("base", "base_key", "lower", "upper")

    def __init__(self, base: E.PrimExpr, base_key: Any, lower: int, upper: int | None) -> None:
        self.base = base
        self.base_key = base_key
        self.lower = lower
        self.upper = upper

    @property
    def key(self) -> Any:
        return ("d", self.base_key, self.lower, self.upper)


class _Sum:
    """sum(coef * atom) + const; `terms` maps a term key to (atom, coef), coef != 0. An atom is
    a Var, a _Digit or an opaque PrimExpr."""

    __slots__ = ("terms", "const", "dtype")

    def __init__(self, terms: dict, const: int, dtype: str) -> None:
        self.terms = terms
        self.const = const
        self.dtype = dtype

    def is_const(self) -> bool:
        return not self.terms

    def add(self, other: _Sum, sign: int = 1) -> _Sum:
        terms = dict(self.terms)
        for key, (atom, coef) in other.terms.items():
            old = terms.get(key)
            new = coef * sign + (old[1] if old is not None else 0)
            if new == 0:
                if old is not None:
                    del terms[key]
            else:
                terms[key] = (old[0] if old is not None else atom, new)
        return _Sum(terms, self.const + sign * other.const, self.dtype)

    def scale(self, c: int) -> _Sum:
        if c == 0:
            return _Sum({}, 0, self.dtype)
        if c == 1:
            return self
        return _Sum({k: (a, coef * c) for k, (a, coef) in self.terms.items()}, self.const * c, self.dtype)

    def add_const(self, c: int) -> _Sum:
        return self if c == 0 else _Sum(self.terms, self.const + c, self.dtype)


def _const_sum(value: int, dtype: str) -> _Sum:
    return _Sum({}, value, dtype)


# ---------------------------------------------------------------------------------------------
# The simplifier
# ---------------------------------------------------------------------------------------------


def _bool(value: bool) -> E.IntImm:
    return E.IntImm("bool", 1 if value else 0)


def _is_true(e: E.PrimExpr) -> bool:
    return type(e) is E.IntImm and e.dtype == "bool" and e.value != 0


def _is_false(e: E.PrimExpr) -> bool:
    return type(e) is E.IntImm and e.dtype == "bool" and e.value == 0


class _Simplifier:
    """One simplification context: variable bounds (inclusive, possibly infinite) and
    variable substitutions."""

    def __init__(self, bounds: dict[E.Var, Bound], subst: dict[E.Var, E.PrimExpr] | None = None) -> None:
        self.bounds = bounds
        self.subst = subst if subst is not None else {}

    # ---- entry ----
    def simplify(self, e: E.PrimExpr) -> E.PrimExpr:
        t = type(e)
        if t is E.IntImm or t is E.FloatImm or t is E.StringImm:
            return e
        if t is E.Var:
            return self.subst.get(e, e) if self.subst else e
        if _int_dtype(e.dtype) and self._is_arith(e):
            result = self.render(self.to_sum(e))
        else:
            result = self.visit(e)
        return e if result is not e and structural_key(result) == structural_key(e) else result

    @staticmethod
    def _is_arith(e: E.PrimExpr) -> bool:
        return isinstance(e, (E.Add, E.Sub, E.Mul, E.FloorDiv, E.FloorMod, E.Min, E.Max))

    # ---- non-canonical nodes: simplify children, fold what can be folded ----
    def visit(self, e: E.PrimExpr) -> E.PrimExpr:
        t = type(e)
        if t is E.Var:
            return self.subst.get(e, e) if self.subst else e
        if t is E.IntImm or t is E.FloatImm or t is E.StringImm:
            return e
        if _int_dtype(e.dtype) and e.dtype != "bool" and self._is_arith(e):
            return self.render(self.to_sum(e))
        if isinstance(e, E.CmpOp):
            return self.visit_cmp(e)
        if t is E.Not:
            return self.visit_not(e)
        if t is E.Select:
            cond = self.visit(e.condition)
            if _is_true(cond):
                return self.visit(e.true_value)
            if _is_false(cond):
                return self.visit(e.false_value)
            tv, fv = self.visit(e.true_value), self.visit(e.false_value)
            if cond is e.condition and tv is e.true_value and fv is e.false_value:
                return e
            return E.Select(cond, tv, fv)
        if t is E.Cast:
            value = self.visit(e.value)
            if type(value) is E.IntImm and _int_dtype(e.dtype):
                return E.IntImm(e.dtype, _wrap(value.value, e.dtype))
            if type(value) is E.IntImm and e.dtype == "bool":
                return _bool(value.value != 0)
            if value.dtype == e.dtype:
                return value
            return e if value is e.value else E.Cast(e.dtype, value)
        if t is E.Call:
            args = tuple(self.visit(a) for a in e.args)
            if e.op == "if_then_else" and len(args) == 3:
                if _is_true(args[0]):
                    return args[1]
                if _is_false(args[0]):
                    return args[2]
            if all(a is b for a, b in zip(args, e.args)):
                return e
            return E.Call(e.dtype, e.op, args)
        if t is E.BufferLoad:
            indices = tuple(self.simplify(i) for i in e.indices)
            if all(a is b for a, b in zip(indices, e.indices)):
                return e
            return E.BufferLoad(e.buffer, indices)
        if isinstance(e, E.BinaryOp):
            a, b = self.visit(e.a), self.visit(e.b)
            if _int_dtype(e.dtype) and type(a) is E.IntImm and type(b) is E.IntImm and b.value != 0:
                if t is E.Div:
                    return E.IntImm(e.dtype, _truncdiv_const(a.value, b.value))
                if t is E.Mod:
                    return E.IntImm(e.dtype, _truncmod_const(a.value, b.value))
            if a is e.a and b is e.b:
                return e
            return t(a, b, e.dtype)
        return e

    # ---- booleans ----
    def visit_cmp(self, e: E.CmpOp) -> E.PrimExpr:
        t = type(e)
        if t is E.And or t is E.Or:
            a = self.visit(e.a)
            if t is E.And:
                if _is_false(a):
                    return a
                b = self.visit(e.b)
                if _is_true(a):
                    return b
                if _is_true(b):
                    return a
                if _is_false(b):
                    return b
            else:
                if _is_true(a):
                    return a
                b = self.visit(e.b)
                if _is_false(a):
                    return b
                if _is_false(b):
                    return a
                if _is_true(b):
                    return b
            if structural_key(a) == structural_key(b):
                return a
            return e if (a is e.a and b is e.b) else t(a, b, "bool")
        a, b = e.a, e.b
        if not (_int_dtype(a.dtype) and _int_dtype(b.dtype)) or a.dtype == "bool" or b.dtype == "bool":
            sa, sb = self.visit(a), self.visit(b)
            if type(sa) is E.IntImm and type(sb) is E.IntImm:
                return _bool(_compare_consts(t, sa.value, sb.value))
            if type(sa) is E.FloatImm and type(sb) is E.FloatImm:
                return _bool(_compare_consts(t, sa.value, sb.value))
            return e if (sa is a and sb is b) else t(sa, sb, "bool")
        if t is E.GT:
            t, a, b = E.LT, b, a
        elif t is E.GE:
            t, a, b = E.LE, b, a
        diff = self.to_sum(a).add(self.to_sum(b), -1)
        diff = self.merge(diff)
        lo, hi = self.bound_sum(diff)
        if t is E.LT:
            if hi < 0:
                return _bool(True)
            if lo >= 0:
                return _bool(False)
        elif t is E.LE:
            if hi <= 0:
                return _bool(True)
            if lo > 0:
                return _bool(False)
        elif t is E.EQ:
            if lo == hi == 0:
                return _bool(True)
            if lo > 0 or hi < 0:
                return _bool(False)
        elif t is E.NE:
            if lo == hi == 0:
                return _bool(False)
            if lo > 0 or hi < 0:
                return _bool(True)
        if t is E.LT or t is E.LE:
            reduced = self.reduce_by_leading(diff if t is E.LT else diff.add_const(-1))
            if reduced is not None:
                return self.render_cmp(E.LT, reduced)
        return self.render_cmp(t, diff)

    def reduce_by_leading(self, diff: _Sum) -> _Sum | None:
        """For `diff < 0`: with c the largest coefficient, diff = c*Q + R; when R // c is one
        constant k over R's range, `diff < 0` iff `Q + k < 0` (floor(diff/c) < 0)."""
        c = 0
        for _, coef in diff.terms.values():
            c = max(c, abs(coef))
        if c <= 1:
            return None
        q_terms: dict = {}
        r_terms: dict = {}
        for key, (atom, coef) in diff.terms.items():
            if coef % c == 0:
                q_terms[key] = (atom, coef // c)
            else:
                r_terms[key] = (atom, coef)
        if not r_terms:
            return None
        lo, hi = self.bound_sum(_Sum(r_terms, diff.const % c, diff.dtype))
        if not (_finite(lo) and _finite(hi) and lo // c == hi // c):
            return None
        return _Sum(q_terms, diff.const // c + lo // c, diff.dtype)

    def render_cmp(self, op: type, diff: _Sum) -> E.PrimExpr:
        """`diff op 0` as `positive terms op negative terms`, after dividing by the gcd of the
        coefficients (exact for integers)."""
        g = 0
        for _, coef in diff.terms.values():
            g = gcd(g, coef)
        c = diff.const
        if g > 1:
            if op is E.LT:
                # g*T + c < 0  <=>  T < ceil(-c/g)  <=>  T + floor(c/g) < 0
                c = c // g
            elif op is E.LE:
                # g*T + c <= 0  <=>  g*T + (c-1) < 0  <=>  T + floor((c-1)/g) + 1 <= 0
                c = (diff.const - 1) // g + 1
            elif op in (E.EQ, E.NE):
                if diff.const % g != 0:
                    return _bool(op is E.NE)
                c = diff.const // g
            diff = _Sum({k: (a, coef // g) for k, (a, coef) in diff.terms.items()}, c, diff.dtype)
        pos = _Sum({k: v for k, v in diff.terms.items() if v[1] > 0}, 0, diff.dtype)
        neg = _Sum({k: (a, -coef) for k, (a, coef) in diff.terms.items() if coef < 0}, 0, diff.dtype)
        if not pos.terms:
            lhs, rhs = _const_sum(diff.const, diff.dtype), neg
        elif not neg.terms:
            lhs, rhs = pos, _const_sum(-diff.const, diff.dtype)
        else:
            lhs, rhs = pos, neg.add_const(-diff.const)
        return op(self.render(lhs), self.render(rhs), "bool")

    def visit_not(self, e: E.Not) -> E.PrimExpr:
        a = self.visit(e.a)
        if type(a) is E.IntImm:
            return _bool(a.value == 0)
        ta = type(a)
        if ta is E.Not:
            return a.a
        if not (isinstance(a, E.CmpOp) and _int_dtype(a.a.dtype) and _int_dtype(a.b.dtype)):
            # (for floats `not a < b` is not `b <= a`: NaN compares false both ways)
            return e if a is e.a else E.Not(a)
        if ta is E.LT:
            return E.LE(a.b, a.a, "bool")
        if ta is E.LE:
            return E.LT(a.b, a.a, "bool")
        if ta is E.EQ:
            return E.NE(a.a, a.b, "bool")
        if ta is E.NE:
            return E.EQ(a.a, a.b, "bool")
        return e if a is e.a else E.Not(a)

    # ---- canonical sums ----
    def to_sum(self, e: E.PrimExpr) -> _Sum:
        t = type(e)
        if t is E.IntImm:
            return _Sum({}, e.value, e.dtype)
        if t is E.Var:
            if self.subst and e in self.subst:
                return self.to_sum(self.subst[e])
            return _Sum({e: (e, 1)}, 0, e.dtype)
        if t is E.Add:
            return self.to_sum(e.a).add(self.to_sum(e.b), 1)
        if t is E.Sub:
            return self.to_sum(e.a).add(self.to_sum(e.b), -1)
        if t is E.Mul:
            a, b = self.to_sum(e.a), self.to_sum(e.b)
            if not b.terms:
                return a.scale(b.const)
            if not a.terms:
                return b.scale(a.const)
            return self.opaque(E.Mul(self.render(a), self.render(b), e.dtype))
        if t is E.FloorDiv or t is E.FloorMod:
            a, b = self.to_sum(e.a), self.to_sum(e.b)
            if not b.terms and b.const > 0:
                return self.floordiv(a, b.const) if t is E.FloorDiv else self.floormod(a, b.const)
            if not a.terms and not b.terms and b.const != 0:
                value = a.const // b.const if t is E.FloorDiv else a.const % b.const
                return _const_sum(value, e.dtype)
            if not b.terms and b.const == 1 and t is E.FloorDiv:
                return a
            return self.opaque(t(self.render(a), self.render(b), e.dtype))
        if t is E.Min or t is E.Max:
            a, b = self.to_sum(e.a), self.to_sum(e.b)
            lo, hi = self.bound_sum(self.merge(a.add(b, -1)))
            if t is E.Min:
                if hi <= 0:
                    return a
                if lo >= 0:
                    return b
            else:
                if hi <= 0:
                    return b
                if lo >= 0:
                    return a
            return self.opaque(t(self.render(a), self.render(b), e.dtype))
        result = self.visit(e)
        if type(result) is E.IntImm:
            return _Sum({}, result.value, e.dtype)
        return self.opaque(result)

    def opaque(self, e: E.PrimExpr) -> _Sum:
        if type(e) is E.IntImm:
            return _Sum({}, e.value, e.dtype)
        if type(e) is E.Var:
            return _Sum({e: (e, 1)}, 0, e.dtype)
        return _Sum({("o", structural_key(e)): (e, 1)}, 0, e.dtype)

    # ---- floor division and modulo by a positive constant ----
    def floordiv(self, s: _Sum, c: int) -> _Sum:
        if c == 1:
            return s
        s = self.merge(s)
        if not s.terms:
            return _const_sum(s.const // c, s.dtype)
        q_terms: dict = {}
        r_terms: dict = {}
        for key, (atom, coef) in s.terms.items():
            if coef % c == 0:
                q_terms[key] = (atom, coef // c)
            else:
                r_terms[key] = (atom, coef)
        q = _Sum(q_terms, s.const // c, s.dtype)
        if not r_terms:
            return q
        r = _Sum(r_terms, s.const % c, s.dtype)
        lo, hi = self.bound_sum(r)
        if _finite(lo) and _finite(hi) and lo // c == hi // c:
            return q.add_const(lo // c)
        g = c
        for _, coef in r_terms.values():
            g = gcd(g, coef)
        if g > 1:
            # r = g*T + rem with 0 <= rem < g, so r // c == T // (c / g)
            t_sum = _Sum({k: (a, coef // g) for k, (a, coef) in r_terms.items()}, r.const // g, s.dtype)
            return q.add(self.floordiv_atom(t_sum, c // g))
        return q.add(self.floordiv_atom(r, c))

    def floordiv_atom(self, t: _Sum, c: int) -> _Sum:
        """t // c as a single term (t has no part divisible by c)."""
        if c == 1:
            return t
        lo, hi = self.bound_sum(t)
        if _finite(lo) and _finite(hi) and lo // c == hi // c:
            return _const_sum(lo // c, t.dtype)
        if len(t.terms) == 1 and t.const == 0:
            (atom, coef), = t.terms.values()
            if coef > 0 and c % coef == 0:
                m = c // coef
                if type(atom) is E.Var:
                    return self.make_digit(atom, atom, m, None, t.dtype)
                if type(atom) is _Digit:
                    return self.make_digit(atom.base, atom.base_key, atom.lower * m, atom.upper, t.dtype)
        base = self.render(t)
        return self.make_digit(base, structural_key(base), c, None, t.dtype)

    def floormod(self, s: _Sum, c: int) -> _Sum:
        if c == 1:
            return _const_sum(0, s.dtype)
        s = self.merge(s)
        terms = {}
        for key, (atom, coef) in s.terms.items():
            m = coef % c
            if m:
                terms[key] = (atom, m)
        r = _Sum(terms, s.const % c, s.dtype)
        if not terms:
            return r
        lo, hi = self.bound_sum(r)
        if _finite(lo) and _finite(hi) and lo // c == hi // c:
            return r.add_const(-(lo // c) * c)
        g = c
        for _, coef in terms.values():
            g = gcd(g, coef)
        if g > 1:
            # r = g*T + rem with 0 <= rem < g, so r % c == g * (T % (c / g)) + rem
            t_sum = _Sum({k: (a, coef // g) for k, (a, coef) in terms.items()}, r.const // g, s.dtype)
            return self.floormod_atom(t_sum, c // g).scale(g).add_const(r.const % g)
        return self.floormod_atom(r, c)

    def floormod_atom(self, t: _Sum, c: int) -> _Sum:
        if c == 1:
            return _const_sum(0, t.dtype)
        lo, hi = self.bound_sum(t)
        if _finite(lo) and _finite(hi) and lo // c == hi // c:
            return t.add_const(-(lo // c) * c)
        if len(t.terms) == 1 and t.const == 0:
            (atom, coef), = t.terms.values()
            if coef == 1:
                if type(atom) is E.Var:
                    return self.make_digit(atom, atom, 1, c, t.dtype)
                if type(atom) is _Digit:
                    span = atom.lower * c
                    if atom.upper is None or atom.upper % span == 0:
                        return self.make_digit(atom.base, atom.base_key, atom.lower, span, t.dtype)
        base = self.render(t)
        return self.make_digit(base, structural_key(base), 1, c, t.dtype)

    def make_digit(self, base: E.PrimExpr, base_key: Any, lower: int, upper: int | None, dtype: str) -> _Sum:
        """(base % upper) // lower, reduced with the bounds of base."""
        lo, hi = self.bound_expr(base)
        if upper is not None:
            if _finite(lo) and _finite(hi) and lo // upper == hi // upper:
                # base % upper == base - k*upper over the whole range
                inner = self.base_sum(base).add_const(-(lo // upper) * upper)
                return self.floordiv(inner, lower) if lower > 1 else inner
            if lower >= upper:
                return _const_sum(0, dtype)
        else:
            if _finite(lo) and _finite(hi) and lo // lower == hi // lower:
                return _const_sum(lo // lower, dtype)
            if lower == 1:
                return self.base_sum(base)
        digit = _Digit(base, base_key, lower, upper)
        return _Sum({digit.key: (digit, 1)}, 0, dtype)

    def base_sum(self, base: E.PrimExpr) -> _Sum:
        if type(base) is E.Var:
            return _Sum({base: (base, 1)}, 0, base.dtype)
        return self.to_sum(base)

    # ---- merging digits of one base ----
    def merge(self, s: _Sum) -> _Sum:
        """Merge adjacent digits of the same base back together:
        k*s*((x % U) // (l*k)) + s*((x % (l*k)) // l) == s*((x % U) // l), valid when l*k
        divides U (or there is no U)."""
        digits = 0
        for atom, _ in s.terms.values():
            if type(atom) is _Digit:
                digits += 1
        if digits == 0 or len(s.terms) < 2:
            return s
        changed = True
        while changed:
            changed = False
            groups: dict[Any, list] = {}
            for key, (atom, coef) in s.terms.items():
                if type(atom) is E.Var:
                    groups.setdefault(atom, []).append((key, atom, atom, 1, None, coef))
                elif type(atom) is _Digit:
                    groups.setdefault(atom.base_key, []).append((key, atom.base, atom.base_key, atom.lower, atom.upper, coef))
            for members in groups.values():
                if len(members) < 2:
                    continue
                found = None
                for hi_m in members:
                    for lo_m in members:
                        if hi_m is lo_m:
                            continue
                        _, _, _, l_hi, u_hi, s_hi = hi_m
                        _, _, _, l_lo, u_lo, s_lo = lo_m
                        if (u_lo is not None and u_lo == l_hi and l_hi % l_lo == 0
                                and (u_hi is None or u_hi % l_hi == 0) and s_hi == s_lo * (l_hi // l_lo)):
                            found = (hi_m, lo_m)
                            break
                    if found:
                        break
                if found is None:
                    continue
                hi_m, lo_m = found
                terms = dict(s.terms)
                del terms[hi_m[0]]
                del terms[lo_m[0]]
                rest = _Sum(terms, s.const, s.dtype)
                merged = self.make_digit(lo_m[1], lo_m[2], lo_m[3], hi_m[4], s.dtype).scale(lo_m[5])
                s = rest.add(merged)
                changed = True
                break
        return s

    # ---- bounds ----
    def bound_sum(self, s: _Sum) -> Bound:
        lo = hi = s.const
        result = (lo, hi)
        for atom, coef in s.terms.values():
            result = _b_add(result, _b_scale(self.bound_atom(atom), coef))
        return result

    def bound_atom(self, atom: Any) -> Bound:
        t = type(atom)
        if t is E.Var:
            b = self.bounds.get(atom)
            return b if b is not None else _dtype_bound(atom.dtype)
        if t is _Digit:
            base = self.bound_expr(atom.base)
            if atom.upper is not None:
                base = _b_floormod(base, atom.upper)
            return _b_floordiv(base, atom.lower)
        return self.bound_expr(atom)

    def bound_expr(self, e: E.PrimExpr) -> Bound:
        t = type(e)
        if t is E.IntImm:
            return e.value, e.value
        if t is E.Var:
            if self.subst and e in self.subst:
                return self.bound_expr(self.subst[e])
            b = self.bounds.get(e)
            return b if b is not None else _dtype_bound(e.dtype)
        if t is E.Add:
            return _b_add(self.bound_expr(e.a), self.bound_expr(e.b))
        if t is E.Sub:
            return _b_add(self.bound_expr(e.a), _b_scale(self.bound_expr(e.b), -1))
        if t is E.Mul:
            return _b_mul(self.bound_expr(e.a), self.bound_expr(e.b))
        if t is E.FloorDiv or t is E.FloorMod or t is E.Div or t is E.Mod:
            b = self.bound_expr(e.b)
            if b[0] == b[1] and b[0] > 0:
                a = self.bound_expr(e.a)
                c = b[0]
                if t is E.FloorDiv:
                    return _b_floordiv(a, c)
                if t is E.FloorMod:
                    return _b_floormod(a, c)
                if t is E.Div:
                    lo = _truncdiv_const(a[0], c) if _finite(a[0]) else _NEG_INF
                    hi = _truncdiv_const(a[1], c) if _finite(a[1]) else _POS_INF
                    return lo, hi
                if a[0] >= 0:
                    return _b_floormod(a, c)
                return -(c - 1), c - 1
            if t is E.FloorMod and b[0] > 0 and _finite(b[1]):
                return 0, b[1] - 1
            return _dtype_bound(e.dtype)
        if t is E.Min:
            a, b = self.bound_expr(e.a), self.bound_expr(e.b)
            return min(a[0], b[0]), min(a[1], b[1])
        if t is E.Max:
            a, b = self.bound_expr(e.a), self.bound_expr(e.b)
            return max(a[0], b[0]), max(a[1], b[1])
        if t is E.Select:
            a, b = self.bound_expr(e.true_value), self.bound_expr(e.false_value)
            return min(a[0], b[0]), max(a[1], b[1])
        if t is E.Cast and _int_dtype(e.value.dtype) and _int_dtype(e.dtype):
            inner = self.bound_expr(e.value)
            lo, hi = _dtype_limits(e.dtype)
            # a value that does not fit wraps around: then nothing better than the dtype is known
            return inner if lo <= inner[0] and inner[1] <= hi else _dtype_bound(e.dtype)
        if e.dtype == "bool" or isinstance(e, (E.CmpOp, E.Not)):
            return 0, 1
        if t is E.Call and e.op == "if_then_else" and len(e.args) == 3:
            a, b = self.bound_expr(e.args[1]), self.bound_expr(e.args[2])
            return min(a[0], b[0]), max(a[1], b[1])
        return _dtype_bound(e.dtype)

    # ---- back to expressions ----
    def render(self, s: _Sum) -> E.PrimExpr:
        s = self.merge(s)
        dtype = s.dtype
        items = sorted(s.terms.values(), key=_neg_coef)
        res: E.PrimExpr | None = None
        for atom, coef in items:
            if coef <= 0:
                continue
            term = _atom_expr(atom)
            if coef != 1:
                term = E.Mul(term, E.IntImm(dtype, coef), dtype)
            res = term if res is None else E.Add(res, term, dtype)
        if s.const > 0:
            c = E.IntImm(dtype, s.const)
            res = c if res is None else E.Add(res, c, dtype)
        for atom, coef in items:
            if coef >= 0:
                continue
            term = _atom_expr(atom)
            if coef != -1:
                term = E.Mul(term, E.IntImm(dtype, -coef), dtype)
            res = E.Sub(E.IntImm(dtype, 0) if res is None else res, term, dtype)
        if s.const < 0:
            res = E.IntImm(dtype, s.const) if res is None else E.Sub(res, E.IntImm(dtype, -s.const), dtype)
        return res if res is not None else E.IntImm(dtype, 0)


def _neg_coef(item: tuple) -> int:
    return -item[1]


def _atom_expr(atom: Any) -> E.PrimExpr:
    if type(atom) is _Digit:
        e = atom.base
        dtype = e.dtype
        if atom.upper is not None:
            e = E.FloorMod(e, E.IntImm(dtype, atom.upper), dtype)
        if atom.lower != 1:
            e = E.FloorDiv(e, E.IntImm(dtype, atom.lower), dtype)
        return e
    return atom


def _compare_consts(op: type, a: Any, b: Any) -> bool:
    if op is E.LT:
        return a < b
    if op is E.LE:
        return a <= b
    if op is E.GT:
        return a > b
    if op is E.GE:
        return a >= b
    if op is E.EQ:
        return a == b
    if op is E.NE:
        return a != b
    raise TypeError(op)


# ---------------------------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------------------------


def _range_bound(rng: RangeLike, simplifier: _Simplifier | None = None) -> Bound:
    """Inclusive bounds of a variable ranging over `rng` (a Range, an int extent meaning
    [0, extent), or a (min, extent) pair)."""
    if isinstance(rng, int):
        return (0, rng - 1) if rng > 0 else (0, 0)
    if isinstance(rng, tuple):
        rng = E.Range(E.convert(rng[0]), E.convert(rng[1]))
    lo_min, hi_min = _expr_bound(rng.min, simplifier)
    lo_ext, hi_ext = _expr_bound(rng.extent, simplifier)
    if lo_ext == hi_ext and lo_ext <= 0:
        return lo_min, lo_min
    hi = _POS_INF if not (_finite(hi_min) and _finite(hi_ext)) else hi_min + hi_ext - 1
    return lo_min, hi


def _expr_bound(e: E.PrimExpr, simplifier: _Simplifier | None) -> Bound:
    if type(e) is E.IntImm:
        return e.value, e.value
    return (simplifier or _Simplifier({})).bound_expr(e)


def _bounds_from(ranges: Mapping[E.Var, RangeLike] | None) -> dict[E.Var, Bound]:
    if not ranges:
        return {}
    bounds: dict[E.Var, Bound] = {}
    sim = _Simplifier(bounds)
    for var, rng in ranges.items():
        bounds[var] = _range_bound(rng, sim)
    return bounds


def simplify(expr: E.PrimExpr | int, ranges: Mapping[E.Var, RangeLike] | None = None) -> E.PrimExpr:
    """The canonical simplified form of `expr`; `ranges` bounds variables (a `Range`, or an int
    extent meaning [0, extent)). Exact: the result equals `expr` for every value of the
    variables within their ranges. Returns `expr` itself when nothing changes."""
    if not isinstance(expr, E.PrimExpr):
        return E.convert(expr)
    t = type(expr)
    if t is E.IntImm or t is E.Var or t is E.FloatImm:
        return expr
    return _Simplifier(_bounds_from(ranges)).simplify(expr)


def const_int_bound(expr: E.PrimExpr, ranges: Mapping[E.Var, RangeLike] | None = None) -> tuple[int, int]:
    """Inclusive (lo, hi) bounds of an integer expression; unknown ends are the dtype's limits,
    as TVM reports them."""
    return Analyzer(ranges).const_int_bound(expr)


class Analyzer:
    """Bound-aware simplification and proving over a set of variable ranges (TVM's
    `arith.Analyzer` in miniature)."""

    def __init__(self, ranges: Mapping[E.Var, RangeLike] | None = None) -> None:
        self._bounds: dict[E.Var, Bound] = _bounds_from(ranges)
        self._subst: dict[E.Var, E.PrimExpr] = {}
        self._sim = _Simplifier(self._bounds, self._subst)

    def bind(self, var: E.Var, value: RangeLike | E.PrimExpr) -> None:
        """Bind `var` to a range (`Range`, int extent, or (min, extent)) or to an expression
        (substituted wherever `var` appears). A later bind replaces an earlier one."""
        if isinstance(value, E.PrimExpr):
            self._subst[var] = value
            if type(value) is E.IntImm:
                self._bounds[var] = (value.value, value.value)
            else:
                self._bounds.pop(var, None)
            return
        self._subst.pop(var, None)
        self._bounds[var] = _range_bound(value, self._sim)

    def unbind(self, var: E.Var) -> None:
        """Forget what is known about `var` (leaving a loop's scope)."""
        self._bounds.pop(var, None)
        self._subst.pop(var, None)

    def bounds_of(self, var: E.Var) -> tuple[int, int] | None:
        """The inclusive bounds bound to `var`, if any finite ones are known."""
        b = self._bounds.get(var)
        if b is None or not (_finite(b[0]) and _finite(b[1])):
            return None
        return b

    def simplify(self, expr: E.PrimExpr | int) -> E.PrimExpr:
        if not isinstance(expr, E.PrimExpr):
            return E.convert(expr)
        return self._sim.simplify(expr)

    def can_prove(self, cond: E.PrimExpr | bool) -> bool:
        """True only if `cond` holds for every value of the bound variables."""
        if isinstance(cond, bool):
            return cond
        result = self._sim.simplify(cond)
        return type(result) is E.IntImm and result.value != 0

    def can_prove_equal(self, a: E.PrimExpr | int, b: E.PrimExpr | int) -> bool:
        a, b = E.convert(a), E.convert(b)
        if not (_int_dtype(a.dtype) and _int_dtype(b.dtype)):
            return structural_key(a) == structural_key(b)
        diff = self._sim.merge(self._sim.to_sum(a).add(self._sim.to_sum(b), -1))
        if not diff.terms:
            return diff.const == 0
        lo, hi = self._sim.bound_sum(diff)
        return lo == hi == 0

    def const_int_bound(self, expr: E.PrimExpr | int) -> tuple[int, int]:
        expr = E.convert(expr)
        if _int_dtype(expr.dtype) and expr.dtype != "bool":
            lo, hi = self._sim.bound_sum(self._sim.to_sum(expr))
        else:
            lo, hi = self._sim.bound_expr(expr)
        dlo, dhi = _dtype_limits(expr.dtype)
        return (lo if _finite(lo) else dlo), (hi if _finite(hi) else dhi)


def _dtype_limits(dtype: str) -> tuple[int, int]:
    if dtype == "bool":
        return 0, 1
    from msdb.ir.dtype import bits

    try:
        n = bits(dtype)
    except ValueError:
        n = 64
    if is_uint(dtype):
        return 0, (1 << n) - 1
    return -(1 << (n - 1)), (1 << (n - 1)) - 1
