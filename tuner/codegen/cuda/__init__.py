"""CUDA code generation (docs/architecture.md, "CUDA"): a scheduled PrimFunc with thread
bindings -> CUDA C kernels -> PTX (NVRTC) -> cubin (ptxas), with no GPU needed.

    built = build_cuda(sch.mod, "cuda -arch=sm_90")
    built.cubin, built.source, built.meta()["kernels"]   # launch dims, registers, shared memory

Modules, in pipeline order:
  lower.py      GPU rules over the CPU lowering passes; one kernel per launch region
  tensorcore.py wmma fragments: match-buffer views bound to their sources, InferFragment, nvcuda::wmma text
  shared_dyn.py shared.dyn buffers merged into one pool with reuse (TVM's MergeSharedMemoryAllocations)
  sync.py       __syncthreads() placement for shared memory
  verify.py     TVM's VerifyGPUCode (threads, shared memory, vthreads, vector bytes)
  emit.py, emit_expr.py   CUDA C text (lanes.py: lane-invariant and contiguous indices of vector loops)
  nvrtc.py      NVRTC through ctypes, ptxas, `ptxas -v` statistics
  examples.py   hand-written schedules of zoo workloads (tests, bench/gpu_check.py)

Nothing here imports a CUDA driver binding: building needs only the compiler wheels
(`pip install 'msdb[cuda]'`); running is `msdb.tuner.measure.cuda_runner`'s job.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from msdb.ir.function import IRModule, PrimFunc
from msdb.tuner.codegen.errors import CodegenError

__all__ = ["CudaBuild", "build_cuda", "cuda_source", "target_arch", "DEFAULT_ARCH"]

#: The arch of a `cuda` target that names none.
DEFAULT_ARCH = "sm_80"


def target_arch(target: Any) -> str:
    """`sm_XX` of a CUDA target (its `arch` attribute; `DEFAULT_ARCH` when absent)."""
    if target is None:
        return DEFAULT_ARCH
    from msdb.records.target import Target

    config = Target.coerce(target).config  # type: ignore[union-attr]
    kind = config.get("kind")
    if kind != "cuda":
        raise CodegenError(f"target kind {kind!r} is not 'cuda'; the CUDA code generator needs a cuda target "
                           "(e.g. 'cuda -arch=sm_90')")
    arch = str(config.get("arch") or DEFAULT_ARCH)
    from msdb.tuner.codegen.cuda.nvrtc import arch_number

    return f"sm_{arch_number(arch)}"


@dataclass
class CudaBuild:
    """A compiled module: CUDA C, PTX, cubin, and per kernel its launch and ptxas report."""

    name: str
    arch: str
    source: str
    ptx: str
    cubin: bytes
    args: list[list[Any]]
    workspaces: list[list[Any]]
    kernels: list[dict[str, Any]]
    target: Any = None
    timings: dict[str, float] = field(default_factory=dict)

    def meta(self) -> dict[str, Any]:
        """JSON-able sidecar: everything `CudaRunner` needs besides the cubin."""
        return {"kind": "cuda", "name": self.name, "arch": self.arch, "args": self.args,
                "workspaces": self.workspaces, "kernels": self.kernels, "target": self.target,
                "timings": self.timings}


def _lowered(mod: IRModule | PrimFunc, target: Any) -> Any:
    from msdb.tuner.codegen.cuda.lower import lower_gpu_module
    from msdb.tuner.codegen.cuda.verify import GpuLimits, check_gpu

    lowered = lower_gpu_module(IRModule.coerce(mod) if not isinstance(mod, PrimFunc) else mod)
    check_gpu(lowered, GpuLimits.for_target(target))
    return lowered


def cuda_source(mod: IRModule | PrimFunc, target: Any = None) -> str:
    """The CUDA C of `mod`'s entry function (verified against the target's limits first)."""
    from msdb.tuner.codegen.cuda.emit import emit_cuda

    return emit_cuda(_lowered(mod, target))


def build_cuda(mod: IRModule | PrimFunc, target: Any = None) -> CudaBuild:
    """Lower, verify, emit, NVRTC and ptxas `mod` for the target's arch (sm_80 by default)."""
    from msdb.tuner.codegen.analysis import static_shape
    from msdb.tuner.codegen.cuda.emit import emit_cuda
    from msdb.tuner.codegen.cuda.nvrtc import assemble_cubin, compile_ptx

    started = time.perf_counter()
    arch = target_arch(target)
    lowered = _lowered(mod, target)
    source = emit_cuda(lowered)
    t_emit = time.perf_counter()
    ptx = compile_ptx(source, arch)
    t_nvrtc = time.perf_counter()
    cubin, stats = assemble_cubin(ptx, arch)
    t_ptxas = time.perf_counter()
    kernels = []
    for k in lowered.kernels:
        refs = []
        for buf in k.params:
            if buf in lowered.params:
                refs.append(["arg", lowered.params.index(buf)])
            else:
                refs.append(["workspace", lowered.workspaces.index(buf)])
        entry = {"name": k.name, "grid": list(k.grid), "block": list(k.block), "params": refs}
        if k.name in stats:
            entry.update(stats[k.name].as_json())
        kernels.append(entry)
    config = None
    if target is not None:
        from msdb.records.target import Target

        config = Target.coerce(target).config  # type: ignore[union-attr]
    return CudaBuild(
        lowered.name, arch, source, ptx, cubin,
        [[b.name, b.dtype, list(static_shape(b))] for b in lowered.params],
        [[b.name, b.dtype, list(static_shape(b))] for b in lowered.workspaces],
        kernels, config,
        {"lower_emit": t_emit - started, "nvrtc": t_nvrtc - t_emit, "ptxas": t_ptxas - t_nvrtc},
    )
