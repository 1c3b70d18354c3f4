"""Small analyses shared by the lowering passes and the LLVM emitter: buffer layout (flat
indices, strides, allocation sizes), tree walks and statement counts.

The integer questions both sides ask of index expressions ("which part of this index moves
with these loop variables, and by how much?", "what values can this take?") are answered by
`msdb.ir.arith` (`affine_form`, `stride_of`, `const_int_bound`), the same reader the schedule
uses, so a loop the emitter vectorizes as contiguous is exactly one whose index the lowering
calls stride 1 (docs/architecture.md, "Integer arithmetic").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

from msdb.ir import expr as E
from msdb.ir import stmt as S
from msdb.ir.functor import IRVisitor, Substituter, post_order_visit
from msdb.ir.dtype import is_int

__all__ = [
    "Allocate", "substitute_lowered", "flat_index", "buffer_strides", "static_shape", "allocation_elements", "vars_in", "stmt_children",
    "expr_info", "walk", "has_load", "count_stmts", "promote_to_i64", "EXTERN_CALLS",
]


@dataclass(frozen=True, eq=False, slots=True)
class Allocate(S.Stmt):
    """`buffer` lives (uninitialized) while `body` runs: the one lowering-only statement (placed
    by `lower.plan_allocations`), known to the walkers here."""

    buffer: E.Buffer
    body: S.Stmt


class _LoweredSubstitute(Substituter):
    """Variable substitution that also walks the lowering-only `Allocate`."""

    def visit_Allocate(self, node: Allocate) -> S.Stmt:
        return Allocate(node.buffer, self.visit(node.body))


def substitute_lowered(stmt: S.Stmt, vmap: Mapping[E.Var, E.PrimExpr]) -> S.Stmt:
    """`stmt` with each variable of `vmap` replaced (a vthread's or an unrolled loop's copy),
    `Allocate`s included."""
    out: S.Stmt = _LoweredSubstitute(vmap).visit(stmt)
    return out


class _VarCollector(IRVisitor):
    def __init__(self) -> None:
        super().__init__()
        self.found: set[E.Var] = set()

    def visit_Var(self, node: E.Var) -> None:
        self.found.add(node)

    def visit_Stmt(self, node: S.Stmt) -> None:
        """Lowering-only statements (`Allocate`): descend into their body."""
        if isinstance(node, Allocate):
            self.visit(node.body)


def vars_in(node: Any) -> set[E.Var]:
    """Every Var used under an expression or statement."""
    collector = _VarCollector()
    collector.visit(node)
    return collector.found


def static_shape(buffer: E.Buffer) -> tuple[int, ...]:
    """The buffer's shape as ints; code is specialized to static shapes."""
    dims = []
    for dim in buffer.shape:
        value = E.const_int(dim) if isinstance(dim, E.PrimExpr) else dim
        if value is None:
            from msdb.tuner.codegen.errors import CodegenError

            raise CodegenError(
                f"buffer {buffer.name} has a symbolic shape {buffer.shape}; the CPU code generator "
                "needs static shapes (bind the shape variables first)"
            )
        dims.append(int(value))
    return tuple(dims)


def buffer_strides(buffer: E.Buffer) -> tuple[int, ...]:
    """Element strides: the declared ones, else row-major over the static shape."""
    if buffer.strides:
        strides = []
        for s in buffer.strides:
            value = E.const_int(s) if isinstance(s, E.PrimExpr) else s
            if value is None:
                from msdb.tuner.codegen.errors import CodegenError

                raise CodegenError(f"buffer {buffer.name} has symbolic strides {buffer.strides}")
            strides.append(int(value))
        return tuple(strides)
    shape = static_shape(buffer)
    strides = [1] * len(shape)
    for d in range(len(shape) - 2, -1, -1):
        strides[d] = strides[d + 1] * shape[d + 1]
    return tuple(strides)


