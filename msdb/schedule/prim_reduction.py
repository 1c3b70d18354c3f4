"""decompose_reduction and rfactor: the two rewrites of reduction blocks.

decompose_reduction separates a reduction's `init` into its own block so the update loop nest
carries no "first iteration" condition (what TVM's RewriteReductionBlock postprocessor does
before code generation). rfactor turns one reduction loop into a spatial dimension of a new
partial-result buffer, so that loop can be parallelized or vectorized; a second block then
reduces the partial results.
"""

from __future__ import annotations

from typing import Callable

from msdb.errors import ScheduleError
from msdb.ir import expr as E
from msdb.ir import stmt as S
from msdb.ir.arith import simplify
from msdb.ir.arith.keys import expr_equal
from msdb.ir.arith.limits import value_limit
from msdb.ir.functor import free_vars, substitute
from msdb.schedule import analysis as A
from msdb.schedule import tree_edit as T
from msdb.schedule._block_arith import as_affine, loop_bounds, range_predicate, repeats_points
from msdb.schedule.state import ScheduleState

__all__ = ["decompose_reduction", "rfactor"]


def _split_and(pred: E.PrimExpr) -> list[E.PrimExpr]:
    if isinstance(pred, E.And):
        return _split_and(pred.a) + _split_and(pred.b)
    return [pred]


def _join_and(conds: list[E.PrimExpr]) -> E.PrimExpr:
    if not conds:
        return T.const_true()
    out = conds[0]
    for c in conds[1:]:
        out = E.And(out, c)
    return out


def _init_predicate(realize: S.BlockRealize, iter_vars: list[S.IterVar], values: list[E.PrimExpr],
                    block_loops: list[S.For], loops: list[S.For], used: set[E.Var]) -> E.PrimExpr:
    """The init block's predicate: the conjuncts of the block's predicate that only use loops the
    init nest keeps (TVM's rule). A discarded loop of extent 1 is replaced by its value first:
    a split with `preserve_unit_iters=False` leaves `j_0 * 4 + j_1 < 5` in the predicate while the
    binding no longer mentions `j_0`, and dropping that conjunct would let the init run out of
    bounds (TVM drops it). When a conjunct that also bounds kept loops still has to go, the init's
    iter vars on those loops get explicit domain bounds instead, so the init never leaves its
    buffer."""
    discarded = {lp.loop_var for lp in loops if lp.loop_var not in used}
    unit = {lp.loop_var: lp.min for lp in loops if lp.loop_var in discarded and E.const_int(lp.extent) == 1}
    kept: list[E.PrimExpr] = []
    dropped: set[E.Var] = set()
    for c in _split_and(realize.predicate):
        if T.is_const_true(c):
            continue
        if free_vars(c) & set(unit):
            c = simplify(substitute(c, unit))
            if T.is_const_true(c):
                continue
        if free_vars(c) & discarded:
            dropped |= free_vars(c) - discarded
        else:
            kept.append(c)
    if dropped:
        bounds = loop_bounds([lp for lp in block_loops if lp.loop_var not in discarded])
        checks = []
        for iv, value in zip(iter_vars, values):
            dom = A.domain(iv)
            lo, ext = E.const_int(dom.min), E.const_int(dom.extent)
            form = as_affine(value)
            if lo is not None and ext is not None and form is not None and free_vars(value) & dropped:
                checks.append((form, (lo, lo + ext - 1)))
        extra = range_predicate(checks, bounds)
        if not T.is_const_true(extra):
            kept.extend(_split_and(extra))
    return _join_and(kept)


def _loop_range(loop: S.For) -> tuple[int, int] | None:
    lo, ext = E.const_int(loop.min), E.const_int(loop.extent)
    return (lo, lo + ext - 1) if lo is not None and ext is not None and ext > 0 else None


def _copy_loop(loop: S.For, var: E.Var, body: S.Stmt) -> S.For:
    return S.For(var, loop.min, loop.extent, loop.kind, body, loop.thread_binding, loop.annotations)


