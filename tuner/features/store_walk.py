"""One walk over a scheduled function that records, for every buffer store, the loops around it and
what it touches at each loop level: the raw material of TVM's per-store features
(`per_store_feature.cc`).

It reads the scheduled IR directly and derives what TVM's lowering would give (unit loops,
bindings, inits, allocation placement, decided conditions, relaxed regions), without lowering
each candidate. The rules and the one deliberate difference from TVM: see docs/architecture.md,
"Features and cost model".
"""

from __future__ import annotations

import functools
from typing import Any

from msdb.identity_cache import IdentityCache, KeyCache
from msdb.ir import expr as E
from msdb.ir import stmt as S
from msdb.ir.arith.affine import Affine, Atom, Term, affine_form
from msdb.ir.arith.interval import Bound, ExprBounds, is_finite
from msdb.ir.arith.keys import expr_key
from msdb.ir.dtype import bits, is_float
from msdb.ir.function import PrimFunc
from msdb.ir.functor import IRVisitor, free_vars, post_order_visit

__all__ = [
    "READ", "WRITE", "READ_WRITE", "LOOP_MULTIPLE_READ", "SERIAL_MULTIPLE_READ_WRITE", "NO_REUSE", "N_ARITH",
    "FLOAT_OPS", "Loop", "Index", "Access", "StoreSite", "Allocation", "FunctionStores", "walk_function",
    "storage_bytes",
]

# Access kinds and reuse kinds, in TVM's one-hot order.
READ, WRITE, READ_WRITE = 0, 1, 2
LOOP_MULTIPLE_READ, SERIAL_MULTIPLE_READ_WRITE, NO_REUSE = 0, 1, 2

# Arithmetic counters, in TVM's order: 7 float counters, 7 integer counters, bool ops, selects.
# The integer counter of a kind is its float counter + 7. MAD counters stay 0, as in TVM.
_ADD_SUB, _MUL, _DIV_MOD, _CMP, _MATH_FUNC, _OTHER_FUNC = 1, 2, 3, 4, 5, 6
_INT = 7
_BOOL_OP, _SELECT = 14, 15
N_ARITH = 16
#: The float counters (TVM's group 3 sums these).
FLOAT_OPS = range(0, 7)

_BINARY_KIND: dict[type, int] = {
    E.Add: _ADD_SUB, E.Sub: _ADD_SUB, E.Mul: _MUL, E.Div: _DIV_MOD, E.Mod: _DIV_MOD, E.FloorDiv: _DIV_MOD,
    E.FloorMod: _DIV_MOD, E.Min: _CMP, E.Max: _CMP, E.EQ: _CMP, E.NE: _CMP, E.LT: _CMP, E.LE: _CMP, E.GT: _CMP,
    E.GE: _CMP,
}


def _binary_kind(cls: type) -> int | None:
    """The counter of a binary node class (subclasses count as their nearest known base)."""
    kind = _BINARY_KIND.get(cls)
    if kind is None:
        for klass in cls.__mro__[1:]:
            kind = _BINARY_KIND.get(klass)
            if kind is not None:
                _BINARY_KIND[cls] = kind
                break
    return kind


#: Calls TVM marks with a side effect (everything else, `if_then_else` and the math functions
#: included, is pure and counts as a math function).
_IMPURE_CALLS = frozenset({
    "call_extern", "call_llvm_intrin", "call_packed", "call_cpacked", "tvm_call_packed", "tvm_call_cpacked",
    "tvm_storage_sync", "tvm_access_ptr", "address_of", "tvm_thread_allreduce", "tvm_warp_shuffle",
    "tvm_warp_shuffle_up", "tvm_warp_shuffle_down", "tvm_warp_activemask", "prefetch",
})

#: Interval ends beyond this are unbounded (an atom over a variable without a range).
_HUGE = 1 << 62


@functools.lru_cache(maxsize=None)
def storage_bytes(dtype: str) -> int:
    """Bytes one element of `dtype` occupies (TVM's `DataType::StorageBytes`)."""
    lanes = dtype.partition("x")[2]
    return (bits(dtype) * (int(lanes) if lanes.isdigit() else 1) + 7) // 8


