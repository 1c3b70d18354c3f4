"""Integer interval reasoning for the block primitives (compute_at, cache_read/write, rfactor):
symbolic regions as affine forms, numeric bounds for the rest (see docs/architecture.md,
"Schedules and traces").

Vocabulary used by callers:
- `bounds`: inclusive numeric ranges `{var: (lo, hi)}` of every variable whose value is known to
  lie in a range (all enclosing loops, including the ones being relaxed);
- `relax`: the variables to relax, `{var: (lo, hi)}` as `Affine` ends (normally constants).
"""

from __future__ import annotations

from typing import Any, Hashable, Iterable, Mapping

from msdb.identity_cache import KeyCache
from msdb.ir import expr as E
from msdb.ir import stmt as S
from msdb.ir.arith import Affine, Atom, as_affine, numeric_range
from msdb.ir.arith.keys import shape_key
from msdb.ir.arith.limits import is_integer
from msdb.ir.functor import free_vars

__all__ = [
    "Affine", "Atom", "IntervalEvaluator", "NumRange", "as_affine", "numeric_range", "plus_var", "affine_min",
    "affine_max", "union_intervals", "loop_bounds", "range_predicate", "implied_by_domains",
    "MAX_ENUMERATED_POINTS", "repeats_points", "reduction_order_ok", "unbound_loop_under_reduction",
    "covered_points",
]

NumRange = tuple[int, int]


def plus_var(lo: Affine, var: E.Var) -> E.PrimExpr:
    """The binding `lo + var` of a generated loop, built as TVM builds it (`min + loop_var`,
    the simplified minimum first, folded only when it is 0): `i_0 * 4 + 1 + ax0`, `1 + ax0`."""
    if lo.is_const() and lo.const == 0:
        return var
    return E.Add(lo.to_expr(var.dtype), var)


