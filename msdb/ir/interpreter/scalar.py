"""The interpreter's scalar code generator and driver: one Python `for` per IR loop, block iter
vars as locals, buffer accesses as bounds-checked numpy scalar indexing; leaf nests go to the
vector generator first (docs/architecture.md, "Reference interpreter")."""

from __future__ import annotations

import logging
import math
import re
from typing import Any

import numpy as np

from msdb.ir import expr as E
from msdb.ir import stmt as S
from msdb.ir.arith.limits import value_limit
from msdb.ir.dtype import bits, is_float, is_integer_like, is_uint, to_numpy
from msdb.ir.function import PrimFunc
from msdb.ir.interpreter.emit import (
    CMP_OPS, BufBind, Env, Fn, VarBind, domain, expect_args, index_tuple, is_literal, is_name, iv_abs, iv_add,
    iv_floor_div, iv_floor_mod, iv_max, iv_min, iv_mul, iv_sub, iv_trunc_div, iv_trunc_mod, union,
)
from msdb.ir.interpreter.runtime import (
    BINARY_FLOAT_OPS, BITWISE_OPS, FLOAT_TYPES, GLOBALS, ROUNDING_OPS, UNARY_FLOAT_OPS, CompiledFunc, Interval,
    InterpreterError, Param, dtype_range, make_f2i,
)
from msdb.ir.interpreter.vector import VecBind, VectorCodegen

logger = logging.getLogger(__name__)

# CPython rejects more than 20 nested for/while/try/with blocks per code object and expressions
# nested too deeply; stay well below both.
_MAX_NEST = 14
_MAX_EXPR_DEPTH = 48

_IDENT = re.compile(r"[^0-9a-zA-Z_]")


