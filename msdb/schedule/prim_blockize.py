"""blockize: wrap the loops under a loop, and the one block they hold, into a new outer block, as a
function over the schedule state (TVM's Blockize); tensorize (`msdb.schedule.prim_tensorize`)
starts from such a block.

Bindings are divided into an outer and an inner part as TVM's subspace division does, for the
cases TVM's schedule rules and tensor intrinsics produce; others are refused. See
docs/architecture.md, "Schedules and traces".
"""

from __future__ import annotations

from msdb.errors import ScheduleError
from msdb.ir import expr as E
from msdb.ir import stmt as S
from msdb.ir.arith import simplify
from msdb.ir.arith.affine import Atom, affine_form, as_affine, term_expr
from msdb.ir.functor import IRMutator, free_vars, substitute
from msdb.schedule import analysis as A
from msdb.schedule.state import ScheduleState

__all__ = ["blockize"]


class _Division:
    """One binding split as `outer * inner_extent + inner`."""

    def __init__(self, outer: E.PrimExpr, outer_extent: int, inner: E.PrimExpr, inner_extent: int) -> None:
        self.outer = outer
        self.outer_extent = outer_extent
        self.inner = inner
        self.inner_extent = inner_extent


def _const(value: int, dtype: str) -> E.IntImm:
    return E.IntImm(dtype, value)


