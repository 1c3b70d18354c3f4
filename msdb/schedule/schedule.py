"""`Schedule`: TVM's scheduling primitives over msdb's IR, each recorded into a trace.

This file holds the core (the symbol table of random variables, the trace being recorded,
seeding, copying, the internal helpers every primitive uses) and, below it, the getters, the
loop primitives and the sampling primitives. Block primitives come from the `BlockPrimitives`
mixin; the integer simplification the loop primitives rely on is `msdb.ir.arith`, the sampling
distributions are `msdb.schedule.sampling`.

Internal API for primitive implementations (stable; mixins rely on it):
- `self._state`: `ScheduleState` (module + index); `self._func_name`: function worked on.
- `self._block(rv) -> Block`, `self._block_name(rv) -> str`, `self._loop(rv) -> For`,
  `self._value(rv_or_int) -> int`.
- `self._new_block_rv(name) -> BlockRV`, `self._new_loop_rv(var) -> LoopRV`,
  `self._new_expr_rv(value) -> ExprRV`.
- `self._record(kind, inputs, attrs, outputs, decision=None)`: append an instruction.
- `self._atomic()`: context manager; on ScheduleError the state and the symbol table are
  restored, so a failed primitive leaves the schedule unchanged and usable.

Added with the loop primitives (also usable by mixins):
- `self._for(rv) -> For` (clear error for the root/inline marks), `self._loop_mark(rv)` ->
  "root" | "inline" | None for LoopRVs from `sample_compute_location` (ROOT_MARK/INLINE_MARK),
- `self._realize(name)`, `self._scope_of(node)`, `self._outer_loops(node)`,
  `self._producers_of(name)`, `self._consumers_of(name)` (TVM's RAW/WAW order),
- `self._probe(fn) -> bool`: run fn and undo it (TVM's CanComputeAt/CanComputeInline),
- module helpers `child_block_realizes(stmt)`, `scope_dependencies(scope_block)`.

Primitives keep loop identity: a loop they do not replace keeps its `Var` (so its LoopRVs stay
valid); loops they create get fresh Vars named as TVM names them (`i_0`, `i_j_fused`). They
rewrite only the subtree they change and let `ScheduleState.replace` rebuild the ancestors.
"""

from __future__ import annotations

import bisect
import contextlib
import logging
import random
from typing import Any, Callable, Iterator, Sequence

from msdb.errors import ScheduleError
from msdb.ir import expr as E
from msdb.ir import stmt as S
from msdb.ir.arith import Analyzer, simplify
from msdb.ir.dtype import bits as dtype_bits
from msdb.ir.function import IRModule, PrimFunc
from msdb.ir.functor import IRMutator, free_vars
from msdb.schedule import sampling
from msdb.schedule.block_primitives import INLINE_MARK, ROOT_MARK, BlockPrimitives
from msdb.schedule.instruction import Instruction
from msdb.schedule.rv import RV, BlockRV, ExprRV, LoopRV
from msdb.schedule.state import ScheduleState

logger = logging.getLogger(__name__)


#: Symbol-table values of the LoopRVs `sample_compute_location` returns for its non-loop
#: decisions: -1 "compute root" (leave the block where it is) and -2 "inline" (TVM's
#: RootMark/InlineMark). compute_at/reverse_compute_at accept them (block_primitives uses the
#: same strings, ROOT_MARK and INLINE_MARK, defined there); a loop is always a `Var`, so the
#: strings never clash with a loop.

_THREAD_AXES = frozenset(
    ["blockIdx.x", "blockIdx.y", "blockIdx.z", "threadIdx.x", "threadIdx.y", "threadIdx.z",
     "vthread", "vthread.x", "vthread.y", "vthread.z"]
)


def _int_const(value: int, dtype: str = "int32") -> E.IntImm:
    return E.IntImm(dtype, int(value))


def _is_one(expr: E.PrimExpr) -> bool:
    return type(expr) is E.IntImm and expr.value == 1


def _is_zero(expr: E.PrimExpr) -> bool:
    return type(expr) is E.IntImm and expr.value == 0


def _fold_mul(a: E.PrimExpr, b: E.PrimExpr) -> E.PrimExpr:
    """a * b with the constant folding TVM's `*` operator does (what ends up in predicates)."""
    ca, cb = E.const_int(a), E.const_int(b)
    if ca is not None and cb is not None:
        return _int_const(ca * cb, a.dtype)
    if ca == 1 or cb == 0:
        return b
    if cb == 1 or ca == 0:
        return a
    return E.Mul(a, b, a.dtype)


def _fold_add(a: E.PrimExpr, b: E.PrimExpr) -> E.PrimExpr:
    ca, cb = E.const_int(a), E.const_int(b)
    if ca is not None and cb is not None:
        return _int_const(ca + cb, a.dtype)
    if ca == 0:
        return b
    if cb == 0:
        return a
    return E.Add(a, b, a.dtype)


def _fold_and(a: E.PrimExpr, b: E.PrimExpr) -> E.PrimExpr:
    """a && b with TVM's folding of constant operands."""
    if type(a) is E.IntImm:
        return b if a.value else a
    if type(b) is E.IntImm:
        return a if b.value else b
    return E.And(a, b, "bool")


def _uses_var(expr: Any, var: E.Var) -> bool:
    """True if `var` occurs in the expression (fast path for the common tiny bindings)."""
    t = type(expr)
    if t is E.Var:
        return expr is var
    if t is E.IntImm or t is E.FloatImm or t is E.StringImm:
        return False
    if isinstance(expr, E.BinaryOp):
        return _uses_var(expr.a, var) or _uses_var(expr.b, var)
    return var in free_vars(expr)


def _uses_any(expr: Any, variables: set[E.Var]) -> E.Var | None:
    if not variables:
        return None
    for v in free_vars(expr):
        if v in variables:
            return v
    return None


