"""cache_read and cache_write: stage a buffer through a copy in another storage scope.

Both create a buffer `<name>_<scope>` (a copy of the original's declaration in the new scope,
allocated by the scope block) and a copy block of the same name over the region that matters:
the whole buffer for a function input, else the region the writing block writes, relaxed over
the loops between it and the place the copy goes and cut to what the block's iter var domains
and the buffer allow (a non-divisible split's overshoot is not part of it; a window that moves
with the loops above keeps its constant extent and gets a predicate instead, where TVM would
emit a symbolic loop extent). The place is TVM's (`CacheLocDetector`): in
the innermost statement sequence that separates the writer from the first related block (its
consumers), right between them; an input buffer's copy goes first in the scope.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import NamedTuple

from msdb.errors import ScheduleError
from msdb.ir import expr as E
from msdb.ir import stmt as S
from msdb.ir.functor import replace_buffers, substitute
from msdb.schedule import analysis as A
from msdb.schedule import tree_edit as T
from msdb.schedule._block_arith import (Affine, IntervalEvaluator, NumRange, loop_bounds, numeric_range,
                                        plus_var, range_predicate, union_intervals)
from msdb.schedule.state import ScheduleState

__all__ = ["cache_read", "cache_write"]


def _staged_buffer(state: ScheduleState, func_name: str, block_name: str, index: int,
                   access: str) -> tuple[S.Block, E.Buffer, S.Block, A.BlockScope]:
    """The block, its `index`-th read or write (`access`) buffer, the block's scope block and
    that scope's analysis: what cache_read and cache_write start from."""
    block = state.block(func_name, block_name)
    regions = block.reads if access == "read" else block.writes
    if not 0 <= index < len(regions):
        raise ScheduleError(f"cache_{access}: block {block_name!r}: {access}_buffer_index {index} is out of range; "
                            f"the block {access}s {len(regions)} buffer(s)")
    scope_block = state.scope_block(func_name, block)
    return block, regions[index].buffer, scope_block, A.BlockScope(scope_block)


def cache_read(state: ScheduleState, func_name: str, block_name: str, index: int, scope_name: str,
               consumer_names: list[str]) -> str:
    """Stage the block's `index`-th read buffer through a copy in `scope_name` (see
    `Schedule.cache_read`); returns the copy block's name."""
    block, buffer, scope_block, scope = _staged_buffer(state, func_name, block_name, index, "read")
    where = f"cache_read: block {block_name!r}"
    consumers = [state.block(func_name, n) for n in consumer_names]
    cache = dataclasses.replace(buffer, name=f"{buffer.name}_{scope_name}", scope=scope_name)

    writers = scope.writers(buffer)
    if len(writers) > 1:
        raise ScheduleError(f"{where}: buffer {buffer.name!r} is written by several blocks "
                            f"{[w.name_hint for w in writers]}; cache_read needs at most one writer")
    if writers:
        writer = writers[0]
        related = consumers or [b for b in scope.consumers(writer) if any(r is buffer for r in A.read_buffers(b))]
        loc, pos = _detect_location(scope_block, writer, related)
        region = _relaxed_write_region(state, func_name, writer, buffer, loc)
    else:
        loc, pos = scope_block, 0
        region = [_Dim(Affine(None, 0), _static_dim(buffer, d), None) for d in range(len(buffer.shape))]

    new_name = T.unique_block_name(state, func_name, f"{buffer.name}_{scope_name}")
    stage = _copy_stage(new_name, src=buffer, dst=cache, region=region, outer=_outer_bounds(state, func_name, loc))
    readers = consumers or [b for b in scope.readers(buffer) if not any(b is w for w in writers)]
    replace: dict[object, S.Stmt | None] = {}
    for reader in readers:
        replace[reader] = _rewrite_reads(reader, buffer, cache)
    _apply(state, func_name, scope_block, loc, pos, stage, replace, cache)
    return new_name


