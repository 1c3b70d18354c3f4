"""Floating-point (and integer) operation count of a tensor program, the way TVM's
`estimate_tir_flops` counts it, so GFLOPS and task weights compare with TVM's. The counting rules:
see docs/architecture.md, "FLOPs".
"""

from __future__ import annotations

import logging
from collections import Counter
from msdb.ir import expr as E
from msdb.ir import stmt as S
from msdb.ir.arith.interval import Bound, ExprBounds, dtype_bound, is_finite
from msdb.ir.function import IRModule, PrimFunc

logger = logging.getLogger(__name__)

__all__ = ["estimate_flops"]

_Count = Counter  # dtype -> operations

_ARITH = (E.Add, E.Sub, E.Mul, E.Div, E.Mod, E.FloorDiv, E.FloorMod, E.Min, E.Max)
_COMPARE = (E.EQ, E.NE, E.LT, E.LE, E.GT, E.GE)


def _max_with(a: Counter, b: Counter) -> Counter:
    """Per-dtype maximum (TVM keeps one counter per dtype and maxes each)."""
    result = Counter(a)
    for dtype, n in b.items():
        if result[dtype] < n:
            result[dtype] = n
    return result


class _Estimator:
    """One walk over a function body; loop variable bounds accumulate as loops are entered."""

    def __init__(self) -> None:
        self.bounds: dict[E.Var, Bound] = {}
        self.ev = ExprBounds(self.bounds)

    # ---- expressions ----
    def expr(self, e: E.PrimExpr) -> Counter:
        if isinstance(e, _ARITH):
            result = self.expr(e.a)
            result.update(self.expr(e.b))
            result[e.dtype] += 1
            return result
        if isinstance(e, _COMPARE):
            return Counter()
        if isinstance(e, (E.And, E.Or)):
            result = self.expr(e.a)
            result.update(self.expr(e.b))
            return result
        if isinstance(e, E.Not):
            return self.expr(e.a)
        if isinstance(e, E.Select):
            result = self.expr(e.condition)
            result.update(_max_with(self.expr(e.true_value), self.expr(e.false_value)))
            return result
        if isinstance(e, E.Cast):
            return self.expr(e.value)
        if isinstance(e, E.Call):
            result = Counter()
            for arg in e.args:
                result.update(self.expr(arg))
            return result
        return Counter()  # loads, variables, immediates

    # ---- statements ----
    def stmt(self, s: S.Stmt) -> Counter:
        if isinstance(s, S.BufferStore):
            return self.expr(s.value)
        if isinstance(s, S.BlockRealize):
            return self.stmt(s.block.body)
        if isinstance(s, S.Block):
            result = self.stmt(s.init) if s.init is not None else Counter()
            result.update(self.stmt(s.body))
            return result
        if isinstance(s, S.For):
            lo, _ = self.bound(s.min)
            _, hi = self.bound(E.Add(E.Sub(s.min, E.make_const(1, s.min.dtype)), s.extent))
            self.bounds[s.loop_var] = (lo, hi)
            extent_max = self.bound(s.extent)[1]
            factor = extent_max if is_finite(extent_max) else 1
            body = self.stmt(s.body)
            return Counter({dtype: n * factor for dtype, n in body.items()})
        if isinstance(s, S.SeqStmt):
            result = Counter()
            for child in s.seq:
                result.update(self.stmt(child))
            return result
        if isinstance(s, S.IfThenElse):
            result = self.expr(s.condition)
            then = self.stmt(s.then_case)
            result.update(_max_with(then, self.stmt(s.else_case)) if s.else_case is not None else then)
            return result
        if isinstance(s, S.LetStmt):
            result = self.expr(s.value)
            result.update(self.stmt(s.body))
            return result
        return Counter()  # Evaluate and anything without arithmetic of its own

    # ---- integer bounds (TVM's ConstIntBound, as much as loop extents need) ----
    def bound(self, e: E.PrimExpr) -> Bound:
        """Bounds of `e` within its dtype (64-bit integers unbounded, TVM's convention)."""
        lo, hi = self.ev.of(e)
        dlo, dhi = dtype_bound(e.dtype)
        return max(lo, dlo), min(hi, dhi)


def estimate_flops(mod_or_func: IRModule | PrimFunc | S.Stmt) -> int:
    """Operation count of a module (all its functions), a function or a statement."""
    if isinstance(mod_or_func, IRModule):
        total = 0
        counts: Counter = Counter()
        for func in mod_or_func.functions.values():
            cached = func.attrs.get("estimated_flops")
            if isinstance(cached, (int, E.IntImm)) and not isinstance(cached, bool):
                total += cached.value if isinstance(cached, E.IntImm) else cached
            else:
                counts.update(_Estimator().stmt(func.body))
        return total + sum(counts.values())
    if isinstance(mod_or_func, PrimFunc):
        return estimate_flops(IRModule.from_func(mod_or_func))
    if isinstance(mod_or_func, S.Stmt):
        return sum(_Estimator().stmt(mod_or_func).values())
    raise TypeError(f"estimate_flops takes an IRModule, PrimFunc or Stmt, got {type(mod_or_func).__name__}")
