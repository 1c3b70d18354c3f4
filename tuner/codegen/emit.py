"""LLVM IR emission (llvmlite.ir) for a lowered function.

What the emitted module contains, for a function named `f` with buffer arguments A, B, C:

* `void f(ptr noalias A, ptr noalias B, ptr noalias C)`: the kernel (TVM's calling convention:
  outputs are written in place). `noalias` is set, as TVM sets it, when the function has the
  `tir.noalias` attribute (every TE-created workload does); it matters: without it LLVM's
  vectorizer and LICM give up (reference/llvmlite-and-cuda.md).
* `void f_packed(ptr args)`: the same with the pointers in an array (what the runner calls).
* `i64 f_timed(ptr args, i64 number)`: runs the kernel `number` times and returns the elapsed
  nanoseconds (CLOCK_MONOTONIC), so timing has no Python overhead in the loop.

How loop kinds become code:

* serial: a counted loop; `unroll`: emitted `extent` times with the variable bound to each
  constant (small bodies), else a loop carrying `llvm.loop.unroll.full`.
* vectorized: when the body is vectorizable (every store contiguous or lane-invariant, no
  cross-lane dependence, no lane-dependent control flow) the loop becomes straight-line
  `<N x T>` code: contiguous accesses are vector loads/stores, lane-invariant ones scalars
  broadcast, others per-lane gathers. Otherwise it is scalarized into a serial loop (with
  `llvm.loop.vectorize.enable`, so LLVM may still vectorize it when it can prove it legal).
* parallel: the loop is outlined into `f_parN(ptr noalias bufs..., scalars..., begin, end)` and a
  trampoline `f_parN_entry(ptr closure)` that takes this thread's static chunk
  (omp_get_thread_num / omp_get_num_threads); the parent calls libgomp's `GOMP_parallel`.
  The trampoline calls a worker with `noalias` pointer parameters because pointers loaded from
  the closure carry no aliasing facts.

Integer arithmetic on signed types carries `nsw` like TVM's backend; float arithmetic carries
the fast-math flags in `EmitOptions` (default `contract` for FMA formation).
"""

from __future__ import annotations

import functools
import logging
import math
from dataclasses import dataclass, field
from typing import Any, Callable

import llvmlite.ir as ir

from msdb.ir import expr as E
from msdb.ir import stmt as S
from msdb.ir.dtype import bits as _bits
from msdb.ir.dtype import is_float, is_int, is_uint
from msdb.tuner.codegen.analysis import flat_index, int_bound, static_shape, stride_of, vars_in
from msdb.tuner.codegen.errors import CodegenError
from msdb.tuner.codegen.lower import NOOP, Allocate, LoweredFunc

__all__ = ["EmitOptions", "emit_module", "scalar_type", "EntryPoints"]

logger = logging.getLogger(__name__)

dtype_bits = functools.lru_cache(maxsize=None)(_bits)

PTR = ir.PointerType()
I1 = ir.IntType(1)
I8 = ir.IntType(8)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
VOID = ir.VoidType()

#: The most lanes one vector statement gets; wider vectorized loops run in chunks of 16.
MAX_LANES = 64
#: Per-function stack budget for allocations; larger buffers go to the heap (aligned_alloc).
STACK_BUDGET = 512 * 1024
#: An explicitly unrolled loop may replicate at most this many statements.
UNROLL_STMT_LIMIT = 2048


@dataclass(frozen=True)
class EmitOptions:
    """Knobs of the emitter that change the generated code (part of any cache key)."""

    fast_math: tuple[str, ...] = ("contract",)
    max_lanes: int = MAX_LANES
    unroll_limit: int = UNROLL_STMT_LIMIT
    stack_budget: int = STACK_BUDGET


@dataclass(frozen=True)
class EntryPoints:
    """Symbol names of the emitted module's entry points."""

    main: str
    packed: str
    timed: str


@functools.lru_cache(maxsize=None)
def scalar_type(dtype: str) -> ir.Type:
    """The LLVM register type of a TVM dtype (bool is i1)."""
    if dtype == "bool":
        return I1
    if is_int(dtype) or is_uint(dtype):
        return ir.IntType(dtype_bits(dtype))
    if dtype == "float32":
        return ir.FloatType()
    if dtype == "float64":
        return ir.DoubleType()
    if dtype == "float16":
        return ir.HalfType()
    if dtype == "handle":
        return PTR
    raise CodegenError(f"dtype {dtype!r} is not supported by the CPU code generator (bfloat16 and vector dtypes are not)")


@functools.lru_cache(maxsize=None)
def memory_type(dtype: str) -> ir.Type:
    """How a dtype is stored (bool as one byte, numpy's layout)."""
    return I8 if dtype == "bool" else scalar_type(dtype)


