"""LLVM types and small helpers shared by the emitter modules: TVM dtype -> LLVM type, constant
casts and dtype limits as LLVM constants (their values from `msdb.ir.arith`), naming."""

from __future__ import annotations

import functools
import math
from typing import Any

import llvmlite.ir as ir

from msdb.ir.arith.fold import cast_constant
from msdb.ir.arith.limits import value_limit
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
    """A constant cast from `src` to `dst`, folded with TVM's semantics (`msdb.ir.arith.fold`)."""
    folded = cast_constant(value, dst)
    if folded is None:
        raise CodegenError(f"cannot cast {value} to {dst}")
    return ir.Constant(I1 if dst == "bool" else dst_t, folded)


def limit_const(dtype: str, is_max: bool) -> ir.Value:
    """`max_value` / `min_value` of `dtype` as a constant."""
    return ir.Constant(scalar_type(dtype), value_limit(dtype, is_max))


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


class Poison(ir.Constant):
    """LLVM's `poison` of a type (llvmlite writes only `undef`): a value no lane of which
    matters. Unlike `undef`, LLVM keeps it whole when it drops lanes nobody reads."""

    def __init__(self, ty: ir.Type) -> None:
        super().__init__(ty, None)

    def _get_reference(self) -> str:
        return "poison"

    def _to_string(self) -> str:
        return f"{self.type} poison"


_CONSTANTS: dict[tuple[str, Any], CachedConstant] = {}


def int_lanes(value: ir.Value) -> list[int] | None:
    """The lanes of a constant integer vector (a mask's ones and zeros too); None for anything
    else (a scalar, a float vector, a value computed at run time, an undefined lane)."""
    if not isinstance(value, ir.Constant):
        return None
    t = value.type
    if not isinstance(t, ir.VectorType) or not isinstance(t.element, ir.IntType):
        return None
    lanes = value.constant
    if lanes is None:  # zeroinitializer
        return [0] * t.count
    if not isinstance(lanes, (list, tuple)):
        return None
    out = []
    for lane in lanes:
        lane = lane.constant if isinstance(lane, ir.Constant) else lane
        if not isinstance(lane, int):
            return None
        out.append(int(lane))
    return out


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