def decompose_reduction(state: ScheduleState, func_name: str, block_name: str, loop_var: E.Var) -> tuple[str, str]:
    """Split the reduction block at the loop into an init and an update block (see
    `Schedule.decompose_reduction`); returns (init block name, update block name)."""
    block = state.block(func_name, block_name)
    realize = state.realize(func_name, block_name)
    loop = state.loop(func_name, loop_var)
    where = f"decompose_reduction: block {block_name!r} at loop {loop_var.name!r}"
    block_loops = A.loops_above(state, func_name, realize)
    if not any(lp is loop for lp in block_loops):
        raise ScheduleError(f"{where}: the loop is not above the block (it must be one of the block's "
                            f"loops {[lp.loop_var.name for lp in block_loops]})")
    problem = A.scope_of(state, func_name, block).reduction_block_problem(block)
    if problem is not None:
        raise ScheduleError(f"{where}: the block is not a reduction block: {problem}")
    position = next(i for i, lp in enumerate(block_loops) if lp is loop)
    loops = block_loops[position:]
    reduce_uses: set[E.Var] = set()
    for iv, value in zip(block.iter_vars, realize.iter_values):
        if iv.iter_type == S.IterType.COMM_REDUCE:
            reduce_uses |= free_vars(value)
    higher = [lp.loop_var.name for lp in block_loops[:position] if lp.loop_var in reduce_uses]
    if higher:
        raise ScheduleError(f"{where}: the loop must be above every loop the reduction iter vars use, but "
                            f"{higher} enclose it; the init would run once per iteration of them")
    # A loop no iter var uses re-runs the whole reduction, init included, on each iteration; with
    # the init hoisted above it the updates would accumulate once per iteration. TVM does not
    # check this and silently changes the result; msdb refuses.
    bound_vars: set[E.Var] = set().union(*(free_vars(v) for v in realize.iter_values)) if realize.iter_values else set()
    unbound = [lp.loop_var.name for lp in loops if lp.loop_var not in bound_vars and E.const_int(lp.extent) != 1]
    if unbound:
        raise ScheduleError(f"{where}: loop(s) {unbound} between the loop and the block are used by no iter var, so "
                            "each of their iterations recomputes the reduction from its init; decomposing there "
                            "would accumulate it several times")
    nest = [(lp.loop_var, b) for lp in block_loops if (b := _loop_range(lp)) is not None]
    if len(nest) == len(block_loops) and repeats_points(nest, position, list(realize.iter_values), realize.predicate):
        raise ScheduleError(f"{where}: the loops from there down run some iterations of the block more than once "
                            "(a loop its bindings use only partly), each recomputing the reduction from its init; "
                            "decomposing there would accumulate it several times")

    # Init block: the spatial iter vars only, same bindings.
    var_map: dict[E.Var, E.PrimExpr] = {}
    iter_vars: list[S.IterVar] = []
    values: list[E.PrimExpr] = []
    for iv, value in zip(block.iter_vars, realize.iter_values):
        if iv.iter_type != S.IterType.DATA_PAR:
            continue
        new_var = E.Var(iv.var.name, iv.var.dtype)
        iter_vars.append(S.IterVar(iv.dom, new_var, iv.iter_type, iv.thread_tag))
        values.append(value)
        var_map[iv.var] = new_var
    init_body = substitute(block.init, var_map)
    writes = tuple(S.BufferRegion(w.buffer, tuple(substitute(r, var_map) for r in w.region)) for w in block.writes)
    init_name = T.unique_block_name(state, func_name, f"{block_name}_init")
    init_block = S.Block(tuple(iter_vars), (), writes, init_name, init_body, annotations=block.annotations)

    used = set().union(*(free_vars(v) for v in values)) if values else set()
    chosen = [lp for lp in loops if lp.loop_var in used]
    pred = _init_predicate(realize, iter_vars, values, block_loops, loops, used)
    stmt: S.Stmt = S.BlockRealize(tuple(values), pred, init_block)
    loop_map: dict[E.Var, E.PrimExpr] = {}
    for lp in reversed(chosen):
        new_var = E.Var(f"{lp.loop_var.name}_init", lp.loop_var.dtype)
        loop_map[lp.loop_var] = new_var
        stmt = _copy_loop(lp, new_var, stmt)
    stmt = substitute(stmt, loop_map)

    # Update block: no init, the written regions read back first.
    read_ids = {id(r.buffer) for r in block.reads}
    reads = tuple(w for w in block.writes if id(w.buffer) not in read_ids) + tuple(block.reads)
    update_name = T.unique_block_name(state, func_name, f"{block_name}_update")
    update = T.with_block(block, name_hint=update_name, init=None, reads=reads)

    scope_block = state.scope_block(func_name, block)
    new_body = T.rebuild(scope_block.body, replace={block: update}, post={loop: T.insert_before(stmt)})
    state.replace(func_name, scope_block, T.with_block(scope_block, body=new_body))
    return init_name, update_name