def _divide(value: E.PrimExpr, extent: int, inner_loops: dict[E.Var, S.For], where: str) -> _Division:
    dtype = value.dtype
    used = free_vars(value)
    uses_inner = any(v in inner_loops for v in used)
    uses_outer = any(v not in inner_loops for v in used)
    if not uses_inner:
        return _Division(value, extent, _const(0, dtype), 1)
    if not uses_outer:
        return _Division(_const(0, dtype), 1, value, extent)
    # non-affine parts of the outer loops (`fused // 4 * 256` after a fuse) stay whole terms
    form = affine_form(value, assume_no_overflow=True)
    if any(isinstance(t, Atom) and any(v in inner_loops for v in free_vars(t.expr)) for t in form.terms):
        raise ScheduleError(f"{where}: the binding {value} is not affine in the loops; it cannot be divided into "
                            "an outer and an inner part")
    inner_terms = sorted(((v, c) for v, c in form.terms.items() if isinstance(v, E.Var) and v in inner_loops),
                         key=lambda vc: vc[1])
    inner_extent = 1
    for var, coef in inner_terms:
        loop_extent = E.const_int(inner_loops[var].extent)
        if loop_extent is None:
            raise ScheduleError(f"{where}: loop {var.name!r} has a symbolic extent")
        if loop_extent == 1:
            continue
        if coef != inner_extent:
            raise ScheduleError(f"{where}: the inner loops of the binding {value} do not form one contiguous "
                                "iterator, so it cannot be divided at this loop")
        inner_extent *= loop_extent
    outer_terms = {v: c for v, c in form.terms.items() if isinstance(v, Atom) or v not in inner_loops}
    if any(c % inner_extent for c in outer_terms.values()) or form.const % inner_extent or extent % inner_extent:
        raise ScheduleError(f"{where}: the binding {value} is not divisible by the extent {inner_extent} of its "
                            "inner loops")
    inner: E.PrimExpr | None = None
    for var, coef in sorted(inner_terms, key=lambda vc: -vc[1]):
        term: E.PrimExpr = var if coef == 1 else E.Mul(var, _const(coef, dtype), dtype)
        inner = term if inner is None else E.Add(inner, term, dtype)
    outer: E.PrimExpr = _const(form.const // inner_extent, dtype)
    for outer_term, coef in outer_terms.items():
        c = coef // inner_extent
        part = term_expr(outer_term)
        term = part if c == 1 else E.Mul(part, _const(c, dtype), dtype)
        outer = E.Add(outer, term, dtype)
    assert inner is not None
    return _Division(simplify(outer, order="binding"), extent // inner_extent, inner, inner_extent)


class _Rewriter(IRMutator):
    """Substitutes iter vars and re-simplifies every index it changed (TVM's blockize
    Substitute), knowing the inner iter vars' domains."""

    def __init__(self, vmap: dict[E.Var, E.PrimExpr], ranges: dict[E.Var, E.Range]) -> None:
        super().__init__()
        self.vmap = vmap
        self.ranges = ranges

    def visit_Var(self, node: E.Var) -> E.PrimExpr:
        return self.vmap.get(node, node)

    def _exprs(self, items: tuple[E.PrimExpr, ...]) -> tuple[E.PrimExpr, ...]:
        new = tuple(self._simplified(x) for x in items)
        return items if all(a is b for a, b in zip(new, items)) else new

    def _simplified(self, expr: E.PrimExpr) -> E.PrimExpr:
        new = self.visit(expr)
        return new if new is expr else simplify(new, self.ranges)

    def visit_Range(self, node: E.Range) -> E.Range:
        lo, ext = self._simplified(node.min), self._simplified(node.extent)
        return node if lo is node.min and ext is node.extent else E.Range(lo, ext)


def _relaxed(regions: tuple[S.BufferRegion, ...], ranges: dict[E.Var, E.Range]) -> tuple[S.BufferRegion, ...]:
    """The regions with the inner iter vars relaxed over their domains (TVM's EvalSetRegions)."""
    out = []
    for region in regions:
        dims = []
        for d, rng in enumerate(region.region):
            form = as_affine(rng.min)
            ext = E.const_int(rng.extent)
            if form is None or ext is None or any(v in ranges and c < 0 for v, c in form.terms.items()):
                if not any(v in ranges for v in free_vars(rng.min)):
                    dims.append(rng)
                    continue
                dims.append(E.Range(_const(0, rng.min.dtype), region.buffer.shape[d]))
                continue
            span = ext
            lo_form = form
            for var, coef in form.terms.items():
                if var in ranges:
                    var_ext = E.const_int(ranges[var].extent)
                    assert var_ext is not None
                    span += coef * (var_ext - 1)
                    lo_form = lo_form - type(form)({var: coef})
            if lo_form is form:
                dims.append(rng)
            else:
                dims.append(E.Range(simplify(lo_form.to_expr(rng.min.dtype)), _const(span, rng.extent.dtype)))
        out.append(S.BufferRegion(region.buffer, tuple(dims)))
    return tuple(out)


def blockize(state: ScheduleState, func_name: str, loop_var: E.Var, preserve_unit_iters: bool) -> str:
    """Blockize the subtree of the loop (see `Schedule.blockize`); returns the new block's name."""
    loop = state.loop(func_name, loop_var)
    where = f"blockize: loop {loop_var.name!r}"
    realizes = A.child_block_realizes(loop.body)
    if len(realizes) != 1:
        raise ScheduleError(f"{where} must hold exactly one block, it holds {len(realizes)} "
                            f"({[r.block.name_hint for r in realizes]})")
    realize = realizes[0]
    block = realize.block
    where = f"blockize: block {block.name_hint!r} at loop {loop_var.name!r}"
    nest = [loop] + A.loops_above(state, func_name, realize, below=loop)
    inner_loops = {lp.loop_var: lp for lp in nest}
    if not isinstance(realize.predicate, E.IntImm) or not realize.predicate.value:
        raise ScheduleError(f"{where}: the block has a predicate; msdb blockizes only unpredicated blocks")

    unit_loops = {lp.loop_var: lp.min for lp in [*A.loops_above(state, func_name, realize)]
                  if E.const_int(lp.extent) == 1}
    outer_ivs: list[S.IterVar] = []
    outer_values: list[E.PrimExpr] = []
    inner_ivs: list[S.IterVar] = []
    inner_values: list[E.PrimExpr] = []
    vmap: dict[E.Var, E.PrimExpr] = {}
    ranges: dict[E.Var, E.Range] = {}
    for iv, value in zip(block.iter_vars, realize.iter_values):
        extent = E.const_int(A.domain(iv).extent)
        if extent is None or E.const_int(A.domain(iv).min) != 0:
            raise ScheduleError(f"{where}: iter var {iv.var.name!r} needs a constant domain starting at 0")
        if not preserve_unit_iters:  # TVM's simplify_trivial_iterators: a one-point loop is its start
            value = simplify(substitute(value, unit_loops)) if unit_loops else value
        part = _divide(value, extent, inner_loops, where)
        dtype = iv.var.dtype
        outer_var = E.Var(iv.var.name + "_o", dtype)
        outer_ivs.append(S.IterVar(E.Range(_const(0, dtype), _const(part.outer_extent, dtype)), outer_var,
                                   iv.iter_type))
        outer_values.append(part.outer)
        if part.inner_extent == 1:
            vmap[iv.var] = _const(0, dtype) if part.outer_extent == 1 and not preserve_unit_iters else outer_var
            continue
        inner_var = E.Var(iv.var.name + "_i", dtype)
        dom = E.Range(_const(0, dtype), _const(part.inner_extent, dtype))
        inner_ivs.append(S.IterVar(dom, inner_var, iv.iter_type))
        inner_values.append(part.inner)
        ranges[inner_var] = dom
        vmap[iv.var] = inner_var if part.outer_extent == 1 else \
            E.Add(E.Mul(outer_var, _const(part.inner_extent, dtype), dtype), inner_var, dtype)

    subst = _Rewriter(vmap, ranges).visit(block)
    assert isinstance(subst, S.Block)
    outer_reduction = subst.init is not None and any(iv.iter_type == S.IterType.COMM_REDUCE for iv in outer_ivs)
    inner_block = S.Block(tuple(inner_ivs), (subst.writes + subst.reads) if outer_reduction else subst.reads,
                          subst.writes, subst.name_hint, subst.body, None, subst.alloc_buffers, subst.match_buffers,
                          subst.annotations)
    true = E.IntImm("bool", 1)
    inner_realize = S.BlockRealize(tuple(inner_values), true, inner_block)
    body: S.Stmt = inner_realize
    for lp in reversed(nest):
        body = S.For(lp.loop_var, lp.min, lp.extent, lp.kind, body, lp.thread_binding, lp.annotations)
    init = None if subst.init is None else _outer_init(subst.init, inner_realize, nest, subst.name_hint + "_init")
    outer_name = subst.name_hint + "_o"
    outer_block = S.Block(tuple(outer_ivs), _relaxed(subst.reads, ranges), _relaxed(subst.writes, ranges), outer_name,
                          body, init)
    state.replace(func_name, loop, S.BlockRealize(tuple(outer_values), true, outer_block))
    return outer_name


def _outer_init(init: S.Stmt, inner: S.BlockRealize, nest: list[S.For], name: str) -> S.Stmt:
    """The outer block's init: the inner block's init as a block `<name>_init` over the inner
    spatial iter vars it uses, under copies of the inner loops those bind (TVM's
    GenerateOuterInit)."""
    init_vars = free_vars(init)
    ivs: list[S.IterVar] = []
    values: list[E.PrimExpr] = []
    vmap: dict[E.Var, E.PrimExpr] = {}
    for iv, value in zip(inner.block.iter_vars, inner.iter_values):
        if iv.iter_type == S.IterType.DATA_PAR and iv.var in init_vars:
            new = E.Var(iv.var.name + "_init", iv.var.dtype)
            vmap[iv.var] = new
            ivs.append(S.IterVar(iv.dom, new, iv.iter_type, iv.thread_tag))
            values.append(value)
    stmt: S.Stmt = S.BlockRealize(tuple(values), inner.predicate,
                                  S.Block(tuple(ivs), (), inner.block.writes, name, init))
    for lp in reversed(nest):
        if any(A.uses_var(v, lp.loop_var) for v in values):
            new_var = E.Var(lp.loop_var.name, lp.loop_var.dtype)
            vmap[lp.loop_var] = new_var
            stmt = S.For(new_var, lp.min, lp.extent, lp.kind, stmt, lp.thread_binding, lp.annotations)
    result = substitute(stmt, vmap)
    assert isinstance(result, S.Stmt)
    return result