class Loop:
    """One loop of a nest: constant extents only (a symbolic extent counts as 1, as TVM's
    products skip it), its kind, thread tag and `pragma_auto_unroll_max_step` (0 if none)."""

    __slots__ = ("var", "min", "extent", "kind", "thread_tag", "auto_unroll")

    def __init__(self, node: S.For) -> None:
        self.var = node.loop_var
        lo, ext = E.const_int(node.min), E.const_int(node.extent)
        self.min = lo if lo is not None else 0
        self.extent = ext if ext is not None else 1
        self.kind = node.kind
        self.thread_tag = node.thread_binding.thread_tag if node.thread_binding is not None else ""
        step = node.annotations.get("pragma_auto_unroll_max_step")
        value = step.value if isinstance(step, E.IntImm) else step
        self.auto_unroll = value if isinstance(value, int) and value > 0 else 0


class Index:
    """An index as `const + sum(coef * loop at position p) + sum(coef * atom)`; an atom is
    `(coef, expr, positions of the loops it uses)`, its expr bounded through the bindings."""

    __slots__ = ("const", "coefs", "atoms")

    def __init__(self, const: int, coefs: dict[int, int], atoms: list[tuple[int, E.PrimExpr, frozenset[int]]]) -> None:
        self.const = const
        self.coefs = coefs
        self.atoms = atoms

    def uses(self) -> set[int]:
        """Positions of the loops whose variables appear in the index."""
        used = {p for p, c in self.coefs.items() if c}
        for _, _, positions in self.atoms:
            used |= positions
        return used

    def coef(self, position: int) -> int:
        """TVM's stride coefficient of a loop: its coefficient, 1 when it only appears inside an
        atom (`floormod(fused, 4)`), 0 when absent."""
        c = self.coefs.get(position, 0)
        if c:
            return c
        return 1 if any(position in positions for _, _, positions in self.atoms) else 0

    def int_ops(self, ops: list[int]) -> None:
        """Add the integer operations of the simplified index (one add per extra term or
        non-zero constant, one multiply per coefficient other than +-1, the operations inside
        each atom) to `ops`."""
        terms = sum(1 for c in self.coefs.values() if c) + len(self.atoms)
        if not terms:
            return
        ops[_INT + _ADD_SUB] += terms - 1 + (self.const != 0)
        ops[_INT + _MUL] += sum(1 for c in self.coefs.values() if c not in (0, 1, -1))
        for coef, expr, _ in self.atoms:
            if coef not in (1, -1):
                ops[_INT + _MUL] += 1
            _atom_ops(expr, ops)


def _atom_ops(expr: E.PrimExpr, ops: list[int]) -> None:
    """The integer operations of an atom's tree (`f % 8 // 4`: two)."""
    if isinstance(expr, E.BinaryOp):
        kind = _binary_kind(type(expr))
        if kind is not None:
            ops[_INT + kind] += 1
        _atom_ops(expr.a, ops)
        _atom_ops(expr.b, ops)
    elif isinstance(expr, E.Cast):
        _atom_ops(expr.value, ops)


class Access:
    """One buffer in one store: its access kind, index tuples, elements touched at each loop
    level (`numel[i]`: loops i..n-1 running), the access shape with every loop running, the
    positions of the loops its indices use, and its reuse."""

    __slots__ = ("buffer", "kind", "indices", "numel", "shape0", "uses", "reuse_type",
                 "reuse_dis_iter", "reuse_dis_bytes", "reuse_ct")

    def __init__(self, buffer: E.Buffer, kind: int, indices: list[list[Index]]) -> None:
        self.buffer = buffer
        self.kind = kind
        self.indices = indices
        self.numel: list[int] = []
        self.shape0: list[int] = []
        self.uses: set[int] = set()
        self.reuse_type = NO_REUSE
        self.reuse_dis_iter = 0.0
        self.reuse_dis_bytes = 0.0
        self.reuse_ct = 0


class StoreSite:
    """A store with a computed value: the buffer it writes, its loops (outermost first), their
    constant-extent product, arithmetic counts over the whole nest, its accesses and the bytes
    touched at each loop level."""

    __slots__ = ("buffer", "loops", "prod", "ops", "accesses", "touched_bytes", "loads")

    def __init__(self, buffer: E.Buffer, loops: tuple[Loop, ...], prod: int, ops: list[int],
                 accesses: list[Access], touched_bytes: list[int]) -> None:
        self.buffer = buffer
        self.loops = loops
        self.prod = prod
        self.ops = ops
        self.accesses = accesses
        self.touched_bytes = touched_bytes
        self.loads: list[tuple[E.Buffer, list[Index]]] = []  # every load (the ops count all of them)


