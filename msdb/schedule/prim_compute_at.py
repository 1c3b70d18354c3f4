"""compute_at and reverse_compute_at: move a block under another block's loop.

TVM's algorithm, re-derived: take the block out of its loop nest; under the target loop,
find where it may go (after every producer, before every consumer among the loop's children);
compute the region of each buffer the *other side* needs per iteration of the target loop
(compute_at: what the consumers under the loop read; reverse_compute_at: what the producers
under the loop write), relaxed over the loops inside the target loop; turn that region into a
domain for each of the moved block's iter vars through the block's own (single-point) access
of that buffer; and generate one new loop `ax<k>` per iter var whose domain is wider than one
point (or always, with `preserve_unit_loops`). A predicate is added only where the domain may
leave the buffer (or iter var) bounds and that cannot be proved not to happen.
"""

from __future__ import annotations

from dataclasses import dataclass

from msdb.errors import ScheduleError
from msdb.ir import expr as E
from msdb.ir import stmt as S
from msdb.ir.functor import free_vars, substitute
from msdb.schedule import analysis as A
from msdb.schedule import tree_edit as T
from msdb.schedule._block_arith import (Affine, IntervalEvaluator, NumRange, as_affine, implied_by_domains,
                                        covered_points, loop_bounds, plus_var, range_predicate, reduction_order_ok,
                                        unbound_loop_under_reduction, union_intervals)
from msdb.schedule.state import ScheduleState
from msdb.schedule.thread_scope import relaxes_under_thread

__all__ = ["compute_at", "plan_compute_at", "PlannedMove"]

Interval = tuple[Affine, Affine]


def compute_at(state: ScheduleState, func_name: str, block_name: str, loop_var: E.Var,
               preserve_unit_loops: bool, index: int, reverse: bool, check_only: bool = False) -> None:
    """Move the block under the loop (see `Schedule.compute_at`; with `reverse`,
    `Schedule.reverse_compute_at`). With `check_only` (TVM's CanComputeAt), every check runs
    and raises as the move would, but the state is left as it was."""
    move = plan_compute_at(state, func_name, block_name, loop_var, preserve_unit_loops, index, reverse)
    if not check_only:
        move.apply(state)


@dataclass(frozen=True)
class PlannedMove:
    """A compute-at that passed every check (`plan_compute_at`): the block's new loops and
    bindings and where they go. `apply` makes it on the state it was planned on, or on a copy
    of it (the nodes are shared)."""

    func_name: str
    scope_block: S.Block
    realize: S.BlockRealize
    loop: S.For
    pos: int
    block: S.Block
    values: tuple[E.PrimExpr, ...]
    predicate: E.PrimExpr
    loop_vars: tuple[E.Var, ...]
    extents: tuple[int, ...]

    def apply(self, state: ScheduleState) -> None:
        stmt: S.Stmt = S.BlockRealize(self.values, self.predicate, self.block)
        for var, extent in reversed(list(zip(self.loop_vars, self.extents))):
            stmt = S.For(var, E.IntImm(var.dtype, 0), E.IntImm(var.dtype, extent), S.ForKind.SERIAL, stmt)
        node, fn = T.body_insert_edit(self.loop, self.pos, stmt)
        removed = T.removal_target(state, self.func_name, self.realize)
        new_body = T.rebuild(self.scope_block.body, replace={removed: None}, post={node: fn})
        state.replace(self.func_name, self.scope_block, T.with_block(self.scope_block, body=new_body))


