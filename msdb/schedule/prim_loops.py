"""split, fuse and reorder: the loop transformations, as functions over the schedule state.

Each takes the state, the function's name and the loops by their variables (what a LoopRV
stands for), rewrites the subtree it changes and lets `ScheduleState.replace` rebuild the
ancestors. Loop identity is kept: a loop a primitive does not replace keeps its `Var` (so
its LoopRVs stay valid); loops it creates get fresh Vars named as TVM names them (`i_0`,
`i_j_fused`), which it returns. Block bindings under a rewritten loop are re-simplified with
the ranges of every enclosing loop (`msdb.ir.arith`), as TVM's IterMapSimplifyBlockBinding
does.
"""

from __future__ import annotations

from typing import Any, Sequence

from msdb.errors import ScheduleError
from msdb.ir import expr as E
from msdb.ir import stmt as S
from msdb.ir.arith import Analyzer, simplify
from msdb.ir.arith.fold import fold_binary
from msdb.ir.dtype import bits as dtype_bits
from msdb.ir.functor import IRMutator, free_vars, substitute
from msdb.schedule import analysis as A
from msdb.schedule.iter_order import simplified_binding
from msdb.schedule.state import ScheduleState

__all__ = ["Factor", "split", "fuse", "reorder", "check_plain_loop"]

#: A split factor once its random variable is resolved: a constant, an expression, or None (the
#: one factor to infer).
Factor = int | E.PrimExpr | None


def _int_const(value: int, dtype: str = "int32") -> E.IntImm:
    return E.IntImm(dtype, int(value))


def _is_one(expr: E.PrimExpr) -> bool:
    return type(expr) is E.IntImm and expr.value == 1


def _is_zero(expr: E.PrimExpr) -> bool:
    return type(expr) is E.IntImm and expr.value == 0


def _fold_mul(a: E.PrimExpr, b: E.PrimExpr) -> E.PrimExpr:
    """a * b with the constant folding TVM's `*` operator does (what ends up in predicates)."""
    folded = fold_binary(E.Mul, a, b)
    return E.Mul(a, b, a.dtype) if folded is None else folded


def _fold_add(a: E.PrimExpr, b: E.PrimExpr) -> E.PrimExpr:
    folded = fold_binary(E.Add, a, b)
    return E.Add(a, b, a.dtype) if folded is None else folded


def _fold_and(a: E.PrimExpr, b: E.PrimExpr) -> E.PrimExpr:
    """a && b with TVM's folding of constant operands."""
    if type(a) is E.IntImm:
        return b if a.value else a
    if type(b) is E.IntImm:
        return a if b.value else b
    return E.And(a, b, "bool")


def _uses_any(expr: Any, variables: set[E.Var]) -> E.Var | None:
    if not variables:
        return None
    for v in free_vars(expr):
        if v in variables:
            return v
    return None


def _widest_int(first: str, dtypes: Sequence[str]) -> str:
    """The int dtype wide enough for all of `dtypes` (TVM picks the widest bit width)."""
    width = max([dtype_bits(first)] + [dtype_bits(d) for d in dtypes if d != "bool"])
    return f"int{width}"


