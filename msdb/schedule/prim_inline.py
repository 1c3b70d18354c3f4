"""compute_inline and reverse_compute_inline: fuse a block's computation into its neighbour.

compute_inline substitutes a producer `B[v...] = f(v...)` into every load `B[idx]` of its
consumers (`f(idx)`); reverse_compute_inline substitutes a consumer `D[g(w)] = h(B[w], w)` into
its producer's store `B[p] = e` (`D[g(p)] = h(e, p)`). Both then drop the inlined block and,
when nothing else uses it, its buffer; the blocks that changed get their read/write regions
re-inferred (TVM does the same with `GetBlockReadWriteRegion`).
"""

from __future__ import annotations

from typing import Hashable

from msdb.errors import ScheduleError
from msdb.ir import expr as E
from msdb.ir import stmt as S
from msdb.ir.arith import expr_key
from msdb.ir.functor import IRMutator, IRVisitor, substitute
from msdb.ir.regions import infer_access_regions
from msdb.schedule import analysis as A
from msdb.schedule import tree_edit as T
from msdb.schedule.state import ScheduleState

__all__ = ["compute_inline", "reverse_compute_inline"]


def _store_with_var_indices(block: S.Block, where: str, role: str) -> S.BufferStore:
    """The block's body as `buf[v0, v1, ...] = value` with distinct iter vars as indices."""
    body = block.body
    if not isinstance(body, S.BufferStore):
        raise ScheduleError(f"{where}: the body of {role} {block.name_hint!r} must be a single buffer store "
                            f"`buf[v0, v1, ...] = value`, got {type(body).__name__}")
    block_vars = {iv.var for iv in block.iter_vars}
    seen: set[E.Var] = set()
    for idx in body.indices:
        if not isinstance(idx, E.Var) or idx not in block_vars or idx in seen:
            raise ScheduleError(f"{where}: {role} {block.name_hint!r} must store with distinct iter vars "
                                f"as indices (`buf[v0, v1, ...] = ...`)")
        seen.add(idx)
    return body


class _LoadInliner(IRMutator):
    """Replace `buffer[idx]` by `value` with the store's index vars bound to `idx`."""

    def __init__(self, buffer: E.Buffer, index_vars: tuple[E.Var, ...], value: E.PrimExpr) -> None:
        super().__init__()
        self.buffer = buffer
        self.index_vars = index_vars
        self.value = value
        self.count = 0
        # the inlined value by the load's indices: a Winograd transform loads one element of
        # the inlined buffer hundreds of times, and the substituted values may be shared
        self._inlined: dict[Hashable, E.PrimExpr] = {}

    def visit_BufferLoad(self, node: E.BufferLoad) -> E.PrimExpr:
        indices = self._exprs(node.indices)
        if node.buffer is self.buffer:
            self.count += 1
            key = tuple(expr_key(i) for i in indices)
            inlined = self._inlined.get(key)
            if inlined is None:
                inlined = self._inlined[key] = substitute(self.value, dict(zip(self.index_vars, indices)))
            return inlined
        return node if indices is node.indices else E.BufferLoad(node.buffer, indices)

    def visit_BufferStore(self, node: S.BufferStore) -> S.Stmt:
        if node.buffer is self.buffer:
            raise ScheduleError(f"block writes buffer {self.buffer.name!r} that is being inlined")
        return super().visit_BufferStore(node)


def _reinfer(block: S.Block, body: S.Stmt, init: S.Stmt | None) -> S.Block:
    reads, writes = infer_access_regions(body, init, block.alloc_buffers)
    return T.with_block(block, body=body, init=init, reads=reads, writes=writes)