def plan_compute_at(state: ScheduleState, func_name: str, block_name: str, loop_var: E.Var,
                    preserve_unit_loops: bool, index: int, reverse: bool) -> PlannedMove:
    """Every check of `compute_at` (raising as the move would) and the move they allow; the
    state is left as it was."""
    prim = "reverse_compute_at" if reverse else "compute_at"
    func = state.func(func_name)
    block = state.block(func_name, block_name)
    realize = state.realize(func_name, block_name)
    loop = state.loop(func_name, loop_var)
    where = f"{prim}: block {block_name!r} at loop {loop_var.name!r}"

    # ---- checks ----
    scope_block = state.scope_block(func_name, block)
    if state.scope_block(func_name, loop) is not scope_block:
        raise ScheduleError(f"{where}: the loop is not in the block's scope {scope_block.name_hint!r}; "
                            "a block can only move under loops of its own scope")
    if any(anc is loop for anc in state.ancestors(func_name, realize)):
        raise ScheduleError(f"{where}: the loop already encloses the block; pick a loop of another block's nest")
    scope = A.BlockScope(scope_block)
    not_complete = scope.complete_block_problem(block)
    not_reduction = scope.reduction_block_problem(block, regions=True)
    if not_complete is not None and not_reduction is not None:
        raise ScheduleError(f"{where}: the block must be a complete or a reduction block, but "
                            f"{not_complete} and {not_reduction}")
    is_root = A.is_root_scope(state, func_name, scope_block)
    if not reverse and A.is_output_block(func, scope_block, block, is_root):
        raise ScheduleError(f"{where}: the block writes an output buffer of the function; "
                            "compute_at only moves producers of intermediate buffers")

    producers = scope.producers(block)
    consumers = scope.consumers(block)
    subtrees = T.as_list(loop.body)
    last_producer, first_consumer = -1, len(subtrees)
    seen_producers: list[S.Block] = []
    seen_consumers: list[S.Block] = []
    required_realizes: list[S.BlockRealize] = []
    for i, sub in enumerate(subtrees):
        realizes = A.child_block_realizes(sub)
        here_p = [r for r in realizes if any(r.block is p for p in producers)]
        here_c = [r for r in realizes if any(r.block is c for c in consumers)]
        if here_p and here_c:
            raise ScheduleError(
                f"{where}: one statement under the loop holds both a producer "
                f"({here_p[0].block.name_hint!r}) and a consumer ({here_c[0].block.name_hint!r}) of the block, "
                "so there is no place to put it that keeps the dependencies")
        if here_p:
            last_producer = i
            seen_producers.extend(r.block for r in here_p)
        if here_c:
            first_consumer = min(first_consumer, i)
            seen_consumers.extend(r.block for r in here_c)
        required_realizes.extend(here_c if not reverse else here_p)
    if not reverse:
        missing = [c.name_hint for c in consumers if not any(c is s for s in seen_consumers)]
        if missing:
            raise ScheduleError(
                f"{where}: compute_at into a loop that would break a dependency: the block's consumer(s) "
                f"{missing} are not under that loop, so they would read the block's output before it is computed")
    else:
        missing = [p.name_hint for p in producers if not any(p is s for s in seen_producers)]
        if missing:
            raise ScheduleError(
                f"{where}: reverse_compute_at into a loop that would break a dependency: the block's producer(s) "
                f"{missing} are not under that loop, so the block would read data before it is produced")
    _check_outside_order(scope, loop, block, producers, consumers, reverse, where)
    _check_predicate_regenerated(state, func_name, realize, where)
    if last_producer >= first_consumer:
        raise ScheduleError(f"{where}: under the loop a consumer of the block comes before one of its producers")
    if index == -1:
        pos = first_consumer
    elif index == -2:
        pos = last_producer + 1
    elif last_producer + 1 <= index <= first_consumer:
        pos = index
    else:
        raise ScheduleError(f"{where}: index {index} is not a valid position; valid: -1, -2 or "
                            f"[{last_producer + 1}, {first_consumer}]")

    # ---- regions ----
    outer_loops = A.loops_above(state, func_name, loop) + [loop]
    outer = loop_bounds(outer_loops)
    provided = block.reads if reverse else block.writes
    provided_ids = {id(r.buffer) for r in provided}
    required: dict[int, list[list[Interval]]] = {}
    thread_loops = [] if reverse else _thread_loops_from(state, func_name, loop)
    for r in required_realizes:
        regions = r.block.writes if reverse else r.block.reads
        inner_loops = A.loops_above(state, func_name, r, below=loop)
        evaluators: dict[str, IntervalEvaluator] = {}
        vmap = T.iter_var_map(r.block, r.iter_values)
        for region in regions:
            if id(region.buffer) not in provided_ids:
                continue
            storage = region.buffer.scope
            if storage not in evaluators:
                shared = [lp for lp in thread_loops if lp.thread_binding is not None
                          and relaxes_under_thread(storage, lp.thread_binding.thread_tag)]
                evaluators[storage] = IntervalEvaluator(*_relax_env(inner_loops + shared, outer))
            required.setdefault(id(region.buffer), []).append(_relax_region(region, vmap, evaluators[storage]))

    doms, bounds_of = _iter_domains(block, provided, required, outer, reverse, where)

    # ---- new loop nest ----
    loop_vars: list[E.Var] = []
    extents: list[int] = []
    values: list[E.PrimExpr] = []
    new_bounds: dict[E.Var, NumRange] = dict(outer)
    checks: list[tuple[Affine, NumRange]] = []
    for iv in block.iter_vars:
        lo, hi, bound = _cover(iv, doms.get(iv.var), bounds_of.get(iv.var), outer, reverse, where)
        extent_aff = hi - lo + 1
        extent = extent_aff.const
        value = lo
        binding = lo.to_expr(iv.var.dtype)
        if preserve_unit_loops or extent != 1:
            var = E.Var(f"ax{len(loop_vars)}", iv.var.dtype)
            loop_vars.append(var)
            extents.append(extent)
            new_bounds[var] = (0, extent - 1)
            value = lo + Affine.of(var)
            binding = plus_var(lo, var)
        values.append(binding)
        if bound is not None:
            checks.append((value, bound))
    predicate = range_predicate(checks, new_bounds)
    if block.init is not None:
        _check_reduction_order(outer_loops, loop_vars, extents, block, values, predicate, where)
    if reverse:
        _check_producers_final(outer_loops, required_realizes, values, where)
        _check_all_points_computed(outer_loops, loop_vars, extents, block, values, predicate, where)
    return PlannedMove(func_name, scope_block, realize, loop, pos, block, tuple(values), predicate,
                       tuple(loop_vars), tuple(extents))