@functools.lru_cache(maxsize=None)
def elem_bytes(dtype: str) -> int:
    return 1 if dtype == "bool" else max(1, dtype_bits(dtype) // 8)


def _signed(dtype: str) -> bool:
    return is_int(dtype)


def _type_suffix(t: ir.Type) -> str:
    if isinstance(t, ir.VectorType):
        return f"v{t.count}{_type_suffix(t.element)}"
    if isinstance(t, ir.FloatType):
        return "f32"
    if isinstance(t, ir.DoubleType):
        return "f64"
    if isinstance(t, ir.HalfType):
        return "f16"
    if isinstance(t, ir.IntType):
        return f"i{t.width}"
    raise CodegenError(f"no intrinsic suffix for {t}")


_LLVM_UNARY = {
    "exp": "exp", "exp2": "exp2", "log": "log", "log2": "log2", "log10": "log10", "sqrt": "sqrt",
    "fabs": "fabs", "floor": "floor", "ceil": "ceil", "trunc": "trunc", "round": "nearbyint",
    "nearbyint": "nearbyint", "sin": "sin", "cos": "cos",
}
_LLVM_BINARY = {"pow": "pow", "copysign": "copysign"}
_LIBM_UNARY = frozenset(["tan", "tanh", "sinh", "cosh", "asin", "acos", "atan", "asinh", "acosh",
                         "atanh", "erf", "log1p", "expm1"])
_LIBM_BINARY = frozenset(["atan2", "hypot", "fmod", "nextafter"])
_EXTERN_CALLS = frozenset(["call_extern", "call_pure_extern", "tir.call_extern", "tir.call_pure_extern"])
_FLOAT_MAX = {"float16": 65504.0, "float32": 3.4028234663852886e38, "float64": 1.7976931348623157e308}


@dataclass
class _Vec:
    """The vectorized loop being emitted as one vector statement."""

    var: E.Var
    lanes: int
    base: ir.Value
    vector: ir.Value
    lane0: bool = False


@dataclass
class _Fn:
    """Emission state of one LLVM function."""

    fn: ir.Function
    builder: ir.IRBuilder
    alloca_builder: ir.IRBuilder
    env: dict[E.Var, ir.Value] = field(default_factory=dict)
    buffers: dict[E.Buffer, ir.Value] = field(default_factory=dict)
    ranges: dict[E.Var, E.Range] = field(default_factory=dict)
    in_parallel: bool = False
    vec: _Vec | None = None
    stack_bytes: int = 0
    allocas: dict[int, ir.Value] = field(default_factory=dict)
    # memo of pure expressions: id(expr) -> (value, ((var, version), ...), scope id)
    memo: dict[int, tuple[ir.Value, tuple, int]] = field(default_factory=dict)
    versions: dict[E.Var, int] = field(default_factory=dict)
    scopes: list[int] = field(default_factory=lambda: [0])
    active: set[int] = field(default_factory=lambda: {0})
    next_scope: int = 1

    def bind(self, var: E.Var, value: ir.Value) -> None:
        """(Re)bind a variable; memoized values that used its old value become stale."""
        self.env[var] = value
        self.versions[var] = self.versions.get(var, 0) + 1

    def unbind(self, var: E.Var) -> None:
        self.env.pop(var, None)
        self.versions[var] = self.versions.get(var, 0) + 1

    def push_scope(self) -> None:
        """Enter a region whose values do not dominate what follows it (loop body, branch)."""
        sid = self.next_scope
        self.next_scope += 1
        self.scopes.append(sid)
        self.active.add(sid)

    def pop_scope(self) -> None:
        self.active.discard(self.scopes.pop())


def emit_module(func: LoweredFunc, options: EmitOptions | None = None, triple: str = "") -> tuple[ir.Module, EntryPoints]:
    """Emit the LLVM module of a lowered function; returns it with its entry symbols."""
    emitter = _Emitter(func, options or EmitOptions(), triple)
    return emitter.run()


# =============================================================================================
# Vectorization legality
# =============================================================================================


class _VectorPlan:
    """Decides whether a vectorized loop body can be one vector statement; `reason` says why
    not. Conservative on dependences: a buffer stored in the body may only be loaded at the
    very index it is stored at."""

    def __init__(self, var: E.Var) -> None:
        self.var = var
        self.reason: str | None = None
        self.stores: dict[E.Buffer, set[Any]] = {}
        self.loads: list[tuple[E.Buffer, Any]] = []

    def varying(self, node: Any) -> bool:
        return self.var in vars_in(node)

    def fail(self, reason: str) -> None:
        if self.reason is None:
            self.reason = reason

    def check(self, body: S.Stmt) -> str | None:
        from msdb.ir.arith import structural_key

        self._key = structural_key
        self.stmt(body)
        if self.reason is None:
            for buf, key in self.loads:
                keys = self.stores.get(buf)
                if keys is not None and (len(keys) != 1 or key not in keys):
                    self.fail(f"buffer {buf.name} is loaded at another index than it is stored")
                    break
        return self.reason

    def stmt(self, s: S.Stmt) -> None:
        if self.reason is not None:
            return
        t = type(s)
        if t is S.BufferStore:
            flat = flat_index(s.buffer, s.indices)
            stride = stride_of(flat, self.var)
            if stride is None:
                return self.fail(f"store to {s.buffer.name} is not affine in the lane")
            if stride == 0 and self.varying(s.value):
                return self.fail(f"store to {s.buffer.name} reduces across lanes")
            if stride not in (0, 1):
                return self.fail(f"store to {s.buffer.name} has lane stride {stride}")
            self.stores.setdefault(s.buffer, set()).add(self._key(flat))
            self.expr(s.value)
            for i in s.indices:
                self.expr(i)
        elif t is S.SeqStmt:
            for x in s.seq:
                self.stmt(x)
        elif t is S.IfThenElse:
            if self.varying(s.condition):
                return self.fail("a condition depends on the lane")
            self.expr(s.condition)
            self.stmt(s.then_case)
            if s.else_case is not None:
                self.stmt(s.else_case)
        elif t is S.For:
            if self.varying(s.min) or self.varying(s.extent):
                return self.fail("an inner loop's bounds depend on the lane")
            self.stmt(s.body)
        elif t is S.LetStmt:
            if self.varying(s.value):
                return self.fail("a let value depends on the lane")
            self.stmt(s.body)
        elif t is S.Evaluate:
            self.expr(s.value)
        elif t is Allocate:
            self.fail("an allocation inside the vectorized loop")
        else:
            self.fail(f"statement {t.__name__}")

    def expr(self, e: E.PrimExpr) -> None:
        def visit(node: Any) -> None:
            if isinstance(node, E.BufferLoad):
                self.loads.append((node.buffer, self._key(flat_index(node.buffer, node.indices))))
            elif isinstance(node, E.Call) and node.op in ("if_then_else", "tir.if_then_else"):
                if self.varying(node.args[0]) and _has_load(node.args[1:]):
                    self.fail("if_then_else with a lane-dependent condition guards a load")
            elif isinstance(node, E.Call) and node.op in _EXTERN_CALLS:
                self.fail(f"external call {node.op} (it must run once per lane)")

        from msdb.ir.functor import post_order_visit

        post_order_visit(e, visit)


def _has_load(exprs: Any) -> bool:
    found = []

    def visit(node: Any) -> None:
        if isinstance(node, E.BufferLoad):
            found.append(node)

    from msdb.ir.functor import post_order_visit

    for e in exprs:
        post_order_visit(e, visit)
    return bool(found)


def _count_stmts(s: S.Stmt) -> int:
    """Statements executed by one run of `s` when its unrolled loops are replicated (an
    estimate of code size for the explicit-unroll limit)."""
    t = type(s)
    if t is S.SeqStmt:
        return sum(_count_stmts(x) for x in s.seq)
    if t is S.For:
        inner = _count_stmts(s.body)
        if s.kind == S.ForKind.UNROLLED and type(s.extent) is E.IntImm:
            return inner * max(1, s.extent.value)
        return inner + 1
    if t is S.IfThenElse:
        return _count_stmts(s.then_case) + (_count_stmts(s.else_case) if s.else_case is not None else 0) + 1
    if t is S.LetStmt or t is Allocate:
        return _count_stmts(s.body) + 1
    return 1


# =============================================================================================
# The emitter
# =============================================================================================


class _Emitter:
    def __init__(self, func: LoweredFunc, options: EmitOptions, triple: str) -> None:
        self.func = func
        self.options = options
        self.module = ir.Module(name=func.name)
        if triple:
            self.module.triple = triple
        self.flags = tuple(options.fast_math)
        self._decls: dict[str, ir.Function] = {}
        self._bounds: dict[int, tuple[int, int]] = {}
        self._flat: dict[int, E.PrimExpr] = {}
        self._plans: dict[int, str | None] = {}
        self._info: dict[int, tuple[bool, frozenset]] = {}
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
            arg.name = _ident(buf.name)
        fn = self._new_fn(main)
        for arg, buf in zip(main.args, params):
            fn.buffers[buf] = arg
        self.stmt(fn, self.func.body)
        fn.builder.ret_void()
        self._finish_fn(fn)
        packed = self._emit_packed(main, len(params))
        timed = self._emit_timed(main, len(params))
        return self.module, EntryPoints(name, packed.name, timed.name)

    def _new_fn(self, llfn: ir.Function) -> _Fn:
        entry = llfn.append_basic_block("entry")
        start = llfn.append_basic_block("start")
        alloca_builder = ir.IRBuilder(entry)
        builder = ir.IRBuilder(start)
        return _Fn(llfn, builder, alloca_builder)

    def _finish_fn(self, fn: _Fn) -> None:
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
        ts0 = _alloca(b, timespec, "ts0", 8)
        ts1 = _alloca(b, timespec, "ts1", 8)
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
        return self._declare(f"llvm.{base}.{_type_suffix(t)}", t, [t] * nargs)

    # ---- caches over IR nodes ----
    def bound(self, fn: _Fn, e: E.PrimExpr) -> tuple[int, int]:
        key = id(e)
        hit = self._bounds.get(key)
        if hit is None:
            try:
                hit = int_bound(e, fn.ranges)
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

    def stmt(self, fn: _Fn, s: S.Stmt) -> None:
        t = type(s)
        if t is S.SeqStmt:
            for x in s.seq:
                self.stmt(fn, x)
        elif t is S.BufferStore:
            self.store(fn, s)
        elif t is S.For:
            self.loop(fn, s)
        elif t is S.IfThenElse:
            self.if_stmt(fn, s)
        elif t is S.LetStmt:
            fn.bind(s.var, self.expr(fn, s.value))
            try:
                self.stmt(fn, s.body)
            finally:
                fn.unbind(s.var)
        elif t is Allocate:
            self.allocate(fn, s)
        elif t is S.Evaluate:
            if s is not NOOP and not isinstance(s.value, (E.IntImm, E.FloatImm)):
                self.expr(fn, s.value)
        else:
            raise CodegenError(f"cannot emit statement {t.__name__}")

    def if_stmt(self, fn: _Fn, s: S.IfThenElse) -> None:
        cond = self.expr(fn, s.condition)
        if isinstance(cond.type, ir.VectorType):
            raise CodegenError("internal: lane-dependent condition in vector code")
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

    def allocate(self, fn: _Fn, s: Allocate) -> None:
        buf = s.buffer
        count = 1
        for d in static_shape(buf):
            count *= d
        nbytes = max(1, count) * elem_bytes(buf.dtype)
        heap = None
        ptr = fn.allocas.get(id(s))
        if ptr is None:
            if fn.stack_bytes + nbytes <= self.options.stack_budget:
                arr = ir.ArrayType(memory_type(buf.dtype), max(1, count))
                ptr = _alloca(fn.alloca_builder, arr, _ident(buf.name), 64)
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
    def loop(self, fn: _Fn, s: S.For) -> None:
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
            if ext is not None and ext * _count_stmts(s.body) <= self.options.unroll_limit:
                self.unrolled(fn, s, ext)
                return
            self.serial(fn, s, {"llvm.loop.unroll.full": None} if ext is not None else {"llvm.loop.unroll.enable": None})
            return
        self.serial(fn, s, None)

    def _loop_bounds(self, fn: _Fn, s: S.For) -> tuple[ir.Value, ir.Value, ir.Type]:
        ty = scalar_type(s.loop_var.dtype)
        lo = self.cast_value(fn, self.expr(fn, s.min), s.min.dtype, s.loop_var.dtype)
        ext = self.cast_value(fn, self.expr(fn, s.extent), s.extent.dtype, s.loop_var.dtype)
        hi = self.int_op(fn, "add", lo, ext, s.loop_var.dtype)
        return lo, hi, ty

    def serial(self, fn: _Fn, s: S.For, md: dict[str, Any] | None) -> None:
        lo, hi, ty = self._loop_bounds(fn, s)
        known = type(s.extent) is E.IntImm and s.extent.value > 0
        fn.ranges[s.loop_var] = E.Range(s.min, s.extent)
        try:
            self.counted_loop(fn, s.loop_var, lo, hi, ty, known, lambda: self.stmt(fn, s.body), md)
        finally:
            fn.ranges.pop(s.loop_var, None)

    def counted_loop(self, fn: _Fn, var: E.Var, lo: ir.Value, hi: ir.Value, ty: ir.Type, nonempty: bool,
                     body: Callable[[], None], md: dict[str, Any] | None) -> None:
        b = fn.builder
        pre = b.block
        body_bb = fn.fn.append_basic_block(f"for_{_ident(var.name)}")
        exit_bb = fn.fn.append_basic_block(f"for_{_ident(var.name)}_end")
        if nonempty:
            b.branch(body_bb)
        else:
            b.cbranch(b.icmp_signed("<", lo, hi), body_bb, exit_bb)
        b.position_at_end(body_bb)
        phi = b.phi(ty, name=_ident(var.name))
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

    def unrolled(self, fn: _Fn, s: S.For, ext: int) -> None:
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
    def vector_loop(self, fn: _Fn, s: S.For, ext: int) -> bool:
        key = id(s)
        if key not in self._plans:
            self._plans[key] = _VectorPlan(s.loop_var).check(s.body)
            self._keep.append(s)
        reason = self._plans[key]
        if reason is not None:
            logger.debug("scalarizing vectorized loop %s: %s", s.loop_var.name, reason)
            return False
        max_lanes = self.options.max_lanes
        if ext <= max_lanes:
            lanes, chunks = ext, 1
        else:
            lanes = next((w for w in (16, 8, 4) if ext % w == 0), 0)
            if not lanes:
                logger.debug("scalarizing vectorized loop %s: extent %d has no vector width", s.loop_var.name, ext)
                return False
            chunks = ext // lanes
        ty = scalar_type(s.loop_var.dtype)
        lo = self.cast_value(fn, self.expr(fn, s.min), s.min.dtype, s.loop_var.dtype)
        lane_ids = ir.Constant(ir.VectorType(ty, lanes), list(range(lanes)))
        fn.ranges[s.loop_var] = E.Range(s.min, s.extent)

        def one(base: ir.Value) -> None:
            vector = fn.builder.add(self.splat(fn, base, lanes), lane_ids)
            fn.vec = _Vec(s.loop_var, lanes, base, vector)
            try:
                self.stmt(fn, s.body)
            finally:
                fn.vec = None

        try:
            if chunks == 1:
                one(lo)
            else:
                chunk_var = E.Var(s.loop_var.name + "_chunk", s.loop_var.dtype)

                def body() -> None:
                    c = fn.env[chunk_var]
                    base = self.int_op(fn, "add", lo, self.int_op(fn, "mul", c, ir.Constant(ty, lanes), s.loop_var.dtype),
                                       s.loop_var.dtype)
                    one(base)

                self.counted_loop(fn, chunk_var, ir.Constant(ty, 0), ir.Constant(ty, chunks), ty, True, body, None)
        finally:
            fn.ranges.pop(s.loop_var, None)
        return True

    # ---- parallel loops ----
    def parallel(self, fn: _Fn, s: S.For) -> None:
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

        _walk(s, collect)
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
        closure = _alloca(fn.alloca_builder, closure_t, base + "_closure", 16)
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
    def address(self, fn: _Fn, buf: E.Buffer, flat: E.PrimExpr) -> ir.Value:
        base = fn.buffers.get(buf)
        if base is None:
            raise CodegenError(f"buffer {buf.name} is used outside its allocation")
        offset = self.expr(fn, flat)
        if isinstance(offset, ir.Constant) and offset.constant == 0:
            return base
        return fn.builder.gep(base, [offset], inbounds=True, source_etype=memory_type(buf.dtype))

    def store(self, fn: _Fn, s: S.BufferStore) -> None:
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
            fn.builder.store(self.to_memory(fn, value, buf.dtype), ptr, align=align)
            return
        ptr = self.address(fn, buf, flat)
        fn.builder.store(self.to_memory(fn, value, buf.dtype), ptr, align=align)

    def to_memory(self, fn: _Fn, value: ir.Value, dtype: str) -> ir.Value:
        if dtype != "bool":
            return value
        t = value.type
        target = ir.VectorType(I8, t.count) if isinstance(t, ir.VectorType) else I8
        return fn.builder.zext(value, target)

    def from_memory(self, fn: _Fn, value: ir.Value, dtype: str) -> ir.Value:
        if dtype != "bool":
            return value
        zero = ir.Constant(value.type, None)
        return fn.builder.icmp_unsigned("!=", value, zero)

    def load(self, fn: _Fn, e: E.BufferLoad) -> ir.Value:
        buf = e.buffer
        flat = self.flat(buf, e, e.indices)
        align = elem_bytes(buf.dtype)
        mt = memory_type(buf.dtype)
        vec = fn.vec
        stride = self.stride(flat, vec.var) if vec is not None else 0
        if vec is not None and stride != 0:
            if stride == 1:
                vec.lane0 = True
                try:
                    ptr = self.address(fn, buf, flat)
                finally:
                    vec.lane0 = False
                value = fn.builder.load(ptr, typ=ir.VectorType(mt, vec.lanes), align=align)
                return self.from_memory(fn, value, buf.dtype)
            # gather: one scalar load per lane. Strided: lane l is at lane 0's address + l * stride
            # (constant offsets LLVM folds into addressing); otherwise the index is evaluated per
            # lane with the loop variable bound to that lane's scalar value.
            b = fn.builder
            out = ir.Constant(ir.VectorType(mt, vec.lanes), ir.Undefined)
            vec.lane0 = True
            base_value = vec.base
            try:
                if stride is not None:
                    ptr0 = self.address(fn, buf, flat)
                    ptrs = [ptr0 if lane == 0 else b.gep(ptr0, [ir.Constant(I64, lane * stride)], inbounds=True,
                                                         source_etype=mt) for lane in range(vec.lanes)]
                else:
                    ptrs = []
                    for lane in range(vec.lanes):
                        vec.base = self.int_op(fn, "add", base_value, ir.Constant(base_value.type, lane), vec.var.dtype)
                        ptrs.append(self.address(fn, buf, flat))
            finally:
                vec.lane0 = False
                vec.base = base_value
            for lane, ptr in enumerate(ptrs):
                out = b.insert_element(out, b.load(ptr, typ=mt, align=align), ir.Constant(I32, lane))
            return self.from_memory(fn, out, buf.dtype)
        ptr = self.address(fn, buf, flat)
        value = fn.builder.load(ptr, typ=mt, align=align)
        return self.from_memory(fn, value, buf.dtype)

    # =========================================================================================
    # Expressions
    # =========================================================================================

    def expr(self, fn: _Fn, e: E.PrimExpr) -> ir.Value:
        """Emit an expression; pure compound expressions are memoized per function while the
        variables they read keep their bindings and their block still dominates (unrolled code
        re-evaluates the same index arithmetic many times)."""
        t = type(e)
        if t is E.Var or t is E.IntImm or t is E.FloatImm:
            return self._expr(fn, e)
        info = self._info.get(id(e))
        if info is None:
            info = _expr_info(e)
            self._info[id(e)] = info
            self._keep.append(e)
        pure, used = info
        vec = fn.vec
        if not pure or (vec is not None and vec.var in used):
            return self._expr(fn, e)
        key = id(e)
        hit = fn.memo.get(key)
        versions = fn.versions
        if hit is not None and hit[2] in fn.active and all(versions.get(v, 0) == n for v, n in hit[1]):
            return hit[0]
        value = self._expr(fn, e)
        fn.memo[key] = (value, tuple((v, versions.get(v, 0)) for v in used), fn.scopes[-1])
        return value

    def _expr(self, fn: _Fn, e: E.PrimExpr) -> ir.Value:
        t = type(e)
        if t is E.Var:
            vec = fn.vec
            if vec is not None and e is vec.var:
                return vec.base if vec.lane0 else vec.vector
            try:
                return fn.env[e]
            except KeyError:
                raise CodegenError(f"variable {e.name} is used outside its scope") from None
        if t is E.IntImm:
            return ir.Constant(scalar_type(e.dtype), int(e.value))
        if t is E.FloatImm:
            return ir.Constant(scalar_type(e.dtype), float(e.value))
        if t is E.BufferLoad:
            return self.load(fn, e)
        if isinstance(e, E.CmpOp):
            return self.compare(fn, e)
        if isinstance(e, E.BinaryOp):
            return self.arith(fn, e)
        if t is E.Not:
            a = self.expr(fn, e.a)
            return self.not_(fn, a)
        if t is E.Select:
            c = self.expr(fn, e.condition)
            tv = self.expr(fn, e.true_value)
            fv = self.expr(fn, e.false_value)
            fv = self.cast_value(fn, fv, e.false_value.dtype, e.dtype)
            tv = self.cast_value(fn, tv, e.true_value.dtype, e.dtype)
            return self.select(fn, c, tv, fv)
        if t is E.Cast:
            return self.cast_value(fn, self.expr(fn, e.value), e.value.dtype, e.dtype)
        if t is E.Call:
            return self.call(fn, e)
        if t is E.StringImm:
            raise CodegenError(f"string {e.value!r} cannot be a value in generated code")
        raise CodegenError(f"cannot emit expression {t.__name__}")

    # ---- vector helpers ----
    def splat(self, fn: _Fn, v: ir.Value, lanes: int) -> ir.Value:
        vt = ir.VectorType(v.type, lanes)
        if isinstance(v, ir.Constant):
            return ir.Constant(vt, [v.constant] * lanes)
        b = fn.builder
        one = b.insert_element(ir.Constant(vt, ir.Undefined), v, ir.Constant(I32, 0))
        return b.shuffle_vector(one, ir.Constant(vt, ir.Undefined), ir.Constant(ir.VectorType(I32, lanes), [0] * lanes))

    def unify(self, fn: _Fn, a: ir.Value, b: ir.Value) -> tuple[ir.Value, ir.Value]:
        av, bv = isinstance(a.type, ir.VectorType), isinstance(b.type, ir.VectorType)
        if av and not bv:
            b = self.splat(fn, b, a.type.count)
        elif bv and not av:
            a = self.splat(fn, a, b.type.count)
        return a, b

    def const_like(self, v: ir.Value, value: Any) -> ir.Value:
        t = v.type
        if isinstance(t, ir.VectorType):
            return ir.Constant(t, [value] * t.count)
        return ir.Constant(t, value)

    # ---- arithmetic ----
    def arith(self, fn: _Fn, e: E.BinaryOp) -> ir.Value:
        dtype = e.dtype
        a = self.cast_value(fn, self.expr(fn, e.a), e.a.dtype, dtype)
        b = self.cast_value(fn, self.expr(fn, e.b), e.b.dtype, dtype)
        a, b = self.unify(fn, a, b)
        t = type(e)
        if is_float(dtype):
            return self.float_arith(fn, t, a, b)
        if dtype == "bool":
            raise CodegenError(f"{t.__name__} on bool operands")
        if t is E.Add:
            return self.int_op(fn, "add", a, b, dtype)
        if t is E.Sub:
            return self.int_op(fn, "sub", a, b, dtype)
        if t is E.Mul:
            return self.int_op(fn, "mul", a, b, dtype)
        if t is E.Min or t is E.Max:
            return self.int_minmax(fn, t is E.Min, a, b, dtype)
        if t is E.Div or t is E.Mod:
            return self.int_truncdiv(fn, t is E.Div, a, b, dtype)
        if t is E.FloorDiv or t is E.FloorMod:
            return self.int_floordiv(fn, t is E.FloorDiv, e, a, b, dtype)
        raise CodegenError(f"cannot emit {t.__name__}")

    def float_arith(self, fn: _Fn, t: type, a: ir.Value, b: ir.Value) -> ir.Value:
        bld = fn.builder
        fl = self.flags
        if t is E.Add:
            return bld.fadd(a, b, flags=fl)
        if t is E.Sub:
            return bld.fsub(a, b, flags=fl)
        if t is E.Mul:
            return bld.fmul(a, b, flags=fl)
        if t is E.Div:
            return bld.fdiv(a, b, flags=fl)
        if t is E.Mod:
            return bld.frem(a, b, flags=fl)
        if t is E.Min:
            return bld.select(bld.fcmp_ordered("<", a, b), a, b)
        if t is E.Max:
            return bld.select(bld.fcmp_ordered(">", a, b), a, b)
        if t is E.FloorDiv or t is E.FloorMod:
            q = bld.fdiv(a, b, flags=fl)
            fq = bld.call(self._intrinsic("floor", q.type, 1), [q])
            if t is E.FloorDiv:
                return fq
            return bld.fsub(a, bld.fmul(fq, b, flags=fl), flags=fl)
        raise CodegenError(f"cannot emit {t.__name__} on floats")

    def int_op(self, fn: _Fn, op: str, a: ir.Value, b: ir.Value, dtype: str) -> ir.Value:
        """add/sub/mul with constant folding (unrolled code is mostly constant arithmetic)."""
        ca = a.constant if isinstance(a, ir.Constant) and isinstance(a.type, ir.IntType) else None
        cb = b.constant if isinstance(b, ir.Constant) and isinstance(b.type, ir.IntType) else None
        if isinstance(ca, int) and isinstance(cb, int):
            value = ca + cb if op == "add" else ca - cb if op == "sub" else ca * cb
            return ir.Constant(a.type, _wrap(value, a.type.width, _signed(dtype)))
        if op == "add":
            if ca == 0:
                return b
            if cb == 0:
                return a
        elif op == "sub":
            if cb == 0:
                return a
        elif op == "mul":
            if ca == 1:
                return b
            if cb == 1:
                return a
            if ca == 0 or cb == 0:
                return self.const_like(a, 0)
        flags = ["nsw"] if _signed(dtype) else []
        return getattr(fn.builder, op)(a, b, flags=flags)

    def int_minmax(self, fn: _Fn, is_min: bool, a: ir.Value, b: ir.Value, dtype: str) -> ir.Value:
        ca = a.constant if isinstance(a, ir.Constant) else None
        cb = b.constant if isinstance(b, ir.Constant) else None
        if isinstance(ca, int) and isinstance(cb, int):
            return a if ((ca <= cb) == is_min) else b
        op = "<" if is_min else ">"
        cmp = fn.builder.icmp_signed(op, a, b) if _signed(dtype) else fn.builder.icmp_unsigned(op, a, b)
        return fn.builder.select(cmp, a, b)

    def int_truncdiv(self, fn: _Fn, is_div: bool, a: ir.Value, b: ir.Value, dtype: str) -> ir.Value:
        ca = a.constant if isinstance(a, ir.Constant) else None
        cb = b.constant if isinstance(b, ir.Constant) else None
        if isinstance(ca, int) and isinstance(cb, int) and cb != 0:
            q = abs(ca) // abs(cb) * (1 if (ca >= 0) == (cb >= 0) else -1)
            return ir.Constant(a.type, q if is_div else ca - q * cb)
        bld = fn.builder
        if _signed(dtype):
            return bld.sdiv(a, b) if is_div else bld.srem(a, b)
        return bld.udiv(a, b) if is_div else bld.urem(a, b)

    def int_floordiv(self, fn: _Fn, is_div: bool, e: E.BinaryOp, a: ir.Value, b: ir.Value, dtype: str) -> ir.Value:
        bld = fn.builder
        ca = a.constant if isinstance(a, ir.Constant) else None
        cb = b.constant if isinstance(b, ir.Constant) else None
        if isinstance(ca, int) and isinstance(cb, int) and cb != 0:
            return ir.Constant(a.type, ca // cb if is_div else ca % cb)
        if not _signed(dtype):
            return bld.udiv(a, b) if is_div else bld.urem(a, b)
        if isinstance(cb, int) and cb > 0:
            lo, _ = self.bound(fn, e.a)
            if lo >= 0:  # both non-negative: truncation is flooring, and LLVM turns it into shifts
                return bld.udiv(a, b) if is_div else bld.urem(a, b)
            if cb == 1:
                return a if is_div else self.const_like(a, 0)
        q = bld.sdiv(a, b)
        r = bld.srem(a, b)
        zero = self.const_like(a, 0)
        if isinstance(cb, int) and cb > 0:
            adjust = bld.icmp_signed("<", r, zero)
        else:
            nonzero = bld.icmp_signed("!=", r, zero)
            signs = bld.xor(bld.icmp_signed("<", r, zero), bld.icmp_signed("<", b, zero))
            adjust = bld.and_(nonzero, signs)
        if is_div:
            return bld.sub(q, bld.zext(adjust, q.type))
        return bld.select(adjust, bld.add(r, b), r)

    # ---- comparisons and logic ----
    def compare(self, fn: _Fn, e: E.CmpOp) -> ir.Value:
        t = type(e)
        if t is E.And or t is E.Or:
            a = self.to_bool(fn, self.expr(fn, e.a), e.a.dtype)
            b = self.to_bool(fn, self.expr(fn, e.b), e.b.dtype)
            ca = a.constant if isinstance(a, ir.Constant) else None
            cb = b.constant if isinstance(b, ir.Constant) else None
            if t is E.And:
                if ca is not None and not isinstance(a.type, ir.VectorType):
                    return b if ca else a
                if cb is not None and not isinstance(b.type, ir.VectorType):
                    return a if cb else b
                a, b = self.unify(fn, a, b)
                return fn.builder.and_(a, b)
            if ca is not None and not isinstance(a.type, ir.VectorType):
                return a if ca else b
            if cb is not None and not isinstance(b.type, ir.VectorType):
                return b if cb else a
            a, b = self.unify(fn, a, b)
            return fn.builder.or_(a, b)
        dtype = _common_dtype(e.a.dtype, e.b.dtype)
        a = self.cast_value(fn, self.expr(fn, e.a), e.a.dtype, dtype)
        b = self.cast_value(fn, self.expr(fn, e.b), e.b.dtype, dtype)
        op = {E.EQ: "==", E.NE: "!=", E.LT: "<", E.LE: "<=", E.GT: ">", E.GE: ">="}[t]
        if isinstance(a, ir.Constant) and isinstance(b, ir.Constant) and isinstance(a.constant, int) \
                and isinstance(b.constant, int):
            x, y = a.constant, b.constant
            result = {"==": x == y, "!=": x != y, "<": x < y, "<=": x <= y, ">": x > y, ">=": x >= y}[op]
            return ir.Constant(I1, int(result))
        a, b = self.unify(fn, a, b)
        bld = fn.builder
        if is_float(dtype):
            if op == "!=":
                return bld.fcmp_unordered("!=", a, b)
            return bld.fcmp_ordered(op, a, b)
        if _signed(dtype):
            return bld.icmp_signed(op, a, b)
        return bld.icmp_unsigned(op, a, b)

    def not_(self, fn: _Fn, a: ir.Value) -> ir.Value:
        if isinstance(a, ir.Constant) and not isinstance(a.type, ir.VectorType):
            return ir.Constant(I1, int(not a.constant))
        return fn.builder.xor(a, self.const_like(a, 1))

    def to_bool(self, fn: _Fn, v: ir.Value, dtype: str) -> ir.Value:
        return v if dtype == "bool" else self.cast_value(fn, v, dtype, "bool")

    def select(self, fn: _Fn, c: ir.Value, t: ir.Value, f: ir.Value) -> ir.Value:
        if isinstance(c, ir.Constant) and not isinstance(c.type, ir.VectorType):
            return t if c.constant else f
        t, f = self.unify(fn, t, f)
        if isinstance(c.type, ir.VectorType) and not isinstance(t.type, ir.VectorType):
            t = self.splat(fn, t, c.type.count)
            f = self.splat(fn, f, c.type.count)
        return fn.builder.select(c, t, f)

    # ---- casts ----
    def cast_value(self, fn: _Fn, v: ir.Value, src: str, dst: str) -> ir.Value:
        if src == dst:
            return v
        dst_t = scalar_type(dst)
        vt = v.type
        lanes = vt.count if isinstance(vt, ir.VectorType) else None
        target = ir.VectorType(dst_t, lanes) if lanes else dst_t
        bld = fn.builder
        if isinstance(v, ir.Constant) and lanes is None and isinstance(v.constant, (int, float)):
            return _fold_cast(v.constant, src, dst, dst_t)
        if dst == "bool":
            if is_float(src):
                return bld.fcmp_unordered("!=", v, self.const_like(v, 0.0))
            return bld.icmp_unsigned("!=", v, self.const_like(v, 0))
        if src == "bool":
            return bld.uitofp(v, target) if is_float(dst) else bld.zext(v, target)
        if is_float(src) and is_float(dst):
            sb, db = dtype_bits(src), dtype_bits(dst)
            return bld.fpext(v, target) if db > sb else bld.fptrunc(v, target)
        if is_float(src):
            return bld.fptosi(v, target) if is_int(dst) else bld.fptoui(v, target)
        if is_float(dst):
            return bld.sitofp(v, target) if is_int(src) else bld.uitofp(v, target)
        sb, db = dtype_bits(src), dtype_bits(dst)
        if db == sb:
            return v
        if db < sb:
            return bld.trunc(v, target)
        return bld.sext(v, target) if is_int(src) else bld.zext(v, target)

    # ---- calls ----
    def call(self, fn: _Fn, e: E.Call) -> ir.Value:
        op = e.op[4:] if e.op.startswith("tir.") else e.op
        args = e.args
        bld = fn.builder
        if op == "if_then_else":
            return self.if_then_else(fn, e)
        if e.op in _EXTERN_CALLS:
            return self.extern_call(fn, e)
        if op in ("likely", "assume"):
            return self.expr(fn, args[0])
        if op in ("max_value", "min_value"):
            return _limit_const(e.dtype, op == "max_value")
        if op in ("infinity", "inf"):
            return ir.Constant(scalar_type(e.dtype), math.inf)
        if op == "nan":
            return ir.Constant(scalar_type(e.dtype), math.nan)
        if op == "reinterpret":
            v = self.expr(fn, args[0])
            return bld.bitcast(v, scalar_type(e.dtype))
        if op in ("bitwise_and", "bitwise_or", "bitwise_xor", "shift_left", "shift_right"):
            a = self.cast_value(fn, self.expr(fn, args[0]), args[0].dtype, e.dtype)
            b = self.cast_value(fn, self.expr(fn, args[1]), args[1].dtype, e.dtype)
            a, b = self.unify(fn, a, b)
            if op == "shift_right":
                return bld.ashr(a, b) if _signed(e.dtype) else bld.lshr(a, b)
            name = {"bitwise_and": "and_", "bitwise_or": "or_", "bitwise_xor": "xor", "shift_left": "shl"}[op]
            return getattr(bld, name)(a, b)
        if op == "bitwise_not":
            a = self.cast_value(fn, self.expr(fn, args[0]), args[0].dtype, e.dtype)
            return bld.xor(a, self.const_like(a, -1))
        if op in ("abs", "fabs") and not is_float(e.dtype):
            a = self.cast_value(fn, self.expr(fn, args[0]), args[0].dtype, e.dtype)
            if not _signed(e.dtype):
                return a
            neg = bld.sub(self.const_like(a, 0), a)
            return bld.select(bld.icmp_signed("<", a, self.const_like(a, 0)), neg, a)
        if op in ("isnan", "isinf", "isfinite"):
            a = self.expr(fn, args[0])
            if not is_float(args[0].dtype):
                return self.const_like(a, 0) if op != "isfinite" else self.const_like(a, 1)
            if op == "isnan":
                return bld.fcmp_unordered("uno", a, a)
            inf = self.const_like(a, math.inf)
            absval = bld.call(self._intrinsic("fabs", a.type, 1), [a])
            if op == "isinf":
                return bld.fcmp_ordered("==", absval, inf)
            return bld.fcmp_ordered("<", absval, inf)
        if not is_float(e.dtype):
            if op in ("floor", "ceil", "trunc", "round", "nearbyint") and not is_float(args[0].dtype):
                return self.cast_value(fn, self.expr(fn, args[0]), args[0].dtype, e.dtype)
            raise CodegenError(f"call {op!r} with dtype {e.dtype} is not supported by the CPU code generator")
        return self.float_call(fn, op, e)

    def extern_call(self, fn: _Fn, e: E.Call) -> ir.Value:
        """`T.call_extern(dtype, "name", args...)`: a C function of this process (libc, libm,
        libgomp...), declared from the argument and result dtypes."""
        if not e.args or not isinstance(e.args[0], E.StringImm):
            raise CodegenError(f"{e.op} needs the function name as its first argument")
        name = e.args[0].value
        vals = [self.expr(fn, a) for a in e.args[1:]]
        if any(isinstance(v.type, ir.VectorType) for v in vals):
            raise CodegenError(f"{e.op} {name!r} with lane-dependent arguments")
        ret = VOID if e.dtype == "void" else scalar_type(e.dtype)
        decl = self._declare(name, ret, [v.type for v in vals])
        result = fn.builder.call(decl, vals)
        return ir.Constant(I32, 0) if e.dtype == "void" else result

    def float_call(self, fn: _Fn, op: str, e: E.Call) -> ir.Value:
        bld = fn.builder
        dtype = e.dtype
        work = "float32" if dtype == "float16" else dtype  # half math through float (storage type only)
        vals = [self.cast_value(fn, self.expr(fn, a), a.dtype, work) for a in e.args]
        if len(vals) == 2:
            vals[0], vals[1] = self.unify(fn, vals[0], vals[1])
        elif len(vals) == 3:
            lanes = next((v.type.count for v in vals if isinstance(v.type, ir.VectorType)), None)
            if lanes:
                vals = [v if isinstance(v.type, ir.VectorType) else self.splat(fn, v, lanes) for v in vals]
        fl = self.flags
        if op in _LLVM_UNARY:
            out = bld.call(self._intrinsic(_LLVM_UNARY[op], vals[0].type, 1), vals[:1])
        elif op in _LLVM_BINARY:
            out = bld.call(self._intrinsic(_LLVM_BINARY[op], vals[0].type, 2), vals[:2])
        elif op == "fma":
            out = bld.call(self._intrinsic("fma", vals[0].type, 3), vals[:3])
        elif op == "sigmoid":
            x = vals[0]
            neg = bld.fneg(x)
            ex = bld.call(self._intrinsic("exp", x.type, 1), [neg])
            one = self.const_like(x, 1.0)
            out = bld.fdiv(one, bld.fadd(one, ex, flags=fl), flags=fl)
        elif op == "rsqrt":
            x = vals[0]
            out = bld.fdiv(self.const_like(x, 1.0), bld.call(self._intrinsic("sqrt", x.type, 1), [x]), flags=fl)
        elif op == "exp10":
            x = vals[0]
            out = bld.call(self._intrinsic("pow", x.type, 2), [self.const_like(x, 10.0), x])
        elif op in _LIBM_UNARY or op in _LIBM_BINARY:
            out = self.libm(fn, op, vals, work)
        else:
            raise CodegenError(f"math call {op!r} is not supported by the CPU code generator")
        return self.cast_value(fn, out, work, dtype)

    def libm(self, fn: _Fn, op: str, vals: list[ir.Value], dtype: str) -> ir.Value:
        """A C math library call; vectors go lane by lane."""
        et = scalar_type(dtype)
        name = op + ("f" if dtype == "float32" else "")
        decl = self._declare(name, et, [et] * len(vals))
        bld = fn.builder
        t = vals[0].type
        if not isinstance(t, ir.VectorType):
            return bld.call(decl, vals)
        out = ir.Constant(t, ir.Undefined)
        for lane in range(t.count):
            idx = ir.Constant(I32, lane)
            lane_vals = [bld.extract_element(v, idx) for v in vals]
            out = bld.insert_element(out, bld.call(decl, lane_vals), idx)
        return out

    def if_then_else(self, fn: _Fn, e: E.Call) -> ir.Value:
        """Lazy: only the taken arm is evaluated (it may hold an access that is out of bounds
        when the condition is false, like padding), except lane-dependent conditions in vector
        code, whose arms the vector plan guarantees to be load-free."""
        cond_e, t_e, f_e = e.args
        c = self.to_bool(fn, self.expr(fn, cond_e), cond_e.dtype)
        if isinstance(c, ir.Constant) and not isinstance(c.type, ir.VectorType):
            chosen = t_e if c.constant else f_e
            return self.cast_value(fn, self.expr(fn, chosen), chosen.dtype, e.dtype)
        if isinstance(c.type, ir.VectorType) or not (_has_load([t_e]) or _has_load([f_e])):
            tv = self.cast_value(fn, self.expr(fn, t_e), t_e.dtype, e.dtype)
            fv = self.cast_value(fn, self.expr(fn, f_e), f_e.dtype, e.dtype)
            return self.select(fn, c, tv, fv)
        bld = fn.builder
        then_bb = fn.fn.append_basic_block("ite_then")
        else_bb = fn.fn.append_basic_block("ite_else")
        merge_bb = fn.fn.append_basic_block("ite_end")
        bld.cbranch(c, then_bb, else_bb)
        bld.position_at_end(then_bb)
        fn.push_scope()
        try:
            tv = self.cast_value(fn, self.expr(fn, t_e), t_e.dtype, e.dtype)
        finally:
            fn.pop_scope()
        then_end = bld.block
        bld.position_at_end(else_bb)
        fn.push_scope()
        try:
            fv = self.cast_value(fn, self.expr(fn, f_e), f_e.dtype, e.dtype)
        finally:
            fn.pop_scope()
        else_end = bld.block
        # make both arms the same shape (scalar or vector) before the phi
        if isinstance(tv.type, ir.VectorType) != isinstance(fv.type, ir.VectorType):
            if isinstance(tv.type, ir.VectorType):
                bld.position_at_end(else_end)
                fv = self.splat(fn, fv, tv.type.count)
                else_end = bld.block
            else:
                bld.position_at_end(then_end)
                tv = self.splat(fn, tv, fv.type.count)
                then_end = bld.block
        bld.position_at_end(then_end)
        bld.branch(merge_bb)
        bld.position_at_end(else_end)
        bld.branch(merge_bb)
        bld.position_at_end(merge_bb)
        phi = bld.phi(tv.type)
        phi.add_incoming(tv, then_end)
        phi.add_incoming(fv, else_end)
        return phi


# =============================================================================================
# Helpers
# =============================================================================================


def _expr_info(e: E.PrimExpr) -> tuple[bool, frozenset]:
    """(pure, variables read): pure = no loads and no external calls, so equal inputs give an
    equal value anywhere the inputs are bound the same."""
    impure: list[Any] = []
    used: set[E.Var] = set()

    def visit(node: Any) -> None:
        t = type(node)
        if t is E.Var:
            used.add(node)
        elif t is E.BufferLoad or (t is E.Call and node.op in _EXTERN_CALLS):
            impure.append(node)

    _walk(e, visit)
    return not impure, frozenset(used)


def _walk(node: Any, fn: Callable[[Any], None]) -> None:
    """Pre-order over statements and expressions, including `Allocate`."""
    fn(node)
    t = type(node)
    if t is Allocate:
        _walk(node.body, fn)
        return
    if isinstance(node, S.Stmt):
        if t is S.SeqStmt:
            for x in node.seq:
                _walk(x, fn)
        elif t is S.For:
            _walk(node.min, fn)
            _walk(node.extent, fn)
            _walk(node.body, fn)
        elif t is S.IfThenElse:
            _walk(node.condition, fn)
            _walk(node.then_case, fn)
            if node.else_case is not None:
                _walk(node.else_case, fn)
        elif t is S.LetStmt:
            _walk(node.value, fn)
            _walk(node.body, fn)
        elif t is S.BufferStore:
            _walk(node.value, fn)
            for i in node.indices:
                _walk(i, fn)
        elif t is S.Evaluate:
            _walk(node.value, fn)
        return
    if isinstance(node, E.BinaryOp):
        _walk(node.a, fn)
        _walk(node.b, fn)
    elif t is E.Not:
        _walk(node.a, fn)
    elif t is E.Select:
        _walk(node.condition, fn)
        _walk(node.true_value, fn)
        _walk(node.false_value, fn)
    elif t is E.Cast:
        _walk(node.value, fn)
    elif t is E.Call:
        for a in node.args:
            _walk(a, fn)
    elif t is E.BufferLoad:
        for i in node.indices:
            _walk(i, fn)


def _alloca(b: ir.IRBuilder, typ: ir.Type, name: str, align: int) -> ir.Value:
    """A stack slot typed as an opaque `ptr` (like the arguments), so that loads and stores of
    any element or vector type pass llvmlite's typed-pointer checks."""
    slot = b.alloca(typ, name=name)
    slot.align = align
    slot.type = PTR
    return slot


def _ident(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "_." else "_" for ch in name) or "v"


def _wrap(value: int, width: int, signed: bool) -> int:
    mask = (1 << width) - 1
    value &= mask
    if signed and value >= 1 << (width - 1):
        value -= 1 << width
    return value


def _common_dtype(a: str, b: str) -> str:
    if a == b:
        return a
    if is_float(a) or is_float(b):
        if is_float(a) and is_float(b):
            return a if dtype_bits(a) >= dtype_bits(b) else b
        return a if is_float(a) else b
    if a == "bool":
        return b
    if b == "bool":
        return a
    return a if dtype_bits(a) >= dtype_bits(b) else b


def _fold_cast(value: int | float, src: str, dst: str, dst_t: ir.Type) -> ir.Value:
    if dst == "bool":
        return ir.Constant(I1, int(value != 0))
    if is_float(dst):
        return ir.Constant(dst_t, float(value))
    if is_float(src):
        if math.isnan(value) or math.isinf(value):
            raise CodegenError(f"cannot cast {value} to {dst}")
        value = int(value)  # truncation toward zero
    return ir.Constant(dst_t, _wrap(int(value), dtype_bits(dst), is_int(dst)))


def _limit_const(dtype: str, is_max: bool) -> ir.Value:
    t = scalar_type(dtype)
    if is_float(dtype):
        v = _FLOAT_MAX[dtype]
        return ir.Constant(t, v if is_max else -v)
    if dtype == "bool":
        return ir.Constant(t, int(is_max))
    width = dtype_bits(dtype)
    if is_uint(dtype):
        return ir.Constant(t, (1 << width) - 1 if is_max else 0)
    return ir.Constant(t, (1 << (width - 1)) - 1 if is_max else -(1 << (width - 1)))
