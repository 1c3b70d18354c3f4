"""IR-level lowering: a scheduled PrimFunc (blocks, annotations, caches) becomes a plain loop
program of For / IfThenElse / LetStmt / BufferStore / Allocate that `emit` turns into LLVM IR.

The passes mirror TVM's TIR pipeline for CPU (LowerInitBlock, ConvertBlocksToOpaque,
LowerOpaqueBlock, PlanAndUpdateBufferAllocationLocation, CompactBufferAllocation, UnrollLoop)
because the tuner's measurements have to reflect what TVM would build from the same trace: an
accumulator tile that TVM compacts into registers must be compacted here too, or msdb would
rank schedules differently from TVM.

    func = lower_func(func)   # reads top to bottom in `lower_func`
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Callable

from msdb.ir import expr as E
from msdb.ir import stmt as S
from msdb.ir.arith import Affine, affine_form, const_int_bound, simplify
from msdb.ir.arith.affine import term_expr
from msdb.ir.function import IRModule, PrimFunc
from msdb.ir.functor import IRMutator, IRVisitor, substitute
from msdb.tuner.codegen.analysis import Allocate, stmt_children, static_shape, substitute_lowered, vars_in
from msdb.tuner.codegen.errors import CodegenError

__all__ = ["Allocate", "LoweredFunc", "lower_func", "lower_module", "NOOP"]

logger = logging.getLogger(__name__)

#: TVM's loop annotations that the auto-unroll postprocessor leaves on the outermost loops.
UNROLL_MAX_STEP = "pragma_auto_unroll_max_step"
UNROLL_EXPLICIT = "pragma_unroll_explicit"
#: TVM's UnrollLoop default for auto_max_depth.
_AUTO_MAX_DEPTH = 8


#: The statement that does nothing (an empty loop, a block whose predicate is false).
NOOP = S.Evaluate(E.IntImm("int32", 0))


@dataclass(frozen=True, eq=False)
class LoweredFunc:
    """A function ready for emission: its name, argument buffers in order, and the loop body."""

    name: str
    params: tuple[E.Buffer, ...]
    body: S.Stmt
    noalias: bool = True


def lower_module(mod: IRModule | PrimFunc) -> LoweredFunc:
    """Lower the entry function of a module (or a lone PrimFunc)."""
    if isinstance(mod, PrimFunc):
        return lower_func(mod, "main")
    name = next((k for k, f in mod.functions.items() if f is mod.main), "main")
    return lower_func(mod.main, name)


def lower_func(func: PrimFunc, name: str = "main") -> LoweredFunc:
    """The lowering pipeline, one pass per line."""
    params = _param_buffers(func)                       # the kernel's pointer arguments, in order
    lowering = _BlockLowering()
    body = lowering.stmt(func.body)                     # blocks -> loops, ifs and stores; init guarded by reduce vars == min
    body = plan_allocations(body, lowering.allocs)      # each intermediate lives at the LCA of its uses (per thread inside parallel loops)
    body = compact_allocations(body)                    # shrink each allocation to the region its scope touches (register tiles)
    body = align_allocations(body, lowering.dim_aligns)  # storage_align: padded strides, after compaction as in TVM
    body = apply_unroll_pragmas(body)                   # meta_schedule's auto-unroll annotations -> UNROLLED loops (TVM's UnrollLoop)
    symbol = str(func.attrs.get("global_symbol", name))
    # TVM marks buffer pointers noalias only under this attribute (TE functions set it); the
    # caller then promises not to pass one array for two arguments.
    noalias = bool(func.attrs.get("tir.noalias", False) or func.attrs.get("tirx.noalias", False))
    return LoweredFunc(_c_identifier(symbol), params, body, noalias)


def _c_identifier(name: str) -> str:
    clean = "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in name)
    return clean if clean and not clean[0].isdigit() else f"f_{clean}"


def _param_buffers(func: PrimFunc) -> tuple[E.Buffer, ...]:
    buffers = []
    for param in func.params:
        buf = func.buffer_map.get(param)
        if buf is None:
            raise CodegenError(
                f"parameter {param.name} ({param.dtype}) is not a buffer; the CPU code generator only "
                "takes buffer arguments"
            )
        static_shape(buf)
        buffers.append(buf)
    return tuple(buffers)


# =============================================================================================
# Blocks -> loops
# =============================================================================================


def _is_const(e: E.PrimExpr, value: int) -> bool:
    return type(e) is E.IntImm and e.value == value


def _and_all(conds: list[E.PrimExpr]) -> E.PrimExpr:
    out = conds[0]
    for c in conds[1:]:
        out = E.And(out, c)
    return out


class _MatchBufferRewriter(IRMutator):
    """Accesses of a `match_buffer` view become accesses of its source at the region's offset."""

    def __init__(self, views: dict[E.Buffer, S.BufferRegion]) -> None:
        super().__init__()
        self.views = views

    def _map(self, buf: E.Buffer, indices: tuple[E.PrimExpr, ...]) -> tuple[E.Buffer, tuple[E.PrimExpr, ...]]:
        region = self.views[buf]
        lead = len(region.region) - len(indices)
        if lead < 0:
            raise CodegenError(f"match_buffer {buf.name} has more dimensions than its source {region.buffer.name}")
        out = [r.min for r in region.region[:lead]]
        for rng, index in zip(region.region[lead:], indices):
            out.append(index if _is_const(rng.min, 0) else E.Add(rng.min, index))
        return region.buffer, tuple(out)

    def visit_BufferLoad(self, node: E.BufferLoad) -> E.PrimExpr:
        indices = self._exprs(node.indices)
        if node.buffer in self.views:
            buf, idx = self._map(node.buffer, indices)
            return E.BufferLoad(buf, idx)
        return node if indices is node.indices else E.BufferLoad(node.buffer, indices)

    def visit_BufferStore(self, node: S.BufferStore) -> S.Stmt:
        value = self.visit(node.value)
        indices = self._exprs(node.indices)
        if node.buffer in self.views:
            buf, idx = self._map(node.buffer, indices)
            return S.BufferStore(buf, value, idx)
        if value is node.value and indices is node.indices:
            return node
        return S.BufferStore(node.buffer, value, indices)