def _check_outside_order(scope: A.BlockScope, loop: S.For, block: S.Block, producers: list[S.Block],
                         consumers: list[S.Block], reverse: bool, where: str) -> None:
    """Blocks the moved block depends on but that stay outside the loop must still run before
    it (compute_at) / after it (reverse_compute_at)."""
    inside = {id(r.block) for r in A.child_block_realizes(loop)}
    order = [r.block for r in scope.realizes if id(r.block) not in (id(block),)]
    positions = [i for i, b in enumerate(order) if id(b) in inside]
    if not positions:
        return
    first, last = min(positions), max(positions)
    for i, b in enumerate(order):
        if id(b) in inside:
            continue
        if not reverse and any(b is p for p in producers) and i > last:
            raise ScheduleError(f"{where}: the block's producer {b.name_hint!r} runs after that loop, "
                                "so moving the block there would break a dependency")
        if reverse and any(b is c for c in consumers) and i < first:
            raise ScheduleError(f"{where}: the block's consumer {b.name_hint!r} runs before that loop, "
                                "so moving the block there would break a dependency")


def _check_producers_final(outer_loops: list[S.For], producers: list[S.BlockRealize], values: list[E.PrimExpr],
                           where: str) -> None:
    """A producer under the loop that reduces over the loop (or one around it) has its final
    values only in the last iteration of those loops. The moved consumer reads them correctly
    only if it recomputes every point in each of those iterations, i.e. if its new bindings do
    not depend on those loops (the last computation then sees the final values); otherwise a
    point is computed once, from a partial result (TVM does not check this)."""
    outer = {lp.loop_var for lp in outer_loops}
    partial: set[E.Var] = set()
    for r in producers:
        if r.block.init is None:
            continue
        for iv, value in zip(r.block.iter_vars, r.iter_values):
            if iv.iter_type == S.IterType.COMM_REDUCE:
                partial |= free_vars(value) & outer
    used = [v.name for v in partial if any(v in free_vars(value) for value in values)]
    if used:
        raise ScheduleError(f"{where}: a producer under the loop is still reducing over loop(s) {sorted(used)} there, "
                            "and the block would read its partial results")


def _nest(outer_loops: list[S.For], loop_vars: list[E.Var], extents: list[int]) -> list[tuple[E.Var, NumRange]] | None:
    """The loops around the block's new place, outermost first, with their value ranges; None
    when an outer loop's range is not constant (the enumerating checks then do not apply)."""
    nest: list[tuple[E.Var, NumRange]] = []
    for lp in outer_loops:
        lo, ext = E.const_int(lp.min), E.const_int(lp.extent)
        if lo is None or ext is None:
            return None
        nest.append((lp.loop_var, (lo, lo + ext - 1)))
    nest.extend((v, (0, e - 1)) for v, e in zip(loop_vars, extents))
    return nest


