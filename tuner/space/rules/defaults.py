"""TVM's default schedule rules for a CPU target (`DefaultLLVM`, tvm-metaschedule.md section 5),
for a GPU target (`DefaultCUDA`) and for one with tensor cores (`DefaultCUDATensorCore`), in the
order PostOrderApply runs them."""

from __future__ import annotations

from msdb.tuner.space.rules.add_rfactor import AddRFactor
from msdb.tuner.space.rules.auto_inline import AutoInline
from msdb.tuner.space.rules.base import ScheduleRule
from msdb.tuner.space.rules.multi_level_tiling import MultiLevelTiling, ReuseConfig
from msdb.tuner.space.rules.parallel_vectorize_unroll import ParallelizeVectorizeUnroll
from msdb.tuner.space.rules.random_compute_location import RandomComputeLocation

__all__ = ["llvm_rules", "cuda_rules", "cuda_tensorcore_rules"]


def llvm_rules() -> list[ScheduleRule]:
    """TVM 0.27's `DefaultLLVM` (without InlineConstantScalars): user rules first (msdb's own for
    Winograd transforms, `winograd`, registered on import), then inlining, rfactor, tiling,
    parallel/vectorize/unroll and compute locations."""
    from msdb.tuner.space.rules import winograd  # noqa: F401  (registers its custom rules)
    from msdb.tuner.space.rules.apply_custom_rule import ApplyCustomRule

    return [
        ApplyCustomRule(),
        AutoInline(into_producer=False, into_consumer=True, inline_const_tensor=True, disallow_if_then_else=True,
                   require_injective=True, require_ordered=True, disallow_op=("exp",)),
        AddRFactor(max_jobs_per_core=16, max_innermost_factor=64),
        MultiLevelTiling("SSRSRS", max_innermost_factor=64, reuse_write=ReuseConfig("may", (1, 2), "global")),
        ParallelizeVectorizeUnroll(max_jobs_per_core=16, max_vectorize_extent=64, unroll_max_steps=(0, 16, 64, 512),
                                   unroll_explicit=True),
        RandomComputeLocation(),
    ]


def cuda_rules() -> list[ScheduleRule]:
    """TVM's `DefaultCUDA`: user rules first, then tiling with thread binds and shared/local
    caches, inlining (also into producers, if-then-else allowed), cross-thread reductions,
    unroll steps, and thread binding for every block left unbound."""
    from msdb.tuner.space.rules.apply_custom_rule import ApplyCustomRule
    from msdb.tuner.space.rules.auto_bind import AutoBind
    from msdb.tuner.space.rules.cross_thread_reduction import CrossThreadReduction
    from msdb.tuner.space.rules.inline_constant_scalars import InlineConstantScalars
    from msdb.tuner.space.rules.multi_level_tiling_gpu import MultiLevelTilingGPU

    return [
        ApplyCustomRule(),
        MultiLevelTilingGPU("SSSRRSRS", tile_binds=("blockIdx.x", "vthread.x", "threadIdx.x"), max_innermost_factor=64,
                            vector_load_lens=(1, 2, 3, 4, 8, 16), reuse_read=ReuseConfig("must", (4,), "shared"),
                            reuse_write=ReuseConfig("must", (3,), "local")),
        InlineConstantScalars(),
        AutoInline(into_producer=True, into_consumer=True, inline_const_tensor=True, disallow_if_then_else=False,
                   require_injective=False, require_ordered=False, disallow_op=()),
        CrossThreadReduction(thread_extents=(4, 8, 16, 32, 64, 128, 256, 512)),
        ParallelizeVectorizeUnroll(max_jobs_per_core=-1, max_vectorize_extent=-1,
                                   unroll_max_steps=(0, 16, 32, 64, 128, 256, 512, 1024), unroll_explicit=True),
        AutoBind(max_threadblocks=256, thread_extents=(32, 64, 128, 256, 512, 1024)),
    ]


def cuda_tensorcore_rules() -> list[ScheduleRule]:
    """TVM's `DefaultCUDATensorCore`: user rules first, then the tensor-core tiling with TVM's
    wmma groups (f32/f16 += f16 * f16, s32 += s8 * s8; shared.dyn staging), then DefaultCUDA's
    rules after its ApplyCustomRule, for every block tensor cores cannot compute. TVM's second
    tensor-core rule (the mma_sync groups) is left out: see `multi_level_tiling_tensor_core`."""
    from msdb.tuner.space.rules.apply_custom_rule import ApplyCustomRule
    from msdb.tuner.space.rules.multi_level_tiling_tensor_core import WMMA_INTRIN_GROUPS, MultiLevelTilingTensorCore

    return [
        ApplyCustomRule(),
        MultiLevelTilingTensorCore(WMMA_INTRIN_GROUPS, "SSSRRSRS", tile_binds=("blockIdx.y", "blockIdx.x", "threadIdx.y"),
                                   max_innermost_factor=4, vector_load_lens=(1, 2, 3, 4, 8, 16),
                                   reuse_read=ReuseConfig("must", (4,), "shared.dyn"),
                                   reuse_write=ReuseConfig("must", (2,), "shared.dyn")),
    ] + cuda_rules()[1:]