def cache_write(state: ScheduleState, func_name: str, block_name: str, index: int, scope_name: str,
                consumer_names: list[str]) -> str:
    """Make the block write a copy in `scope_name` and copy it back (see
    `Schedule.cache_write`); returns the copy block's name."""
    block, buffer, scope_block, scope = _staged_buffer(state, func_name, block_name, index, "write")
    where = f"cache_write: block {block_name!r}"
    writers = scope.writers(buffer)
    if writers != [block]:
        raise ScheduleError(f"{where}: buffer {buffer.name!r} is also written by "
                            f"{[w.name_hint for w in writers if w is not block]}; cache_write needs a single writer")
    consumers = [state.block(func_name, n) for n in consumer_names]
    cache = dataclasses.replace(buffer, name=f"{buffer.name}_{scope_name}", scope=scope_name)
    related = [b for b in scope.consumers(block)
               if any(r is buffer for r in A.read_buffers(b)) and not any(b is c for c in consumers)]
    if related:
        loc, pos = _detect_location(scope_block, block, related)
    else:
        loc, pos = scope_block, len(T.as_list(scope_block.body))
    region = _relaxed_write_region(state, func_name, block, buffer, loc)

    new_name = T.unique_block_name(state, func_name, f"{buffer.name}_{scope_name}")
    stage = _copy_stage(new_name, src=cache, dst=buffer, region=region, outer=_outer_bounds(state, func_name, loc))
    replace: dict[object, S.Stmt | None] = {block: replace_buffers(block, {buffer: cache})}
    for consumer in consumers:
        replace[consumer] = _rewrite_reads(consumer, buffer, cache)
    _apply(state, func_name, scope_block, loc, pos, stage, replace, cache)
    return new_name


def _dim_dtype(dim: E.PrimExpr) -> str:
    return dim.dtype if dim.dtype.startswith("int") else "int32"


def _static_dim(buffer: E.Buffer, d: int) -> int:
    size = E.const_int(buffer.shape[d])
    if size is None:
        raise ScheduleError(f"buffer {buffer.name!r} has a symbolic shape; caching needs static shapes")
    return size


def _rewrite_reads(block: S.Block, old: E.Buffer, new: E.Buffer) -> S.Block:
    """`block` reading `new` wherever it read `old` (loads, read regions, match_buffers)."""
    return replace_buffers(block, {old: new})


def _apply(state: ScheduleState, func_name: str, scope_block: S.Block, loc: S.For | S.Block, pos: int, stage: S.Stmt,
           replace: dict[object, S.Stmt | None], cache: E.Buffer) -> None:
    node, fn = T.body_insert_edit(loc, pos, stage)
    new_body = T.rebuild(scope_block.body, replace=replace, post={node: fn})
    new_scope = T.with_block(scope_block, body=new_body, alloc_buffers=scope_block.alloc_buffers + (cache,))
    state.replace(func_name, scope_block, new_scope)


@dataclass
class _Detection:
    """The walk state of `_detect_location`."""

    visited_block: bool = False
    visited_related: bool = False
    loc: S.For | S.Block | None = None
    pos: int = -1


def _detect_location(scope_block: S.Block, block: S.Block, related: list[S.Block]) -> tuple[S.For | S.Block, int]:
    """(statement, position in its body sequence) where the copy stage goes: TVM's
    CacheLocDetector. Without related blocks, the end of the scope."""
    if not related:
        return scope_block, len(T.as_list(scope_block.body))
    related_ids = {id(b) for b in related}
    st = _Detection()

    def visit(n: S.Stmt) -> None:
        if isinstance(n, S.SeqStmt):
            previous = st.visited_block
            st.visited_block = False
            for i, child in enumerate(n.seq):
                if st.pos != -1:
                    break
                visit(child)
                if st.visited_block and st.visited_related and st.pos == -1:
                    st.pos = i
                    break
                if st.visited_related:
                    break
            # Whatever ended the loop, a block seen before this sequence stays seen (a nested
            # sequence, such as a decomposed reduction's loop body, must not forget the writer).
            st.visited_block = st.visited_block or previous
        elif isinstance(n, S.BlockRealize):
            b = n.block
            if b is block:
                st.visited_block = True
            elif id(b) in related_ids:
                st.visited_related = True
        elif isinstance(n, S.For):
            visit(n.body)
            if st.visited_block and st.visited_related and st.loc is None and st.pos != -1:
                st.loc = n
        elif isinstance(n, S.IfThenElse):
            visit(n.then_case)
            if n.else_case is not None:
                visit(n.else_case)
        elif isinstance(n, S.LetStmt):
            visit(n.body)

    visit(scope_block.body)
    if st.visited_block and st.visited_related and st.loc is None:
        st.loc = scope_block
        if st.pos == -1:
            st.pos = 1
    if st.loc is None or st.pos == -1:
        # The related blocks come before the block (no position separates them): append.
        return scope_block, len(T.as_list(scope_block.body))
    return st.loc, st.pos


