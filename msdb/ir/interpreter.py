"""Reference interpreter: run a PrimFunc on numpy arrays, exactly as TensorIR would.

Why it exists: schedule transformations (split, reorder, cache_read, compute_at, ...) must leave
a function's meaning unchanged, and without a code generator the only way to check that is to
run the function before and after on the same inputs and compare (docs/architecture.md, "Workload IR").

Calling convention (TVM's): `interpret(func, *arrays)` maps the arrays to the entry function's
buffer parameters in order; outputs are written in place; nothing is returned.

Approach: a *source compiler* with vectorized leaf nests. Walking the IR tree per element is far
too slow (a 64^3 matmul is 262k block executions), and even a closure compiler pays one Python
call per IR node. So the function is translated once into Python source with one nested `for`
per IR loop, block iter vars as plain locals and buffer accesses as numpy scalar indexing, then
`exec`'d: a few numpy scalar operations per element, 0.5-1 s for the 64^3 matmul. On top of
that, a perfect loop nest around a block whose body is only stores (every TE stage, most
scheduled nests) also gets a numpy version: the loops that feed no reduction iter var become
array lanes, the reduction loops stay Python loops outside them (about 0.04 s for the same
matmul). It runs only when the lanes are independent -- each lane writes its own locations,
checked at run time before anything is written, and reads what the block writes only where it
writes it, checked statically -- and falls back to the scalar loops otherwise. Per lane the
operations happen in the same order on the same numpy dtypes, so both paths give bit-identical
results (`vectorize=False` forces the scalar path; the tests compare the two). Only which
out-of-bounds access is reported first may differ when a nest has several.

Exactness (the point of a reference interpreter) is kept by construction, not by hoping:

* Integer expressions are Python ints. Each one carries a static value interval (loop extents,
  bindings and constants are usually known); where the interval provably fits the dtype no
  wrapping code is emitted, elsewhere the result is wrapped to the dtype's width, so int8/int32
  overflow behaves as in TVM. `Div`/`Mod` truncate toward zero, `FloorDiv`/`FloorMod` floor.
* Floating-point values are numpy scalars of the expression's dtype (float32 math in float32,
  math calls through numpy ufuncs, which is what numpy float32 kernels do). bfloat16 is held in
  float32 and rounded to bfloat16 after each operation.
* Every buffer index is bounds-checked unless its interval proves it in range; an out-of-bounds
  access raises `InterpreterError` naming the buffer, the indices and the block (numpy alone
  would silently wrap negative indices).
* Blocks: predicate, iter var binding, `init` when every reduction iter var sits at its domain
  minimum (TVM's lowering rule), fresh zeroed `alloc_buffers` per block execution, and
  `match_buffers` as numpy views. Every loop kind runs sequentially; a thread-bound loop
  iterates over its extent. `Select` evaluates both arms, `if_then_else` only the taken one;
  `And`/`Or` short-circuit (they are side-effect free, so this only spares out-of-bounds
  errors in guards such as `i > 0 and A[i - 1] > 0`).
* Python refuses more than 20 statically nested blocks and very deep expressions, and deeply
  tiled schedules exceed that; deep statements and expressions are moved into separate
  generated functions that receive every variable in scope as arguments.

Float to int casts truncate; NaN and infinities convert to the dtype's minimum (what x86's
conversion instructions produce). Integer division by zero raises `InterpreterError`.
"""

from __future__ import annotations

import keyword
import logging
import math
import re
import sys
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from msdb.errors import MsdbError
from msdb.ir import expr as E
from msdb.ir import stmt as S
from msdb.ir.arith import interval as intervals
from msdb.ir.arith.fold import truncdiv, truncmod
from msdb.ir.arith.keys import expr_key
from msdb.ir.arith.limits import int_range, value_limit
from msdb.ir.dtype import bits, is_float, is_integer_like, is_uint, to_numpy
from msdb.ir.function import IRModule, PrimFunc
from msdb.ir.functor import free_vars, post_order_visit

__all__ = ["InterpreterError", "CompiledFunc", "compile_func", "interpret"]

logger = logging.getLogger(__name__)

Interval = tuple[int, int]

# CPython rejects more than 20 nested for/while/try/with blocks per code object and expressions
# nested too deeply; stay well below both.
_MAX_NEST = 14
_MAX_EXPR_DEPTH = 48
_CACHE_SIZE = 64
_RECURSION_LIMIT = 20000


class InterpreterError(MsdbError):
    """The interpreter cannot run a function: bad arguments, an out-of-bounds access, an
    unsupported op or an integer division by zero."""


# =============================================================================================
# Public entry points
# =============================================================================================


def interpret(mod_or_func: IRModule | PrimFunc, *arrays: Any, vectorize: bool = True) -> None:
    """Run the entry function of `mod_or_func` on `arrays` (TVM's calling convention: one numpy
    array per buffer parameter, in order, outputs written in place; scalar parameters take
    Python numbers). Raises `InterpreterError` on a mismatching argument or a faulty access.
    `vectorize=False` runs every loop element by element (same results, slower)."""
    compile_func(mod_or_func, vectorize=vectorize)(*arrays)


def compile_func(mod_or_func: IRModule | PrimFunc, *, vectorize: bool = True) -> CompiledFunc:
    """Translate the entry function once; the result can be called many times. Compiled
    functions are cached per function object (IR nodes are immutable)."""
    func = _entry(mod_or_func)
    key = (id(func), vectorize)
    hit = _cache.get(key)
    if hit is not None and hit[0] is func:
        return hit[1]
    limit = sys.getrecursionlimit()
    # The translator recurses once per IR nesting level; deep (machine-made) expressions need
    # more than Python's default 1000 frames, which CPython 3.11+ provides without C stack.
    sys.setrecursionlimit(max(limit, _RECURSION_LIMIT))
    try:
        compiled = _Codegen(func, vectorize).build()
    except RecursionError:
        raise InterpreterError("the function is nested too deeply to interpret") from None
    finally:
        sys.setrecursionlimit(limit)
    if len(_cache) >= _CACHE_SIZE:
        _cache.pop(next(iter(_cache)))
    _cache[key] = (func, compiled)
    return compiled


_cache: dict[tuple[int, bool], tuple[PrimFunc, CompiledFunc]] = {}


@dataclass(frozen=True)
class _Param:
    name: str
    buffer: E.Buffer | None  # None: a scalar parameter
    dtype: str
    written: bool


class CompiledFunc:
    """A PrimFunc translated to Python. `source` is the generated code (for debugging)."""

    def __init__(self, func: PrimFunc, params: tuple[_Param, ...], kernel: Callable[..., None], source: str) -> None:
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


