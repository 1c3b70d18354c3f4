"""The interpreter's runtime: `CompiledFunc` (argument checks, then the generated kernel) and the
helpers the generated code calls by name, `GLOBALS` (docs/architecture.md, "Reference interpreter")."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from msdb.errors import MsdbError
from msdb.ir import expr as E
from msdb.ir.arith.fold import truncdiv, truncmod
from msdb.ir.arith.limits import int_range
from msdb.ir.dtype import bits, is_float, to_numpy
from msdb.ir.function import PrimFunc

Interval = tuple[int, int]


class InterpreterError(MsdbError):
    """The interpreter cannot run a function: bad arguments, an out-of-bounds access, an
    unsupported op or an integer division by zero."""


@dataclass(frozen=True)
class Param:
    name: str
    buffer: E.Buffer | None  # None: a scalar parameter
    dtype: str
    written: bool


class CompiledFunc:
    """A PrimFunc translated to Python. `source` is the generated code (for debugging)."""

    def __init__(self, func: PrimFunc, params: tuple[Param, ...], kernel: Callable[..., None], source: str) -> None:
        self.func = func
        self.params = params
        self.source = source
        self._kernel = kernel

    def __call__(self, *args: Any) -> None:
        if len(args) != len(self.params):
            names = ", ".join(p.name for p in self.params)
            raise InterpreterError(
                f"expected {len(self.params)} arguments ({names}), got {len(args)}"
            )
        converted = [_check_argument(p, a, i) for i, (p, a) in enumerate(zip(self.params, args))]
        try:
            with np.errstate(all="ignore"):
                self._kernel(*converted)
        except ZeroDivisionError:
            raise InterpreterError("integer division by zero") from None


def _check_argument(param: Param, value: Any, position: int) -> Any:
    what = f"argument {position} ({param.name!r})"
    if param.buffer is None:
        if isinstance(value, np.ndarray) and value.ndim == 0:
            value = value.item()
        if is_float(param.dtype):
            if not isinstance(value, (int, float, np.integer, np.floating)):
                raise InterpreterError(f"{what} must be a {param.dtype} scalar, got {type(value).__name__}")
            return FLOAT_TYPES[param.dtype](value)
        if not isinstance(value, (int, np.integer, bool, np.bool_)):
            raise InterpreterError(f"{what} must be a {param.dtype} scalar, got {type(value).__name__}")
        value = int(value)
        lo, hi = dtype_range(param.dtype)
        if not lo <= value <= hi:
            raise InterpreterError(f"{what}: {value} does not fit {param.dtype}")
        return value
    buf = param.buffer
    if not isinstance(value, np.ndarray):
        raise InterpreterError(
            f"{what} for buffer {buf.name!r} must be a numpy array, got {type(value).__name__}"
        )
    expected = to_numpy(buf.dtype)
    if value.dtype != expected:
        raise InterpreterError(
            f"{what} for buffer {buf.name!r} has dtype {value.dtype}, expected {expected} ({buf.dtype})"
        )
    if value.ndim != len(buf.shape):
        raise InterpreterError(
            f"{what} for buffer {buf.name!r} has shape {value.shape}, expected {len(buf.shape)} dimensions "
            f"{_shape_text(buf)}"
        )
    if param.written and not value.flags.writeable:
        raise InterpreterError(f"{what} for buffer {buf.name!r} is written by the function but is read-only")
    return value


def _shape_text(buf: E.Buffer) -> str:
    return "(" + ", ".join(str(d.value) if isinstance(d, E.IntImm) else getattr(d, "name", "?") for d in buf.shape) + ")"


# ---- scalar helpers ---------------------------------------------------------------------------


def dtype_range(dtype: str) -> Interval:
    try:
        return int_range(dtype)
    except ValueError:
        raise InterpreterError(f"dtype {dtype!r} is not an integer type") from None


def _bf16(x: Any) -> np.float32:
    """Round a float to bfloat16 precision (round to nearest even), held in float32."""
    f = np.float32(x)
    if f != f:
        return f
    u = int(f.view(np.uint32))
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return np.uint32(u).view(np.float32)


FLOAT_TYPES: dict[str, Callable[[Any], Any]] = {
    "float16": np.float16,
    "float32": np.float32,
    "float64": np.float64,
    "bfloat16": _bf16,
}


# C's integer division and remainder (a zero divisor raises ZeroDivisionError)
_rt_tdiv = truncdiv
_rt_tmod = truncmod


def _rt_select(cond: Any, t: Any, f: Any) -> Any:
    return t if cond else f


def make_f2i(dtype: str) -> Callable[[Any], int]:
    lo, hi = dtype_range(dtype)
    span = hi - lo + 1

    def convert(x: Any) -> int:
        if not math.isfinite(x):
            return lo
        v = int(x)
        return v if lo <= v <= hi else (v - lo) % span + lo

    return convert


def _rt_oob(kind: str, buffer: str, block: str, indices: tuple[int, ...], shape: tuple[int, ...]) -> Any:
    raise InterpreterError(
        f"out-of-bounds {kind} of buffer {buffer!r} at index {tuple(int(i) for i in indices)} "
        f"(shape {tuple(int(s) for s in shape)}) in block {block!r}"
    )


def _rt_shape_err(position: int, param: str, buffer: str, got: tuple[int, ...], want: tuple[Any, ...]) -> None:
    raise InterpreterError(
        f"argument {position} ({param!r}) for buffer {buffer!r} has shape {tuple(got)}, "
        f"expected {tuple(int(w) for w in want)}"
    )


def _rt_region(src: np.ndarray, mins: tuple[int, ...], extents: tuple[int, ...], src_name: str, name: str,
               shape: tuple[int, ...], block: str) -> np.ndarray:
    """The view a `match_buffer` gives: the source region, reshaped to the matched buffer."""
    for lo, ext, dim in zip(mins, extents, src.shape):
        if lo < 0 or ext < 0 or lo + ext > dim:
            raise InterpreterError(
                f"match_buffer {name!r} in block {block!r}: region "
                f"{[(int(m), int(m + e)) for m, e in zip(mins, extents)]} lies outside buffer {src_name!r} "
                f"of shape {src.shape}"
            )
    view = src[tuple(slice(lo, lo + ext) for lo, ext in zip(mins, extents))]
    if tuple(view.shape) == tuple(shape):
        return view
    if view.size != math.prod(shape):
        raise InterpreterError(
            f"match_buffer {name!r} in block {block!r}: shape {tuple(shape)} does not match region "
            f"extents {tuple(view.shape)} of buffer {src_name!r}"
        )
    out = view.reshape(shape)
    if view.size and not np.shares_memory(out, view):
        raise InterpreterError(
            f"match_buffer {name!r} in block {block!r}: region of {src_name!r} cannot be viewed with shape "
            f"{tuple(shape)}"
        )
    return out


def _rt_elem_offset(view: np.ndarray) -> int:
    root = view
    while isinstance(root.base, np.ndarray):
        root = root.base
    return (view.__array_interface__["data"][0] - root.__array_interface__["data"][0]) // view.itemsize


def _rt_erf(x: Any) -> Any:
    return type(x)(math.erf(x)) if isinstance(x, np.floating) else math.erf(x)


def _rt_rsqrt(x: Any) -> Any:
    one = type(x)(1) if isinstance(x, np.floating) else 1.0
    return one / np.sqrt(x)


def _rt_sigmoid(x: Any) -> Any:
    one = type(x)(1) if isinstance(x, np.floating) else 1.0
    return one / (one + np.exp(-x))


def _rt_exp10(x: Any) -> Any:
    ten = type(x)(10) if isinstance(x, np.floating) else 10.0
    return np.power(ten, x)


UNARY_FLOAT_OPS: dict[str, Callable[[Any], Any]] = {
    "exp": np.exp, "exp2": np.exp2, "exp10": _rt_exp10, "expm1": np.expm1,
    "log": np.log, "log2": np.log2, "log10": np.log10, "log1p": np.log1p,
    "sqrt": np.sqrt, "rsqrt": _rt_rsqrt, "sigmoid": _rt_sigmoid, "erf": _rt_erf,
    "sin": np.sin, "cos": np.cos, "tan": np.tan, "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan,
    "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh, "asinh": np.arcsinh, "acosh": np.arccosh,
    "atanh": np.arctanh,
    "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc, "round": np.rint, "nearbyint": np.rint,
}
ROUNDING_OPS = frozenset(["floor", "ceil", "trunc", "round", "nearbyint"])
BINARY_FLOAT_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "pow": np.power, "fmod": np.fmod, "atan2": np.arctan2, "hypot": np.hypot,
    "copysign": np.copysign, "nextafter": np.nextafter,
}
BITWISE_OPS = {"bitwise_and": "&", "bitwise_or": "|", "bitwise_xor": "^", "shift_left": "<<", "shift_right": ">>"}


# ---- vector helpers (whole lanes at once; see msdb.ir.interpreter.vector) ---------------------


def _rt_unique_lanes(n: int, indices: tuple[Any, ...]) -> bool:
    """True if the index tuples of the `n` lanes are pairwise distinct."""
    if n <= 1:
        return True
    cols = [np.broadcast_to(np.asarray(i, dtype=np.int64), (n,)) for i in indices]
    key = np.zeros(n, dtype=np.int64)
    radix = 1
    for col in reversed(cols):
        lo = int(col.min())
        span = int(col.max()) - lo + 1
        if radix * span > (1 << 62):
            return False
        key += (col - lo) * radix
        radix *= span
    if radix <= 8 * n + 64:
        return int(np.bincount(key, minlength=1).max()) <= 1
    return int(np.unique(key).size) == n


def _rt_disjoint(arrays: tuple[np.ndarray, ...], written: int) -> bool:
    """The first `written` arrays (the buffers a nest writes) overlap no other buffer's memory
    (arguments may alias; match_buffer views do)."""
    for i in range(written):
        for j, other in enumerate(arrays):
            if i != j and np.may_share_memory(arrays[i], other):
                return False
    return True


def _rt_vbounds(kind: str, buffer: str, block: str, arr: np.ndarray, indices: tuple[Any, ...]) -> None:
    shape = np.broadcast_shapes(*(np.shape(i) for i in indices))
    bad = np.zeros(shape, dtype=bool)
    for idx, dim in zip(indices, arr.shape):
        bad |= (np.asarray(idx) < 0) | (np.asarray(idx) >= dim)
    if bad.any():
        lane = int(np.flatnonzero(bad)[0])
        first = tuple(int(np.broadcast_to(i, shape).reshape(-1)[lane]) for i in indices)
        _rt_oob(kind, buffer, block, first, arr.shape)


def _rt_vtdiv(a: Any, b: Any) -> Any:
    q = np.abs(a) // np.abs(b)
    return np.where((np.asarray(a) < 0) == (np.asarray(b) < 0), q, -q)


def _rt_vtmod(a: Any, b: Any) -> Any:
    return a - b * _rt_vtdiv(a, b)


def make_vf2i(dtype: str) -> Callable[[Any], np.ndarray]:
    scalar = make_f2i(dtype)
    lo, hi = dtype_range(dtype)
    mask = (1 << bits(dtype)) - 1

    def convert(x: Any) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        finite = np.isfinite(x)
        t = np.trunc(np.where(finite, x, 0.0))
        if (np.abs(t) >= 2.0**62).any():
            return np.array([scalar(v) for v in x.tolist()], dtype=np.int64)
        v = t.astype(np.int64)
        if bits(dtype) < 64:
            v = ((v - lo) & mask) + lo
        v[~finite] = lo
        return v

    return convert


def _rt_verf(x: np.ndarray) -> np.ndarray:
    return np.array([math.erf(t) for t in x.tolist()], dtype=x.dtype)


def _rt_vrsqrt(x: np.ndarray) -> np.ndarray:
    return x.dtype.type(1) / np.sqrt(x)


def _rt_vsigmoid(x: np.ndarray) -> np.ndarray:
    one = x.dtype.type(1)
    return one / (one + np.exp(-x))


def _rt_vexp10(x: np.ndarray) -> np.ndarray:
    return np.power(x.dtype.type(10), x)


VECTOR_UNARY_OPS: dict[str, Callable[[Any], Any]] = {
    **UNARY_FLOAT_OPS, "erf": _rt_verf, "rsqrt": _rt_vrsqrt, "sigmoid": _rt_vsigmoid, "exp10": _rt_vexp10,
}


#: The names the generated code refers to (its module globals; constants and ufuncs are added per
#: function by the code generator).
GLOBALS: dict[str, Any] = {
    "np": np,
    "_zeros": np.zeros,
    "_tdiv": _rt_tdiv,
    "_tmod": _rt_tmod,
    "_select": _rt_select,
    "_oob": _rt_oob,
    "_shape_err": _rt_shape_err,
    "_region": _rt_region,
    "_elem_offset": _rt_elem_offset,
    "_bf16": _bf16,
    "_unique_lanes": _rt_unique_lanes,
    "_disjoint": _rt_disjoint,
    "_vbounds": _rt_vbounds,
    "_vtdiv": _rt_vtdiv,
    "_vtmod": _rt_vtmod,
}
