"""The values each TVM dtype holds: the one table of integer ranges, wrap-around and largest
finite floats.

The simplifier, the interval analysis, the constant folder, the TE builder (`max_value`), the
TVMScript parser (`T.max_value`, literal typing), the interpreter and the code generator all
need these numbers; keeping them here means a dtype can never have two different ranges
(docs/architecture.md, "Integer arithmetic").
"""

from __future__ import annotations

import functools

from msdb.ir.dtype import bits, is_float, is_int, is_uint

__all__ = ["FLOAT_MAX", "int_range", "is_integer", "wrap", "fits", "value_limit", "cast_preserves_value"]

#: Largest finite value of each float dtype, as TVM's `max_value` gives it (TVM gives bfloat16
#: float32's largest value, which it then rounds when the constant is used).
FLOAT_MAX: dict[str, float] = {
    "float16": 65504.0,
    "bfloat16": 3.4028234663852886e38,
    "float32": 3.4028234663852886e38,
    "float64": 1.7976931348623157e308,
}


@functools.lru_cache(maxsize=None)
def is_integer(dtype: str) -> bool:
    """Signed or unsigned integers (not bool): the dtypes index arithmetic is done in."""
    return is_int(dtype) or is_uint(dtype)


@functools.lru_cache(maxsize=None)
def int_range(dtype: str) -> tuple[int, int]:
    """Inclusive (lowest, highest) value of an integer or bool dtype; ValueError otherwise."""
    if dtype == "bool":
        return 0, 1
    if not is_integer(dtype):
        raise ValueError(f"dtype {dtype!r} is not an integer type; integer ranges exist for int*, uint* and bool")
    n = bits(dtype)
    if is_uint(dtype):
        return 0, (1 << n) - 1
    return -(1 << (n - 1)), (1 << (n - 1)) - 1


def wrap(value: int, dtype: str) -> int:
    """`value` converted to an integer dtype the way a cast does: two's complement wrap-around
    (any non-zero value is true for bool)."""
    if dtype == "bool":
        return int(value != 0)
    lo, hi = int_range(dtype)
    return (value - lo) % (hi - lo + 1) + lo


def fits(value: int, dtype: str) -> bool:
    """Whether the integer dtype holds `value` exactly."""
    lo, hi = int_range(dtype)
    return lo <= value <= hi


def value_limit(dtype: str, upper: bool) -> int | float:
    """The largest (`upper`) or lowest value of `dtype`: TVM's `max_value` / `min_value`."""
    if is_float(dtype):
        limit = FLOAT_MAX.get(dtype.split("x")[0])
        if limit is None:
            raise ValueError(f"no limits known for dtype {dtype!r}; known float dtypes: {sorted(FLOAT_MAX)}")
        return limit if upper else -limit
    lo, hi = int_range(dtype)
    return hi if upper else lo


def cast_preserves_value(src: str, dst: str) -> bool:
    """Whether an integer-to-integer cast from `src` to `dst` can never change a value (a
    widening cast, or a signedness change into a wider type)."""
    if not (is_integer(src) and is_integer(dst)):
        return False
    lo, hi = int_range(src)
    dlo, dhi = int_range(dst)
    return dlo <= lo and hi <= dhi
