"""Expression emission (a mixin of the emitter): arithmetic with TVM's semantics (floor and
truncating division, nsw on signed integers, fast-math flags on floats), comparisons, casts,
select and lazy if_then_else, math intrinsics and libm calls, extern calls; scalar or vector
operands alike (a scalar meeting a vector is broadcast)."""

from __future__ import annotations

import math
from typing import Any

import llvmlite.ir as ir

from msdb.ir import expr as E
from msdb.ir.arith.limits import wrap
from msdb.ir.dtype import is_float, is_int
from msdb.tuner.codegen.analysis import EXTERN_CALLS, expr_info, has_load, speculatable
from msdb.tuner.codegen.errors import CodegenError
from msdb.tuner.codegen.rational import EXP, RATIONAL, ExpPolynomial, OddRational
from msdb.tuner.codegen.state import FnState
from msdb.tuner.codegen.types import (
    I1, I32, VOID, common_dtype, const, dtype_bits, fold_cast, int_lanes, limit_const, scalar_type, signed,
)

_LLVM_UNARY = {
    "exp": "exp", "exp2": "exp2", "log": "log", "log2": "log2", "log10": "log10", "sqrt": "sqrt",
    "fabs": "fabs", "floor": "floor", "ceil": "ceil", "trunc": "trunc", "round": "nearbyint",
    "nearbyint": "nearbyint", "sin": "sin", "cos": "cos",
}
_LLVM_BINARY = {"pow": "pow", "copysign": "copysign"}
_LIBM_UNARY = frozenset(["tan", "tanh", "sinh", "cosh", "asin", "acos", "atan", "asinh", "acosh",
                         "atanh", "erf", "log1p", "expm1"])
_LIBM_BINARY = frozenset(["atan2", "hypot", "fmod", "nextafter"])



def _small_integer_power(e: E.Call) -> int | None:
    """n when `e` is `pow(x, n.0)` with a constant n of 1 to 4 (products within an ulp or two
    of libm's pow), else None."""
    exponent = e.args[1] if len(e.args) == 2 else None
    value = getattr(exponent, "value", None) if isinstance(exponent, (E.FloatImm, E.IntImm)) else None
    if isinstance(value, (int, float)) and float(value) in (1.0, 2.0, 3.0, 4.0):
        return int(value)
    return None


