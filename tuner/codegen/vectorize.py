"""Vectorization legality: whether a vectorized loop's body can be emitted as one vector
statement (see `VectorPlan`)."""

from __future__ import annotations

from typing import Any, Callable

from msdb.ir import expr as E
from msdb.ir import stmt as S
from msdb.ir.functor import post_order_visit
from msdb.ir.arith import expr_key, stride_of
from msdb.tuner.codegen.analysis import EXTERN_CALLS, vars_in
from msdb.tuner.codegen.lower import Allocate


class VectorPlan:
    """Decides whether a vectorized loop body can be one vector statement; `reason` says why
    not. Conservative on dependences: a buffer stored in the body may only be loaded at the
    very index it is stored at. Lane-dependent conditions (predicates of non-dividing splits,
    padding) become masks: stores under them must be contiguous, and loads under them are
    masked so that inactive lanes touch no memory."""

    def __init__(self, var: E.Var, flat: Callable[[E.Buffer, Any, tuple], E.PrimExpr]) -> None:
        self.var = var
        self.flat = flat
        self.masked = 0
        self.reason: str | None = None
        self.stores: dict[E.Buffer, set[Any]] = {}
        self.loads: list[tuple[E.Buffer, Any]] = []

    def varying(self, node: Any) -> bool:
        return self.var in vars_in(node)

    def fail(self, reason: str) -> None:
        if self.reason is None:
            self.reason = reason

    def check(self, body: S.Stmt) -> str | None:
        self._key = expr_key
        self.stmt(body)
        if self.reason is None:
            for buf, key in self.loads:
                keys = self.stores.get(buf)
                if keys is not None and (len(keys) != 1 or key not in keys):
                    self.fail(f"buffer {buf.name} is loaded at another index than it is stored")
                    break
        return self.reason

    def stmt(self, s: S.Stmt) -> None:
        if self.reason is not None:
            return
        t = type(s)
        if isinstance(s, S.BufferStore):
            flat = self.flat(s.buffer, s, s.indices)
            stride = stride_of(flat, self.var)
            if stride is None:
                return self.fail(f"store to {s.buffer.name} is not affine in the lane")
            if stride == 0 and self.varying(s.value):
                return self.fail(f"store to {s.buffer.name} reduces across lanes")
            if stride not in (0, 1):
                return self.fail(f"store to {s.buffer.name} has lane stride {stride}")
            if stride == 0 and self.masked:
                return self.fail(f"lane-invariant store to {s.buffer.name} under a lane-dependent condition")
            self.stores.setdefault(s.buffer, set()).add(self._key(flat))
            self.expr(s.value)
            for i in s.indices:
                self.expr(i)
        elif isinstance(s, S.SeqStmt):
            for x in s.seq:
                self.stmt(x)
        elif isinstance(s, S.IfThenElse):
            varying = self.varying(s.condition)
            self.expr(s.condition)
            self.masked += varying
            self.stmt(s.then_case)
            if s.else_case is not None:
                self.stmt(s.else_case)
            self.masked -= varying
        elif isinstance(s, S.For):
            if self.varying(s.min) or self.varying(s.extent):
                return self.fail("an inner loop's bounds depend on the lane")
            self.stmt(s.body)
        elif isinstance(s, S.LetStmt):
            if self.varying(s.value):
                return self.fail("a let value depends on the lane")
            if self.masked:
                return self.fail("a let under a lane-dependent condition")
            self.stmt(s.body)
        elif isinstance(s, S.Evaluate):
            self.expr(s.value)
        elif isinstance(s, Allocate):
            self.fail("an allocation inside the vectorized loop")
        else:
            self.fail(f"statement {t.__name__}")

    def expr(self, e: E.PrimExpr) -> None:
        def visit(node: Any) -> None:
            if isinstance(node, E.BufferLoad):
                self.loads.append((node.buffer, self._key(self.flat(node.buffer, node, node.indices))))
            elif isinstance(node, E.Call) and node.op in EXTERN_CALLS:
                self.fail(f"external call {node.op} (it must run once per lane)")

        post_order_visit(e, visit)
