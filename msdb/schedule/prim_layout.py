"""transform_layout and transform_block_layout: re-shape a buffer, or a block's iteration space,
through an index map (TVM's TransformLayout and TransformBlockLayout; docs/architecture.md,
"Schedules and traces"; maps in `msdb.schedule.index_map`).

TVM's tensor-core rule uses both: after ReIndex it folds a conv2d's buffers and block into a
matrix multiply (`lambda n, h, w, co: (n * 3136 + h * 56 + w, co)`), and it lays the output's
accumulator out in 16x16 tiles per warp.

transform_layout: the buffer must be allocated by a block (msdb does not re-type function
parameters) and the map must not pad (no `pad_value`; without `assume_injective_transform`
the new shape must hold exactly as many elements). Every access is mapped and simplified with
the ranges of the loops and block iter vars around it (TVM: `MapIndices`, then iter-map
simplification in context); each block region of the buffer is inferred again from the block's
body; the allocation takes the mapped shape.

transform_block_layout: the block's loops (each holding only the next) bind its iter vars
one to one in order and start at 0. New iter vars `v0, v1, ...` take the map's outputs, with the
iter type of the old iter vars they use (one extent: data-parallel); the body reads the old iter
vars through the map's inverse, its accesses simplified; new loops `ax0, ax1, ...` replace the
old ones.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from typing import Iterator

from msdb.errors import ScheduleError
from msdb.ir import expr as E
from msdb.ir import stmt as S
from msdb.ir.arith import simplify
from msdb.ir.functor import IRMutator, free_vars, substitute
from msdb.ir.regions import infer_access_regions
from msdb.schedule import analysis as A
from msdb.schedule import tree_edit as T
from msdb.schedule.index_map import IndexMap
from msdb.schedule.prim_reindex import access_buffer
from msdb.schedule.state import ScheduleState

__all__ = ["transform_layout", "transform_block_layout"]


class _InContext(IRMutator):
    """A mutator that knows the ranges of the loops and block iter vars around the node it
    visits (TVM's IRMutatorWithAnalyzer)."""

    def __init__(self) -> None:
        super().__init__()
        self.ranges: dict[E.Var, E.Range] = {}

    def visit_For(self, node: S.For) -> S.Stmt:
        self.ranges[node.loop_var] = E.Range(node.min, node.extent)
        try:
            return super().visit_For(node)
        finally:
            del self.ranges[node.loop_var]

    @contextlib.contextmanager
    def inside(self, block: S.Block) -> Iterator[None]:
        """The block's iter vars in range while the block's contents are visited."""
        for iv in block.iter_vars:
            self.ranges[iv.var] = A.domain(iv)
        try:
            yield
        finally:
            for iv in block.iter_vars:
                self.ranges.pop(iv.var, None)


class _LayoutRewriter(_InContext):
    """Every access of `old` becomes an access of `new` at the mapped indices, simplified with
    the ranges of the loops and block iter vars around it; regions of `old` are inferred
    again."""

    def __init__(self, old: E.Buffer, new: E.Buffer, index_map: IndexMap) -> None:
        super().__init__()
        self.old, self.new, self.index_map = old, new, index_map

    def _mapped(self, indices: tuple[E.PrimExpr, ...]) -> tuple[E.PrimExpr, ...]:
        return tuple(_iter_map_simplify(e, self.ranges) for e in self.index_map.apply(indices))

    def visit_buffer(self, buffer: E.Buffer) -> E.Buffer:
        return self.new if buffer is self.old else buffer

    def visit_BufferLoad(self, node: E.BufferLoad) -> E.PrimExpr:
        indices = self._exprs(node.indices)
        if node.buffer is self.old:
            return E.BufferLoad(self.new, self._mapped(indices))
        return node if indices is node.indices else E.BufferLoad(node.buffer, indices)

    def visit_BufferStore(self, node: S.BufferStore) -> S.Stmt:
        value = self.visit(node.value)
        indices = self._exprs(node.indices)
        if node.buffer is self.old:
            return S.BufferStore(self.new, value, self._mapped(indices))
        if value is node.value and indices is node.indices:
            return node
        return S.BufferStore(node.buffer, value, indices)

    def visit_Block(self, node: S.Block) -> S.Stmt:
        with self.inside(node):
            init = self.visit(node.init)
            body = self.visit(node.body)
        touches = any(r.buffer is self.old for r in node.reads + node.writes)
        if init is node.init and body is node.body and not touches and \
                not any(b is self.old for b in node.alloc_buffers) and \
                not any(m.source.buffer is self.old for m in node.match_buffers):
            return node
        reads, writes = node.reads, node.writes
        if touches:
            inferred_reads, inferred_writes = infer_access_regions(body, init, node.alloc_buffers)
            reads = _swap_region(reads, self.old, inferred_reads + inferred_writes, self.new)
            writes = _swap_region(writes, self.old, inferred_writes + inferred_reads, self.new)
        matches = tuple(S.MatchBufferRegion(m.buffer, S.BufferRegion(self.new, m.source.region))
                        if m.source.buffer is self.old else m for m in node.match_buffers)
        allocs = tuple(self.new if b is self.old else b for b in node.alloc_buffers)
        return T.with_block(node, reads=reads, writes=writes, init=init, body=body, alloc_buffers=allocs,
                            match_buffers=matches)


def _iter_map_simplify(expr: E.PrimExpr, ranges: dict[E.Var, E.Range]) -> E.PrimExpr:
    """TVM's IterMapSimplifyWithContext: inside an expression a variable with one value is that
    value (`n * 3136 + h * 56 + w` with n in [0, 1) is `h * 56 + w`), a lone variable stays;
    sums print in block-binding order."""
    if isinstance(expr, E.Var):
        return expr
    units = {v: r.min for v, r in ranges.items() if E.const_int(r.extent) == 1}
    out = simplify(substitute(expr, units), ranges, order="binding")
    for _ in range(3):  # a removed `% n` can leave a division that simplifies further
        again = simplify(out, ranges, order="binding")
        if again is out:
            break
        out = again
    return out


def _swap_region(regions: tuple[S.BufferRegion, ...], old: E.Buffer, inferred: tuple[S.BufferRegion, ...],
                 new: E.Buffer) -> tuple[S.BufferRegion, ...]:
    found = next((r for r in inferred if r.buffer is new), None)
    if found is None:
        return tuple(r for r in regions if r.buffer is not old)
    return tuple(found if r.buffer is old else r for r in regions)


def transform_layout(state: ScheduleState, func_name: str, block_name: str, buffer_index: int,
                     buffer_index_type: int, index_map: IndexMap, pad_value: object,
                     assume_injective_transform: bool) -> None:
    """Lay the block's `buffer_index`-th read or write buffer out through `index_map` (see the
    module docstring)."""
    where = f"transform_layout: block {block_name!r}"
    block = state.block(func_name, block_name)
    buffer = access_buffer(block, buffer_index, buffer_index_type, where)
    if pad_value is not None:
        raise ScheduleError(f"{where}: msdb does not pad a transformed layout (pad_value must be None)")
    site = next((n for n in [block, *state.ancestors(func_name, block)]
                 if isinstance(n, S.Block) and any(b is buffer for b in n.alloc_buffers)), None)
    if site is None:
        raise ScheduleError(f"{where}: buffer {buffer.name!r} is not allocated by a block (a function parameter or "
                            "a match_buffer); msdb transforms the layout of intermediate buffers only")
    shape = index_map.shape(buffer.shape)
    if not assume_injective_transform:
        sizes = [E.const_int(d) for d in buffer.shape + tuple(shape)]
        if any(s is None for s in sizes):
            raise ScheduleError(f"{where}: buffer {buffer.name!r} has a symbolic shape")
        old_size = math.prod(s or 0 for s in sizes[:len(buffer.shape)])
        new_size = math.prod(s or 0 for s in sizes[len(buffer.shape):])
        if new_size > old_size:
            raise ScheduleError(f"{where}: the index map lays {old_size} elements of {buffer.name!r} out over "
                                f"{new_size} (it pads); msdb does not pad")
        if new_size < old_size:
            raise ScheduleError(f"{where}: the index map puts {old_size} elements of {buffer.name!r} in {new_size} "
                                "places (it is not injective)")
    new_buffer = dataclasses.replace(buffer, shape=tuple(shape))
    new_site = _LayoutRewriter(buffer, new_buffer, index_map).visit(site)
    state.replace(func_name, site, new_site)


def transform_block_layout(state: ScheduleState, func_name: str, block_name: str, index_map: IndexMap) -> None:
    """Re-index the block's iteration space through `index_map` (see the module docstring)."""
    where = f"transform_block_layout: block {block_name!r}"
    block = state.block(func_name, block_name)
    realize = state.realize(func_name, block_name)
    loops: list[S.For] = []
    node: S.Stmt = realize
    parent = state.parent(func_name, node)
    while isinstance(parent, S.For):
        if parent.body is not node:
            raise ScheduleError(f"{where}: the loops above the block must each hold only the next one")
        loops.insert(0, parent)
        node, parent = parent, state.parent(func_name, parent)
    above = state.parent(func_name, parent) if isinstance(parent, S.SeqStmt) else parent
    if not isinstance(above, S.Block):  # TVM: every loop up to the scope, each with one child
        raise ScheduleError(f"{where}: the loops above the block must each hold only the next one, up to its scope")
    if len(loops) != len(block.iter_vars) or any(
            v is not lp.loop_var for v, lp in zip(realize.iter_values, loops)):
        raise ScheduleError(f"{where}: the block's iter vars must be bound to its loops one to one, in order")
    if any(E.const_int(lp.min) != 0 for lp in loops):
        raise ScheduleError(f"{where}: the block's loops must start at 0")
    extents = []
    for iv in block.iter_vars:
        ext = E.const_int(A.domain(iv).extent)
        if ext is None or E.const_int(A.domain(iv).min) != 0:
            raise ScheduleError(f"{where}: iter var {iv.var.name!r} must range over [0, constant)")
        extents.append(ext)

    old_vars = tuple(iv.var for iv in block.iter_vars)
    outputs = index_map.apply(old_vars)
    new_extents = index_map.shape([E.IntImm(v.dtype, n) for v, n in zip(old_vars, extents)])
    types = {iv.var: iv.iter_type for iv in block.iter_vars}
    new_iters = []
    for i, (expr, extent) in enumerate(zip(outputs, new_extents)):
        dtype = expr.dtype if expr.dtype.startswith("int") else "int32"
        used = {types[v] for v in free_vars(expr) if v in types}
        if E.const_int(extent) == 1:
            kind = S.IterType.DATA_PAR
        elif len(used) == 1:
            kind = used.pop()
        else:
            raise ScheduleError(f"{where}: output {i} of the index map ({expr}) mixes iter vars of different kinds")
        new_iters.append(S.IterVar(E.Range(E.IntImm(dtype, 0), E.IntImm(dtype, E.const_int(extent) or 0)),
                                   E.Var(f"v{i}", dtype), kind))
    inverse = index_map.inverse(extents)
    new_vars = tuple(iv.var for iv in new_iters)
    back = dict(zip(old_vars, inverse.apply(new_vars)))
    moved = substitute(block, back)
    assert isinstance(moved, S.Block)
    moved = _simplify_accesses(T.with_block(moved, iter_vars=tuple(new_iters)))

    loop_vars = [E.Var(f"ax{i}", iv.var.dtype) for i, iv in enumerate(new_iters)]
    stmt: S.Stmt = S.BlockRealize(tuple(loop_vars), realize.predicate, moved)
    for lv, iv in reversed(list(zip(loop_vars, new_iters))):
        stmt = S.For(lv, E.IntImm(lv.dtype, 0), A.domain(iv).extent, S.ForKind.SERIAL, stmt)
    state.replace(func_name, node, stmt)


class _AccessSimplifier(_InContext):
    """TVM's BlockBufferAccessSimplifier: indices of loads and stores and the starts of block
    regions through iter-map simplification in the context of the iter vars and loops around
    them; region extents simplified."""

    def visit_Block(self, node: S.Block) -> S.Stmt:
        with self.inside(node):
            return super().visit_Block(node)

    def visit_BufferLoad(self, node: E.BufferLoad) -> E.PrimExpr:
        load = super().visit_BufferLoad(node)
        assert isinstance(load, E.BufferLoad)
        return E.BufferLoad(load.buffer, tuple(_iter_map_simplify(i, self.ranges) for i in load.indices))

    def visit_BufferStore(self, node: S.BufferStore) -> S.Stmt:
        store = super().visit_BufferStore(node)
        assert isinstance(store, S.BufferStore)
        return S.BufferStore(store.buffer, store.value, tuple(_iter_map_simplify(i, self.ranges) for i in store.indices))

    def visit_BufferRegion(self, node: S.BufferRegion) -> S.BufferRegion:
        return S.BufferRegion(node.buffer, tuple(E.Range(_iter_map_simplify(r.min, self.ranges), simplify(r.extent))
                                                 for r in node.region))


def _simplify_accesses(block: S.Block) -> S.Block:
    out = _AccessSimplifier().visit(block)
    assert isinstance(out, S.Block)
    return out