class _IndexSimplifier(IRMutator):
    """Simplifies buffer indices under the enclosing loop ranges (TVM's Simplify pass): block
    bodies substituted with their bindings carry things like `(co_2 * 8 + co_3) // 64` that are
    constant over the loops, and the vectorizer needs them gone to see contiguous accesses."""

    def __init__(self, owner: "_BlockLowering") -> None:
        super().__init__()
        self.owner = owner

    def visit_BufferLoad(self, node: E.BufferLoad) -> E.PrimExpr:
        indices = tuple(self.owner.simplify(self.visit(i)) for i in node.indices)
        if all(a is b for a, b in zip(indices, node.indices)):
            return node
        return E.BufferLoad(node.buffer, indices)

    def visit_BufferStore(self, node: S.BufferStore) -> S.Stmt:
        value = self.visit(node.value)
        indices = tuple(self.owner.simplify(self.visit(i)) for i in node.indices)
        if value is node.value and all(a is b for a, b in zip(indices, node.indices)):
            return node
        return S.BufferStore(node.buffer, value, indices)


class _BlockLowering:
    """Replaces every BlockRealize by its body with iter vars bound to their values, the
    predicate as an `if`, and the init under `if all reduce vars are at their minimum` (TVM's
    LowerInitBlock rule). Loops of extent 1 disappear (their var becomes the loop min)."""

    def __init__(self, keep_threads: bool = False) -> None:
        #: GPU lowering keeps thread-bound loops (even of extent 1: they fix launch extents)
        self.keep_threads = keep_threads
        self.allocs: list[E.Buffer] = []
        #: storage_align requests (block annotation "buffer_dim_align"): buffer name -> axis ->
        #: (factor, offset)
        self.dim_aligns: dict[str, dict[int, tuple[int, int]]] = {}
        self.ranges: dict[E.Var, E.Range] = {}
        self.unit: dict[E.Var, E.PrimExpr] = {}
        self.indices = _IndexSimplifier(self)

    def sub(self, node: Any) -> Any:
        return substitute(node, self.unit) if self.unit else node

    def simplify(self, e: E.PrimExpr) -> E.PrimExpr:
        try:
            return simplify(e, self.ranges)
        except Exception:  # the simplifier is an optimization here; never let it block lowering
            logger.debug("simplify failed on %r", e, exc_info=True)
            return e

    def stmt(self, s: S.Stmt) -> S.Stmt:
        t = type(s)
        if isinstance(s, S.For):
            return self.loop(s)
        if isinstance(s, S.SeqStmt):
            parts = [self.stmt(x) for x in s.seq]
            parts = [p for p in parts if p is not NOOP]
            return S.seq(*parts) if parts else NOOP
        if isinstance(s, S.IfThenElse):
            cond = self.simplify(self.sub(s.condition))
            then = self.stmt(s.then_case)
            other = self.stmt(s.else_case) if s.else_case is not None else None
            if other is NOOP:
                other = None
            if _is_const(cond, 1):
                return then
            if _is_const(cond, 0):
                return other if other is not None else NOOP
            return S.IfThenElse(cond, then, other)
        if isinstance(s, S.LetStmt):
            return S.LetStmt(s.var, self.sub(s.value), self.stmt(s.body))
        if isinstance(s, S.BlockRealize):
            return self.realize(s)
        if isinstance(s, S.Block):
            return self.realize(S.BlockRealize((), E.IntImm("bool", 1), s))
        if isinstance(s, S.BufferStore):
            return self.indices.visit(self.sub(s))
        if isinstance(s, S.Evaluate):
            return self.indices.visit(self.sub(s))
        raise CodegenError(f"cannot lower statement {t.__name__}")

    def loop(self, s: S.For) -> S.Stmt:
        lo = self.simplify(self.sub(s.min))
        ext = self.simplify(self.sub(s.extent))
        bound = self.keep_threads and s.kind == S.ForKind.THREAD_BINDING
        if _is_const(ext, 1) and not bound and not any(k.startswith("pragma_") for k in s.annotations):
            self.unit[s.loop_var] = lo
            try:
                return self.stmt(s.body)
            finally:
                del self.unit[s.loop_var]
        if type(ext) is E.IntImm and ext.value <= 0:
            return NOOP
        self.ranges[s.loop_var] = E.Range(lo, ext)
        try:
            body = self.stmt(s.body)
        finally:
            del self.ranges[s.loop_var]
        if body is NOOP:
            return NOOP
        if bound:
            return S.For(s.loop_var, lo, ext, s.kind, body, s.thread_binding, s.annotations)
        kind = S.ForKind.SERIAL if s.kind == S.ForKind.THREAD_BINDING else s.kind
        return S.For(s.loop_var, lo, ext, kind, body, None, s.annotations)

    def realize(self, r: S.BlockRealize) -> S.Stmt:
        block = r.block
        if len(r.iter_values) != len(block.iter_vars):
            raise CodegenError(f"block {block.name_hint} binds {len(r.iter_values)} values to {len(block.iter_vars)} iter vars")
        vmap = {iv.var: self.simplify(self.sub(v)) for iv, v in zip(block.iter_vars, r.iter_values)}
        body = substitute(block.body, vmap)
        init = substitute(block.init, vmap) if block.init is not None else None
        if block.match_buffers:
            views = {m.buffer: substitute(m.source, vmap) for m in block.match_buffers}
            rewriter = _MatchBufferRewriter(views)
            body = rewriter.visit(body)
            init = rewriter.visit(init) if init is not None else None
        self.allocs.extend(block.alloc_buffers)
        for buffer_index, axis, factor, offset in block.annotations.get("buffer_dim_align", ()):
            buffer = block.writes[_int(buffer_index)].buffer
            self.dim_aligns.setdefault(buffer.name, {})[_int(axis)] = (_int(factor), _int(offset))
        body = self.stmt(body)
        if init is not None:
            init = self.stmt(init)
            conds = []
            for iv in block.iter_vars:
                if iv.iter_type != S.IterType.COMM_REDUCE:
                    continue
                dom_min = iv.dom.min if iv.dom is not None else E.IntImm(iv.var.dtype, 0)
                value = vmap[iv.var]
                if dom_min.dtype != value.dtype:
                    dom_min = E.Cast(value.dtype, dom_min)
                conds.append(self.simplify(E.EQ(value, dom_min)))
            conds = [c for c in conds if not _is_const(c, 1)]
            if any(_is_const(c, 0) for c in conds):
                init = None
            elif conds:
                init = S.IfThenElse(_and_all(conds), init)
            if init is not None and init is not NOOP:
                body = init if body is NOOP else S.seq(init, body)
        pred = self.simplify(self.sub(r.predicate))
        if _is_const(pred, 0):
            return NOOP
        if not _is_const(pred, 1) and body is not NOOP:
            body = S.IfThenElse(pred, body)
        return body


