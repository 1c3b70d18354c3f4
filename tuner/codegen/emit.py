"""LLVM IR emission (llvmlite.ir) for a lowered function.

For a function `f` it emits the kernel `f` (TVM's calling convention, `noalias` as TVM sets it),
`f_packed` (the pointers in an array, what the runner calls) and `f_timed` (the kernel run
`number` times, returning nanoseconds), and turns serial, unrolled, vectorized and parallel
loops into code. See docs/architecture.md, "Code generation".
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Callable

import llvmlite.ir as ir

from msdb.ir import expr as E
from msdb.ir import stmt as S
from msdb.ir.arith import const_int_bound, simplify, stride_of
from msdb.tuner.codegen.analysis import (
    allocation_elements, count_stmts, flat_index, promote_to_i64, vars_in, walk,
)
from msdb.tuner.codegen.emit_expr import ExprEmitter
from msdb.tuner.codegen.errors import CodegenError
from msdb.tuner.codegen.lower import NOOP, Allocate, LoweredFunc
from msdb.tuner.codegen.masked import MaskedMemory
from msdb.tuner.codegen.state import FnState, VecState
from msdb.tuner.codegen.types import (
    I1, I8, I32, I64, PTR, VOID, alloca_ptr, const, elem_bytes, ident, memory_type, scalar_type, type_suffix,
)
from msdb.tuner.codegen.vectorize import VectorPlan

__all__ = ["EmitOptions", "emit_module", "EntryPoints"]

logger = logging.getLogger(__name__)

#: The most lanes one vector statement gets; wider vectorized loops run in chunks of 16.
MAX_LANES = 64
#: Per-function stack budget for allocations; larger buffers go to the heap (aligned_alloc).
STACK_BUDGET = 512 * 1024
#: Strided vector loads become this many scalar loads per function at most (then gathers).
GATHER_LANE_BUDGET = 1024
#: Vector loads with a lane stride up to this are one wide load and a shuffle; wider strides
#: (a column of a row-major matrix) are scalar loads.
MAX_LOAD_STRIDE = 4
#: An explicitly unrolled loop may replicate at most this many statements.
UNROLL_STMT_LIMIT = 2048


@dataclass(frozen=True)
class EmitOptions:
    """Knobs of the emitter that change the generated code (part of any cache key)."""

    fast_math: tuple[str, ...] = ("contract",)
    max_lanes: int = MAX_LANES
    gather_lane_budget: int = GATHER_LANE_BUDGET
    max_load_stride: int = MAX_LOAD_STRIDE
    #: vectorized extents that are not a power of two as vectors of exactly that length
    #: instead of padded, masked ones (see `_Emitter.vector_loop` for why it is off)
    exact_lanes: bool = False
    unroll_limit: int = UNROLL_STMT_LIMIT
    stack_budget: int = STACK_BUDGET


@dataclass(frozen=True)
class EntryPoints:
    """Symbol names of the emitted module's entry points."""

    main: str
    packed: str
    timed: str

def emit_module(func: LoweredFunc, options: EmitOptions | None, triple: str,
                register_bits: int) -> tuple[ir.Module, EntryPoints]:
    """Emit the LLVM module of a lowered function; returns it with its entry symbols.
    `register_bits`: the target's vector register width (`jit.vector_register_bits`), the
    widest masked memory operation handed to LLVM (`masked.MaskedMemory`)."""
    emitter = _Emitter(func, options or EmitOptions(), triple, register_bits)
    return emitter.run()


# =============================================================================================
# The emitter
# =============================================================================================


