"""CPU code generation with llvmlite.

    art = compile_module(mod)          # lower -> emit -> O3 -> object code
    art.object_code, art.entry, art.args

Only this package imports llvmlite. Its modules in pipeline order (`lower`, `analysis`,
`vectorize`, `emit`, `emit_expr`, `state`, `types`, `jit`): see docs/architecture.md, "Code
generation".
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

from msdb.ir.function import IRModule, PrimFunc
from msdb.tuner.codegen.errors import CodegenError

__all__ = ["CodegenError", "CompiledModule", "ArgSpec", "compile_module", "emit_llvm_ir"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ArgSpec:
    """One kernel argument: a dense C-contiguous array of `dtype` and `shape`."""

    name: str
    dtype: str
    shape: tuple[int, ...]

    def as_json(self) -> list[Any]:
        return ["TENSOR", self.dtype, list(self.shape)]


@dataclass
class CompiledModule:
    """Object code of one kernel and what is needed to call it."""

    name: str
    entry: str
    packed: str
    timed: str
    args: tuple[ArgSpec, ...]
    object_code: bytes
    target: dict[str, str]
    llvm_ir: str = ""
    timings: dict[str, float] = field(default_factory=dict)
    _optimized: Any = None  # llvmlite ModuleRef (same process only)

    def meta(self) -> dict[str, Any]:
        """JSON-able description stored next to the object file."""
        return {
            "name": self.name, "entry": self.entry, "packed": self.packed, "timed": self.timed,
            "args": [[a.name, a.dtype, list(a.shape)] for a in self.args], "target": self.target,
        }

    def assembly(self) -> str:
        """The optimized module's assembly (only in the process that compiled it)."""
        from msdb.tuner.codegen.jit import TargetSpec, emit_assembly

        if self._optimized is None:
            raise CodegenError("assembly is only available in the process that compiled the module")
        return emit_assembly(self._optimized, TargetSpec(**self.target))

    def optimized_ir(self) -> str:
        if self._optimized is None:
            raise CodegenError("the optimized IR is only available in the process that compiled the module")
        return str(self._optimized)


def emit_llvm_ir(mod: IRModule | PrimFunc, target: Any = None, options: Any = None) -> tuple[str, Any, Any]:
    """(unoptimized LLVM IR text, entry points, lowered function) of a module's entry function."""
    from msdb.tuner.codegen.emit import EmitOptions, emit_module
    from msdb.tuner.codegen.jit import spec_for, vector_register_bits
    from msdb.tuner.codegen.lower import lower_module

    spec = spec_for(target)
    lowered = lower_module(IRModule.coerce(mod))
    module, entries = emit_module(lowered, options or EmitOptions(), spec.triple, vector_register_bits(spec))
    return str(module), entries, lowered


def compile_module(mod: IRModule | PrimFunc, target: Any = None, options: Any = None) -> CompiledModule:
    """Lower, emit, optimize (O3) and compile the entry function of `mod` to object code for
    `target` (an msdb Target / config / string; None = this machine)."""
    from msdb.tuner.codegen.analysis import static_shape
    from msdb.tuner.codegen.emit import EmitOptions, emit_module
    from msdb.tuner.codegen.jit import compile_ir, spec_for, vector_register_bits
    from msdb.tuner.codegen.lower import lower_module

    started = time.perf_counter()
    spec = spec_for(target)
    lowered = lower_module(IRModule.coerce(mod))
    t_lower = time.perf_counter()
    module, entries = emit_module(lowered, options or EmitOptions(), spec.triple, vector_register_bits(spec))
    text = str(module)
    t_emit = time.perf_counter()
    try:
        optimized, obj = compile_ir(text, spec)
    except RuntimeError as err:  # LLVM verifier / parser: a bug in the emitter, say where
        raise CodegenError(f"LLVM rejected the generated IR for {lowered.name}: {err}") from err
    t_llvm = time.perf_counter()
    args = tuple(ArgSpec(b.name, b.dtype, static_shape(b)) for b in lowered.params)
    timings = {"lower": t_lower - started, "emit": t_emit - t_lower, "llvm": t_llvm - t_emit}
    logger.debug("compiled %s in %.1f ms (%s)", lowered.name, 1e3 * (t_llvm - started),
                 ", ".join(f"{k} {1e3 * v:.1f}" for k, v in timings.items()))
    return CompiledModule(lowered.name, entries.main, entries.packed, entries.timed, args, obj,
                          spec.as_json(), text, timings, optimized)