# =============================================================================================
# Allocation placement
# =============================================================================================


class _BufferUses(IRVisitor):
    """Buffers loaded in an expression."""

    def __init__(self) -> None:
        super().__init__()
        self.found: set[E.Buffer] = set()

    def visit_BufferLoad(self, node: E.BufferLoad) -> None:
        self.found.add(node.buffer)
        for index in node.indices:
            self.visit(index)


def _own_buffer_uses(s: S.Stmt) -> set[E.Buffer]:
    """Buffers used by a statement's own expressions (not its sub-statements)."""
    uses = _BufferUses()
    if isinstance(s, S.BufferStore):
        uses.found.add(s.buffer)
        uses.visit(s.value)
        for i in s.indices:
            uses.visit(i)
    elif isinstance(s, S.Evaluate):
        uses.visit(s.value)
    elif isinstance(s, S.IfThenElse):
        uses.visit(s.condition)
    elif isinstance(s, S.LetStmt):
        uses.visit(s.value)
    elif isinstance(s, S.For):
        uses.visit(s.min)
        uses.visit(s.extent)
    return uses.found


def _collect_paths(body: S.Stmt, wanted: set[E.Buffer]) -> dict[E.Buffer, list[tuple[int, ...]]]:
    paths: dict[E.Buffer, list[tuple[int, ...]]] = {}

    def walk(s: S.Stmt, path: tuple[int, ...]) -> None:
        for buf in _own_buffer_uses(s):
            if buf in wanted:
                paths.setdefault(buf, []).append(path)
        for i, child in enumerate(stmt_children(s)):
            walk(child, path + (i,))

    walk(body, ())
    return paths


def _node_at(root: S.Stmt, path: tuple[int, ...]) -> S.Stmt:
    node = root
    for i in path:
        node = stmt_children(node)[i]
    return node


def _with_child(s: S.Stmt, i: int, child: S.Stmt) -> S.Stmt:
    t = type(s)
    if isinstance(s, S.SeqStmt):
        items = list(s.seq)
        items[i] = child
        return S.SeqStmt(tuple(items))
    if isinstance(s, S.For):
        return S.For(s.loop_var, s.min, s.extent, s.kind, child, s.thread_binding, s.annotations)
    if isinstance(s, S.LetStmt):
        return S.LetStmt(s.var, s.value, child)
    if isinstance(s, S.IfThenElse):
        if i == 0:
            return S.IfThenElse(s.condition, child, s.else_case)
        return S.IfThenElse(s.condition, s.then_case, child)
    if isinstance(s, Allocate):
        return Allocate(s.buffer, child)
    raise AssertionError(f"{t.__name__} has no children")


def _replace_at(root: S.Stmt, path: tuple[int, ...], fn: Callable[[S.Stmt], S.Stmt]) -> S.Stmt:
    if not path:
        return fn(root)
    child = stmt_children(root)[path[0]]
    return _with_child(root, path[0], _replace_at(child, path[1:], fn))


def _common_prefix(paths: list[tuple[int, ...]]) -> tuple[int, ...]:
    first = paths[0]
    n = len(first)
    for p in paths[1:]:
        n = min(n, len(p))
        for k in range(n):
            if p[k] != first[k]:
                n = k
                break
    return first[:n]