def _entry(mod_or_func: IRModule | PrimFunc) -> PrimFunc:
    if isinstance(mod_or_func, PrimFunc):
        return mod_or_func
    if isinstance(mod_or_func, IRModule):
        try:
            return mod_or_func.main
        except KeyError as err:
            raise InterpreterError(str(err.args[0])) from None
    raise InterpreterError(f"expected an IRModule or PrimFunc, got {type(mod_or_func).__name__}")


def _check_argument(param: _Param, value: Any, position: int) -> Any:
    what = f"argument {position} ({param.name!r})"
    if param.buffer is None:
        if isinstance(value, np.ndarray) and value.ndim == 0:
            value = value.item()
        if is_float(param.dtype):
            if not isinstance(value, (int, float, np.integer, np.floating)):
                raise InterpreterError(f"{what} must be a {param.dtype} scalar, got {type(value).__name__}")
            return _FLOAT_TYPES[param.dtype](value)
        if not isinstance(value, (int, np.integer, bool, np.bool_)):
            raise InterpreterError(f"{what} must be a {param.dtype} scalar, got {type(value).__name__}")
        value = int(value)
        lo, hi = _dtype_range(param.dtype)
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


# =============================================================================================
# Runtime helpers (referenced by name from the generated code)
# =============================================================================================


def _dtype_range(dtype: str) -> Interval:
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


_FLOAT_TYPES: dict[str, Callable[[Any], Any]] = {
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


def _make_f2i(dtype: str) -> Callable[[Any], int]:
    lo, hi = _dtype_range(dtype)
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


_UNARY_FLOAT_OPS: dict[str, Callable[[Any], Any]] = {
    "exp": np.exp, "exp2": np.exp2, "exp10": _rt_exp10, "expm1": np.expm1,
    "log": np.log, "log2": np.log2, "log10": np.log10, "log1p": np.log1p,
    "sqrt": np.sqrt, "rsqrt": _rt_rsqrt, "sigmoid": _rt_sigmoid, "erf": _rt_erf,
    "sin": np.sin, "cos": np.cos, "tan": np.tan, "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan,
    "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh, "asinh": np.arcsinh, "acosh": np.arccosh,
    "atanh": np.arctanh,
    "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc, "round": np.rint, "nearbyint": np.rint,
}
_ROUNDING_OPS = frozenset(["floor", "ceil", "trunc", "round", "nearbyint"])
_BINARY_FLOAT_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "pow": np.power, "fmod": np.fmod, "atan2": np.arctan2, "hypot": np.hypot,
    "copysign": np.copysign, "nextafter": np.nextafter,
}
_BITWISE_OPS = {"bitwise_and": "&", "bitwise_or": "|", "bitwise_xor": "^", "shift_left": "<<", "shift_right": ">>"}


# =============================================================================================
# Code generation
# =============================================================================================


@dataclass(frozen=True)
class _VarBind:
    name: str
    interval: Interval | None


@dataclass(frozen=True)
class _BufBind:
    name: str
    buffer: E.Buffer
    dims: tuple[tuple[str, Interval | None], ...]  # code (a literal or a local name) and interval
    names: tuple[str, ...]  # every local this binding needs (array plus dimension temporaries)


Env = dict[Any, Any]  # Var -> _VarBind, Buffer -> _BufBind


class _Fn:
    """One generated Python function."""

    def __init__(self, name: str, params: list[str]) -> None:
        self.name = name
        self.params = params
        self.lines: list[str] = []
        self.indent = 1

    def emit(self, line: str) -> None:
        self.lines.append("    " * self.indent + line)

    def source(self) -> str:
        body = self.lines or ["    pass"]
        return f"def {self.name}({', '.join(self.params)}):\n" + "\n".join(body) + "\n"


_IDENT = re.compile(r"[^0-9a-zA-Z_]")


# =============================================================================================
# Vectorized leaf loop nests
# =============================================================================================
#
# A perfect loop nest around a *leaf* block (a block whose body is only stores) runs as numpy
# array operations: the loops that feed no reduction iter var become lanes (one array element
# per iteration), the ones that feed reduction iter vars stay Python loops, hoisted outside the
# lanes in their original order. That reorder is legal exactly when the lanes are independent:
# every lane writes its own locations (checked at run time, before anything is written, with
# the store indices over all lanes) and reads a buffer the block writes only at the location it
# writes itself (checked statically: same index expression). When either check fails the
# nest runs through the scalar code, so vectorization never changes a result. Per lane, the
# operations happen in the original order with the same numpy dtypes, so results are
# bit-identical to the scalar path; only which out-of-bounds access is reported first may
# differ when a nest holds several.

_MIN_LANES = 48
_MAX_LANES = 1 << 20
_MAX_SEQ_LOOPS = 8
_LANES = "__lanes__"  # env key of the name holding the current lane count


class _NoVector(Exception):
    """Internal: this nest is left to the scalar code."""


@dataclass(frozen=True)
class _VecBind:
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


def _make_vf2i(dtype: str) -> Callable[[Any], np.ndarray]:
    scalar = _make_f2i(dtype)
    lo, hi = _dtype_range(dtype)
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


_VECTOR_UNARY_OPS: dict[str, Callable[[Any], Any]] = {
    **_UNARY_FLOAT_OPS, "erf": _rt_verf, "rsqrt": _rt_vrsqrt, "sigmoid": _rt_vsigmoid, "exp10": _rt_vexp10,
}


def _static_range(loop: S.For) -> tuple[int, int]:
    """(min, extent) of a loop the vector planner checked to be constant."""
    lo, ext = E.const_int(loop.min), E.const_int(loop.extent)
    if lo is None or ext is None:
        raise InterpreterError(f"loop {loop.loop_var.name} has no constant range")
    return lo, ext


def _domain(iv: S.IterVar) -> E.Range:
    if iv.dom is None:
        raise InterpreterError(f"block iter var {iv.var.name} has no domain")
    return iv.dom


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