class _Emitter(ExprEmitter):
    def __init__(self, func: LoweredFunc, options: EmitOptions, triple: str, register_bits: int) -> None:
        self.func = func
        self.options = options
        self.masked = MaskedMemory(self._masked_intrinsic, register_bits)
        self.module = ir.Module(name=func.name)
        if triple:
            self.module.triple = triple
        self.flags = tuple(options.fast_math)
        self._decls: dict[str, ir.Function] = {}
        self._bounds: dict[int, tuple[int, int]] = {}
        self._flat: dict[int, E.PrimExpr] = {}
        self._plans: dict[int, str | None] = {}
        self._info: dict[int, tuple[bool, frozenset]] = {}
        self._speculatable: dict[int, bool] = {}
        self._strides: dict[tuple[int, E.Var], int | None] = {}
        self._par_count = 0
        self._loop_md_count = 0
        self._keep: list[Any] = []  # IR nodes whose id() keys the caches above

    # ---- module structure ----
    def run(self) -> tuple[ir.Module, EntryPoints]:
        name = self.func.name
        params = self.func.params
        fnty = ir.FunctionType(VOID, [PTR] * len(params))
        main = ir.Function(self.module, fnty, name=name)
        main.attributes.add("nounwind")
        main.attributes.add("noinline")
        for arg, buf in zip(main.args, params):
            if self.func.noalias:
                arg.add_attribute("noalias")
            arg.name = ident(buf.name)
        fn = self._new_fn(main)
        for arg, buf in zip(main.args, params):
            fn.buffers[buf] = arg
        self.stmt(fn, self.func.body)
        fn.builder.ret_void()
        self._finish_fn(fn)
        packed = self._emit_packed(main, len(params))
        timed = self._emit_timed(main, len(params))
        return self.module, EntryPoints(name, packed.name, timed.name)

    def _new_fn(self, llfn: ir.Function) -> FnState:
        entry = llfn.append_basic_block("entry")
        start = llfn.append_basic_block("start")
        alloca_builder = ir.IRBuilder(entry)
        builder = ir.IRBuilder(start)
        return FnState(llfn, builder, alloca_builder)

    def _finish_fn(self, fn: FnState) -> None:
        fn.alloca_builder.branch(fn.fn.blocks[1])

    def _emit_packed(self, main: ir.Function, nargs: int) -> ir.Function:
        f = ir.Function(self.module, ir.FunctionType(VOID, [PTR]), name=main.name + "_packed")
        f.attributes.add("nounwind")
        b = ir.IRBuilder(f.append_basic_block("entry"))
        b.call(main, self._unpack_args(b, f.args[0], nargs))
        b.ret_void()
        return f

    def _unpack_args(self, b: ir.IRBuilder, args: ir.Value, nargs: int) -> list[ir.Value]:
        out = []
        for i in range(nargs):
            slot = b.gep(args, [ir.Constant(I64, i)], inbounds=True, source_etype=PTR)
            out.append(b.load(slot, typ=PTR, align=8))
        return out

    def _emit_timed(self, main: ir.Function, nargs: int) -> ir.Function:
        timespec = ir.LiteralStructType([I64, I64])
        clock = self._declare("clock_gettime", I32, [I32, PTR])
        f = ir.Function(self.module, ir.FunctionType(I64, [PTR, I64]), name=main.name + "_timed")
        f.attributes.add("nounwind")
        entry = f.append_basic_block("entry")
        loop = f.append_basic_block("loop")
        done = f.append_basic_block("done")
        b = ir.IRBuilder(entry)
        ts0 = alloca_ptr(b, timespec, "ts0", 8)
        ts1 = alloca_ptr(b, timespec, "ts1", 8)
        args = self._unpack_args(b, f.args[0], nargs)
        number = f.args[1]
        b.call(clock, [ir.Constant(I32, 1), ts0])
        b.cbranch(b.icmp_signed(">", number, ir.Constant(I64, 0)), loop, done)
        b.position_at_end(loop)
        i = b.phi(I64)
        i.add_incoming(ir.Constant(I64, 0), entry)
        b.call(main, args)
        nxt = b.add(i, ir.Constant(I64, 1))
        i.add_incoming(nxt, loop)
        b.cbranch(b.icmp_signed("<", nxt, number), loop, done)
        b.position_at_end(done)
        b.call(clock, [ir.Constant(I32, 1), ts1])

        def nanos(ts: ir.Value) -> ir.Value:
            sec = b.load(b.gep(ts, [ir.Constant(I32, 0), ir.Constant(I32, 0)], inbounds=True, source_etype=timespec), typ=I64)
            nsec = b.load(b.gep(ts, [ir.Constant(I32, 0), ir.Constant(I32, 1)], inbounds=True, source_etype=timespec), typ=I64)
            return b.add(b.mul(sec, ir.Constant(I64, 1_000_000_000)), nsec)

        b.ret(b.sub(nanos(ts1), nanos(ts0)))
        return f

    def _declare(self, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
        fn = self._decls.get(name)
        if fn is None:
            existing = self.module.globals.get(name)
            if existing is not None:
                fn = existing
            else:
                fn = ir.Function(self.module, ir.FunctionType(ret, args), name=name)
            self._decls[name] = fn
        return fn

    def _intrinsic(self, base: str, t: ir.Type, nargs: int) -> ir.Function:
        return self._declare(f"llvm.{base}.{type_suffix(t)}", t, [t] * nargs)

    # ---- caches over IR nodes ----
    def bound(self, fn: FnState, e: E.PrimExpr) -> tuple[int, int]:
        key = id(e)
        hit = self._bounds.get(key)
        if hit is None:
            try:
                hit = const_int_bound(e, fn.ranges)
            except Exception:  # bounds are an optimization only
                hit = (-(1 << 63), (1 << 63) - 1)
            self._bounds[key] = hit
            self._keep.append(e)
        return hit

    def flat(self, buf: E.Buffer, node: Any, indices: tuple[E.PrimExpr, ...]) -> E.PrimExpr:
        key = id(node)
        hit = self._flat.get(key)
        if hit is None:
            hit = flat_index(buf, indices)
            try:
                hit = simplify(hit)
            except Exception:  # simplification only helps the lane analysis
                logger.debug("simplify failed on the index of %s", buf.name, exc_info=True)
            # Address arithmetic in i64: `sext(a + 1)` is not `sext(a) + 1` to LLVM once nsw
            # flags are gone (reassociation drops them), so i32 offsets hide contiguity.
            hit = promote_to_i64(hit)
            self._flat[key] = hit
            self._keep.append(node)
        return hit

    def stride(self, flat: E.PrimExpr, var: E.Var) -> int | None:
        """`stride_of`, cached per (flat index node, lane variable)."""
        key = (id(flat), var)
        if key not in self._strides:
            self._strides[key] = stride_of(flat, var)
        return self._strides[key]

    # =========================================================================================
    # Statements
    # =========================================================================================

    def stmt(self, fn: FnState, s: S.Stmt) -> None:
        t = type(s)
        if isinstance(s, S.SeqStmt):
            for x in s.seq:
                self.stmt(fn, x)
        elif isinstance(s, S.BufferStore):
            self.store(fn, s)
        elif isinstance(s, S.For):
            self.loop(fn, s)
        elif isinstance(s, S.IfThenElse):
            self.if_stmt(fn, s)
        elif isinstance(s, S.LetStmt):
            fn.bind(s.var, self.expr(fn, s.value))
            try:
                self.stmt(fn, s.body)
            finally:
                fn.unbind(s.var)
        elif isinstance(s, Allocate):
            self.allocate(fn, s)
        elif isinstance(s, S.Evaluate):
            if s is not NOOP and not isinstance(s.value, (E.IntImm, E.FloatImm)):
                self.expr(fn, s.value)
        else:
            raise CodegenError(f"cannot emit statement {t.__name__}")

    def if_stmt(self, fn: FnState, s: S.IfThenElse) -> None:
        cond = self.expr(fn, s.condition)
        if isinstance(cond.type, ir.VectorType):
            self.masked_if(fn, s, cond)
            return
        if isinstance(cond, ir.Constant):
            if cond.constant:
                self.stmt(fn, s.then_case)
            elif s.else_case is not None:
                self.stmt(fn, s.else_case)
            return
        b = fn.builder
        then_bb = fn.fn.append_basic_block("if_then")
        merge_bb = fn.fn.append_basic_block("if_end")
        else_bb = fn.fn.append_basic_block("if_else") if s.else_case is not None else merge_bb
        b.cbranch(cond, then_bb, else_bb)
        b.position_at_end(then_bb)
        fn.push_scope()
        try:
            self.stmt(fn, s.then_case)
        finally:
            fn.pop_scope()
        b.branch(merge_bb)
        if s.else_case is not None:
            b.position_at_end(else_bb)
            fn.push_scope()
            try:
                self.stmt(fn, s.else_case)
            finally:
                fn.pop_scope()
            b.branch(merge_bb)
        b.position_at_end(merge_bb)

    def masked_if(self, fn: FnState, s: S.IfThenElse, cond: ir.Value) -> None:
        """A lane-dependent `if` in vector code: both arms run under masks (no branch)."""
        vec = fn.vec
        assert vec is not None
        outer, outer_predicated = vec.mask, vec.predicated
        b = fn.builder
        try:
            vec.predicated = True
            vec.mask = self.within(fn, outer, cond)
            self.stmt(fn, s.then_case)
            if s.else_case is not None:
                inverse = b.xor(cond, self.const_like(cond, 1))
                vec.mask = self.within(fn, outer, inverse)
                self.stmt(fn, s.else_case)
        finally:
            vec.mask, vec.predicated = outer, outer_predicated

    def _masked_intrinsic(self, kind: str, vt: ir.VectorType) -> ir.Function:
        lanes = vt.count
        mask_t = ir.VectorType(I1, lanes)
        suffix = type_suffix(vt)
        if kind == "load":
            return self._declare(f"llvm.masked.load.{suffix}.p0", vt, [PTR, I32, mask_t, vt])
        if kind == "store":
            return self._declare(f"llvm.masked.store.{suffix}.p0", VOID, [vt, PTR, I32, mask_t])
        return self._declare(f"llvm.masked.gather.{suffix}.v{lanes}p0", vt, [ir.VectorType(PTR, lanes), I32, mask_t, vt])

    def allocate(self, fn: FnState, s: Allocate) -> None:
        buf = s.buffer
        count = allocation_elements(buf)
        nbytes = max(1, count) * elem_bytes(buf.dtype)
        heap = None
        ptr = fn.allocas.get(id(s))
        if ptr is None:
            if fn.stack_bytes + nbytes <= self.options.stack_budget:
                arr = ir.ArrayType(memory_type(buf.dtype), max(1, count))
                ptr = alloca_ptr(fn.alloca_builder, arr, ident(buf.name), 64)
                fn.stack_bytes += nbytes
                fn.allocas[id(s)] = ptr
                self._keep.append(s)
        if ptr is None:
            alloc = self._declare("aligned_alloc", PTR, [I64, I64])
            size = (nbytes + 63) // 64 * 64
            heap = fn.builder.call(alloc, [ir.Constant(I64, 64), ir.Constant(I64, size)])
            ptr = heap
        fn.buffers[buf] = ptr
        try:
            self.stmt(fn, s.body)
        finally:
            del fn.buffers[buf]
        if heap is not None:
            free = self._declare("free", VOID, [PTR])
            fn.builder.call(free, [heap])

    # ---- loops ----
    def loop(self, fn: FnState, s: S.For) -> None:
        ext = s.extent.value if type(s.extent) is E.IntImm else None
        if ext is not None and ext <= 0:
            return
        kind = s.kind
        if kind == S.ForKind.PARALLEL and not fn.in_parallel and fn.vec is None and (ext is None or ext > 1):
            self.parallel(fn, s)
            return
        if kind == S.ForKind.VECTORIZED and fn.vec is None and ext is not None and ext > 1:
            if self.vector_loop(fn, s, ext):
                return
            self.serial(fn, s, {"llvm.loop.vectorize.enable": True})
            return
        if kind == S.ForKind.UNROLLED:
            if ext is not None and ext * count_stmts(s.body) <= self.options.unroll_limit:
                self.unrolled(fn, s, ext)
                return
            self.serial(fn, s, {"llvm.loop.unroll.full": None} if ext is not None else {"llvm.loop.unroll.enable": None})
            return
        self.serial(fn, s, None)

    def _loop_bounds(self, fn: FnState, s: S.For) -> tuple[ir.Value, ir.Value, ir.Type]:
        ty = scalar_type(s.loop_var.dtype)
        lo = self.cast_value(fn, self.expr(fn, s.min), s.min.dtype, s.loop_var.dtype)
        ext = self.cast_value(fn, self.expr(fn, s.extent), s.extent.dtype, s.loop_var.dtype)
        hi = self.int_op(fn, "add", lo, ext, s.loop_var.dtype)
        return lo, hi, ty

    def serial(self, fn: FnState, s: S.For, md: dict[str, Any] | None) -> None:
        lo, hi, ty = self._loop_bounds(fn, s)
        known = type(s.extent) is E.IntImm and s.extent.value > 0
        fn.ranges[s.loop_var] = E.Range(s.min, s.extent)
        try:
            self.counted_loop(fn, s.loop_var, lo, hi, ty, known, lambda: self.stmt(fn, s.body), md)
        finally:
            fn.ranges.pop(s.loop_var, None)

    def counted_loop(self, fn: FnState, var: E.Var, lo: ir.Value, hi: ir.Value, ty: ir.Type, nonempty: bool,
                     body: Callable[[], None], md: dict[str, Any] | None) -> None:
        b = fn.builder
        pre = b.block
        body_bb = fn.fn.append_basic_block(f"for_{ident(var.name)}")
        exit_bb = fn.fn.append_basic_block(f"for_{ident(var.name)}_end")
        if nonempty:
            b.branch(body_bb)
        else:
            b.cbranch(b.icmp_signed("<", lo, hi), body_bb, exit_bb)
        b.position_at_end(body_bb)
        phi = b.phi(ty, name=ident(var.name))
        phi.add_incoming(lo, pre)
        fn.bind(var, phi)
        fn.push_scope()
        try:
            body()
        finally:
            fn.pop_scope()
            fn.unbind(var)
        nxt = b.add(phi, ir.Constant(ty, 1), flags=["nsw"])
        phi.add_incoming(nxt, b.block)
        br = b.cbranch(b.icmp_signed("<", nxt, hi), body_bb, exit_bb)
        if md:
            br.set_metadata("llvm.loop", self.loop_metadata(md))
        b.position_at_end(exit_bb)

    def loop_metadata(self, props: dict[str, Any]) -> ir.Value:
        m = self.module
        self._loop_md_count += 1
        node = m.add_metadata([ir.MetaDataString(m, f"msdb.loop.{self._loop_md_count}")])
        entries = []
        for key, value in props.items():
            if value is None:
                entries.append(m.add_metadata([ir.MetaDataString(m, key)]))
            elif isinstance(value, bool):
                entries.append(m.add_metadata([ir.MetaDataString(m, key), ir.Constant(I1, int(value))]))
            else:
                entries.append(m.add_metadata([ir.MetaDataString(m, key), ir.Constant(I32, int(value))]))
        node.operands = (node, *entries)  # self-reference: a distinct loop id (LLVM's convention)
        return node

    def unrolled(self, fn: FnState, s: S.For, ext: int) -> None:
        ty = scalar_type(s.loop_var.dtype)
        lo = self.cast_value(fn, self.expr(fn, s.min), s.min.dtype, s.loop_var.dtype)
        fn.ranges[s.loop_var] = E.Range(s.min, s.extent)
        try:
            for k in range(ext):
                fn.bind(s.loop_var, self.int_op(fn, "add", lo, ir.Constant(ty, k), s.loop_var.dtype))
                self.stmt(fn, s.body)
        finally:
            fn.unbind(s.loop_var)
            fn.ranges.pop(s.loop_var, None)

    # ---- vectorized loops ----
    def vector_loop(self, fn: FnState, s: S.For, ext: int) -> bool:
        key = id(s)
        if key not in self._plans:
            self._plans[key] = VectorPlan(s.loop_var, self.flat).check(s.body)
            self._keep.append(s)
        reason = self._plans[key]
        if reason is not None:
            logger.debug("scalarizing vectorized loop %s: %s", s.loop_var.name, reason)
            return False
        # Lane counts: a power-of-two extent up to max_lanes is one vector; another extent is
        # padded (next power of two up to 16, else a multiple of 16) with the extra lanes masked
        # off, or with `exact_lanes` a vector of exactly that length (LLVM legalizes <7 x float>:
        # no masks, but x86 instruction selection splits its loads into 4 + 2 + 1 elements and
        # inserts; measured on ResNet-18's default-schedule convs, AVX-512: 14 wide 8% faster,
        # 7 wide 11% and 28 wide 2.5x slower, so it is off); beyond max_lanes, a loop over
        # 16-lane chunks and a tail.
        max_lanes = self.options.max_lanes
        if ext <= max_lanes and (self.options.exact_lanes or ext & (ext - 1) == 0):
            lanes, chunks, tail = ext, 1, 0
        elif ext <= max_lanes:
            lanes = 1 << (ext - 1).bit_length() if ext <= 16 else (ext + 15) // 16 * 16
            chunks, tail = 1, 0
        else:
            lanes = 16
            chunks, tail = ext // 16, ext % 16
        ty = scalar_type(s.loop_var.dtype)
        lo = self.cast_value(fn, self.expr(fn, s.min), s.min.dtype, s.loop_var.dtype)
        fn.ranges[s.loop_var] = E.Range(s.min, s.extent)

        def one(base: ir.Value, width: int, active: int) -> None:
            lane_ids = const(ir.VectorType(ty, width), list(range(width)))
            vector = self.int_op(fn, "add", self.splat(fn, base, width), lane_ids, s.loop_var.dtype)
            mask = None if active == width else const(ir.VectorType(I1, width), [int(k < active) for k in range(width)])
            fn.vec = VecState(s.loop_var, width, base, vector, mask=mask, active=active)
            try:
                self.stmt(fn, s.body)
            finally:
                fn.vec = None

        try:
            if chunks == 1:
                one(lo, lanes, min(lanes, ext))
            if chunks > 1:
                chunk_var = E.Var(s.loop_var.name + "_chunk", s.loop_var.dtype)

                def body() -> None:
                    c = fn.env[chunk_var]
                    base = self.int_op(fn, "add", lo, self.int_op(fn, "mul", c, ir.Constant(ty, lanes), s.loop_var.dtype),
                                       s.loop_var.dtype)
                    one(base, lanes, lanes)

                self.counted_loop(fn, chunk_var, ir.Constant(ty, 0), ir.Constant(ty, chunks), ty, True, body, None)
            if tail:
                base = self.int_op(fn, "add", lo, ir.Constant(ty, chunks * lanes), s.loop_var.dtype)
                if self.options.exact_lanes:
                    one(base, tail, tail)
                else:  # a padded chunk, its extra lanes masked off
                    one(base, lanes, tail)
        finally:
            fn.ranges.pop(s.loop_var, None)
        return True

    # ---- parallel loops ----
    def parallel(self, fn: FnState, s: S.For) -> None:
        defined: set[E.Var] = set()
        allocated: set[E.Buffer] = set()
        used_bufs: list[E.Buffer] = []
        seen_bufs: set[E.Buffer] = set()

        def collect(node: Any) -> None:
            if isinstance(node, S.For):
                defined.add(node.loop_var)
            elif isinstance(node, S.LetStmt):
                defined.add(node.var)
            elif isinstance(node, Allocate):
                allocated.add(node.buffer)
            elif isinstance(node, (E.BufferLoad, S.BufferStore)):
                if node.buffer not in seen_bufs:
                    seen_bufs.add(node.buffer)
                    used_bufs.append(node.buffer)

        walk(s, collect)
        free = sorted((v for v in vars_in(s) if v not in defined), key=lambda v: v.name)
        for v in free:
            if v not in fn.env:
                raise CodegenError(f"variable {v.name} is used in a parallel loop but never defined")
        bufs = [b for b in used_bufs if b not in allocated]
        for b in bufs:
            if b not in fn.buffers:
                raise CodegenError(f"buffer {b.name} is used in a parallel loop outside its allocation")
        ity = scalar_type(s.loop_var.dtype)
        lo, hi, _ = self._loop_bounds(fn, s)
        scalar_vals = [fn.env[v] for v in free]
        self._par_count += 1
        base = f"{self.func.name}_par{self._par_count}"

        # worker: void base(ptr noalias bufs..., scalars..., begin, end)
        wtypes = [PTR] * len(bufs) + [v.type for v in scalar_vals] + [ity, ity]
        worker = ir.Function(self.module, ir.FunctionType(VOID, wtypes), name=base)
        worker.linkage = "internal"
        worker.attributes.add("nounwind")
        for a, b_ in zip(worker.args, bufs):
            # the closure loses aliasing facts; restate them: arguments per the function's
            # noalias attribute, allocations always (nothing else points into them)
            if self.func.noalias or b_ not in self.func.params:
                a.add_attribute("noalias")
        wfn = self._new_fn(worker)
        wfn.in_parallel = True
        wfn.ranges = dict(fn.ranges)
        wfn.ranges[s.loop_var] = E.Range(s.min, s.extent)
        for b_, a in zip(bufs, worker.args):
            wfn.buffers[b_] = a
        for v, a in zip(free, worker.args[len(bufs):]):
            wfn.bind(v, a)
        begin, end = worker.args[-2], worker.args[-1]
        self.counted_loop(wfn, s.loop_var, begin, end, ity, False, lambda: self.stmt(wfn, s.body), None)
        wfn.builder.ret_void()
        self._finish_fn(wfn)

        # trampoline: void base_entry(ptr closure)
        fields = [PTR] * len(bufs) + [v.type for v in scalar_vals] + [ity, ity]
        closure_t = ir.LiteralStructType(fields)
        entry = ir.Function(self.module, ir.FunctionType(VOID, [PTR]), name=base + "_entry")
        entry.linkage = "internal"
        entry.attributes.add("nounwind")
        eb = ir.IRBuilder(entry.append_basic_block("entry"))
        vals = []
        for k, ft in enumerate(fields):
            slot = eb.gep(entry.args[0], [ir.Constant(I32, 0), ir.Constant(I32, k)], inbounds=True, source_etype=closure_t)
            vals.append(eb.load(slot, typ=ft))
        first, last = vals[-2], vals[-1]
        nthreads = self._widen(eb, eb.call(self._declare("omp_get_num_threads", I32, []), []), ity)
        tid = self._widen(eb, eb.call(self._declare("omp_get_thread_num", I32, []), []), ity)
        total = eb.sub(last, first)
        chunk = eb.sdiv(eb.sub(eb.add(total, nthreads), ir.Constant(ity, 1)), nthreads)
        start = eb.add(first, eb.mul(tid, chunk))
        stop_ = eb.add(start, chunk)
        stop = eb.select(eb.icmp_signed("<", stop_, last), stop_, last)
        run_bb = entry.append_basic_block("run")
        done_bb = entry.append_basic_block("done")
        eb.cbranch(eb.icmp_signed("<", start, stop), run_bb, done_bb)
        eb.position_at_end(run_bb)
        eb.call(worker, vals[:-2] + [start, stop])
        eb.branch(done_bb)
        eb.position_at_end(done_bb)
        eb.ret_void()

        # parent: fill the closure, launch the team
        closure = alloca_ptr(fn.alloca_builder, closure_t, base + "_closure", 16)
        b = fn.builder
        for k, value in enumerate([fn.buffers[b_] for b_ in bufs] + scalar_vals + [lo, hi]):
            slot = b.gep(closure, [ir.Constant(I32, 0), ir.Constant(I32, k)], inbounds=True, source_etype=closure_t)
            b.store(value, slot)
        gomp = self._declare("GOMP_parallel", VOID, [PTR, PTR, I32, I32])
        b.call(gomp, [entry, closure, ir.Constant(I32, 0), ir.Constant(I32, 0)])

    @staticmethod
    def _widen(b: ir.IRBuilder, v: ir.Value, ty: ir.Type) -> ir.Value:
        if v.type == ty:
            return v
        return b.sext(v, ty) if ty.width > v.type.width else b.trunc(v, ty)

    # ---- stores and loads ----
    def address(self, fn: FnState, buf: E.Buffer, flat: E.PrimExpr) -> ir.Value:
        base = fn.buffers.get(buf)
        if base is None:
            raise CodegenError(f"buffer {buf.name} is used outside its allocation")
        offset = self.expr(fn, flat)
        if isinstance(offset, ir.Constant) and offset.constant == 0:
            return base
        return fn.builder.gep(base, [offset], inbounds=True, source_etype=memory_type(buf.dtype))

    def store(self, fn: FnState, s: S.BufferStore) -> None:
        buf = s.buffer
        flat = self.flat(buf, s, s.indices)
        value = self.expr(fn, s.value)
        value = self.cast_value(fn, value, s.value.dtype, buf.dtype)
        align = elem_bytes(buf.dtype)
        vec = fn.vec
        if vec is not None and (isinstance(value.type, ir.VectorType) or self.stride(flat, vec.var) == 1):
            vec.lane0 = True
            try:
                ptr = self.address(fn, buf, flat)
            finally:
                vec.lane0 = False
            if not isinstance(value.type, ir.VectorType):
                value = self.splat(fn, value, vec.lanes)
            value = self.to_memory(fn, value, buf.dtype)
            if vec.mask is not None:
                self.masked.store(fn.builder, value, ptr, align, vec.mask, vec.active or None)
            else:
                fn.builder.store(value, ptr, align=align)
            return
        ptr = self.address(fn, buf, flat)
        fn.builder.store(self.to_memory(fn, value, buf.dtype), ptr, align=align)

    def to_memory(self, fn: FnState, value: ir.Value, dtype: str) -> ir.Value:
        if dtype != "bool":
            return value
        t = value.type
        target = ir.VectorType(I8, t.count) if isinstance(t, ir.VectorType) else I8
        return fn.builder.zext(value, target)

    def from_memory(self, fn: FnState, value: ir.Value, dtype: str) -> ir.Value:
        if dtype != "bool":
            return value
        zero = ir.Constant(value.type, None)
        return fn.builder.icmp_unsigned("!=", value, zero)

    def load(self, fn: FnState, e: E.BufferLoad) -> ir.Value:
        buf = e.buffer
        flat = self.flat(buf, e, e.indices)
        align = elem_bytes(buf.dtype)
        mt = memory_type(buf.dtype)
        vec = fn.vec
        stride = self.stride(flat, vec.var) if vec is not None else 0
        masked = vec is not None and vec.mask is not None
        if vec is not None and (stride != 0 or vec.predicated):
            vt = ir.VectorType(mt, vec.lanes)
            if stride == 1:
                vec.lane0 = True
                try:
                    ptr = self.address(fn, buf, flat)
                finally:
                    vec.lane0 = False
                if masked:
                    value = self.masked.load(fn.builder, ptr, vt, align, vec.mask, vec.active or None)
                else:
                    value = fn.builder.load(ptr, typ=vt, align=align)
                return self.from_memory(fn, value, buf.dtype)
            # gather (llvm.masked.gather, all lanes on): a vector of pointers from lane 0's
            # address plus constant offsets (strided), or from the index evaluated as a vector.
            # One instruction per access keeps unrolled code small; the backend picks hardware
            # gathers or scalar loads for the CPU.
            # A lane-invariant load under a mask is a gather of one address, so that it happens
            # only if some lane is active (the scalar loop would not have run it otherwise).
            b = fn.builder
            lanes = vec.lanes
            if stride is not None and not vec.predicated and 2 <= abs(stride) <= self.options.max_load_stride:
                return self.from_memory(fn, self.strided_load(fn, buf, flat, stride, lanes, vec.active), buf.dtype)
            if stride is not None and not masked and fn.gather_lanes + lanes <= self.options.gather_lane_budget:
                # strided, all lanes on: scalar loads at constant offsets from lane 0's address,
                # which LLVM folds into addressing modes (its own scalarization of the gather
                # intrinsic comes too late for that); bounded per function because long
                # insertelement chains make O3 slow on heavily unrolled kernels
                fn.gather_lanes += lanes
                vec.lane0 = True
                try:
                    ptr0 = self.address(fn, buf, flat)
                finally:
                    vec.lane0 = False
                out = ir.Constant(vt, ir.Undefined)
                for lane in range(lanes):
                    ptr = ptr0 if lane == 0 else b.gep(ptr0, [const(I64, lane * stride)], inbounds=True, source_etype=mt)
                    out = b.insert_element(out, b.load(ptr, typ=mt, align=align), const(I32, lane))
                return self.from_memory(fn, out, buf.dtype)
            if stride is not None:
                vec.lane0 = True
                try:
                    ptr0 = self.address(fn, buf, flat)
                finally:
                    vec.lane0 = False
                offsets = const(ir.VectorType(I64, lanes), [lane * stride for lane in range(lanes)])
                ptrs = b.gep(ptr0, [offsets], source_etype=mt)  # not inbounds: off lanes may point anywhere
            else:
                offsets = self.expr(fn, flat)
                ptrs = b.gep(fn.buffers[buf], [offsets], source_etype=mt)
            ptrs.type = ir.VectorType(PTR, lanes)  # llvmlite types a vector GEP as a scalar ptr
            all_on = const(ir.VectorType(I1, lanes), [1] * lanes)
            if masked and not isinstance(vec.mask, ir.Constant):
                value = self.masked.gather(b, self.guarded_pointers(fn, buf, ptrs, vec.mask), vt, align, all_on,
                                           ir.Constant(vt, ir.Undefined))
                return self.from_memory(fn, b.select(vec.mask, value, ir.Constant(vt, None)), buf.dtype)
            mask = vec.mask if masked else all_on
            value = self.masked.gather(b, ptrs, vt, align, mask, ir.Constant(vt, None if masked else ir.Undefined))
            return self.from_memory(fn, value, buf.dtype)
        ptr = self.address(fn, buf, flat)
        if fn.guard is not None:  # a speculated arm: an untaken arm's address may be out of bounds
            ptr = self.guarded_pointers(fn, buf, ptr, fn.guard)
        value = fn.builder.load(ptr, typ=mt, align=align)
        return self.from_memory(fn, value, buf.dtype)

    def guarded_pointers(self, fn: FnState, buf: E.Buffer, ptrs: ir.Value, guard: ir.Value) -> ir.Value:
        """`ptrs` where `guard` holds, else the buffer's first element: an address that is safe
        to read whatever the guard (a scalar pointer and guard, or vectors of them lane by
        lane). A load through it needs no mask or branch; its value is used only where the guard
        holds. Vector gathers under a lane-dependent mask go this way too: LLVM turns a masked
        gather into a branch per lane on CPUs without fast gathers, and a heavily unrolled conv
        whose padding was vectorized had 8,000 blocks and took 10 s in LLVM's code generator."""
        base = fn.buffers[buf]
        if isinstance(ptrs.type, ir.VectorType):
            base = fn.builder.gep(base, [const(ir.VectorType(I64, ptrs.type.count), [0] * ptrs.type.count)],
                                  source_etype=memory_type(buf.dtype))
            base.type = ptrs.type  # llvmlite types a vector GEP as a scalar ptr
        return fn.builder.select(guard, ptrs, base)

    def strided_load(self, fn: FnState, buf: E.Buffer, flat: E.PrimExpr, stride: int, lanes: int,
                     active: int) -> ir.Value:
        """A vector of `lanes` elements `stride` apart, lanes `active` and above padding: one
        contiguous load of the span from the lowest active lane's element to the highest's,
        then a shufflevector that picks every `stride`-th (a stride-2 conv's input row). The
        span lies between two elements the loop reads anyway, so it is inside the buffer; with
        padding lanes the load is masked to that span. It replaces a scalar load and an
        insertelement per lane (with those, stride-2 convolutions ran 3-6x onnxruntime)."""
        mt = memory_type(buf.dtype)
        b = fn.builder
        vec = fn.vec
        assert vec is not None
        vec.lane0 = True
        try:
            ptr0 = self.address(fn, buf, flat)
        finally:
            vec.lane0 = False
        span = (lanes - 1) * abs(stride) + 1
        if stride > 0:
            start, picks = ptr0, [lane * stride for lane in range(lanes)]
        else:  # lane 0 is the highest address
            start = b.gep(ptr0, [const(I64, (lanes - 1) * stride)], inbounds=True, source_etype=mt)
            picks = [(lanes - 1 - lane) * -stride for lane in range(lanes)]
        wide_t = ir.VectorType(mt, span)
        align = elem_bytes(buf.dtype)
        if active < lanes:  # only the active lanes' span: [0, used) from lane 0, or its mirror
            used = (active - 1) * abs(stride) + 1
            on = [int(j < used) if stride > 0 else int(j >= span - used) for j in range(span)]
            mask = const(ir.VectorType(I1, span), on)
            wide = self.masked.load(b, start, wide_t, align, mask)
        else:
            wide = b.load(start, typ=wide_t, align=align)
        return b.shuffle_vector(wide, ir.Constant(wide_t, ir.Undefined), const(ir.VectorType(I32, lanes), picks))

    # =========================================================================================
    # Expressions
    # =========================================================================================