def plan_allocations(body: S.Stmt, buffers: list[E.Buffer]) -> S.Stmt:
    """Wrap the lowest common ancestor of each buffer's uses in an `Allocate` (TVM's rule).

    Inside a loop the buffer is allocated per iteration (so a parallel loop gives each thread
    its own), never inside a vectorized loop (lanes must share it for the vector code). A
    buffer nobody uses is dropped."""
    wanted = set(buffers)
    for buf in buffers:
        static_shape(buf)
        paths = _collect_paths(body, {buf}).get(buf)
        if not paths:
            logger.debug("dropping unused buffer %s", buf.name)
            continue
        lca = _common_prefix(paths)
        # never inside a vectorized loop: stop at the outermost one on the path
        node = body
        for depth, i in enumerate(lca):
            if type(node) is S.For and node.kind == S.ForKind.VECTORIZED:
                lca = lca[:depth]
                break
            node = stmt_children(node)[i]
        node = _node_at(body, lca)
        # descend into loop bodies when every use is inside (allocate per iteration)
        while (isinstance(node, S.For) and node.kind != S.ForKind.VECTORIZED
               and all(len(p) > len(lca) for p in paths)):
            lca = lca + (0,)
            node = node.body
        if isinstance(node, S.SeqStmt):
            below = [p[len(lca)] for p in paths if len(p) > len(lca)]
            first, last = min(below), max(below)
            if (first, last) != (0, len(node.seq) - 1):
                def wrap_range(s: S.Stmt, first: int = first, last: int = last, buf: E.Buffer = buf) -> S.Stmt:
                    assert isinstance(s, S.SeqStmt)
                    inner = Allocate(buf, S.seq(*s.seq[first:last + 1]))
                    return S.SeqStmt(tuple(s.seq[:first]) + (inner,) + tuple(s.seq[last + 1:]))

                body = _replace_at(body, lca, wrap_range)
                continue

        def wrap(s: S.Stmt, buf: E.Buffer = buf) -> S.Stmt:
            return Allocate(buf, s)

        body = _replace_at(body, lca, wrap)
    del wanted
    return body


# =============================================================================================
# Compaction
# =============================================================================================


class _LoopRanges(IRVisitor):
    """Ranges of every loop under a statement and the vars bound by lets."""

    def __init__(self) -> None:
        super().__init__()
        self.ranges: dict[E.Var, E.Range] = {}
        self.lets: set[E.Var] = set()
        self.threads: dict[E.Var, str] = {}  # thread-bound loop var -> thread tag

    def visit_For(self, node: S.For) -> None:
        self.ranges[node.loop_var] = E.Range(node.min, node.extent)
        tag = _thread_tag(node)
        if tag is not None:
            self.threads[node.loop_var] = tag
        self.visit(node.body)

    def visit_LetStmt(self, node: S.LetStmt) -> None:
        self.lets.add(node.var)
        self.visit(node.body)

    def visit_Allocate(self, node: Allocate) -> None:
        self.visit(node.body)

    def visit_PrimExpr(self, node: E.PrimExpr) -> None:
        pass


class _AccessCollector(IRVisitor):
    """Every access of one buffer: its indices and the conditions that guard it (the
    enclosing `if`s, a lowered block's predicate among them)."""

    def __init__(self, buf: E.Buffer) -> None:
        super().__init__()
        self.buf = buf
        self.accesses: list[tuple[E.PrimExpr, ...]] = []
        self.guards: list[tuple[E.PrimExpr, ...]] = []
        self.stored_vars: set[E.Var] = set()  # variables of the values stored into the buffer
        self._guards: list[E.PrimExpr] = []

    def _record(self, indices: tuple[E.PrimExpr, ...]) -> None:
        self.accesses.append(indices)
        self.guards.append(tuple(self._guards))

    def visit_BufferLoad(self, node: E.BufferLoad) -> None:
        if node.buffer is self.buf:
            self._record(node.indices)
        for i in node.indices:
            self.visit(i)

    def visit_BufferStore(self, node: S.BufferStore) -> None:
        if node.buffer is self.buf:
            self._record(node.indices)
            self.stored_vars |= vars_in(node.value)
        self.visit(node.value)
        for i in node.indices:
            self.visit(i)

    def visit_IfThenElse(self, node: S.IfThenElse) -> None:
        self.visit(node.condition)
        depth = len(self._guards)
        self._guards.extend(_conjuncts(node.condition))
        self.visit(node.then_case)
        del self._guards[depth:]
        if node.else_case is not None:
            self.visit(node.else_case)

    def visit_Allocate(self, node: Allocate) -> None:
        self.visit(node.body)


def _conjuncts(cond: E.PrimExpr) -> list[E.PrimExpr]:
    if isinstance(cond, E.And):
        return _conjuncts(cond.a) + _conjuncts(cond.b)
    return [cond]


def _guarded_bound(expr: E.PrimExpr, guards: tuple[E.PrimExpr, ...], ranges: dict[E.Var, E.Range]) -> tuple[int, int]:
    """Bounds of `expr` over `ranges`, tightened by each guard `G < C` where G is a fused loop
    index (`f0 * e1 + f1`: loops in mixed radix, the last of extent 1's step): each of G's
    loops is rewritten as a digit of one variable g in [0, C), so `f0 * 28 + f1 // 16` under
    `f0 * 448 + f1 < 512` reads `g // 16` and is at most 31. A cooperative fetch fused over a
    tile and cut by its predicate touches only the tile; TVM's CompactBufferAllocation
    estimates regions under the block's predicate too."""
    lo, hi = const_int_bound(expr, ranges)
    if not guards:  # most accesses: nothing to tighten (compaction runs for every build)
        return lo, hi
    used = vars_in(expr)
    for guard in guards:
        if not isinstance(guard, (E.LT, E.LE)):
            continue
        bound = E.const_int(guard.b)
        if bound is None:
            continue
        form = affine_form(guard.a)
        digits = _radix_digits(form, ranges)
        if digits is None or not used & {var for var, _, _ in digits}:
            continue
        limit = bound - (1 if isinstance(guard, E.LT) else 0) - form.const
        span = digits[-1][1] * digits[-1][2]  # the values G's loops can reach
        if limit < 0 or limit + 1 >= span:
            continue
        fused = E.Var("fused", guard.a.dtype)
        vmap: dict[E.Var, E.PrimExpr] = {}
        for i, (var, step, extent) in enumerate(digits):
            digit: E.PrimExpr = E.FloorDiv(fused, E.IntImm(var.dtype, step)) if step > 1 else fused
            vmap[var] = digit if i == len(digits) - 1 else E.FloorMod(digit, E.IntImm(var.dtype, extent))
        bounded = {**ranges, fused: E.Range(E.IntImm(fused.dtype, 0), E.IntImm(fused.dtype, limit + 1))}
        g_lo, g_hi = const_int_bound(simplify(substitute(expr, vmap), bounded), bounded)
        if max(lo, g_lo) <= min(hi, g_hi):  # guards that contradict each other: dead code, left alone
            lo, hi = max(lo, g_lo), min(hi, g_hi)
    return lo, hi