class _BindingRewriter(IRMutator):
    """Substitutes loop variables throughout a loop subtree and re-simplifies the bindings of
    the blocks directly in it (TVM's SubstituteVarAndCollectOpaqueBlock followed by
    IterMapSimplifyBlockBinding): predicates and nested expressions get the plain
    substitution, iter values are simplified with the ranges of every enclosing loop, and with
    `drop_unit_iters` (preserve_unit_iters=False) unit-extent loops are replaced by their min."""

    def __init__(self, vmap: dict[E.Var, E.PrimExpr], analyzer: Analyzer, drop_unit_iters: bool,
                 fused_sum: tuple[E.Var, E.PrimExpr] | None = None) -> None:
        super().__init__()
        self.vmap = vmap
        self.analyzer = analyzer
        self.drop_unit_iters = drop_unit_iters
        self.fused_sum = fused_sum

    def visit_Var(self, node: E.Var) -> E.PrimExpr:
        return self.vmap.get(node, node)

    def enter_loop(self, loop_var: E.Var, lo: E.PrimExpr, extent: E.PrimExpr) -> None:
        if self.drop_unit_iters and _is_one(extent):
            self.analyzer.bind(loop_var, lo)
        else:
            self.analyzer.bind(loop_var, E.Range(lo, extent))

    def visit_For(self, node: S.For) -> S.Stmt:
        lo, ext = self.visit(node.min), self.visit(node.extent)
        self.enter_loop(node.loop_var, lo, ext)
        body = self.visit(node.body)
        self.analyzer.unbind(node.loop_var)
        if lo is node.min and ext is node.extent and body is node.body:
            return node
        return S.For(node.loop_var, lo, ext, node.kind, body, node.thread_binding, node.annotations)

    def visit_BlockRealize(self, node: S.BlockRealize) -> S.Stmt:
        values = self._exprs(node.iter_values)
        pred = self.visit(node.predicate)
        if node.block.iter_vars:
            # keeping unit loops, only the bindings the substitution changed: the others were
            # simplified when their own loops were made, and simplifying is idempotent (a third
            # of a replay went to re-simplifying bindings a split or fuse never touched);
            # dropping unit loops changes what every binding's loops are worth
            simplified = tuple(self._simplify_binding(v, old) for v, old in zip(values, node.iter_values))
            if any(a is not b for a, b in zip(simplified, values)):
                values = simplified
            # A block with iter vars is isolated (TVM's well-formedness rule): nothing inside
            # it uses a loop variable from outside, so its body needs no substitution.
            block = node.block
        else:
            # opaque blocks (no iter vars) are transparent: their inner blocks are simplified too
            block = self.visit(node.block)
        if values is node.iter_values and pred is node.predicate and block is node.block:
            return node
        return S.BlockRealize(values, pred, block)

    def _simplify_binding(self, value: E.PrimExpr, old: E.PrimExpr) -> E.PrimExpr:
        if self.fused_sum is not None and not self.drop_unit_iters:
            var, total = self.fused_sum
            if _only_under_div_mod(old, var, False):
                # TVM's IterMapSimplify fuses the split loops back into one iterator under a
                # floordiv/floormod and prints that iterator as the sum of its loops:
                # `(f_0 * 32 + f_1) // 8`, never `f_0 * 4 + f_1 // 8`
                return substitute(old, {var: total})
        if value is not old or self.drop_unit_iters:
            return simplified_binding(value, self.analyzer)
        return value


def _only_under_div_mod(expr: E.PrimExpr, var: E.Var, under: bool) -> bool:
    """Whether `var` occurs in `expr`, and only inside the dividend of a floordiv/floormod by a
    constant, reached through sums and constant products."""
    if expr is var:
        return under
    if type(expr) in (E.FloorDiv, E.FloorMod):
        assert isinstance(expr, (E.FloorDiv, E.FloorMod))
        if type(expr.b) is not E.IntImm:
            return False
        return A.uses_var(expr.a, var) and _only_under_div_mod(expr.a, var, True)
    if type(expr) in (E.Add, E.Sub, E.Mul):
        assert isinstance(expr, (E.Add, E.Sub, E.Mul))
        parts = [p for p in (expr.a, expr.b) if A.uses_var(p, var)]
        return bool(parts) and all(_only_under_div_mod(p, var, under) for p in parts)
    return False


def _fused_sum(new_vars: list[E.Var], factors: list[E.PrimExpr]) -> E.PrimExpr | None:
    """`v_0 * (f_1 * ... * f_n) + ... + v_n`: the split loops as one fused iterator, the way
    TVM's iter-map normal form prints it (None for symbolic factors)."""
    consts = [E.const_int(f) for f in factors]
    if any(c is None for c in consts):
        return None
    total: E.PrimExpr | None = None
    for i, var in enumerate(new_vars):
        scale = 1
        for c in consts[i + 1:]:
            assert c is not None
            scale *= c
        term: E.PrimExpr = var if scale == 1 else E.Mul(var, E.IntImm(var.dtype, scale), var.dtype)
        total = term if total is None else E.Add(total, term, var.dtype)
    return total


