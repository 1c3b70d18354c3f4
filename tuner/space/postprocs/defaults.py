"""The default post-processors of each target kind (docs/architecture.md, "Tuner"), what
`Postproc.create(kind)` returns.

TVM's `Postproc::DefaultLLVM` also runs RewriteLayout, which only acts on functions that ask
for layout rewriting (`layout_free_buffers`); msdb's workloads never do, so it is left out."""

from __future__ import annotations

from msdb.tuner.space.postprocs.base import Postproc
from msdb.tuner.space.postprocs.disallow_dynamic_loop import DisallowDynamicLoop
from msdb.tuner.space.postprocs.rewrite_parallel_vectorize_unroll import RewriteParallelVectorizeUnroll
from msdb.tuner.space.postprocs.rewrite_reduction_block import RewriteReductionBlock

__all__ = ["llvm_postprocs", "cuda_postprocs", "cuda_tensorcore_postprocs"]


def llvm_postprocs() -> list[Postproc]:
    """TVM's CPU post-processors, in TVM's order: reject dynamic loops, then turn the root hints
    into parallel/vectorized/unrolled loops, then hoist reduction inits."""
    return [DisallowDynamicLoop(), RewriteParallelVectorizeUnroll(), RewriteReductionBlock()]


def cuda_postprocs() -> list[Postproc]:
    """TVM's GPU post-processors (`Postproc::DefaultCUDA`), in TVM's order: reject dynamic
    loops, spread the shared-memory copies over the threads, bind what is still unbound, turn
    the unroll hint into pragmas, hoist reduction inits, and reject what the GPU cannot run."""
    from msdb.tuner.space.postprocs.rewrite_cooperative_fetch import RewriteCooperativeFetch
    from msdb.tuner.space.postprocs.rewrite_unbound_block import RewriteUnboundBlock
    from msdb.tuner.space.postprocs.verify_gpu_code import VerifyGPUCode

    return [DisallowDynamicLoop(), RewriteCooperativeFetch(), RewriteUnboundBlock(max_threadblocks=256),
            RewriteParallelVectorizeUnroll(), RewriteReductionBlock(), VerifyGPUCode()]


def cuda_tensorcore_postprocs() -> list[Postproc]:
    """TVM's `Postproc::DefaultCUDATensorCore`: the GPU post-processors, then RewriteTensorize
    (last, as TVM runs it: costly, and it does not change whether a candidate is valid)."""
    from msdb.tuner.space.postprocs.rewrite_tensorize import RewriteTensorize

    return cuda_postprocs() + [RewriteTensorize()]