class _Dim(NamedTuple):
    """One dimension of a cache stage: the loop covers `lo + [0, extent)`; `bound` is the
    inclusive index range the copy may touch (None: the loop provably stays inside it)."""

    lo: Affine
    extent: int
    bound: NumRange | None


def _relaxed_write_region(state: ScheduleState, func_name: str, block: S.Block, buffer: E.Buffer,
                          loc: S.Stmt) -> list[_Dim]:
    """What `block` writes of `buffer` over all iterations of the loops between it and `loc`,
    per dimension, in terms of the loops above `loc`.

    Relaxing the loops alone overshoots when a non-divisible split cut the block's nest short
    (`i_0 * 19 + i_1` over 2 x 19 iterations reaches 37 of a 24-long dimension; the block's
    predicate skips the overshoot). Like TVM, which relaxes under the predicate, the region is
    intersected with what the block's iter var domains (which the predicate enforces) and the
    buffer's shape allow: a constant region shrinks to the intersection (TVM's `[0, 24)`); a
    region that moves with the loops above `loc` keeps its constant extent and gets a bound
    that the copy block's predicate enforces (TVM emits a symbolic loop extent instead)."""
    realize = state.realize(func_name, block.name_hint)
    top = loc if isinstance(loc, S.For) else None
    inner = A.loops_above(state, func_name, realize, below=top)
    outer = _outer_bounds(state, func_name, loc)
    bounds = dict(outer)
    relax = {}
    for lp in inner:
        start, ext = E.const_int(lp.min), E.const_int(lp.extent)
        if start is not None and ext is not None:
            relax[lp.loop_var] = (Affine(None, start), Affine(None, start + ext - 1))
            bounds[lp.loop_var] = (start, start + ext - 1)
    ev = IntervalEvaluator(relax, bounds, pin_points=False)
    vmap = T.iter_var_map(block, realize.iter_values)
    domains = _iter_domains(block)
    written = [w for w in block.writes if w.buffer is buffer]
    out: list[_Dim] = []
    for d in range(len(buffer.shape)):
        size = _static_dim(buffer, d)
        ends: list[tuple[Affine, Affine]] = []
        known_ends = True
        allowed: list[NumRange] | None = []
        for w in written:
            rng = w.region[d]
            ext = E.const_int(rng.extent)
            got = ev.eval(substitute(rng.min, vmap)) if ext is not None else None
            if got is None or ext is None:
                known_ends = False
                break
            ends.append((got[0], got[1] + (ext - 1)))
            at = numeric_range(rng.min, domains)
            if at is None or allowed is None:
                allowed = None
            else:
                allowed.append((at[0], at[1] + ext - 1))
        valid = (0, size - 1)
        if allowed:
            valid = (max(0, min(a[0] for a in allowed)), min(size - 1, max(a[1] for a in allowed)))
        if valid[0] > valid[1]:
            raise ScheduleError(f"block {block.name_hint!r} writes no element of buffer {buffer.name!r} "
                                f"dimension {d} inside its bounds")
        lo: Affine | None = None
        hi: Affine | None = None
        if known_ends and ends:
            try:
                lo, hi = union_intervals(ends, outer)
            except ValueError:
                lo = hi = None
        out.append(_clamp(lo, hi, valid, outer))
    return out