class IntervalEvaluator:
    """Evaluates index expressions to symbolic intervals `(lo, hi)` of `Affine`s.

    Variables in `relax` range over their interval; every other variable is a fixed point
    (kept symbolic unless `bounds` pins it to a single value, as a unit-extent loop does, and
    `pin_points` is set)."""

    def __init__(self, relax: Mapping[E.Var, tuple[Affine, Affine]], bounds: Mapping[E.Var, NumRange],
                 pin_points: bool = True) -> None:
        self.relax = dict(relax)
        self.bounds = dict(bounds)
        for var, (lo, hi) in self.relax.items():
            nlo, nhi = lo.numeric(self.bounds), hi.numeric(self.bounds)
            if nlo is not None and nhi is not None:
                self.bounds.setdefault(var, (nlo[0], nhi[1]))
        # compute_at's analysis (TVM's analyzer) replaces a unit loop by its value; a cache
        # stage's region (TVM's RelaxBufferRegion) keeps the loops outside it symbolic.
        self.points = {v: r[0] for v, r in self.bounds.items()
                       if r[0] == r[1] and v not in self.relax} if pin_points else {}

    def eval(self, expr: E.PrimExpr) -> tuple[Affine, Affine] | None:
        """(lo, hi) of `expr`, or None when no finite bound is known."""
        result = self._eval(expr)
        if result is None:
            return None
        lo, hi = result
        return lo.substitute_points(self.points), hi.substitute_points(self.points)

    def _numeric(self, expr: E.PrimExpr) -> tuple[Affine, Affine] | None:
        rng = numeric_range(expr, self.bounds)
        if rng is None:
            return None
        return Affine(None, rng[0]), Affine(None, rng[1])

    def _eval(self, expr: E.PrimExpr) -> tuple[Affine, Affine] | None:
        # `x // 2 * 64` stays the atom `x // 2` scaled by 64 (the Mul rule below), so that its
        # term sorts by 64 as TVM's canonical form sorts it
        scaled_atom = isinstance(expr, E.Mul) and (type(expr.a) is E.IntImm or type(expr.b) is E.IntImm)
        if not scaled_atom and isinstance(expr, (E.FloorDiv, E.FloorMod, E.Div, E.Mod, E.Min, E.Max, E.Select, E.Call,
                                                 E.Mul)):
            point = self._fixed_point(expr)
            if point is not None:
                return point, point
        if isinstance(expr, E.IntImm):
            c = Affine(None, expr.value)
            return c, c
        if isinstance(expr, E.Var):
            if expr in self.relax:
                return self.relax[expr]
            if expr in self.points:
                c = Affine(None, self.points[expr])
                return c, c
            v = Affine.of(expr)
            return v, v
        if isinstance(expr, (E.Add, E.Sub)):
            a, b = self._eval(expr.a), self._eval(expr.b)
            if a is None or b is None:
                return None
            if isinstance(expr, E.Add):
                return a[0] + b[0], a[1] + b[1]
            return a[0] - b[1], a[1] - b[0]
        if isinstance(expr, E.Mul):
            ma, mb = self._eval(expr.a), self._eval(expr.b)
            if ma is None or mb is None:
                return None
            for x, y in ((ma, mb), (mb, ma)):
                if y[0].is_const() and y[1].is_const() and y[0].const == y[1].const:
                    k = y[0].const
                    return (x[0].scale(k), x[1].scale(k)) if k >= 0 else (x[1].scale(k), x[0].scale(k))
            return self._numeric(expr)
        if isinstance(expr, E.FloorDiv):
            return self._floordiv(expr)
        if isinstance(expr, E.FloorMod):
            return self._floormod(expr)
        if isinstance(expr, E.Cast) and is_integer(expr.dtype) and is_integer(expr.value.dtype):
            return self._eval(expr.value)
        return self._numeric(expr)

    def _fixed_point(self, expr: E.PrimExpr) -> Affine | None:
        """`expr` as a single (symbolic) point when it mentions no relaxed variable and is not
        affine; None otherwise (the interval rules then apply)."""
        if not is_integer(expr.dtype):
            return None
        used = free_vars(expr)
        if any(v in self.relax for v in used) or as_affine(expr) is not None:
            return None
        rng = numeric_range(expr, self.bounds)
        if rng is not None and rng[0] == rng[1]:
            return Affine(None, rng[0])
        if any(v in self.points for v in used):
            return None  # a unit loop inside: leave it to the interval rules (they pin it)
        return Affine({Atom(expr): 1})

    def _const_divisor(self, expr: E.BinaryOp) -> int | None:
        c = E.const_int(expr.b)
        return c if c is not None and c > 0 else None

    def _floordiv(self, expr: E.FloorDiv) -> tuple[Affine, Affine] | None:
        c = self._const_divisor(expr)
        x = self._eval(expr.a) if c is not None else None
        if c is None or x is None:
            return self._numeric(expr)
        ends = []
        for end, pick in ((x[0], 0), (x[1], 1)):
            q = self._floordiv_affine(end, c)
            if q is None:
                rng = end.numeric(self.bounds)
                if rng is None:
                    return self._numeric(expr)
                q = Affine(None, rng[pick] // c)
            ends.append(q)
        return ends[0], ends[1]

    def _floordiv_affine(self, a: Affine, c: int) -> Affine | None:
        """floor(a / c) as an affine form when the part of `a` not divisible by c provably
        stays within one multiple of c."""
        if a.is_const():
            return Affine(None, a.const // c)
        div_terms = {v: k // c for v, k in a.terms.items() if k % c == 0}
        rest = Affine({v: k for v, k in a.terms.items() if k % c != 0}, a.const)
        rng = rest.numeric(self.bounds)
        if rng is None or rng[0] // c != rng[1] // c:
            return None
        return Affine(div_terms, rng[0] // c)

    def _floormod(self, expr: E.FloorMod) -> tuple[Affine, Affine] | None:
        c = self._const_divisor(expr)
        x = self._eval(expr.a) if c is not None else None
        if c is None or x is None:
            return self._numeric(expr)
        lo, hi = x
        nlo, nhi = lo.numeric(self.bounds), hi.numeric(self.bounds)
        if nlo is not None and nhi is not None and nlo[0] // c == nhi[1] // c:
            shift = nlo[0] // c * c
            return lo - shift, hi - shift
        # x = c*q + r with q fixed over the interval: the remainder ends are exact.
        q_lo, q_hi = self._floordiv_affine(lo, c), self._floordiv_affine(hi, c)
        if q_lo is not None and q_hi is not None and q_lo.same_terms(q_hi) and q_lo.const == q_hi.const:
            r_lo, r_hi = lo - q_lo.scale(c), hi - q_hi.scale(c)
            if r_lo.is_const() and r_hi.is_const() and 0 <= r_lo.const <= r_hi.const < c:
                return r_lo, r_hi
        return Affine(None, 0), Affine(None, c - 1)


def affine_min(a: Affine, b: Affine, bounds: Mapping[E.Var, NumRange]) -> Affine:
    """The smaller end (symbolic when comparable, else a numeric lower bound of both)."""
    diff = (a - b).numeric(bounds)
    if diff is not None:
        if diff[1] <= 0:
            return a
        if diff[0] >= 0:
            return b
    na, nb = a.numeric(bounds), b.numeric(bounds)
    if na is None or nb is None:
        raise ValueError("unbounded interval end")
    return Affine(None, min(na[0], nb[0]))


def affine_max(a: Affine, b: Affine, bounds: Mapping[E.Var, NumRange]) -> Affine:
    diff = (a - b).numeric(bounds)
    if diff is not None:
        if diff[0] >= 0:
            return a
        if diff[1] <= 0:
            return b
    na, nb = a.numeric(bounds), b.numeric(bounds)
    if na is None or nb is None:
        raise ValueError("unbounded interval end")
    return Affine(None, max(na[1], nb[1]))


def union_intervals(items: Iterable[tuple[Affine, Affine]], bounds: Mapping[E.Var, NumRange]) -> tuple[Affine, Affine]:
    it = iter(items)
    lo, hi = next(it)
    for a, b in it:
        lo = affine_min(lo, a, bounds)
        hi = affine_max(hi, b, bounds)
    return lo, hi


def loop_bounds(loops: Iterable[S.For]) -> dict[E.Var, NumRange]:
    """Numeric ranges of `For` loops with constant min and extent (others are skipped)."""
    out: dict[E.Var, NumRange] = {}
    for loop in loops:
        lo, ext = E.const_int(loop.min), E.const_int(loop.extent)
        if lo is not None and ext is not None and ext > 0:
            out[loop.loop_var] = (lo, lo + ext - 1)
    return out


def range_predicate(checks: Iterable[tuple[Affine, NumRange]], bounds: Mapping[E.Var, NumRange]) -> E.PrimExpr:
    """`lo <= value < hi + 1` for each (value, (lo, hi)) in `checks`, keeping only the halves
    that `bounds` cannot prove; the conjunction, or constant true when nothing is left.

    This is the predicate TVM puts on a block whose generated loops may overshoot the region
    that is valid for it (compute_at over a tile a non-divisible split cut short, a cache
    stage inside such a tile): the loops keep a constant extent and the predicate skips the
    overshoot."""
    pred: E.PrimExpr | None = None
    points = {v: r[0] for v, r in bounds.items() if r[0] == r[1]}
    for value, (lo, hi) in checks:
        rng = value.numeric(bounds)
        value = value.substitute_points(points)  # TVM's analyzer knows unit loops are 0
        conds = []
        if rng is None or rng[0] < lo:
            conds.append(_bound_cond(value, lo, True, bounds))
        if rng is None or rng[1] > hi:
            conds.append(_bound_cond(value, hi + 1, False, bounds))
        for c in conds:
            pred = c if pred is None else E.And(pred, c)
    return pred if pred is not None else E.IntImm("bool", 1)


def _bound_cond(value: Affine, limit: int, lower: bool, bounds: Mapping[E.Var, NumRange]) -> E.PrimExpr:
    """`limit <= value` (lower) or `value < limit`, in the form TVM's simplifier gives it: the
    constant moved to the limit; `g * y + r` with `0 <= r < g` and `g | limit` reduced to `y`
    against `limit / g` (`i0_0 * 4 + i0_1 * 2 + i0_2 < 6` -> `i0_0 * 2 + i0_1 < 3`); a lone
    `x // d` turned into `x` against `limit * d`."""
    limit -= value.const
    terms = Affine(value.terms)
    while True:
        reduced = _reduce_by_factor(terms, limit, bounds)
        if reduced is None:
            break
        terms, limit = reduced
    if len(terms.terms) == 1:
        (atom, coef), = terms.terms.items()
        if coef == 1 and isinstance(atom, Atom) and isinstance(atom.expr, E.FloorDiv):
            d = E.const_int(atom.expr.b)
            if d is not None and d > 0:
                return _compare(atom.expr.a, limit * d, lower)
    return _compare(terms.to_expr(), limit, lower)


def _compare(expr: E.PrimExpr, limit: int, lower: bool) -> E.PrimExpr:
    bound = E.IntImm(expr.dtype, limit)
    return E.LE(bound, expr) if lower else E.LT(expr, bound)


def _reduce_by_factor(terms: Affine, limit: int, bounds: Mapping[E.Var, NumRange]) -> tuple[Affine, int] | None:
    """(y, limit / g) for `terms = g * y + r` with r in [0, g) and g dividing `limit`, the
    largest such g > 1; None if there is none."""
    for g in sorted({abs(c) for c in terms.terms.values() if abs(c) > 1}, reverse=True):
        if limit % g:
            continue
        high = {v: c for v, c in terms.terms.items() if c % g == 0}
        rest = Affine({v: c for v, c in terms.terms.items() if c % g != 0})
        rng = rest.numeric(bounds)
        if high and rng is not None and rng[0] >= 0 and rng[1] < g:
            return Affine({v: c // g for v, c in high.items()}), limit // g
    return None


#: Most points `implied_by_domains` enumerates before it gives up (and answers "not implied").
MAX_ENUMERATED_POINTS = 1 << 20


def implied_by_domains(predicate: E.PrimExpr, bindings: Iterable[tuple[E.PrimExpr, NumRange]],
                       bounds: Mapping[E.Var, NumRange]) -> bool:
    """Whether `predicate` (over loop variables) holds wherever every binding lies in its range.

    A block's predicate usually only keeps its iter vars inside their domains (what a
    non-divisible split adds); primitives that rebuild the block's loops (compute_at) regenerate
    exactly those conditions and may drop the old predicate. A predicate that says more (rfactor
    of a non-divisible split bounds `vk_0 * 3 + vk_1`, a sum of two iter vars) must not be
    dropped. Decided exactly by enumerating the loop variables the predicate uses (bindings that
    need other variables are ignored, which can only answer "not implied")."""
    if isinstance(predicate, E.IntImm):
        return predicate.value != 0
    used = sorted(free_vars(predicate), key=lambda v: v.name)
    if any(v not in bounds for v in used):
        return False
    total = 1
    for v in used:
        total *= bounds[v][1] - bounds[v][0] + 1
    if total > MAX_ENUMERATED_POINTS:
        return False
    import numpy as np

    grids = np.meshgrid(*[np.arange(bounds[v][0], bounds[v][1] + 1, dtype=np.int64) for v in used],
                        indexing="ij") if used else []
    env = {v: g.ravel() for v, g in zip(used, grids)}
    ok = np.ones(total, dtype=bool)
    usable = set(used)
    try:
        for value, (lo, hi) in bindings:
            if not free_vars(value) <= usable:
                continue
            got = _evaluate(value, env, total)
            ok &= (got >= lo) & (got <= hi)
        holds = _evaluate(predicate, env, total).astype(bool)
    except _Unsupported:
        return False
    return bool(np.all(holds | ~ok))


class _Unsupported(Exception):
    """An expression `_evaluate` does not know."""


def _evaluate(expr: E.PrimExpr, env: Mapping[E.Var, Any], n: int) -> Any:
    """Vectorized integer/boolean evaluation of `expr` with numpy arrays for its variables."""
    import numpy as np

    if isinstance(expr, E.IntImm):
        return np.full(n, expr.value, dtype=np.int64)
    if isinstance(expr, E.Var):
        if expr not in env:
            raise _Unsupported(expr.name)
        return env[expr]
    if isinstance(expr, E.Cast) and (is_integer(expr.dtype) or expr.dtype == "bool"):
        return _evaluate(expr.value, env, n)
    if isinstance(expr, E.Not):
        return ~_evaluate(expr.a, env, n).astype(bool)
    if isinstance(expr, E.Select):
        c = _evaluate(expr.condition, env, n).astype(bool)
        return np.where(c, _evaluate(expr.true_value, env, n), _evaluate(expr.false_value, env, n))
    if isinstance(expr, E.BinaryOp):
        a, b = _evaluate(expr.a, env, n), _evaluate(expr.b, env, n)
        ops = {
            E.Add: lambda: a + b, E.Sub: lambda: a - b, E.Mul: lambda: a * b,
            E.Min: lambda: np.minimum(a, b), E.Max: lambda: np.maximum(a, b),
            E.LT: lambda: a < b, E.LE: lambda: a <= b, E.GT: lambda: a > b, E.GE: lambda: a >= b,
            E.EQ: lambda: a == b, E.NE: lambda: a != b,
            E.And: lambda: a.astype(bool) & b.astype(bool), E.Or: lambda: a.astype(bool) | b.astype(bool),
        }
        op = ops.get(type(expr))
        if op is not None:
            return op()
        if isinstance(expr, (E.FloorDiv, E.FloorMod, E.Div, E.Mod)):
            if np.any(b == 0):
                raise _Unsupported("division by zero")
            if isinstance(expr, E.FloorDiv):
                return np.floor_divide(a, b)
            if isinstance(expr, E.FloorMod):
                return np.mod(a, b)
            q = (np.abs(a) // np.abs(b)) * np.sign(a) * np.sign(b)  # truncating division (C semantics)
            return q if isinstance(expr, E.Div) else a - q * b
    raise _Unsupported(type(expr).__name__)


def _enumerate(loops: list[tuple[E.Var, NumRange]], predicate: E.PrimExpr, exprs: list[E.PrimExpr],
               limit: int) -> tuple[Any, list[Any], list[Any]] | None:
    """Every iteration of the loop nest `loops` (outermost first), as numpy columns with one
    entry per iteration in execution order: (where `predicate` holds, each loop variable's
    value, each of `exprs`' value). None when the nest has more than `limit` iterations (or
    none), or an expression uses variables other than the loops or operations `_evaluate`
    does not know."""
    total = 1
    for _, (lo, hi) in loops:
        total *= hi - lo + 1
    if total > limit or total <= 0:
        return None
    import numpy as np

    grids = np.meshgrid(*[np.arange(lo, hi + 1, dtype=np.int64) for _, (lo, hi) in loops], indexing="ij")
    env = {v: g.ravel() for (v, _), g in zip(loops, grids)}
    try:
        mask = np.broadcast_to(np.asarray(_evaluate(predicate, env, total)).astype(bool), (total,))
        values = [np.broadcast_to(np.asarray(_evaluate(e, env, total)), (total,)) for e in exprs]
    except _Unsupported:
        return None
    return mask, [env[v] for v, _ in loops], values


def _row_keys(columns: list[Any]) -> Any:
    """One int64 per row of the equally long integer `columns`, equal for equal rows and
    ordered as the rows are lexicographically (first column first). A mixed-radix number over
    each column's range: counting or grouping rows then sorts one int64 column instead of
    rows of several (np.unique with axis=0), which made a replayed reverse_compute_at spend
    tens of milliseconds. Rows whose ranges overflow int64 fall back to np.unique's row ids."""
    import numpy as np

    if len(columns[0]) == 0:
        return np.zeros(0, dtype=np.int64)
    key = np.zeros(len(columns[0]), dtype=np.int64)
    span = 1
    for column in reversed(columns):  # the last column varies fastest
        low = int(column.min())
        width = int(column.max()) - low + 1
        if span * width >= 1 << 62:
            return np.unique(np.stack(columns, axis=1), axis=0, return_inverse=True)[1].ravel()
        key += (column.astype(np.int64) - low) * span
        span *= width
    return key


def repeats_points(loops: list[tuple[E.Var, NumRange]], keep: int, bindings: list[E.PrimExpr],
                   predicate: E.PrimExpr, limit: int = 1 << 16) -> bool | None:
    """Whether two iterations of the loop nest `loops` (outermost first) that agree on the first
    `keep` loops and satisfy `predicate` give the same values of `bindings`: a block whose
    iterations repeat (a loop its bindings do not use, or only partly, as `fused % 2` of a
    4-long loop) recomputes its points. None when the nest has more than `limit` iterations or
    uses variables other than the loops."""
    nest = _enumerate(loops, predicate, bindings, limit)
    if nest is None:
        return None
    import numpy as np

    mask, loop_values, values = nest
    columns = loop_values[:keep] + values
    if not columns:
        return int(mask.sum()) > 1
    keys = _row_keys([c[mask] for c in columns])
    return len(np.unique(keys)) < len(keys)


def reduction_order_ok(loops: list[tuple[E.Var, NumRange]], bindings: list[E.PrimExpr], reduce: list[bool],
                       predicate: E.PrimExpr, limit: int = 1 << 16) -> bool | None:
    """Whether a reduction block under `loops` (outermost first) computes each of its points
    exactly once: its init runs whenever the reduction iter vars are all at their first point,
    so for every spatial point the updates after the last init must visit each reduction point
    once. A loop that repeats the block (one its bindings do not use, or only partly) is fine
    above the reduction loops (each repetition starts over from the init) and wrong below one
    (the repetitions add up). None when the nest has more than `limit` iterations or uses
    variables other than the loops; then only the structural rule of
    `unbound_loop_under_reduction` can be checked."""
    nest = _enumerate(loops, predicate, bindings, limit)
    if nest is None:
        return None
    import numpy as np

    mask, _, cols = nest
    spatial = [c[mask] for c, r in zip(cols, reduce) if not r]
    red = [c[mask] for c, r in zip(cols, reduce) if r]
    n = int(mask.sum())
    if n == 0 or not red:
        return True
    s_key = _row_keys(spatial) if spatial else np.zeros(n, dtype=np.int64)
    r_key = _row_keys(red)
    first = r_key == r_key.min()  # the smallest reduction point: the init runs there
    order = np.argsort(s_key, kind="stable")  # groups of one spatial point, in execution order
    s_sorted, r_sorted, init_sorted = s_key[order], r_key[order], first[order]
    bounds = np.flatnonzero(np.diff(s_sorted)) + 1
    for r_grp, i_grp in zip(np.split(r_sorted, bounds), np.split(init_sorted, bounds)):
        inits = np.flatnonzero(i_grp)
        if len(inits) == 0:
            return False
        tail = r_grp[inits[-1]:]
        if len(np.unique(tail)) != len(tail) or len(np.unique(r_grp)) != len(tail):
            return False
    return True


def unbound_loop_under_reduction(loops: list[tuple[E.Var, NumRange]], bindings: list[E.PrimExpr],
                                 reduce: list[bool]) -> E.Var | None:
    """A loop of extent > 1 that no binding uses, below a loop a reduction binding uses (each of
    its iterations would add the reduction's terms once more); None if there is none."""
    used = set().union(*(free_vars(b) for b in bindings)) if bindings else set()
    reduce_used = set().union(*(free_vars(b) for b, r in zip(bindings, reduce) if r)) if any(reduce) else set()
    met = False
    for var, (lo, hi) in loops:
        if var in reduce_used:
            met = True
        elif met and var not in used and hi > lo:
            return var
    return None


def _independent_groups(loops: list[tuple[E.Var, NumRange]], bindings: list[E.PrimExpr]
                        ) -> list[tuple[list[tuple[E.Var, NumRange]], list[E.PrimExpr]]]:
    """The bindings split into groups that share no loop variable (with each group's loops, in
    nest order); loops no binding uses are dropped (they repeat points, never add any)."""
    uses = [free_vars(b) for b in bindings]
    groups: list[tuple[set[E.Var], list[int]]] = []
    for i, used in enumerate(uses):
        merged = [g for g in groups if g[0] & used]
        for g in merged:
            groups.remove(g)
        variables = set(used).union(*(g[0] for g in merged))
        members = sorted([i, *(m for g in merged for m in g[1])])
        groups.append((variables, members))
    return [([lp for lp in loops if lp[0] in variables], [bindings[i] for i in members]) for variables, members in groups]


#: `covered_points` by the shape of its question (`_nest_key`), shared by every candidate of a
#: search: a design space's candidates keep their loop names and repeat their tile sizes, and
#: each reverse_compute_at (and each compute location tried) asks it once.
_COVERED_BY_SHAPE: KeyCache[int | None] = KeyCache(1 << 14)


def _nest_key(loops: list[tuple[E.Var, NumRange]], exprs: list[E.PrimExpr]) -> Hashable | None:
    """A key equal for two (loops, exprs) questions that are the same up to a renaming of
    variables of the same names and dtypes (`shape_key`), the loops' ranges included; None
    when an expression has a node `shape_key` does not take."""
    variables: list[E.Var] = []
    shapes = []
    for expr in exprs:
        shape = shape_key(expr, variables)
        if shape is None:
            return None
        shapes.append(shape)
    place = {id(var): i for i, var in enumerate(variables)}
    return tuple(shapes), tuple((place.get(id(var), -1), rng) for var, rng in loops)


def covered_points(loops: list[tuple[E.Var, NumRange]], bindings: list[E.PrimExpr], predicate: E.PrimExpr,
                   limit: int = 1 << 16) -> int | None:
    """How many distinct binding tuples the loop nest `loops` produces where `predicate` holds
    (None when the nest has more than `limit` iterations or uses other variables).

    Without a predicate, bindings that share no loop variable vary independently: the count is
    the product of each group's count, and each group enumerates only its own loops (a write
    cache moved under a tiled matmul enumerates two 128-point nests, not one of 16384)."""
    key = _nest_key(loops, [predicate, *bindings])
    if key is None:
        return _covered_points(loops, bindings, predicate, limit)
    return _COVERED_BY_SHAPE.get((key, limit), lambda: _covered_points(loops, bindings, predicate, limit))


def _covered_points(loops: list[tuple[E.Var, NumRange]], bindings: list[E.PrimExpr], predicate: E.PrimExpr,
                    limit: int) -> int | None:
    if E.const_int(predicate) == 1 and len(bindings) > 1:
        groups = _independent_groups(loops, bindings)
        if len(groups) > 1:
            total = 1
            for group_loops, group_bindings in groups:
                count = _covered_points(group_loops, group_bindings, predicate, limit)
                if count is None:
                    return None
                total *= count
            return total
    nest = _enumerate(loops, predicate, bindings, limit)
    if nest is None:
        return None
    import numpy as np

    mask, _, values = nest
    if not values:
        return 1 if mask.any() else 0
    return int(len(np.unique(_row_keys([v[mask] for v in values]))))