def child_block_realizes(stmt: S.Stmt | None) -> list[S.BlockRealize]:
    """Block realizes under `stmt` (itself included), in execution order, without descending
    into the blocks found: TVM's "child blocks on the sref tree"."""
    out: list[S.BlockRealize] = []
    stack: list[Any] = [stmt]
    while stack:
        node = stack.pop()
        if node is None:
            continue
        t = type(node)
        if t is S.BlockRealize:
            out.append(node)
        elif t is S.For:
            stack.append(node.body)
        elif t is S.SeqStmt:
            stack.extend(reversed(node.seq))
        elif t is S.IfThenElse:
            stack.append(node.else_case)
            stack.append(node.then_case)
        elif t is S.LetStmt:
            stack.append(node.body)
    return out


def _block_buffers(regions: tuple[S.BufferRegion, ...]) -> list[E.Buffer]:
    return [r.buffer for r in regions]


def scope_dependencies(scope_block: S.Block) -> list[tuple[str, str, str]]:
    """Dependency edges (src block name, dst block name, kind) among the child blocks of a
    scope, in TVM's `BlockScope` order: per block in execution order, RAW edges (by its read
    regions), then WAW, then WAR."""
    writers: dict[E.Buffer, list[str]] = {}
    readers: dict[E.Buffer, list[str]] = {}
    edges: list[tuple[str, str, str]] = []
    for realize in child_block_realizes(scope_block.body):
        block = realize.block
        name = block.name_hint
        for buf in _block_buffers(block.reads):
            readers.setdefault(buf, []).append(name)
        for buf in _block_buffers(block.writes):
            writers.setdefault(buf, []).append(name)
        for buf in _block_buffers(block.reads):
            for src in writers.get(buf, ()):
                if src != name:
                    edges.append((src, name, "RAW"))
        for buf in _block_buffers(block.writes):
            for src in writers.get(buf, ()):
                if src != name:
                    edges.append((src, name, "WAW"))
        for buf in _block_buffers(block.writes):
            for src in readers.get(buf, ()):
                if src != name:
                    edges.append((src, name, "WAR"))
    return edges


class _BindingRewriter(IRMutator):
    """Substitutes loop variables throughout a loop subtree and re-simplifies the bindings of
    the blocks directly in it (TVM's SubstituteVarAndCollectOpaqueBlock followed by
    IterMapSimplifyBlockBinding): predicates and nested expressions get the plain
    substitution, iter values are simplified with the ranges of every enclosing loop, and with
    `drop_unit_iters` (preserve_unit_iters=False) unit-extent loops are replaced by their min."""

    def __init__(self, vmap: dict[E.Var, E.PrimExpr], analyzer: Analyzer, drop_unit_iters: bool) -> None:
        super().__init__()
        self.vmap = vmap
        self.analyzer = analyzer
        self.drop_unit_iters = drop_unit_iters

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
            simplified = tuple(self.analyzer.simplify(v) for v in values)
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


class _PredicateAppender:
    """Appends `pred` (with &&) to the predicate of each block realize directly under a
    statement (not recursively into blocks), like TVM's BlockPredicateAppender."""

    def __init__(self, pred: E.PrimExpr) -> None:
        self.pred = pred

    def __call__(self, node: S.Stmt) -> S.Stmt:
        t = type(node)
        if t is S.BlockRealize:
            return S.BlockRealize(node.iter_values, _fold_and(node.predicate, self.pred), node.block)
        if t is S.For:
            return S.For(node.loop_var, node.min, node.extent, node.kind, self(node.body), node.thread_binding, node.annotations)
        if t is S.SeqStmt:
            return S.SeqStmt(tuple(self(s) for s in node.seq))
        if t is S.IfThenElse:
            return S.IfThenElse(node.condition, self(node.then_case), None if node.else_case is None else self(node.else_case))
        if t is S.LetStmt:
            return S.LetStmt(node.var, node.value, self(node.body))
        return node


def _widest_int(first: str, dtypes: Sequence[str]) -> str:
    """The int dtype wide enough for all of `dtypes` (TVM picks the widest bit width)."""
    width = max([dtype_bits(first)] + [dtype_bits(d) for d in dtypes if d != "bool"])
    return f"int{width}"


def _flatten_rvs(items: Sequence[Any]) -> list[Any]:
    """fuse(a, b) and fuse([a, b]) both work, as in TVM's Python API."""
    out: list[Any] = []
    for item in items:
        if isinstance(item, (list, tuple)):
            out.extend(item)
        else:
            out.append(item)
    return out


def _is_complete_block(block: S.Block, dominant: bool) -> bool:
    if any(iv.iter_type != S.IterType.DATA_PAR for iv in block.iter_vars) or not dominant:
        return False
    written = {id(r.buffer) for r in block.writes}
    return not any(id(r.buffer) in written for r in block.reads)


def _is_reduction_block(block: S.Block, dominant: bool) -> bool:
    if block.init is None or not dominant:
        return False
    if any(iv.iter_type not in (S.IterType.DATA_PAR, S.IterType.COMM_REDUCE) for iv in block.iter_vars):
        return False
    reduce_vars = {iv.var for iv in block.iter_vars if iv.iter_type == S.IterType.COMM_REDUCE}
    for region in block.writes:
        for rng in region.region:
            if _uses_any(rng.min, reduce_vars) is not None:
                return False
    return True


