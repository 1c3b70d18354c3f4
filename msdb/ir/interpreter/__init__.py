"""Reference interpreter: run a PrimFunc on numpy arrays exactly as TensorIR would, so schedule
transformations can be checked numerically (docs/architecture.md, "Reference interpreter").

`interpret(func, *arrays)` follows TVM's calling convention: one array per buffer parameter, in
order, outputs written in place. Modules: `entry` (the entry points), `scalar` and `vector` (the two
code generators), `emit` (what both build with), `runtime` (`CompiledFunc` and the helpers the
generated code calls)."""

from __future__ import annotations

from msdb.ir.interpreter.entry import compile_func, interpret
from msdb.ir.interpreter.runtime import CompiledFunc, InterpreterError

__all__ = ["InterpreterError", "CompiledFunc", "compile_func", "interpret"]