class Allocation:
    """Where TVM's lowering would allocate a buffer the function allocates: under the deepest
    loop common to all its accesses, compacted to what the loops below touch."""

    __slots__ = ("shape", "outer_prod")

    def __init__(self, shape: tuple[int, ...], outer_prod: int) -> None:
        self.shape = shape
        self.outer_prod = outer_prod


class FunctionStores:
    """The stores of one function, in visiting order, and its allocations."""

    __slots__ = ("sites", "allocations")

    def __init__(self, sites: list[StoreSite], allocations: dict[E.Buffer, Allocation]) -> None:
        self.sites = sites
        self.allocations = allocations


# ---------------------------------------------------------------------------------------------
# What a store node does, independent of its loops (cached per node)
# ---------------------------------------------------------------------------------------------


class _StoreInfo:
    __slots__ = ("skip", "conditional", "ops", "var_uses", "indices", "loads")

    def __init__(self) -> None:
        self.skip = False
        self.conditional = False
        self.ops = [0] * N_ARITH
        self.var_uses: dict[E.Var, int] = {}
        self.indices: tuple[Affine[Term], ...] = ()
        self.loads: list[tuple[E.Buffer, tuple[Affine[Term], ...]]] = []


def _has_load(expr: E.PrimExpr) -> bool:
    found = False

    def visit(node: Any) -> None:
        nonlocal found
        if isinstance(node, E.BufferLoad):
            found = True

    post_order_visit(expr, visit)
    return found


def _forms(indices: tuple[E.PrimExpr, ...]) -> tuple[Affine[Term], ...]:
    return tuple(affine_form(i, assume_no_overflow=True) for i in indices)


#: Load index forms by the indices' structure (`expr_key`: variables by identity), so that loads
#: of one element (a Winograd transform loads each hundreds of times, through distinct nodes)
#: share their forms, and a store composes each once (`_Walker._store`).
_FORMS_BY_INDICES: KeyCache[tuple[Affine[Term], ...]] = KeyCache(1 << 16)


def _shared_forms(indices: tuple[E.PrimExpr, ...]) -> tuple[Affine[Term], ...]:
    return _FORMS_BY_INDICES.get(tuple(expr_key(i) for i in indices), lambda: _forms(indices))


_COMPARISONS = (E.EQ, E.NE, E.LT, E.LE, E.GT, E.GE)


class _ValueSummary(IRVisitor):
    """TVM's `ArithOpCounter` over a store's value, loads left for the index analysis: the
    operation counts per innermost iteration, the loads, and where variables appear outside
    load indices (their bindings' arithmetic counts there).

    A condition that the loops decide (`v_l * 2 + v_rl < 257` when it can reach 256 at most) is
    gone from TVM's simplified IR, and so is an `if_then_else` or select it decides: such parts
    count nothing here either. Without `loops` (the bounds of the loops around the store, the
    block iter vars through their bindings) nothing is decided, and the summary only notes
    that the value has conditions (`info.conditional`)."""

    def __init__(self, info: _StoreInfo, loops: ExprBounds | None) -> None:
        super().__init__()
        self.info = info
        self.loops = loops

    def truth(self, node: E.PrimExpr) -> bool | None:
        """The value of a condition over the whole nest, or None when it varies."""
        self.info.conditional = True
        if self.loops is None:
            return None
        if isinstance(node, (E.And, E.Or)):
            a, b = self.truth(node.a), self.truth(node.b)
            if isinstance(node, E.And):
                return False if a is False or b is False else (True if a and b else None)
            return True if a is True or b is True else (False if a is False and b is False else None)
        if isinstance(node, E.Not):
            inner = self.truth(node.a)
            return None if inner is None else not inner
        if isinstance(node, _COMPARISONS) and not is_float(node.a.dtype):
            (a_lo, a_hi), (b_lo, b_hi) = self.loops.of(node.a), self.loops.of(node.b)
            if not (is_finite(a_lo) and is_finite(a_hi) and is_finite(b_lo) and is_finite(b_hi)):
                return None
            if isinstance(node, E.LT):
                return True if a_hi < b_lo else (False if a_lo >= b_hi else None)
            if isinstance(node, E.LE):
                return True if a_hi <= b_lo else (False if a_lo > b_hi else None)
            if isinstance(node, E.GT):
                return True if a_lo > b_hi else (False if a_hi <= b_lo else None)
            if isinstance(node, E.GE):
                return True if a_lo >= b_hi else (False if a_hi < b_lo else None)
            if a_lo == a_hi == b_lo == b_hi:
                return isinstance(node, E.EQ)
            if a_hi < b_lo or b_hi < a_lo:
                return isinstance(node, E.NE)
        return None

    def visit_BinaryOp(self, node: E.BinaryOp) -> None:
        ops = self.info.ops
        if isinstance(node, (E.And, E.Or)):
            if self.truth(node) is not None:
                return
            # A decided side is simplified away, and the operator with it.
            a, b = self.truth(node.a), self.truth(node.b)
            if a is None and b is None:
                ops[_BOOL_OP] += 1
            if a is None:
                self.visit(node.a)
            if b is None:
                self.visit(node.b)
            return
        if isinstance(node, _COMPARISONS) and self.truth(node) is not None:
            return
        kind = _binary_kind(type(node))
        if kind is not None:
            ops[kind if is_float(node.dtype) else _INT + kind] += 1
        super().visit_BinaryOp(node)

    def visit_Not(self, node: E.Not) -> None:
        if self.truth(node) is not None:
            return
        self.info.ops[_BOOL_OP] += 1
        super().visit_Not(node)

    def visit_Select(self, node: E.Select) -> None:
        # TVM's SimplifyForFeatureExtraction makes a select without loads the constant 1.
        if not (_has_load(node.condition) or _has_load(node.true_value) or _has_load(node.false_value)):
            return
        decided = self.truth(node.condition)
        if decided is not None:
            self.visit(node.true_value if decided else node.false_value)
            return
        self.info.ops[_SELECT] += 1
        super().visit_Select(node)

    def visit_Call(self, node: E.Call) -> None:
        if node.op == "if_then_else" and len(node.args) == 3:
            decided = self.truth(node.args[0])
            if decided is not None:
                self.visit(node.args[1] if decided else node.args[2])
                return
        kind = _OTHER_FUNC if node.op in _IMPURE_CALLS else _MATH_FUNC
        self.info.ops[kind if is_float(node.dtype) else _INT + kind] += 1
        super().visit_Call(node)

    def visit_BufferLoad(self, node: E.BufferLoad) -> None:
        self.info.loads.append((node.buffer, _LOAD_FORMS.get(node, lambda: _shared_forms(node.indices))))

    def visit_Var(self, node: E.Var) -> None:
        uses = self.info.var_uses
        uses[node] = uses.get(node, 0) + 1