def _check_all_points_computed(outer_loops: list[S.For], loop_vars: list[E.Var], extents: list[int],
                               block: S.Block, values: list[E.PrimExpr], predicate: E.PrimExpr, where: str) -> None:
    """reverse_compute_at computes, per iteration, the points of the block that read what the
    producers wrote there; points that read none of it (a padding block's border, which only
    writes its pad value) would never be computed. TVM does not check this and leaves them
    unwritten. Checked by enumeration on small nests only."""
    nest = _nest(outer_loops, loop_vars, extents)
    if nest is None:
        return
    size = 1
    for iv in block.iter_vars:
        ext = E.const_int(A.domain(iv).extent)
        if ext is None:
            return
        size *= ext
    got = covered_points(nest, values, predicate)
    if got is not None and got < size:
        raise ScheduleError(f"{where}: only {got} of the block's {size} points read what the producers under the "
                            "loop write; the others (e.g. padding) would never be computed")


def _check_reduction_order(outer_loops: list[S.For], loop_vars: list[E.Var], extents: list[int], block: S.Block,
                           values: list[E.PrimExpr], predicate: E.PrimExpr, where: str) -> None:
    """A reduction block under a loop that repeats it (one its new bindings do not use) is
    only right when that loop is above all of its reduction loops: each repetition then starts
    over from the init. Below one, the repetitions add up (a reduction moved under a consumer
    loop nested inside the loops that carry its reduction). TVM does not check this."""
    nest = _nest(outer_loops, loop_vars, extents)
    if nest is None:
        return
    reduce = [iv.iter_type == S.IterType.COMM_REDUCE for iv in block.iter_vars]
    ok = reduction_order_ok(nest, values, reduce, predicate)
    bad = unbound_loop_under_reduction(nest, values, reduce) if ok is None else None
    if ok is False or bad is not None:
        raise ScheduleError(f"{where}: the block is a reduction and a loop around its new place repeats it inside "
                            "the loops of its reduction, so its results would be accumulated several times")


def _check_predicate_regenerated(state: ScheduleState, func_name: str, realize: S.BlockRealize, where: str) -> None:
    """The moved block gets a new predicate that only keeps its iter vars inside their domains;
    refuse when the old one said more (TVM drops it silently, and the block then runs on points
    it never ran on, e.g. an rfactor block of a non-divisible split reading out of bounds)."""
    if T.is_const_true(realize.predicate):
        return
    block = realize.block
    bindings = []
    for iv, value in zip(block.iter_vars, realize.iter_values):
        lo, ext = E.const_int(A.domain(iv).min), E.const_int(A.domain(iv).extent)
        if lo is not None and ext is not None:
            bindings.append((value, (lo, lo + ext - 1)))
    bounds = loop_bounds(A.loops_above(state, func_name, realize))
    if not implied_by_domains(realize.predicate, bindings, bounds):
        raise ScheduleError(f"{where}: the block's predicate does more than keep its iter vars inside their "
                            "domains, and moving the block would drop it")


def _thread_loops_from(state: ScheduleState, func_name: str, loop: S.For) -> list[S.For]:
    """The thread-bound loops from `loop` (inclusive) up to the function's root, across block
    boundaries: where TVM's compute_at also relaxes a consumer's region for buffers the
    threads of those loops share (`msdb.schedule.thread_scope`)."""
    chain = [loop] + [anc for anc in state.ancestors(func_name, loop) if isinstance(anc, S.For)]
    return [lp for lp in chain if lp.kind == S.ForKind.THREAD_BINDING]


def _relax_env(inner_loops: list[S.For], outer: dict[E.Var, NumRange]
               ) -> tuple[dict[E.Var, Interval], dict[E.Var, NumRange]]:
    relax: dict[E.Var, Interval] = {}
    bounds = dict(outer)
    for lp in inner_loops:
        lo, ext = E.const_int(lp.min), E.const_int(lp.extent)
        if lo is None or ext is None:
            continue  # leaves the variable unbounded: accesses using it widen to the buffer
        relax[lp.loop_var] = (Affine(None, lo), Affine(None, lo + ext - 1))
        bounds[lp.loop_var] = (lo, lo + ext - 1)
    return relax, bounds


def _relax_region(region: S.BufferRegion, vmap: dict[E.Var, E.PrimExpr], ev: IntervalEvaluator) -> list[Interval]:
    dims: list[Interval] = []
    for d, rng in enumerate(region.region):
        full = _full_dim(region.buffer, d)
        ext = E.const_int(substitute(rng.extent, vmap)) if not isinstance(rng.extent, E.IntImm) else rng.extent.value
        got = ev.eval(substitute(rng.min, vmap)) if ext is not None else None
        if got is None or ext is None or ext < 1:
            dims.append(full)
        else:
            dims.append((got[0], got[1] + (ext - 1)))
    return dims