def _radix_digits(form: Affine, ranges: dict[E.Var, E.Range]) -> list[tuple[E.Var, int, int]] | None:
    """[(loop var, step, extent)] from the fastest digit up when `form` (its constant aside) is
    a fused loop index: loop variables from 0, steps 1, e0, e0 * e1, ...; else None."""
    digits = []
    for term, coef in form.terms.items():
        rng = ranges.get(term) if isinstance(term, E.Var) else None
        extent = E.const_int(rng.extent) if rng is not None else None
        if rng is None or extent is None or E.const_int(rng.min) != 0 or coef <= 0:
            return None
        digits.append((term, coef, extent))
    digits.sort(key=lambda d: d[1])
    step = 1
    for _, coef, extent in digits:
        if coef != step:
            return None
        step *= extent
    return digits or None


def _dim_plan(indices: list[E.PrimExpr], guards: list[tuple[E.PrimExpr, ...]], inner: set[E.Var],
              ranges: dict[E.Var, E.Range], extent: int) -> tuple[int, int] | None:
    """(offset-from-outer-part lo, new extent) for one dimension, or None to keep it."""
    signature = None
    lo_all, hi_all = None, None
    for index, guard in zip(indices, guards):
        form = affine_form(index)
        inner_keys, outer = [], []
        for term, coef in form.terms.items():
            used = vars_in(term_expr(term))
            has_inner = bool(used & inner)
            if has_inner and (used - inner):
                return None
            if has_inner:
                inner_keys.append(term)
            else:
                outer.append((term, coef))
        sig = frozenset(outer)
        if signature is None:
            signature = sig
        elif sig != signature:
            return None
        inner_expr = form.render(index.dtype, inner_keys)
        lo, hi = _guarded_bound(inner_expr, guard, ranges)
        if hi - lo >= extent:
            return None
        lo_all = lo if lo_all is None else min(lo_all, lo)
        hi_all = hi if hi_all is None else max(hi_all, hi)
    assert lo_all is not None and hi_all is not None
    new_extent = hi_all - lo_all + 1
    if new_extent >= extent:
        return None
    return lo_all, new_extent


class _Compactor(IRMutator):
    """Rewrites accesses of one buffer: dimension d's index keeps only its inner part minus lo."""

    def __init__(self, old: E.Buffer, new: E.Buffer, plans: list[tuple[int, int] | None], inner: set[E.Var],
                 prefix: E.PrimExpr | None = None) -> None:
        super().__init__()
        self.old, self.new, self.plans, self.inner = old, new, plans, inner
        self.prefix = prefix  # the index of a new leading dimension (a virtual thread's copy)

    def _indices(self, indices: tuple[E.PrimExpr, ...]) -> tuple[E.PrimExpr, ...]:
        out = [] if self.prefix is None else [self.prefix]
        for index, plan in zip(indices, self.plans):
            if plan is None:
                out.append(index)
                continue
            form = affine_form(index)
            keys = [t for t in form.terms if vars_in(term_expr(t)) & self.inner]
            shifted = Affine(form.terms, form.const - plan[0])
            out.append(shifted.render(index.dtype, keys))
        return tuple(out)

    def visit_BufferLoad(self, node: E.BufferLoad) -> E.PrimExpr:
        indices = self._exprs(node.indices)
        if node.buffer is self.old:
            return E.BufferLoad(self.new, self._indices(indices))
        return node if indices is node.indices else E.BufferLoad(node.buffer, indices)

    def visit_BufferStore(self, node: S.BufferStore) -> S.Stmt:
        value = self.visit(node.value)
        indices = self._exprs(node.indices)
        if node.buffer is self.old:
            return S.BufferStore(self.new, value, self._indices(indices))
        if value is node.value and indices is node.indices:
            return node
        return S.BufferStore(node.buffer, value, indices)

    def visit_Allocate(self, node: Allocate) -> S.Stmt:
        body = self.visit(node.body)
        return node if body is node.body else Allocate(node.buffer, body)


#: Whether an allocation of this buffer is shared by the threads of this thread tag (TVM's
#: CanRelaxStorageUnderThread): None on the CPU, where there are no thread-bound loops.
RelaxThread = Callable[[E.Buffer, str], bool]


def _thread_tag(loop: S.For) -> str | None:
    if loop.kind == S.ForKind.THREAD_BINDING and loop.thread_binding is not None:
        return loop.thread_binding.thread_tag
    return None


