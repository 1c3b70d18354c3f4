"""LLVM types and small helpers shared by the emitter modules: TVM dtype -> LLVM type, constant
folding of casts and integer wrap-around, dtype limits, naming."""

from __future__ import annotations

import functools
import math
from typing import Any

import llvmlite.ir as ir

from msdb.ir.dtype import bits as _bits
from msdb.ir.dtype import is_float, is_int, is_uint
from msdb.tuner.codegen.errors import CodegenError

dtype_bits = functools.lru_cache(maxsize=None)(_bits)

PTR = ir.PointerType()
I1 = ir.IntType(1)
I8 = ir.IntType(8)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
VOID = ir.VoidType()

FLOAT_MAX = {"float16": 65504.0, "float32": 3.4028234663852886e38, "float64": 1.7976931348623157e308}


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


def signed(dtype: str) -> bool:
    return is_int(dtype)


def type_suffix(t: ir.Type) -> str:
    if isinstance(t, ir.VectorType):
        return f"v{t.count}{type_suffix(t.element)}"
    if isinstance(t, ir.FloatType):
        return "f32"
    if isinstance(t, ir.DoubleType):
        return "f64"
    if isinstance(t, ir.HalfType):
        return "f16"
    if isinstance(t, ir.IntType):
        return f"i{t.width}"
    raise CodegenError(f"no intrinsic suffix for {t}")


def alloca_ptr(b: ir.IRBuilder, typ: ir.Type, name: str, align: int) -> ir.Value:
    """A stack slot typed as an opaque `ptr` (like the arguments), so that loads and stores of
    any element or vector type pass llvmlite's typed-pointer checks."""
    slot = b.alloca(typ, name=name)
    slot.align = align
    slot.type = PTR
    return slot


def ident(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "_." else "_" for ch in name) or "v"


def wrap_int(value: int, width: int, is_signed: bool) -> int:
    """`value` wrapped to a `width`-bit two's complement (or unsigned) integer."""
    mask = (1 << width) - 1
    value &= mask
    if is_signed and value >= 1 << (width - 1):
        value -= 1 << width
    return value


def common_dtype(a: str, b: str) -> str:
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


def fold_cast(value: int | float, src: str, dst: str, dst_t: ir.Type) -> ir.Value:
    if dst == "bool":
        return ir.Constant(I1, int(value != 0))
    if is_float(dst):
        return ir.Constant(dst_t, float(value))
    if is_float(src):
        if math.isnan(value) or math.isinf(value):
            raise CodegenError(f"cannot cast {value} to {dst}")
        value = int(value)  # truncation toward zero
    return ir.Constant(dst_t, wrap_int(int(value), dtype_bits(dst), is_int(dst)))


def limit_const(dtype: str, is_max: bool) -> ir.Value:
    t = scalar_type(dtype)
    if is_float(dtype):
        v = FLOAT_MAX[dtype]
        return ir.Constant(t, v if is_max else -v)
    if dtype == "bool":
        return ir.Constant(t, int(is_max))
    width = dtype_bits(dtype)
    if is_uint(dtype):
        return ir.Constant(t, (1 << width) - 1 if is_max else 0)
    return ir.Constant(t, (1 << (width - 1)) - 1 if is_max else -(1 << (width - 1)))



class CachedConstant(ir.Constant):
    """A constant whose text is formatted once: llvmlite formats a constant at every use, and
    vector constants (splats, lane ids, masks) otherwise dominate emission time."""

    _ref: str | None = None
    _text: str | None = None

    def get_reference(self) -> str:
        if self._ref is None:
            self._ref = super().get_reference()
        return self._ref

    def __str__(self) -> str:
        if self._text is None:
            self._text = super().__str__()
        return self._text


_CONSTANTS: dict[tuple[str, Any], CachedConstant] = {}


def const(ty: ir.Type, value: Any) -> ir.Constant:
    """A shared, pre-formatted constant of `ty` (a list for vectors; an all-zero vector prints
    as zeroinitializer)."""
    if isinstance(value, list):
        if all(v == 0 for v in value) and not any(isinstance(v, float) and math.copysign(1.0, v) < 0 for v in value):
            value = None
        key = (str(ty), None if value is None else tuple(value))
    else:
        key = (str(ty), value if not isinstance(value, float) else ("f", value, math.copysign(1.0, value)))
    hit = _CONSTANTS.get(key)
    if hit is None:
        if len(_CONSTANTS) > 4096:
            _CONSTANTS.clear()
        hit = CachedConstant(ty, value)
        _CONSTANTS[key] = hit
    return hit