def allocation_elements(buffer: E.Buffer) -> int:
    """Elements an allocation of `buffer` needs: the product of its shape, or with strides
    (storage_align pads them) one past its last element's offset."""
    shape = static_shape(buffer)
    if not buffer.strides:
        count = 1
        for d in shape:
            count *= d
        return count
    if any(d == 0 for d in shape):
        return 0
    return 1 + sum((d - 1) * st for d, st in zip(shape, buffer_strides(buffer)))


def flat_index(buffer: E.Buffer, indices: tuple[E.PrimExpr, ...], dtype: str | None = None) -> E.PrimExpr:
    """`sum(index[d] * stride[d]) + elem_offset` as one int expression of `dtype`: by default
    int32 when every index is int32 and the buffer has fewer than 2**31 elements (so that the
    simplifier can merge the digits of fused loops, `f // 3 * 3 + f % 3` -> `f`, which casts
    would hide), else int64."""
    strides = buffer_strides(buffer)
    if dtype is None:
        extent = 1 + sum((d - 1) * st for d, st in zip(static_shape(buffer), strides)) if buffer.shape else 1
        small = extent < 2**31 and all(i.dtype == "int32" for i in indices)
        dtype = "int32" if small else "int64"
    if len(indices) != len(strides):
        from msdb.tuner.codegen.errors import CodegenError

        raise CodegenError(
            f"buffer {buffer.name} has {len(strides)} dimensions but is indexed with {len(indices)} indices"
        )
    out: E.PrimExpr | None = None
    for index, stride in zip(indices, strides):
        if index.dtype != dtype:
            index = E.Cast(dtype, index)
        term = index if stride == 1 else E.Mul(index, E.IntImm(dtype, stride))
        out = term if out is None else E.Add(out, term)
    offset = buffer.elem_offset
    if offset is not None:
        value = E.const_int(offset)
        if value is None:
            from msdb.tuner.codegen.errors import CodegenError

            raise CodegenError(f"buffer {buffer.name} has a symbolic elem_offset")
        if value:
            c = E.IntImm(dtype, value)
            out = c if out is None else E.Add(out, c)
    return out if out is not None else E.IntImm(dtype, 0)


def stmt_children(stmt: S.Stmt) -> tuple[S.Stmt, ...]:
    """The direct sub-statements, in execution order (used by the placement pass)."""
    if isinstance(stmt, S.SeqStmt):
        return stmt.seq
    if isinstance(stmt, S.For) or isinstance(stmt, S.LetStmt):
        return (stmt.body,)
    if isinstance(stmt, S.IfThenElse):
        return (stmt.then_case,) if stmt.else_case is None else (stmt.then_case, stmt.else_case)
    body = getattr(stmt, "body", None)
    return (body,) if isinstance(body, S.Stmt) else ()


#: Calls with effects outside the program (never merged, never run once for many lanes).
EXTERN_CALLS = frozenset(["call_extern", "call_pure_extern", "tir.call_extern", "tir.call_pure_extern"])


def expr_info(e: E.PrimExpr) -> tuple[bool, frozenset]:
    """(pure, variables read): pure = no loads and no external calls, so equal inputs give an
    equal value anywhere the inputs are bound the same."""
    impure: list[Any] = []
    used: set[E.Var] = set()

    def visit(node: Any) -> None:
        if isinstance(node, E.Var):
            used.add(node)
        elif isinstance(node, E.BufferLoad) or (isinstance(node, E.Call) and node.op in EXTERN_CALLS):
            impure.append(node)

    walk(e, visit)
    return not impure, frozenset(used)


def speculatable(exprs: Any) -> bool:
    """Whether expressions may be evaluated when their value is not used (the untaken arm of an
    `if_then_else`), provided that each load reads a valid address instead of its own when the
    arm is not taken (`emit._Emitter.load` under `FnState.guard`): no external calls, no
    integer division by a non-constant, zero or -1 (they trap), and every loaded buffer has a
    static, non-empty shape (so that its first element exists)."""
    ok = [True]

    def visit(node: Any) -> None:
        if not ok[0]:
            return
        if isinstance(node, E.Call) and node.op in EXTERN_CALLS:
            ok[0] = False
        elif isinstance(node, (E.Div, E.Mod, E.FloorDiv, E.FloorMod)):
            if is_int(node.dtype) and E.const_int(node.b) in (None, 0, -1):  # x / -1 traps on INT_MIN
                ok[0] = False
        elif isinstance(node, E.BufferLoad):
            try:
                ok[0] = allocation_elements(node.buffer) > 0
            except Exception:  # symbolic shape: not speculated
                ok[0] = False

    for e in exprs:
        post_order_visit(e, visit)
    return ok[0]