def _append_predicate(node: S.Stmt, pred: E.PrimExpr) -> S.Stmt:
    """`node` with `pred` appended (with &&) to the predicate of each block realize directly
    under it (not recursively into blocks), like TVM's BlockPredicateAppender."""
    t = type(node)
    if t is S.BlockRealize:
        assert isinstance(node, S.BlockRealize)
        return S.BlockRealize(node.iter_values, _fold_and(node.predicate, pred), node.block)
    if isinstance(node, S.For):
        return S.For(node.loop_var, node.min, node.extent, node.kind, _append_predicate(node.body, pred),
                     node.thread_binding, node.annotations)
    if isinstance(node, S.SeqStmt):
        return S.SeqStmt(tuple(_append_predicate(s, pred) for s in node.seq))
    if isinstance(node, S.IfThenElse):
        return S.IfThenElse(node.condition, _append_predicate(node.then_case, pred),
                            None if node.else_case is None else _append_predicate(node.else_case, pred))
    if isinstance(node, S.LetStmt):
        return S.LetStmt(node.var, node.value, _append_predicate(node.body, pred))
    return node


def _rewrite_loop_body(body: S.Stmt, outer: list[S.For], vmap: dict[E.Var, E.PrimExpr],
                       new_ranges: list[tuple[E.Var, E.PrimExpr, E.PrimExpr]], preserve_unit_iters: bool,
                       fused_sum: tuple[E.Var, E.PrimExpr] | None = None) -> S.Stmt:
    """Substitute `vmap` in `body` and re-simplify the bindings of its blocks, knowing the
    ranges of the loops outside (`outer`) and of the loops being created (`new_ranges`).
    `fused_sum` (a split's loop var and its loops as one sum) keeps that sum whole where a
    binding divides the split loop."""
    rewriter = _BindingRewriter(vmap, Analyzer(order="binding"), drop_unit_iters=not preserve_unit_iters,
                                fused_sum=fused_sum)
    for loop in outer:
        rewriter.enter_loop(loop.loop_var, loop.min, loop.extent)
    for var, lo, ext in new_ranges:
        rewriter.enter_loop(var, lo, ext)
    result: S.Stmt = rewriter.visit(body)
    return result


def check_plain_loop(loop: S.For, primitive: str) -> None:
    """Refuse a loop with annotations, a thread binding or a nonzero start (split and fuse
    only rewrite plain loops)."""
    if loop.annotations or loop.thread_binding is not None:
        raise ScheduleError(
            f"{primitive}: loop {loop.loop_var.name!r} has annotations or a thread binding; "
            f"{primitive} only applies to plain loops (unannotate it first)")
    if not _is_zero(loop.min):
        raise ScheduleError(f"{primitive}: loop {loop.loop_var.name!r} does not start at 0")


# ---------------------------------------------------------------------------------- split


