"""Cross-thread reductions (TVM's LowerCrossThreadReduction): a reduction block whose reduce iter
var is fed by a threadIdx-bound loop accumulates per thread, then combines the threads' values
with `msdb_thread_allreduce`, instead of racing on one element.

The rewritten nest may sit under no condition that depends on threadIdx. See
docs/architecture.md, "CUDA".
"""

from __future__ import annotations

from dataclasses import dataclass

from msdb.ir import expr as E
from msdb.ir import stmt as S
from msdb.ir.functor import IRMutator, free_vars, substitute
from msdb.tuner.codegen.errors import CodegenError

__all__ = ["ALLREDUCE", "lower_cross_thread_reductions", "allreduce_parts"]

#: The call op of the allreduce statement.
ALLREDUCE = "msdb_thread_allreduce"

_COMBINERS: dict[type, str] = {E.Add: "add", E.Mul: "mul", E.Max: "max", E.Min: "min"}


def _identity(op: str, dtype: str) -> E.PrimExpr:
    from msdb.ir.arith.limits import value_limit
    from msdb.ir.dtype import is_float

    if op in ("add", "mul"):
        one = 1 if op == "mul" else 0
        return E.FloatImm(dtype, float(one)) if is_float(dtype) else E.IntImm(dtype, one)
    value = value_limit(dtype, op == "min")
    return E.FloatImm(dtype, float(value)) if is_float(dtype) else E.IntImm(dtype, int(value))


def combine(op: str, a: E.PrimExpr, b: E.PrimExpr) -> E.PrimExpr:
    cls = {"add": E.Add, "mul": E.Mul, "max": E.Max, "min": E.Min}[op]
    return cls(a, b, a.dtype)


@dataclass(frozen=True)
class _Plan:
    top: S.For  # the outermost reduction loop: replaced by the rewritten nest
    realize: S.BlockRealize
    op: str
    value: E.PrimExpr  # the combined value, over block iter vars
    tags: tuple[str, ...]


def allreduce_parts(call: E.Call) -> tuple[str, E.BufferLoad, E.BufferLoad, E.PrimExpr, tuple[str, ...]]:
    """(op, accumulator, result, identity, thread tags) of an allreduce call."""
    op, acc, res, identity, tags = call.args
    assert isinstance(op, E.StringImm) and isinstance(tags, E.StringImm)
    assert isinstance(acc, E.BufferLoad) and isinstance(res, E.BufferLoad)
    return op.value, acc, res, identity, tuple(t for t in tags.value.split(",") if t)


def _match(block: S.Block) -> tuple[str, E.PrimExpr] | None:
    body = block.body
    if not isinstance(body, S.BufferStore):
        return None
    value = body.value
    op = _COMBINERS.get(type(value))
    if op is None:
        return None
    assert isinstance(value, E.BinaryOp)
    for acc, other in ((value.a, value.b), (value.b, value.a)):
        if (isinstance(acc, E.BufferLoad) and acc.buffer is body.buffer and len(acc.indices) == len(body.indices)
                and all(_same(x, y) for x, y in zip(acc.indices, body.indices))):
            return op, other
    return None


def _same(a: E.PrimExpr, b: E.PrimExpr) -> bool:
    from msdb.ir.arith.keys import expr_equal

    return expr_equal(a, b)


def _find(body: S.Stmt) -> list[_Plan]:
    plans: list[_Plan] = []
    stack: list[S.For] = []

    def visit(s: S.Stmt) -> None:
        if isinstance(s, S.For):
            stack.append(s)
            visit(s.body)
            stack.pop()
        elif isinstance(s, S.SeqStmt):
            for x in s.seq:
                visit(x)
        elif isinstance(s, S.IfThenElse):
            visit(s.then_case)
            if s.else_case is not None:
                visit(s.else_case)
        elif isinstance(s, S.LetStmt):
            visit(s.body)
        elif isinstance(s, S.BlockRealize):
            plan = _plan(s, stack)
            if plan is not None:
                plans.append(plan)
            else:
                visit(s.block.body)
        elif isinstance(s, S.Block):
            visit(s.body)

    visit(body)
    return plans