def walk(node: Any, fn: Callable[[Any], None]) -> None:
    """Pre-order over statements and expressions, including `Allocate`."""
    fn(node)
    if isinstance(node, Allocate):
        walk(node.body, fn)
        return
    if isinstance(node, S.Stmt):
        if isinstance(node, S.SeqStmt):
            for x in node.seq:
                walk(x, fn)
        elif isinstance(node, S.For):
            walk(node.min, fn)
            walk(node.extent, fn)
            walk(node.body, fn)
        elif isinstance(node, S.IfThenElse):
            walk(node.condition, fn)
            walk(node.then_case, fn)
            if node.else_case is not None:
                walk(node.else_case, fn)
        elif isinstance(node, S.LetStmt):
            walk(node.value, fn)
            walk(node.body, fn)
        elif isinstance(node, S.BufferStore):
            walk(node.value, fn)
            for i in node.indices:
                walk(i, fn)
        elif isinstance(node, S.Evaluate):
            walk(node.value, fn)
        return
    if isinstance(node, E.BinaryOp):
        walk(node.a, fn)
        walk(node.b, fn)
    elif isinstance(node, E.Not):
        walk(node.a, fn)
    elif isinstance(node, E.Select):
        walk(node.condition, fn)
        walk(node.true_value, fn)
        walk(node.false_value, fn)
    elif isinstance(node, E.Cast):
        walk(node.value, fn)
    elif isinstance(node, E.Call):
        for a in node.args:
            walk(a, fn)
    elif isinstance(node, E.BufferLoad):
        for i in node.indices:
            walk(i, fn)



def has_load(exprs: Any) -> bool:
    found = []

    def visit(node: Any) -> None:
        if isinstance(node, E.BufferLoad):
            found.append(node)

    for e in exprs:
        post_order_visit(e, visit)
    return bool(found)



def count_stmts(s: S.Stmt) -> int:
    """Statements executed by one run of `s` when its unrolled loops are replicated (an
    estimate of code size for the explicit-unroll limit)."""
    if isinstance(s, S.SeqStmt):
        return sum(count_stmts(x) for x in s.seq)
    if isinstance(s, S.For):
        inner = count_stmts(s.body)
        if s.kind == S.ForKind.UNROLLED and isinstance(s.extent, E.IntImm):
            return inner * max(1, s.extent.value)
        return inner + 1
    if isinstance(s, S.IfThenElse):
        return count_stmts(s.then_case) + (count_stmts(s.else_case) if s.else_case is not None else 0) + 1
    if isinstance(s, (S.LetStmt, Allocate)):
        return count_stmts(s.body) + 1
    return 1




_PROMOTABLE = (E.Add, E.Sub, E.Mul, E.FloorDiv, E.FloorMod, E.Div, E.Mod, E.Min, E.Max)


def promote_to_i64(e: E.PrimExpr) -> E.PrimExpr:
    """The same integer expression computed in int64: arithmetic nodes are rebuilt at int64,
    int32 constants widened, any other int32 leaf cast. Equal to `e` whenever `e` does not
    overflow int32 (index arithmetic of a valid access never does)."""
    if e.dtype != "int32":
        return e
    if isinstance(e, E.IntImm):
        return E.IntImm("int64", e.value)
    if isinstance(e, _PROMOTABLE) and type(e) in _PROMOTABLE:
        return type(e)(promote_to_i64(e.a), promote_to_i64(e.b), "int64")
    return E.Cast("int64", e)
