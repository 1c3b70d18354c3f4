"""`VerifyGPUCode` (TVM's post-processor, last of `Postproc::DefaultCUDA`; docs/architecture.md,
"Tuner"): a candidate the GPU could not run is dropped before it is built or measured.

Two checks, as in TVM: the threads of every block MultiLevelTiling tiled must lie within the
bounds it annotated (`meta_schedule.thread_extent_low_inclusive` / `_high_inclusive`: at least
a warp for a block with enough work, at most the target's threads per block); then the
function is lowered for the GPU (`msdb.tuner.codegen.cuda.lower_gpu`; a lowering that fails
rejects the candidate) and the kernels are checked against the target's limits (threads per
block, shared memory, vthreads, vector bytes: `msdb.tuner.codegen.cuda.verify`).

TVM verifies after InjectSoftwarePipeline, which keeps `consumer stage - producer stage + 1`
copies of each shared buffer a pipelined loop (`software_pipeline_stage`, MultiLevelTiling's
sm_80 variants) fills in one stage and reads in a later one: a pipeline of depth 4 triples the
shared-memory tiles. msdb's lowering does not multi-buffer, so those extra copies are counted
here, against the kernel that allocates the buffer.

TVM also verifies before RewriteTensorize (last of `Postproc::DefaultCUDATensorCore`), on blocks
still marked `meta_schedule.auto_tensorize`, which its verifier lowers element by element; msdb's
lowering refuses element-wise access to a wmma fragment, so the check runs on a copy of the
schedule tensorized as RewriteTensorize will tensorize it (the candidate's own trace is not
touched): the kernels checked are the ones that will be built.
"""

from __future__ import annotations

import logging
import dataclasses
from typing import TYPE_CHECKING, Any

from msdb.errors import MsdbError
from msdb.ir import expr as E
from msdb.ir import stmt as S
from msdb.tuner.space.gpu_target import gpu_target_of
from msdb.tuner.space.postprocs.base import Postproc
from msdb.ir.functor import post_order_visit
from msdb.tuner.space.rules.multi_level_tiling_gpu import (SOFTWARE_PIPELINE_STAGE, THREAD_EXTENT_HIGH,
                                                           THREAD_EXTENT_LOW)
from msdb.tuner.space.thread_bind import thread_tag_of

if TYPE_CHECKING:
    from msdb.schedule.schedule import Schedule

__all__ = ["VerifyGPUCode", "thread_extents_within_bounds", "pipeline_buffer_versions"]

logger = logging.getLogger(__name__)

WARP_EXECUTION = "warp_execution"
_AXES = {"threadIdx.x": 0, "threadIdx.y": 1, "threadIdx.z": 2}


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, E.IntImm):
        return value.value
    return None


def thread_extents_within_bounds(body: S.Stmt, warp_size: int) -> bool:
    """TVM's ThreadExtentChecker: under each block carrying both bounds, the product of the
    innermost enclosing threadIdx.x/y/z extents (1 where unbound; a warp under
    `warp_execution`) lies within them; a non-constant threadIdx extent fails."""

    def visit(stmt: S.Stmt | None, extents: tuple[int, int, int]) -> bool:
        if stmt is None:
            return True
        if isinstance(stmt, S.For):
            axis = _AXES.get(thread_tag_of(stmt))
            if axis is not None:
                extent = E.const_int(stmt.extent)
                if extent is None:
                    return False
                extents = tuple(extent if i == axis else e for i, e in enumerate(extents))  # type: ignore[assignment]
            elif thread_tag_of(stmt).startswith("threadIdx."):
                if E.const_int(stmt.extent) is None:
                    return False
            return visit(stmt.body, extents)
        if isinstance(stmt, S.BlockRealize):
            block = stmt.block
            inner = extents
            if WARP_EXECUTION in block.annotations:
                inner = (warp_size, extents[1], extents[2])
            low, high = _int(block.annotations.get(THREAD_EXTENT_LOW)), _int(block.annotations.get(THREAD_EXTENT_HIGH))
            if low is not None and high is not None and not low <= inner[0] * inner[1] * inner[2] <= high:
                return False
            return visit(block.init, inner) and visit(block.body, inner)
        if isinstance(stmt, S.SeqStmt):
            return all(visit(child, extents) for child in stmt.seq)
        if isinstance(stmt, S.IfThenElse):
            return visit(stmt.then_case, extents) and visit(stmt.else_case, extents)
        return True

    return visit(body, (1, 1, 1))


