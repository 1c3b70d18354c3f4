"""CUDA C source of lowered kernels (TVM's CodeGenCUDA conventions): one
`extern "C" __global__ void __launch_bounds__(threads) <name>_kernel(...)` per launch region,
`__restrict__` pointer arguments under `tir.noalias`, `((int)threadIdx.x)` for thread-bound
loop variables, vthread loops expanded into copies of their body (TVM's InjectVirtualThread),
`__shared__` and register arrays, `__syncthreads()` barriers, `#pragma unroll` loops, and
vectorized loops as one 4-, 8- or 16-byte access when they copy contiguous, aligned elements
(`uint4` for four floats), else as an unrolled scalar loop. An int8 dot product of four
contiguous elements into an int32 accumulator becomes `__dp4a`. Tensor-core fragments are
`nvcuda::wmma::fragment` arrays and TVM's wmma builtins their `nvcuda::wmma::` calls
(`tensorcore`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from msdb.ir import expr as E
from msdb.ir import stmt as S
from msdb.ir.arith import Affine, affine_form, simplify, stride_of
from msdb.ir.functor import substitute
from msdb.tuner.codegen.analysis import (
    Allocate, allocation_elements, flat_index, static_shape, substitute_lowered, vars_in, walk,
)
from msdb.tuner.codegen.cuda.cross_thread import allreduce_parts
from msdb.tuner.codegen.cuda.emit_expr import ExprPrinter, c_type, elem_bytes
from msdb.tuner.codegen.cuda.lanes import INVARIANT, LINEAR, lane_form
from msdb.tuner.codegen.cuda.lower import GpuLoweredFunc, Kernel, thread_tag
from msdb.tuner.codegen.cuda.sync import is_allreduce, is_barrier
from msdb.tuner.codegen.cuda.tensorcore import FragmentInfo, fragment_declaration, infer_fragments, is_wmma_call, \
    wmma_statement
from msdb.tuner.codegen.errors import CodegenError

__all__ = ["emit_cuda", "PRELUDE"]

#: Helpers every module starts with: floor division/modulo for operands of unknown sign.
PRELUDE = """\
template <typename T> __device__ __forceinline__ T msdb_floordiv(T a, T b) {
  T q = a / b; return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q;
}
template <typename T> __device__ __forceinline__ T msdb_floormod(T a, T b) {
  T r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
"""

#: Bytes of one vector access -> the unsigned type that moves them, and its zero.
_VECTOR_TYPES = {4: "unsigned int", 8: "uint2", 16: "uint4"}
_VECTOR_ZEROS = {4: "0u", 8: "uint2{0u, 0u}", 16: "uint4{0u, 0u, 0u, 0u}"}


def emit_cuda(func: GpuLoweredFunc) -> str:
    """The CUDA C source of every kernel of `func`."""
    kernels = [_KernelWriter(kernel, func.noalias).run() for kernel in func.kernels]
    head = ["#include <cuda_fp16.h>\n"] if any("half" in k for k in kernels) else []
    if any("nvcuda::wmma::" in k for k in kernels):
        head.append("#include <mma.h>\n")
    return "\n".join(head + [PRELUDE] + kernels)


@dataclass
class _KernelWriter:
    kernel: Kernel
    noalias: bool
    lines: list[str] = field(default_factory=list)
    names: dict[E.Var, str] = field(default_factory=dict)
    ranges: dict[E.Var, E.Range] = field(default_factory=dict)
    buffers: dict[E.Buffer, str] = field(default_factory=dict)
    used_names: set[str] = field(default_factory=set)
    vthreads: dict[E.Var, tuple[int, int]] = field(default_factory=dict)  # pending: var -> (min, extent)
    depth: int = 1
    fragments: dict[E.Buffer, FragmentInfo] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.printer = ExprPrinter(self.names, self.ranges, self.buffer_name)
        self.fragments = infer_fragments(self.kernel.body)

    # ---- naming ----
    def fresh(self, base: str) -> str:
        clean = "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in base) or "v"
        if clean[0].isdigit():
            clean = "v_" + clean
        name, n = clean, 1
        while name in self.used_names:
            name = f"{clean}_{n}"
            n += 1
        self.used_names.add(name)
        return name

    def buffer_name(self, buf: E.Buffer) -> str:
        try:
            return self.buffers[buf]
        except KeyError:
            raise CodegenError(f"buffer {buf.name} is used outside its allocation in kernel {self.kernel.name}") from None

    def line(self, text: str) -> None:
        self.lines.append("  " * self.depth + text)

    def expr(self, e: E.PrimExpr) -> str:
        return self.printer.expr(e)

    # ---- kernel ----
    def run(self) -> str:
        k = self.kernel
        restrict = " __restrict__" if self.noalias else ""
        args = []
        for buf in k.params:
            name = self.fresh(buf.name)
            self.buffers[buf] = name
            args.append(f"{c_type(buf.dtype)}*{restrict} {name}")
        threads = k.block[0] * k.block[1] * k.block[2]
        self.stmt(k.body)
        head = f'extern "C" __global__ void __launch_bounds__({threads}) {k.name}({", ".join(args)}) {{'
        return "\n".join([head, *self.lines, "}", ""])

    # ---- statements ----
    def stmt(self, s: S.Stmt) -> None:
        """Emit `s`; a statement that uses a pending vthread variable and cannot carry it
        further down is emitted once per virtual thread, with the variable a constant."""
        if self.vthreads:
            used = [v for v in self.vthreads if v in vars_in(s)]
            if used and not self._carries_vthreads(s, set(used)):
                self._vthread_copies(s, used)
                return
        self._stmt(s)

    def _carries_vthreads(self, s: S.Stmt, used: set[E.Var]) -> bool:
        if isinstance(s, (S.SeqStmt, Allocate)):
            return True
        if isinstance(s, S.For):
            return (s.kind != S.ForKind.VECTORIZED and match_dp4a(s) is None
                    and not (vars_in(s.min) | vars_in(s.extent)) & used)
        if isinstance(s, S.IfThenElse):
            return not vars_in(s.condition) & used
        return False

    def _vthread_copies(self, s: S.Stmt, used: list[E.Var]) -> None:
        count = 1
        for v in used:
            count *= self.vthreads[v][1]
        if count >= 16:  # TVM's rule: unroll fewer than 16 virtual threads, else loop over them
            saved = self.vthreads
            self.vthreads = {v: r for v, r in saved.items() if v not in used}
            opened = 0
            try:
                for v in used:
                    lo, extent = saved[v]
                    name = self.fresh(v.name.replace(".", "_") + "_s")
                    self.names[v] = name
                    self.line(f"for (int {name} = {lo}; {name} < {lo + extent}; ++{name}) {{")
                    self.depth += 1
                    opened += 1
                self._stmt(s)
            finally:
                for _ in range(opened):
                    self.depth -= 1
                    self.line("}")
                self.vthreads = saved
            return
        combos: list[dict[E.Var, E.PrimExpr]] = [{}]
        for v in used:
            lo, extent = self.vthreads[v]
            combos = [{**c, v: E.IntImm(v.dtype, lo + i)} for c in combos for i in range(extent)]
        saved = self.vthreads
        self.vthreads = {v: r for v, r in saved.items() if v not in used}
        try:
            for combo in combos:
                self._stmt(substitute_lowered(s, combo))
        finally:
            self.vthreads = saved

    def _stmt(self, s: S.Stmt) -> None:
        if isinstance(s, S.SeqStmt):
            for x in s.seq:
                self.stmt(x)
        elif isinstance(s, S.For):
            self.loop(s)
        elif isinstance(s, S.IfThenElse):
            self.line(f"if ({self.expr(s.condition)}) {{")
            self.block(s.then_case)
            if s.else_case is not None:
                self.line("} else {")
                self.block(s.else_case)
            self.line("}")
        elif isinstance(s, S.LetStmt):
            name = self.fresh(s.var.name)
            self.line(f"{c_type(s.var.dtype)} {name} = {self.expr(s.value)};")
            self.names[s.var] = name
            self.stmt(s.body)
        elif isinstance(s, Allocate):
            self.allocate(s)
        elif isinstance(s, S.BufferStore):
            self.store(s)
        elif isinstance(s, S.Evaluate):
            if is_barrier(s):
                self.line("__syncthreads();")
            elif is_allreduce(s):
                assert isinstance(s.value, E.Call)
                self.allreduce(s.value)
            elif is_wmma_call(s.value):
                assert isinstance(s.value, E.Call)
                self.line(wmma_statement(s.value, self.expr, self.buffer_name, c_type))
            elif not isinstance(s.value, (E.IntImm, E.FloatImm)):
                self.line(f"(void)({self.expr(s.value)});")
        else:
            raise CodegenError(f"cannot emit statement {type(s).__name__} in a CUDA kernel")

    def block(self, s: S.Stmt) -> None:
        self.depth += 1
        try:
            self.stmt(s)
        finally:
            self.depth -= 1

    def store(self, s: S.BufferStore) -> None:
        value = s.value
        if value.dtype != s.buffer.dtype:
            value = E.Cast(s.buffer.dtype, value)
        self.line(f"{self.printer.access(s.buffer, s.indices)} = {self.expr(value)};")

    def allocate(self, s: Allocate) -> None:
        buf = s.buffer
        static_shape(buf)
        count = allocation_elements(buf)
        name = self.fresh(buf.name)
        scope = buf.scope or "global"
        if scope == "shared":
            self.line(f"__shared__ __align__(16) {c_type(buf.dtype)} {name}[{max(1, count)}];")
        elif scope == "shared.dyn":
            # TVM aligns shared.dyn to the buffer's data_alignment (64): wmma pointers need 32 bytes
            align = max(16, buf.data_alignment)
            self.line(f"__shared__ __align__({align}) {c_type(buf.dtype)} {name}[{max(1, count)}];")
            if buf.data is not None:
                self.buffers[buf] = name
                self.pool_views(s, name)
        elif scope == "local":
            self.line(f"__align__(16) {c_type(buf.dtype)} {name}[{max(1, count)}];")
        elif buf in self.fragments:
            self.line(fragment_declaration(buf, self.fragments[buf], name, c_type))
        else:
            raise CodegenError(f"buffer {buf.name} of scope {scope!r} cannot be allocated inside a kernel")
        self.buffers[buf] = name
        self.stmt(s.body)

    def pool_views(self, s: Allocate, pool: str) -> None:
        """A typed pointer to the pool for each buffer viewing it (`shared_dyn`); the views'
        indices carry their offsets (`elem_offset`)."""
        data = s.buffer.data
        views: list[E.Buffer] = []

        def visit(node: object) -> None:
            if isinstance(node, (E.BufferLoad, S.BufferStore)) and node.buffer is not s.buffer \
                    and node.buffer.data is data and node.buffer not in views:
                views.append(node.buffer)

        walk(s.body, visit)
        for view in views:
            name = self.fresh(view.name)
            self.buffers[view] = name
            self.line(f"{c_type(view.dtype)}* {name} = ({c_type(view.dtype)}*){pool};")

    # ---- loops ----
    def loop(self, s: S.For) -> None:
        tag = thread_tag(s)
        if tag is not None:
            if tag.startswith("vthread"):
                self.vthread(s)
            else:
                self.thread_loop(s, tag)
            return
        if s.kind == S.ForKind.PARALLEL:
            raise CodegenError(f"loop {s.loop_var.name} is parallel inside a CUDA kernel; bind it to a thread axis")
        if s.kind == S.ForKind.VECTORIZED and self.vector_loop(s):
            return
        if self.dp4a(s):
            return
        name = self.fresh(s.loop_var.name)
        self.names[s.loop_var] = name
        self.ranges[s.loop_var] = E.Range(s.min, s.extent)
        if s.kind in (S.ForKind.UNROLLED, S.ForKind.VECTORIZED):
            self.line("#pragma unroll")
        ct = c_type(s.loop_var.dtype)
        lo, ext = self.expr(s.min), s.extent
        hi = self.expr(ext) if E.const_int(s.min) == 0 else self.expr(E.Add(s.min, ext))
        self.line(f"for ({ct} {name} = {lo}; {name} < {hi}; ++{name}) {{")
        self.block(s.body)
        self.line("}")

    def thread_loop(self, s: S.For, tag: str) -> None:
        launched = self.kernel.launch[tag]
        extent = E.const_int(s.extent)
        index = f"((int){tag})"
        self.names[s.loop_var] = index if E.const_int(s.min) == 0 else f"({self.expr(s.min)} + {index})"
        self.ranges[s.loop_var] = E.Range(s.min, s.extent)
        if extent is not None and extent < launched:  # VerifyGPUCode refuses this; kept correct anyway
            self.line(f"if ({index} < {extent}) {{")
            self.block(s.body)
            self.line("}")
        else:
            self.stmt(s.body)

    def vthread(self, s: S.For) -> None:
        """TVM's InjectVirtualThread: the body is emitted once, and each statement that uses
        the vthread variable (and cannot pass it down: a store, a vector loop, a condition
        on it) once per virtual thread. Statements that do not use it, such as a cooperative
        fetch into shared memory and its barriers, run once for all virtual threads; a register
        array has one copy per virtual thread (`lower.compact_allocations`)."""
        extent = E.const_int(s.extent)
        lo = E.const_int(s.min)
        if extent is None or lo is None:
            raise CodegenError(f"vthread loop {s.loop_var.name} needs a constant range, not {s.min}+{s.extent}")
        self.vthreads = {**self.vthreads, s.loop_var: (lo, extent)}
        self.ranges[s.loop_var] = E.Range(s.min, s.extent)
        try:
            self.stmt(s.body)
        finally:
            self.vthreads = {v: r for v, r in self.vthreads.items() if v is not s.loop_var}

    def allreduce(self, call: E.Call) -> None:
        """All threads of each group (the block's threads that differ only along the reduced
        axes) combine their `acc` into `res`: through a shared array, a halving tree when
        only threadIdx.x of a power-of-two extent is reduced, else a serial pass over the
        group; barriers after the writes and after the reads (the array may be reused in a
        loop)."""
        op, acc, res, identity, tags = allreduce_parts(call)
        dtype = acc.buffer.dtype
        ct = c_type(dtype)
        bx, by, bz = self.kernel.block
        red = self.fresh("red_buf")
        lin = f"((((int)threadIdx.z) * {by} + ((int)threadIdx.y)) * {bx} + ((int)threadIdx.x))"

        def comb(a: str, b: str) -> str:
            if op == "add":
                return f"({a} + {b})"
            if op == "mul":
                return f"({a} * {b})"
            fn = {"float32": "fmaxf", "float64": "fmax"}.get(dtype, "max") if op == "max" else \
                {"float32": "fminf", "float64": "fmin"}.get(dtype, "min")
            return f"{fn}({a}, {b})"

        self.line("{")
        self.depth += 1
        self.line(f"__shared__ {ct} {red}[{bx * by * bz}];")
        self.line(f"{red}[{lin}] = {self.printer.access(acc.buffer, acc.indices)};")
        self.line("__syncthreads();")
        result = self.printer.access(res.buffer, res.indices)
        if tags == ("threadIdx.x",) and bx & (bx - 1) == 0:
            self.line(f"for (int offset = {bx // 2}; offset > 0; offset >>= 1) {{")
            self.line(f"  if (((int)threadIdx.x) < offset) {red}[{lin}] = {comb(f'{red}[{lin}]', f'{red}[{lin} + offset]')};")
            self.line("  __syncthreads();")
            self.line("}")
            self.line(f"{result} = {red}[{lin} - ((int)threadIdx.x)];")
        else:
            self.line(f"{ct} total = {self.expr(identity)};")
            axes = []
            for axis, ext in zip("xyz", (bx, by, bz)):
                tag = f"threadIdx.{axis}"
                if tag in tags:
                    self.line(f"for (int r{axis} = 0; r{axis} < {ext}; ++r{axis})")
                    axes.append(f"r{axis}")
                else:
                    axes.append(f"((int){tag})")
            member = f"(({axes[2]} * {by} + {axes[1]}) * {bx} + {axes[0]})"
            self.line(f"  total = {comb('total', f'{red}[{member}]')};")
            self.line(f"{result} = total;")
        self.line("__syncthreads();")
        self.depth -= 1
        self.line("}")

    def vector_loop(self, s: S.For) -> bool:
        """One vector access for a contiguous, aligned copy `dst[... v] = src[... v]` (under
        a condition that does not depend on `v`), or for a guarded one `dst[... v] =
        if_then_else(c, src[... v], 0)` whose condition is the same in every lane (a padded
        fetch: the copy or a vector of zeros; `lanes`); False when the loop must stay scalar."""
        lanes = E.const_int(s.extent)
        if lanes is None or E.const_int(s.min) != 0:
            return False
        body, cond = s.body, None
        if isinstance(body, S.IfThenElse) and body.else_case is None:
            cond, body = body.condition, body.then_case
            if s.loop_var in _vars(cond):
                if lane_form(cond, s.loop_var, lanes) != INVARIANT:
                    return False
                cond = _at_zero(cond, s.loop_var)
        if not isinstance(body, S.BufferStore):
            return False
        value, select = body.value, None
        if (isinstance(value, E.Call) and value.op in ("if_then_else", "tir.if_then_else") and len(value.args) == 3
                and _is_zero(value.args[2]) and lane_form(value.args[0], s.loop_var, lanes) == INVARIANT):
            select, value = _at_zero(value.args[0], s.loop_var), value.args[1]
        if not isinstance(value, E.BufferLoad):
            return False
        dst, src = body, value
        if dst.buffer.dtype != src.buffer.dtype or dst.buffer.dtype == "bool":
            return False
        nbytes = lanes * elem_bytes(dst.buffer.dtype)
        vtype = _VECTOR_TYPES.get(nbytes)
        if vtype is None:
            return False
        bases = []
        for buf, indices in ((dst.buffer, dst.indices), (src.buffer, src.indices)):
            flat = flat_index(buf, indices)
            contiguous = stride_of(flat, s.loop_var) == 1 and _aligned(flat, s.loop_var, lanes)
            if not contiguous and lane_form(flat, s.loop_var, lanes) != LINEAR:
                return False
            bases.append(_at_zero(flat, s.loop_var))
        d_name, s_name = self.buffer_name(dst.buffer), self.buffer_name(src.buffer)
        loaded = f"*({vtype}*)({s_name} + {self.expr(bases[1])})"
        if select is not None:
            loaded = f"({self.expr(select)} ? {loaded} : {_VECTOR_ZEROS[nbytes]})"
        text = f"*({vtype}*)({d_name} + {self.expr(bases[0])}) = {loaded};"
        if cond is not None:
            self.line(f"if ({self.expr(cond)}) {{")
            self.depth += 1
            self.line(text)
            self.depth -= 1
            self.line("}")
        else:
            self.line(text)
        return True

    def dp4a(self, s: S.For) -> bool:
        """`C[c] = C[c] + int32(A[a + k]) * int32(B[b + k])` over k in [0, 4) with int8 A, B
        (contiguous, 4-aligned) and int32 C that does not move with k: one `__dp4a`."""
        matched = match_dp4a(s)
        if matched is None:
            return False
        st, acc, loads = matched
        word = "int" if loads[0][0].dtype == "int8" else "unsigned int"
        a_txt, b_txt = (f"*({word}*)({self.buffer_name(b)} + {self.expr(f)})" for b, f in loads)
        target = self.printer.access(st.buffer, st.indices)
        self.line(f"{target} = __dp4a({a_txt}, {b_txt}, {self.expr(acc)});")
        return True


def match_dp4a(s: S.For) -> tuple[S.BufferStore, E.BufferLoad, list[tuple[E.Buffer, E.PrimExpr]]] | None:
    """(store, accumulator load, [(int8 buffer, first element)] * 2) of a dp4a loop."""
    if E.const_int(s.extent) != 4 or E.const_int(s.min) != 0:
        return None
    st = s.body
    if not (isinstance(st, S.BufferStore) and st.buffer.dtype == "int32" and isinstance(st.value, E.Add)):
        return None
    acc, prod = st.value.a, st.value.b
    if not isinstance(acc, E.BufferLoad):
        acc, prod = prod, acc
    if not (isinstance(acc, E.BufferLoad) and acc.buffer is st.buffer and isinstance(prod, E.Mul)):
        return None
    if stride_of(flat_index(st.buffer, st.indices), s.loop_var) != 0:
        return None
    loads = []
    for side in (prod.a, prod.b):
        if not (isinstance(side, E.Cast) and side.dtype == "int32" and isinstance(side.value, E.BufferLoad)):
            return None
        load = side.value
        if load.buffer.dtype not in ("int8", "uint8"):
            return None
        flat = flat_index(load.buffer, load.indices)
        if stride_of(flat, s.loop_var) != 1 or not _aligned(flat, s.loop_var, 4):
            return None
        loads.append((load.buffer, _at_zero(flat, s.loop_var)))
    if loads[0][0].dtype != loads[1][0].dtype:
        return None
    return st, acc, loads


def _is_zero(e: E.PrimExpr) -> bool:
    """A constant whose bits are all zero (so a vector of it is a zeroed vector)."""
    if isinstance(e, E.FloatImm):
        return e.value == 0.0 and math.copysign(1.0, e.value) > 0
    return isinstance(e, E.IntImm) and e.value == 0


def _at_zero(flat: E.PrimExpr, var: E.Var) -> E.PrimExpr:
    """`flat` at var = 0: the first element of a vector access."""
    return simplify(substitute(flat, {var: E.IntImm(var.dtype, 0)}))


def _vars(e: E.PrimExpr) -> set[E.Var]:
    from msdb.ir.functor import free_vars

    return free_vars(e)


def _aligned(flat: E.PrimExpr, var: E.Var, lanes: int) -> bool:
    """Whether `flat` at var = 0 is a multiple of `lanes` for every value of the other terms."""
    form: Affine = affine_form(flat)
    if form.const % lanes:
        return False
    for term, coef in form.terms.items():
        if coef % lanes:
            used = _vars(_term_expr(term))
            if var in used and coef == 1 and len(used) == 1:
                continue
            return False
    return True


def _term_expr(term: object) -> E.PrimExpr:
    from msdb.ir.arith.affine import term_expr

    return term_expr(term)  # type: ignore[arg-type]
