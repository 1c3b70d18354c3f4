"""CUDA C text of expressions, with TVM's semantics: floor division and modulo on integers
(plain `/` and `%` where both sides are proven non-negative, as TVM's LowerIntrin does), math
calls to CUDA's float/double functions (`expf`, `sqrtf`, `fmaxf`...), lazy `if_then_else` as
`?:`, casts as C casts (int8 as `signed char`).

Every sub-expression is parenthesized: the text is read by NVRTC, not by people.
"""

from __future__ import annotations

import math
from typing import Callable, Mapping

from msdb.ir import expr as E
from msdb.ir.arith import const_int_bound, simplify
from msdb.ir.arith.limits import value_limit
from msdb.ir.dtype import bits, is_float, is_int, is_uint
from msdb.tuner.codegen.analysis import flat_index
from msdb.tuner.codegen.errors import CodegenError

__all__ = ["c_type", "elem_bytes", "ExprPrinter", "float_literal"]

_C_TYPES = {
    "bool": "bool", "int8": "signed char", "uint8": "unsigned char", "int16": "short", "uint16": "unsigned short",
    "int32": "int", "uint32": "unsigned int", "int64": "long long", "uint64": "unsigned long long",
    "float32": "float", "float64": "double", "float16": "half",
}


def elem_bytes(dtype: str) -> int:
    """Bytes of one element in memory (bool as one byte, numpy's layout)."""
    return 1 if dtype == "bool" else max(1, bits(dtype) // 8)


def c_type(dtype: str) -> str:
    """The C type of a scalar TVM dtype."""
    try:
        return _C_TYPES[dtype]
    except KeyError:
        raise CodegenError(f"dtype {dtype!r} is not supported by the CUDA code generator "
                           "(scalar bool, int8..64, uint8..64, float16/32/64 are)") from None


def float_literal(value: float, dtype: str) -> str:
    """A C literal of `value` as `dtype` (infinities and NaN through bit patterns)."""
    if dtype == "float64":
        if math.isnan(value):
            return "__longlong_as_double(0x7ff8000000000000LL)"
        if math.isinf(value):
            return ("-" if value < 0 else "") + "__longlong_as_double(0x7ff0000000000000LL)"
        return repr(float(value))
    if math.isnan(value):
        text = "__int_as_float(0x7fc00000)"
    elif math.isinf(value):
        text = ("-" if value < 0 else "") + "__int_as_float(0x7f800000)"
    else:
        text = f"{float(value)!r}f"
    if dtype == "float16":
        return f"__float2half({text})"
    return text


_UNARY_F32 = {
    "exp": "expf", "exp2": "exp2f", "exp10": "exp10f", "log": "logf", "log2": "log2f", "log10": "log10f",
    "sqrt": "sqrtf", "rsqrt": "rsqrtf", "fabs": "fabsf", "abs": "fabsf", "floor": "floorf", "ceil": "ceilf",
    "trunc": "truncf", "round": "rintf", "nearbyint": "rintf", "sin": "sinf", "cos": "cosf", "tan": "tanf",
    "tanh": "tanhf", "sinh": "sinhf", "cosh": "coshf", "asin": "asinf", "acos": "acosf", "atan": "atanf",
    "asinh": "asinhf", "acosh": "acoshf", "atanh": "atanhf", "erf": "erff", "log1p": "log1pf", "expm1": "expm1f",
}
_BINARY_F32 = {"pow": "powf", "atan2": "atan2f", "hypot": "hypotf", "fmod": "fmodf", "copysign": "copysignf",
               "nextafter": "nextafterf"}


class ExprPrinter:
    """Prints expressions of one kernel; `names` maps variables to their C text and `ranges`
    bounds them (for the non-negative division rule)."""

    def __init__(self, names: Mapping[E.Var, str], ranges: Mapping[E.Var, E.Range],
                 buffer_name: Callable[[E.Buffer], str]) -> None:
        self.names = names
        self.ranges = ranges
        self.buffer_name = buffer_name

    def flat(self, buffer: E.Buffer, indices: tuple[E.PrimExpr, ...]) -> E.PrimExpr:
        return simplify(flat_index(buffer, indices))

    def access(self, buffer: E.Buffer, indices: tuple[E.PrimExpr, ...]) -> str:
        return f"{self.buffer_name(buffer)}[{self.expr(self.flat(buffer, indices))}]"

    def nonnegative(self, e: E.PrimExpr) -> bool:
        try:
            return const_int_bound(e, dict(self.ranges))[0] >= 0
        except Exception:  # an analysis gap only costs the faster division
            return False

    def expr(self, e: E.PrimExpr) -> str:
        if isinstance(e, E.Var):
            try:
                return self.names[e]
            except KeyError:
                raise CodegenError(f"variable {e.name} is used outside its scope in a CUDA kernel") from None
        if isinstance(e, E.IntImm):
            if e.dtype == "bool":
                return "true" if e.value else "false"
            if e.dtype == "int32":
                return str(int(e.value)) if e.value != -(2**31) else "(-2147483647 - 1)"
            return f"(({c_type(e.dtype)}){int(e.value)}{'ULL' if is_uint(e.dtype) else 'LL'})"
        if isinstance(e, E.FloatImm):
            return float_literal(float(e.value), e.dtype)
        if isinstance(e, E.BufferLoad):
            return self.access(e.buffer, e.indices)
        if isinstance(e, E.Cast):
            return f"(({c_type(e.dtype)})({self.expr(e.value)}))"
        if isinstance(e, E.Not):
            return f"(!{self.expr(e.a)})"
        if isinstance(e, E.Select):
            return f"({self.expr(e.condition)} ? {self.expr(e.true_value)} : {self.expr(e.false_value)})"
        if isinstance(e, E.CmpOp) or isinstance(e, (E.And, E.Or)):
            sym = {E.EQ: "==", E.NE: "!=", E.LT: "<", E.LE: "<=", E.GT: ">", E.GE: ">=", E.And: "&&",
                   E.Or: "||"}[type(e)]
            return f"({self.expr(e.a)} {sym} {self.expr(e.b)})"
        if isinstance(e, E.BinaryOp):
            return self.binary(e)
        if isinstance(e, E.Call):
            return self.call(e)
        raise CodegenError(f"cannot print expression {type(e).__name__} as CUDA C")

    def binary(self, e: E.BinaryOp) -> str:
        a, b = self.expr(e.a), self.expr(e.b)
        t = type(e)
        if t in (E.Add, E.Sub, E.Mul):
            return f"({a} {'+' if t is E.Add else '-' if t is E.Sub else '*'} {b})"
        if t in (E.Min, E.Max):
            if e.dtype == "float32":
                return f"{'fminf' if t is E.Min else 'fmaxf'}({a}, {b})"
            if e.dtype == "float64":
                return f"{'fmin' if t is E.Min else 'fmax'}({a}, {b})"
            return f"{'min' if t is E.Min else 'max'}({a}, {b})"
        if is_float(e.dtype):
            if t in (E.Div, E.FloorDiv):
                out = f"({a} / {b})"
                return out if t is E.Div else f"{'floorf' if e.dtype == 'float32' else 'floor'}{out}"
            if t is E.FloorMod:
                fl = "floorf" if e.dtype == "float32" else "floor"
                return f"({a} - {fl}({a} / {b}) * {b})"
            if t is E.Mod:
                return f"{'fmodf' if e.dtype == 'float32' else 'fmod'}({a}, {b})"
        if t is E.Div:
            return f"({a} / {b})"
        if t is E.Mod:
            return f"({a} % {b})"
        if t in (E.FloorDiv, E.FloorMod):
            if is_uint(e.dtype) or (self.nonnegative(e.a) and self.nonnegative(e.b)):
                return f"({a} {'/' if t is E.FloorDiv else '%'} {b})"
            ct = c_type(e.dtype)
            helper = "msdb_floordiv" if t is E.FloorDiv else "msdb_floormod"
            return f"{helper}(({ct})({a}), ({ct})({b}))"
        raise CodegenError(f"cannot print {t.__name__} of {e.dtype} as CUDA C")

    def call(self, e: E.Call) -> str:
        op = e.op[4:] if e.op.startswith("tir.") else e.op
        args = e.args
        if op == "if_then_else":
            return f"({self.expr(args[0])} ? {self.expr(args[1])} : {self.expr(args[2])})"
        if op in ("likely", "assume"):
            return self.expr(args[0])
        if op in ("max_value", "min_value"):
            value = value_limit(e.dtype, op == "max_value")
            if is_float(e.dtype):
                return float_literal(float(value), e.dtype)
            return self.expr(E.IntImm(e.dtype, int(value)))
        if op in ("infinity", "inf"):
            return float_literal(math.inf, e.dtype)
        if op == "nan":
            return float_literal(math.nan, e.dtype)
        if op in ("bitwise_and", "bitwise_or", "bitwise_xor", "shift_left", "shift_right"):
            sym = {"bitwise_and": "&", "bitwise_or": "|", "bitwise_xor": "^", "shift_left": "<<",
                   "shift_right": ">>"}[op]
            return f"(({c_type(e.dtype)})({self.expr(args[0])}) {sym} ({c_type(e.dtype)})({self.expr(args[1])}))"
        if op == "bitwise_not":
            return f"(~({c_type(e.dtype)})({self.expr(args[0])}))"
        if op in ("call_extern", "call_pure_extern"):
            if not args or not isinstance(args[0], E.StringImm):
                raise CodegenError(f"{op} needs the function name as its first argument")
            return f"{args[0].value}({', '.join(self.expr(a) for a in args[1:])})"
        if not is_float(e.dtype):
            if op in ("abs", "fabs") and (is_int(e.dtype) or is_uint(e.dtype)):
                return f"abs({self.expr(args[0])})" if is_int(e.dtype) else self.expr(args[0])
            if op in ("floor", "ceil", "trunc", "round", "nearbyint") and not is_float(args[0].dtype):
                return f"(({c_type(e.dtype)})({self.expr(args[0])}))"
            if op in ("isnan", "isinf", "isfinite") and is_float(args[0].dtype):
                return f"({op}({self.expr(args[0])}))"
            raise CodegenError(f"call {op!r} with dtype {e.dtype} is not supported by the CUDA code generator")
        return self.float_call(op, e)

    def float_call(self, op: str, e: E.Call) -> str:
        work = "float32" if e.dtype == "float16" else e.dtype
        vals = [self.expr(a) if a.dtype == work else f"(({c_type(work)})({self.expr(a)}))" for a in e.args]
        single = work == "float32"
        if op == "sigmoid":
            ex = "expf" if single else "exp"
            out = f"(1.0{'f' if single else ''} / (1.0{'f' if single else ''} + {ex}(-({vals[0]}))))"
        elif op == "fma":
            out = f"{'fmaf' if single else 'fma'}({vals[0]}, {vals[1]}, {vals[2]})"
        elif op in _UNARY_F32:
            name = _UNARY_F32[op]
            out = f"{name if single else name[:-1]}({vals[0]})"
        elif op in _BINARY_F32:
            name = _BINARY_F32[op]
            out = f"{name if single else name[:-1]}({vals[0]}, {vals[1]})"
        else:
            raise CodegenError(f"math call {op!r} is not supported by the CUDA code generator")
        return out if work == e.dtype else f"(({c_type(e.dtype)})({out}))"