class Codegen(VectorCodegen):
    def __init__(self, func: PrimFunc, vectorize: bool = True) -> None:
        self.func = func
        self.vectorize = vectorize
        self._novec: set[int] = set()
        self.fns: list[Fn] = []
        self.ns: dict[str, Any] = dict(GLOBALS)
        self._const_names: dict[tuple[str, str], str] = {}
        self._counter = 0
        self.written: set[E.Buffer] = set()
        self.alias: dict[E.Buffer, E.Buffer] = {}

    # ---- naming -------------------------------------------------------------------------
    def fresh(self, hint: str) -> str:
        self._counter += 1
        clean = _IDENT.sub("_", hint)[:24] or "x"
        return f"{clean}_{self._counter}"

    def tmp(self) -> str:
        self._counter += 1
        return f"_t{self._counter}"

    def global_obj(self, hint: str, obj: Any) -> str:
        """Bind `obj` to a fresh module-level name of the generated code (the counter makes it
        distinct from every local, whatever the IR's variable names are)."""
        self._counter += 1
        name = f"_g{self._counter}_{hint}"
        self.ns[name] = obj
        return name

    def const(self, dtype: str, value: Any) -> str:
        key = (dtype, repr(value))
        name = self._const_names.get(key)
        if name is None:
            name = self.global_obj("k", FLOAT_TYPES[dtype](value))
            self._const_names[key] = name
        return name

    def float_ctor(self, dtype: str) -> str:
        if dtype not in FLOAT_TYPES:
            raise InterpreterError(f"unsupported float dtype {dtype!r}")
        return self.global_obj(f"to_{dtype}", FLOAT_TYPES[dtype])

    # ---- driver -------------------------------------------------------------------------
    def build(self) -> CompiledFunc:
        func = self.func
        env: Env = {}
        kernel = Fn("_kernel", [])
        self.fns.append(kernel)
        arrays: list[tuple[int, E.Var, E.Buffer, str]] = []
        for position, var in enumerate(func.params):
            buf = func.buffer_map.get(var)
            if buf is None:
                name = self.fresh(var.name)
                kernel.params.append(name)
                interval = dtype_range(var.dtype) if is_integer_like(var.dtype) else None
                env[var] = VarBind(name, interval)
                continue
            name = self.fresh(buf.name)
            kernel.params.append(name)
            arrays.append((position, var, buf, name))
        # Bind symbolic dimensions from the arrays, then check every shape.
        for position, var, buf, name in arrays:
            for axis, dim in enumerate(buf.shape):
                if isinstance(dim, E.Var) and dim not in env:
                    dname = self.fresh(dim.name)
                    kernel.emit(f"{dname} = {name}.shape[{axis}]")
                    env[dim] = VarBind(dname, (0, dtype_range(dim.dtype)[1]))
            for axis, stride in enumerate(buf.strides):
                if isinstance(stride, E.Var) and stride not in env:
                    sname = self.fresh(stride.name)
                    kernel.emit(f"{sname} = {name}.strides[{axis}] // {name}.itemsize")
                    env[stride] = VarBind(sname, dtype_range(stride.dtype))
            if isinstance(buf.elem_offset, E.Var) and buf.elem_offset not in env:
                env[buf.elem_offset] = VarBind("0", (0, 0))
        for position, var, buf, name in arrays:
            dims = self.dims_of(buf, env, kernel)
            want = "(" + "".join(f"{code}, " for code, _ in dims) + ")"
            kernel.emit(f"if {name}.shape != {want}:")
            kernel.emit(f"    _shape_err({position}, {var.name!r}, {buf.name!r}, {name}.shape, {want})")
            env[buf] = BufBind(name, buf, dims, (name,) + tuple(c for c, _ in dims if is_name(c)))
        self.stmt(func.body, env, kernel, "root")
        params = []
        for var in func.params:
            buf = func.buffer_map.get(var)
            if buf is None:
                params.append(Param(var.name, None, var.dtype, False))
            else:
                params.append(Param(var.name, buf, buf.dtype, buf in self.written))
        source = "\n".join(fn.source() for fn in reversed(self.fns))
        logger.debug("interpreter source for %s:\n%s", func.attrs.get("global_symbol", "main"), source)
        try:
            code = compile(source, "<msdb.ir.interpreter>", "exec")
        except (SyntaxError, RecursionError, MemoryError) as err:  # pragma: no cover - a codegen bug
            raise InterpreterError(f"cannot compile the function for interpretation: {err}") from err
        exec(code, self.ns)
        return CompiledFunc(func, tuple(params), self.ns["_kernel"], source)

    def dims_of(self, buf: E.Buffer, env: Env, fn: Fn) -> tuple[tuple[str, Interval | None], ...]:
        """Code for each dimension of `buf`: a literal, a bound variable, or a temporary holding
        an expression's value (so bounds checks do not re-evaluate it)."""
        out = []
        for dim in buf.shape:
            code, interval = self.expr(dim, env, fn)
            if not (code.isdigit() or is_name(code)):
                name = self.fresh("dim")
                fn.emit(f"{name} = {code}")
                code = name
            out.append((code, interval))
        return tuple(out)

    # ---- spilling deep nests into helper functions -----------------------------------------
    def scope_names(self, env: Env) -> list[str]:
        names: dict[str, None] = {}
        for bind in env.values():
            if isinstance(bind, (VarBind, VecBind)):
                if is_name(bind.name):
                    names[bind.name] = None
            elif isinstance(bind, BufBind):
                for n in bind.names:
                    names[n] = None
        return list(names)

    def spill(self, env: Env) -> tuple[Fn, str]:
        args = self.scope_names(env)
        helper = Fn(self.fresh("_part"), args)
        self.fns.append(helper)
        return helper, f"{helper.name}({', '.join(args)})"

    # ---- statements ---------------------------------------------------------------------
    def body(self, stmt: S.Stmt, env: Env, fn: Fn, block: str) -> None:
        """Emit `stmt` one level deeper (under a `for`/`if` the caller emitted)."""
        fn.indent += 1
        before = len(fn.lines)
        self.stmt(stmt, env, fn, block)
        if len(fn.lines) == before:
            fn.emit("pass")
        fn.indent -= 1

    def stmt(self, stmt: S.Stmt, env: Env, fn: Fn, block: str) -> None:
        if fn.indent > _MAX_NEST and isinstance(stmt, (S.For, S.IfThenElse, S.BlockRealize, S.Block)):
            helper, call = self.spill(env)
            fn.emit(call)
            fn = helper
        method = getattr(self, f"stmt_{type(stmt).__name__}", None)
        if method is None:
            raise InterpreterError(f"the interpreter does not support statement {type(stmt).__name__}")
        method(stmt, env, fn, block)

    def stmt_SeqStmt(self, stmt: S.SeqStmt, env: Env, fn: Fn, block: str) -> None:
        for s in stmt.seq:
            self.stmt(s, env, fn, block)

    def stmt_Evaluate(self, stmt: S.Evaluate, env: Env, fn: Fn, block: str) -> None:
        if isinstance(stmt.value, (E.IntImm, E.FloatImm, E.StringImm)):
            return
        code, _ = self.expr(stmt.value, env, fn, block=block)
        fn.emit(code)

    def stmt_LetStmt(self, stmt: S.LetStmt, env: Env, fn: Fn, block: str) -> None:
        code, interval = self.expr(stmt.value, env, fn, block=block)
        name = self.fresh(stmt.var.name)
        fn.emit(f"{name} = {code}")
        self.stmt(stmt.body, {**env, stmt.var: VarBind(name, interval)}, fn, block)

    def stmt_IfThenElse(self, stmt: S.IfThenElse, env: Env, fn: Fn, block: str) -> None:
        code, _ = self.expr(stmt.condition, env, fn, block=block)
        fn.emit(f"if {code}:")
        self.body(stmt.then_case, env, fn, block)
        if stmt.else_case is not None:
            fn.emit("else:")
            self.body(stmt.else_case, env, fn, block)

    def stmt_For(self, stmt: S.For, env: Env, fn: Fn, block: str, try_vector: bool = True) -> None:
        if try_vector and self.vectorize:
            plan = self.plan_chain(stmt)
            if plan is not None and self.emit_chain(plan, env, fn, block):
                # The scalar nest runs when the lanes turn out to depend on each other.
                self._novec.add(id(plan.realize))
                fn.indent += 1
                self.stmt_For(stmt, env, fn, block, try_vector=False)
                fn.indent -= 1
                return
        lo_code, lo_iv = self.expr(stmt.min, env, fn, block=block)
        ext_code, ext_iv = self.expr(stmt.extent, env, fn, block=block)
        name = self.fresh(stmt.loop_var.name)
        lo_c, ext_c = E.const_int(stmt.min), E.const_int(stmt.extent)
        if lo_c is not None and ext_c is not None:
            if ext_c <= 0:
                return
            fn.emit(f"for {name} in range({lo_c}, {lo_c + ext_c}):" if lo_c else f"for {name} in range({ext_c}):")
            interval: Interval | None = (lo_c, lo_c + ext_c - 1)
        else:
            fn.emit(f"for {name} in range({lo_code}, ({lo_code}) + ({ext_code})):")
            interval = None
            if lo_iv is not None and ext_iv is not None:
                interval = (lo_iv[0], lo_iv[1] + max(ext_iv[1], 1) - 1)
        self.body(stmt.body, {**env, stmt.loop_var: VarBind(name, interval)}, fn, block)

    def stmt_Block(self, stmt: S.Block, env: Env, fn: Fn, block: str) -> None:
        self.stmt_BlockRealize(S.BlockRealize((), E.IntImm("bool", 1), stmt), env, fn, block)

    def stmt_BlockRealize(self, stmt: S.BlockRealize, env: Env, fn: Fn, block: str) -> None:
        blk = stmt.block
        name = blk.name_hint
        if len(stmt.iter_values) != len(blk.iter_vars):
            raise InterpreterError(
                f"block {name!r} has {len(blk.iter_vars)} iter vars but {len(stmt.iter_values)} bindings"
            )
        # Bindings are evaluated in the enclosing scope.
        inner = dict(env)
        for iv, value in zip(blk.iter_vars, stmt.iter_values):
            code, interval = self.expr(value, env, fn, block=name)
            if is_name(code) or is_literal(code):
                inner[iv.var] = VarBind(code, interval)
            else:
                vname = self.fresh(iv.var.name)
                fn.emit(f"{vname} = {code}")
                inner[iv.var] = VarBind(vname, interval)
        pred = stmt.predicate
        if isinstance(pred, E.IntImm) and pred.value:
            self.block_body(blk, inner, fn)
            return
        if isinstance(pred, E.IntImm):
            return
        code, _ = self.expr(pred, inner, fn, block=name)
        fn.emit(f"if {code}:")
        fn.indent += 1
        before = len(fn.lines)
        self.block_body(blk, inner, fn)
        if len(fn.lines) == before:
            fn.emit("pass")
        fn.indent -= 1

    def block_body(self, blk: S.Block, env: Env, fn: Fn) -> None:
        name = blk.name_hint
        env = dict(env)
        for buf in blk.alloc_buffers:
            bname = self.fresh(buf.name)
            dims = self.dims_of(buf, env, fn)
            shape = "(" + "".join(f"{c}, " for c, _ in dims) + ")"
            dtype = self.global_obj("dt", to_numpy(buf.dtype))
            fn.emit(f"{bname} = _zeros({shape}, {dtype})")
            env[buf] = BufBind(bname, buf, dims, (bname,) + tuple(c for c, _ in dims if is_name(c)))
        for match in blk.match_buffers:
            self.match_buffer(match, env, fn, name)
        if blk.init is not None:
            conds = []
            for iv in blk.iter_vars:
                if iv.iter_type == S.IterType.COMM_REDUCE:
                    vcode = env[iv.var].name
                    mcode, _ = self.expr(domain(iv).min, env, fn, block=name)
                    conds.append(f"{vcode} == {mcode}")
            if conds:
                fn.emit(f"if {' and '.join(conds)}:")
                self.body(blk.init, env, fn, name)
            else:
                self.stmt(blk.init, env, fn, name)
        self.stmt(blk.body, env, fn, name)

    def match_buffer(self, match: S.MatchBufferRegion, env: Env, fn: Fn, block: str) -> None:
        buf, src = match.buffer, match.source.buffer
        src_bind = env.get(src)
        if src_bind is None:
            raise InterpreterError(f"match_buffer {buf.name!r} in block {block!r} views undefined buffer {src.name!r}")
        self.alias[buf] = src
        mins, exts, ext_ivs = [], [], []
        for rng in match.source.region:
            m, _ = self.expr(rng.min, env, fn, block=block)
            e, eiv = self.expr(rng.extent, env, fn, block=block)
            mins.append(m)
            exts.append(e)
            ext_ivs.append(eiv)
        lead = len(match.source.region) - len(buf.shape)
        if lead < 0:
            raise InterpreterError(
                f"match_buffer {buf.name!r} in block {block!r} has more dimensions than its source region"
            )
        # Bind symbolic dimensions of the matched buffer to the region's trailing extents.
        for axis, dim in enumerate(buf.shape):
            if isinstance(dim, E.Var) and dim not in env:
                code = exts[lead + axis]
                if not (is_name(code) or is_literal(code)):
                    dname = self.fresh(dim.name)
                    fn.emit(f"{dname} = {code}")
                    code = dname
                env[dim] = VarBind(code, ext_ivs[lead + axis])
        dims = self.dims_of(buf, env, fn)
        vname = self.fresh(buf.name)
        tup = lambda items: "(" + "".join(f"{i}, " for i in items) + ")"  # noqa: E731
        fn.emit(
            f"{vname} = _region({src_bind.name}, {tup(mins)}, {tup(exts)}, {src.name!r}, {buf.name!r}, "
            f"{tup(c for c, _ in dims)}, {block!r})"
        )
        for axis, stride in enumerate(buf.strides):
            if isinstance(stride, E.Var) and stride not in env:
                sname = self.fresh(stride.name)
                fn.emit(f"{sname} = {vname}.strides[{axis}] // {vname}.itemsize")
                env[stride] = VarBind(sname, dtype_range(stride.dtype))
        if isinstance(buf.elem_offset, E.Var) and buf.elem_offset not in env:
            oname = self.fresh(buf.elem_offset.name)
            fn.emit(f"{oname} = _elem_offset({vname})")
            env[buf.elem_offset] = VarBind(oname, dtype_range(buf.elem_offset.dtype))
        env[buf] = BufBind(vname, buf, dims, (vname,) + tuple(c for c, _ in dims if is_name(c)))

    def stmt_BufferStore(self, stmt: S.BufferStore, env: Env, fn: Fn, block: str) -> None:
        bind = self.buffer(stmt.buffer, env, block)
        root = stmt.buffer
        while root in self.alias:
            root = self.alias[root]
        self.written.add(root)
        value, _ = self.expr(stmt.value, env, fn, block=block)
        value = self.convert(value, stmt.value.dtype, stmt.buffer.dtype)
        idx_codes, checks = self.indices(stmt.indices, bind, env, fn, block)
        target = f"{bind.name}[{index_tuple(idx_codes)}]"
        if checks:
            tmps = [self.tmp() for _ in idx_codes]
            for t, c in zip(tmps, idx_codes):
                fn.emit(f"{t} = {c}")
            conds = " and ".join(f"0 <= {tmps[a]} < {d}" for a, d in checks)
            fn.emit(f"if not ({conds}):")
            fn.emit(f"    _oob('store', {stmt.buffer.name!r}, {block!r}, ({''.join(t + ', ' for t in tmps)}), {bind.name}.shape)")
            target = f"{bind.name}[{index_tuple(tmps)}]"
        fn.emit(f"{target} = {value}")

    def buffer(self, buf: E.Buffer, env: Env, block: str) -> BufBind:
        bind = env.get(buf)
        if bind is None:
            raise InterpreterError(
                f"block {block!r} accesses buffer {buf.name!r}, which is neither a parameter nor allocated "
                f"or matched in an enclosing block"
            )
        return bind

    def indices(self, indices: tuple[E.PrimExpr, ...], bind: BufBind, env: Env, fn: Fn,
                block: str) -> tuple[list[str], list[tuple[int, str]]]:
        """Index codes and the axes whose bounds cannot be proved statically."""
        if len(indices) != len(bind.dims):
            raise InterpreterError(
                f"block {block!r} indexes buffer {bind.buffer.name!r} with {len(indices)} indices; it has "
                f"{len(bind.dims)} dimensions"
            )
        codes, checks = [], []
        for axis, (index, (dcode, div)) in enumerate(zip(indices, bind.dims)):
            if not is_integer_like(index.dtype):
                raise InterpreterError(
                    f"block {block!r} indexes buffer {bind.buffer.name!r} with a {index.dtype} expression"
                )
            code, iv = self.expr(index, env, fn, block=block)
            codes.append(code)
            if iv is None or div is None or iv[0] < 0 or iv[1] >= div[0]:
                checks.append((axis, dcode))
        return codes, checks

    # ---- expressions --------------------------------------------------------------------
    def expr(self, e: E.PrimExpr, env: Env, fn: Fn, depth: int = 0, block: str = "root") -> tuple[str, Interval | None]:
        """Python code computing `e` and, for integer-like dtypes, an interval holding every
        value it can take (None when unknown or not an integer)."""
        if depth > _MAX_EXPR_DEPTH:
            args = self.scope_names(env)
            helper = Fn(self.fresh("_expr"), args)
            self.fns.append(helper)
            code, iv = self.expr(e, env, helper, 0, block)
            helper.emit(f"return {code}")
            return f"{helper.name}({', '.join(args)})", iv
        method = getattr(self, f"expr_{type(e).__name__}", None)
        if method is not None:
            result: tuple[str, Interval | None] = method(e, env, fn, depth + 1, block)
            return result
        if not isinstance(e, E.CmpOp):
            raise InterpreterError(f"the interpreter does not support expression {type(e).__name__}")
        return self.expr_CmpOp(e, env, fn, depth + 1, block)

    def expr_IntImm(self, e: E.IntImm, env: Env, fn: Fn, depth: int, block: str) -> tuple[str, Interval | None]:
        if e.dtype == "bool":
            truth = int(bool(e.value))
            return ("True" if truth else "False"), (truth, truth)
        if is_float(e.dtype):
            return self.const(e.dtype, float(e.value)), None
        return (str(e.value) if e.value >= 0 else f"({e.value})"), (e.value, e.value)

    def expr_FloatImm(self, e: E.FloatImm, env: Env, fn: Fn, depth: int, block: str) -> tuple[str, Interval | None]:
        if is_integer_like(e.dtype):
            v = int(e.value)
            return str(v) if v >= 0 else f"({v})", (v, v)
        return self.const(e.dtype, e.value), None

    def expr_StringImm(self, e: E.StringImm, env: Env, fn: Fn, depth: int, block: str) -> tuple[str, Interval | None]:
        return repr(e.value), None

    def expr_Var(self, e: E.Var, env: Env, fn: Fn, depth: int, block: str) -> tuple[str, Interval | None]:
        bind = env.get(e)
        if not isinstance(bind, VarBind):
            raise InterpreterError(f"variable {e.name!r} is used in block {block!r} but never bound")
        return bind.name, bind.interval

    def wrap(self, code: str, interval: Interval | None, dtype: str) -> tuple[str, Interval]:
        """Reduce an integer result to `dtype`'s width unless its interval proves it fits."""
        lo, hi = dtype_range(dtype)
        if interval is not None and lo <= interval[0] and interval[1] <= hi:
            return code, interval
        if dtype == "bool":
            return f"(({code}) != 0)", (0, 1)
        mask = (1 << bits(dtype)) - 1
        if is_uint(dtype):
            return f"(({code}) & {mask})", (lo, hi)
        return f"(((({code}) + {-lo}) & {mask}) - {-lo})", (lo, hi)

    def arith_float(self, code: str, e: E.BinaryOp) -> str:
        if e.dtype == "bfloat16":
            return f"_bf16({code})"
        if e.a.dtype != e.dtype or e.b.dtype != e.dtype:
            return f"{self.float_ctor(e.dtype)}({code})"
        return code

    def operands(self, e: E.BinaryOp, env: Env, fn: Fn, depth: int, block: str):
        a, ai = self.expr(e.a, env, fn, depth, block)
        b, bi = self.expr(e.b, env, fn, depth, block)
        return a, ai, b, bi

    def expr_Add(self, e: E.Add, env: Env, fn: Fn, depth: int, block: str) -> tuple[str, Interval | None]:
        a, ai, b, bi = self.operands(e, env, fn, depth, block)
        if is_integer_like(e.dtype):
            return self.wrap(f"({a} + {b})", iv_add(ai, bi), e.dtype)
        return self.arith_float(f"({a} + {b})", e), None

    def expr_Sub(self, e: E.Sub, env: Env, fn: Fn, depth: int, block: str) -> tuple[str, Interval | None]:
        a, ai, b, bi = self.operands(e, env, fn, depth, block)
        if is_integer_like(e.dtype):
            return self.wrap(f"({a} - {b})", iv_sub(ai, bi), e.dtype)
        return self.arith_float(f"({a} - {b})", e), None

    def expr_Mul(self, e: E.Mul, env: Env, fn: Fn, depth: int, block: str) -> tuple[str, Interval | None]:
        a, ai, b, bi = self.operands(e, env, fn, depth, block)
        if is_integer_like(e.dtype):
            return self.wrap(f"({a} * {b})", iv_mul(ai, bi), e.dtype)
        return self.arith_float(f"({a} * {b})", e), None

    def expr_Div(self, e: E.Div, env: Env, fn: Fn, depth: int, block: str) -> tuple[str, Interval | None]:
        a, ai, b, bi = self.operands(e, env, fn, depth, block)
        if is_integer_like(e.dtype):
            iv = iv_trunc_div(ai, bi)
            if ai and bi and ai[0] >= 0 and bi[0] > 0:
                return self.wrap(f"({a} // {b})", iv, e.dtype)
            return self.wrap(f"_tdiv({a}, {b})", iv, e.dtype)
        return self.arith_float(f"({a} / {b})", e), None

    def expr_Mod(self, e: E.Mod, env: Env, fn: Fn, depth: int, block: str) -> tuple[str, Interval | None]:
        a, ai, b, bi = self.operands(e, env, fn, depth, block)
        if is_integer_like(e.dtype):
            iv = iv_trunc_mod(ai, bi)
            if ai and bi and ai[0] >= 0 and bi[0] > 0:
                return self.wrap(f"({a} % {b})", iv, e.dtype)
            return self.wrap(f"_tmod({a}, {b})", iv, e.dtype)
        return self.arith_float(f"np.fmod({a}, {b})", e), None

    def expr_FloorDiv(self, e: E.FloorDiv, env: Env, fn: Fn, depth: int, block: str) -> tuple[str, Interval | None]:
        a, ai, b, bi = self.operands(e, env, fn, depth, block)
        if is_integer_like(e.dtype):
            return self.wrap(f"({a} // {b})", iv_floor_div(ai, bi), e.dtype)
        return self.arith_float(f"np.floor({a} / {b})", e), None

    def expr_FloorMod(self, e: E.FloorMod, env: Env, fn: Fn, depth: int, block: str) -> tuple[str, Interval | None]:
        a, ai, b, bi = self.operands(e, env, fn, depth, block)
        if is_integer_like(e.dtype):
            return self.wrap(f"({a} % {b})", iv_floor_mod(ai, bi), e.dtype)
        t1, t2 = self.tmp(), self.tmp()
        return self.arith_float(f"(({t1} := {a}) - np.floor({t1} / ({t2} := {b})) * {t2})", e), None

    def expr_Min(self, e: E.Min, env: Env, fn: Fn, depth: int, block: str) -> tuple[str, Interval | None]:
        a, ai, b, bi = self.operands(e, env, fn, depth, block)
        ta, tb = self.tmp(), self.tmp()
        code = f"({ta} if ({ta} := {a}) < ({tb} := {b}) else {tb})"
        if is_integer_like(e.dtype):
            return self.wrap(code, iv_min(ai, bi), e.dtype)
        return self.arith_float(code, e), None

    def expr_Max(self, e: E.Max, env: Env, fn: Fn, depth: int, block: str) -> tuple[str, Interval | None]:
        a, ai, b, bi = self.operands(e, env, fn, depth, block)
        ta, tb = self.tmp(), self.tmp()
        code = f"({ta} if ({ta} := {a}) > ({tb} := {b}) else {tb})"
        if is_integer_like(e.dtype):
            return self.wrap(code, iv_max(ai, bi), e.dtype)
        return self.arith_float(code, e), None

    def expr_CmpOp(self, e: E.CmpOp, env: Env, fn: Fn, depth: int, block: str) -> tuple[str, Interval | None]:
        a, _, b, _ = self.operands(e, env, fn, depth, block)
        kind = type(e).__name__
        if kind == "And":
            return f"({a} and {b})", (0, 1)
        if kind == "Or":
            return f"({a} or {b})", (0, 1)
        op = CMP_OPS.get(kind)
        if op is None:
            raise InterpreterError(f"the interpreter does not support comparison {kind}")
        return f"({a} {op} {b})", (0, 1)

    def expr_Not(self, e: E.Not, env: Env, fn: Fn, depth: int, block: str) -> tuple[str, Interval | None]:
        a, _ = self.expr(e.a, env, fn, depth, block)
        return f"(not {a})", (0, 1)

    def expr_Select(self, e: E.Select, env: Env, fn: Fn, depth: int, block: str) -> tuple[str, Interval | None]:
        c, _ = self.expr(e.condition, env, fn, depth, block)
        t, ti = self.expr(e.true_value, env, fn, depth, block)
        f, fi = self.expr(e.false_value, env, fn, depth, block)
        return f"_select({c}, {t}, {f})", union(ti, fi)

    def expr_Cast(self, e: E.Cast, env: Env, fn: Fn, depth: int, block: str) -> tuple[str, Interval | None]:
        code, iv = self.expr(e.value, env, fn, depth, block)
        return self.cast(code, iv, e.value.dtype, e.dtype)

    def cast(self, code: str, iv: Interval | None, src: str, dst: str) -> tuple[str, Interval | None]:
        if src == dst:
            return code, iv
        if dst == "bool":
            return f"bool({code})", (0, 1)
        if is_integer_like(dst):
            if is_integer_like(src):
                if src == "bool":
                    code = f"int({code})"
                return self.wrap(code, iv, dst)
            if not is_float(src):
                raise InterpreterError(f"cannot cast {src} to {dst}")
            conv = self.global_obj("f2i", make_f2i(dst))
            return f"{conv}({code})", dtype_range(dst)
        if is_float(dst):
            return f"{self.float_ctor(dst)}({code})", None
        raise InterpreterError(f"cannot cast {src} to {dst}")

    def convert(self, code: str, src: str, dst: str) -> str:
        """A stored value must have the buffer's dtype (TVM's IR guarantees it; be lenient)."""
        if src == dst:
            return code
        return self.cast(code, dtype_range(src) if is_integer_like(src) else None, src, dst)[0]

    def expr_BufferLoad(self, e: E.BufferLoad, env: Env, fn: Fn, depth: int, block: str) -> tuple[str, Interval | None]:
        bind = self.buffer(e.buffer, env, block)
        idx, checks = self.indices(e.indices, bind, env, fn, block)
        if checks:
            tmps = [self.tmp() for _ in idx]
            assigns = "(" + "".join(f"({t} := {c}), " for t, c in zip(tmps, idx)) + ")"
            conds = " and ".join(f"0 <= {tmps[a]} < {d}" for a, d in checks)
            oob = f"_oob('load', {e.buffer.name!r}, {block!r}, ({''.join(t + ', ' for t in tmps)}), {bind.name}.shape)"
            code = f"({bind.name}[{index_tuple(tmps)}] if {assigns} and {conds} else {oob})"
        else:
            code = f"{bind.name}[{index_tuple(idx)}]"
        if e.dtype == "bool":
            return f"bool({code})", (0, 1)
        if is_integer_like(e.dtype):
            return f"int({code})", dtype_range(e.dtype)
        return code, None

    def expr_Call(self, e: E.Call, env: Env, fn: Fn, depth: int, block: str) -> tuple[str, Interval | None]:
        op = e.op[4:] if e.op.startswith("tir.") else e.op
        args = e.args
        if op == "if_then_else":
            expect_args(e, op, 3, block)
            c, _ = self.expr(args[0], env, fn, depth, block)
            t, ti = self.expr(args[1], env, fn, depth, block)
            f, fi = self.expr(args[2], env, fn, depth, block)
            return f"({t} if {c} else {f})", union(ti, fi)
        if op in ("max_value", "min_value"):
            limit = value_limit(e.dtype, upper=op == "max_value")
            if isinstance(limit, int):
                return (str(limit) if limit >= 0 else f"({limit})"), (limit, limit)
            return self.const(e.dtype, limit), None
        if op in ("infinity", "inf"):
            return self.const(e.dtype, math.inf), None
        if op == "likely":
            expect_args(e, op, 1, block)
            return self.expr(args[0], env, fn, depth, block)
        if op in ("isnan", "isinf", "isfinite"):
            expect_args(e, op, 1, block)
            a, _ = self.expr(args[0], env, fn, depth, block)
            if not is_float(args[0].dtype):
                truth = int(op == "isfinite")
                return ("True" if truth else "False"), (truth, truth)
            ufunc = self.global_obj(op, getattr(np, op))
            return f"bool({ufunc}({a}))", (0, 1)
        if op in ("fabs", "abs"):
            expect_args(e, op, 1, block)
            a, ai = self.expr(args[0], env, fn, depth, block)
            if is_integer_like(e.dtype):
                return self.wrap(f"abs({a})", iv_abs(ai), e.dtype)
            return self.call_result(f"abs({a})", args[0].dtype, e.dtype), None
        if op in UNARY_FLOAT_OPS:
            expect_args(e, op, 1, block)
            a, ai = self.expr(args[0], env, fn, depth, block)
            if op in ROUNDING_OPS and is_integer_like(args[0].dtype):
                return self.cast(a, ai, args[0].dtype, e.dtype)
            ufunc = self.global_obj(op, UNARY_FLOAT_OPS[op])
            if is_integer_like(e.dtype):
                raise InterpreterError(f"op {op!r} in block {block!r} must have a float dtype, not {e.dtype}")
            arg_code = a if is_float(args[0].dtype) else f"{self.float_ctor(e.dtype)}({a})"
            src = args[0].dtype if is_float(args[0].dtype) else e.dtype
            return self.call_result(f"{ufunc}({arg_code})", src, e.dtype), None
        if op in BINARY_FLOAT_OPS:
            expect_args(e, op, 2, block)
            a, _ = self.expr(args[0], env, fn, depth, block)
            b, _ = self.expr(args[1], env, fn, depth, block)
            if is_integer_like(e.dtype):
                if op == "pow":
                    return self.wrap(f"({a} ** {b})", None, e.dtype)
                if op == "fmod":
                    return self.wrap(f"_tmod({a}, {b})", None, e.dtype)
                raise InterpreterError(f"op {op!r} in block {block!r} must have a float dtype, not {e.dtype}")
            ufunc = self.global_obj(op, BINARY_FLOAT_OPS[op])
            if not is_float(args[0].dtype):
                a = f"{self.float_ctor(e.dtype)}({a})"
            return self.call_result(f"{ufunc}({a}, {b})", e.dtype if not is_float(args[0].dtype) else args[0].dtype, e.dtype), None
        if op in BITWISE_OPS:
            expect_args(e, op, 2, block)
            a, _ = self.expr(args[0], env, fn, depth, block)
            b, _ = self.expr(args[1], env, fn, depth, block)
            if not is_integer_like(e.dtype):
                raise InterpreterError(f"op {op!r} in block {block!r} needs integer operands, not {e.dtype}")
            return self.wrap(f"({a} {BITWISE_OPS[op]} {b})", None, e.dtype)
        if op == "bitwise_not":
            expect_args(e, op, 1, block)
            a, _ = self.expr(args[0], env, fn, depth, block)
            return self.wrap(f"(~{a})", None, e.dtype)
        raise InterpreterError(f"the interpreter does not support op {e.op!r} (in block {block!r})")

    def call_result(self, code: str, src: str, dst: str) -> str:
        if dst == "bfloat16":
            return f"_bf16({code})"
        if src != dst:
            return f"{self.float_ctor(dst)}({code})"
        return code