class _FixedBounds(ExprBounds):
    """Bounds over loop bounds and block bindings that stay as they are while it is used (one
    store's summary): a block iter var's bounds are those of its binding, worked out once (a
    Winograd transform's conditions read each iter var hundreds of times)."""

    __slots__ = ("_substituted",)

    def __init__(self, var_bounds: dict[E.Var, Bound], subst: dict[E.Var, E.PrimExpr]) -> None:
        super().__init__(var_bounds, subst, leaves_by_dtype=False)
        self._substituted: dict[E.Var, Bound] = {}

    def var(self, v: E.Var) -> Bound:
        known = self._substituted.get(v)
        if known is None:
            known = self._substituted[v] = super().var(v)
        return known


def _store_info(store: S.BufferStore, loops: ExprBounds | None) -> _StoreInfo:
    info = _StoreInfo()
    value = store.value
    if isinstance(value, (E.IntImm, E.FloatImm)) or (isinstance(value, E.Select) and not _has_load(value)):
        info.skip = True  # constant stores (reduction inits) have no row in TVM
        return info
    _ValueSummary(info, loops).visit(value)
    info.indices = _forms(store.indices)
    return info


#: A store's summary before any condition in it is decided, shared by the candidates (a block's
#: stores stay the same objects whatever its loops become).
_INFO_CACHE: IdentityCache[_StoreInfo] = IdentityCache(4096)
#: A load's index forms: a store whose conditions the loops decide is summarized again for each
#: candidate (which loads count depends on them), its loads' indices are not.
_LOAD_FORMS: IdentityCache[tuple[Affine[Term], ...]] = IdentityCache(1 << 16)


#: A conditional store's summary by the bounds of the variables its value reads (what decides
#: its conditions), and those variables.
_DECIDED_INFO: IdentityCache[_StoreInfo] = IdentityCache(4096)
_VALUE_VARS: IdentityCache[tuple[E.Var, ...]] = IdentityCache(4096)


def _cached_store_info(store: S.BufferStore) -> _StoreInfo:
    """What `store` computes, before any condition in it is decided."""
    return _INFO_CACHE.get(store, lambda: _store_info(store, None))


# ---------------------------------------------------------------------------------------------
# The walk: loops, bindings and stores
# ---------------------------------------------------------------------------------------------


