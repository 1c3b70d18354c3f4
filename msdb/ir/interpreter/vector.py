"""The interpreter's vector code generator: a perfect loop nest around a block whose body is only
stores runs as numpy array operations, one lane per iteration of the loops that feed no reduction
iter var, whenever the lanes are independent; otherwise the scalar loops run, so results are the
same bit for bit (docs/architecture.md, "Reference interpreter")."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from msdb.ir import expr as E
from msdb.ir import stmt as S
from msdb.ir.arith.keys import expr_key
from msdb.ir.dtype import bits, is_float, is_integer_like, is_uint, to_numpy
from msdb.ir.functor import free_vars, post_order_visit
from msdb.ir.interpreter.emit import (
    CMP_OPS, BufBind, Env, Fn, VarBind, domain, index_tuple, iv_abs, iv_add, iv_floor_div, iv_floor_mod,
    iv_max, iv_min, iv_mul, iv_sub, iv_trunc_div, iv_trunc_mod, union,
)
from msdb.ir.interpreter.runtime import (
    BINARY_FLOAT_OPS, BITWISE_OPS, ROUNDING_OPS, VECTOR_UNARY_OPS, Interval, InterpreterError, dtype_range,
    make_vf2i,
)

_MIN_LANES = 48
_MAX_LANES = 1 << 20
_MAX_SEQ_LOOPS = 8
_LANES = "__lanes__"  # env key of the name holding the current lane count


class _NoVector(Exception):
    """Internal: this nest is left to the scalar code."""


@dataclass(frozen=True)
class VecBind:
    name: str
    interval: Interval | None
    varying: bool  # an array with one element per lane (else one value for all lanes)


@dataclass
class _ChainPlan:
    loops: list[S.For]
    realize: S.BlockRealize
    seq: list[S.For]
    lanes: list[S.For]
    n: int


def _static_range(loop: S.For) -> tuple[int, int]:
    """(min, extent) of a loop the vector planner checked to be constant."""
    lo, ext = E.const_int(loop.min), E.const_int(loop.extent)
    if lo is None or ext is None:
        raise InterpreterError(f"loop {loop.loop_var.name} has no constant range")
    return lo, ext


def _loads(node: Any) -> list[E.BufferLoad]:
    found: list[E.BufferLoad] = []

    def collect(n: Any) -> None:
        if isinstance(n, E.BufferLoad):
            found.append(n)

    post_order_visit(node, collect)
    return found


def _leaf_stores(stmt: S.Stmt | None, out: list[S.BufferStore]) -> bool:
    """Collect the stores of a body made only of stores; False if it holds anything else."""
    if stmt is None:
        return True
    if isinstance(stmt, S.BufferStore):
        out.append(stmt)
        return True
    if isinstance(stmt, S.SeqStmt):
        return all(_leaf_stores(s, out) for s in stmt.seq)
    if isinstance(stmt, S.Evaluate):
        return isinstance(stmt.value, (E.IntImm, E.FloatImm))
    return False


class VectorCodegen:
    """The vector half of `msdb.ir.interpreter.scalar.Codegen` (mixed in; uses its naming and
    scalar helpers)."""

    fns: list[Fn]
    vectorize: bool
    _novec: set[int]

    # ---- provided by `Codegen` ----
    def fresh(self, hint: str) -> str:
        raise NotImplementedError

    def tmp(self) -> str:
        raise NotImplementedError

    def global_obj(self, hint: str, obj: Any) -> str:
        raise NotImplementedError

    def float_ctor(self, dtype: str) -> str:
        raise NotImplementedError

    def scope_names(self, env: Env) -> list[str]:
        raise NotImplementedError

    def buffer(self, buf: E.Buffer, env: Env, block: str) -> BufBind:
        raise NotImplementedError

    def expr(self, e: E.PrimExpr, env: Env, fn: Fn, depth: int = 0, block: str = "root") -> tuple[str, Interval | None]:
        raise NotImplementedError

    def wrap(self, code: str, interval: Interval | None, dtype: str) -> tuple[str, Interval]:
        raise NotImplementedError

    def cast(self, code: str, iv: Interval | None, src: str, dst: str) -> tuple[str, Interval | None]:
        raise NotImplementedError

    # ---- planning -----------------------------------------------------------------------
    def plan_chain(self, stmt: S.For) -> _ChainPlan | None:
        loops: list[S.For] = []
        node: S.Stmt = stmt
        while isinstance(node, S.For):
            loops.append(node)
            node = node.body
        if not isinstance(node, S.BlockRealize) or id(node) in self._novec:
            return None
        plan = self._static_plan(loops, node)
        if plan is None:
            self._novec.add(id(node))
            return None
        if plan.n > _MAX_LANES:
            return None  # an inner part of the nest may still fit
        return plan

    def _static_plan(self, loops: list[S.For], realize: S.BlockRealize) -> _ChainPlan | None:
        blk = realize.block
        if blk.alloc_buffers or blk.match_buffers or len(realize.iter_values) != len(blk.iter_vars):
            return None
        for loop in loops:
            lo, ext = E.const_int(loop.min), E.const_int(loop.extent)
            if lo is None or ext is None or ext <= 0:
                return None
        stores: list[S.BufferStore] = []
        if not (_leaf_stores(blk.init, stores) and _leaf_stores(blk.body, stores)) or not stores:
            return None
        reduce_vars: set[E.Var] = set()
        reduce_loop_vars: set[E.Var] = set()
        for iv, value in zip(blk.iter_vars, realize.iter_values):
            if iv.iter_type == S.IterType.COMM_REDUCE:
                reduce_vars.add(iv.var)
                reduce_loop_vars |= free_vars(value)
            elif iv.iter_type != S.IterType.DATA_PAR:
                return None
        seq = [loop for loop in loops if loop.loop_var in reduce_loop_vars]
        lanes = [loop for loop in loops if loop.loop_var not in reduce_loop_vars]
        if len(seq) > _MAX_SEQ_LOOPS or not lanes:
            return None
        seq_vars = {loop.loop_var for loop in seq}
        for iv, value in zip(blk.iter_vars, realize.iter_values):
            if iv.iter_type == S.IterType.DATA_PAR and (free_vars(value) & seq_vars or _loads(value)):
                return None  # spatial bindings are computed once, outside the reduction loops
        # Each written buffer is written at one index expression, which depends on neither the
        # reduction loops nor any loaded value, and read (if at all) only there.
        write_key: dict[E.Buffer, Any] = {}
        for st in stores:
            key = tuple(expr_key(i) for i in st.indices)
            if write_key.setdefault(st.buffer, key) != key:
                return None
            for index in st.indices:
                if _loads(index) or free_vars(index) & (seq_vars | reduce_vars):
                    return None
        everything: list[Any] = list(realize.iter_values) + [realize.predicate] + stores
        for load in (ld for node in everything for ld in _loads(node)):
            if load.buffer in write_key and tuple(expr_key(i) for i in load.indices) != write_key[load.buffer]:
                return None
        n = math.prod(_static_range(loop)[1] for loop in lanes)
        if n < _MIN_LANES:
            return None
        return _ChainPlan(loops, realize, seq, lanes, n)

    # ---- emission -----------------------------------------------------------------------
    def emit_chain(self, plan: _ChainPlan, env: Env, fn: Fn, block: str) -> bool:
        """Emit `if not _vec(...): <scalar nest>`; False if the nest cannot be vectorized."""
        args = self.scope_names(env)
        vf = Fn(self.fresh("_vec"), args)
        try:
            self._emit_vector(plan, env, vf)
        except _NoVector:
            self._novec.add(id(plan.realize))
            return False
        self.fns.append(vf)
        fn.emit(f"if not {vf.name}({', '.join(args)}):")
        return True

    def _emit_vector(self, plan: _ChainPlan, env: Env, vf: Fn) -> None:
        blk = plan.realize.block
        name = blk.name_hint
        venv: Env = dict(env)
        extents = [E.const_int(loop.extent) for loop in plan.lanes]
        grid = self.tmp()
        vf.emit(f"{grid} = np.indices({tuple(extents)!r}, dtype=np.int64).reshape({len(extents)}, -1)")
        for k, loop in enumerate(plan.lanes):
            lo, ext = _static_range(loop)
            lname = self.fresh(loop.loop_var.name)
            vf.emit(f"{lname} = {grid}[{k}]" + (f" + {lo}" if lo else ""))
            venv[loop.loop_var] = VecBind(lname, (lo, lo + ext - 1), True)
        venv[_LANES] = str(plan.n)
        # Buffers written and read: refuse aliasing memory at run time.
        stores: list[S.BufferStore] = []
        _leaf_stores(blk.init, stores)
        _leaf_stores(blk.body, stores)
        written = list(dict.fromkeys(st.buffer for st in stores))
        accessed = list(written)
        for node in list(plan.realize.iter_values) + [plan.realize.predicate] + stores:
            for load in _loads(node):
                if load.buffer not in accessed:
                    accessed.append(load.buffer)
        binds = [self.buffer(b, env, name) for b in accessed]
        vf.emit(f"if not _disjoint(({''.join(b.name + ', ' for b in binds)}), {len(written)}):")
        vf.emit("    return False")
        # Spatial bindings, once for all reduction steps.
        for iv, value in zip(blk.iter_vars, plan.realize.iter_values):
            if iv.iter_type == S.IterType.DATA_PAR:
                code, interval, varying = self.vexpr(value, venv, vf, name)
                venv[iv.var] = VecBind(code, interval, varying)
        # Lanes must write distinct locations (checked before anything is written).
        for buf in written:
            st = next(s for s in stores if s.buffer is buf)
            codes = [self.vexpr(i, venv, vf, name)[0] for i in st.indices]
            vf.emit(f"if not _unique_lanes({plan.n}, ({''.join(c + ', ' for c in codes)})):")
            vf.emit("    return False")
        for loop in plan.seq:
            lo, ext = _static_range(loop)
            sname = self.fresh(loop.loop_var.name)
            vf.emit(f"for {sname} in range({lo}, {lo + ext}):")
            vf.indent += 1
            venv[loop.loop_var] = VecBind(sname, (lo, lo + ext - 1), False)
        for iv, value in zip(blk.iter_vars, plan.realize.iter_values):
            if iv.iter_type == S.IterType.COMM_REDUCE:
                code, interval, varying = self.vexpr(value, venv, vf, name)
                if varying:
                    raise _NoVector
                venv[iv.var] = VecBind(code, interval, False)
        pred = plan.realize.predicate
        if not (isinstance(pred, E.IntImm) and pred.value):
            code, _, varying = self.vexpr(pred, venv, vf, name)
            if varying:
                sel = self.tmp()
                vf.emit(f"{sel} = np.flatnonzero({code})")
                vf.emit(f"if {sel}.size:")
                vf.indent += 1
                venv = self.vrestrict(venv, sel, vf, None)
            else:
                vf.emit(f"if {code}:")
                vf.indent += 1
        if blk.init is not None:
            conds = []
            for iv in blk.iter_vars:
                if iv.iter_type == S.IterType.COMM_REDUCE:
                    mcode, _, _ = self.vexpr(domain(iv).min, venv, vf, name)
                    conds.append(f"{venv[iv.var].name} == {mcode}")
            if conds:
                vf.emit(f"if {' and '.join(conds)}:")
                vf.indent += 1
                self.vstores(blk.init, venv, vf, name)
                vf.indent -= 1
            else:
                self.vstores(blk.init, venv, vf, name)
        self.vstores(blk.body, venv, vf, name)
        vf.indent = 1
        vf.emit("return True")

    def vrestrict(self, env: Env, sel: str, fn: Fn, used: set[E.Var] | None) -> Env:
        """The environment of the lanes listed in `sel` (a subset of the current lanes)."""
        out = dict(env)
        for key, bind in env.items():
            if isinstance(bind, VecBind) and bind.varying and (used is None or key in used):
                name = self.tmp()
                fn.emit(f"{name} = {bind.name}[{sel}]")
                out[key] = VecBind(name, bind.interval, True)
        count = self.tmp()
        fn.emit(f"{count} = {sel}.size")
        out[_LANES] = count
        return out

    def vstores(self, stmt: S.Stmt, env: Env, fn: Fn, block: str) -> None:
        stores: list[S.BufferStore] = []
        _leaf_stores(stmt, stores)
        for st in stores:
            bind = self.buffer(st.buffer, env, block)
            # Indices (and their bounds) before the value, as the scalar code does.
            idx, _ = self.vindices(st.indices, bind, env, fn, block, "store")
            value, _, _ = self.vexpr(st.value, env, fn, block)
            if st.value.dtype != st.buffer.dtype:
                value = self.vcast(value, None, st.value.dtype, st.buffer.dtype, True, fn)[0]
            fn.emit(f"{bind.name}[{index_tuple(idx)}] = {value}")

    def vindices(self, indices: tuple[E.PrimExpr, ...], bind: BufBind, env: Env, fn: Fn, block: str,
                 kind: str) -> tuple[list[str], bool]:
        """Index codes (bounds-checked over the current lanes) and whether any varies."""
        if len(indices) != len(bind.dims):
            raise _NoVector
        codes, check, any_varying = [], False, False
        for index, (_, div) in zip(indices, bind.dims):
            if index.dtype == "bool" or not is_integer_like(index.dtype):
                raise _NoVector
            code, iv, varying = self.vexpr(index, env, fn, block)
            codes.append(code)
            any_varying = any_varying or varying
            if iv is None or div is None or iv[0] < 0 or iv[1] >= div[0]:
                check = True
        if check:
            fn.emit(f"_vbounds({kind!r}, {bind.buffer.name!r}, {block!r}, {bind.name}, "
                    f"({''.join(c + ', ' for c in codes)}))")
        return codes, any_varying

    # ---- expressions (three-address code: every result lands in a local) ------------------
    def vemit(self, fn: Fn, code: str) -> str:
        name = self.tmp()
        fn.emit(f"{name} = {code}")
        return name

    def vexpr(self, e: E.PrimExpr, env: Env, fn: Fn, block: str) -> tuple[str, Interval | None, bool]:
        if isinstance(e, (E.IntImm, E.FloatImm, E.StringImm)):
            code, iv = self.expr(e, {}, fn, block=block)
            return code, iv, False
        if isinstance(e, E.Var):
            bind = env.get(e)
            if isinstance(bind, VecBind):
                return bind.name, bind.interval, bind.varying
            if isinstance(bind, VarBind):
                return bind.name, bind.interval, False
            raise _NoVector
        method = getattr(self, f"v_{type(e).__name__}", None)
        if method is None:
            if isinstance(e, E.CmpOp):
                method = self.v_CmpOp
            else:
                raise _NoVector
        return method(e, env, fn, block)

    def vwrap(self, code: str, iv: Interval | None, dtype: str, varying: bool, fn: Fn) -> tuple[str, Interval | None, bool]:
        lo, hi = dtype_range(dtype)
        if iv is not None and lo <= iv[0] and iv[1] <= hi:
            return self.vemit(fn, code), iv, varying
        if varying and bits(dtype) == 64:
            if is_uint(dtype):
                raise _NoVector
            return self.vemit(fn, code), (lo, hi), varying  # int64 arrays wrap natively
        wrapped, interval = self.wrap(code, iv, dtype)
        return self.vemit(fn, wrapped), interval, varying

    def vfloat(self, code: str, e: E.PrimExpr, operand_dtypes: tuple[str, ...], varying: bool, fn: Fn) -> tuple[str, None, bool]:
        if e.dtype == "bfloat16":
            raise _NoVector
        if any(d != e.dtype for d in operand_dtypes):
            code = self.vfcast(code, e.dtype, varying)
        return self.vemit(fn, code), None, varying

    def vfcast(self, code: str, dtype: str, varying: bool) -> str:
        if dtype == "bfloat16":
            raise _NoVector
        if varying:
            return f"np.asarray({code}).astype({self.global_obj('dt', to_numpy(dtype))})"
        return f"{self.float_ctor(dtype)}({code})"

    def v_operands(self, e: E.BinaryOp, env: Env, fn: Fn, block: str):
        a, ai, av = self.vexpr(e.a, env, fn, block)
        b, bi, bv = self.vexpr(e.b, env, fn, block)
        return a, ai, b, bi, av or bv

    def _v_arith(self, e: E.BinaryOp, env: Env, fn: Fn, block: str, op: str, ivf: Callable) -> tuple[str, Interval | None, bool]:
        a, ai, b, bi, varying = self.v_operands(e, env, fn, block)
        if is_integer_like(e.dtype):
            return self.vwrap(f"({a} {op} {b})", ivf(ai, bi), e.dtype, varying, fn)
        return self.vfloat(f"({a} {op} {b})", e, (e.a.dtype, e.b.dtype), varying, fn)

    def v_Add(self, e, env, fn, block):
        return self._v_arith(e, env, fn, block, "+", iv_add)

    def v_Sub(self, e, env, fn, block):
        return self._v_arith(e, env, fn, block, "-", iv_sub)

    def v_Mul(self, e, env, fn, block):
        return self._v_arith(e, env, fn, block, "*", iv_mul)

    def _v_nonzero(self, bi: Interval | None) -> None:
        if bi is None or bi[0] <= 0 <= bi[1]:
            raise _NoVector  # a zero divisor must raise exactly where the scalar code would

    def v_Div(self, e, env, fn, block):
        a, ai, b, bi, varying = self.v_operands(e, env, fn, block)
        if is_integer_like(e.dtype):
            self._v_nonzero(bi)
            iv = iv_trunc_div(ai, bi)
            if ai and bi and ai[0] >= 0 and bi[0] > 0:
                return self.vwrap(f"({a} // {b})", iv, e.dtype, varying, fn)
            return self.vwrap(f"_vtdiv({a}, {b})" if varying else f"_tdiv({a}, {b})", iv, e.dtype, varying, fn)
        return self.vfloat(f"({a} / {b})", e, (e.a.dtype, e.b.dtype), varying, fn)

    def v_Mod(self, e, env, fn, block):
        a, ai, b, bi, varying = self.v_operands(e, env, fn, block)
        if is_integer_like(e.dtype):
            self._v_nonzero(bi)
            iv = iv_trunc_mod(ai, bi)
            if ai and bi and ai[0] >= 0 and bi[0] > 0:
                return self.vwrap(f"({a} % {b})", iv, e.dtype, varying, fn)
            return self.vwrap(f"_vtmod({a}, {b})" if varying else f"_tmod({a}, {b})", iv, e.dtype, varying, fn)
        return self.vfloat(f"np.fmod({a}, {b})", e, (e.a.dtype, e.b.dtype), varying, fn)

    def v_FloorDiv(self, e, env, fn, block):
        a, ai, b, bi, varying = self.v_operands(e, env, fn, block)
        if is_integer_like(e.dtype):
            self._v_nonzero(bi)
            return self.vwrap(f"({a} // {b})", iv_floor_div(ai, bi), e.dtype, varying, fn)
        return self.vfloat(f"np.floor({a} / {b})", e, (e.a.dtype, e.b.dtype), varying, fn)

    def v_FloorMod(self, e, env, fn, block):
        a, ai, b, bi, varying = self.v_operands(e, env, fn, block)
        if is_integer_like(e.dtype):
            self._v_nonzero(bi)
            return self.vwrap(f"({a} % {b})", iv_floor_mod(ai, bi), e.dtype, varying, fn)
        return self.vfloat(f"({a} - np.floor({a} / {b}) * {b})", e, (e.a.dtype, e.b.dtype), varying, fn)

    def _v_minmax(self, e, env, fn, block, op: str, ivf: Callable):
        a, ai, b, bi, varying = self.v_operands(e, env, fn, block)
        code = f"np.where({a} {op} {b}, {a}, {b})" if varying else f"({a} if {a} {op} {b} else {b})"
        if is_integer_like(e.dtype):
            return self.vwrap(code, ivf(ai, bi), e.dtype, varying, fn)
        return self.vfloat(code, e, (e.a.dtype, e.b.dtype), varying, fn)

    def v_Min(self, e, env, fn, block):
        return self._v_minmax(e, env, fn, block, "<", iv_min)

    def v_Max(self, e, env, fn, block):
        return self._v_minmax(e, env, fn, block, ">", iv_max)

    def v_CmpOp(self, e, env, fn, block):
        kind = type(e).__name__
        if kind == "And":
            return self.vlazy(e.a, e.b, None, "bool", env, fn, block, false_const="False")
        if kind == "Or":
            return self.vlazy(e.a, None, e.b, "bool", env, fn, block, true_const="True")
        op = CMP_OPS.get(kind)
        if op is None:
            raise _NoVector
        a, _, b, _, varying = self.v_operands(e, env, fn, block)
        return self.vemit(fn, f"({a} {op} {b})"), (0, 1), varying

    def v_Not(self, e, env, fn, block):
        a, _, varying = self.vexpr(e.a, env, fn, block)
        return self.vemit(fn, f"np.logical_not({a})" if varying else f"(not {a})"), (0, 1), varying

    def v_Select(self, e, env, fn, block):
        c, _, cv = self.vexpr(e.condition, env, fn, block)
        t, ti, tv = self.vexpr(e.true_value, env, fn, block)
        f, fi, fv = self.vexpr(e.false_value, env, fn, block)
        if cv or tv or fv:
            return self.vemit(fn, f"np.where({c}, {t}, {f})"), union(ti, fi), True
        return self.vemit(fn, f"({t} if {c} else {f})"), union(ti, fi), False

    def v_Cast(self, e, env, fn, block):
        code, iv, varying = self.vexpr(e.value, env, fn, block)
        return self.vcast(code, iv, e.value.dtype, e.dtype, varying, fn)

    def vcast(self, code: str, iv: Interval | None, src: str, dst: str, varying: bool, fn: Fn) -> tuple[str, Interval | None, bool]:
        if not varying:
            out, interval = self.cast(code, iv, src, dst)
            return self.vemit(fn, out), interval, False
        if src == dst:
            return code, iv, True
        if dst == "bool":
            return self.vemit(fn, f"(np.asarray({code}) != 0)"), (0, 1), True
        if is_integer_like(dst):
            if src == "bool":
                code = self.vemit(fn, f"np.asarray({code}).astype(np.int64)")
                iv = (0, 1)
            elif is_float(src):
                if is_uint(dst) and bits(dst) == 64:
                    raise _NoVector
                conv = self.global_obj("vf2i", make_vf2i(dst))
                return self.vemit(fn, f"{conv}({code})"), dtype_range(dst), True
            elif not is_integer_like(src):
                raise _NoVector
            return self.vwrap(code, iv, dst, True, fn)
        if is_float(dst):
            return self.vemit(fn, self.vfcast(code, dst, True)), None, True
        raise _NoVector

    def v_BufferLoad(self, e, env, fn, block):
        bind = self.buffer(e.buffer, env, block)
        idx, varying = self.vindices(e.indices, bind, env, fn, block, "load")
        code = f"{bind.name}[{index_tuple(idx)}]"
        if e.dtype == "bool":
            return self.vemit(fn, code if varying else f"bool({code})"), (0, 1), varying
        if is_integer_like(e.dtype):
            if is_uint(e.dtype) and bits(e.dtype) == 64:
                raise _NoVector
            return self.vemit(fn, f"{code}.astype(np.int64)" if varying else f"int({code})"), dtype_range(e.dtype), varying
        if e.dtype == "bfloat16":
            raise _NoVector
        return self.vemit(fn, code), None, varying

    def v_Call(self, e, env, fn, block):
        op = e.op[4:] if e.op.startswith("tir.") else e.op
        args = e.args
        if op == "if_then_else" and len(args) == 3:
            return self.vlazy(args[0], args[1], args[2], e.dtype, env, fn, block)
        if op in ("max_value", "min_value", "infinity", "inf") or (op in ("isnan", "isinf", "isfinite") and len(args) == 1 and not is_float(args[0].dtype)):
            code, iv = self.expr(e, {}, fn, block=block)
            return code, iv, False
        if op == "likely" and len(args) == 1:
            return self.vexpr(args[0], env, fn, block)
        if len(args) == 1:
            a, ai, varying = self.vexpr(args[0], env, fn, block)
            if not varying:
                return self._v_scalar_call(e, [a], [ai], fn, block)
            if op in ("isnan", "isinf", "isfinite"):
                return self.vemit(fn, f"np.{op}({a})"), (0, 1), True
            if op in ("fabs", "abs"):
                if is_integer_like(e.dtype):
                    return self.vwrap(f"np.abs({a})", iv_abs(ai), e.dtype, True, fn)
                return self.vfloat(f"np.abs({a})", e, (args[0].dtype,), True, fn)
            if op in VECTOR_UNARY_OPS:
                if op in ROUNDING_OPS and is_integer_like(args[0].dtype):
                    return self.vcast(a, ai, args[0].dtype, e.dtype, True, fn)
                if not is_float(e.dtype):
                    raise _NoVector
                if not is_float(args[0].dtype):
                    a = self.vemit(fn, self.vfcast(a, e.dtype, True))
                ufunc = self.global_obj(f"v{op}", VECTOR_UNARY_OPS[op])
                src = args[0].dtype if is_float(args[0].dtype) else e.dtype
                return self.vfloat(f"{ufunc}({a})", e, (src,), True, fn)
            raise _NoVector
        if len(args) == 2 and op in BINARY_FLOAT_OPS:
            a, ai, av = self.vexpr(args[0], env, fn, block)
            b, bi, bv = self.vexpr(args[1], env, fn, block)
            if not (av or bv):
                return self._v_scalar_call(e, [a, b], [ai, bi], fn, block)
            if not is_float(e.dtype):
                raise _NoVector
            if not is_float(args[0].dtype):
                a = self.vemit(fn, self.vfcast(a, e.dtype, av))
            ufunc = self.global_obj(op, BINARY_FLOAT_OPS[op])
            src = args[0].dtype if is_float(args[0].dtype) else e.dtype
            return self.vfloat(f"{ufunc}({a}, {b})", e, (src,), True, fn)
        if len(args) == 2 and op in BITWISE_OPS:
            a, _, av = self.vexpr(args[0], env, fn, block)
            b, _, bv = self.vexpr(args[1], env, fn, block)
            if not is_integer_like(e.dtype):
                raise _NoVector
            return self.vwrap(f"({a} {BITWISE_OPS[op]} {b})", None, e.dtype, av or bv, fn)
        raise _NoVector

    def _v_scalar_call(self, e: E.Call, codes: list[str], ivs: list[Interval | None], fn: Fn, block: str):
        """A call whose arguments are the same for all lanes: the scalar translation, applied
        to the already computed arguments."""
        params = [E.Var(f"arg{k}", a.dtype) for k, a in enumerate(e.args)]
        env = {p: VarBind(c, iv) for p, c, iv in zip(params, codes, ivs)}
        code, iv = self.expr(E.Call(e.dtype, e.op, tuple(params)), env, fn, block=block)
        return self.vemit(fn, code), iv, False

    def vlazy(self, cond: E.PrimExpr, then: E.PrimExpr | None, other: E.PrimExpr | None, dtype: str,
              env: Env, fn: Fn, block: str, true_const: str = "True", false_const: str = "False"):
        """`then if cond else other` evaluating each arm only on the lanes that take it (None
        arms are the constants: And is `b if a else False`, Or is `True if a else b`)."""
        c, _, cv = self.vexpr(cond, env, fn, block)
        dt = self.global_obj("dt", np.dtype(bool) if dtype == "bool" else np.dtype(np.int64) if is_integer_like(dtype) else to_numpy(dtype))
        lanes = env[_LANES]
        out = self.tmp()
        iv: Interval | None
        if not cv:
            # One condition for all lanes: a plain if/else, each arm computed on every lane.
            results = []
            fn.emit(f"if {c}:")
            for k, (arm, const) in enumerate(((then, true_const), (other, false_const))):
                fn.indent += 1
                if arm is None:
                    code, iv, varying = const, ((1, 1) if const == "True" else (0, 0)), False
                else:
                    code, iv, varying = self.vexpr(arm, env, fn, block)
                results.append((code, iv, varying))
                fn.emit(f"{out} = {code}")
                fn.indent -= 1
                if k == 0:
                    fn.emit("else:")
            if results[0][2] != results[1][2]:
                # One arm varies: broadcast both so later code sees an array either way.
                fn.emit(f"{out} = np.broadcast_to(np.asarray({out}, dtype={dt}), ({lanes},)).copy()")
            return out, union(results[0][1], results[1][1]), results[0][2] or results[1][2]
        parts: list[tuple[str, Interval | None]] = []
        for arm, const, mask in ((then, true_const, c), (other, false_const, f"np.logical_not({c})")):
            if arm is None:
                parts.append((const, (1, 1) if const == "True" else (0, 0)))
            elif not _loads(arm):
                code, iv, _ = self.vexpr(arm, env, fn, block)
                parts.append((code, iv))
            else:
                # Evaluate only on the lanes taking this arm, and not at all when none does
                # (numpy checks a uniform index even when the lane arrays are empty).
                sel = self.vemit(fn, f"np.flatnonzero({mask})")
                full = self.vemit(fn, f"np.zeros({lanes}, {dt})")
                fn.emit(f"if {sel}.size:")
                fn.indent += 1
                renv = self.vrestrict(env, sel, fn, free_vars(arm))
                code, iv, _ = self.vexpr(arm, renv, fn, block)
                fn.emit(f"{full}[{sel}] = {code}")
                fn.indent -= 1
                parts.append((full, iv))
        fn.emit(f"{out} = np.where({c}, {parts[0][0]}, {parts[1][0]})")
        iv = union(parts[0][1], parts[1][1]) if is_integer_like(dtype) else None
        if not is_integer_like(dtype) and dtype != "bool":
            fn.emit(f"{out} = {out}.astype({dt}, copy=False)")
        return out, iv, True