class ExprEmitter:
    """Mixin of `emit._Emitter`: needs `flags`, `_info`, `_speculatable`, `_keep`, `_declare`,
    `_intrinsic`, `bound` and `load` from it."""

    flags: tuple[str, ...]
    _info: dict[int, tuple[bool, frozenset]]
    _speculatable: dict[int, bool]
    _keep: list[Any]

    # provided by `emit._Emitter`
    def _declare(self, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
        raise NotImplementedError

    def _intrinsic(self, base: str, t: ir.Type, nargs: int) -> ir.Function:
        raise NotImplementedError

    def bound(self, fn: FnState, e: E.PrimExpr) -> tuple[int, int]:
        raise NotImplementedError

    def load(self, fn: FnState, e: E.BufferLoad) -> ir.Value:
        raise NotImplementedError

    def expr(self, fn: FnState, e: E.PrimExpr) -> ir.Value:
        """Emit an expression; pure compound expressions are memoized per function while the
        variables they read keep their bindings and their block still dominates (unrolled code
        re-evaluates the same index arithmetic many times)."""
        if isinstance(e, E.Var) or isinstance(e, E.IntImm) or isinstance(e, E.FloatImm):
            return self._expr(fn, e)
        info = self._info.get(id(e))
        if info is None:
            info = expr_info(e)
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

    def _expr(self, fn: FnState, e: E.PrimExpr) -> ir.Value:
        t = type(e)
        if isinstance(e, E.Var):
            vec = fn.vec
            if vec is not None and e is vec.var:
                return vec.base if vec.lane0 else vec.vector
            try:
                return fn.env[e]
            except KeyError:
                raise CodegenError(f"variable {e.name} is used outside its scope") from None
        if isinstance(e, E.IntImm):
            return const(scalar_type(e.dtype), int(e.value))
        if isinstance(e, E.FloatImm):
            return const(scalar_type(e.dtype), float(e.value))
        if isinstance(e, E.BufferLoad):
            return self.load(fn, e)
        if isinstance(e, E.CmpOp):
            return self.compare(fn, e)
        if isinstance(e, E.BinaryOp):
            return self.arith(fn, e)
        if isinstance(e, E.Not):
            a = self.expr(fn, e.a)
            return self.not_(fn, a)
        if isinstance(e, E.Select):
            c = self.expr(fn, e.condition)
            if isinstance(c, ir.Constant) and not isinstance(c.type, ir.VectorType):
                # a condition unrolling made constant: only the taken value is emitted, as
                # `if_then_else` does, not every case of a chain of them
                taken = e.true_value if c.constant else e.false_value
                return self.cast_value(fn, self.expr(fn, taken), taken.dtype, e.dtype)
            tv = self.expr(fn, e.true_value)
            fv = self.expr(fn, e.false_value)
            fv = self.cast_value(fn, fv, e.false_value.dtype, e.dtype)
            tv = self.cast_value(fn, tv, e.true_value.dtype, e.dtype)
            return self.select(fn, c, tv, fv)
        if isinstance(e, E.Cast):
            return self.cast_value(fn, self.expr(fn, e.value), e.value.dtype, e.dtype)
        if isinstance(e, E.Call):
            return self.call(fn, e)
        if isinstance(e, E.StringImm):
            raise CodegenError(f"string {e.value!r} cannot be a value in generated code")
        raise CodegenError(f"cannot emit expression {t.__name__}")

    # ---- vector helpers ----
    def splat(self, fn: FnState, v: ir.Value, lanes: int) -> ir.Value:
        vt = ir.VectorType(v.type, lanes)
        if isinstance(v, ir.Constant):
            return const(vt, [v.constant] * lanes)
        b = fn.builder
        one = b.insert_element(ir.Constant(vt, ir.Undefined), v, const(I32, 0))
        return b.shuffle_vector(one, ir.Constant(vt, ir.Undefined), const(ir.VectorType(I32, lanes), [0] * lanes))

    def unify(self, fn: FnState, a: ir.Value, b: ir.Value) -> tuple[ir.Value, ir.Value]:
        av, bv = isinstance(a.type, ir.VectorType), isinstance(b.type, ir.VectorType)
        if av and not bv:
            b = self.splat(fn, b, a.type.count)
        elif bv and not av:
            a = self.splat(fn, a, b.type.count)
        return a, b

    def const_like(self, v: ir.Value, value: Any) -> ir.Value:
        t = v.type
        if isinstance(t, ir.VectorType):
            return const(t, [value] * t.count)
        return const(t, value)

    # ---- arithmetic ----
    def arith(self, fn: FnState, e: E.BinaryOp) -> ir.Value:
        dtype = e.dtype
        a = self.cast_value(fn, self.expr(fn, e.a), e.a.dtype, dtype)
        b = self.cast_value(fn, self.expr(fn, e.b), e.b.dtype, dtype)
        a, b = self.unify(fn, a, b)
        t = type(e)
        if is_float(dtype):
            return self.float_arith(fn, t, a, b)
        if dtype == "bool":
            raise CodegenError(f"{t.__name__} on bool operands")
        if isinstance(e, E.Add):
            return self.int_op(fn, "add", a, b, dtype)
        if isinstance(e, E.Sub):
            return self.int_op(fn, "sub", a, b, dtype)
        if isinstance(e, E.Mul):
            return self.int_op(fn, "mul", a, b, dtype)
        if isinstance(e, E.Min) or isinstance(e, E.Max):
            return self.int_minmax(fn, isinstance(e, E.Min), a, b, dtype)
        if (isinstance(e, E.Div) or isinstance(e, E.Mod) or isinstance(e, E.FloorDiv) or isinstance(e, E.FloorMod)) and fn.vec is not None \
                and fn.vec.mask is not None and not isinstance(b, ir.Constant):
            # inactive lanes must not trap on a zero divisor
            mask = fn.vec.mask
            if not isinstance(b.type, ir.VectorType):
                b = self.splat(fn, b, mask.type.count)
                a = self.splat(fn, a, mask.type.count) if not isinstance(a.type, ir.VectorType) else a
            b = fn.builder.select(mask, b, self.const_like(b, 1))
        if isinstance(e, E.Div) or isinstance(e, E.Mod):
            return self.int_truncdiv(fn, isinstance(e, E.Div), a, b, dtype)
        if isinstance(e, E.FloorDiv) or isinstance(e, E.FloorMod):
            return self.int_floordiv(fn, isinstance(e, E.FloorDiv), e, a, b, dtype)
        raise CodegenError(f"cannot emit {t.__name__}")

    def _fused_multiply_add(self, fn: FnState, t: type, a: ir.Value, b: ir.Value) -> ir.Value | None:
        """`x * y + b` (and `x * y - b`, `a + x * y`, `a - x * y`) as one `llvm.fmuladd`, the first product
        operand taken when both are: the contraction is then decided here, once per expression,
        not by LLVM's instruction selection, which fused a product in the unrolled scalar code
        of a batch-norm and left it unfused in the vectorized body of the same function built
        with a parallel loop (one ulp apart between a one- and a two-thread build on AVX-512)."""
        bld = fn.builder

        def product(value: ir.Value) -> ir.Instruction | None:
            return value if isinstance(value, ir.Instruction) and value.opname == "fmul" else None

        first = product(a)
        if first is not None:
            addend = b if t is E.Add else bld.fneg(b)
            x, y = first.operands
        else:
            second = product(b)
            if second is None:
                return None
            addend = a
            x, y = second.operands
            if t is E.Sub:  # a - x * y
                x = bld.fneg(x)
        return self.multiply_add(fn, x, y, addend)

    def multiply_add(self, fn: FnState, a: ir.Value, b: ir.Value, c: ir.Value) -> ir.Value:
        """`a * b + c` of the inline math (Horner steps): one `llvm.fmuladd` with `contract`,
        for the reason `_fused_multiply_add` gives, else a product and a sum."""
        bld, fl = fn.builder, self.flags
        if "contract" in fl:
            return bld.call(self._intrinsic("fmuladd", a.type, 3), [a, b, c])
        return bld.fadd(bld.fmul(a, b, flags=fl), c, flags=fl)

    def float_arith(self, fn: FnState, t: type, a: ir.Value, b: ir.Value) -> ir.Value:
        bld = fn.builder
        fl = self.flags
        element = a.type.element if isinstance(a.type, ir.VectorType) else a.type
        if isinstance(element, ir.HalfType) and "contract" in fl:
            # float16 rounds after every operation (as the interpreter and numpy do); a CPU
            # with native half FMA (AVX512-FP16) would otherwise fuse x*y+z with one rounding
            fl = tuple(f for f in fl if f != "contract")
        if "contract" in fl and t in (E.Add, E.Sub):
            fused = self._fused_multiply_add(fn, t, a, b)
            if fused is not None:
                return fused
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

    def int_op(self, fn: FnState, op: str, a: ir.Value, b: ir.Value, dtype: str) -> ir.Value:
        """add/sub/mul with constant folding (unrolled code is mostly constant arithmetic), of
        vectors too: a vectorized loop's lane indices in unrolled code are constants, and as
        instructions they were most of the text LLVM parsed for a heavily unrolled conv."""
        ca = a.constant if isinstance(a, ir.Constant) and isinstance(a.type, ir.IntType) else None
        cb = b.constant if isinstance(b, ir.Constant) and isinstance(b.type, ir.IntType) else None
        if isinstance(ca, int) and isinstance(cb, int):
            return const(a.type, self._folded(op, ca, cb, dtype))
        la, lb = int_lanes(a), int_lanes(b)
        if la is not None and lb is not None:
            return const(a.type, [self._folded(op, x, y, dtype) for x, y in zip(la, lb)])
        if la is not None and len(set(la)) == 1:
            ca = la[0]
        if lb is not None and len(set(lb)) == 1:
            cb = lb[0]
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
        flags = ["nsw"] if signed(dtype) else []
        return getattr(fn.builder, op)(a, b, flags=flags)

    @staticmethod
    def _folded(op: str, x: int, y: int, dtype: str) -> int:
        value = x + y if op == "add" else x - y if op == "sub" else x * y
        return wrap(value, dtype) if dtype != "bool" else value & 1

    def int_minmax(self, fn: FnState, is_min: bool, a: ir.Value, b: ir.Value, dtype: str) -> ir.Value:
        ca = a.constant if isinstance(a, ir.Constant) else None
        cb = b.constant if isinstance(b, ir.Constant) else None
        if isinstance(ca, int) and isinstance(cb, int):
            return a if ((ca <= cb) == is_min) else b
        op = "<" if is_min else ">"
        cmp = fn.builder.icmp_signed(op, a, b) if signed(dtype) else fn.builder.icmp_unsigned(op, a, b)
        return fn.builder.select(cmp, a, b)

    def int_truncdiv(self, fn: FnState, is_div: bool, a: ir.Value, b: ir.Value, dtype: str) -> ir.Value:
        ca = a.constant if isinstance(a, ir.Constant) else None
        cb = b.constant if isinstance(b, ir.Constant) else None
        if isinstance(ca, int) and isinstance(cb, int) and cb != 0:
            q = abs(ca) // abs(cb) * (1 if (ca >= 0) == (cb >= 0) else -1)
            return ir.Constant(a.type, q if is_div else ca - q * cb)
        bld = fn.builder
        if signed(dtype):
            return bld.sdiv(a, b) if is_div else bld.srem(a, b)
        return bld.udiv(a, b) if is_div else bld.urem(a, b)

    def int_floordiv(self, fn: FnState, is_div: bool, e: E.BinaryOp, a: ir.Value, b: ir.Value, dtype: str) -> ir.Value:
        bld = fn.builder
        ca = a.constant if isinstance(a, ir.Constant) else None
        cb = b.constant if isinstance(b, ir.Constant) else None
        if isinstance(ca, int) and isinstance(cb, int) and cb != 0:
            return ir.Constant(a.type, ca // cb if is_div else ca % cb)
        if not signed(dtype):
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
    def compare(self, fn: FnState, e: E.CmpOp) -> ir.Value:
        t = type(e)
        if isinstance(e, E.And) or isinstance(e, E.Or):
            a = self.to_bool(fn, self.expr(fn, e.a), e.a.dtype)
            b = self.to_bool(fn, self.expr(fn, e.b), e.b.dtype)
            ca = a.constant if isinstance(a, ir.Constant) else None
            cb = b.constant if isinstance(b, ir.Constant) else None
            if isinstance(e, E.And):
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
        dtype = common_dtype(e.a.dtype, e.b.dtype)
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
        if signed(dtype):
            return bld.icmp_signed(op, a, b)
        return bld.icmp_unsigned(op, a, b)

    def not_(self, fn: FnState, a: ir.Value) -> ir.Value:
        if isinstance(a, ir.Constant) and not isinstance(a.type, ir.VectorType):
            return ir.Constant(I1, int(not a.constant))
        return fn.builder.xor(a, self.const_like(a, 1))

    def to_bool(self, fn: FnState, v: ir.Value, dtype: str) -> ir.Value:
        return v if dtype == "bool" else self.cast_value(fn, v, dtype, "bool")

    def select(self, fn: FnState, c: ir.Value, t: ir.Value, f: ir.Value) -> ir.Value:
        if isinstance(c, ir.Constant) and not isinstance(c.type, ir.VectorType):
            return t if c.constant else f
        t, f = self.unify(fn, t, f)
        if isinstance(c.type, ir.VectorType) and not isinstance(t.type, ir.VectorType):
            t = self.splat(fn, t, c.type.count)
            f = self.splat(fn, f, c.type.count)
        return fn.builder.select(c, t, f)

    # ---- casts ----
    def cast_value(self, fn: FnState, v: ir.Value, src: str, dst: str) -> ir.Value:
        if src == dst:
            return v
        dst_t = scalar_type(dst)
        vt = v.type
        lanes = vt.count if isinstance(vt, ir.VectorType) else None
        target = ir.VectorType(dst_t, lanes) if lanes else dst_t
        bld = fn.builder
        if isinstance(v, ir.Constant) and lanes is None and isinstance(v.constant, (int, float)):
            return fold_cast(v.constant, src, dst, dst_t)
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
    def call(self, fn: FnState, e: E.Call) -> ir.Value:
        op = e.op[4:] if e.op.startswith("tir.") else e.op
        args = e.args
        bld = fn.builder
        if op == "if_then_else":
            return self.if_then_else(fn, e)
        if e.op in EXTERN_CALLS:
            return self.extern_call(fn, e)
        if op in ("likely", "assume"):
            return self.expr(fn, args[0])
        if op in ("max_value", "min_value"):
            return limit_const(e.dtype, op == "max_value")
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
                return bld.ashr(a, b) if signed(e.dtype) else bld.lshr(a, b)
            name = {"bitwise_and": "and_", "bitwise_or": "or_", "bitwise_xor": "xor", "shift_left": "shl"}[op]
            return getattr(bld, name)(a, b)
        if op == "bitwise_not":
            a = self.cast_value(fn, self.expr(fn, args[0]), args[0].dtype, e.dtype)
            return bld.xor(a, self.const_like(a, -1))
        if op in ("abs", "fabs") and not is_float(e.dtype):
            a = self.cast_value(fn, self.expr(fn, args[0]), args[0].dtype, e.dtype)
            if not signed(e.dtype):
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

    def extern_call(self, fn: FnState, e: E.Call) -> ir.Value:
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

    def float_call(self, fn: FnState, op: str, e: E.Call) -> ir.Value:
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
        power = _small_integer_power(e) if op == "pow" else None
        if power is not None:
            # x ** 2, 3, 4 as products (GPT-2's GELU cubes its input): llvm.pow is a libm call
            # per vector lane, which keeps the epilogue of a matmul from vectorizing
            out = vals[0]
            for _ in range(power - 1):
                out = bld.fmul(out, vals[0], flags=fl)
        elif op == "exp" and work == "float32":
            out = self.exp_polynomial(fn, vals[0], EXP)
        elif op in _LLVM_UNARY:
            out = bld.call(self._intrinsic(_LLVM_UNARY[op], vals[0].type, 1), vals[:1])
        elif op in _LLVM_BINARY:
            out = bld.call(self._intrinsic(_LLVM_BINARY[op], vals[0].type, 2), vals[:2])
        elif op == "fma":
            out = bld.call(self._intrinsic("fma", vals[0].type, 3), vals[:3])
        elif op == "sigmoid":
            x = vals[0]
            neg = bld.fneg(x)
            ex = self.exp_polynomial(fn, neg, EXP) if work == "float32" else bld.call(self._intrinsic("exp", x.type, 1), [neg])
            one = self.const_like(x, 1.0)
            out = bld.fdiv(one, bld.fadd(one, ex, flags=fl), flags=fl)
        elif op == "rsqrt":
            x = vals[0]
            out = bld.fdiv(self.const_like(x, 1.0), bld.call(self._intrinsic("sqrt", x.type, 1), [x]), flags=fl)
        elif op == "exp10":
            x = vals[0]
            out = bld.call(self._intrinsic("pow", x.type, 2), [self.const_like(x, 10.0), x])
        elif op in RATIONAL and work == "float32":
            out = self.odd_rational(fn, vals[0], RATIONAL[op])
        elif op in _LIBM_UNARY or op in _LIBM_BINARY:
            out = self.libm(fn, op, vals, work)
        else:
            raise CodegenError(f"math call {op!r} is not supported by the CPU code generator")
        return self.cast_value(fn, out, work, dtype)

    def odd_rational(self, fn: FnState, x: ir.Value, f: OddRational) -> ir.Value:
        """`f` inline (`msdb.tuner.codegen.rational`): x clamped to the limit, x P(x^2) / Q(x^2)
        by Horner, clamped to [-1, 1]; ordered comparisons keep a NaN."""
        bld, fl = fn.builder, self.flags
        top, bottom = self.const_like(x, f.limit), self.const_like(x, -f.limit)
        x = bld.select(bld.fcmp_ordered(">", x, top), top, x)
        x = bld.select(bld.fcmp_ordered("<", x, bottom), bottom, x)
        t = bld.fmul(x, x, flags=fl)

        def horner(coefficients: tuple[float, ...]) -> ir.Value:
            acc = self.const_like(x, coefficients[-1])
            for c in reversed(coefficients[:-1]):
                acc = self.multiply_add(fn, acc, t, self.const_like(x, c))
            return acc

        out = bld.fdiv(bld.fmul(x, horner(f.p), flags=fl), horner(f.q), flags=fl)
        one, minus_one = self.const_like(x, 1.0), self.const_like(x, -1.0)
        out = bld.select(bld.fcmp_ordered(">", out, one), one, out)
        return bld.select(bld.fcmp_ordered("<", out, minus_one), minus_one, out)

    def exp_polynomial(self, fn: FnState, x: ir.Value, f: ExpPolynomial) -> ir.Value:
        """float32 `exp` inline (`msdb.tuner.codegen.rational`): x clamped, n = round(x / ln2),
        r = x - n ln2 in two steps, 1 + r + r^2 P(r) by Horner, times 2^n in two halves; a NaN
        input is returned as is. Below the clamp (exp rounds to 0 there) the result is 0 by a
        select, computed on x = 0: scaling down to 0 passes through denormal products, each a
        microcode assist on x86 (a BERT softmax's masked scores, -10000: 1.2 ms a call, not 0.15)."""
        bld, fl = fn.builder, self.flags
        top, bottom = self.const_like(x, f.high), self.const_like(x, f.low)
        zero = self.const_like(x, 0.0)
        below = bld.fcmp_ordered("<", x, bottom)
        xc = bld.select(bld.fcmp_ordered(">", x, top), top, x)
        xc = bld.select(below, zero, xc)
        n = bld.call(self._intrinsic("nearbyint", x.type, 1), [bld.fmul(xc, self.const_like(x, 1.4426950408889634))])
        r = bld.fsub(xc, bld.fmul(n, self.const_like(x, f.ln2_high), flags=fl), flags=fl)
        r = bld.fsub(r, bld.fmul(n, self.const_like(x, f.ln2_low), flags=fl), flags=fl)
        acc = self.const_like(x, f.p[-1])
        for c in reversed(f.p[:-1]):
            acc = self.multiply_add(fn, acc, r, self.const_like(x, c))
        y = bld.fadd(self.const_like(x, 1.0), self.multiply_add(fn, bld.fmul(r, r, flags=fl), acc, r), flags=fl)
        int_type = ir.VectorType(I32, x.type.count) if isinstance(x.type, ir.VectorType) else I32
        whole = bld.fptosi(n, int_type)
        half = bld.ashr(whole, self.const_like(whole, 1))
        out = y
        for part in (half, bld.sub(whole, half)):
            bits = bld.shl(bld.add(part, self.const_like(whole, 127)), self.const_like(whole, 23))
            out = bld.fmul(out, bld.bitcast(bits, x.type))  # no fast-math flags: it may overflow to inf
        return bld.select(bld.fcmp_unordered("uno", x, x), x, bld.select(below, zero, out))

    def within(self, fn: FnState, outer: ir.Value | None, cond: ir.Value) -> ir.Value:
        """The lanes of a vector mask `outer` (None: every lane) where `cond` holds too. A
        select, not an `and`: a padding lane of `cond` may be poison (it may compare a masked
        load's padding lane, `masked.MaskedMemory.load`), and `and` with false passes poison on
        where `select` gives false."""
        if outer is None:
            return cond
        return fn.builder.select(outer, cond, self.const_like(cond, 0))

    def libm(self, fn: FnState, op: str, vals: list[ir.Value], dtype: str) -> ir.Value:
        """A C math library call; vectors go lane by lane, the loop's lanes only (a padding
        lane may hold poison: `masked.MaskedMemory.load`)."""
        et = scalar_type(dtype)
        name = op + ("f" if dtype == "float32" else "")
        decl = self._declare(name, et, [et] * len(vals))
        bld = fn.builder
        t = vals[0].type
        if not isinstance(t, ir.VectorType):
            return bld.call(decl, vals)
        out = ir.Constant(t, ir.Undefined)
        vec = fn.vec
        lanes = vec.active if vec is not None and vec.lanes == t.count and 0 < vec.active < t.count else t.count
        for lane in range(lanes):
            idx = ir.Constant(I32, lane)
            lane_vals = [bld.extract_element(v, idx) for v in vals]
            out = bld.insert_element(out, bld.call(decl, lane_vals), idx)
        return out

    def arms_speculatable(self, e: E.Call) -> bool:
        """`analysis.speculatable` of an if_then_else's arms, cached per node (unrolled code
        emits the same node many times)."""
        hit = self._speculatable.get(id(e))
        if hit is None:
            hit = self._speculatable[id(e)] = speculatable(e.args[1:])
            self._keep.append(e)
        return hit

    def speculated_if_then_else(self, fn: FnState, e: E.Call, c: ir.Value) -> ir.Value:
        """Both arms evaluated and a select, no branch: each load of an arm reads its address
        only when the arm is taken (`FnState.guard`), else the buffer's first element. Padding
        inlined into a convolution is an `if_then_else` per input read; as branches, a heavily
        unrolled conv had hundreds of blocks, each recomputing its address arithmetic, and
        LLVM's GVN and loop vectorizer spent seconds on them, of a model's 30 s compile budget."""
        _, t_e, f_e = e.args
        outer = fn.guard
        bld = fn.builder
        try:
            fn.guard = c if outer is None else bld.and_(outer, c)
            tv = self.cast_value(fn, self.expr(fn, t_e), t_e.dtype, e.dtype)
            inverse = bld.xor(c, self.const_like(c, 1))
            fn.guard = inverse if outer is None else bld.and_(outer, inverse)
            fv = self.cast_value(fn, self.expr(fn, f_e), f_e.dtype, e.dtype)
        finally:
            fn.guard = outer
        return self.select(fn, c, tv, fv)

    def if_then_else(self, fn: FnState, e: E.Call) -> ir.Value:
        """Lazy: only the taken arm is evaluated (it may hold an access that is out of bounds
        when the condition is false, like padding), except lane-dependent conditions in vector
        code, whose arms the vector plan guarantees to be load-free."""
        cond_e, t_e, f_e = e.args
        c = self.to_bool(fn, self.expr(fn, cond_e), cond_e.dtype)
        if isinstance(c, ir.Constant) and not isinstance(c.type, ir.VectorType):
            chosen = t_e if c.constant else f_e
            return self.cast_value(fn, self.expr(fn, chosen), chosen.dtype, e.dtype)
        if isinstance(c.type, ir.VectorType):
            vec = fn.vec
            assert vec is not None
            outer, outer_predicated = vec.mask, vec.predicated
            bld = fn.builder
            try:  # each arm under its own mask: its loads touch memory only for its lanes
                vec.predicated = True
                vec.mask = self.within(fn, outer, c)
                tv = self.cast_value(fn, self.expr(fn, t_e), t_e.dtype, e.dtype)
                inverse = bld.xor(c, self.const_like(c, 1))
                vec.mask = self.within(fn, outer, inverse)
                fv = self.cast_value(fn, self.expr(fn, f_e), f_e.dtype, e.dtype)
            finally:
                vec.mask, vec.predicated = outer, outer_predicated
            return self.select(fn, c, tv, fv)
        if not (has_load([t_e]) or has_load([f_e])):
            tv = self.cast_value(fn, self.expr(fn, t_e), t_e.dtype, e.dtype)
            fv = self.cast_value(fn, self.expr(fn, f_e), f_e.dtype, e.dtype)
            return self.select(fn, c, tv, fv)
        if fn.vec is None and self.arms_speculatable(e):
            return self.speculated_if_then_else(fn, e, c)
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
