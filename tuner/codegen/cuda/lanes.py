"""How an expression changes across the lanes of a vectorized loop `for v in [0, L)`, for the
CUDA emitter's vector accesses (docs/architecture.md, "CUDA").

A cooperative fetch fused over a tile and split by the vector width indexes with floor
division and modulo of the fused index (`(f * 8 + v) // 192`, `(f * 8 + v) % 64`), which the
affine reader (`stride_of`) cannot see through. For `B + v` with B a multiple of L and a
divisor d that is a multiple of L, `(B + v) // d == B // d` and `(B + v) % d == B % d + v`
(B % d is again a multiple of L), so such an index moves by one element per lane and starts
L-aligned, and a condition built from such quotients is the same for every lane: the fetch
of a padded conv2d input (`T.if_then_else(1 <= h and h < 57 ..., inputs[...], 0)` over 8
halves) is then one 16-byte copy or one 16-byte zero, as TVM's vectorizer makes it, instead of
eight guarded scalar loads (which cost ptxas minutes of register allocation on TVM's
tensor-core conv2d candidates once unrolled).
"""

from __future__ import annotations

from math import gcd
from typing import Literal

from msdb.ir import expr as E
from msdb.tuner.codegen.analysis import vars_in

__all__ = ["INVARIANT", "LINEAR", "lane_form", "divisible"]

INVARIANT: Literal["invariant"] = "invariant"  # the same value in every lane
LINEAR: Literal["linear"] = "linear"  # B + v with B a multiple of the lane count

Form = Literal["invariant", "linear"] | None


def divisible(e: E.PrimExpr, n: int) -> bool:
    """Whether the integer `e` is a multiple of `n` for every value of its variables (a
    sufficient check: constants, products with a multiple, sums, and `x % d` of a multiple
    with `d` a multiple)."""
    if n == 1:
        return True
    if isinstance(e, E.IntImm):
        return e.value % n == 0
    if isinstance(e, E.Mul):
        for a, b in ((e.a, e.b), (e.b, e.a)):
            c = E.const_int(b)
            if c is not None and divisible(a, n // gcd(n, abs(c) or n)):
                return True
        return divisible(e.a, n) or divisible(e.b, n)
    if isinstance(e, (E.Add, E.Sub)):
        return divisible(e.a, n) and divisible(e.b, n)
    if isinstance(e, E.FloorMod):
        d = E.const_int(e.b)
        return d is not None and d % n == 0 and divisible(e.a, n)
    if isinstance(e, E.Cast):
        return divisible(e.value, n)
    return False


def lane_form(e: E.PrimExpr, var: E.Var, lanes: int) -> Form:
    """INVARIANT when `e` is the same for every `var` in [0, lanes), LINEAR when it is
    `B + var` with B a multiple of `lanes` (contiguous and aligned), None when not shown."""
    if var not in vars_in(e):
        return INVARIANT
    if e is var:
        return LINEAR
    if isinstance(e, E.Cast):
        return lane_form(e.value, var, lanes) if e.value.dtype.startswith("int") else _all_invariant([e.value], var,
                                                                                                   lanes)
    if isinstance(e, (E.Add, E.Sub)):
        fa, fb = lane_form(e.a, var, lanes), lane_form(e.b, var, lanes)
        if fa == INVARIANT and fb == INVARIANT:
            return INVARIANT
        if fa == LINEAR and fb == INVARIANT and divisible(e.b, lanes):
            return LINEAR
        if isinstance(e, E.Add) and fb == LINEAR and fa == INVARIANT and divisible(e.a, lanes):
            return LINEAR
        return None
    if isinstance(e, (E.FloorDiv, E.FloorMod)):
        d = E.const_int(e.b)
        fa = lane_form(e.a, var, lanes)
        if fa == INVARIANT and var not in vars_in(e.b):
            return INVARIANT
        if fa == LINEAR and d is not None and d > 0 and d % lanes == 0:
            return INVARIANT if isinstance(e, E.FloorDiv) else LINEAR
        return None
    children = _children(e)
    return None if children is None else _all_invariant(children, var, lanes)


def _all_invariant(children: list[E.PrimExpr], var: E.Var, lanes: int) -> Form:
    return INVARIANT if all(lane_form(c, var, lanes) == INVARIANT for c in children) else None


def _children(e: E.PrimExpr) -> list[E.PrimExpr] | None:
    if isinstance(e, E.BinaryOp):
        return [e.a, e.b]
    if isinstance(e, E.Not):
        return [e.a]
    if isinstance(e, E.Select):
        return [e.condition, e.true_value, e.false_value]
    if isinstance(e, E.Call):
        return list(e.args)
    if isinstance(e, E.BufferLoad):
        return list(e.indices)
    return None  # a node this analysis does not know