def compute_inline(state: ScheduleState, func_name: str, block_name: str) -> None:
    """Inline the block into its consumers (see `Schedule.compute_inline`)."""
    func = state.func(func_name)
    block = state.block(func_name, block_name)
    realize = state.realize(func_name, block_name)
    where = f"compute_inline: block {block_name!r}"
    if block.init is not None:
        raise ScheduleError(f"cannot inline block {block_name}: it has a reduction / init; "
                            "only spatial blocks can be inlined (decompose or cache it instead)")
    if any(iv.iter_type != S.IterType.DATA_PAR for iv in block.iter_vars):
        raise ScheduleError(f"cannot inline block {block_name}: not all of its iter vars are spatial")
    store = _store_with_var_indices(block, where, "the block")
    scope_block = state.scope_block(func_name, block)
    scope = A.BlockScope(scope_block)
    is_root = A.is_root_scope(state, func_name, scope_block)
    if A.is_output_block(func, scope_block, block, is_root):
        raise ScheduleError(f"cannot inline block {block_name}: it writes the output buffer "
                            f"{store.buffer.name!r} of the function")
    if scope.writers(store.buffer) != [block]:
        raise ScheduleError(f"cannot inline block {block_name}: other blocks also write {store.buffer.name!r}")
    if _loads(store.value, store.buffer):
        raise ScheduleError(f"cannot inline block {block_name}: its value reads the buffer it writes")

    value = _inlined_value(block, store)
    index_vars = tuple(i for i in store.indices if isinstance(i, E.Var))  # all of them (checked above)
    replace: dict[object, S.Stmt | None] = {}
    same_scope = {id(b) for b in scope.blocks}
    for other in _all_blocks(scope_block):
        if other is block or not _uses_buffer(other, store.buffer):
            continue
        if id(other) not in same_scope:
            raise ScheduleError(f"cannot inline block {block_name}: block {other.name_hint!r} of an inner "
                                f"scope reads {store.buffer.name!r}; only consumers in the same scope are supported")
        inliner = _LoadInliner(store.buffer, index_vars, value)
        body = inliner.visit(other.body)
        init = inliner.visit(other.init) if other.init is not None else None
        matches = other.match_buffers
        if any(m.source.buffer is store.buffer for m in matches):
            raise ScheduleError(f"cannot inline block {block_name}: block {other.name_hint!r} matches a "
                                "sub-region of its buffer")
        replace[other] = _reinfer(other, body, init)
    replace[T.removal_target(state, func_name, realize)] = None
    new_body = T.rebuild(scope_block.body, replace=replace)
    allocs = tuple(b for b in scope_block.alloc_buffers if b is not store.buffer)
    state.replace(func_name, scope_block, T.with_block(scope_block, body=new_body, alloc_buffers=allocs))


def _inlined_value(block: S.Block, store: S.BufferStore) -> E.PrimExpr:
    """The value substituted for loads of the inlined buffer, in terms of the store's index
    vars. TVM takes the store value as is when the store indices are the block's iter vars in
    order; otherwise it goes through the inverse of the index map, which sends every iter var
    of a one-point domain to that point (a block `Z_rf[v_b, vk, ...]` with iter vars
    `vk, v_b, ...` and `v_b` in [0, 1) inlines `X[0, ...]`). msdb follows, for identical
    structure."""
    ivs = block.iter_vars
    if len(ivs) == len(store.indices) and all(i is iv.var for i, iv in zip(store.indices, ivs)):
        return store.value
    points = {iv.var: A.domain(iv).min for iv in ivs
              if E.const_int(A.domain(iv).extent) == 1 and E.const_int(A.domain(iv).min) is not None}
    return substitute(store.value, points) if points else store.value


