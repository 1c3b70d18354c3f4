"""Generic traversal and rewriting of IR trees.

`IRVisitor` walks every expression and statement; `IRMutator` rebuilds only the nodes whose
children changed (unchanged subtrees keep their identity, which keeps rewriting cheap and lets
callers test `new is old`). Dispatch is a per-class method table, not `isinstance` chains,
because the schedule and the hashing walk run this code tens of thousands of times.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from msdb.ir import expr as E
from msdb.ir import stmt as S

Node = Any  # PrimExpr | Stmt | Buffer | BufferRegion | IterVar | Range


#: Per visitor class, the (unbound) method that handles each node class: shared by every
#: instance, because a schedule replay makes tens of thousands of short-lived visitors.
_TABLES: dict[type, dict[type, Callable[..., Any]]] = {}


def _table_of(visitor_class: type) -> dict[type, Callable[..., Any]]:
    table = _TABLES.get(visitor_class)
    if table is None:
        table = _TABLES.setdefault(visitor_class, {})
    return table


def _method_for(visitor_class: type, cls: type, prefix: str, table: dict[type, Callable[..., Any]]) -> Callable[..., Any]:
    for klass in cls.__mro__:
        method = getattr(visitor_class, f"{prefix}_{klass.__name__}", None)
        if method is not None:
            table[cls] = method
            return method
    raise TypeError(f"{visitor_class.__name__} cannot handle IR node {cls.__name__}")


class IRVisitor:
    """Visits every node once in pre-order (children after the node itself). Override
    `visit_<ClassName>` and call the base method to keep descending. Buffers referenced by
    loads and stores are not descended into unless `visit_buffers` is True."""

    visit_buffers = False

    def __init__(self) -> None:
        self._methods = _table_of(type(self))

    def visit(self, node: Node) -> None:
        if node is None:
            return
        cls = type(node)
        method = self._methods.get(cls) or _method_for(type(self), cls, "visit", self._methods)
        method(self, node)

    # ---- expressions ----
    def visit_PrimExpr(self, node: E.PrimExpr) -> None:
        """Leaves: Var, IntImm, FloatImm, StringImm."""

    def visit_BinaryOp(self, node: E.BinaryOp) -> None:
        self.visit(node.a)
        self.visit(node.b)

    def visit_Not(self, node: E.Not) -> None:
        self.visit(node.a)

    def visit_Select(self, node: E.Select) -> None:
        self.visit(node.condition)
        self.visit(node.true_value)
        self.visit(node.false_value)

    def visit_Cast(self, node: E.Cast) -> None:
        self.visit(node.value)

    def visit_Call(self, node: E.Call) -> None:
        for arg in node.args:
            self.visit(arg)

    def visit_BufferLoad(self, node: E.BufferLoad) -> None:
        if self.visit_buffers:
            self.visit(node.buffer)
        for index in node.indices:
            self.visit(index)

    # ---- auxiliary nodes ----
    def visit_Buffer(self, node: E.Buffer) -> None:
        for dim in node.shape:
            self.visit(dim)

    def visit_Range(self, node: E.Range) -> None:
        self.visit(node.min)
        self.visit(node.extent)

    def visit_BufferRegion(self, node: S.BufferRegion) -> None:
        if self.visit_buffers:
            self.visit(node.buffer)
        for rng in node.region:
            self.visit(rng)

    def visit_IterVar(self, node: S.IterVar) -> None:
        self.visit(node.dom)
        self.visit(node.var)

    # ---- statements ----
    def visit_BufferStore(self, node: S.BufferStore) -> None:
        if self.visit_buffers:
            self.visit(node.buffer)
        self.visit(node.value)
        for index in node.indices:
            self.visit(index)

    def visit_Evaluate(self, node: S.Evaluate) -> None:
        self.visit(node.value)

    def visit_SeqStmt(self, node: S.SeqStmt) -> None:
        for stmt in node.seq:
            self.visit(stmt)

    def visit_IfThenElse(self, node: S.IfThenElse) -> None:
        self.visit(node.condition)
        self.visit(node.then_case)
        self.visit(node.else_case)

    def visit_LetStmt(self, node: S.LetStmt) -> None:
        self.visit(node.var)
        self.visit(node.value)
        self.visit(node.body)

    def visit_For(self, node: S.For) -> None:
        self.visit(node.loop_var)
        self.visit(node.min)
        self.visit(node.extent)
        self.visit(node.body)

    def visit_Block(self, node: S.Block) -> None:
        for iv in node.iter_vars:
            self.visit(iv)
        for region in node.reads:
            self.visit(region)
        for region in node.writes:
            self.visit(region)
        if self.visit_buffers:
            for buf in node.alloc_buffers:
                self.visit(buf)
        for match in node.match_buffers:
            if self.visit_buffers:
                self.visit(match.buffer)
            self.visit(match.source)
        self.visit(node.init)
        self.visit(node.body)

    def visit_BlockRealize(self, node: S.BlockRealize) -> None:
        for value in node.iter_values:
            self.visit(value)
        self.visit(node.predicate)
        self.visit(node.block)


class _FnVisitor(IRVisitor):
    def __init__(self, fn: Callable[[Node], None]) -> None:
        super().__init__()
        self.fn = fn

    def visit(self, node: Node) -> None:
        if node is None:
            return
        super().visit(node)
        self.fn(node)


def post_order_visit(node: Node, fn: Callable[[Node], None]) -> None:
    """Call `fn` on every expression and statement under `node`, children first."""
    _FnVisitor(fn).visit(node)


class IRMutator:
    """Rebuilds a tree bottom-up. Override `visit_<ClassName>`; return the node itself when
    nothing changed. Buffers are rewritten through `visit_buffer` (identity by default), so a
    buffer substitution (cache_read, rfactor) is one override."""

    def __init__(self) -> None:
        self._methods = _table_of(type(self))

    def visit(self, node: Node) -> Node:
        if node is None:
            return None
        cls = type(node)
        method = self._methods.get(cls) or _method_for(type(self), cls, "visit", self._methods)
        return method(self, node)

    def visit_buffer(self, buffer: E.Buffer) -> E.Buffer:
        return buffer

    def _exprs(self, items: tuple[E.PrimExpr, ...]) -> tuple[E.PrimExpr, ...]:
        new = tuple(self.visit(x) for x in items)
        return items if all(a is b for a, b in zip(new, items)) else new

    # ---- expressions ----
    def visit_PrimExpr(self, node: E.PrimExpr) -> E.PrimExpr:
        return node

    def visit_BinaryOp(self, node: E.BinaryOp) -> E.PrimExpr:
        a, b = self.visit(node.a), self.visit(node.b)
        if a is node.a and b is node.b:
            return node
        return type(node)(a, b, node.dtype)

    def visit_Not(self, node: E.Not) -> E.PrimExpr:
        a = self.visit(node.a)
        return node if a is node.a else E.Not(a)

    def visit_Select(self, node: E.Select) -> E.PrimExpr:
        c, t, f = self.visit(node.condition), self.visit(node.true_value), self.visit(node.false_value)
        if c is node.condition and t is node.true_value and f is node.false_value:
            return node
        return E.Select(c, t, f)

    def visit_Cast(self, node: E.Cast) -> E.PrimExpr:
        v = self.visit(node.value)
        return node if v is node.value else E.Cast(node.dtype, v)

    def visit_Call(self, node: E.Call) -> E.PrimExpr:
        args = self._exprs(node.args)
        return node if args is node.args else E.Call(node.dtype, node.op, args)

    def visit_BufferLoad(self, node: E.BufferLoad) -> E.PrimExpr:
        buf = self.visit_buffer(node.buffer)
        indices = self._exprs(node.indices)
        if buf is node.buffer and indices is node.indices:
            return node
        return E.BufferLoad(buf, indices)

    # ---- auxiliary nodes ----
    def visit_Range(self, node: E.Range) -> E.Range:
        lo, ext = self.visit(node.min), self.visit(node.extent)
        return node if lo is node.min and ext is node.extent else E.Range(lo, ext)

    def visit_BufferRegion(self, node: S.BufferRegion) -> S.BufferRegion:
        buf = self.visit_buffer(node.buffer)
        region = tuple(self.visit(r) for r in node.region)
        if buf is node.buffer and all(a is b for a, b in zip(region, node.region)):
            return node
        return S.BufferRegion(buf, region)

    def visit_IterVar(self, node: S.IterVar) -> S.IterVar:
        dom = self.visit(node.dom)
        var = self.visit(node.var)
        if dom is node.dom and var is node.var:
            return node
        return S.IterVar(dom, var, node.iter_type, node.thread_tag)

    # ---- statements ----
    def visit_BufferStore(self, node: S.BufferStore) -> S.Stmt:
        buf = self.visit_buffer(node.buffer)
        value = self.visit(node.value)
        indices = self._exprs(node.indices)
        if buf is node.buffer and value is node.value and indices is node.indices:
            return node
        return S.BufferStore(buf, value, indices)

    def visit_Evaluate(self, node: S.Evaluate) -> S.Stmt:
        v = self.visit(node.value)
        return node if v is node.value else S.Evaluate(v)

    def visit_SeqStmt(self, node: S.SeqStmt) -> S.Stmt:
        new = [self.visit(s) for s in node.seq]
        if all(a is b for a, b in zip(new, node.seq)):
            return node
        return S.seq(*new)

    def visit_IfThenElse(self, node: S.IfThenElse) -> S.Stmt:
        c = self.visit(node.condition)
        t = self.visit(node.then_case)
        e = self.visit(node.else_case)
        if c is node.condition and t is node.then_case and e is node.else_case:
            return node
        return S.IfThenElse(c, t, e)

    def visit_LetStmt(self, node: S.LetStmt) -> S.Stmt:
        var, value, body = self.visit(node.var), self.visit(node.value), self.visit(node.body)
        if var is node.var and value is node.value and body is node.body:
            return node
        return S.LetStmt(var, value, body)

    def visit_For(self, node: S.For) -> S.Stmt:
        var = self.visit(node.loop_var)
        lo, ext = self.visit(node.min), self.visit(node.extent)
        body = self.visit(node.body)
        if var is node.loop_var and lo is node.min and ext is node.extent and body is node.body:
            return node
        return S.For(var, lo, ext, node.kind, body, node.thread_binding, node.annotations)

    def visit_Block(self, node: S.Block) -> S.Stmt:
        iter_vars = tuple(self.visit(iv) for iv in node.iter_vars)
        reads = tuple(self.visit(r) for r in node.reads)
        writes = tuple(self.visit(w) for w in node.writes)
        allocs = tuple(self.visit_buffer(b) for b in node.alloc_buffers)
        matches = tuple(self._match(m) for m in node.match_buffers)
        init = self.visit(node.init)
        body = self.visit(node.body)
        unchanged = (
            all(a is b for a, b in zip(iter_vars, node.iter_vars))
            and all(a is b for a, b in zip(reads, node.reads))
            and all(a is b for a, b in zip(writes, node.writes))
            and all(a is b for a, b in zip(allocs, node.alloc_buffers))
            and all(a is b for a, b in zip(matches, node.match_buffers))
            and init is node.init
            and body is node.body
        )
        if unchanged:
            return node
        return S.Block(iter_vars, reads, writes, node.name_hint, body, init, allocs, matches, node.annotations)

    def _match(self, node: S.MatchBufferRegion) -> S.MatchBufferRegion:
        buf = self.visit_buffer(node.buffer)
        src = self.visit(node.source)
        return node if buf is node.buffer and src is node.source else S.MatchBufferRegion(buf, src)

    def visit_BlockRealize(self, node: S.BlockRealize) -> S.Stmt:
        values = self._exprs(node.iter_values)
        pred = self.visit(node.predicate)
        block = self.visit(node.block)
        if values is node.iter_values and pred is node.predicate and block is node.block:
            return node
        return S.BlockRealize(values, pred, block)


class Substituter(IRMutator):
    """Replaces variables by expressions (`substitute`); a subclass that knows more node kinds
    (the code generator's lowering-only `Allocate`) adds their visits."""

    def __init__(self, vmap: Mapping[E.Var, E.PrimExpr]) -> None:
        super().__init__()
        self.vmap = vmap

    def visit_Var(self, node: E.Var) -> E.PrimExpr:
        return self.vmap.get(node, node)


def substitute(node: Node, vmap: Mapping[E.Var, E.PrimExpr]) -> Node:
    """Replace variables by expressions everywhere under `node` (statements or expressions)."""
    if not vmap:
        return node
    return Substituter(vmap).visit(node)


class _BufferReplacer(IRMutator):
    def __init__(self, bmap: Mapping[E.Buffer, E.Buffer]) -> None:
        super().__init__()
        self.bmap = bmap

    def visit_buffer(self, buffer: E.Buffer) -> E.Buffer:
        return self.bmap.get(buffer, buffer)


def replace_buffers(node: Node, bmap: Mapping[E.Buffer, E.Buffer]) -> Node:
    """Point every load, store, region and allocation of a buffer in `bmap` at its replacement."""
    if not bmap:
        return node
    return _BufferReplacer(bmap).visit(node)


def free_vars(node: Node) -> set[E.Var]:
    """Every Var used under `node` (including ones it defines)."""
    found: set[E.Var] = set()

    def collect(n: Node) -> None:
        if isinstance(n, E.Var):
            found.add(n)

    post_order_visit(node, collect)
    return found


def uses_var(node: Node, variables: set[E.Var] | frozenset[E.Var]) -> bool:
    """True if any of `variables` appears under `node`."""
    return bool(free_vars(node) & variables)