_COMBINERS = (E.Add, E.Mul, E.Max, E.Min)


def _is_identity(kind: type, value: E.PrimExpr) -> bool:
    """Whether `value` is the identity of the combiner (what makes a partial result exact)."""
    if isinstance(value, E.Call) and value.op in ("min_value", "max_value"):
        return (kind is E.Max and value.op == "min_value") or (kind is E.Min and value.op == "max_value")
    v = E.const_value(value)
    if v is None:
        return False
    if kind is E.Add:
        return v == 0
    if kind is E.Mul:
        return v == 1
    if kind is E.Max:
        return (v == float("-inf") or (isinstance(value, E.FloatImm) and v <= -3.4e38)
                or _is_int_extreme(value, low=True))
    return v == float("inf") or (isinstance(value, E.FloatImm) and v >= 3.4e38) or _is_int_extreme(value, low=False)


def _is_int_extreme(value: E.PrimExpr, low: bool) -> bool:
    """Whether `value` is its integer dtype's lowest (`low`) or largest value."""
    if not isinstance(value, E.IntImm) or value.dtype == "bool":
        return False
    return value.value == value_limit(value.dtype, upper=not low)


def _same_indices(a: tuple[E.PrimExpr, ...], b: tuple[E.PrimExpr, ...]) -> bool:
    return len(a) == len(b) and all(expr_equal(x, y) for x, y in zip(a, b))


def _reducer(block: S.Block, where: str) -> tuple[type, E.PrimExpr, E.PrimExpr, bool]:
    """(combiner class, identity, rhs, lhs_first) of `buf[idx] = buf[idx] op rhs`."""
    body, init = block.body, block.init
    if not isinstance(body, S.BufferStore) or not isinstance(init, S.BufferStore) or init.buffer is not body.buffer:
        raise ScheduleError(f"{where}: the block must be `buf[...] = buf[...] op value` with an init store of buf")
    value = body.value
    if not isinstance(value, _COMBINERS):
        raise ScheduleError(f"{where}: the reduction combiner is not one of +, *, max, min")
    for lhs, rhs, lhs_first in ((value.a, value.b, True), (value.b, value.a, False)):
        if isinstance(lhs, E.BufferLoad) and lhs.buffer is body.buffer and _same_indices(lhs.indices, body.indices):
            if not _same_indices(init.indices, body.indices):
                raise ScheduleError(f"{where}: the init stores at other indices than the update")
            if not _is_identity(type(value), init.value):
                raise ScheduleError(f"{where}: the init value is not the identity of the reduction combiner")
            if any(isinstance(n, E.BufferLoad) and n.buffer is body.buffer for n in _nodes(rhs)):
                raise ScheduleError(f"{where}: the reduced value reads the output buffer")
            return type(value), init.value, rhs, lhs_first
    raise ScheduleError(f"{where}: the update must read its own output at the stored indices")