class _CompactPass(IRMutator):
    def __init__(self, relax_thread: RelaxThread | None = None) -> None:
        super().__init__()
        self.relax_thread = relax_thread
        self.enclosing: list[S.For] = []  # thread-bound loops around the current statement

    def visit_For(self, node: S.For) -> S.Stmt:
        if self.relax_thread is None or _thread_tag(node) is None:
            return super().visit_For(node)
        self.enclosing.append(node)
        try:
            return super().visit_For(node)
        finally:
            self.enclosing.pop()

    def visit_Allocate(self, node: Allocate) -> S.Stmt:
        body = self.visit(node.body)
        buf = node.buffer
        if buf.strides:
            return Allocate(buf, body) if body is not node.body else node
        shape = static_shape(buf)
        loops = _LoopRanges()
        loops.visit(body)
        inner = set(loops.ranges) | loops.lets
        collector = _AccessCollector(buf)
        collector.visit(body)
        if not collector.accesses:
            return body
        copies: list[tuple[E.Var, int]] = []  # virtual threads that each get their own copy
        if self.relax_thread is not None:
            copies = self._thread_scopes(buf, loops, inner, collector)
        plans: list[tuple[int, int] | None] = []
        for d, extent in enumerate(shape):
            plans.append(_dim_plan([acc[d] for acc in collector.accesses], collector.guards, inner, loops.ranges,
                                   extent))
        if all(p is None for p in plans):
            return Allocate(buf, body) if body is not node.body else node
        new_shape = tuple(
            E.IntImm("int32", p[1] if p is not None else extent) for p, extent in zip(plans, shape)
        )
        prefix = None
        if copies:
            count = 1
            for _, extent in copies:
                count *= extent
            new_shape = (E.IntImm("int32", count),) + new_shape
            prefix = _linear_index(copies)
        new_buf = E.Buffer(buf.name, new_shape, buf.dtype, buf.scope, (), None, buf.data_alignment,
                           buf.offset_factor, buf.axis_separators)
        logger.debug("compacted %s %s -> %s", buf.name, shape, tuple(int(d.value) for d in new_shape))
        body = _Compactor(buf, new_buf, plans, inner, prefix).visit(body)
        return Allocate(new_buf, body)

    def _thread_scopes(self, buf: E.Buffer, loops: _LoopRanges, inner: set[E.Var],
                       collector: _AccessCollector) -> list[tuple[E.Var, int]]:
        """GPU: a thread-bound loop is relaxed (the allocation spans its threads, `inner`
        grows by it) iff the buffer's scope is shared by those threads, wherever the loop sits.
        A virtual thread around the allocation whose variable the buffer's accesses use (in an
        index or a stored value: TVM's "touched") and that does not share the buffer gets a copy
        of its own instead, as TVM's InjectVirtualThread gives it (returned with its count: the
        buffer's new leading dimension), so the compacted region is one virtual thread's, not
        the span of all. A vthread loop inside the allocation is relaxed, as before: the
        allocation has accesses outside it, which a copy index could not name."""
        assert self.relax_thread is not None
        relax = self.relax_thread
        used: set[E.Var] = set()
        for indices in collector.accesses:
            for index in indices:
                used |= vars_in(index)
        used |= collector.stored_vars
        def spans(tag: str) -> bool:
            return relax(buf, tag) or tag.startswith("vthread")

        for var, inner_tag in loops.threads.items():
            if not spans(inner_tag):
                inner.discard(var)
        copies: list[tuple[E.Var, int]] = []
        for loop in self.enclosing:
            tag = _thread_tag(loop)
            extent = E.const_int(loop.extent)
            if tag is None:
                continue
            if (tag.startswith("vthread") and not relax(buf, tag) and extent is not None
                    and E.const_int(loop.min) == 0 and loop.loop_var in used):
                copies.append((loop.loop_var, extent))
            elif spans(tag):
                inner.add(loop.loop_var)
                loops.ranges[loop.loop_var] = E.Range(loop.min, loop.extent)
        return copies


def _linear_index(copies: list[tuple[E.Var, int]]) -> E.PrimExpr:
    """Row-major linear index of the virtual threads' copies."""
    index: E.PrimExpr | None = None
    for var, extent in copies:
        index = var if index is None else E.Add(E.Mul(index, E.IntImm(var.dtype, extent)), var)
    assert index is not None
    return index


def _int(value: Any) -> int:
    return int(value.value) if isinstance(value, E.IntImm) else int(value)


class _AlignPass(IRMutator):
    def __init__(self, aligns: dict[str, dict[int, tuple[int, int]]]) -> None:
        super().__init__()
        self.aligns = aligns

    def visit_Allocate(self, node: Allocate) -> S.Stmt:
        body = self.visit(node.body)
        buf = node.buffer
        align = self.aligns.get(buf.name)
        if not align or buf.strides:
            return node if body is node.body else Allocate(buf, body)
        shape = static_shape(buf)
        strides: list[int] = []
        stride = 1
        for axis in range(len(shape) - 1, -1, -1):  # TVM's CompactBufferAllocation rule
            if axis in align:
                factor, offset = align[axis]
                stride += (factor + offset - stride % factor) % factor
            strides.append(stride)
            stride *= shape[axis]
        strides.reverse()
        new_buf = E.Buffer(buf.name, buf.shape, buf.dtype, buf.scope, tuple(E.IntImm("int32", st) for st in strides),
                           None, buf.data_alignment, buf.offset_factor, buf.axis_separators)
        logger.debug("storage_align %s: strides %s", buf.name, strides)
        return Allocate(new_buf, _Compactor(buf, new_buf, [None] * len(shape), set()).visit(body))


def align_allocations(body: S.Stmt, aligns: dict[str, dict[int, tuple[int, int]]]) -> S.Stmt:
    """Give each allocation a storage_align asked for (buffer name -> axis -> (factor,
    offset)) padded strides: stride[axis] % factor == offset, inner dimensions first."""
    return _AlignPass(aligns).visit(body) if aligns else body


def compact_allocations(body: S.Stmt, relax_thread: RelaxThread | None = None) -> S.Stmt:
    """Shrink every `Allocate` to the region its scope touches (relaxing the loops inside it),
    re-basing indices; dimensions whose accesses disagree on the outer offset stay whole.

    On the GPU (`relax_thread` given) a thread-bound loop counts as relaxed when the buffer's
    scope is shared by its threads (shared memory spans threadIdx, a local array does not),
    whether it sits inside or around the allocation (TVM's CompactBufferAllocation); a virtual
    thread around it that does not share the buffer gets a copy of its own (`_thread_scopes`).
    On both, an access under a guard on a fused loop index is bounded under it
    (`_guarded_bound`)."""
    return _CompactPass(relax_thread).visit(body)


