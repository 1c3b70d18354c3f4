"""What the GPU rules, post-processors and mutators read off a task's target (docs/architecture.md,
"Tuner"): TVM's rules take `max_threads_per_block`, `thread_warp_size` and the `arch` from the
target in their InitializeWithTuneContext; one reader here, so that every GPU part agrees on
the defaults of a target that leaves them out.

A `cuda` target from msdb's CLI string (`"cuda -arch=sm_90"`) has `max_num_threads` and
`thread_warp_size` only; TVM 0.27 completes such a target with `max_threads_per_block` (the
`max_num_threads`) and `max_shared_memory_per_block` (48 KiB), which are the defaults here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from msdb.tuner.context import TuneContext

__all__ = ["GpuTarget", "gpu_target_of"]

_DEFAULT_THREADS = 1024
_DEFAULT_WARP = 32
_DEFAULT_SHARED = 48 * 1024


@dataclass(frozen=True)
class GpuTarget:
    """The limits a GPU design space is shaped by; `sm` is the arch number (90 for "sm_90"),
    None when the target names none."""

    max_threads_per_block: int = _DEFAULT_THREADS
    thread_warp_size: int = _DEFAULT_WARP
    max_shared_memory_per_block: int = _DEFAULT_SHARED
    sm: int | None = None

    @staticmethod
    def from_config(config: dict[str, Any]) -> GpuTarget:
        threads = config.get("max_threads_per_block", config.get("max_num_threads", _DEFAULT_THREADS))
        match = re.fullmatch(r"sm_(\d+)[a-z]?", str(config.get("arch", "")))
        return GpuTarget(max_threads_per_block=int(threads),
                         thread_warp_size=int(config.get("thread_warp_size", _DEFAULT_WARP)),
                         max_shared_memory_per_block=int(config.get("max_shared_memory_per_block", _DEFAULT_SHARED)),
                         sm=int(match.group(1)) if match else None)

    @property
    def async_copy(self) -> bool:
        """sm_80 and newer copy global to shared memory asynchronously (cp.async), which
        MultiLevelTiling's software-pipeline variants rely on."""
        return self.sm is not None and self.sm >= 80


def gpu_target_of(context: TuneContext | None) -> GpuTarget:
    """The GPU limits of the task's target; TVM's CUDA defaults outside a task or without a
    target."""
    if context is None or context.target is None:
        return GpuTarget()
    return GpuTarget.from_config(context.target.config)
