"""TVM dtype strings ("int32", "float16", "bool", "handle"): classification and numpy mapping."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

def is_float(dtype: str) -> bool:
    """True for float16/32/64 and bfloat16 (scalar or vector lanes like "float32x4")."""
    return dtype.startswith("float") or dtype.startswith("bfloat")


def is_int(dtype: str) -> bool:
    """True for signed integers int8..int64."""
    return dtype.startswith("int")


def is_uint(dtype: str) -> bool:
    """True for unsigned integers uint8..uint64."""
    return dtype.startswith("uint")


def is_integer_like(dtype: str) -> bool:
    """Integers and bool: the dtypes integer arithmetic and conditions use."""
    return is_int(dtype) or is_uint(dtype) or dtype == "bool"


def bits(dtype: str) -> int:
    """Bit width of one lane ("int8" -> 8, "bool" -> 1, "float32x4" -> 32)."""
    if dtype == "bool":
        return 1
    if dtype == "handle":
        return 64
    base = dtype.split("x")[0]
    digits = "".join(ch for ch in base if ch.isdigit())
    if not digits:
        raise ValueError(f"unknown dtype {dtype!r}")
    return int(digits)


def default_int_dtype(value: int) -> str:
    """int32 unless the value needs 64 bits (TVMScript's rule for integer literals)."""
    return "int32" if -(2**31) <= value < 2**31 else "int64"


def default_float_dtype() -> str:
    return "float32"


def to_numpy(dtype: str) -> "np.dtype":
    """The numpy dtype holding values of `dtype` (bfloat16 is held as float32)."""
    import numpy as np  # deferred: `import msdb.ir` must not pay for numpy

    if dtype == "bfloat16":
        return np.dtype("float32")
    return np.dtype(dtype)


KNOWN_DTYPES = frozenset(
    ["bool", "handle", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
     "float16", "float32", "float64", "bfloat16"]
)


def is_valid(dtype: str) -> bool:
    """A scalar dtype this IR knows (vector lanes "float32x4" included)."""
    base, _, lanes = dtype.partition("x")
    return base in KNOWN_DTYPES and (not lanes or lanes.isdigit())
