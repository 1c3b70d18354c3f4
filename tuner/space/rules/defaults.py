"""TVM's default schedule rules for a CPU target (`DefaultLLVM`, tvm-metaschedule.md section 5),
in the order PostOrderApply runs them."""

from __future__ import annotations

from msdb.tuner.space.rules.add_rfactor import AddRFactor
from msdb.tuner.space.rules.auto_inline import AutoInline
from msdb.tuner.space.rules.base import ScheduleRule
from msdb.tuner.space.rules.multi_level_tiling import MultiLevelTiling, ReuseConfig
from msdb.tuner.space.rules.parallel_vectorize_unroll import ParallelizeVectorizeUnroll
from msdb.tuner.space.rules.random_compute_location import RandomComputeLocation

__all__ = ["llvm_rules"]


def llvm_rules() -> list[ScheduleRule]:
    return [
        AutoInline(into_producer=False, into_consumer=True, inline_const_tensor=True, disallow_if_then_else=True,
                   require_injective=True, require_ordered=True, disallow_op=("exp",)),
        AddRFactor(max_jobs_per_core=16, max_innermost_factor=64),
        MultiLevelTiling("SSRSRS", max_innermost_factor=64, reuse_write=ReuseConfig("may", (1, 2), "global")),
        ParallelizeVectorizeUnroll(max_jobs_per_core=16, max_vectorize_extent=64, unroll_max_steps=(0, 16, 64, 512),
                                   unroll_explicit=True),
        RandomComputeLocation(),
    ]