# =============================================================================================
# Auto-unroll annotations
# =============================================================================================


def _const_extent(loop: S.For) -> int | None:
    return loop.extent.value if type(loop.extent) is E.IntImm else None


class _AutoUnroll:
    """TVM's UnrollLoop rule under `pragma_auto_unroll_max_step`: a serial loop is unrolled when
    nothing below it is a kept loop and extent * (statements below) <= max_step. A vectorized
    loop counts as one statement (TVM vectorizes before unrolling), and so does a loop `intrinsic`
    names (a dp4a loop: one call in TVM); a statement that uses vthread variables counts once per
    virtual thread (TVM injects virtual threads before unrolling). With `expand` (TVM's explicit
    unroll) an unrolled loop becomes its body once per iteration, the loop variable a constant:
    NVRTC compiles straight-line code in seconds where the same loops under `#pragma unroll`
    took it minutes (docs/architecture.md, "CUDA")."""

    def __init__(self, max_step: int, expand: bool = False,
                 intrinsic: Callable[[S.For], bool] | None = None) -> None:
        self.max_step = max_step
        self.expand = expand
        self.intrinsic = intrinsic
        self.vthreads: dict[E.Var, int] = {}

    def visit(self, s: S.Stmt) -> tuple[S.Stmt, int, bool, int]:
        """(stmt, steps, has_kept_loop, unroll_depth)"""
        if isinstance(s, S.For):
            if self.intrinsic is not None and self.intrinsic(s):
                return s, self._copies(s), False, 0
            tag, vextent = _thread_tag(s), _const_extent(s)
            if tag is not None and tag.startswith("vthread") and vextent is not None:
                self.vthreads[s.loop_var] = vextent
            try:
                body, steps, normal, depth = self.visit(s.body)
            finally:
                self.vthreads.pop(s.loop_var, None)
            if s.kind == S.ForKind.THREAD_BINDING:  # a launch dimension, not a loop (GPU only)
                return self._rebuild(s, body, s.kind), steps, normal, depth
            ext = _const_extent(s)
            if s.kind == S.ForKind.VECTORIZED and ext is not None:
                return self._rebuild(s, body, s.kind), steps, normal, depth
            auto = (s.kind == S.ForKind.SERIAL and ext is not None and not normal
                    and depth <= _AUTO_MAX_DEPTH and ext * steps <= self.max_step)
            if s.kind == S.ForKind.UNROLLED and ext is not None:
                auto = True
            if auto and ext is not None:
                out = self._expanded(s, body, ext) if self.expand else self._rebuild(s, body, S.ForKind.UNROLLED)
                return out, ext * steps, False, depth + 1
            return self._rebuild(s, body, s.kind), steps, True, depth
        if isinstance(s, S.SeqStmt):
            parts, total, normal, depth = [], 0, False, 0
            for x in s.seq:
                p, st, nm, d = self.visit(x)
                parts.append(p)
                total += st
                normal = normal or nm
                depth = max(depth, d)
            return S.SeqStmt(tuple(parts)), total, normal, depth
        if isinstance(s, S.IfThenElse):
            then, st1, nm1, d1 = self.visit(s.then_case)
            if s.else_case is not None:
                other, st2, nm2, d2 = self.visit(s.else_case)
            else:
                other, st2, nm2, d2 = None, 0, False, 0
            return S.IfThenElse(s.condition, then, other), st1 + st2, nm1 or nm2, max(d1, d2)
        if isinstance(s, S.LetStmt):
            body, st, nm, d = self.visit(s.body)
            return S.LetStmt(s.var, s.value, body), st, nm, d
        if isinstance(s, Allocate):
            body, st, nm, d = self.visit(s.body)
            return Allocate(s.buffer, body), st, nm, d
        return s, self._copies(s), False, 0

    def _copies(self, s: S.Stmt) -> int:
        """How many statements `s` is once virtual threads are injected."""
        count = 1
        if self.vthreads:
            for var in vars_in(s):
                count *= self.vthreads.get(var, 1)
        return count

    @staticmethod
    def _expanded(s: S.For, body: S.Stmt, extent: int) -> S.Stmt:
        """The body once per iteration; arrays allocated inside are allocated once, around
        the copies (the iterations run in turn, so they can share them)."""
        buffers: list[E.Buffer] = []
        body = _without_allocations(body, buffers)
        parts: list[S.Stmt] = []
        for i in range(extent):
            value = simplify(E.Add(s.min, E.IntImm(s.loop_var.dtype, i)))
            step = substitute_lowered(body, {s.loop_var: value})
            parts.extend(step.seq if isinstance(step, S.SeqStmt) else (step,))
        out: S.Stmt = S.SeqStmt(tuple(parts)) if parts else NOOP
        for buf in reversed(buffers):
            out = Allocate(buf, out)
        return out

    @staticmethod
    def _rebuild(s: S.For, body: S.Stmt, kind: S.ForKind) -> S.Stmt:
        if body is s.body and kind == s.kind:
            return s
        return S.For(s.loop_var, s.min, s.extent, kind, body, s.thread_binding, s.annotations)


class _AllocationHoist(IRMutator):
    def __init__(self, buffers: list[E.Buffer]) -> None:
        super().__init__()
        self.buffers = buffers

    def visit_Allocate(self, node: Allocate) -> S.Stmt:
        self.buffers.append(node.buffer)
        return self.visit(node.body)


