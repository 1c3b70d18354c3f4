"""The interpreter's entry points: `interpret` and `compile_func`, with the cache of compiled
functions (docs/architecture.md, "Reference interpreter")."""

from __future__ import annotations

import sys
from typing import Any

from msdb.identity_cache import IdentityCache
from msdb.ir.function import IRModule, PrimFunc
from msdb.ir.interpreter.runtime import CompiledFunc, InterpreterError
from msdb.ir.interpreter.scalar import Codegen

_CACHE_SIZE = 64
_RECURSION_LIMIT = 20000


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
    return _cache.get(func, lambda: _compile(func, vectorize), extra=vectorize)


def _compile(func: PrimFunc, vectorize: bool) -> CompiledFunc:
    limit = sys.getrecursionlimit()
    # The translator recurses once per IR nesting level; deep (machine-made) expressions need
    # more than Python's default 1000 frames, which CPython 3.11+ provides without C stack.
    sys.setrecursionlimit(max(limit, _RECURSION_LIMIT))
    try:
        return Codegen(func, vectorize).build()
    except RecursionError:
        raise InterpreterError("the function is nested too deeply to interpret") from None
    finally:
        sys.setrecursionlimit(limit)


_cache: IdentityCache[CompiledFunc] = IdentityCache(_CACHE_SIZE)


def _entry(mod_or_func: IRModule | PrimFunc) -> PrimFunc:
    if isinstance(mod_or_func, PrimFunc):
        return mod_or_func
    if isinstance(mod_or_func, IRModule):
        try:
            return mod_or_func.main
        except KeyError as err:
            raise InterpreterError(str(err.args[0])) from None
    raise InterpreterError(f"expected an IRModule or PrimFunc, got {type(mod_or_func).__name__}")
