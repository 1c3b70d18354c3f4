"""reindex: give a block's access to one buffer the block's own iteration space, through a new
buffer and a copy stage (TVM's ReIndex; docs/architecture.md, "Schedules and traces").

TVM's tensor-core rule starts from it: after reindexing the output and both inputs of a conv2d,
each is indexed by block iter vars only (`PadInput[v_n, v_h + v_rh, ...]` becomes
`PadInput_reindex[v_n, v_h, v_w, v_rh, v_rw, v_rc]`), which TransformLayout then folds into a
matrix.

As in TVM: the block is a leaf that accesses the buffer with one index pattern; the pattern is
simplified over the block's iter domains (a constant result keeps the original index); the new
buffer `<buffer>_reindex` has one dimension per iter var the pattern uses, in the block's iter
order, extent `min + extent` of its domain; the copy block `<written buffer>_reindex` (so a read
stage is `<buffer>_reindex_reindex`) with iter vars `v0, v1, ...` under loops `ax0, ax1, ...`
goes right before (read) or after (write) the block's outermost loop in the scope.
"""

from __future__ import annotations

import dataclasses

from msdb.errors import ScheduleError
from msdb.ir import expr as E
from msdb.ir import stmt as S
from msdb.ir.arith import expr_equal, simplify
from msdb.ir.functor import IRMutator, IRVisitor, free_vars, substitute
from msdb.schedule import analysis as A
from msdb.schedule import tree_edit as T
from msdb.schedule.state import ScheduleState

__all__ = ["reindex", "access_buffer", "READ", "WRITE"]

#: TVM's BufferIndexType values, as a trace records them.
READ, WRITE = 0, 1


class _Accesses(IRVisitor):
    """The index patterns of every load and store of one buffer."""

    def __init__(self, buffer: E.Buffer) -> None:
        super().__init__()
        self.buffer = buffer
        self.patterns: list[tuple[E.PrimExpr, ...]] = []
        self.nested = False

    def visit_BufferLoad(self, node: E.BufferLoad) -> None:
        super().visit_BufferLoad(node)
        if node.buffer is self.buffer:
            self.patterns.append(node.indices)

    def visit_BufferStore(self, node: S.BufferStore) -> None:
        super().visit_BufferStore(node)
        if node.buffer is self.buffer:
            self.patterns.append(node.indices)

    def visit_BlockRealize(self, node: S.BlockRealize) -> None:
        self.nested = True


class _Redirect(IRMutator):
    """Loads and stores of `old` become accesses of `new` at `indices`."""

    def __init__(self, old: E.Buffer, new: E.Buffer, indices: tuple[E.PrimExpr, ...]) -> None:
        super().__init__()
        self.old, self.new, self.indices = old, new, indices

    def visit_BufferLoad(self, node: E.BufferLoad) -> E.PrimExpr:
        if node.buffer is self.old:
            return E.BufferLoad(self.new, self.indices)
        return super().visit_BufferLoad(node)

    def visit_BufferStore(self, node: S.BufferStore) -> S.Stmt:
        if node.buffer is self.old:
            return S.BufferStore(self.new, self.visit(node.value), self.indices)
        return super().visit_BufferStore(node)


def _pattern(block: S.Block, buffer: E.Buffer, where: str) -> tuple[E.PrimExpr, ...]:
    found = _Accesses(buffer)
    found.visit(block.body)
    if found.nested:
        raise ScheduleError(f"{where}: the block is not a leaf (it holds other blocks)")
    if not found.patterns:
        raise ScheduleError(f"{where}: the block does not load or store buffer {buffer.name!r}")
    first = found.patterns[0]
    if any(len(p) != len(first) or not all(expr_equal(a, b) for a, b in zip(p, first)) for p in found.patterns[1:]):
        raise ScheduleError(f"{where}: the block accesses buffer {buffer.name!r} with more than one index pattern")
    ranges = {iv.var: A.domain(iv) for iv in block.iter_vars}
    return tuple(A.simplify_non_trivial(index, ranges) for index in first)


def access_buffer(block: S.Block, buffer_index: int, buffer_index_type: int, where: str) -> E.Buffer:
    """The block's `buffer_index`-th read (`READ`) or write (`WRITE`) buffer, as TVM's
    GetNthAccessBuffer; ScheduleError naming the block when there is none."""
    if buffer_index_type not in (READ, WRITE):
        raise ScheduleError(f"{where}: buffer_index_type must be 0 (read) or 1 (write), got {buffer_index_type!r}")
    regions = block.writes if buffer_index_type == WRITE else block.reads
    access = "write" if buffer_index_type == WRITE else "read"
    if not 0 <= buffer_index < len(regions):
        raise ScheduleError(f"{where}: {access} buffer index {buffer_index} is out of range; the block {access}s "
                            f"{len(regions)} buffer(s)")
    return regions[buffer_index].buffer