def _nodes(expr: E.PrimExpr) -> list[object]:
    from msdb.ir.functor import post_order_visit

    out: list[object] = []
    post_order_visit(expr, out.append)
    return out


def _combine(kind: type, acc: E.PrimExpr, value: E.PrimExpr, lhs_first: bool) -> E.PrimExpr:
    return kind(acc, value) if lhs_first else kind(value, acc)


def rfactor(state: ScheduleState, func_name: str, loop_var: E.Var, factor_axis: int) -> str:
    """Returns the name of the rfactor block.

    TVM's layout: the rfactor block goes into a copy of the block's whole loop nest (fresh loop
    vars, same names), inserted right before the outermost loop of that nest; the original nest
    keeps its loops (and so its LoopRVs) minus the ones only reduction iter vars use other than
    `loop`, and holds the write-back block where the reduction block was. So a reduction that
    compute_at moved under a consumer's loop keeps its write-back there, before the consumer.
    """
    loop = state.loop(func_name, loop_var)
    where = f"rfactor: loop {loop_var.name!r}"
    realizes = A.child_block_realizes(loop.body)
    if len(realizes) != 1:
        raise ScheduleError(f"{where}: the loop must enclose exactly one block, it encloses "
                            f"{[r.block.name_hint for r in realizes]}")
    realize = realizes[0]
    block = realize.block
    name = block.name_hint
    where = f"rfactor: loop {loop_var.name!r} of block {name!r}"
    if state.scope_block(func_name, block) is not state.scope_block(func_name, loop):
        raise ScheduleError(f"{where}: the block is in an inner scope of the loop")
    if loop.kind != S.ForKind.SERIAL:
        raise ScheduleError(f"{where}: the loop must be serial, it is {loop.kind.name.lower()}")
    scope_block = state.scope_block(func_name, block)
    scope = A.BlockScope(scope_block)
    problem = scope.reduction_block_problem(block, regions=True)
    if problem is not None:
        raise ScheduleError(f"{where}: the block must be a reduction block, but {problem}")
    if len(block.writes) != 1:
        raise ScheduleError(f"{where}: the block must write exactly one buffer")
    kind, identity, rhs, lhs_first = _reducer(block, where)
    store = block.body
    assert isinstance(store, S.BufferStore)
    buffer = store.buffer
    ndim = len(buffer.shape)
    if factor_axis < 0:
        factor_axis += ndim + 1
    if not 0 <= factor_axis <= ndim:
        raise ScheduleError(f"{where}: factor_axis {factor_axis} is out of range [{-(ndim + 1)}, {ndim}]")

    loops = A.loops_above(state, func_name, realize)
    spatial_vars: set[E.Var] = set()
    reduce_vars: set[E.Var] = set()
    for iv, value in zip(block.iter_vars, realize.iter_values):
        (spatial_vars if iv.iter_type == S.IterType.DATA_PAR else reduce_vars).update(free_vars(value))
    if loop_var not in reduce_vars or loop_var in spatial_vars:
        raise ScheduleError(f"{where}: the loop is not a reduction loop of the block (only reduction iter vars "
                            "may use it)")
    _check_rfactor_loops(state, func_name, loops, block, spatial_vars, reduce_vars, where)

    # ---- the rfactor block: reduction iter vars using `loop` become one iter var per loop ----
    rf_var = E.Var(f"v{loop_var.name}", loop_var.dtype)
    rf_ivs = [S.IterVar(E.Range(loop.min, loop.extent), rf_var, S.IterType.DATA_PAR)]
    rf_values: list[E.PrimExpr] = [loop_var]
    loop_to_iter: dict[E.Var, E.PrimExpr] = {loop_var: rf_var}
    loop_of = {lp.loop_var: lp for lp in loops}
    rf_map: dict[E.Var, E.PrimExpr] = {}
    for iv, value in zip(block.iter_vars, realize.iter_values):
        if iv.iter_type == S.IterType.DATA_PAR or loop_var not in free_vars(value):
            rf_ivs.append(iv)
            rf_values.append(value)
            continue
        for var in _vars_in_order(value):
            lp = loop_of.get(var)
            if lp is None or var in loop_to_iter:
                continue
            new = E.Var(f"v{var.name}", var.dtype)
            loop_to_iter[var] = new
            rf_ivs.append(S.IterVar(E.Range(lp.min, lp.extent), new, S.IterType.COMM_REDUCE))
            rf_values.append(var)
        rf_map[iv.var] = substitute(value, loop_to_iter)
    has_reduce = any(iv.iter_type == S.IterType.COMM_REDUCE for iv in rf_ivs)

    rf_buffer = E.Buffer(f"{buffer.name}_rf", buffer.shape[:factor_axis] + (loop.extent,) + buffer.shape[factor_axis:],
                         buffer.dtype, buffer.scope)
    rf_idx = tuple(store.indices[:factor_axis]) + (rf_var,) + tuple(store.indices[factor_axis:])
    rf_name = T.unique_block_name(state, func_name, f"{name}_rf")
    rf_reads = tuple(S.BufferRegion(r.buffer, tuple(substitute(x, rf_map) for x in r.region))
                     for r in block.reads if r.buffer is not buffer)
    rf_write_region = tuple(block.writes[0].region[:factor_axis]) + (E.Range(rf_var, E.IntImm(rf_var.dtype, 1)),) \
        + tuple(block.writes[0].region[factor_axis:])
    rf_value = _combine(kind, E.BufferLoad(rf_buffer, rf_idx), rhs, lhs_first) if has_reduce else rhs
    rf_block = S.Block(
        tuple(rf_ivs), rf_reads,
        (S.BufferRegion(rf_buffer, tuple(substitute(x, rf_map) for x in rf_write_region)),), rf_name,
        substitute(S.BufferStore(rf_buffer, rf_value, rf_idx), rf_map),
        init=substitute(S.BufferStore(rf_buffer, identity, rf_idx), rf_map) if has_reduce else None,
        annotations=block.annotations)
    fresh = {lp.loop_var: E.Var(lp.loop_var.name, lp.loop_var.dtype) for lp in loops}
    rf_nest: S.Stmt = S.BlockRealize(tuple(substitute(v, fresh) for v in rf_values),
                                     substitute(realize.predicate, fresh), rf_block)
    for lp in reversed(loops):
        rf_nest = _copy_loop(lp, fresh[lp.loop_var], rf_nest)

    # ---- the write-back block, where the reduction block was ----
    wb_rf_var = E.Var(f"v{loop_var.name}", loop_var.dtype)
    wb_ivs = [S.IterVar(E.Range(loop.min, loop.extent), wb_rf_var, S.IterType.COMM_REDUCE)]
    wb_values: list[E.PrimExpr] = [loop_var]
    wb_map: dict[E.Var, E.PrimExpr] = {}
    for iv, value in zip(block.iter_vars, realize.iter_values):
        if iv.iter_type == S.IterType.DATA_PAR:
            new = E.Var(iv.var.name, iv.var.dtype)
            wb_map[iv.var] = new
            wb_ivs.append(S.IterVar(iv.dom, new, iv.iter_type, iv.thread_tag))
            wb_values.append(value)
    wb_idx = tuple(substitute(i, wb_map) for i in store.indices)
    wb_rf_idx = wb_idx[:factor_axis] + (wb_rf_var,) + wb_idx[factor_axis:]
    removed = {lp.loop_var for lp in loops if lp.loop_var in reduce_vars and lp is not loop}
    # TVM drops the predicate here; the conditions on the loops that stay are kept so that a
    # non-divisible split of a spatial loop does not make the write-back run out of bounds.
    wb_pred = _join_and([c for c in _split_and(realize.predicate)
                         if not (free_vars(c) & removed) and not T.is_const_true(c)])
    wb_block = S.Block(
        tuple(wb_ivs), (S.BufferRegion(rf_buffer, _points(wb_rf_idx)),), (S.BufferRegion(buffer, _points(wb_idx)),),
        name,
        S.BufferStore(buffer, _combine(kind, E.BufferLoad(buffer, wb_idx), E.BufferLoad(rf_buffer, wb_rf_idx), True),
                      wb_idx),
        init=S.BufferStore(buffer, identity, wb_idx), annotations=block.annotations)
    wb = S.BlockRealize(tuple(wb_values), wb_pred, wb_block)

    post: dict[object, Callable[[S.Stmt], S.Stmt]] = {}
    for lp in loops:
        if lp.loop_var in removed:
            post[lp] = _loop_body
    outer_fn = post.get(loops[0], _unchanged)
    post[loops[0]] = lambda rebuilt: S.seq(rf_nest, outer_fn(rebuilt))
    new_body = T.rebuild(scope_block.body, replace={realize: wb}, post=post)
    new_scope = T.with_block(scope_block, body=new_body, alloc_buffers=scope_block.alloc_buffers + (rf_buffer,))
    state.replace(func_name, scope_block, new_scope)
    return rf_name


