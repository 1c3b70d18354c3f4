"""TVM's VerifyGPUCode post-processor for msdb's lowered kernels: a schedule the GPU cannot run
is refused before anything is compiled, with TVM's reasons (docs/architecture.md, "CUDA").

Limits (`GpuLimits.for_target`), as MetaSchedule's VerifyGPUCode takes them from the target:
`max_threads_per_block` (the target's, else its `max_num_threads`, 1024 for CUDA),
`max_shared_memory_per_block` (the target's, else 48 KiB), `max_vthread` 8 and
`max_vector_bytes` 16 (fixed by the post-processor), plus CUDA's per-dimension block limits
(threadIdx.x/y 1024, threadIdx.z 64), which TVM leaves to the launch to fail on.

Checked per kernel, over the lowered kernels (after compaction, as TVM verifies the lowered
module): threads per block (product of the threadIdx extents), each threadIdx extent and every
loop bound to the same axis having that extent, shared memory per block (sum of its `__shared__`
allocations), the extent of a loop bound to the plain `vthread` axis (TVM 0.27's VerifyGPUCode looks for that name, and the `vthread.s` loop its injection makes of it; loops bound to vthread.x/y/z, which MetaSchedule's tiling uses, are not limited there, so they are not here) and the bytes of each
vectorized access (lanes times element bytes).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from msdb.ir import expr as E
from msdb.ir import stmt as S
from msdb.tuner.codegen.analysis import Allocate, walk
from msdb.tuner.codegen.cuda.emit_expr import elem_bytes
from msdb.tuner.codegen.cuda.lower import GpuLoweredFunc, thread_tag
from msdb.tuner.codegen.cuda.shared_dyn import tvm_allocation_bytes
from msdb.tuner.codegen.cuda.sync import is_allreduce
from msdb.tuner.codegen.errors import CodegenError

__all__ = ["GpuLimits", "GPUVerifyError", "verify_gpu", "check_gpu"]


class GPUVerifyError(CodegenError):
    """A schedule TVM's VerifyGPUCode would reject for this target (too many threads, too much
    shared memory, too many vthreads, too wide a vector)."""


@dataclass(frozen=True)
class GpuLimits:
    max_threads_per_block: int = 1024
    max_shared_memory_per_block: int = 48 * 1024
    max_vthread: int = 8
    max_vector_bytes: int = 16
    max_thread_x: int = 1024
    max_thread_y: int = 1024
    max_thread_z: int = 64

    @staticmethod
    def for_target(target: Any = None) -> GpuLimits:
        """The limits of a CUDA target (msdb Target, config dict, string or None for defaults)."""
        if target is None:
            return GpuLimits()
        from msdb.records.target import Target

        config = Target.coerce(target).config  # type: ignore[union-attr]
        threads = config.get("max_threads_per_block", config.get("max_num_threads", 1024))
        shared = config.get("max_shared_memory_per_block", 48 * 1024)
        return GpuLimits(max_threads_per_block=int(threads), max_shared_memory_per_block=int(shared))


def verify_gpu(func: GpuLoweredFunc, limits: GpuLimits | None = None) -> list[str]:
    """Every reason TVM's VerifyGPUCode gives against `func` (empty: it may run)."""
    limits = limits or GpuLimits()
    errors: list[str] = []
    axis_limit = {"threadIdx.x": limits.max_thread_x, "threadIdx.y": limits.max_thread_y,
                  "threadIdx.z": limits.max_thread_z}
    for kernel in func.kernels:
        where = f"kernel {kernel.name}"
        extents: dict[str, int] = {}
        reduce_bytes: list[int] = []
        shared = 0
        vector_errors: list[str] = []

        def visit(node: object) -> None:
            nonlocal shared
            if isinstance(node, S.For):
                tag = thread_tag(node)
                extent = E.const_int(node.extent)
                if tag is not None and extent is not None:
                    if tag.startswith("threadIdx."):
                        if tag not in extents:
                            extents[tag] = extent
                            if extent > axis_limit[tag]:
                                errors.append(f"{where}: Extent of {tag} ({extent}) is greater than maximum allowed "
                                              f"({axis_limit[tag]})")
                        elif extents[tag] != extent:
                            errors.append(f"{where}: Extent of {tag} ({extent}) does not match the bound "
                                          f"{extents[tag]} (loop {node.loop_var.name})")
                    elif tag == "vthread" and extent > limits.max_vthread:
                        # TVM checks the legacy axis name only (see the module docstring)
                        errors.append(f"{where}: Number of vthreads ({extent}) is greater than the allowed maximum "
                                      f"({limits.max_vthread}) (loop {node.loop_var.name} bound to {tag})")
                if node.kind == S.ForKind.VECTORIZED and extent is not None:
                    for dtype in _stored_dtypes(node.body):
                        nbytes = extent * elem_bytes(dtype)
                        if nbytes > limits.max_vector_bytes:
                            vector_errors.append(
                                f"{where}: Number of lanes ({extent}) times number of bytes ({elem_bytes(dtype)}) for "
                                f"dtype {dtype} is greater than the maximum number of vector bytes "
                                f"({limits.max_vector_bytes}) (loop {node.loop_var.name})")
            elif isinstance(node, Allocate) and node.buffer.scope in ("shared", "shared.dyn"):
                shared += tvm_allocation_bytes(node.buffer)  # TVM's flattened size (shape[0] * strides[0])
            elif isinstance(node, S.Evaluate) and is_allreduce(node):
                assert isinstance(node.value, E.Call)
                reduce_bytes.append(elem_bytes(node.value.args[1].dtype))  # one element per thread

        walk(kernel.body, visit)
        threads = 1
        for extent in extents.values():
            threads *= extent
        if threads > limits.max_threads_per_block:
            errors.append(f"{where}: Used threads per block ({threads}) is greater than the allowed maximum "
                          f"({limits.max_threads_per_block})")
        shared += sum(reduce_bytes) * threads
        if shared > limits.max_shared_memory_per_block:
            errors.append(f"{where}: Used shared memory per block ({shared}) is greater than the allowed maximum "
                          f"({limits.max_shared_memory_per_block})")
        errors.extend(vector_errors)
    return errors


def _stored_dtypes(body: S.Stmt) -> list[str]:
    found: list[str] = []

    def visit(node: object) -> None:
        if isinstance(node, S.BufferStore) and node.buffer.dtype not in found:
            found.append(node.buffer.dtype)

    walk(body, visit)
    return found


def check_gpu(func: GpuLoweredFunc, limits: GpuLimits | None = None) -> None:
    """Raise `GPUVerifyError` with every reason when `verify_gpu` finds any."""
    errors = verify_gpu(func, limits)
    if errors:
        raise GPUVerifyError(f"{func.name} is refused for the GPU (TVM's VerifyGPUCode): " + "; ".join(errors))
