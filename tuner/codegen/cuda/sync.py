"""Barrier insertion for shared memory (TVM's ThreadSync("shared"), conservatively).

A `__syncthreads()` goes before a statement whose shared-memory accesses conflict with those
since the last barrier, and at the start of a loop body whose end conflicts with its start;
conflicts are per buffer, except identical indices of one thread. A wmma call's memory operand
(`T.tvm_access_ptr`) is its whole tile, written by a store_matrix_sync, and shared by the warp's
threads: never exempt. A barrier needed under a
thread-dependent condition is a `CodegenError` naming the buffer, never a silent race. See
docs/architecture.md, "CUDA".
"""

from __future__ import annotations

from dataclasses import dataclass, field

from msdb.ir import expr as E
from msdb.ir import stmt as S
from msdb.ir.arith.keys import expr_equal
from msdb.ir.functor import post_order_visit, uses_var
from msdb.tuner.codegen.analysis import Allocate
from msdb.tuner.codegen.cuda.tensorcore import tile_accesses
from msdb.tuner.codegen.errors import CodegenError

__all__ = ["BARRIER", "insert_barriers", "is_barrier", "is_allreduce"]

#: TVM's `T.tvm_storage_sync("shared")`, printed as `__syncthreads();`.
BARRIER = S.Evaluate(E.Call("int32", "tvm_storage_sync", (E.StringImm("handle", "shared"),)))


def is_barrier(s: S.Stmt) -> bool:
    return isinstance(s, S.Evaluate) and isinstance(s.value, E.Call) and s.value.op in (
        "tvm_storage_sync", "tir.tvm_storage_sync")


def is_allreduce(s: S.Stmt) -> bool:
    from msdb.tuner.codegen.cuda.cross_thread import ALLREDUCE

    return isinstance(s, S.Evaluate) and isinstance(s.value, E.Call) and s.value.op == ALLREDUCE


@dataclass(frozen=True)
class _Access:
    buffer: E.Buffer
    write: bool
    indices: tuple[E.PrimExpr, ...]
    guard: int  # id of the innermost thread-dependent condition around it (0: none)
    tile: bool = False  # a wmma call's tile, which a warp's threads touch together


@dataclass
class _Summary:
    head: list[_Access] = field(default_factory=list)  # accesses before the first barrier
    tail: list[_Access] = field(default_factory=list)  # accesses after the last barrier
    synced: bool = False


def _storage(buf: E.Buffer) -> object:
    """What a buffer's accesses touch: views of one pool (`shared_dyn`) share its memory."""
    return buf.data if buf.data is not None else buf


def _shared(buf: E.Buffer) -> bool:
    return buf.scope in ("shared", "shared.dyn")