def _plan(realize: S.BlockRealize, stack: list[S.For]) -> _Plan | None:
    block = realize.block
    threads = {lp.loop_var: lp.thread_binding.thread_tag for lp in stack
               if lp.kind == S.ForKind.THREAD_BINDING and lp.thread_binding is not None
               and lp.thread_binding.thread_tag.startswith("threadIdx.")}
    reduce_vars: set[E.Var] = set()
    spatial_vars: set[E.Var] = set()
    for iv, value in zip(block.iter_vars, realize.iter_values):
        used = free_vars(value)
        if iv.iter_type == S.IterType.COMM_REDUCE:
            reduce_vars |= used
        else:
            spatial_vars |= used
    tags = sorted({threads[v] for v in reduce_vars if v in threads})
    if not tags:
        return None
    where = f"block {block.name_hint}"
    matched = _match(block)
    if matched is None or block.init is None:
        raise CodegenError(f"{where} reduces over threads ({', '.join(tags)}) but is not buf[i] = buf[i] op value "
                           "with op +, *, max or min and an init; TVM's cross-thread reduction needs that form")
    op, value = matched
    index = next((k for k, lp in enumerate(stack) if lp.loop_var in reduce_vars), None)
    assert index is not None
    for lp in stack[index:]:
        if lp.loop_var in spatial_vars:
            raise CodegenError(f"{where}: loop {lp.loop_var.name} feeds a spatial iter var but sits inside the "
                               "cross-thread reduction loops; move the spatial loops outside them")
    return _Plan(stack[index], realize, op, value, tuple(tags))


class _Rewriter(IRMutator):
    def __init__(self, plans: list[_Plan]) -> None:
        super().__init__()
        self.by_top = {id(p.top): p for p in plans}
        self.by_realize = {id(p.realize): p for p in plans}
        self.buffers: list[E.Buffer] = []
        self.current: dict[int, E.Buffer] = {}

    def visit_For(self, node: S.For) -> S.Stmt:
        plan = self.by_top.get(id(node))
        if plan is None:
            return super().visit_For(node)
        block = plan.realize.block
        store = block.body
        assert isinstance(store, S.BufferStore) and block.init is not None
        dtype = store.buffer.dtype
        name = store.buffer.name
        acc = E.Buffer(f"{name}_cross_thread_acc", (E.IntImm("int32", 1),), dtype, "local")
        res = E.Buffer(f"{name}_cross_thread_res", (E.IntImm("int32", 1),), dtype, "local")
        self.buffers += [acc, res]
        self.current[id(plan.realize)] = acc
        nest = super().visit_For(node)
        zero = (E.IntImm("int32", 0),)
        identity = _identity(plan.op, dtype)
        # spatial bindings, valid outside the reduction loops
        spatial = {iv.var: v for iv, v in zip(block.iter_vars, plan.realize.iter_values)
                   if iv.iter_type != S.IterType.COMM_REDUCE}
        init = block.init
        if not isinstance(init, S.BufferStore):
            raise CodegenError(f"block {block.name_hint}: the init of a cross-thread reduction must be one store")
        final_index = tuple(substitute(i, spatial) for i in store.indices)
        final = combine(plan.op, substitute(init.value, spatial), E.BufferLoad(res, zero))
        call = E.Call("int32", ALLREDUCE, (E.StringImm("handle", plan.op), E.BufferLoad(acc, zero),
                                            E.BufferLoad(res, zero), identity,
                                            E.StringImm("handle", ",".join(plan.tags))))
        return S.seq(S.BufferStore(acc, identity, zero), nest, S.Evaluate(call),
                     S.BufferStore(store.buffer, final, final_index))

    def visit_BlockRealize(self, node: S.BlockRealize) -> S.Stmt:
        plan = self.by_realize.get(id(node))
        if plan is None:
            return super().visit_BlockRealize(node)
        acc = self.current[id(node)]
        zero = (E.IntImm("int32", 0),)
        block = node.block
        body = S.BufferStore(acc, combine(plan.op, E.BufferLoad(acc, zero), plan.value), zero)
        new_block = S.Block(block.iter_vars, block.reads, (S.BufferRegion(acc, (E.Range(E.IntImm("int32", 0),
                                                                                          E.IntImm("int32", 1)),)),),
                            block.name_hint, body, None, block.alloc_buffers, block.match_buffers, block.annotations)
        return S.BlockRealize(node.iter_values, node.predicate, new_block)


def lower_cross_thread_reductions(body: S.Stmt) -> tuple[S.Stmt, list[E.Buffer]]:
    """`body` with every cross-thread reduction rewritten (module docstring), and the register
    buffers the rewrite allocates."""
    plans = _find(body)
    if not plans:
        return body, []
    rewriter = _Rewriter(plans)
    return rewriter.visit(body), rewriter.buffers