def _full_dim(buffer: E.Buffer, d: int) -> Interval:
    size = E.const_int(buffer.shape[d])
    if size is None:
        raise ScheduleError(f"buffer {buffer.name!r} has a symbolic shape; compute_at needs static shapes")
    return Affine(None, 0), Affine(None, max(size - 1, 0))


def _iter_domains(block: S.Block, provided: tuple[S.BufferRegion, ...], required: dict[int, list[list[Interval]]],
                  outer: dict[E.Var, NumRange], reverse: bool, where: str
                  ) -> tuple[dict[E.Var, Interval], dict[E.Var, NumRange]]:
    """For each iter var of `block`: the interval it must cover (from the required regions
    through the block's own accesses) and the numeric bound the buffer shape allows."""
    block_vars = {iv.var for iv in block.iter_vars}
    doms: dict[E.Var, list[Interval]] = {}
    bounds: dict[E.Var, list[NumRange]] = {}
    for region in provided:
        accesses = required.get(id(region.buffer))
        if not accesses:
            continue
        ndim = len(region.region)
        try:
            need = [union_intervals((acc[d] for acc in accesses), outer) for d in range(ndim)]
        except ValueError:
            need = [_full_dim(region.buffer, d) for d in range(ndim)]
        split = _div_mod_dims(region, block_vars)
        mod_dims = {dm for _, _, dm in split.values()}
        for d, rng in enumerate(region.region):
            if d in mod_dims:
                continue
            if d in split:
                var, factor, dm = split[d]
                inv = _invert_div_mod(need[d], need[dm], factor, outer)
                if inv is None:
                    if reverse:
                        raise ScheduleError(f"{where}: buffer {region.buffer.name!r} is read at a part of the "
                                            f"lanes of several {var.name!r} blocks (dimension {dm}); its domain "
                                            "cannot be derived")
                    continue
                doms.setdefault(var, []).append(inv)
                blocks = E.const_int(region.buffer.shape[d])
                if blocks is not None:
                    bounds.setdefault(var, []).append((0, blocks * factor - 1))
                continue
            form = as_affine(rng.min)
            single = isinstance(rng.extent, E.IntImm) and rng.extent.value == 1
            if form is not None and form.is_const():
                continue
            if form is None or not single or len(form.terms) != 1 or not set(form.terms) <= block_vars:
                if reverse:
                    raise ScheduleError(
                        f"{where}: the block accesses buffer {region.buffer.name!r} dimension {d} with an index "
                        "that is not `c * iter_var + offset`; its domain cannot be derived")
                continue
            (var, coef), = form.terms.items()
            size = E.const_int(region.buffer.shape[d])
            lo, hi = need[d]
            inv = _invert(lo, hi, coef, form.const, outer)
            if inv is None:
                if reverse:
                    raise ScheduleError(f"{where}: cannot derive the domain of iter var {var.name!r}")
                continue
            doms.setdefault(var, []).append(inv)
            if size is not None:
                b = _invert_num(0, size - 1, coef, form.const)
                bounds.setdefault(var, []).append(b)
    out_doms: dict[E.Var, Interval] = {}
    for var, items in doms.items():
        try:
            out_doms[var] = union_intervals(items, outer)
        except ValueError:
            continue
    out_bounds = {var: (min(b[0] for b in items), max(b[1] for b in items)) for var, items in bounds.items()}
    return out_doms, out_bounds


def _div_mod_dims(region: S.BufferRegion, block_vars: set[E.Var]) -> dict[int, tuple[E.Var, int, int]]:
    """Dimensions of a single-point access indexed `floordiv(v, c)` with another indexed
    `floormod(v, c)` (a blocked layout read back in the plain one: a packed conv's output
    channels `[v // 16, ..., v % 16]`): {div dimension: (v, c, mod dimension)}."""
    def split_of(index: E.PrimExpr, kind: type[E.FloorDiv] | type[E.FloorMod]) -> tuple[E.Var, int] | None:
        if not isinstance(index, kind):
            return None
        factor = E.const_int(index.b)
        if factor is None or factor < 1 or not isinstance(index.a, E.Var) or index.a not in block_vars:
            return None
        return index.a, factor

    if not all(isinstance(r.extent, E.IntImm) and r.extent.value == 1 for r in region.region):
        return {}
    mods = {key: d for d, r in enumerate(region.region) if (key := split_of(r.min, E.FloorMod)) is not None}
    divs = {d: key for d, r in enumerate(region.region) if (key := split_of(r.min, E.FloorDiv)) is not None}
    return {d: (key[0], key[1], mods[key]) for d, key in divs.items() if key in mods}