class _Walker(IRVisitor):
    """Collects every computed store with its loops and its accesses' indices over loop
    positions; the analysis that needs all accesses (where allocations go) runs afterwards."""

    def __init__(self) -> None:
        super().__init__()
        self.loops: list[Loop] = []
        self.position: dict[E.Var, int] = {}
        self.prod = 1
        self.unit_vars: list[E.Var] = []
        self.iter_forms: dict[E.Var, Index] = {}
        self.iter_exprs: dict[E.Var, E.PrimExpr] = {}
        self.sites: list[StoreSite] = []
        self.declared: dict[E.Buffer, tuple[tuple[int, ...], tuple[Loop, ...]]] = {}
        self.constant_stores: dict[E.Buffer, list[tuple[Loop, ...]]] = {}

    # ---- statements ----
    def visit_For(self, node: S.For) -> None:
        extent = E.const_int(node.extent)
        if extent == 0:
            return
        if (extent == 1 and E.const_int(node.min) == 0 and node.kind == S.ForKind.SERIAL
                and not node.annotations):
            self.unit_vars.append(node.loop_var)
            self.visit(node.body)
            return
        loop = Loop(node)
        self.position[loop.var] = len(self.loops)
        self.loops.append(loop)
        self.prod *= loop.extent
        self.visit(node.body)
        self.prod //= loop.extent
        self.loops.pop()
        del self.position[loop.var]

    def visit_BlockRealize(self, node: S.BlockRealize) -> None:
        for iv, value in zip(node.block.iter_vars, node.iter_values):
            self.iter_forms[iv.var] = self._compose(affine_form(value, assume_no_overflow=True))
            self.iter_exprs[iv.var] = value
        self.visit(node.block)

    def visit_Block(self, node: S.Block) -> None:
        for buf in node.alloc_buffers:
            self.declared[buf] = (tuple(E.const_int(d) or 1 for d in buf.shape), tuple(self.loops))
        if node.init is not None:
            self.visit(node.init)
        self.visit(node.body)

    def visit_IfThenElse(self, node: S.IfThenElse) -> None:
        self.visit(node.then_case)
        if node.else_case is not None:
            self.visit(node.else_case)

    def visit_LetStmt(self, node: S.LetStmt) -> None:
        self.visit(node.body)

    def visit_Evaluate(self, node: S.Evaluate) -> None:
        pass

    def visit_BufferStore(self, node: S.BufferStore) -> None:
        info = _cached_store_info(node)
        if info.conditional:
            # Which conditions the loops decide depends on this schedule's loops, through the
            # bounds of the variables the value reads: summarized once per store and bounds.
            bounds: dict[E.Var, Bound] = {var: (0, 0) for var in self.unit_vars}
            for loop in self.loops:
                bounds[loop.var] = (loop.min, loop.min + loop.extent - 1)
            loops = _FixedBounds(bounds, self.iter_exprs)
            read = tuple(loops.var(var) for var in _VALUE_VARS.get(node, lambda: tuple(free_vars(node.value))))
            info = _DECIDED_INFO.get(node, lambda: _store_info(node, loops), read)
        if not info.skip:
            self._store(node, info)
        elif node.buffer in self.declared:
            # No row, but TVM allocates the buffer where this store can see it too.
            self.constant_stores.setdefault(node.buffer, []).append(tuple(self.loops))

    # ---- index forms ----
    def _compose(self, form: Affine[Term]) -> Index:
        """`form` (over loop vars, block iter vars and atoms) over loop positions."""
        const = form.const
        coefs: dict[int, int] = {}
        atoms: list[tuple[int, E.PrimExpr, frozenset[int]]] = []
        for term, c in form.terms.items():
            if isinstance(term, Atom):
                atoms.append((c, term.expr, self._positions(term.expr)))
                continue
            p = self.position.get(term)
            if p is not None:
                coefs[p] = coefs.get(p, 0) + c
                continue
            inner = self.iter_forms.get(term)
            if inner is None:
                continue  # a dropped unit loop (0) or a symbol without a range
            const += c * inner.const
            for q, k in inner.coefs.items():
                coefs[q] = coefs.get(q, 0) + c * k
            for k, expr, positions in inner.atoms:
                atoms.append((c * k, expr, positions))
        return Index(const, coefs, atoms)

    def _positions(self, expr: E.PrimExpr) -> frozenset[int]:
        found: set[int] = set()
        for var in free_vars(expr):
            p = self.position.get(var)
            if p is not None:
                found.add(p)
            elif var in self.iter_forms:
                found |= self.iter_forms[var].uses()
        return frozenset(found)

    def _store(self, store: S.BufferStore, info: _StoreInfo) -> None:
        # A form of one buffer met again (a Winograd transform loads one element hundreds of
        # times) composes to the same Index. Sharing it within a buffer is safe: the changes
        # made to an Index later (`_fold_constant_atoms`, and `_drop_outer` at the buffer's
        # one allocation depth) give the same result done twice. Across buffers it is not:
        # `_drop_outer` would strip a global buffer's index at another buffer's depth.
        composed: dict[tuple[int, int], Index] = {}

        def compose(buffer: E.Buffer, form: Affine[Term]) -> Index:
            key = (id(buffer), id(form))
            index = composed.get(key)
            if index is None:
                index = composed[key] = self._compose(form)
            return index

        # Accesses in TVM's order of discovery: the written buffer, then each load (a loaded
        # written buffer becomes read-write and keeps only the written indices).
        written = Access(store.buffer, WRITE, [[compose(store.buffer, f) for f in info.indices]])
        accesses: dict[E.Buffer, Access] = {store.buffer: written}
        loads = []
        # A read access's index tuples only matter as a set (regions, strides and allocations
        # take their union, their smallest stride, their largest extent): a tuple of the same
        # Index objects as one it has is not added again.
        read_tuples: set[tuple[int, ...]] = set()
        for buffer, forms in info.loads:
            indices = [compose(buffer, f) for f in forms]
            loads.append((buffer, indices))
            access = accesses.get(buffer)
            identity = (id(buffer), *map(id, indices))
            if access is None:
                accesses[buffer] = Access(buffer, READ, [indices])
                read_tuples.add(identity)
            elif access.kind == WRITE:
                access.kind = READ_WRITE
            elif access.kind == READ and identity not in read_tuples:
                read_tuples.add(identity)
                access.indices.append(indices)
        ops = list(info.ops)
        for var, count in info.var_uses.items():
            form = self.iter_forms.get(var)
            if form is not None:
                for _ in range(count):
                    form.int_ops(ops)
        site = StoreSite(store.buffer, tuple(self.loops), self.prod, ops, list(accesses.values()), [])
        site.loads = loads
        self.sites.append(site)