def _accesses(stmt: S.Stmt) -> tuple[set[str], set[str]]:
    """Names of the buffers the blocks under `stmt` write and read."""
    written: set[str] = set()
    read: set[str] = set()

    def visit(node: object) -> None:
        if isinstance(node, S.Block):
            written.update(w.buffer.name for w in node.writes)
            read.update(r.buffer.name for r in node.reads)

    post_order_visit(stmt, visit)
    return written, read


def pipeline_buffer_versions(body: S.Stmt) -> dict[str, int]:
    """For each shared buffer of a software-pipelined loop under `body`, how many copies TVM's
    InjectSoftwarePipeline keeps: the largest consumer-minus-producer stage distance plus 1
    (buffers with one copy are left out)."""
    versions: dict[str, int] = {}

    def visit(node: object) -> None:
        if not isinstance(node, S.For):
            return
        stages = node.annotations.get(SOFTWARE_PIPELINE_STAGE)
        children = node.body.seq if isinstance(node.body, S.SeqStmt) else (node.body,)
        if not isinstance(stages, (list, tuple)) or len(stages) != len(children):
            return
        stage_of = [_int(v) for v in stages]
        accesses = [_accesses(child) for child in children]
        for p, (written, _) in enumerate(accesses):
            for c, (_, read) in enumerate(accesses):
                sp, sc = stage_of[p], stage_of[c]
                if sp is None or sc is None or sc <= sp:
                    continue
                for name in written & read:
                    versions[name] = max(versions.get(name, 1), sc - sp + 1)

    post_order_visit(body, visit)
    return versions


def _extra_shared_bytes(kernel_body: S.Stmt, versions: dict[str, int]) -> int:
    """Bytes of the extra pipeline copies of the shared buffers a kernel allocates."""
    from msdb.tuner.codegen.analysis import Allocate, allocation_elements, walk
    from msdb.tuner.codegen.cuda.emit_expr import elem_bytes

    extra = 0

    def visit(node: object) -> None:
        nonlocal extra
        if isinstance(node, Allocate) and node.buffer.scope in ("shared", "shared.dyn"):
            copies = versions.get(node.buffer.name, 1)
            extra += (copies - 1) * allocation_elements(node.buffer) * elem_bytes(node.buffer.dtype)

    walk(kernel_body, visit)
    return extra


class VerifyGPUCode(Postproc):
    """Reject a candidate whose threads leave MultiLevelTiling's bounds, that does not lower,
    or whose kernels exceed the target's GPU limits (TVM's `VerifyGPUCode`)."""

    def apply(self, sch: Schedule) -> bool:
        from msdb.tuner.codegen.cuda.lower import lower_gpu
        from msdb.tuner.codegen.cuda.verify import GpuLimits, verify_gpu

        gpu = gpu_target_of(self.context)
        mod = _tensorized(sch)
        limits = GpuLimits(max_threads_per_block=gpu.max_threads_per_block,
                           max_shared_memory_per_block=gpu.max_shared_memory_per_block)
        for name, func in mod.functions.items():
            if not thread_extents_within_bounds(func.body, gpu.thread_warp_size):
                logger.debug("VerifyGPUCode: %s: threads outside MultiLevelTiling's bounds", name)
                return False
            try:
                lowered = lower_gpu(func, name)
            except MsdbError as exc:
                logger.debug("VerifyGPUCode: %s does not lower for the GPU: %s", name, exc)
                return False
            versions = pipeline_buffer_versions(func.body)
            for kernel in lowered.kernels:
                extra = _extra_shared_bytes(kernel.body, versions) if versions else 0
                kernel_limits = dataclasses.replace(
                    limits, max_shared_memory_per_block=limits.max_shared_memory_per_block - extra)
                errors = verify_gpu(dataclasses.replace(lowered, kernels=(kernel,)), kernel_limits)
                if errors:
                    logger.debug("VerifyGPUCode: %s (%d bytes of shared memory for pipeline copies)", "; ".join(errors),
                                 extra)
                    return False
        return True


def _tensorized(sch: Schedule) -> Any:
    """The module RewriteTensorize will make of `sch` (the module itself when no block is
    marked for tensorization), computed on a copy."""
    from msdb.tuner.space.postprocs.rewrite_tensorize import RewriteTensorize, marked_blocks

    if not marked_blocks(sch.mod):
        return sch.mod
    twin = sch.copy()
    RewriteTensorize().apply(twin)
    return twin.mod
