"""The order in which TVM's IterMapSimplify prints the terms of a block binding (docs/
architecture.md, "Schedules and traces").

TVM fuses the terms of a binding into one iterator from the smallest scale up: it starts at the
term of least scale (the last one, in the order the terms appeared, among equal scales; a
one-point term first), then takes the term whose scale is the extent covered so far, and where
none has exactly that scale (a surjective map, as a convolution's halo `rx + xx` makes it) the
term of the largest scale below it. It prints the terms in the reverse of that chain: for a
bijective chain that is the scale-descending order msdb's simplifier already gives, but a halo
term goes first (`rx_0 + f % 2 * 28 + a % 28`, never `f % 2 * 28 + rx_0 + a % 28`).
"""

from __future__ import annotations

from typing import Any

from msdb.identity_cache import KeyCache
from msdb.ir import expr as E
from msdb.ir.arith import Analyzer
from msdb.ir.arith.keys import shape_key
from msdb.ir.functor import substitute

__all__ = ["iter_map_order", "simplified_binding"]

#: Simplified bindings by the shape of the binding and what the analyzer knows of each of its
#: variables: (the result, the variables it was computed for). Shared by every candidate of a
#: search: a design space's candidates keep their loop names and repeat their tile sizes, so
#: most bindings a split or fuse rewrites were simplified for an earlier candidate.
_BINDINGS_BY_SHAPE: KeyCache[tuple[E.PrimExpr, tuple[E.Var, ...]]] = KeyCache(1 << 16)


class _Term:
    __slots__ = ("expr", "scale", "extent")

    def __init__(self, expr: E.PrimExpr, scale: int, extent: int) -> None:
        self.expr = expr
        self.scale = scale
        self.extent = extent


def _flatten(expr: E.PrimExpr, out: list[E.PrimExpr]) -> bool:
    if type(expr) is E.Add:
        assert isinstance(expr, E.Add)
        return _flatten(expr.a, out) and _flatten(expr.b, out)
    if type(expr) is E.Sub:
        return False
    out.append(expr)
    return True


def _term(expr: E.PrimExpr, analyzer: Analyzer) -> _Term | None:
    scale, atom = 1, expr
    if type(expr) is E.Mul:
        assert isinstance(expr, E.Mul)
        if type(expr.b) is not E.IntImm:
            return None
        scale, atom = expr.b.value, expr.a
    if scale <= 0:
        return None
    lo, hi = analyzer.const_int_bound(atom)
    if lo != 0 or hi >= 2**31 - 1:
        return None
    return _Term(expr, scale, hi + 1)


def _base(terms: list[_Term]) -> int:
    base = -1
    for i in range(len(terms) - 1, -1, -1):
        t = terms[i]
        if base == -1 or t.scale < terms[base].scale:
            base = i
        elif t.scale == terms[base].scale and t.extent == 1 and terms[base].extent != 1:
            base = i
    return base


def _exact(terms: list[_Term], used: list[bool], scale: int, first_unit: int) -> int:
    matched = -1
    for j in range(len(terms) - 1, -1, -1):
        if used[j] or terms[j].scale != scale:
            continue
        if terms[j].extent == 1:
            return j
        if matched == -1:
            matched = j
        if j <= first_unit:
            return matched
    return matched


def _closest_below(terms: list[_Term], used: list[bool], scale: int) -> int:
    matched = -1
    for j in range(len(terms) - 1, -1, -1):
        if used[j] or not 0 <= terms[j].scale <= scale:
            continue
        if matched == -1 or terms[matched].scale < terms[j].scale:
            matched = j
    return matched


def iter_map_order(expr: E.PrimExpr, analyzer: Analyzer) -> E.PrimExpr:
    """`expr` (a simplified binding: a sum of scaled terms over loop variables plus a constant)
    with its terms in TVM's IterMapSimplify order; `expr` itself when the order is already
    that, or when TVM would not fuse its terms into one iterator."""
    parts: list[E.PrimExpr] = []
    if not _flatten(expr, parts) or len(parts) < 3:
        return expr
    const = 0
    if type(parts[-1]) is E.IntImm:
        const = parts.pop().value  # type: ignore[attr-defined]
    terms = []
    for part in parts:
        term = _term(part, analyzer)
        if term is None:
            return expr
        terms.append(term)
    if len(terms) < 2:
        return expr
    used = [False] * len(terms)
    base = _base(terms)
    first_unit = next((i for i, t in enumerate(terms) if t.extent == 1), len(terms))
    chain: list[_Term] = []
    expected = terms[base].scale
    for step in range(len(terms)):
        pos = base if step == 0 else _exact(terms, used, expected, first_unit)
        matched_scale = expected
        if pos == -1 and terms[base].scale == 1:
            pos = _closest_below(terms, used, expected)
            matched_scale = terms[pos].scale if pos != -1 else 0
        if pos == -1:
            return expr
        used[pos] = True
        chain.append(terms[pos])
        expected = terms[pos].extent * matched_scale
    ordered = [t.expr for t in reversed(chain)]
    if all(a is b for a, b in zip(ordered, (t.expr for t in terms))):
        return expr
    result = ordered[0]
    for part in ordered[1:]:
        result = E.Add(result, part, expr.dtype)
    if const:
        result = E.Add(result, E.IntImm(expr.dtype, const), expr.dtype)
    return result


def simplified_binding(value: E.PrimExpr, analyzer: Analyzer) -> E.PrimExpr:
    """`value` simplified by `analyzer` in TVM's block-binding form (`iter_map_order` of
    `analyzer.simplify`), the way a split or fuse rewrites a binding. Remembered by the
    binding's shape (`shape_key`: structure, variable names and dtypes) and what the analyzer
    knows of each variable, so another candidate's binding of the same shape is the remembered
    result with its own variables put in."""
    variables: list[E.Var] = []
    key = shape_key(value, variables)
    knowledge = [analyzer.knowledge(var) for var in variables] if key is not None else []
    if key is None or any(k is None for k in knowledge):
        return iter_map_order(analyzer.simplify(value), analyzer)
    result, then = _BINDINGS_BY_SHAPE.get(
        (key, analyzer.order, tuple(knowledge)),
        lambda: (iter_map_order(analyzer.simplify(value), analyzer), tuple(variables)))
    renaming: dict[E.Var, Any] = {old: new for old, new in zip(then, variables) if old is not new}
    return substitute(result, renaming) if renaming else result