def reverse_compute_inline(state: ScheduleState, func_name: str, block_name: str) -> None:
    """Inline the block into its single producer (see `Schedule.reverse_compute_inline`)."""
    func = state.func(func_name)
    block = state.block(func_name, block_name)
    realize = state.realize(func_name, block_name)
    where = f"reverse_compute_inline: block {block_name!r}"
    scope_block = state.scope_block(func_name, block)
    scope = A.BlockScope(scope_block)
    if block.init is not None:
        raise ScheduleError(f"{where}: the block has an init; only a block without one can be inlined "
                            "into its producer")
    problem = scope.complete_block_problem(block)
    if problem is not None:
        raise ScheduleError(f"{where}: the block must be complete, but {problem}")
    if not T.is_const_true(realize.predicate):
        raise ScheduleError(f"{where}: the block has a predicate; only unpredicated blocks can be inlined")
    body = block.body
    if not isinstance(body, S.BufferStore):
        raise ScheduleError(f"{where}: the body must be a single buffer store, got {type(body).__name__}")
    producers = [p for p in scope.producers(block)]
    if len(producers) != 1:
        raise ScheduleError(f"{where}: the block must have exactly one producer, it has "
                            f"{[p.name_hint for p in producers]}")
    producer = producers[0]
    problem = scope.complete_block_problem(producer)
    if problem is not None:
        raise ScheduleError(f"{where}: its producer {producer.name_hint!r} must be a complete block, but {problem}")
    if [c for c in scope.consumers(producer)] != [block]:
        raise ScheduleError(f"{where}: its producer {producer.name_hint!r} has other consumers "
                            f"{[c.name_hint for c in scope.consumers(producer) if c is not block]}")
    p_store = _store_with_var_indices(producer, where, "the producer")
    buffer = p_store.buffer
    is_root = A.is_root_scope(state, func_name, scope_block)
    if A.is_output_block(func, scope_block, producer, is_root):
        raise ScheduleError(f"{where}: its producer writes the output buffer {buffer.name!r}")
    loads = _loads(body.value, buffer)
    if not loads:
        raise ScheduleError(f"{where}: the block does not load {buffer.name!r} in its value")
    first = loads[0].indices
    for load in loads[1:]:
        if any(a is not b for a, b in zip(load.indices, first)):
            raise ScheduleError(f"{where}: the block loads {buffer.name!r} at different indices")
    if any(_loads(i, buffer) for i in body.indices):
        raise ScheduleError(f"{where}: the block's store indices read {buffer.name!r}")
    block_vars = [iv.var for iv in block.iter_vars]
    if (len(first) == len(block_vars) and all(isinstance(i, E.Var) for i in first)
            and set(first) == set(block_vars) and len(set(first)) == len(first)):
        vmap = _elementwise_map(block, producer, first, p_store, where)
    else:
        vmap = _split_inverse(block, producer, first, p_store, where)

    indices = tuple(substitute(i, vmap) for i in body.indices)

    def consumer_store(produced: E.PrimExpr) -> S.BufferStore:
        """The consumer's store with `produced` for its load of the producer's buffer."""
        return S.BufferStore(body.buffer, substitute(_LoadReplacer(buffer, produced).visit(body.value), vmap), indices)

    new_init = None
    if producer.init is not None:
        # A complete producer may have an init (TVM's definition ignores it); TVM rewrites the
        # init's store like the body's, so the init stays and now writes the consumer's buffer.
        init = producer.init
        if not (isinstance(init, S.BufferStore) and init.buffer is buffer
                and len(init.indices) == len(p_store.indices)
                and all(a is b for a, b in zip(init.indices, p_store.indices))):
            raise ScheduleError(f"{where}: the init of producer {producer.name_hint!r} must store into "
                                f"{buffer.name!r} at the indices of its body's store")
        new_init = consumer_store(init.value)
    new_producer = _reinfer(producer, consumer_store(p_store.value), new_init)
    replace: dict[object, S.Stmt | None] = {producer: new_producer,
                                            T.removal_target(state, func_name, realize): None}
    new_scope_body = T.rebuild(scope_block.body, replace=replace)
    allocs = tuple(b for b in scope_block.alloc_buffers if b is not buffer)
    state.replace(func_name, scope_block, T.with_block(scope_block, body=new_scope_body, alloc_buffers=allocs))


def _elementwise_map(block: S.Block, producer: S.Block, first: tuple[E.PrimExpr, ...], p_store: S.BufferStore,
                     where: str) -> dict[E.Var, E.PrimExpr]:
    """Each consumer iter var -> the producer iter var stored at the index position where the
    consumer loads with it (same domains required)."""
    c_iv = {iv.var: iv for iv in block.iter_vars}
    p_iv = {iv.var: iv for iv in producer.iter_vars}
    vmap: dict[E.Var, E.PrimExpr] = {}
    for k, w in enumerate(first):
        p_var = p_store.indices[k]
        assert isinstance(w, E.Var) and isinstance(p_var, E.Var)  # both checked by the caller
        a, b = A.domain(c_iv[w]), A.domain(p_iv[p_var])
        if E.const_int(a.min) != E.const_int(b.min) or E.const_int(a.extent) != E.const_int(b.extent) \
                or E.const_int(a.extent) is None:
            raise ScheduleError(f"{where}: iter var {w.name!r} does not range over the same domain as the "
                                f"producer's {p_var.name!r}")
        vmap[w] = p_var
    return vmap


def _as_split(index: E.PrimExpr) -> tuple[E.Var, int, int | None] | None:
    """`v`, `v // a`, `v % b`, `v // a % b` or `v % (a * b) // a` as (v, a, b); b None where
    no `%` bounds it."""
    if isinstance(index, E.FloorDiv) and isinstance(index.a, E.FloorMod) and isinstance(index.a.a, E.Var):
        a, m = E.const_int(index.b), E.const_int(index.a.b)
        if a and m and m % a == 0:
            return index.a.a, a, m // a
    lower, extent = 1, None
    if isinstance(index, E.FloorMod):
        extent = E.const_int(index.b)
        if not extent or extent < 1:
            return None
        index = index.a
    if isinstance(index, E.FloorDiv):
        divisor = E.const_int(index.b)
        if not divisor or divisor < 1:
            return None
        lower = divisor
        index = index.a
    return (index, lower, extent) if isinstance(index, E.Var) else None


