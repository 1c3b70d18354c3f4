"""Post-processors (docs/architecture.md, "Tuner"): TVM's `Postproc` and its CPU, GPU and
tensor-core defaults (`rewrite_tensorize`), one module each; `Postproc.create("llvm")` (or
"cuda", "cuda-tensorcore") gives them in TVM's order."""

from __future__ import annotations

from msdb.tuner.space.postprocs.base import Postproc, create
from msdb.tuner.space.postprocs.disallow_dynamic_loop import DisallowDynamicLoop
from msdb.tuner.space.postprocs.rewrite_parallel_vectorize_unroll import RewriteParallelVectorizeUnroll
from msdb.tuner.space.postprocs.rewrite_reduction_block import RewriteReductionBlock

__all__ = ["Postproc", "create", "DisallowDynamicLoop", "RewriteParallelVectorizeUnroll", "RewriteReductionBlock"]