def reindex(state: ScheduleState, func_name: str, block_name: str, buffer_index: int, buffer_index_type: int) -> str:
    """Reindex the block's `buffer_index`-th read (`READ`) or write (`WRITE`) buffer (see the
    module docstring); returns the copy block's name."""
    where = f"reindex: block {block_name!r}"
    block = state.block(func_name, block_name)
    buffer = access_buffer(block, buffer_index, buffer_index_type, where)
    indices = _pattern(block, buffer, where)
    used = set().union(*(free_vars(i) for i in indices)) if indices else set()
    covered = [iv for iv in block.iter_vars if iv.var in used]

    shape = tuple(simplify(A.domain(iv).min + A.domain(iv).extent) for iv in covered)
    new_buffer = dataclasses.replace(buffer, name=f"{buffer.name}_reindex", shape=shape, strides=())
    stage = _stage(state, func_name, block, buffer, new_buffer, covered, indices, buffer_index_type)

    own = tuple(iv.var for iv in covered)
    point = tuple(E.Range(v, E.IntImm(v.dtype, 1)) for v in own)
    new_region = S.BufferRegion(new_buffer, point)
    rewritten = _Redirect(buffer, new_buffer, own).visit(block)
    assert isinstance(rewritten, S.Block)
    swap = lambda rs: tuple(new_region if r.buffer is buffer else r for r in rs)  # noqa: E731
    matches = tuple(S.MatchBufferRegion(m.buffer, new_region) if m.source.buffer is buffer else m
                    for m in rewritten.match_buffers)
    rewritten = T.with_block(rewritten, reads=swap(rewritten.reads), writes=swap(rewritten.writes),
                             match_buffers=matches)

    scope_block = state.scope_block(func_name, block)
    top = _outermost_loop(state, func_name, block, scope_block, where)
    pos = next(i for i, item in enumerate(T.as_list(scope_block.body)) if item is top)
    node, fn = T.body_insert_edit(scope_block, pos + (1 if buffer_index_type == WRITE else 0), stage[1])
    new_body = T.rebuild(scope_block.body, replace={block: rewritten}, post={node: fn})
    new_scope = T.with_block(scope_block, body=new_body, alloc_buffers=scope_block.alloc_buffers + (new_buffer,))
    state.replace(func_name, scope_block, new_scope)
    return stage[0]


def _outermost_loop(state: ScheduleState, func_name: str, block: S.Block, scope_block: S.Block, where: str) -> S.Stmt:
    """The statement of the scope's body that holds the block: its outermost loop, each loop of
    the chain holding only the next."""
    node: S.Stmt = state.realize(func_name, block.name_hint)
    parent = state.parent(func_name, node)
    while parent is not scope_block:
        if not isinstance(parent, S.For) or parent.body is not node:
            if isinstance(parent, S.SeqStmt) and state.parent(func_name, parent) is scope_block:
                return node
            raise ScheduleError(f"{where}: the loops above the block must each hold only the next one")
        node = parent
        parent = state.parent(func_name, node)
    return node


def _stage(state: ScheduleState, func_name: str, block: S.Block, old: E.Buffer, new: E.Buffer,
           covered: list[S.IterVar], indices: tuple[E.PrimExpr, ...], buffer_index_type: int) -> tuple[str, S.Stmt]:
    """The copy block's name and its loop nest."""
    replace: dict[E.Var, E.PrimExpr] = {}
    iters: list[S.IterVar] = []
    for iv in block.iter_vars:
        var = E.Var(f"v{len(iters)}", iv.var.dtype)
        replace[iv.var] = var
        if any(c is iv for c in covered):
            iters.append(S.IterVar(A.domain(iv), var, S.IterType.DATA_PAR))
    own = tuple(iv.var for iv in iters)
    target = tuple(substitute(i, replace) for i in indices)
    if buffer_index_type == WRITE:
        src, src_idx, dst, dst_idx = new, own, old, target
    else:
        src, src_idx, dst, dst_idx = old, target, new, own
    point = lambda idx: tuple(E.Range(i, E.IntImm(i.dtype, 1)) for i in idx)  # noqa: E731
    name = T.unique_block_name(state, func_name, f"{dst.name}_reindex")
    body = S.Block(tuple(iters), (S.BufferRegion(src, point(src_idx)),), (S.BufferRegion(dst, point(dst_idx)),), name,
                   S.BufferStore(dst, E.BufferLoad(src, src_idx), dst_idx))
    loop_vars = [E.Var(f"ax{i}", iv.var.dtype) for i, iv in enumerate(iters)]
    stmt: S.Stmt = S.BlockRealize(tuple(loop_vars), T.const_true(), body)
    for lv, iv in reversed(list(zip(loop_vars, iters))):
        stmt = S.For(lv, A.domain(iv).min, A.domain(iv).extent, S.ForKind.SERIAL, stmt)
    return name, stmt
