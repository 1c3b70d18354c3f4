"""Reference interpreter: run a PrimFunc on numpy arrays, exactly as TensorIR would.

Why it exists: schedule transformations (split, reorder, cache_read, compute_at, ...) must leave
a function's meaning unchanged, and without a code generator the only way to check that is to
run the function before and after on the same inputs and compare (DESIGN.md section 1).

Calling convention (TVM's): `interpret(func, *arrays)` maps the arrays to the entry function's
buffer parameters in order; outputs are written in place; nothing is returned.

Approach: a *source compiler*. Walking the IR tree per element is far too slow (a 64^3 matmul is
262k block executions), and even a closure compiler pays one Python call per IR node. So the
function is translated once into Python source with one nested `for` per IR loop, block iter
vars as plain locals and buffer accesses as numpy scalar indexing, then `exec`'d. Per element
this costs a few numpy scalar operations, about 1 microsecond for a matmul step.

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
from msdb.ir.dtype import bits, is_float, is_int, is_uint, to_numpy
from msdb.ir.function import IRModule, PrimFunc

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


def interpret(mod_or_func: IRModule | PrimFunc, *arrays: Any) -> None:
    """Run the entry function of `mod_or_func` on `arrays` (TVM's calling convention: one numpy
    array per buffer parameter, in order, outputs written in place; scalar parameters take
    Python numbers). Raises `InterpreterError` on a mismatching argument or a faulty access."""
    compile_func(mod_or_func)(*arrays)


def compile_func(mod_or_func: IRModule | PrimFunc) -> CompiledFunc:
    """Translate the entry function once; the result can be called many times. Compiled
    functions are cached per function object (IR nodes are immutable)."""
    func = _entry(mod_or_func)
    key = id(func)
    hit = _cache.get(key)
    if hit is not None and hit[0] is func:
        return hit[1]
    limit = sys.getrecursionlimit()
    # The translator recurses once per IR nesting level; deep (machine-made) expressions need
    # more than Python's default 1000 frames, which CPython 3.11+ provides without C stack.
    sys.setrecursionlimit(max(limit, _RECURSION_LIMIT))
    try:
        compiled = _Codegen(func).build()
    except RecursionError:
        raise InterpreterError("the function is nested too deeply to interpret") from None
    finally:
        sys.setrecursionlimit(limit)
    if len(_cache) >= _CACHE_SIZE:
        _cache.pop(next(iter(_cache)))
    _cache[key] = (func, compiled)
    return compiled


_cache: dict[int, tuple[PrimFunc, CompiledFunc]] = {}


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
    if dtype == "bool":
        return (0, 1)
    width = bits(dtype)
    if is_uint(dtype):
        return (0, (1 << width) - 1)
    if is_int(dtype):
        return (-(1 << (width - 1)), (1 << (width - 1)) - 1)
    raise InterpreterError(f"dtype {dtype!r} is not an integer type")


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


def _rt_tdiv(a: int, b: int) -> int:
    if b == 0:
        raise ZeroDivisionError
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _rt_tmod(a: int, b: int) -> int:
    return a - b * _rt_tdiv(a, b)


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


class _Codegen:
    def __init__(self, func: PrimFunc) -> None:
        self.func = func
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
            "_isfinite": math.isfinite,
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
        name = f"_{hint}_{self._counter}"
        self._counter += 1
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
                interval = _dtype_range(var.dtype) if _is_intlike(var.dtype) else None
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
            if isinstance(bind, _VarBind):
                if _is_name(bind.name):
                    names[bind.name] = None
            else:
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

    def stmt_For(self, stmt: S.For, env: Env, fn: _Fn, block: str) -> None:
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
                    mcode, _ = self.expr(iv.dom.min, env, fn, block=name)
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
            if not _is_intlike(index.dtype):
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
        if method is None:
            if isinstance(e, E.CmpOp):
                method = self.expr_CmpOp
            else:
                raise InterpreterError(f"the interpreter does not support expression {type(e).__name__}")
        return method(e, env, fn, depth + 1, block)

    def expr_IntImm(self, e: E.IntImm, env: Env, fn: _Fn, depth: int, block: str) -> tuple[str, Interval | None]:
        if e.dtype == "bool":
            return ("True" if e.value else "False"), (int(bool(e.value)),) * 2  # type: ignore[return-value]
        if is_float(e.dtype):
            return self.const(e.dtype, float(e.value)), None
        return (str(e.value) if e.value >= 0 else f"({e.value})"), (e.value, e.value)

    def expr_FloatImm(self, e: E.FloatImm, env: Env, fn: _Fn, depth: int, block: str) -> tuple[str, Interval | None]:
        if _is_intlike(e.dtype):
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
        if _is_intlike(e.dtype):
            iv = (ai[0] + bi[0], ai[1] + bi[1]) if ai and bi else None
            return self.wrap(f"({a} + {b})", iv, e.dtype)
        return self.arith_float(f"({a} + {b})", e), None

    def expr_Sub(self, e: E.Sub, env: Env, fn: _Fn, depth: int, block: str) -> tuple[str, Interval | None]:
        a, ai, b, bi = self.operands(e, env, fn, depth, block)
        if _is_intlike(e.dtype):
            iv = (ai[0] - bi[1], ai[1] - bi[0]) if ai and bi else None
            return self.wrap(f"({a} - {b})", iv, e.dtype)
        return self.arith_float(f"({a} - {b})", e), None

    def expr_Mul(self, e: E.Mul, env: Env, fn: _Fn, depth: int, block: str) -> tuple[str, Interval | None]:
        a, ai, b, bi = self.operands(e, env, fn, depth, block)
        if _is_intlike(e.dtype):
            iv = None
            if ai and bi:
                corners = [x * y for x in ai for y in bi]
                iv = (min(corners), max(corners))
            return self.wrap(f"({a} * {b})", iv, e.dtype)
        return self.arith_float(f"({a} * {b})", e), None

    def expr_Div(self, e: E.Div, env: Env, fn: _Fn, depth: int, block: str) -> tuple[str, Interval | None]:
        a, ai, b, bi = self.operands(e, env, fn, depth, block)
        if _is_intlike(e.dtype):
            iv = _div_interval(ai, bi, trunc=True)
            if ai and bi and ai[0] >= 0 and bi[0] > 0:
                return self.wrap(f"({a} // {b})", iv, e.dtype)
            return self.wrap(f"_tdiv({a}, {b})", iv, e.dtype)
        return self.arith_float(f"({a} / {b})", e), None

    def expr_Mod(self, e: E.Mod, env: Env, fn: _Fn, depth: int, block: str) -> tuple[str, Interval | None]:
        a, ai, b, bi = self.operands(e, env, fn, depth, block)
        if _is_intlike(e.dtype):
            iv = None
            if ai and bi:
                mag = max(abs(bi[0]), abs(bi[1]))
                lo = 0 if ai[0] >= 0 else max(ai[0], -(mag - 1))
                hi = 0 if ai[1] <= 0 else min(ai[1], mag - 1)
                iv = (min(lo, 0), max(hi, 0))
            if ai and bi and ai[0] >= 0 and bi[0] > 0:
                return self.wrap(f"({a} % {b})", iv, e.dtype)
            return self.wrap(f"_tmod({a}, {b})", iv, e.dtype)
        return self.arith_float(f"np.fmod({a}, {b})", e), None

    def expr_FloorDiv(self, e: E.FloorDiv, env: Env, fn: _Fn, depth: int, block: str) -> tuple[str, Interval | None]:
        a, ai, b, bi = self.operands(e, env, fn, depth, block)
        if _is_intlike(e.dtype):
            return self.wrap(f"({a} // {b})", _div_interval(ai, bi, trunc=False), e.dtype)
        return self.arith_float(f"np.floor({a} / {b})", e), None

    def expr_FloorMod(self, e: E.FloorMod, env: Env, fn: _Fn, depth: int, block: str) -> tuple[str, Interval | None]:
        a, ai, b, bi = self.operands(e, env, fn, depth, block)
        if _is_intlike(e.dtype):
            iv = None
            if ai and bi:
                if bi[0] > 0:
                    iv = (ai[0], ai[1]) if ai[0] >= 0 and ai[1] < bi[0] else (0, bi[1] - 1)
                elif bi[1] < 0:
                    iv = (bi[0] + 1, 0)
                else:
                    iv = (min(bi[0] + 1, 0), max(bi[1] - 1, 0))
            return self.wrap(f"({a} % {b})", iv, e.dtype)
        t1, t2 = self.tmp(), self.tmp()
        return self.arith_float(f"(({t1} := {a}) - np.floor({t1} / ({t2} := {b})) * {t2})", e), None

    def expr_Min(self, e: E.Min, env: Env, fn: _Fn, depth: int, block: str) -> tuple[str, Interval | None]:
        a, ai, b, bi = self.operands(e, env, fn, depth, block)
        ta, tb = self.tmp(), self.tmp()
        code = f"({ta} if ({ta} := {a}) < ({tb} := {b}) else {tb})"
        if _is_intlike(e.dtype):
            iv = (min(ai[0], bi[0]), min(ai[1], bi[1])) if ai and bi else None
            return self.wrap(code, iv, e.dtype)
        return self.arith_float(code, e), None

    def expr_Max(self, e: E.Max, env: Env, fn: _Fn, depth: int, block: str) -> tuple[str, Interval | None]:
        a, ai, b, bi = self.operands(e, env, fn, depth, block)
        ta, tb = self.tmp(), self.tmp()
        code = f"({ta} if ({ta} := {a}) > ({tb} := {b}) else {tb})"
        if _is_intlike(e.dtype):
            iv = (max(ai[0], bi[0]), max(ai[1], bi[1])) if ai and bi else None
            return self.wrap(code, iv, e.dtype)
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
        if _is_intlike(dst):
            if _is_intlike(src):
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
        return self.cast(code, _dtype_range(src) if _is_intlike(src) else None, src, dst)[0]

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
        if _is_intlike(e.dtype):
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
            if _is_intlike(e.dtype):
                lo, hi = _dtype_range(e.dtype)
                v = hi if op == "max_value" else lo
                return (str(v) if v >= 0 else f"({v})"), (v, v)
            info = np.finfo(to_numpy(e.dtype))
            return self.const(e.dtype, float(info.max if op == "max_value" else info.min)), None
        if op in ("infinity", "inf"):
            return self.const(e.dtype, math.inf), None
        if op == "likely":
            _expect_args(e, op, 1, block)
            return self.expr(args[0], env, fn, depth, block)
        if op in ("isnan", "isinf", "isfinite"):
            _expect_args(e, op, 1, block)
            a, _ = self.expr(args[0], env, fn, depth, block)
            if not is_float(args[0].dtype):
                return ("True" if op == "isfinite" else "False"), (int(op == "isfinite"),) * 2  # type: ignore[return-value]
            ufunc = self.global_obj(op, getattr(np, op))
            return f"bool({ufunc}({a}))", (0, 1)
        if op in ("fabs", "abs"):
            _expect_args(e, op, 1, block)
            a, ai = self.expr(args[0], env, fn, depth, block)
            if _is_intlike(e.dtype):
                iv = None
                if ai:
                    hi = max(abs(ai[0]), abs(ai[1]))
                    lo = 0 if ai[0] <= 0 <= ai[1] else min(abs(ai[0]), abs(ai[1]))
                    iv = (lo, hi)
                return self.wrap(f"abs({a})", iv, e.dtype)
            return self.call_result(f"abs({a})", args[0].dtype, e.dtype), None
        if op in _UNARY_FLOAT_OPS:
            _expect_args(e, op, 1, block)
            a, ai = self.expr(args[0], env, fn, depth, block)
            if op in _ROUNDING_OPS and _is_intlike(args[0].dtype):
                return self.cast(a, ai, args[0].dtype, e.dtype)
            ufunc = self.global_obj(op, _UNARY_FLOAT_OPS[op])
            if _is_intlike(e.dtype):
                raise InterpreterError(f"op {op!r} in block {block!r} must have a float dtype, not {e.dtype}")
            arg_code = a if is_float(args[0].dtype) else f"{self.float_ctor(e.dtype)}({a})"
            src = args[0].dtype if is_float(args[0].dtype) else e.dtype
            return self.call_result(f"{ufunc}({arg_code})", src, e.dtype), None
        if op in _BINARY_FLOAT_OPS:
            _expect_args(e, op, 2, block)
            a, _ = self.expr(args[0], env, fn, depth, block)
            b, _ = self.expr(args[1], env, fn, depth, block)
            if _is_intlike(e.dtype):
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
            if not _is_intlike(e.dtype):
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


def _is_intlike(dtype: str) -> bool:
    return is_int(dtype) or is_uint(dtype) or dtype == "bool"


def _is_name(code: str) -> bool:
    return code.isidentifier() and not keyword.iskeyword(code)


def _is_literal(code: str) -> bool:
    return code.isdigit() or code in ("True", "False") or bool(re.fullmatch(r"\(-\d+\)", code))


def _index_tuple(codes: list[str]) -> str:
    if not codes:
        return "()"
    return ", ".join(codes)


def _union(a: Interval | None, b: Interval | None) -> Interval | None:
    if a is None or b is None:
        return None
    return (min(a[0], b[0]), max(a[1], b[1]))


def _div_interval(a: Interval | None, b: Interval | None, trunc: bool) -> Interval | None:
    """Bounds of a / b over the operand intervals (corners suffice: the quotient is monotone in
    each operand on each side of zero; a zero divisor raises at run time, so it is left out)."""
    if a is None or b is None:
        return None
    divisors = {d for d in (b[0], b[1]) if d != 0}
    if b[0] < 0 < b[1] or b[0] == 0 or b[1] == 0:
        divisors.update(d for d in (-1, 1) if b[0] <= d <= b[1])
    if not divisors:
        return None
    values = []
    for x in (a[0], a[1]):
        for d in divisors:
            values.append(_rt_tdiv(x, d) if trunc else x // d)
    return (min(values), max(values))


def _expect_args(e: E.Call, op: str, n: int, block: str) -> None:
    if len(e.args) != n:
        raise InterpreterError(f"op {op!r} in block {block!r} takes {n} arguments, got {len(e.args)}")