class _VectorCodegen:
    """The vector half of `_Codegen` (mixed in; uses its naming and scalar helpers)."""

    fns: list[_Fn]
    vectorize: bool
    _novec: set[int]

    # ---- provided by `_Codegen` ----
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

    def buffer(self, buf: E.Buffer, env: Env, block: str) -> _BufBind:
        raise NotImplementedError

    def expr(self, e: E.PrimExpr, env: Env, fn: _Fn, depth: int = 0, block: str = "root") -> tuple[str, Interval | None]:
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
    def emit_chain(self, plan: _ChainPlan, env: Env, fn: _Fn, block: str) -> bool:
        """Emit `if not _vec(...): <scalar nest>`; False if the nest cannot be vectorized."""
        args = self.scope_names(env)
        vf = _Fn(self.fresh("_vec"), args)
        try:
            self._emit_vector(plan, env, vf)
        except _NoVector:
            self._novec.add(id(plan.realize))
            return False
        self.fns.append(vf)
        fn.emit(f"if not {vf.name}({', '.join(args)}):")
        return True

    def _emit_vector(self, plan: _ChainPlan, env: Env, vf: _Fn) -> None:
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
            venv[loop.loop_var] = _VecBind(lname, (lo, lo + ext - 1), True)
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
                venv[iv.var] = _VecBind(code, interval, varying)
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
            venv[loop.loop_var] = _VecBind(sname, (lo, lo + ext - 1), False)
        for iv, value in zip(blk.iter_vars, plan.realize.iter_values):
            if iv.iter_type == S.IterType.COMM_REDUCE:
                code, interval, varying = self.vexpr(value, venv, vf, name)
                if varying:
                    raise _NoVector
                venv[iv.var] = _VecBind(code, interval, False)
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
                    mcode, _, _ = self.vexpr(_domain(iv).min, venv, vf, name)
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

    def vrestrict(self, env: Env, sel: str, fn: _Fn, used: set[E.Var] | None) -> Env:
        """The environment of the lanes listed in `sel` (a subset of the current lanes)."""
        out = dict(env)
        for key, bind in env.items():
            if isinstance(bind, _VecBind) and bind.varying and (used is None or key in used):
                name = self.tmp()
                fn.emit(f"{name} = {bind.name}[{sel}]")
                out[key] = _VecBind(name, bind.interval, True)
        count = self.tmp()
        fn.emit(f"{count} = {sel}.size")
        out[_LANES] = count
        return out

    def vstores(self, stmt: S.Stmt, env: Env, fn: _Fn, block: str) -> None:
        stores: list[S.BufferStore] = []
        _leaf_stores(stmt, stores)
        for st in stores:
            bind = self.buffer(st.buffer, env, block)
            # Indices (and their bounds) before the value, as the scalar code does.
            idx, _ = self.vindices(st.indices, bind, env, fn, block, "store")
            value, _, _ = self.vexpr(st.value, env, fn, block)
            if st.value.dtype != st.buffer.dtype:
                value = self.vcast(value, None, st.value.dtype, st.buffer.dtype, True, fn)[0]
            fn.emit(f"{bind.name}[{_index_tuple(idx)}] = {value}")

    def vindices(self, indices: tuple[E.PrimExpr, ...], bind: _BufBind, env: Env, fn: _Fn, block: str,
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
    def vemit(self, fn: _Fn, code: str) -> str:
        name = self.tmp()
        fn.emit(f"{name} = {code}")
        return name

    def vexpr(self, e: E.PrimExpr, env: Env, fn: _Fn, block: str) -> tuple[str, Interval | None, bool]:
        if isinstance(e, (E.IntImm, E.FloatImm, E.StringImm)):
            code, iv = self.expr(e, {}, fn, block=block)
            return code, iv, False
        if isinstance(e, E.Var):
            bind = env.get(e)
            if isinstance(bind, _VecBind):
                return bind.name, bind.interval, bind.varying
            if isinstance(bind, _VarBind):
                return bind.name, bind.interval, False
            raise _NoVector
        method = getattr(self, f"v_{type(e).__name__}", None)
        if method is None:
            if isinstance(e, E.CmpOp):
                method = self.v_CmpOp
            else:
                raise _NoVector
        return method(e, env, fn, block)

    def vwrap(self, code: str, iv: Interval | None, dtype: str, varying: bool, fn: _Fn) -> tuple[str, Interval | None, bool]:
        lo, hi = _dtype_range(dtype)
        if iv is not None and lo <= iv[0] and iv[1] <= hi:
            return self.vemit(fn, code), iv, varying
        if varying and bits(dtype) == 64:
            if is_uint(dtype):
                raise _NoVector
            return self.vemit(fn, code), (lo, hi), varying  # int64 arrays wrap natively
        wrapped, interval = self.wrap(code, iv, dtype)
        return self.vemit(fn, wrapped), interval, varying

    def vfloat(self, code: str, e: E.PrimExpr, operand_dtypes: tuple[str, ...], varying: bool, fn: _Fn) -> tuple[str, None, bool]:
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

    def v_operands(self, e: E.BinaryOp, env: Env, fn: _Fn, block: str):
        a, ai, av = self.vexpr(e.a, env, fn, block)
        b, bi, bv = self.vexpr(e.b, env, fn, block)
        return a, ai, b, bi, av or bv

    def _v_arith(self, e: E.BinaryOp, env: Env, fn: _Fn, block: str, op: str, ivf: Callable) -> tuple[str, Interval | None, bool]:
        a, ai, b, bi, varying = self.v_operands(e, env, fn, block)
        if is_integer_like(e.dtype):
            return self.vwrap(f"({a} {op} {b})", ivf(ai, bi), e.dtype, varying, fn)
        return self.vfloat(f"({a} {op} {b})", e, (e.a.dtype, e.b.dtype), varying, fn)

    def v_Add(self, e, env, fn, block):
        return self._v_arith(e, env, fn, block, "+", _iv_add)

    def v_Sub(self, e, env, fn, block):
        return self._v_arith(e, env, fn, block, "-", _iv_sub)

    def v_Mul(self, e, env, fn, block):
        return self._v_arith(e, env, fn, block, "*", _iv_mul)

    def _v_nonzero(self, bi: Interval | None) -> None:
        if bi is None or bi[0] <= 0 <= bi[1]:
            raise _NoVector  # a zero divisor must raise exactly where the scalar code would

    def v_Div(self, e, env, fn, block):
        a, ai, b, bi, varying = self.v_operands(e, env, fn, block)
        if is_integer_like(e.dtype):
            self._v_nonzero(bi)
            iv = _iv_trunc_div(ai, bi)
            if ai and bi and ai[0] >= 0 and bi[0] > 0:
                return self.vwrap(f"({a} // {b})", iv, e.dtype, varying, fn)
            return self.vwrap(f"_vtdiv({a}, {b})" if varying else f"_tdiv({a}, {b})", iv, e.dtype, varying, fn)
        return self.vfloat(f"({a} / {b})", e, (e.a.dtype, e.b.dtype), varying, fn)

    def v_Mod(self, e, env, fn, block):
        a, ai, b, bi, varying = self.v_operands(e, env, fn, block)
        if is_integer_like(e.dtype):
            self._v_nonzero(bi)
            iv = _iv_trunc_mod(ai, bi)
            if ai and bi and ai[0] >= 0 and bi[0] > 0:
                return self.vwrap(f"({a} % {b})", iv, e.dtype, varying, fn)
            return self.vwrap(f"_vtmod({a}, {b})" if varying else f"_tmod({a}, {b})", iv, e.dtype, varying, fn)
        return self.vfloat(f"np.fmod({a}, {b})", e, (e.a.dtype, e.b.dtype), varying, fn)

    def v_FloorDiv(self, e, env, fn, block):
        a, ai, b, bi, varying = self.v_operands(e, env, fn, block)
        if is_integer_like(e.dtype):
            self._v_nonzero(bi)
            return self.vwrap(f"({a} // {b})", _iv_floor_div(ai, bi), e.dtype, varying, fn)
        return self.vfloat(f"np.floor({a} / {b})", e, (e.a.dtype, e.b.dtype), varying, fn)

    def v_FloorMod(self, e, env, fn, block):
        a, ai, b, bi, varying = self.v_operands(e, env, fn, block)
        if is_integer_like(e.dtype):
            self._v_nonzero(bi)
            return self.vwrap(f"({a} % {b})", _iv_floor_mod(ai, bi), e.dtype, varying, fn)
        return self.vfloat(f"({a} - np.floor({a} / {b}) * {b})", e, (e.a.dtype, e.b.dtype), varying, fn)

    def _v_minmax(self, e, env, fn, block, op: str, ivf: Callable):
        a, ai, b, bi, varying = self.v_operands(e, env, fn, block)
        code = f"np.where({a} {op} {b}, {a}, {b})" if varying else f"({a} if {a} {op} {b} else {b})"
        if is_integer_like(e.dtype):
            return self.vwrap(code, ivf(ai, bi), e.dtype, varying, fn)
        return self.vfloat(code, e, (e.a.dtype, e.b.dtype), varying, fn)

    def v_Min(self, e, env, fn, block):
        return self._v_minmax(e, env, fn, block, "<", _iv_min)

    def v_Max(self, e, env, fn, block):
        return self._v_minmax(e, env, fn, block, ">", _iv_max)

    def v_CmpOp(self, e, env, fn, block):
        kind = type(e).__name__
        if kind == "And":
            return self.vlazy(e.a, e.b, None, "bool", env, fn, block, false_const="False")
        if kind == "Or":
            return self.vlazy(e.a, None, e.b, "bool", env, fn, block, true_const="True")
        op = _Codegen._CMP.get(kind)
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
            return self.vemit(fn, f"np.where({c}, {t}, {f})"), _union(ti, fi), True
        return self.vemit(fn, f"({t} if {c} else {f})"), _union(ti, fi), False

    def v_Cast(self, e, env, fn, block):
        code, iv, varying = self.vexpr(e.value, env, fn, block)
        return self.vcast(code, iv, e.value.dtype, e.dtype, varying, fn)

    def vcast(self, code: str, iv: Interval | None, src: str, dst: str, varying: bool, fn: _Fn) -> tuple[str, Interval | None, bool]:
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
                conv = self.global_obj("vf2i", _make_vf2i(dst))
                return self.vemit(fn, f"{conv}({code})"), _dtype_range(dst), True
            elif not is_integer_like(src):
                raise _NoVector
            return self.vwrap(code, iv, dst, True, fn)
        if is_float(dst):
            return self.vemit(fn, self.vfcast(code, dst, True)), None, True
        raise _NoVector

    def v_BufferLoad(self, e, env, fn, block):
        bind = self.buffer(e.buffer, env, block)
        idx, varying = self.vindices(e.indices, bind, env, fn, block, "load")
        code = f"{bind.name}[{_index_tuple(idx)}]"
        if e.dtype == "bool":
            return self.vemit(fn, code if varying else f"bool({code})"), (0, 1), varying
        if is_integer_like(e.dtype):
            if is_uint(e.dtype) and bits(e.dtype) == 64:
                raise _NoVector
            return self.vemit(fn, f"{code}.astype(np.int64)" if varying else f"int({code})"), _dtype_range(e.dtype), varying
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
                    return self.vwrap(f"np.abs({a})", _iv_abs(ai), e.dtype, True, fn)
                return self.vfloat(f"np.abs({a})", e, (args[0].dtype,), True, fn)
            if op in _VECTOR_UNARY_OPS:
                if op in _ROUNDING_OPS and is_integer_like(args[0].dtype):
                    return self.vcast(a, ai, args[0].dtype, e.dtype, True, fn)
                if not is_float(e.dtype):
                    raise _NoVector
                if not is_float(args[0].dtype):
                    a = self.vemit(fn, self.vfcast(a, e.dtype, True))
                ufunc = self.global_obj(f"v{op}", _VECTOR_UNARY_OPS[op])
                src = args[0].dtype if is_float(args[0].dtype) else e.dtype
                return self.vfloat(f"{ufunc}({a})", e, (src,), True, fn)
            raise _NoVector
        if len(args) == 2 and op in _BINARY_FLOAT_OPS:
            a, ai, av = self.vexpr(args[0], env, fn, block)
            b, bi, bv = self.vexpr(args[1], env, fn, block)
            if not (av or bv):
                return self._v_scalar_call(e, [a, b], [ai, bi], fn, block)
            if not is_float(e.dtype):
                raise _NoVector
            if not is_float(args[0].dtype):
                a = self.vemit(fn, self.vfcast(a, e.dtype, av))
            ufunc = self.global_obj(op, _BINARY_FLOAT_OPS[op])
            src = args[0].dtype if is_float(args[0].dtype) else e.dtype
            return self.vfloat(f"{ufunc}({a}, {b})", e, (src,), True, fn)
        if len(args) == 2 and op in _BITWISE_OPS:
            a, _, av = self.vexpr(args[0], env, fn, block)
            b, _, bv = self.vexpr(args[1], env, fn, block)
            if not is_integer_like(e.dtype):
                raise _NoVector
            return self.vwrap(f"({a} {_BITWISE_OPS[op]} {b})", None, e.dtype, av or bv, fn)
        raise _NoVector

    def _v_scalar_call(self, e: E.Call, codes: list[str], ivs: list[Interval | None], fn: _Fn, block: str):
        """A call whose arguments are the same for all lanes: the scalar translation, applied
        to the already computed arguments."""
        params = [E.Var(f"arg{k}", a.dtype) for k, a in enumerate(e.args)]
        env = {p: _VarBind(c, iv) for p, c, iv in zip(params, codes, ivs)}
        code, iv = self.expr(E.Call(e.dtype, e.op, tuple(params)), env, fn, block=block)
        return self.vemit(fn, code), iv, False

    def vlazy(self, cond: E.PrimExpr, then: E.PrimExpr | None, other: E.PrimExpr | None, dtype: str,
              env: Env, fn: _Fn, block: str, true_const: str = "True", false_const: str = "False"):
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
            return out, _union(results[0][1], results[1][1]), results[0][2] or results[1][2]
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
        iv = _union(parts[0][1], parts[1][1]) if is_integer_like(dtype) else None
        if not is_integer_like(dtype) and dtype != "bool":
            fn.emit(f"{out} = {out}.astype({dt}, copy=False)")
        return out, iv, True


class _Codegen(_VectorCodegen):
    def __init__(self, func: PrimFunc, vectorize: bool = True) -> None:
        self.func = func
        self.vectorize = vectorize
        self._novec: set[int] = set()
        self.fns: list[_Fn] = []
        self.ns: dict[str, Any] = {
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
            name = self.global_obj("k", _FLOAT_TYPES[dtype](value))
            self._const_names[key] = name
        return name

    def float_ctor(self, dtype: str) -> str:
        if dtype not in _FLOAT_TYPES:
            raise InterpreterError(f"unsupported float dtype {dtype!r}")
        return self.global_obj(f"to_{dtype}", _FLOAT_TYPES[dtype])

    # ---- driver -------------------------------------------------------------------------
    def build(self) -> CompiledFunc:
        func = self.func
        env: Env = {}
        kernel = _Fn("_kernel", [])
        self.fns.append(kernel)
        arrays: list[tuple[int, E.Var, E.Buffer, str]] = []
        for position, var in enumerate(func.params):
            buf = func.buffer_map.get(var)
            if buf is None:
                name = self.fresh(var.name)
                kernel.params.append(name)
                interval = _dtype_range(var.dtype) if is_integer_like(var.dtype) else None
                env[var] = _VarBind(name, interval)
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
                    env[dim] = _VarBind(dname, (0, _dtype_range(dim.dtype)[1]))
            for axis, stride in enumerate(buf.strides):
                if isinstance(stride, E.Var) and stride not in env:
                    sname = self.fresh(stride.name)
                    kernel.emit(f"{sname} = {name}.strides[{axis}] // {name}.itemsize")
                    env[stride] = _VarBind(sname, _dtype_range(stride.dtype))
            if isinstance(buf.elem_offset, E.Var) and buf.elem_offset not in env:
                env[buf.elem_offset] = _VarBind("0", (0, 0))
        for position, var, buf, name in arrays:
            dims = self.dims_of(buf, env, kernel)
            want = "(" + "".join(f"{code}, " for code, _ in dims) + ")"
            kernel.emit(f"if {name}.shape != {want}:")
            kernel.emit(f"    _shape_err({position}, {var.name!r}, {buf.name!r}, {name}.shape, {want})")
            env[buf] = _BufBind(name, buf, dims, (name,) + tuple(c for c, _ in dims if _is_name(c)))
        self.stmt(func.body, env, kernel, "root")
        params = []
        for var in func.params:
            buf = func.buffer_map.get(var)
            if buf is None:
                params.append(_Param(var.name, None, var.dtype, False))
            else:
                params.append(_Param(var.name, buf, buf.dtype, buf in self.written))
        source = "\n".join(fn.source() for fn in reversed(self.fns))
        logger.debug("interpreter source for %s:\n%s", func.attrs.get("global_symbol", "main"), source)
        try:
            code = compile(source, "<msdb.ir.interpreter>", "exec")
        except (SyntaxError, RecursionError, MemoryError) as err:  # pragma: no cover - a codegen bug
            raise InterpreterError(f"cannot compile the function for interpretation: {err}") from err
        exec(code, self.ns)
        return CompiledFunc(func, tuple(params), self.ns["_kernel"], source)

    def dims_of(self, buf: E.Buffer, env: Env, fn: _Fn) -> tuple[tuple[str, Interval | None], ...]:
        """Code for each dimension of `buf`: a literal, a bound variable, or a temporary holding
        an expression's value (so bounds checks do not re-evaluate it)."""
        out = []
        for dim in buf.shape:
            code, interval = self.expr(dim, env, fn)
            if not (code.isdigit() or _is_name(code)):
                name = self.fresh("dim")
                fn.emit(f"{name} = {code}")
                code = name
            out.append((code, interval))
        return tuple(out)

    # ---- spilling deep nests into helper functions -----------------------------------------
    def scope_names(self, env: Env) -> list[str]:
        names: dict[str, None] = {}
        for bind in env.values():
            if isinstance(bind, (_VarBind, _VecBind)):
                if _is_name(bind.name):
                    names[bind.name] = None
            elif isinstance(bind, _BufBind):
                for n in bind.names:
                    names[n] = None
        return list(names)

    def spill(self, env: Env) -> tuple[_Fn, str]:
        args = self.scope_names(env)
        helper = _Fn(self.fresh("_part"), args)
        self.fns.append(helper)
        return helper, f"{helper.name}({', '.join(args)})"

    # ---- statements ---------------------------------------------------------------------
    def body(self, stmt: S.Stmt, env: Env, fn: _Fn, block: str) -> None:
        """Emit `stmt` one level deeper (under a `for`/`if` the caller emitted)."""
        fn.indent += 1
        before = len(fn.lines)
        self.stmt(stmt, env, fn, block)
        if len(fn.lines) == before:
            fn.emit("pass")
        fn.indent -= 1

    def stmt(self, stmt: S.Stmt, env: Env, fn: _Fn, block: str) -> None:
        if fn.indent > _MAX_NEST and isinstance(stmt, (S.For, S.IfThenElse, S.BlockRealize, S.Block)):
            helper, call = self.spill(env)
            fn.emit(call)
            fn = helper
        method = getattr(self, f"stmt_{type(stmt).__name__}", None)
        if method is None:
            raise InterpreterError(f"the interpreter does not support statement {type(stmt).__name__}")
        method(stmt, env, fn, block)

    def stmt_SeqStmt(self, stmt: S.SeqStmt, env: Env, fn: _Fn, block: str) -> None:
        for s in stmt.seq:
            self.stmt(s, env, fn, block)

    def stmt_Evaluate(self, stmt: S.Evaluate, env: Env, fn: _Fn, block: str) -> None:
        if isinstance(stmt.value, (E.IntImm, E.FloatImm, E.StringImm)):
            return
        code, _ = self.expr(stmt.value, env, fn, block=block)
        fn.emit(code)

    def stmt_LetStmt(self, stmt: S.LetStmt, env: Env, fn: _Fn, block: str) -> None:
        code, interval = self.expr(stmt.value, env, fn, block=block)
        name = self.fresh(stmt.var.name)
        fn.emit(f"{name} = {code}")
        self.stmt(stmt.body, {**env, stmt.var: _VarBind(name, interval)}, fn, block)

    def stmt_IfThenElse(self, stmt: S.IfThenElse, env: Env, fn: _Fn, block: str) -> None:
        code, _ = self.expr(stmt.condition, env, fn, block=block)
        fn.emit(f"if {code}:")
        self.body(stmt.then_case, env, fn, block)
        if stmt.else_case is not None:
            fn.emit("else:")
            self.body(stmt.else_case, env, fn, block)

    def stmt_For(self, stmt: S.For, env: Env, fn: _Fn, block: str, try_vector: bool = True) -> None:
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
        self.body(stmt.body, {**env, stmt.loop_var: _VarBind(name, interval)}, fn, block)

    def stmt_Block(self, stmt: S.Block, env: Env, fn: _Fn, block: str) -> None:
        self.stmt_BlockRealize(S.BlockRealize((), E.IntImm("bool", 1), stmt), env, fn, block)

    def stmt_BlockRealize(self, stmt: S.BlockRealize, env: Env, fn: _Fn, block: str) -> None:
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
            if _is_name(code) or _is_literal(code):
                inner[iv.var] = _VarBind(code, interval)
            else:
                vname = self.fresh(iv.var.name)
                fn.emit(f"{vname} = {code}")
                inner[iv.var] = _VarBind(vname, interval)
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

    def block_body(self, blk: S.Block, env: Env, fn: _Fn) -> None:
        name = blk.name_hint
        env = dict(env)
        for buf in blk.alloc_buffers:
            bname = self.fresh(buf.name)
            dims = self.dims_of(buf, env, fn)
            shape = "(" + "".join(f"{c}, " for c, _ in dims) + ")"
            dtype = self.global_obj("dt", to_numpy(buf.dtype))
            fn.emit(f"{bname} = _zeros({shape}, {dtype})")
            env[buf] = _BufBind(bname, buf, dims, (bname,) + tuple(c for c, _ in dims if _is_name(c)))
        for match in blk.match_buffers:
            self.match_buffer(match, env, fn, name)
        if blk.init is not None:
            conds = []
            for iv in blk.iter_vars:
                if iv.iter_type == S.IterType.COMM_REDUCE:
                    vcode = env[iv.var].name
                    mcode, _ = self.expr(_domain(iv).min, env, fn, block=name)
                    conds.append(f"{vcode} == {mcode}")
            if conds:
                fn.emit(f"if {' and '.join(conds)}:")
                self.body(blk.init, env, fn, name)
            else:
                self.stmt(blk.init, env, fn, name)
        self.stmt(blk.body, env, fn, name)

    def match_buffer(self, match: S.MatchBufferRegion, env: Env, fn: _Fn, block: str) -> None:
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
                if not (_is_name(code) or _is_literal(code)):
                    dname = self.fresh(dim.name)
                    fn.emit(f"{dname} = {code}")
                    code = dname
                env[dim] = _VarBind(code, ext_ivs[lead + axis])
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
                env[stride] = _VarBind(sname, _dtype_range(stride.dtype))
        if isinstance(buf.elem_offset, E.Var) and buf.elem_offset not in env:
            oname = self.fresh(buf.elem_offset.name)
            fn.emit(f"{oname} = _elem_offset({vname})")
            env[buf.elem_offset] = _VarBind(oname, _dtype_range(buf.elem_offset.dtype))
        env[buf] = _BufBind(vname, buf, dims, (vname,) + tuple(c for c, _ in dims if _is_name(c)))

    def stmt_BufferStore(self, stmt: S.BufferStore, env: Env, fn: _Fn, block: str) -> None:
        bind = self.buffer(stmt.buffer, env, block)
        root = stmt.buffer
        while root in self.alias:
            root = self.alias[root]
        self.written.add(root)
        value, _ = self.expr(stmt.value, env, fn, block=block)
        value = self.convert(value, stmt.value.dtype, stmt.buffer.dtype)
        idx_codes, checks = self.indices(stmt.indices, bind, env, fn, block)
        target = f"{bind.name}[{_index_tuple(idx_codes)}]"
        if checks:
            tmps = [self.tmp() for _ in idx_codes]
            for t, c in zip(tmps, idx_codes):
                fn.emit(f"{t} = {c}")
            conds = " and ".join(f"0 <= {tmps[a]} < {d}" for a, d in checks)
            fn.emit(f"if not ({conds}):")
            fn.emit(f"    _oob('store', {stmt.buffer.name!r}, {block!r}, ({''.join(t + ', ' for t in tmps)}), {bind.name}.shape)")
            target = f"{bind.name}[{_index_tuple(tmps)}]"
        fn.emit(f"{target} = {value}")

    def buffer(self, buf: E.Buffer, env: Env, block: str) -> _BufBind:
        bind = env.get(buf)
        if bind is None:
            raise InterpreterError(
                f"block {block!r} accesses buffer {buf.name!r}, which is neither a parameter nor allocated "
                f"or matched in an enclosing block"
            )
        return bind

    def indices(self, indices: tuple[E.PrimExpr, ...], bind: _BufBind, env: Env, fn: _Fn,
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
    def expr(self, e: E.PrimExpr, env: Env, fn: _Fn, depth: int = 0, block: str = "root") -> tuple[str, Interval | None]:
        """Python code computing `e` and, for integer-like dtypes, an interval holding every
        value it can take (None when unknown or not an integer)."""
        if depth > _MAX_EXPR_DEPTH:
            args = self.scope_names(env)
            helper = _Fn(self.fresh("_expr"), args)
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

    def expr_IntImm(self, e: E.IntImm, env: Env, fn: _Fn, depth: int, block: str) -> tuple[str, Interval | None]:
        if e.dtype == "bool":
            truth = int(bool(e.value))
            return ("True" if truth else "False"), (truth, truth)
        if is_float(e.dtype):
            return self.const(e.dtype, float(e.value)), None
        return (str(e.value) if e.value >= 0 else f"({e.value})"), (e.value, e.value)

    def expr_FloatImm(self, e: E.FloatImm, env: Env, fn: _Fn, depth: int, block: str) -> tuple[str, Interval | None]:
        if is_integer_like(e.dtype):
            v = int(e.value)
            return str(v) if v >= 0 else f"({v})", (v, v)
        return self.const(e.dtype, e.value), None

    def expr_StringImm(self, e: E.StringImm, env: Env, fn: _Fn, depth: int, block: str) -> tuple[str, Interval | None]:
        return repr(e.value), None

    def expr_Var(self, e: E.Var, env: Env, fn: _Fn, depth: int, block: str) -> tuple[str, Interval | None]:
        bind = env.get(e)
        if not isinstance(bind, _VarBind):
            raise InterpreterError(f"variable {e.name!r} is used in block {block!r} but never bound")
        return bind.name, bind.interval

    def wrap(self, code: str, interval: Interval | None, dtype: str) -> tuple[str, Interval]:
        """Reduce an integer result to `dtype`'s width unless its interval proves it fits."""
        lo, hi = _dtype_range(dtype)
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

    def operands(self, e: E.BinaryOp, env: Env, fn: _Fn, depth: int, block: str):
        a, ai = self.expr(e.a, env, fn, depth, block)
        b, bi = self.expr(e.b, env, fn, depth, block)
        return a, ai, b, bi

    def expr_Add(self, e: E.Add, env: Env, fn: _Fn, depth: int, block: str) -> tuple[str, Interval | None]:
        a, ai, b, bi = self.operands(e, env, fn, depth, block)
        if is_integer_like(e.dtype):
            return self.wrap(f"({a} + {b})", _iv_add(ai, bi), e.dtype)
        return self.arith_float(f"({a} + {b})", e), None

    def expr_Sub(self, e: E.Sub, env: Env, fn: _Fn, depth: int, block: str) -> tuple[str, Interval | None]:
        a, ai, b, bi = self.operands(e, env, fn, depth, block)
        if is_integer_like(e.dtype):
            return self.wrap(f"({a} - {b})", _iv_sub(ai, bi), e.dtype)
        return self.arith_float(f"({a} - {b})", e), None

    def expr_Mul(self, e: E.Mul, env: Env, fn: _Fn, depth: int, block: str) -> tuple[str, Interval | None]:
        a, ai, b, bi = self.operands(e, env, fn, depth, block)
        if is_integer_like(e.dtype):
            return self.wrap(f"({a} * {b})", _iv_mul(ai, bi), e.dtype)
        return self.arith_float(f"({a} * {b})", e), None

    def expr_Div(self, e: E.Div, env: Env, fn: _Fn, depth: int, block: str) -> tuple[str, Interval | None]:
        a, ai, b, bi = self.operands(e, env, fn, depth, block)
        if is_integer_like(e.dtype):
            iv = _iv_trunc_div(ai, bi)
            if ai and bi and ai[0] >= 0 and bi[0] > 0:
                return self.wrap(f"({a} // {b})", iv, e.dtype)
            return self.wrap(f"_tdiv({a}, {b})", iv, e.dtype)
        return self.arith_float(f"({a} / {b})", e), None

    def expr_Mod(self, e: E.Mod, env: Env, fn: _Fn, depth: int, block: str) -> tuple[str, Interval | None]:
        a, ai, b, bi = self.operands(e, env, fn, depth, block)
        if is_integer_like(e.dtype):
            iv = _iv_trunc_mod(ai, bi)
            if ai and bi and ai[0] >= 0 and bi[0] > 0:
                return self.wrap(f"({a} % {b})", iv, e.dtype)
            return self.wrap(f"_tmod({a}, {b})", iv, e.dtype)
        return self.arith_float(f"np.fmod({a}, {b})", e), None

    def expr_FloorDiv(self, e: E.FloorDiv, env: Env, fn: _Fn, depth: int, block: str) -> tuple[str, Interval | None]:
        a, ai, b, bi = self.operands(e, env, fn, depth, block)
        if is_integer_like(e.dtype):
            return self.wrap(f"({a} // {b})", _iv_floor_div(ai, bi), e.dtype)
        return self.arith_float(f"np.floor({a} / {b})", e), None

    def expr_FloorMod(self, e: E.FloorMod, env: Env, fn: _Fn, depth: int, block: str) -> tuple[str, Interval | None]:
        a, ai, b, bi = self.operands(e, env, fn, depth, block)
        if is_integer_like(e.dtype):
            return self.wrap(f"({a} % {b})", _iv_floor_mod(ai, bi), e.dtype)
        t1, t2 = self.tmp(), self.tmp()
        return self.arith_float(f"(({t1} := {a}) - np.floor({t1} / ({t2} := {b})) * {t2})", e), None

    def expr_Min(self, e: E.Min, env: Env, fn: _Fn, depth: int, block: str) -> tuple[str, Interval | None]:
        a, ai, b, bi = self.operands(e, env, fn, depth, block)
        ta, tb = self.tmp(), self.tmp()
        code = f"({ta} if ({ta} := {a}) < ({tb} := {b}) else {tb})"
        if is_integer_like(e.dtype):
            return self.wrap(code, _iv_min(ai, bi), e.dtype)
        return self.arith_float(code, e), None

    def expr_Max(self, e: E.Max, env: Env, fn: _Fn, depth: int, block: str) -> tuple[str, Interval | None]:
        a, ai, b, bi = self.operands(e, env, fn, depth, block)
        ta, tb = self.tmp(), self.tmp()
        code = f"({ta} if ({ta} := {a}) > ({tb} := {b}) else {tb})"
        if is_integer_like(e.dtype):
            return self.wrap(code, _iv_max(ai, bi), e.dtype)
        return self.arith_float(code, e), None

    _CMP = {"EQ": "==", "NE": "!=", "LT": "<", "LE": "<=", "GT": ">", "GE": ">="}

    def expr_CmpOp(self, e: E.CmpOp, env: Env, fn: _Fn, depth: int, block: str) -> tuple[str, Interval | None]:
        a, _, b, _ = self.operands(e, env, fn, depth, block)
        kind = type(e).__name__
        if kind == "And":
            return f"({a} and {b})", (0, 1)
        if kind == "Or":
            return f"({a} or {b})", (0, 1)
        op = self._CMP.get(kind)
        if op is None:
            raise InterpreterError(f"the interpreter does not support comparison {kind}")
        return f"({a} {op} {b})", (0, 1)

    def expr_Not(self, e: E.Not, env: Env, fn: _Fn, depth: int, block: str) -> tuple[str, Interval | None]:
        a, _ = self.expr(e.a, env, fn, depth, block)
        return f"(not {a})", (0, 1)

    def expr_Select(self, e: E.Select, env: Env, fn: _Fn, depth: int, block: str) -> tuple[str, Interval | None]:
        c, _ = self.expr(e.condition, env, fn, depth, block)
        t, ti = self.expr(e.true_value, env, fn, depth, block)
        f, fi = self.expr(e.false_value, env, fn, depth, block)
        return f"_select({c}, {t}, {f})", _union(ti, fi)

    def expr_Cast(self, e: E.Cast, env: Env, fn: _Fn, depth: int, block: str) -> tuple[str, Interval | None]:
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
            conv = self.global_obj("f2i", _make_f2i(dst))
            return f"{conv}({code})", _dtype_range(dst)
        if is_float(dst):
            return f"{self.float_ctor(dst)}({code})", None
        raise InterpreterError(f"cannot cast {src} to {dst}")

    def convert(self, code: str, src: str, dst: str) -> str:
        """A stored value must have the buffer's dtype (TVM's IR guarantees it; be lenient)."""
        if src == dst:
            return code
        return self.cast(code, _dtype_range(src) if is_integer_like(src) else None, src, dst)[0]

    def expr_BufferLoad(self, e: E.BufferLoad, env: Env, fn: _Fn, depth: int, block: str) -> tuple[str, Interval | None]:
        bind = self.buffer(e.buffer, env, block)
        idx, checks = self.indices(e.indices, bind, env, fn, block)
        if checks:
            tmps = [self.tmp() for _ in idx]
            assigns = "(" + "".join(f"({t} := {c}), " for t, c in zip(tmps, idx)) + ")"
            conds = " and ".join(f"0 <= {tmps[a]} < {d}" for a, d in checks)
            oob = f"_oob('load', {e.buffer.name!r}, {block!r}, ({''.join(t + ', ' for t in tmps)}), {bind.name}.shape)"
            code = f"({bind.name}[{_index_tuple(tmps)}] if {assigns} and {conds} else {oob})"
        else:
            code = f"{bind.name}[{_index_tuple(idx)}]"
        if e.dtype == "bool":
            return f"bool({code})", (0, 1)
        if is_integer_like(e.dtype):
            return f"int({code})", _dtype_range(e.dtype)
        return code, None

    def expr_Call(self, e: E.Call, env: Env, fn: _Fn, depth: int, block: str) -> tuple[str, Interval | None]:
        op = e.op[4:] if e.op.startswith("tir.") else e.op
        args = e.args
        if op == "if_then_else":
            _expect_args(e, op, 3, block)
            c, _ = self.expr(args[0], env, fn, depth, block)
            t, ti = self.expr(args[1], env, fn, depth, block)
            f, fi = self.expr(args[2], env, fn, depth, block)
            return f"({t} if {c} else {f})", _union(ti, fi)
        if op in ("max_value", "min_value"):
            limit = value_limit(e.dtype, upper=op == "max_value")
            if isinstance(limit, int):
                return (str(limit) if limit >= 0 else f"({limit})"), (limit, limit)
            return self.const(e.dtype, limit), None
        if op in ("infinity", "inf"):
            return self.const(e.dtype, math.inf), None
        if op == "likely":
            _expect_args(e, op, 1, block)
            return self.expr(args[0], env, fn, depth, block)
        if op in ("isnan", "isinf", "isfinite"):
            _expect_args(e, op, 1, block)
            a, _ = self.expr(args[0], env, fn, depth, block)
            if not is_float(args[0].dtype):
                truth = int(op == "isfinite")
                return ("True" if truth else "False"), (truth, truth)
            ufunc = self.global_obj(op, getattr(np, op))
            return f"bool({ufunc}({a}))", (0, 1)
        if op in ("fabs", "abs"):
            _expect_args(e, op, 1, block)
            a, ai = self.expr(args[0], env, fn, depth, block)
            if is_integer_like(e.dtype):
                return self.wrap(f"abs({a})", _iv_abs(ai), e.dtype)
            return self.call_result(f"abs({a})", args[0].dtype, e.dtype), None
        if op in _UNARY_FLOAT_OPS:
            _expect_args(e, op, 1, block)
            a, ai = self.expr(args[0], env, fn, depth, block)
            if op in _ROUNDING_OPS and is_integer_like(args[0].dtype):
                return self.cast(a, ai, args[0].dtype, e.dtype)
            ufunc = self.global_obj(op, _UNARY_FLOAT_OPS[op])
            if is_integer_like(e.dtype):
                raise InterpreterError(f"op {op!r} in block {block!r} must have a float dtype, not {e.dtype}")
            arg_code = a if is_float(args[0].dtype) else f"{self.float_ctor(e.dtype)}({a})"
            src = args[0].dtype if is_float(args[0].dtype) else e.dtype
            return self.call_result(f"{ufunc}({arg_code})", src, e.dtype), None
        if op in _BINARY_FLOAT_OPS:
            _expect_args(e, op, 2, block)
            a, _ = self.expr(args[0], env, fn, depth, block)
            b, _ = self.expr(args[1], env, fn, depth, block)
            if is_integer_like(e.dtype):
                if op == "pow":
                    return self.wrap(f"({a} ** {b})", None, e.dtype)
                if op == "fmod":
                    return self.wrap(f"_tmod({a}, {b})", None, e.dtype)
                raise InterpreterError(f"op {op!r} in block {block!r} must have a float dtype, not {e.dtype}")
            ufunc = self.global_obj(op, _BINARY_FLOAT_OPS[op])
            if not is_float(args[0].dtype):
                a = f"{self.float_ctor(e.dtype)}({a})"
            return self.call_result(f"{ufunc}({a}, {b})", e.dtype if not is_float(args[0].dtype) else args[0].dtype, e.dtype), None
        if op in _BITWISE_OPS:
            _expect_args(e, op, 2, block)
            a, _ = self.expr(args[0], env, fn, depth, block)
            b, _ = self.expr(args[1], env, fn, depth, block)
            if not is_integer_like(e.dtype):
                raise InterpreterError(f"op {op!r} in block {block!r} needs integer operands, not {e.dtype}")
            return self.wrap(f"({a} {_BITWISE_OPS[op]} {b})", None, e.dtype)
        if op == "bitwise_not":
            _expect_args(e, op, 1, block)
            a, _ = self.expr(args[0], env, fn, depth, block)
            return self.wrap(f"(~{a})", None, e.dtype)
        raise InterpreterError(f"the interpreter does not support op {e.op!r} (in block {block!r})")

    def call_result(self, code: str, src: str, dst: str) -> str:
        if dst == "bfloat16":
            return f"_bf16({code})"
        if src != dst:
            return f"{self.float_ctor(dst)}({code})"
        return code


# =============================================================================================
# Small helpers
# =============================================================================================


def _is_name(code: str) -> bool:
    return code.isidentifier() and not keyword.iskeyword(code)


def _is_literal(code: str) -> bool:
    return code.isdigit() or code in ("True", "False") or bool(re.fullmatch(r"\(-\d+\)", code))


def _index_tuple(codes: list[str]) -> str:
    if not codes:
        return "()"
    return ", ".join(codes)


def _optional(op: Callable[[Interval, Interval], Interval]) -> Callable[[Interval | None, Interval | None], Interval | None]:
    """`op` on intervals that may be unknown (None): unknown in, unknown out."""

    def lifted(a: Interval | None, b: Interval | None) -> Interval | None:
        return None if a is None or b is None else op(a, b)

    return lifted


_union = _optional(intervals.union)
_iv_add = _optional(intervals.add)
_iv_sub = _optional(intervals.sub)
_iv_mul = _optional(intervals.mul)
_iv_min = _optional(intervals.minimum)
_iv_max = _optional(intervals.maximum)
_iv_trunc_mod = _optional(intervals.truncmod_bound)
_iv_floor_mod = _optional(intervals.floormod)
_iv_floor_div = _optional(intervals.floordiv)
_iv_trunc_div = _optional(intervals.truncdiv_bound)


def _iv_abs(a: Interval | None) -> Interval | None:
    return None if a is None else intervals.absolute(a)


def _expect_args(e: E.Call, op: str, n: int, block: str) -> None:
    if len(e.args) != n:
        raise InterpreterError(f"op {op!r} in block {block!r} takes {n} arguments, got {len(e.args)}")
