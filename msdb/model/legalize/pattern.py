"""TVM's AnnotateTIROpPattern analysis (src/relax/analysis/tir_op_pattern_kind.cc) on an msdb
PrimFunc: the fusion class FuseOps reads (docs/architecture.md, "Legalization").

Why an analysis and not a table: the class depends on shapes. `add` of (1,4,8,8) and
(1,4,1,1) is ELEMWISE (one operand is read at the output index), but (3,1) + (1,4) is
BROADCAST (neither is). Per block, every load is compared with the store: the same index
vars in order is elementwise, a subsequence (size-1 dimensions read at 0 skipped) broadcast,
only store vars injective; otherwise a reduction block is OUT_EWISE_FUSABLE when it is a
multiply-add or reads with reduce vars inside index expressions, else COMM_REDUCE. The
function's class is the largest over its blocks (a reduction feeding an elementwise output
block makes OUT_EWISE_FUSABLE). TVM compares index expressions by identity; after lowering
only the block iter vars are shared, so identity of `Var`s is what matters here.
"""

from __future__ import annotations

from msdb.ir import expr as E
from msdb.ir import stmt as S
from msdb.ir.function import PrimFunc
from msdb.ir.functor import IRVisitor
from msdb.model.ops import OpPattern

__all__ = ["tir_op_pattern"]


def _same(a: E.PrimExpr, b: E.PrimExpr) -> bool:
    return a is b


def _same_array(lhs: tuple[E.PrimExpr, ...], rhs: tuple[E.PrimExpr, ...]) -> bool:
    return len(lhs) == len(rhs) and all(_same(a, b) for a, b in zip(lhs, rhs))


def _is_broadcast(store: S.BufferStore, load: E.BufferLoad) -> bool:
    j = 0
    for dim, index in zip(load.buffer.shape, load.indices):
        if E.const_int(dim) == 1 and E.const_int(index) == 0:
            continue
        while j < len(store.indices) and not _same(store.indices[j], index):
            j += 1
        if j == len(store.indices):
            return False
    return True


def _vars_in(expr: E.PrimExpr) -> set[E.Var]:
    found: set[E.Var] = set()

    class Collect(IRVisitor):
        def visit_Var(self, node: E.Var) -> None:
            found.add(node)

    Collect().visit(expr)
    return found


def _store_vars(store: S.BufferStore) -> set[E.Var] | None:
    names: set[E.Var] = set()
    for index in store.indices:
        if not isinstance(index, E.Var):
            return None
        names.add(index)
    return names


def _loads_in(expr: E.PrimExpr) -> bool:
    found = False

    class Find(IRVisitor):
        def visit_BufferLoad(self, node: E.BufferLoad) -> None:
            nonlocal found
            found = True

    Find().visit(expr)
    return found


def _is_injective(store: S.BufferStore, load: E.BufferLoad) -> bool:
    allowed = _store_vars(store)
    if allowed is None or any(_loads_in(index) for index in load.indices):
        return False  # a gather (`take`): TVM's analysis calls it opaque
    return all(_vars_in(index) <= allowed for index in load.indices)


def _allows_reuse(store: S.BufferStore, load: E.BufferLoad) -> bool:
    remaining = _store_vars(store)
    if remaining is None:
        return False
    for index in load.indices:
        remaining -= _vars_in(index)
    return bool(remaining)


def _strip_cast(expr: E.PrimExpr) -> E.PrimExpr:
    while isinstance(expr, E.Cast):
        expr = expr.value
    return expr


def _is_fma(body: S.Stmt) -> bool:
    if not isinstance(body, S.BufferStore):
        return False
    add = _strip_cast(body.value)
    if not isinstance(add, E.Add):
        return False
    mul = _strip_cast(add.b)
    acc = _strip_cast(add.a)
    if not isinstance(mul, E.Mul) or not isinstance(acc, E.BufferLoad):
        return False
    if acc.buffer is not body.buffer or not _same_array(body.indices, acc.indices):
        return False
    lhs, rhs = _strip_cast(mul.a), _strip_cast(mul.b)
    if not isinstance(lhs, E.BufferLoad) or not isinstance(rhs, E.BufferLoad):
        return False
    return _allows_reuse(body, lhs) and _allows_reuse(body, rhs)


def _is_pure_reduce(reduce_vars: list[E.Var], indices: tuple[E.PrimExpr, ...]) -> bool:
    for index in indices:
        used = [v for v in reduce_vars if v in _vars_in(index)]
        if used and used[0] is not index:
            return False
    return True


class _Analyzer(IRVisitor):
    def __init__(self, params: set[E.Buffer]) -> None:
        super().__init__()
        self.params = params
        self.kind = OpPattern.ELEMWISE
        self.store: S.BufferStore | None = None
        self.loads: list[E.BufferLoad] = []
        self.mismatched_store = False

    def visit_BufferStore(self, node: S.BufferStore) -> None:
        if self.store is not None and not _same_array(node.indices, self.store.indices):
            self.mismatched_store = True
            return
        self.store = node
        super().visit_BufferStore(node)

    def visit_BufferLoad(self, node: E.BufferLoad) -> None:
        self.loads.append(node)
        super().visit_BufferLoad(node)

    def visit_Block(self, node: S.Block) -> None:
        if node.name_hint == "root":
            self.visit(node.body)
            return
        self.loads = []
        self.store = None
        self.mismatched_store = False
        self.visit(node.body)
        if self.mismatched_store or self.store is None:
            self.kind = OpPattern.OPAQUE
            return
        store = self.store
        pair = OpPattern.ELEMWISE
        has_elemwise = False
        for load in self.loads:
            if _same_array(store.indices, load.indices):
                has_elemwise = True
            elif _is_broadcast(store, load):
                pair = max(pair, OpPattern.BROADCAST)
            elif _is_injective(store, load):
                pair = max(pair, OpPattern.INJECTIVE)
            else:
                pair = OpPattern.OPAQUE
                break
        if pair == OpPattern.BROADCAST and has_elemwise:
            pair = OpPattern.ELEMWISE
        if pair != OpPattern.OPAQUE:
            writes_param = any(region.buffer in self.params for region in node.writes)
            if writes_param and self.kind == OpPattern.COMM_REDUCE:
                self.kind = OpPattern.OUT_EWISE_FUSABLE
            else:
                self.kind = max(self.kind, pair)
            return
        reduce_vars = [iv.var for iv in node.iter_vars if iv.iter_type == S.IterType.COMM_REDUCE]
        if not reduce_vars:
            self.kind = OpPattern.OPAQUE
            return
        if _is_fma(node.body) or not all(_is_pure_reduce(reduce_vars, load.indices) for load in self.loads):
            self.kind = max(self.kind, OpPattern.OUT_EWISE_FUSABLE)
            return
        self.kind = max(self.kind, OpPattern.COMM_REDUCE)


def tir_op_pattern(func: PrimFunc) -> OpPattern:
    """The OpPatternKind TVM's AnnotateTIROpPattern gives `func`."""
    analyzer = _Analyzer(set(func.buffer_map.values()))
    analyzer.visit(func.body)
    return analyzer.kind