def _outer_bounds(state: ScheduleState, func_name: str, loc: S.Stmt) -> dict[E.Var, NumRange]:
    """Ranges of the loops around the place the cache stage goes (`loc` included)."""
    if not isinstance(loc, S.For):
        return {}
    return loop_bounds(A.loops_above(state, func_name, loc) + [loc])


def _iter_domains(block: S.Block) -> dict[E.Var, NumRange]:
    """Inclusive ranges of the block's iter vars with static domains."""
    out: dict[E.Var, NumRange] = {}
    for iv in block.iter_vars:
        dom = A.domain(iv)
        lo, ext = E.const_int(dom.min), E.const_int(dom.extent)
        if lo is not None and ext is not None and ext > 0:
            out[iv.var] = (lo, lo + ext - 1)
    return out


def _clamp(lo: Affine | None, hi: Affine | None, valid: NumRange, outer: dict[E.Var, NumRange]) -> _Dim:
    """The cache stage dimension for the relaxed interval [lo, hi] (None: unknown) restricted
    to the index range `valid`."""
    full = _Dim(Affine(None, valid[0]), valid[1] - valid[0] + 1, None)
    if lo is None or hi is None or not (hi - lo).is_const():
        if lo is not None and hi is not None:
            nlo, nhi = lo.numeric(outer), hi.numeric(outer)
            if nlo is not None and nhi is not None:
                a, b = max(nlo[0], valid[0]), min(nhi[1], valid[1])
                if a <= b:
                    return _Dim(Affine(None, a), b - a + 1, None)
        return full
    if lo.is_const():
        a, b = max(lo.const, valid[0]), min(hi.const, valid[1])
        return _Dim(Affine(None, a), b - a + 1, None) if a <= b else full
    nlo, nhi = lo.numeric(outer), hi.numeric(outer)
    if nlo is None or nhi is None:
        return full
    if nlo[0] >= valid[0] and nhi[1] <= valid[1]:
        return _Dim(lo, (hi - lo).const + 1, None)
    if nlo[1] <= valid[0] and nhi[0] >= valid[1]:
        return full  # every position of the window covers all valid indices
    if (hi - lo).const + 1 >= full.extent:
        return full
    return _Dim(lo, (hi - lo).const + 1, valid)


def _copy_stage(name: str, src: E.Buffer, dst: E.Buffer, region: list[_Dim],
                outer: dict[E.Var, NumRange]) -> S.Stmt:
    """`for ax...: block name: dst[v...] = src[v...]` over `region` (TVM's cache stage): one
    loop per dimension over the region's extent, iter vars over the whole buffer, and a
    predicate where a dimension's window may leave its bound (`outer`: ranges of the loops
    above the stage)."""
    loop_vars = []
    iter_vars = []
    values = []
    checks: list[tuple[Affine, NumRange]] = []
    bounds = dict(outer)
    for i, dim_info in enumerate(region):
        dim = dst.shape[i]
        dtype = _dim_dtype(dim)
        lv = E.Var(f"ax{i}", dtype)
        loop_vars.append(lv)
        bounds[lv] = (0, dim_info.extent - 1)
        iter_vars.append(S.IterVar(E.Range(E.IntImm(dtype, 0), dim), E.Var(f"v{i}", dtype), S.IterType.DATA_PAR))
        value = dim_info.lo + Affine.of(lv)
        values.append(plus_var(dim_info.lo, lv))
        if dim_info.bound is not None:
            checks.append((value, dim_info.bound))
    vars_ = tuple(iv.var for iv in iter_vars)
    point = tuple(E.Range(v, E.IntImm(v.dtype, 1)) for v in vars_)
    block = S.Block(
        tuple(iter_vars),
        (S.BufferRegion(src, point),),
        (S.BufferRegion(dst, point),),
        name,
        S.BufferStore(dst, E.BufferLoad(src, vars_), vars_),
    )
    stmt: S.Stmt = S.BlockRealize(tuple(values), range_predicate(checks, bounds), block)
    for lv, dim_info in reversed(list(zip(loop_vars, region))):
        stmt = S.For(lv, E.IntImm(lv.dtype, 0), E.IntImm(lv.dtype, dim_info.extent), S.ForKind.SERIAL, stmt)
    return stmt