# ---------------------------------------------------------------------------------------------
# The analysis of the collected stores
# ---------------------------------------------------------------------------------------------


class _Analysis:
    """Allocations, then each store's regions and reuse in visiting order (TVM's reuse looks at
    what the stores before it touched under each loop)."""

    def __init__(self, walker: _Walker) -> None:
        self.sites = walker.sites
        self.declared = walker.declared
        self.constant_stores = walker.constant_stores
        self.bounds: dict[E.Var, Bound] = {var: (0, 0) for var in walker.unit_vars}
        self.evaluator = ExprBounds(self.bounds, walker.iter_exprs, leaves_by_dtype=False)
        # TVM's buffer_touched_under_loop: for each loop, each buffer's touched element counts of
        # every store under it so far.
        self.touched: dict[Loop, dict[E.Buffer, list[int]]] = {}

    def run(self) -> FunctionStores:
        for site in self.sites:
            if any(ix.atoms for a in site.accesses for tup in a.indices for ix in tup):
                self._fold_constant_atoms(site)
        allocations = self._allocations()
        for site in self.sites:
            # Load indices count as integer arithmetic once allocations have compacted them.
            ops = site.ops
            for _, indices in site.loads:
                for ix in indices:
                    ix.int_ops(ops)
            site.ops = [c * site.prod for c in ops]
            site.touched_bytes = self._regions(site.loops, site.accesses)
            for access in site.accesses:
                access.uses = set().union(*(ix.uses() for tup in access.indices for ix in tup))
                if site.loops:
                    self._reuse(site.loops, access, site.accesses)
        return FunctionStores(self.sites, allocations)

    def _set_bounds(self, loops: tuple[Loop, ...], relaxed_from: int) -> None:
        bounds = self.bounds
        for p, loop in enumerate(loops):
            lo = loop.min
            bounds[loop.var] = (lo, lo + loop.extent - 1) if p >= relaxed_from else (lo, lo)

    def _fold_constant_atoms(self, site: StoreSite) -> None:
        """An atom with a single value over the whole nest is that constant."""
        self._set_bounds(site.loops, 0)
        of = self.evaluator.of
        for access in site.accesses:
            for tup in access.indices:
                for ix in tup:
                    if not ix.atoms:
                        continue
                    kept = []
                    for coef, expr, positions in ix.atoms:
                        lo, hi = of(expr)
                        if lo == hi and is_finite(lo):
                            ix.const += coef * lo
                        else:
                            kept.append((coef, expr, positions))
                    ix.atoms = kept

    def _vars_read(self, atoms: list[tuple[int, E.PrimExpr, frozenset[int]]]) -> set[E.Var]:
        """Every variable whose bounds `_atom_bound(atoms)` reads: the atoms' own, and through
        the block iter vars' bindings, the loops they stand for."""
        subst = self.evaluator.subst or {}
        seen: set[E.Var] = set()
        pending = [expr for _, expr, _ in atoms]
        while pending:
            for var in free_vars(pending.pop()):
                if var not in seen:
                    seen.add(var)
                    if var in subst:
                        pending.append(subst[var])
        return seen

    def _atom_bound(self, atoms: list[tuple[int, E.PrimExpr, frozenset[int]]]) -> Bound:
        a_lo = a_hi = 0
        of = self.evaluator.of
        for coef, expr, _ in atoms:
            b_lo, b_hi = of(expr)
            if coef >= 0:
                a_lo += coef * b_lo
                a_hi += coef * b_hi
            else:
                a_lo += coef * b_hi
                a_hi += coef * b_lo
        return a_lo, a_hi

    # ---- allocations ----
    def _allocations(self) -> dict[E.Buffer, Allocation]:
        """Each allocated buffer where TVM's lowering puts it: under the deepest loop common to
        its accesses, shaped to what the loops below touch (never above the declared shape),
        its indices relative to that loop (the outer loops' terms dropped, as compaction
        subtracts them)."""
        uses: dict[E.Buffer, list[tuple[StoreSite, Access]]] = {}
        for site in self.sites:
            for access in site.accesses:
                if access.buffer in self.declared:
                    uses.setdefault(access.buffer, []).append((site, access))
        out: dict[E.Buffer, Allocation] = {}
        for buffer, (declared, declared_loops) in self.declared.items():
            found = uses.get(buffer)
            if not found:
                out[buffer] = Allocation(declared, _product(loop.extent for loop in declared_loops))
                continue
            common = found[0][0].loops
            depth = len(common)
            for loops in [site.loops for site, _ in found[1:]] + self.constant_stores.get(buffer, []):
                depth = min(depth, len(loops))
                for d in range(depth):
                    if loops[d] is not common[d]:
                        depth = d
                        break
            has_atoms = any(ix.atoms for _, a in found for t in a.indices for ix in t)
            extents = [1] * len(declared)
            for site, access in found:
                if has_atoms:
                    self._set_bounds(site.loops, depth)
                for tup in access.indices:
                    for d, ix in enumerate(tup):
                        ext = 1
                        for p, c in ix.coefs.items():
                            if p >= depth:
                                ext += abs(c) * (site.loops[p].extent - 1)
                        if ix.atoms:
                            a_lo, a_hi = self._atom_bound(ix.atoms)
                            ext += a_hi - a_lo
                        extents[d] = max(extents[d], ext)
            if depth:
                for site, access in found:
                    tuples = access.indices + [ix for b, ix in site.loads if b is buffer]
                    for tup in tuples:
                        for ix in tup:
                            _drop_outer(ix, depth)
            compact = tuple(min(declared[d], extents[d]) for d in range(len(declared)))
            out[buffer] = Allocation(compact, _product(loop.extent for loop in common[:depth]))
        return out

    # ---- regions and reuse ----
    def _regions(self, loops: tuple[Loop, ...], accesses: list[Access]) -> list[int]:
        """Fill each access's elements touched per level (TVM's SetRegion, loops i..n-1
        running at level i) and its access shape with every loop running; return the bytes all
        accesses touch per level."""
        n = len(loops)
        lo: list[int] = []
        hi: list[int] = []
        deltas: list[list[tuple[int, int, int]]] = [[] for _ in range(n)]
        atom_slots: list[tuple[int, list[tuple[int, E.PrimExpr, frozenset[int]]], set[E.Var]]] = []
        layouts: list[list[list[int]]] = []
        for access in accesses:
            layout = []
            for tup in access.indices:
                slots = []
                for ix in tup:
                    s = len(lo)
                    base = ix.const
                    for p, c in ix.coefs.items():
                        loop = loops[p]
                        base += c * loop.min
                        span = c * (loop.extent - 1)
                        if span > 0:
                            deltas[p].append((s, 0, span))
                        elif span < 0:
                            deltas[p].append((s, span, 0))
                    lo.append(base)
                    hi.append(base)
                    if ix.atoms:
                        atom_slots.append((s, ix.atoms, self._vars_read(ix.atoms)))
                    slots.append(s)
                layout.append(slots)
            layouts.append(layout)
        atom_lo = [0] * len(lo)
        atom_hi = [0] * len(lo)
        touched_bytes = [0] * n
        if atom_slots:
            self._set_bounds(loops, n)
        for i in range(n - 1, -1, -1):
            for s, dlo, dhi in deltas[i]:
                lo[s] += dlo
                hi[s] += dhi
            if atom_slots:
                loop = loops[i]
                self.bounds[loop.var] = (loop.min, loop.min + loop.extent - 1)
                for s, atoms, reads in atom_slots:
                    # a slot whose atoms do not read this loop keeps its bounds (all are
                    # bounded at the innermost level, every loop fixed but that one)
                    if i == n - 1 or loop.var in reads:
                        atom_lo[s], atom_hi[s] = self._atom_bound(atoms)
            total = 0
            under = self.touched.setdefault(loops[i], {})
            for access, layout in zip(accesses, layouts):
                buffer = access.buffer
                numel = 1
                extents = []
                for d in range(len(layout[0])):
                    if len(layout) == 1:
                        s = layout[0][d]
                        ext = hi[s] + atom_hi[s] - lo[s] - atom_lo[s] + 1
                    else:
                        ext = (max(hi[t[d]] + atom_hi[t[d]] for t in layout)
                               - min(lo[t[d]] + atom_lo[t[d]] for t in layout) + 1)
                    if ext > _HUGE:
                        dim = E.const_int(buffer.shape[d])
                        ext = dim if dim is not None else 1
                    numel *= ext
                    extents.append(ext)
                numel = max(0, numel)
                access.numel.append(numel)
                access.shape0 = extents
                total += numel * storage_bytes(buffer.dtype)
                under.setdefault(buffer, []).append(numel)
            touched_bytes[i] = total
        for access in accesses:
            if n == 0:
                access.shape0 = [1] * len(access.buffer.shape)
            else:
                access.numel.reverse()  # recorded innermost level first
        return touched_bytes

    def _reuse(self, loops: tuple[Loop, ...], access: Access, accesses: list[Access]) -> None:
        """TVM's SetReuse: the innermost loop whose variable the buffer's indices do not use
        (the same data again each iteration), or under which the buffer was touched before
        (serial reuse)."""
        n = len(loops)
        for i in range(n - 1, -1, -1):
            loop = loops[i]
            if i not in access.uses:
                access.reuse_type = LOOP_MULTIPLE_READ
                access.reuse_ct = loop.extent
                dis_iter = 1
                for j in range(i + 1, n):
                    dis_iter *= loops[j].extent
                access.reuse_dis_iter = float(dis_iter)
                if i == n - 1:
                    # TVM's "top loop touch bytes": one element of each buffer of the store
                    access.reuse_dis_bytes = float(sum(storage_bytes(a.buffer.dtype) for a in accesses))
                else:
                    access.reuse_dis_bytes = float(_bytes_under(self.touched[loops[i + 1]]))
                return
            touched = self.touched[loop][access.buffer]
            if len(touched) >= 2:
                access.reuse_type = SERIAL_MULTIPLE_READ_WRITE
                access.reuse_ct = len(touched) - 1
                access.reuse_dis_iter = min(touched) / loop.extent
                access.reuse_dis_bytes = _bytes_under(self.touched[loop]) / loop.extent
                return


def _drop_outer(ix: Index, depth: int) -> None:
    """Index `ix` relative to an allocation under the first `depth` loops: terms of those loops
    go (compaction subtracts them), atoms that use only them too."""
    ix.coefs = {p: c for p, c in ix.coefs.items() if p >= depth}
    if ix.atoms:
        ix.atoms = [a for a in ix.atoms if not a[2] or max(a[2]) >= depth]


def _bytes_under(under: dict[E.Buffer, list[int]]) -> int:
    return sum(sum(numels) * storage_bytes(buffer.dtype) for buffer, numels in under.items())


def _product(values: Any) -> int:
    result = 1
    for v in values:
        result *= v
    return result


def walk_function(func: PrimFunc) -> FunctionStores:
    """The stores of `func` with their loop nests and accesses, and its allocations."""
    walker = _Walker()
    walker.visit(func.body)
    return _Analysis(walker).run()