def _without_allocations(body: S.Stmt, buffers: list[E.Buffer]) -> S.Stmt:
    """`body` with its `Allocate`s removed, their buffers appended to `buffers`."""
    out: S.Stmt = _AllocationHoist(buffers).visit(body)
    return out


def _pragma_value(value: Any) -> int:
    if isinstance(value, E.IntImm):
        return int(value.value)
    return int(value)


def apply_unroll_pragmas(s: S.Stmt, implicit: bool = False, expand: bool = False,
                         intrinsic: Callable[[S.For], bool] | None = None) -> S.Stmt:
    """Loops annotated `pragma_auto_unroll_max_step` (with `pragma_unroll_explicit` true, as
    MetaSchedule writes them) get TVM's auto-unroll decisions applied to their subtree. Without
    the explicit flag TVM's LLVM backend ignores the hint, and so does this pass, unless
    `implicit`: the CUDA backend marks those loops `#pragma unroll` for NVCC instead. With
    `expand` (the CUDA backend) explicitly unrolled loops are written out, as TVM writes them;
    `intrinsic` names loops that stay whole (see `_AutoUnroll`)."""
    if isinstance(s, S.For):
        ann = s.annotations
        if UNROLL_MAX_STEP in ann:
            explicit = bool(_pragma_value(ann.get(UNROLL_EXPLICIT, 1)))
            max_step = _pragma_value(ann[UNROLL_MAX_STEP])
            if max_step > 0 and (implicit or explicit):
                out, _, _, _ = _AutoUnroll(max_step, expand and explicit, intrinsic).visit(s)
                return out
        body = apply_unroll_pragmas(s.body, implicit, expand, intrinsic)
        return s if body is s.body else S.For(s.loop_var, s.min, s.extent, s.kind, body, s.thread_binding, s.annotations)
    children = stmt_children(s)
    out = s
    for i, child in enumerate(children):
        new = apply_unroll_pragmas(child, implicit, expand, intrinsic)
        if new is not child:
            out = _with_child(out, i, new)
    return out


# =============================================================================================
# Debug printing
# =============================================================================================


def _fmt_expr(e: Any) -> str:
    t = type(e)
    if isinstance(e, E.Var):
        return e.name
    if isinstance(e, E.IntImm):
        return str(e.value) if e.dtype in ("int32", "bool") else f"{e.dtype}({e.value})"
    if isinstance(e, E.FloatImm):
        return repr(e.value)
    if isinstance(e, E.BufferLoad):
        return f"{e.buffer.name}[{', '.join(_fmt_expr(i) for i in e.indices)}]"
    if isinstance(e, E.BinaryOp):
        sym = {E.Add: "+", E.Sub: "-", E.Mul: "*", E.Div: "/", E.FloorDiv: "//", E.FloorMod: "%",
               E.EQ: "==", E.NE: "!=", E.LT: "<", E.LE: "<=", E.GT: ">", E.GE: ">=", E.And: "and",
               E.Or: "or"}.get(t)
        if sym is None:
            return f"{t.__name__.lower()}({_fmt_expr(e.a)}, {_fmt_expr(e.b)})"
        return f"({_fmt_expr(e.a)} {sym} {_fmt_expr(e.b)})"
    if isinstance(e, E.Not):
        return f"not {_fmt_expr(e.a)}"
    if isinstance(e, E.Cast):
        return f"{e.dtype}({_fmt_expr(e.value)})"
    if isinstance(e, E.Select):
        return f"select({_fmt_expr(e.condition)}, {_fmt_expr(e.true_value)}, {_fmt_expr(e.false_value)})"
    if isinstance(e, E.Call):
        return f"{e.op}({', '.join(_fmt_expr(a) for a in e.args)})"
    return repr(e)


def format_lowered(node: S.Stmt | LoweredFunc, indent: int = 0) -> str:
    """A readable listing of a lowered body (for logs, tests and debugging)."""
    if isinstance(node, LoweredFunc):
        head = f"def {node.name}({', '.join(f'{b.name}: {b.dtype}{list(static_shape(b))}' for b in node.params)}):"
        return head + "\n" + format_lowered(node.body, 1)
    pad = "    " * indent
    if isinstance(node, S.SeqStmt):
        return "\n".join(format_lowered(x, indent) for x in node.seq)
    if isinstance(node, S.For):
        kind = "" if node.kind == S.ForKind.SERIAL else f" {node.kind.script_name}"
        head = f"{pad}for {node.loop_var.name} in range({_fmt_expr(node.min)}, +{_fmt_expr(node.extent)}){kind}:"
        return head + "\n" + format_lowered(node.body, indent + 1)
    if isinstance(node, S.IfThenElse):
        out = f"{pad}if {_fmt_expr(node.condition)}:\n" + format_lowered(node.then_case, indent + 1)
        if node.else_case is not None:
            out += f"\n{pad}else:\n" + format_lowered(node.else_case, indent + 1)
        return out
    if isinstance(node, S.LetStmt):
        return f"{pad}{node.var.name} = {_fmt_expr(node.value)}\n" + format_lowered(node.body, indent)
    if isinstance(node, Allocate):
        shape = [int(d.value) if type(d) is E.IntImm else _fmt_expr(d) for d in node.buffer.shape]
        return f"{pad}{node.buffer.name} = alloc({node.buffer.dtype}{shape}, {node.buffer.scope})\n" + format_lowered(node.body, indent)
    if isinstance(node, S.BufferStore):
        return f"{pad}{node.buffer.name}[{', '.join(_fmt_expr(i) for i in node.indices)}] = {_fmt_expr(node.value)}"
    if isinstance(node, S.Evaluate):
        return f"{pad}{_fmt_expr(node.value)}"
    return f"{pad}{node!r}"