class _Sync:
    def __init__(self, thread_vars: set[E.Var]) -> None:
        self.thread_vars = thread_vars
        self.guard = 0

    def depends_on_threads(self, e: E.PrimExpr) -> bool:
        return uses_var(e, self.thread_vars)

    def expr_accesses(self, exprs: tuple[E.PrimExpr, ...] | list[E.PrimExpr]) -> list[_Access]:
        found: list[_Access] = []

        def visit(node: object) -> None:
            if isinstance(node, E.BufferLoad) and _shared(node.buffer):
                found.append(_Access(node.buffer, False, node.indices, self.guard))

        for e in exprs:
            post_order_visit(e, visit)
            found.extend(self.tiles(e))
        return found

    def tiles(self, e: E.PrimExpr) -> list[_Access]:
        return [_Access(first.buffer, write, first.indices, self.guard, True)
                for first, write in tile_accesses(e) if _shared(first.buffer)]

    def conflict(self, before: list[_Access], after: list[_Access], loop_var: E.Var | None = None) -> E.Buffer | None:
        for b in after:
            for a in before:
                if _storage(a.buffer) is not _storage(b.buffer) or not (a.write or b.write):
                    continue
                same = (a.buffer is b.buffer and not a.tile and not b.tile and a.guard == b.guard and len(a.indices) == len(b.indices)
                        and all(expr_equal(x, y) for x, y in zip(a.indices, b.indices))
                        and (loop_var is None or not any(uses_var(i, {loop_var}) for i in a.indices)))
                if not same:
                    return b.buffer
        return None

    def barrier_needed(self, buffer: E.Buffer, uniform: bool, where: str) -> None:
        if not uniform:
            raise CodegenError(
                f"shared buffer {buffer.name} needs a __syncthreads() {where}, which is under a condition or loop "
                "that depends on threadIdx (not every thread would reach it); move the condition inside the "
                "statements or give each thread its own part of the buffer"
            )

    def stmt(self, s: S.Stmt, uniform: bool) -> tuple[S.Stmt, _Summary]:
        if isinstance(s, S.SeqStmt):
            return self.seq(list(s.seq), uniform)
        if isinstance(s, S.For):
            tag = s.thread_binding.thread_tag if (s.kind == S.ForKind.THREAD_BINDING and s.thread_binding) else None
            if tag is not None and not tag.startswith("vthread"):
                body, summary = self.stmt(s.body, uniform)
                return _with_body(s, body), summary
            if s.kind == S.ForKind.VECTORIZED:
                acc = self.leaf_accesses(s)
                return s, _Summary(acc, acc, False)
            inner_uniform = uniform and not (self.depends_on_threads(s.min) or self.depends_on_threads(s.extent))
            saved = self.guard
            if not inner_uniform and uniform:
                self.guard = id(s)
            try:
                body, sb = self.stmt(s.body, inner_uniform)
                head_acc = self.expr_accesses([s.min, s.extent])
                tail = sb.tail if sb.synced else sb.head
                buf = self.conflict(tail, sb.head, s.loop_var) if _may_repeat(s) else None
                if buf is not None:
                    self.barrier_needed(buf, inner_uniform, f"at the start of loop {s.loop_var.name}")
                    body = S.seq(BARRIER, body)
                    sb = _Summary([], tail, True)
            finally:
                self.guard = saved
            return _with_body(s, body), _Summary(head_acc + sb.head, sb.tail if sb.synced else head_acc + sb.head,
                                                 sb.synced)
        if isinstance(s, S.IfThenElse):
            cond_acc = self.expr_accesses([s.condition])
            inner_uniform = uniform and not self.depends_on_threads(s.condition)
            saved = self.guard
            if not inner_uniform and uniform:
                self.guard = id(s)
            try:
                then, st = self.stmt(s.then_case, inner_uniform)
                if s.else_case is not None:
                    other, so = self.stmt(s.else_case, inner_uniform)
                else:
                    other, so = None, _Summary()
            finally:
                self.guard = saved
            synced = st.synced or so.synced
            head = cond_acc + st.head + so.head
            tail = ((st.tail if st.synced else st.head) + (so.tail if so.synced else so.head)) if synced else head
            return S.IfThenElse(s.condition, then, other), _Summary(head, tail, synced)
        if isinstance(s, S.LetStmt):
            acc = self.expr_accesses([s.value])
            if self.depends_on_threads(s.value):
                self.thread_vars = self.thread_vars | {s.var}
            body, sb = self.stmt(s.body, uniform)
            return S.LetStmt(s.var, s.value, body), _Summary(acc + sb.head, sb.tail if sb.synced else acc + sb.head,
                                                            sb.synced)
        if isinstance(s, Allocate):
            body, sb = self.stmt(s.body, uniform)
            return Allocate(s.buffer, body), sb
        if is_allreduce(s):
            if not uniform:
                raise CodegenError("a cross-thread reduction sits under a condition or loop that depends on threadIdx; "
                                   "its barriers must be reached by every thread of the block")
            return s, _Summary([], [], True)  # its own shared scratch, between its own barriers
        acc = self.leaf_accesses(s)
        return s, _Summary(acc, acc, False)

    def leaf_accesses(self, s: S.Stmt) -> list[_Access]:
        """Every shared access under `s`, which gets no barrier inside."""
        found: list[_Access] = []

        def visit(node: object) -> None:
            if isinstance(node, S.BufferStore) and _shared(node.buffer):
                found.append(_Access(node.buffer, True, node.indices, self.guard))
            elif isinstance(node, E.BufferLoad) and _shared(node.buffer):
                found.append(_Access(node.buffer, False, node.indices, self.guard))
            elif isinstance(node, S.Evaluate):
                found.extend(self.tiles(node.value))

        from msdb.tuner.codegen.analysis import walk

        walk(s, visit)
        return found

    def seq(self, items: list[S.Stmt], uniform: bool) -> tuple[S.Stmt, _Summary]:
        out: list[S.Stmt] = []
        pending: list[_Access] = []
        head: list[_Access] = []
        synced = False
        for item in items:
            new, summary = self.stmt(item, uniform)
            buf = self.conflict(pending, summary.head)
            if buf is not None:
                self.barrier_needed(buf, uniform, "between two statements")
                out.append(BARRIER)
                synced = True
                pending = []
            out.append(new)
            if not synced:
                head += summary.head
            if summary.synced:
                synced = True
                pending = list(summary.tail)
            else:
                pending += summary.head
        return S.seq(*out) if out else S.SeqStmt(()), _Summary(head, pending if synced else head, synced)


def _may_repeat(loop: S.For) -> bool:
    extent = E.const_int(loop.extent)
    return extent is None or extent > 1


def _with_body(loop: S.For, body: S.Stmt) -> S.For:
    if body is loop.body:
        return loop
    return S.For(loop.loop_var, loop.min, loop.extent, loop.kind, body, loop.thread_binding, loop.annotations)


def insert_barriers(body: S.Stmt) -> S.Stmt:
    """`body` with `BARRIER`s where the rule of the module docstring asks for them."""
    thread_vars: set[E.Var] = set()

    def visit(node: object) -> None:
        if isinstance(node, S.For) and node.kind == S.ForKind.THREAD_BINDING and node.thread_binding is not None:
            if node.thread_binding.thread_tag.startswith("threadIdx."):
                thread_vars.add(node.loop_var)

    from msdb.tuner.codegen.analysis import walk

    walk(body, visit)
    if not thread_vars:
        return body
    new, _ = _Sync(thread_vars).stmt(body, True)
    return new