class Schedule(BlockPrimitives):
    """A schedule of an IRModule (a lone PrimFunc is treated as {"main": f}).

    `seed` makes sampling deterministic: the same seed and the same calls give the same
    decisions. Every primitive is recorded in `trace`.
    """

    def __init__(self, mod: IRModule | PrimFunc, seed: int | None = None) -> None:
        if isinstance(mod, PrimFunc):
            mod = IRModule.from_func(mod)
        if not isinstance(mod, IRModule):
            raise TypeError(f"Schedule expects an IRModule or PrimFunc, got {type(mod).__name__}")
        self._state = ScheduleState(mod)
        self._func_name: str = "main" if "main" in mod.functions or len(mod.functions) != 1 else next(iter(mod.functions))
        self._symbols: dict[RV, Any] = {}
        self._insts: list[Instruction] = []
        self._decisions: dict[Instruction, Any] = {}
        self._seed = seed
        self._rng = random.Random(seed if seed is not None else random.SystemRandom().randrange(1, 2**31))

    # ---- public core ----
    @property
    def mod(self) -> IRModule:
        """The module as transformed so far."""
        return self._state.mod

    @property
    def func_name(self) -> str:
        return self._func_name

    def work_on(self, func_name: str) -> None:
        """Direct later primitives (get_block without func_name) at `func_name`."""
        self._state.func(func_name)
        self._func_name = func_name

    @property
    def trace(self) -> "Trace":  # noqa: F821
        """The instructions recorded so far, with their sampling decisions."""
        from msdb.schedule.trace import Trace

        return Trace(tuple(self._insts), dict(self._decisions))

    def copy(self) -> Schedule:
        """An independent schedule in the same state: same RVs, same trace, forked RNG state."""
        clone = Schedule.__new__(Schedule)
        clone._state = self._state.copy()
        clone._func_name = self._func_name
        clone._symbols = dict(self._symbols)
        clone._insts = list(self._insts)
        clone._decisions = dict(self._decisions)
        clone._seed = self._seed
        clone._rng = random.Random()
        clone._rng.setstate(self._rng.getstate())
        return clone

    def seed(self, seed: int) -> None:
        """Reseed the sampler."""
        self._seed = seed
        self._rng = random.Random(seed)

    def fork_seed(self) -> int:
        """A new seed drawn from this schedule's RNG (for child schedules)."""
        return self._rng.randrange(1, 2**31)

    def get(self, rv: RV | int) -> Any:
        """What an RV stands for now: a Block, a For (or the "root"/"inline" mark of a sampled
        compute location), or an int (for an ExprRV)."""
        if isinstance(rv, BlockRV):
            return self._block(rv)
        if isinstance(rv, LoopRV):
            target = self._loop_target(rv)
            return target if isinstance(target, str) else self._loop(rv)  # "root"/"inline" marks
        if isinstance(rv, ExprRV):
            return self._value(rv)
        if isinstance(rv, int):
            return rv
        raise TypeError(f"get() expects a BlockRV, LoopRV or ExprRV, got {type(rv).__name__}")

    def remove_rv(self, rv: RV) -> None:
        """Forget an RV (TVM's RemoveRV)."""
        self._symbols.pop(rv, None)

    # ---- internal helpers for primitives ----
    def _lookup(self, rv: RV, kind: type) -> Any:
        if not isinstance(rv, kind):
            raise ScheduleError(f"expected a {kind.__name__}, got {type(rv).__name__}")
        try:
            return self._symbols[rv]
        except KeyError:
            raise ScheduleError(f"{kind.__name__} {rv!r} does not belong to this schedule (or was removed)") from None

    def _block_name(self, rv: BlockRV) -> str:
        return self._lookup(rv, BlockRV)

    def _block(self, rv: BlockRV) -> S.Block:
        return self._state.block(self._func_name, self._block_name(rv))

    def _loop(self, rv: LoopRV) -> S.For:
        return self._for(rv)

    def _value(self, rv: ExprRV | int | E.IntImm) -> int:
        if isinstance(rv, int):
            return rv
        if isinstance(rv, E.IntImm):
            return rv.value
        return self._lookup(rv, ExprRV)

    def _new_block_rv(self, name: str) -> BlockRV:
        rv = BlockRV()
        self._symbols[rv] = name
        return rv

    def _new_loop_rv(self, var: E.Var) -> LoopRV:
        rv = LoopRV()
        self._symbols[rv] = var
        return rv

    def _new_expr_rv(self, value: int) -> ExprRV:
        rv = ExprRV()
        self._symbols[rv] = int(value)
        return rv

    def _record(self, kind: str, inputs: list[Any] | tuple[Any, ...], attrs: list[Any] | tuple[Any, ...],
                outputs: list[Any] | tuple[Any, ...], decision: Any = None) -> Instruction:
        inst = Instruction(kind, tuple(inputs), tuple(attrs), tuple(outputs))
        self._insts.append(inst)
        if decision is not None:
            self._decisions[inst] = decision
        return inst

    @contextlib.contextmanager
    def _atomic(self) -> Iterator[None]:
        # The RNG state (a 625-word tuple) is saved lazily, by `_sampler()`, only when a
        # primitive inside actually draws: most primitives never do, and copying it for every
        # instruction was the largest single cost of replaying a trace.
        frames: list[list[Any]] = self.__dict__.setdefault("_rng_frames", [])
        frame: list[Any] = [None]
        frames.append(frame)
        saved = (self._state.copy(), dict(self._symbols), len(self._insts), dict(self._decisions))
        try:
            yield
        except ScheduleError:
            state, symbols, n_insts, decisions = saved
            self._state = state
            self._symbols = symbols
            del self._insts[n_insts:]
            self._decisions = decisions
            if frame[0] is not None:
                self._rng.setstate(frame[0])
            raise
        finally:
            frames.pop()

    def _sampler(self) -> random.Random:
        """The RNG, for a primitive about to draw from it: first saves its state in every
        enclosing `_atomic()` that has not saved it yet, so a failure can rewind it."""
        frames = self.__dict__.get("_rng_frames")
        if frames and frames[-1][0] is None:
            state = self._rng.getstate()
            for frame in frames:
                if frame[0] is None:
                    frame[0] = state
        return self._rng

    # =========================================================================================
    # Internal helpers shared by the primitives below (and usable by mixins)
    # =========================================================================================

    def _loop_target(self, rv: LoopRV) -> E.Var | str:
        """What a LoopRV stands for: a loop variable, or ROOT_MARK / INLINE_MARK."""
        return self._lookup(rv, LoopRV)

    def _loop_mark(self, rv: LoopRV) -> str | None:
        """The mark ("root" or "inline") when `rv` came from sample_compute_location's non-loop
        choices, else None (compute_at treats "root" as a no-op and "inline" as compute_inline)."""
        target = self._loop_target(rv)
        return target if isinstance(target, str) else None

    def _for(self, rv: LoopRV) -> S.For:
        """The loop of a LoopRV, with a clear error for the root/inline marks."""
        target = self._loop_target(rv)
        if isinstance(target, str):
            raise ScheduleError(f"the LoopRV stands for the {target!r} location of sample_compute_location, not a loop")
        return self._state.loop(self._func_name, target)

    def _realize(self, name: str) -> S.BlockRealize:
        return self._state.realize(self._func_name, name)

    def _scope_of(self, node: object) -> S.Block:
        return self._state.scope_block(self._func_name, node)

    def _outer_loops(self, node: object) -> list[S.For]:
        """Loops enclosing `node` (a For or a BlockRealize) up to its scope block, outermost
        first; `node` itself excluded."""
        loops: list[S.For] = []
        for anc in self._state.ancestors(self._func_name, node):
            if isinstance(anc, S.Block):
                break
            if isinstance(anc, S.For):
                loops.append(anc)
        loops.reverse()
        return loops

    def _sref_parent(self, node: object) -> S.Stmt | None:
        """The nearest enclosing loop or block of `node` (TVM's sref-tree parent); a block's
        own realize is skipped."""
        for anc in self._state.ancestors(self._func_name, node):
            if isinstance(anc, (S.For, S.Block)):
                return anc
        return None

    def _producers_of(self, name: str) -> list[str]:
        scope = self._scope_of(self._state.block(self._func_name, name))
        out: list[str] = []
        for src, dst, kind in scope_dependencies(scope):
            if dst == name and kind in ("RAW", "WAW") and src not in out:
                out.append(src)
        return out

    def _consumers_of(self, name: str) -> list[str]:
        scope = self._scope_of(self._state.block(self._func_name, name))
        out: list[str] = []
        for src, dst, kind in scope_dependencies(scope):
            if src == name and kind in ("RAW", "WAW") and dst not in out:
                out.append(dst)
        return out

    def _probe(self, action: Callable[[], Any]) -> bool:
        """Run `action` and undo everything it did; True if it raised no ScheduleError (TVM's
        CanComputeAt / CanComputeInline are exactly "would the primitive succeed")."""
        saved = (self._state.copy(), dict(self._symbols), len(self._insts), dict(self._decisions),
                 self._rng.getstate(), self._func_name)
        try:
            action()
            return True
        except ScheduleError:
            return False
        finally:
            state, symbols, n_insts, decisions, rng_state, func_name = saved
            self._state = state
            self._symbols = symbols
            del self._insts[n_insts:]
            self._decisions = decisions
            self._rng.setstate(rng_state)
            self._func_name = func_name

    def _loop_iter_type(self, loop: S.For) -> S.IterType:
        """TVM's GetLoopIterType: how the blocks directly under `loop` use its variable."""
        var = loop.loop_var
        n_spatial = n_reduce = n_other = 0
        for realize in child_block_realizes(loop.body):
            for iv, value in zip(realize.block.iter_vars, realize.iter_values):
                if not _uses_var(value, var):
                    continue
                if iv.iter_type == S.IterType.DATA_PAR:
                    n_spatial += 1
                elif iv.iter_type == S.IterType.COMM_REDUCE:
                    n_reduce += 1
                else:
                    n_other += 1
        if n_other or (n_spatial and n_reduce):
            return S.IterType.OPAQUE
        if n_reduce:
            return S.IterType.COMM_REDUCE
        return S.IterType.DATA_PAR

    def _rewrite_loop_body(self, body: S.Stmt, outer: list[S.For], vmap: dict[E.Var, E.PrimExpr],
                           new_ranges: list[tuple[E.Var, E.PrimExpr, E.PrimExpr]],
                           preserve_unit_iters: bool) -> S.Stmt:
        """Substitute `vmap` in `body` and re-simplify the bindings of its blocks, knowing the
        ranges of the loops outside (`outer`) and of the loops being created (`new_ranges`)."""
        analyzer = Analyzer()
        rewriter = _BindingRewriter(vmap, analyzer, drop_unit_iters=not preserve_unit_iters)
        for loop in outer:
            rewriter.enter_loop(loop.loop_var, loop.min, loop.extent)
        for var, lo, ext in new_ranges:
            rewriter.enter_loop(var, lo, ext)
        return rewriter.visit(body)

    @staticmethod
    def _check_plain_loop(loop: S.For, primitive: str) -> None:
        if loop.annotations or loop.thread_binding is not None:
            raise ScheduleError(
                f"{primitive}: loop {loop.loop_var.name!r} has annotations or a thread binding; "
                f"{primitive} only applies to plain loops (unannotate it first)")
        if not _is_zero(loop.min):
            raise ScheduleError(f"{primitive}: loop {loop.loop_var.name!r} does not start at 0")

    # =========================================================================================
    # Getters
    # =========================================================================================

    def get_block(self, name: str, func_name: str | None = None) -> BlockRV:
        """The block named `name` in `func_name` (default: the function worked on).

        Requires: a block of that name exists. Recorded as TVM's "GetSBlock" with attrs
        [name, function name]."""
        with self._atomic():
            saved_func = self._func_name
            try:
                if func_name is not None and func_name != self._func_name:
                    self._state.func(func_name)
                    self._func_name = func_name
                self._state.block(self._func_name, name)
            except ScheduleError:
                self._func_name = saved_func
                raise
            rv = self._new_block_rv(name)
            self._record("GetSBlock", [], [name, self._func_name], [rv])
            return rv

    get_sblock = get_block

    def get_loops(self, block: BlockRV) -> list[LoopRV]:
        """The loops around `block`, outermost first, up to its scope block."""
        with self._atomic():
            name = self._block_name(block)
            loops = self._state.loops_of(self._func_name, name)
            rvs = [self._new_loop_rv(loop.loop_var) for loop in loops]
            self._record("GetLoops", [block], [], rvs)
            return rvs

    def get_child_blocks(self, block_or_loop: BlockRV | LoopRV) -> list[BlockRV]:
        """The blocks directly under a block or loop (not those nested in other blocks), in
        execution order."""
        with self._atomic():
            if isinstance(block_or_loop, BlockRV):
                body: S.Stmt = self._block(block_or_loop).body
            elif isinstance(block_or_loop, LoopRV):
                body = self._for(block_or_loop).body
            else:
                raise ScheduleError(f"get_child_blocks expects a BlockRV or LoopRV, got {type(block_or_loop).__name__}")
            rvs = [self._new_block_rv(r.block.name_hint) for r in child_block_realizes(body)]
            self._record("GetChildBlocks", [block_or_loop], [], rvs)
            return rvs

    def get_producers(self, block: BlockRV) -> list[BlockRV]:
        """Blocks of the same scope that write what `block` reads or writes before it (RAW and
        WAW dependencies), in TVM's order."""
        with self._atomic():
            names = self._producers_of(self._block_name(block))
            rvs = [self._new_block_rv(n) for n in names]
            self._record("GetProducers", [block], [], rvs)
            return rvs

    def get_consumers(self, block: BlockRV) -> list[BlockRV]:
        """Blocks of the same scope that read or rewrite what `block` writes after it."""
        with self._atomic():
            names = self._consumers_of(self._block_name(block))
            rvs = [self._new_block_rv(n) for n in names]
            self._record("GetConsumers", [block], [], rvs)
            return rvs

    # =========================================================================================
    # Loop transformations
    # =========================================================================================

    def split(self, loop: LoopRV, factors: Sequence[int | ExprRV | E.PrimExpr | None],
              preserve_unit_iters: bool = True, disable_predication: bool = False) -> list[LoopRV]:
        """Split a loop into nested loops, outermost first.

        Requires: the loop starts at 0 and has no annotation or thread binding; every factor is
        positive; at most one factor is None (inferred as ceil(extent / product of the
        others)); the product covers the extent. When the product exceeds the extent, the
        blocks directly under the loop get the predicate `i_0 * f1 + i_1 < extent` (unless
        `disable_predication`).

        Before: `for i in range(16): C[vi] ...  (vi = i)`
        Call:   `i_0, i_1 = sch.split(i, [None, 4])`
        After:  `for i_0, i_1 in T.grid(4, 4): ... (vi = i_0 * 4 + i_1)`
        """
        with self._atomic():
            old = self._for(loop)
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
                if isinstance(f, ExprRV):
                    value: E.PrimExpr = _int_const(self._value(f), old.extent.dtype)
                elif isinstance(f, bool):
                    raise ScheduleError(f"split: factor {f!r} of loop {name!r} is not an integer")
                elif isinstance(f, int):
                    value = _int_const(f, old.extent.dtype)
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
            self._check_plain_loop(old, "split")
            known = [v for v in values if v is not None]
            product: E.PrimExpr = _int_const(1, old.extent.dtype)
            for v in known:
                product = _fold_mul(product, v)
            analyzer = Analyzer()
            if infer_index != -1:
                ext_c, prod_c = E.const_int(old.extent), E.const_int(product)
                if ext_c is not None and prod_c is not None:
                    inferred: E.PrimExpr = _int_const(-(-ext_c // prod_c), old.extent.dtype)
                else:
                    inferred = analyzer.simplify(E.FloorDiv(old.extent + product - 1, product))
                values[infer_index] = inferred
            elif not analyzer.can_prove(E.GE(product, old.extent)):
                shown = [self._value(f) if isinstance(f, ExprRV) else f for f in factor_list]
                prod_c = E.const_int(product)
                raise ScheduleError(
                    f"split: factors {shown} of loop {name!r} multiply to "
                    f"{prod_c if prod_c is not None else product}, less than its extent "
                    f"{E.const_int(old.extent) if E.const_int(old.extent) is not None else old.extent}; "
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
            outer = self._outer_loops(old)
            body = old.body
            check = Analyzer()
            for var, factor in zip(new_vars, final):
                check.bind(var, E.Range(_int_const(0, dtype), factor))
            predicate = E.LT(subst, old.extent, "bool")
            body = self._rewrite_loop_body(
                body, outer, {old.loop_var: subst},
                [(v, _int_const(0, dtype), f) for v, f in zip(new_vars, final)], preserve_unit_iters)
            if not disable_predication and not check.can_prove(predicate):
                body = _PredicateAppender(predicate)(body)
            new_stmt: S.Stmt = body
            for var, factor in zip(reversed(new_vars), reversed(final)):
                new_stmt = S.For(var, _int_const(0, dtype), factor, S.ForKind.SERIAL, new_stmt)
            self._state.replace(self._func_name, old, new_stmt)
            rvs = [self._new_loop_rv(v) for v in new_vars]
            self._record("Split", [loop, *factor_list], [bool(preserve_unit_iters), bool(disable_predication)], rvs)
            return rvs

    def fuse(self, *loops: LoopRV | Sequence[LoopRV], preserve_unit_iters: bool = True) -> LoopRV:
        """Fuse a chain of directly nested loops into one (`i_j_fused`).

        Requires: each loop is the only statement in the body of the previous one, no loop has
        annotations or a thread binding, all start at 0, and no extent depends on an outer
        loop of the chain.

        Before: `for i, j in T.grid(4, 8): ... (vi = i, vj = j)`
        Call:   `f = sch.fuse(i, j)`
        After:  `for i_j_fused in range(32): ... (vi = i_j_fused // 8, vj = i_j_fused % 8)`
        """
        rvs = _flatten_rvs(loops)
        with self._atomic():
            if not rvs:
                raise ScheduleError("fuse: needs at least one loop")
            fors = [self._for(rv) for rv in rvs]
            seen_vars: set[E.Var] = set()
            for i, loop in enumerate(fors):
                self._check_plain_loop(loop, "fuse")
                if loop.loop_var in seen_vars:
                    raise ScheduleError(f"fuse: loop {loop.loop_var.name!r} is given more than once")
                if i > 0:
                    outer = fors[i - 1]
                    if outer.body is not loop:
                        if self._state.parent(self._func_name, loop) is outer or self._sref_parent(loop) is outer:
                            raise ScheduleError(
                                f"fuse: loop {loop.loop_var.name!r} is not the only statement in the body of "
                                f"loop {outer.loop_var.name!r}; only directly nested loops can be fused")
                        raise ScheduleError(
                            f"fuse: loop {outer.loop_var.name!r} is not the direct parent of loop "
                            f"{loop.loop_var.name!r}; fuse takes adjacent nested loops, outermost first")
                used = _uses_any(loop.extent, seen_vars)
                if used is not None:
                    raise ScheduleError(
                        f"fuse: the extent of loop {loop.loop_var.name!r} depends on loop {used.name!r}")
                seen_vars.add(loop.loop_var)
            dtype = _widest_int(fors[0].loop_var.dtype, [f.loop_var.dtype for f in fors])
            fused_name = "_".join(f.loop_var.name for f in fors) + "_fused"
            fused = E.Var(fused_name, dtype)
            n = len(fors)
            vmap: dict[E.Var, E.PrimExpr] = {}
            lower: E.PrimExpr = _int_const(1, dtype)
            for i in range(n - 1, 0, -1):
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
            outer = self._outer_loops(fors[0])
            body = self._rewrite_loop_body(fors[-1].body, outer, vmap, [(fused, _int_const(0, dtype), extent)],
                                           preserve_unit_iters)
            new_loop = S.For(fused, _int_const(0, dtype), extent, S.ForKind.SERIAL, body)
            self._state.replace(self._func_name, fors[0], new_loop)
            rv = self._new_loop_rv(fused)
            self._record("Fuse", list(rvs), [bool(preserve_unit_iters)], [rv])
            return rv

    def reorder(self, *ordered_loops: LoopRV | Sequence[LoopRV]) -> None:
        """Reorder loops of one nest: the given loops take each other's positions in the given
        order (outermost first); loops between them that are not given stay where they are.

        Requires: the loops are distinct and lie on one chain of directly nested loops (each
        loop between the outermost and the innermost given loop is the only statement of its
        parent), under one scope; the blocks under them have only spatial or reduction iter
        vars; no outer loop's range depends on an inner loop in the new order.

        Before: `for i, j, k in T.grid(...)`
        Call:   `sch.reorder(k, i)`
        After:  `for k, j, i in T.grid(...)`
        """
        rvs = _flatten_rvs(ordered_loops)
        with self._atomic():
            fors = [self._for(rv) for rv in rvs]
            if len(fors) > 1:
                self._reorder(fors)
            self._record("Reorder", list(rvs), [], [])

    def _reorder(self, fors: list[S.For]) -> None:
        names = [f.loop_var.name for f in fors]
        seen: set[E.Var] = set()
        for f in fors:
            if f.loop_var in seen:
                raise ScheduleError(f"reorder: loop {f.loop_var.name!r} appears more than once in {names}")
            seen.add(f.loop_var)
        # Each loop's chain of enclosing loops within its scope (outermost first).
        chains = {f.loop_var: self._outer_loops(f) + [f] for f in fors}
        scopes = {id(self._scope_of(f)) for f in fors}
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
        for realize in child_block_realizes(bottom.body):
            for iv in realize.block.iter_vars:
                if iv.iter_type not in (S.IterType.DATA_PAR, S.IterType.COMM_REDUCE):
                    raise ScheduleError(
                        f"reorder: block {realize.block.name_hint!r} under loops {names} has iter var "
                        f"{iv.var.name!r} that is neither spatial nor reduction")
        given = {f.loop_var for f in fors}
        order = iter(fors)
        new_chain = [next(order) if loop.loop_var in given else loop for loop in chain]
        self._check_reduction_order(chain, new_chain, bottom, names)
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
        self._state.replace(self._func_name, chain[0], new_stmt)

    @staticmethod
    def _check_reduction_order(chain: list[S.For], new_chain: list[S.For], bottom: S.For, names: list[str]) -> None:
        """Refuse a new order that would run a block's init after some of its updates.

        A block with an init runs it when every reduction iter var is at its minimum, which
        must be the first update of each spatial point. A loop that feeds both a spatial and a
        reduction iter var (a fused spatial-reduction loop, split) steps through a point's
        reduction in its nesting order: swapping two such loops makes a point start mid-way,
        and the init then overwrites partial sums (TVM accepts it and computes wrong results;
        MetaSchedule never fuses across a reduction). Pure reduction loops may go in any
        order: they all start at their minimum."""
        loop_vars = {loop.loop_var for loop in chain}
        for realize in child_block_realizes(bottom.body):
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

    # ---- loop kinds ----

    def parallel(self, loop: LoopRV) -> None:
        """Mark a loop parallel.

        Requires: the blocks under the loop form a compact dataflow (each is a complete or
        reduction block that is the only writer of its outputs within the loop), and the
        loop variable feeds only spatial iter vars."""
        with self._atomic():
            self._set_loop_kind(loop, S.ForKind.PARALLEL, None)
            self._record("Parallel", [loop], [], [])

    def vectorize(self, loop: LoopRV) -> None:
        """Mark a loop vectorized (same requirements as `parallel`)."""
        with self._atomic():
            self._set_loop_kind(loop, S.ForKind.VECTORIZED, None)
            self._record("Vectorize", [loop], [], [])

    def bind(self, loop: LoopRV, thread_axis: str) -> None:
        """Bind a loop to a GPU thread axis ("blockIdx.x", "threadIdx.y", "vthread.x", ...).

        Requires: as `parallel`, except that a reduction iter var may be fed when the axis is
        threadIdx.x/y/z (cross-thread reduction)."""
        with self._atomic():
            if not isinstance(thread_axis, str) or thread_axis not in _THREAD_AXES:
                raise ScheduleError(f"bind: unknown thread axis {thread_axis!r}; expected one of {sorted(_THREAD_AXES)}")
            self._set_loop_kind(loop, S.ForKind.THREAD_BINDING, thread_axis)
            self._record("Bind", [loop], [thread_axis], [])

    def unroll(self, loop: LoopRV) -> None:
        """Mark a loop unrolled (always legal)."""
        with self._atomic():
            old = self._for(loop)
            new = S.For(old.loop_var, old.min, old.extent, S.ForKind.UNROLLED, old.body, None, old.annotations)
            self._state.replace(self._func_name, old, new)
            self._record("Unroll", [loop], [], [])

    def _set_loop_kind(self, loop_rv: LoopRV, kind: S.ForKind, thread_axis: str | None) -> None:
        loop = self._for(loop_rv)
        verb = {S.ForKind.PARALLEL: "parallelize", S.ForKind.VECTORIZED: "vectorize"}.get(kind, "bind")
        op = {S.ForKind.PARALLEL: "parallel", S.ForKind.VECTORIZED: "vectorize"}.get(kind, "bind")
        self._check_compact_dataflow(loop, op)
        cross_thread = thread_axis is not None and thread_axis.startswith("threadIdx.")
        var = loop.loop_var
        stack: list[Any] = [loop.body]
        while stack:
            node = stack.pop()
            t = type(node)
            if t is S.BlockRealize:
                block = node.block
                for iv, value in zip(block.iter_vars, node.iter_values):
                    if not _uses_var(value, var):
                        continue
                    if iv.iter_type == S.IterType.DATA_PAR:
                        continue
                    if iv.iter_type == S.IterType.COMM_REDUCE and cross_thread:
                        continue
                    kind_name = "reduction" if iv.iter_type == S.IterType.COMM_REDUCE else "non-spatial"
                    raise ScheduleError(
                        f"{op}: cannot {verb} a loop bound to a {kind_name} iter var of block "
                        f"{block.name_hint}: loop {var.name!r} feeds iter var {iv.var.name!r}"
                        + ("; only threadIdx.x/y/z may be bound to a reduction" if kind == S.ForKind.THREAD_BINDING else ""))
                stack.append(block.body)
            elif t is S.For or t is S.LetStmt:
                stack.append(node.body)
            elif t is S.SeqStmt:
                stack.extend(node.seq)
            elif t is S.IfThenElse:
                stack.append(node.then_case)
                stack.append(node.else_case)
        binding = None
        if thread_axis is not None:
            binding = S.IterVar(None, E.Var(thread_axis, var.dtype), S.IterType.THREAD_INDEX, thread_axis)  # type: ignore[arg-type]
        new = S.For(var, loop.min, loop.extent, kind, loop.body, binding, loop.annotations)
        self._state.replace(self._func_name, loop, new)

    def _check_compact_dataflow(self, loop: S.For, op: str) -> None:
        """TVM's CheckSubtreeCompactDataflow: each block directly under the loop is a complete
        block or a reduction block, judged within the loop's subtree."""
        realizes = child_block_realizes(loop.body)
        writers: dict[E.Buffer, int] = {}
        for realize in realizes:
            for buf in {id(b): b for b in _block_buffers(realize.block.writes)}.values():
                writers[buf] = writers.get(buf, 0) + 1
        for realize in realizes:
            block = realize.block
            dominant = all(writers.get(b, 0) == 1 for b in _block_buffers(block.writes))
            if _is_complete_block(block, dominant) or _is_reduction_block(block, dominant):
                continue
            reason = "another block under the loop writes the same buffer" if not dominant else \
                "it is neither a complete block nor a reduction block"
            raise ScheduleError(
                f"{op}: loop {loop.loop_var.name!r} does not have a compact dataflow: block "
                f"{block.name_hint!r} under it is not allowed ({reason})")

    # ---- annotations ----

    def annotate(self, block_or_loop: BlockRV | LoopRV, ann_key: str, ann_val: Any) -> None:
        """Set annotation `ann_key` of a block or loop to `ann_val` (str, int, float, bool, a
        list of them, or an ExprRV, stored as its integer value)."""
        with self._atomic():
            if not isinstance(ann_key, str):
                raise ScheduleError(f"annotate: the key must be a string, got {ann_key!r}")
            value = self._value(ann_val) if isinstance(ann_val, ExprRV) else ann_val
            self._update_annotations(block_or_loop, "annotate", lambda anns: anns.__setitem__(ann_key, value))
            self._record("Annotate", [block_or_loop, ann_val], [ann_key], [])

    def unannotate(self, block_or_loop: BlockRV | LoopRV, ann_key: str) -> None:
        """Remove annotation `ann_key` from a block or loop.

        Requires: the annotation is present."""
        with self._atomic():
            def remove(anns: dict[str, Any]) -> None:
                if ann_key not in anns:
                    raise ScheduleError(
                        f"unannotate: {what} has no annotation {ann_key!r}; it has {sorted(anns)}")
                del anns[ann_key]

            what = self._describe(block_or_loop)
            self._update_annotations(block_or_loop, "unannotate", remove)
            self._record("Unannotate", [block_or_loop], [ann_key], [])

    def _describe(self, rv: BlockRV | LoopRV) -> str:
        if isinstance(rv, BlockRV):
            return f"block {self._block_name(rv)!r}"
        if isinstance(rv, LoopRV):
            return f"loop {self._for(rv).loop_var.name!r}"
        raise ScheduleError(f"expected a BlockRV or LoopRV, got {type(rv).__name__}")

    def _update_annotations(self, rv: BlockRV | LoopRV, op: str, edit: Callable[[dict[str, Any]], None]) -> None:
        if isinstance(rv, BlockRV):
            block = self._block(rv)
            anns = dict(block.annotations)
            edit(anns)
            new_block = S.Block(block.iter_vars, block.reads, block.writes, block.name_hint, block.body, block.init,
                                block.alloc_buffers, block.match_buffers, anns)
            self._state.replace(self._func_name, block, new_block)
        elif isinstance(rv, LoopRV):
            loop = self._for(rv)
            anns = dict(loop.annotations)
            edit(anns)
            new_loop = S.For(loop.loop_var, loop.min, loop.extent, loop.kind, loop.body, loop.thread_binding, anns)
            self._state.replace(self._func_name, loop, new_loop)
        else:
            raise ScheduleError(f"{op}: expected a BlockRV or LoopRV, got {type(rv).__name__}")

    # =========================================================================================
    # Sampling
    # =========================================================================================

    def sample_perfect_tile(self, loop: LoopRV, n: int, max_innermost_factor: int = 16,
                            decision: Sequence[int] | None = None) -> list[ExprRV]:
        """Sample `n` tile sizes whose product is the loop's extent, the innermost at most
        `max_innermost_factor` (-1: no limit). A given `decision` is used instead of sampling
        (repaired as TVM does if it no longer divides the extent). A loop of non-constant
        extent gives [-1, 1, ..., 1], as in TVM."""
        with self._atomic():
            target = self._for(loop)
            if not isinstance(n, int) or isinstance(n, bool) or n < 1:
                raise ScheduleError(f"sample_perfect_tile: n must be a positive int, got {n!r}")
            extent = E.const_int(target.extent)
            if extent is None:
                result = [-1] + [1] * (n - 1)
            elif decision is not None:
                values = list(decision)
                if len(values) != n or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in values):
                    raise ScheduleError(
                        f"sample_perfect_tile: decision {values} for loop {target.loop_var.name!r} must be "
                        f"{n} positive integers")
                result = sampling.repair_perfect_tile(extent, values)
                if result != values:
                    logger.debug("perfect tile decision %s for extent %d repaired to %s", values, extent, result)
            else:
                if extent < 1:
                    raise ScheduleError(f"sample_perfect_tile: loop {target.loop_var.name!r} has extent {extent}")
                result = sampling.sample_perfect_tile(self._sampler(), extent, n, max_innermost_factor)
            rvs = [self._new_expr_rv(v) for v in result]
            self._record("SamplePerfectTile", [loop], [n, max_innermost_factor], rvs, decision=list(result))
            return rvs

    def sample_categorical(self, candidates: Sequence[int], probs: Sequence[float],
                           decision: int | None = None) -> ExprRV:
        """Sample one of `candidates` with probabilities `probs`; `decision` is the index to
        use instead of sampling."""
        with self._atomic():
            cands = [int(c) for c in candidates]
            weights = [float(p) for p in probs]
            if len(cands) != len(weights) or not cands:
                raise ScheduleError(
                    f"sample_categorical: {len(cands)} candidates but {len(weights)} probabilities")
            if decision is not None:
                if isinstance(decision, bool) or not isinstance(decision, int) or not 0 <= decision < len(cands):
                    raise ScheduleError(
                        f"sample_categorical: decision {decision!r} is not an index into {len(cands)} candidates")
                index = decision
            else:
                try:
                    index = sampling.sample_categorical(self._sampler(), weights)
                except ValueError as exc:
                    raise ScheduleError(f"sample_categorical: {exc}") from None
            rv = self._new_expr_rv(cands[index])
            self._record("SampleCategorical", [], [cands, weights], [rv], decision=index)
            return rv

    def sample_compute_location(self, block: BlockRV, decision: int | None = None) -> LoopRV:
        """Sample where `block` could be computed: -2 inline, -1 root (where it is), i the i-th
        loop around its first consumer (TVM's candidate rules). A given `decision` is kept if
        it is still a candidate, else the nearest candidate before it."""
        with self._atomic():
            indices, targets = self._compute_location_candidates(block)
            if decision is not None:
                if isinstance(decision, bool) or not isinstance(decision, int):
                    raise ScheduleError(f"sample_compute_location: decision {decision!r} is not an int")
                pos = bisect.bisect_left(indices, decision)
                if pos < len(indices) and indices[pos] == decision:
                    chosen, target = decision, targets[pos]
                elif pos > 0:
                    chosen, target = indices[pos - 1], targets[pos - 1]
                else:
                    chosen, target = -1, ROOT_MARK
            else:
                pick = sampling.sample_int(self._sampler(), 0, len(indices))
                chosen, target = indices[pick], targets[pick]
            rv = LoopRV()
            self._symbols[rv] = target
            self._record("SampleComputeLocation", [block], [], [rv], decision=chosen)
            return rv

    def _compute_location_candidates(self, block_rv: BlockRV) -> tuple[list[int], list[Any]]:
        """TVM's CollectComputeLocation: (indices, targets), indices increasing."""
        name = self._block_name(block_rv)
        indices: list[int] = []
        targets: list[Any] = []
        # Without the block-primitive mixin nothing can be inlined or moved: only "root" remains.
        can_move = hasattr(self, "compute_inline") and hasattr(self, "compute_at")
        if can_move and self._probe(lambda: self.compute_inline(block_rv)):  # type: ignore[attr-defined]
            indices.append(-2)
            targets.append(INLINE_MARK)
        indices.append(-1)
        targets.append(ROOT_MARK)
        consumers = self._consumers_of(name)
        if not consumers or not can_move:
            return indices, targets
        consumer_blocks = [self._state.block(self._func_name, c) for c in consumers]
        if len(consumer_blocks) == 1:
            boundary = self._sref_parent(consumer_blocks[0])
        else:
            chains = []
            for b in consumer_blocks:
                chain = [b] + [a for a in self._state.ancestors(self._func_name, b) if isinstance(a, (S.For, S.Block))]
                chains.append(chain)
            others = [{id(x) for x in c} for c in chains[1:]]
            boundary = next((x for x in chains[0] if all(id(x) in o for o in others)), None)
        if not isinstance(boundary, S.For):
            return indices, targets
        loops = self._state.loops_of(self._func_name, consumers[0])
        pos = next((i for i, loop in enumerate(loops) if loop is boundary), None)
        if pos is None:
            return indices, targets
        n_candidate = pos + 1
        iter_types = [self._loop_iter_type(loops[i]) for i in range(n_candidate)]
        last_datapar = max((i for i, t in enumerate(iter_types) if t == S.IterType.DATA_PAR), default=-1)
        visited_reduce = False
        loop_vars = [loop.loop_var for loop in loops[:n_candidate]]
        for i in range(n_candidate):
            if E.const_int(loops[i].extent) == 1:
                continue
            if iter_types[i] == S.IterType.DATA_PAR:
                if visited_reduce:
                    break
            else:
                visited_reduce = True
                if i > last_datapar:
                    break
            var = loop_vars[i]

            def attempt(var: E.Var = var) -> None:
                self.compute_at(block_rv, self._new_loop_rv(var), preserve_unit_loops=True)  # type: ignore[attr-defined]

            if self._probe(attempt):
                indices.append(i)
                targets.append(var)
        return indices, targets

    def enter_postproc(self) -> None:
        """Mark the start of post-processing instructions in the trace."""
        self._record("EnterPostproc", [], [], [])
