"""`build(mod) -> Kernel`: compile a (scheduled) module for this CPU and call it on numpy arrays.

`msdb.tuner.build` is this module's `build` function (the module is named `kernel` so that the
package attribute names the function, whatever was imported before).

    kernel = build(sch.mod)
    kernel(a, b, c)                                  # TVM's convention: outputs written in place
    kernel.time_evaluator(number=3, repeat=1, min_repeat_ms=100)(a, b, c).results

The kernel runs in this process (like TVM's `tvm.build`); use `LocalBuilder`/`LocalRunner`
for measurements that must survive a crashing or hanging candidate.
"""

from __future__ import annotations

import ctypes
import logging
from functools import partial
from typing import Any, Callable, Sequence

from msdb.ir.function import IRModule, PrimFunc
from msdb.tuner.codegen import ArgSpec, CodegenError, CompiledModule, compile_module
from msdb.tuner.measure.timing import TimingResult, evaluate, flush_arguments

__all__ = ["Kernel", "build", "load_kernel"]

logger = logging.getLogger(__name__)


def _check_arrays(args: Sequence[ArgSpec], arrays: Sequence[Any], name: str) -> list[int]:
    """Data pointers of the arrays, after checking they match the kernel's signature."""
    import numpy as np

    if len(arrays) != len(args):
        raise CodegenError(f"{name} takes {len(args)} arrays ({', '.join(a.name for a in args)}), got {len(arrays)}")
    pointers = []
    for spec, arr in zip(args, arrays):
        if not isinstance(arr, np.ndarray):
            raise CodegenError(f"{name}: argument {spec.name} must be a numpy array, got {type(arr).__name__}")
        expected = np.dtype("bool") if spec.dtype == "bool" else np.dtype(spec.dtype)
        if arr.dtype != expected:
            raise CodegenError(f"{name}: argument {spec.name} has dtype {arr.dtype}, expected {spec.dtype}")
        if tuple(arr.shape) != tuple(spec.shape):
            raise CodegenError(f"{name}: argument {spec.name} has shape {arr.shape}, expected {tuple(spec.shape)}")
        if not arr.flags.c_contiguous:
            raise CodegenError(f"{name}: argument {spec.name} must be C-contiguous (use np.ascontiguousarray)")
        pointers.append(arr.ctypes.data)
    return pointers


class Kernel:
    """A compiled kernel loaded into this process."""

    def __init__(self, compiled: CompiledModule, loaded: Any | None = None) -> None:
        from msdb.tuner.codegen.jit import TargetSpec, load_object

        self.compiled = compiled
        self._loaded = loaded or load_object(compiled.object_code, TargetSpec(**compiled.target))
        n = len(compiled.args)
        self._fn = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * n))(self._loaded.address(compiled.entry))
        self._timed = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64)(
            self._loaded.address(compiled.timed))
        self.num_threads: int | None = None

    @property
    def name(self) -> str:
        return self.compiled.name

    @property
    def args(self) -> tuple[ArgSpec, ...]:
        return self.compiled.args

    @property
    def llvm_ir(self) -> str:
        """The LLVM IR as emitted (before optimization)."""
        return self.compiled.llvm_ir

    def optimized_ir(self) -> str:
        return self.compiled.optimized_ir()

    def assembly(self) -> str:
        return self.compiled.assembly()

    def _prepare(self) -> None:
        from msdb.tuner.codegen.jit import set_num_threads

        set_num_threads(self.num_threads)

    def __call__(self, *arrays: Any) -> None:
        pointers = _check_arrays(self.compiled.args, arrays, self.name)
        self._prepare()
        self._fn(*pointers)

    def bind(self, *arrays: Any) -> Callable[[], None]:
        """The kernel on these arrays, checked once: a call with no arguments, no checks and
        no thread setting (a compiled model calls each kernel on the same buffers every run,
        and sets the threads once a run: docs/architecture.md, "Compile"). The caller keeps
        the arrays alive and unchanged in shape while it uses the call."""
        pointers = [ctypes.c_void_p(p) for p in _check_arrays(self.compiled.args, arrays, self.name)]
        return partial(self._fn, *pointers)

    def time_evaluator(self, number: int = 3, repeat: int = 1, min_repeat_ms: float = 100.0,
                       enable_cpu_cache_flush: bool = False) -> Callable[..., TimingResult]:
        """TVM's time_evaluator: returns `f(*arrays) -> TimingResult` whose `results` are the
        seconds per call of each repeat (see `msdb.tuner.measure.timing`)."""

        def run(*arrays: Any) -> TimingResult:
            pointers = _check_arrays(self.compiled.args, arrays, self.name)
            packed = (ctypes.c_void_p * len(pointers))(*pointers)
            self._prepare()
            return evaluate(lambda n: self._timed(packed, n), number, repeat, min_repeat_ms,
                            partial(flush_arguments, arrays) if enable_cpu_cache_flush else None)

        return run

    def close(self) -> None:
        self._loaded.close()


def build(mod: IRModule | PrimFunc, target: Any = None, *, options: Any = None) -> Kernel:
    """Compile the entry function of `mod` for `target` (None = this machine) and load it."""
    return Kernel(compile_module(mod, target, options))


def load_kernel(object_code: bytes, meta: dict[str, Any]) -> Kernel:
    """A Kernel from object code and the metadata `CompiledModule.meta()` wrote."""
    args = tuple(ArgSpec(n, d, tuple(s)) for n, d, s in meta["args"])
    compiled = CompiledModule(meta["name"], meta["entry"], meta["packed"], meta["timed"], args,
                              object_code, dict(meta["target"]))
    return Kernel(compiled)