def _loop_body(loop: S.Stmt) -> S.Stmt:
    """A rebuilt loop's body: the loop disappears."""
    assert isinstance(loop, S.For)
    return loop.body


def _unchanged(stmt: S.Stmt) -> S.Stmt:
    return stmt


def _vars_in_order(expr: E.PrimExpr) -> list[E.Var]:
    """The variables of `expr` in order of first appearance (TVM's `UndefinedVars` order)."""
    from msdb.ir.functor import post_order_visit

    out: list[E.Var] = []
    post_order_visit(expr, lambda n: out.append(n) if isinstance(n, E.Var) and n not in out else None)
    return out


def _check_rfactor_loops(state: ScheduleState, func_name: str, loops: list[S.For], block: S.Block,
                         spatial_vars: set[E.Var], reduce_vars: set[E.Var], where: str) -> None:
    """TVM's loop conditions for rfactor. The rfactor nest is a copy of the whole loop nest placed
    before its outermost loop, so that loop must start with the block (nothing the block may
    depend on runs before it inside), and the nest from the first reduction loop down must hold
    the block alone (those loops disappear around the write-back block)."""
    first = A.child_block_realizes(loops[0].body)
    if not first or first[0].block is not block:
        raise ScheduleError(f"{where}: the block must be the first block under its outermost loop "
                            f"{loops[0].loop_var.name!r}, but {first[0].block.name_hint!r} comes first "
                            "(the rfactor block is computed before that loop)")
    met_reduction = False
    for lp in loops:
        var = lp.loop_var
        if var in spatial_vars and var in reduce_vars:
            raise ScheduleError(f"{where}: loop {var.name!r} is used by both spatial and reduction iter vars")
        if var in spatial_vars:
            continue
        if var in reduce_vars:
            if not met_reduction:
                inner = A.child_block_realizes(lp.body)
                if len(inner) != 1:
                    raise ScheduleError(f"{where}: the outermost reduction loop {var.name!r} must enclose only the "
                                        f"block, it encloses {[r.block.name_hint for r in inner]}")
                met_reduction = True
            continue
        if met_reduction and E.const_int(lp.extent) != 1:
            raise ScheduleError(f"{where}: loop {var.name!r} under a reduction loop is bound to no iter var and "
                                "has an extent other than 1")


def _points(indices: tuple[E.PrimExpr, ...]) -> tuple[E.Range, ...]:
    return tuple(E.Range(i, E.IntImm(i.dtype if i.dtype.startswith("int") else "int32", 1)) for i in indices)