def split(state: ScheduleState, func_name: str, loop_var: E.Var, factors: Sequence[Factor],
          preserve_unit_iters: bool, disable_predication: bool) -> list[E.Var]:
    """Split the loop into nested loops (see `Schedule.split`); returns the new loop vars,
    outermost first."""
    old = state.loop(func_name, loop_var)
    name = old.loop_var.name
    factor_list = list(factors)
    if not factor_list:
        raise ScheduleError(f"split: no factors given for loop {name!r}")
    values: list[E.PrimExpr | None] = []
    infer_index = -1
    for i, f in enumerate(factor_list):
        if f is None:
            if infer_index != -1:
                raise ScheduleError(f"split: only one factor of loop {name!r} may be None, got {factor_list}")
            infer_index = i
            values.append(None)
            continue
        if isinstance(f, bool):
            raise ScheduleError(f"split: factor {f!r} of loop {name!r} is not an integer")
        if isinstance(f, int):
            value: E.PrimExpr = _int_const(f, old.extent.dtype)
        elif isinstance(f, E.PrimExpr):
            value = f
        else:
            raise ScheduleError(f"split: factor {f!r} of loop {name!r} is not an int, ExprRV or None")
        c = E.const_int(value)
        if c is not None and c <= 0:
            raise ScheduleError(
                f"split: factor {c} at position {i} of loop {name!r} is not positive; "
                f"all factors must be positive (use None for the one to infer)")
        values.append(value)
    check_plain_loop(old, "split")
    known = [v for v in values if v is not None]
    product: E.PrimExpr = _int_const(1, old.extent.dtype)
    for v in known:
        product = _fold_mul(product, v)
    analyzer = Analyzer(order="binding")
    if infer_index != -1:
        ext_c, prod_c = E.const_int(old.extent), E.const_int(product)
        if ext_c is not None and prod_c is not None:
            inferred: E.PrimExpr = _int_const(-(-ext_c // prod_c), old.extent.dtype)
        else:
            inferred = analyzer.simplify(E.FloorDiv(old.extent + product - 1, product))
        values[infer_index] = inferred
    elif not _constant_at_least(product, old.extent) and not analyzer.can_prove(E.GE(product, old.extent)):
        prod_c = E.const_int(product)
        ext_c = E.const_int(old.extent)
        raise ScheduleError(
            f"split: factors {factor_list} of loop {name!r} multiply to "
            f"{prod_c if prod_c is not None else product}, less than its extent "
            f"{ext_c if ext_c is not None else old.extent}; "
            f"the product must cover the extent (pass None for one factor to infer it)")
    final: list[E.PrimExpr] = [v for v in values if v is not None]
    dtype = _widest_int(old.loop_var.dtype, [v.dtype for v in final])
    new_vars = [E.Var(f"{name}_{i}", dtype) for i in range(len(final))]
    subst: E.PrimExpr | None = None
    for var, factor in zip(new_vars, final):
        subst = var if subst is None else _fold_add(_fold_mul(subst, factor), var)
    assert subst is not None
    if dtype != old.loop_var.dtype:  # wider factors: uses of the old var keep its dtype
        subst = E.Cast(old.loop_var.dtype, subst)
    outer = A.loops_above(state, func_name, old)
    predicate = E.LT(subst, old.extent, "bool")
    whole = _fused_sum(new_vars, final) if dtype == old.loop_var.dtype else None
    body = _rewrite_loop_body(old.body, outer, {old.loop_var: subst},
                              [(v, _int_const(0, dtype), f) for v, f in zip(new_vars, final)], preserve_unit_iters,
                              None if whole is None else (old.loop_var, whole))
    if not disable_predication and not _split_covers_exactly(new_vars, final, old.extent, predicate):
        body = _append_predicate(body, predicate)
    new_stmt: S.Stmt = body
    for var, factor in zip(reversed(new_vars), reversed(final)):
        new_stmt = S.For(var, _int_const(0, dtype), factor, S.ForKind.SERIAL, new_stmt)
    state.replace(func_name, old, new_stmt)
    return new_vars


def _constant_at_least(a: E.PrimExpr, b: E.PrimExpr) -> bool:
    """Whether `a >= b` for two constants (False when either is not one)."""
    return isinstance(a, E.IntImm) and isinstance(b, E.IntImm) and a.value >= b.value


def _split_covers_exactly(new_vars: list[E.Var], factors: list[E.PrimExpr], extent: E.PrimExpr,
                          predicate: E.PrimExpr) -> bool:
    """Whether the split loops never step past the old extent (`predicate`, their fused
    value below it, always holds): with constant factors of the loop's own dtype, when their
    product is at most the extent (the fused value's largest value is the product minus one; the analyzer's proof
    finds the same, at a tenth of a split's cost); else what the analyzer proves."""
    if (type(extent) is E.IntImm and all(type(f) is E.IntImm for f in factors)
            and all(v.dtype == extent.dtype for v in new_vars)):  # no cast to see through
        product = 1
        for f in factors:
            product *= f.value  # type: ignore[attr-defined]
        return product <= extent.value
    check = Analyzer(order="binding")
    for var, factor in zip(new_vars, factors):
        check.bind(var, E.Range(_int_const(0, var.dtype), factor))
    return check.can_prove(predicate)


# ----------------------------------------------------------------------------------- fuse


def fuse(state: ScheduleState, func_name: str, loop_vars: Sequence[E.Var], preserve_unit_iters: bool) -> E.Var:
    """Fuse a chain of directly nested loops into one (see `Schedule.fuse`); returns the fused
    loop's var."""
    if not loop_vars:
        raise ScheduleError("fuse: needs at least one loop")
    fors = [state.loop(func_name, v) for v in loop_vars]
    seen_vars: set[E.Var] = set()
    for i, loop in enumerate(fors):
        check_plain_loop(loop, "fuse")
        if loop.loop_var in seen_vars:
            raise ScheduleError(f"fuse: loop {loop.loop_var.name!r} is given more than once")
        if i > 0:
            outer_loop = fors[i - 1]
            if outer_loop.body is not loop:
                if (state.parent(func_name, loop) is outer_loop
                        or A.sref_parent(state, func_name, loop) is outer_loop):
                    raise ScheduleError(
                        f"fuse: loop {loop.loop_var.name!r} is not the only statement in the body of "
                        f"loop {outer_loop.loop_var.name!r}; only directly nested loops can be fused")
                raise ScheduleError(
                    f"fuse: loop {outer_loop.loop_var.name!r} is not the direct parent of loop "
                    f"{loop.loop_var.name!r}; fuse takes adjacent nested loops, outermost first")
        used = _uses_any(loop.extent, seen_vars)
        if used is not None:
            raise ScheduleError(f"fuse: the extent of loop {loop.loop_var.name!r} depends on loop {used.name!r}")
        seen_vars.add(loop.loop_var)
    dtype = _widest_int(fors[0].loop_var.dtype, [f.loop_var.dtype for f in fors])
    fused = E.Var("_".join(f.loop_var.name for f in fors) + "_fused", dtype)
    vmap: dict[E.Var, E.PrimExpr] = {}
    lower: E.PrimExpr = _int_const(1, dtype)
    for i in range(len(fors) - 1, 0, -1):
        ext = fors[i].extent
        if _is_one(ext):
            vmap[fors[i].loop_var] = _int_const(0, dtype)
        else:
            span = _fold_mul(lower, ext)
            value: E.PrimExpr = E.FloorMod(fused, span, dtype)
            if not _is_one(lower):
                value = E.FloorDiv(value, lower, dtype)
            vmap[fors[i].loop_var] = value
        lower = _fold_mul(lower, ext)
    if _is_one(fors[0].extent):
        vmap[fors[0].loop_var] = _int_const(0, dtype)
    else:
        vmap[fors[0].loop_var] = fused if _is_one(lower) else E.FloorDiv(fused, lower, dtype)
    for loop in fors:
        if loop.loop_var.dtype != dtype:
            vmap[loop.loop_var] = E.Cast(loop.loop_var.dtype, vmap[loop.loop_var])
    extent: E.PrimExpr = _int_const(1, dtype)
    for loop in fors:
        extent = _fold_mul(extent, loop.extent if loop.extent.dtype == dtype else E.Cast(dtype, loop.extent))
    extent = simplify(extent)
    outer = A.loops_above(state, func_name, fors[0])
    body = _rewrite_loop_body(fors[-1].body, outer, vmap, [(fused, _int_const(0, dtype), extent)], preserve_unit_iters)
    state.replace(func_name, fors[0], S.For(fused, _int_const(0, dtype), extent, S.ForKind.SERIAL, body))
    return fused


# -------------------------------------------------------------------------------- reorder


def reorder(state: ScheduleState, func_name: str, loop_vars: Sequence[E.Var]) -> None:
    """Reorder loops of one nest (see `Schedule.reorder`)."""
    fors = [state.loop(func_name, v) for v in loop_vars]
    if len(fors) < 2:
        return
    names = [f.loop_var.name for f in fors]
    seen: set[E.Var] = set()
    for f in fors:
        if f.loop_var in seen:
            raise ScheduleError(f"reorder: loop {f.loop_var.name!r} appears more than once in {names}")
        seen.add(f.loop_var)
    # Each loop's chain of enclosing loops within its scope (outermost first).
    chains = {f.loop_var: A.loops_above(state, func_name, f) + [f] for f in fors}
    scopes = {id(state.scope_block(func_name, f)) for f in fors}
    if len(scopes) != 1:
        raise ScheduleError(f"reorder: loops {names} are not in one nest: they are under different blocks")
    bottom = max(fors, key=lambda f: len(chains[f.loop_var]))
    bottom_chain = chains[bottom.loop_var]
    on_path = {id(x) for x in bottom_chain}
    for f in fors:
        if id(f) not in on_path:
            raise ScheduleError(
                f"reorder: loops {names} are not in one nest: loop {f.loop_var.name!r} is not an "
                f"ancestor of loop {bottom.loop_var.name!r} (they are in different branches)")
    top_depth = min(len(chains[f.loop_var]) for f in fors) - 1
    chain = bottom_chain[top_depth:]
    for outer, inner in zip(chain, chain[1:]):
        if outer.body is not inner:
            raise ScheduleError(
                f"reorder: loops {names} are not a chain of directly nested loops: loop "
                f"{outer.loop_var.name!r} has other statements besides loop {inner.loop_var.name!r}")
    for realize in A.child_block_realizes(bottom.body):
        for iv in realize.block.iter_vars:
            if iv.iter_type not in (S.IterType.DATA_PAR, S.IterType.COMM_REDUCE):
                raise ScheduleError(
                    f"reorder: block {realize.block.name_hint!r} under loops {names} has iter var "
                    f"{iv.var.name!r} that is neither spatial nor reduction")
    given = {f.loop_var for f in fors}
    order = iter(fors)
    new_chain = [next(order) if loop.loop_var in given else loop for loop in chain]
    _check_reduction_order(chain, new_chain, bottom)
    inner_vars: set[E.Var] = set()
    new_stmt: S.Stmt = chain[-1].body
    for loop in reversed(new_chain):
        used = _uses_any(loop.min, inner_vars) or _uses_any(loop.extent, inner_vars)
        if used is not None:
            raise ScheduleError(
                f"reorder: the range of loop {loop.loop_var.name!r} depends on loop {used.name!r}, "
                f"which would be inside it in the new order")
        inner_vars.add(loop.loop_var)
        new_stmt = S.For(loop.loop_var, loop.min, loop.extent, loop.kind, new_stmt, loop.thread_binding, loop.annotations)
    state.replace(func_name, chain[0], new_stmt)


def _check_reduction_order(chain: list[S.For], new_chain: list[S.For], bottom: S.For) -> None:
    """Refuse a new order that would run a block's init after some of its updates.

    A block with an init runs it when every reduction iter var is at its minimum, which
    must be the first update of each spatial point. A loop that feeds both a spatial and a
    reduction iter var (a fused spatial-reduction loop, split) steps through a point's
    reduction in its nesting order: swapping two such loops makes a point start mid-way,
    and the init then overwrites partial sums (TVM accepts it and computes wrong results;
    MetaSchedule never fuses across a reduction). Pure reduction loops may go in any
    order: they all start at their minimum."""
    loop_vars = {loop.loop_var for loop in chain}
    for realize in A.child_block_realizes(bottom.body):
        block = realize.block
        if block.init is None:
            continue
        feeds: dict[E.Var, set[S.IterType]] = {}
        for iv, value in zip(block.iter_vars, realize.iter_values):
            for var in free_vars(value) & loop_vars:
                feeds.setdefault(var, set()).add(iv.iter_type)
        mixed = {var for var, kinds in feeds.items() if len(kinds) > 1}
        before = [loop.loop_var for loop in chain if loop.loop_var in mixed]
        after = [loop.loop_var for loop in new_chain if loop.loop_var in mixed]
        if before != after:
            raise ScheduleError(
                f"reorder: loops {', '.join(repr(v.name) for v in before)} each feed both spatial and reduction "
                f"iter vars of block {block.name_hint!r}; putting them in the order "
                f"{', '.join(repr(v.name) for v in after)} would run its init after some of its updates")
