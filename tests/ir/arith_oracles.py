"""The readers that `msdb.ir.arith` replaced, kept as test oracles (from commit 66bc350, trimmed
to what the differential tests call): the schedule's `as_affine` and `numeric_range`
(msdb/schedule/_block_arith.py), the code generator's `affine` (tuner/codegen/analysis.py) and
the old `structural_key` (msdb/ir/arith.py). The new readers must agree with them wherever the
old ones answered and were right."""

from __future__ import annotations

from typing import Any, Mapping

from msdb.ir import expr as E
from msdb.ir.dtype import bits, is_int, is_uint


def _is_index(dtype: str) -> bool:
    return is_int(dtype) or is_uint(dtype)


def old_as_affine(expr: E.PrimExpr) -> tuple[dict[E.Var, int], int] | None:
    """(coefficients, constant) of an expression affine in its variables, else None."""
    if isinstance(expr, E.Var):
        return {expr: 1}, 0
    if isinstance(expr, E.IntImm):
        return {}, expr.value
    if isinstance(expr, (E.Add, E.Sub, E.Mul)):
        a, b = old_as_affine(expr.a), old_as_affine(expr.b)
        if a is None or b is None:
            return None
        if isinstance(expr, E.Mul):
            if not b[0]:
                return {v: k * b[1] for v, k in a[0].items() if k * b[1]}, a[1] * b[1]
            if not a[0]:
                return {v: k * a[1] for v, k in b[0].items() if k * a[1]}, b[1] * a[1]
            return None
        sign = 1 if isinstance(expr, E.Add) else -1
        terms = dict(a[0])
        for v, k in b[0].items():
            terms[v] = terms.get(v, 0) + sign * k
        return {v: k for v, k in terms.items() if k}, a[1] + sign * b[1]
    if isinstance(expr, E.Cast) and _is_index(expr.dtype) and _is_index(expr.value.dtype):
        return old_as_affine(expr.value)
    return None


def old_numeric_range(expr: E.PrimExpr, bounds: Mapping[E.Var, tuple[int, int]]) -> tuple[int, int] | None:
    """Interval arithmetic over `bounds`; None if unknown."""
    if isinstance(expr, E.IntImm):
        return expr.value, expr.value
    if isinstance(expr, E.Var):
        return bounds.get(expr)
    if isinstance(expr, (E.Add, E.Sub, E.Mul, E.Min, E.Max)):
        a, b = old_numeric_range(expr.a, bounds), old_numeric_range(expr.b, bounds)
        if a is None or b is None:
            return None
        if isinstance(expr, E.Add):
            return a[0] + b[0], a[1] + b[1]
        if isinstance(expr, E.Sub):
            return a[0] - b[1], a[1] - b[0]
        if isinstance(expr, E.Mul):
            prods = [p * q for p in a for q in b]
            return min(prods), max(prods)
        if isinstance(expr, E.Min):
            return min(a[0], b[0]), min(a[1], b[1])
        return max(a[0], b[0]), max(a[1], b[1])
    if isinstance(expr, (E.FloorDiv, E.FloorMod)):
        a, b = old_numeric_range(expr.a, bounds), old_numeric_range(expr.b, bounds)
        if a is None or b is None or b[0] != b[1] or b[0] <= 0:
            return None
        c = b[0]
        if isinstance(expr, E.FloorDiv):
            return a[0] // c, a[1] // c
        if a[0] // c == a[1] // c:
            return a[0] % c, a[1] % c
        return 0, c - 1
    return None


def old_codegen_affine(e: E.PrimExpr) -> tuple[dict[Any, tuple[int, Any]], int]:
    """The code generator's decomposition: {key: (coef, atom)}, const; opaque atoms keyed by
    `old_structural_key`."""
    if isinstance(e, E.IntImm):
        return {}, e.value
    if isinstance(e, E.Var):
        return {e: (1, e)}, 0
    if isinstance(e, (E.Add, E.Sub)):
        (ta, ca), (tb, cb) = old_codegen_affine(e.a), old_codegen_affine(e.b)
        sign = 1 if isinstance(e, E.Add) else -1
        terms = dict(ta)
        for key, (coef, atom) in tb.items():
            new = (terms[key][0] if key in terms else 0) + sign * coef
            if new:
                terms[key] = (new, atom)
            else:
                terms.pop(key, None)
        return terms, ca + sign * cb
    if isinstance(e, E.Mul):
        (ta, ca), (tb, cb) = old_codegen_affine(e.a), old_codegen_affine(e.b)
        if not tb:
            return ({k: (v * cb, a) for k, (v, a) in ta.items()} if cb else {}), ca * cb
        if not ta:
            return ({k: (v * ca, a) for k, (v, a) in tb.items()} if ca else {}), cb * ca
    if isinstance(e, E.Cast) and _is_index(e.dtype) and _is_index(e.value.dtype):
        if bits(e.dtype) >= bits(e.value.dtype) and is_int(e.value.dtype):
            return old_codegen_affine(e.value)
    return {old_structural_key(e): (1, e)}, 0


def old_structural_key(e: Any) -> Any:
    """Equal for structurally equal expressions; floats compared by value."""
    t = type(e)
    if t is E.Var:
        return e
    if t is E.IntImm:
        return ("i", e.value, e.dtype)
    if t is E.FloatImm:
        return ("f", e.value, e.dtype)
    if isinstance(e, E.BinaryOp):
        return (t.__name__, old_structural_key(e.a), old_structural_key(e.b), e.dtype)
    if t is E.Not:
        return ("not", old_structural_key(e.a))
    if t is E.Select:
        return ("sel", old_structural_key(e.condition), old_structural_key(e.true_value),
                old_structural_key(e.false_value))
    if t is E.Cast:
        return ("cast", e.dtype, old_structural_key(e.value))
    if t is E.BufferLoad:
        return ("load", e.buffer, tuple(old_structural_key(i) for i in e.indices))
    return ("obj", e)
