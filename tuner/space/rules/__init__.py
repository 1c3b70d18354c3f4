"""Schedule rules (docs/architecture.md, "Tuner"): what a design space does to each block.

- `base`: `ScheduleRule` (subclass it for a rule of one's own) and `create("llvm")`;
- `auto_inline`, `add_rfactor`, `multi_level_tiling`, `parallel_vectorize_unroll`,
  `random_compute_location`: TVM's CPU rules; `multi_level_tiling_gpu`, `auto_bind`, ...: its
  GPU rules; `multi_level_tiling_tensor_core`: its tensor-core rule (wmma groups); `defaults`:
  them in TVM's order ("llvm", "cuda", "cuda-tensorcore").
"""

from __future__ import annotations

from msdb.tuner.space.rules.add_rfactor import AddRFactor
from msdb.tuner.space.rules.auto_inline import AutoInline
from msdb.tuner.space.rules.base import ScheduleRule, create
from msdb.tuner.space.rules.multi_level_tiling import MultiLevelTiling, ReuseConfig
from msdb.tuner.space.rules.parallel_vectorize_unroll import ParallelizeVectorizeUnroll
from msdb.tuner.space.rules.random_compute_location import RandomComputeLocation

__all__ = ["ScheduleRule", "create", "AddRFactor", "AutoInline", "MultiLevelTiling", "ReuseConfig",
           "ParallelizeVectorizeUnroll", "RandomComputeLocation"]