def _split_inverse(block: S.Block, producer: S.Block, first: tuple[E.PrimExpr, ...], p_store: S.BufferStore,
                   where: str) -> dict[E.Var, E.PrimExpr]:
    """Each consumer iter var written in the producer's store indices, when the consumer loads
    the buffer at digits of its iter vars (`C_reindex[v0 // 16, v1 // 64, 0, v1 % 64 // 16,
    v0 % 16, v1 % 16]`, the tiles TVM's tensor-core rule lays out): `v0 = p4 + p0 * 16`, the
    digits in ascending place value as TVM's inverse of an iter map writes them. The digits of
    each var must cover its domain exactly once, and the producer's iter var at each position
    must range over exactly that digit (a constant position: one value), so the inlined store
    stays inside the consumer's buffer (TVM checks that the producer covers the consumer)."""
    domains = {iv.var: A.domain(iv) for iv in block.iter_vars}
    produced = {iv.var: A.domain(iv) for iv in producer.iter_vars}

    def producer_range(k: int, extent: int) -> None:
        dom = produced.get(p_store.indices[k])  # type: ignore[call-overload]
        if dom is None or E.const_int(dom.min) != 0 or E.const_int(dom.extent) != extent:
            raise ScheduleError(f"{where}: the producer's index {k} does not range over [0, {extent}), the digit "
                                "the block loads there")

    digits: dict[E.Var, list[tuple[int, int, E.PrimExpr]]] = {}
    problem = (f"{where}: the block must load the buffer with all of its iter vars, each once, as indices (an "
               "elementwise consumer), or at digits of them (`v // a % b`, `v % (a * b) // a`)")
    for k, index in enumerate(first):
        if E.const_int(index) == 0:
            producer_range(k, 1)
            continue
        split = _as_split(index)
        if split is None or split[0] not in domains:
            raise ScheduleError(problem)
        var, lower, extent = split
        dom = domains[var]
        size = E.const_int(dom.extent)
        if E.const_int(dom.min) != 0 or size is None:
            raise ScheduleError(f"{where}: iter var {var.name!r} must range over [0, constant)")
        digit = extent if extent is not None else -(-size // lower)
        producer_range(k, digit)
        digits.setdefault(var, []).append((lower, digit, p_store.indices[k]))
    vmap: dict[E.Var, E.PrimExpr] = {}
    for var, parts in digits.items():
        parts.sort(key=lambda d: d[0])
        place = 1
        total: E.PrimExpr | None = None
        for lower, extent, out in parts:
            if lower != place:
                raise ScheduleError(f"{where}: the digits of {var.name!r} in the load leave gaps or overlap")
            term = out if lower == 1 else E.Mul(out, E.IntImm(out.dtype, lower), out.dtype)
            total = term if total is None else E.Add(total, term, out.dtype)
            place *= extent
        if place != E.const_int(domains[var].extent) or total is None:
            raise ScheduleError(f"{where}: the digits of {var.name!r} in the load do not cover its domain")
        vmap[var] = total
    missing = [v.name for v in domains if v not in vmap]
    if missing:
        raise ScheduleError(f"{problem}; iter var(s) {missing} are missing")
    return vmap


class _LoadReplacer(IRMutator):
    """Replaces every load of `buffer` by `value`."""

    def __init__(self, buffer: E.Buffer, value: E.PrimExpr) -> None:
        super().__init__()
        self.buffer = buffer
        self.value = value

    def visit_BufferLoad(self, node: E.BufferLoad) -> E.PrimExpr:
        if node.buffer is self.buffer:
            return self.value
        return super().visit_BufferLoad(node)


def _loads(node: object, buffer: E.Buffer) -> list[E.BufferLoad]:
    found: list[E.BufferLoad] = []

    class _V(IRVisitor):
        def visit_BufferLoad(self, n: E.BufferLoad) -> None:
            super().visit_BufferLoad(n)
            if n.buffer is buffer:
                found.append(n)

    _V().visit(node)
    return found


def _uses_buffer(block: S.Block, buffer: E.Buffer) -> bool:
    if any(r.buffer is buffer for r in block.reads) or any(w.buffer is buffer for w in block.writes):
        return True
    return bool(_loads(block.body, buffer)) or (block.init is not None and bool(_loads(block.init, buffer)))


def _all_blocks(scope_block: S.Block) -> list[S.Block]:
    """Every block nested anywhere under the scope block (consumers may sit in inner scopes)."""
    out: list[S.Block] = []

    class _V(IRVisitor):
        def visit_Block(self, n: S.Block) -> None:
            out.append(n)
            self.visit(n.body)
            if n.init is not None:
                self.visit(n.init)

        def visit_PrimExpr(self, n: E.PrimExpr) -> None:
            return None

        def visit_BlockRealize(self, n: S.BlockRealize) -> None:
            self.visit(n.block)

    v = _V()
    v.visit(scope_block.body)
    return out