def _invert_div_mod(div_need: Interval, mod_need: Interval, factor: int, outer: dict[E.Var, NumRange]
                    ) -> Interval | None:
    """Values of v with (v // factor, v % factor) inside the needed region, exactly (TVM's
    answer): whole blocks when the region covers every `v % factor`, a run of lanes inside
    one block when it covers one block; None otherwise (lanes of several blocks)."""
    lo, hi = mod_need[0].numeric(outer), mod_need[1].numeric(outer)
    if lo is None or hi is None:
        return None
    if lo[1] <= 0 and hi[0] >= factor - 1:
        return div_need[0].scale(factor), div_need[1].scale(factor) + (factor - 1)
    one_block = div_need[1] - div_need[0]
    if one_block.is_const() and one_block.const == 0 and lo[0] >= 0 and hi[1] <= factor - 1:
        base = div_need[0].scale(factor)
        return base + mod_need[0], base + mod_need[1]
    return None


def _invert(lo: Affine, hi: Affine, coef: int, offset: int, outer: dict[E.Var, NumRange]) -> Interval | None:
    """Values of v with coef * v + offset inside [lo, hi]."""
    a, b = lo - offset, hi - offset
    if coef < 0:
        a, b, coef = b.scale(-1), a.scale(-1), -coef
    if coef == 1:
        return a, b
    # ceil(a / coef), floor(b / coef)
    if a.divisible_by(coef):
        new_a = a.exact_div(coef)
    else:
        na = a.numeric(outer)
        if na is None:
            return None
        new_a = Affine(None, -((-na[0]) // coef))
    if b.divisible_by(coef):
        new_b = b.exact_div(coef)
    else:
        nb = b.numeric(outer)
        if nb is None:
            return None
        new_b = Affine(None, nb[1] // coef)
    return new_a, new_b


def _invert_num(lo: int, hi: int, coef: int, offset: int) -> NumRange:
    a, b = lo - offset, hi - offset
    if coef < 0:
        a, b, coef = -b, -a, -coef
    return -((-a) // coef), b // coef


def _cover(iv: S.IterVar, dom: Interval | None, bound: NumRange | None, outer: dict[E.Var, NumRange],
           reverse: bool, where: str) -> tuple[Affine, Affine, NumRange | None]:
    """(lo, hi) the new loops must cover for one iter var, and the bound a predicate must
    enforce (None when provably unnecessary)."""
    dmin, dext = E.const_int(A.domain(iv).min), E.const_int(A.domain(iv).extent)
    if dmin is None or dext is None:
        raise ScheduleError(f"{where}: iter var {iv.var.name!r} has a symbolic domain; static domains are required")
    full = (dmin, dmin + dext - 1)
    if dom is None:
        return Affine(None, full[0]), Affine(None, full[1]), None
    lo, hi = dom
    bnd = full if bound is None else (max(bound[0], full[0]), min(bound[1], full[1]))
    nlo, nhi = lo.numeric(outer), hi.numeric(outer)
    if nlo is None or nhi is None:
        raise ScheduleError(f"{where}: the region of iter var {iv.var.name!r} is unbounded")
    if nlo[0] >= bnd[0] and nhi[1] <= bnd[1]:
        result_bound = None
    elif nlo[1] <= bnd[0] and nhi[0] >= bnd[1]:
        lo, hi, result_bound = Affine(None, bnd[0]), Affine(None, bnd[1]), None
    else:
        result_bound = bnd
    if not (hi - lo).is_const():
        if reverse:
            raise ScheduleError(f"{where}: the region of iter var {iv.var.name!r} does not have a constant "
                                "extent per iteration of the loop")
        lo = Affine(None, max(nlo[0], bnd[0]))
        hi = Affine(None, min(nhi[1], bnd[1]))
        result_bound = None
    if (hi - lo).const < 0:
        raise ScheduleError(f"{where}: the block would have an empty domain for iter var {iv.var.name!r}")
    return lo, hi, result_bound
