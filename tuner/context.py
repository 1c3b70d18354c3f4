"""The tuning of one task (docs/architecture.md, "Tuner"): TVM's `TuneContext`, which ties a
workload and a target to the design-space generator and search strategy that tune it, and owns
the task's seeded random generator.

Randomness is explicit: every random choice of a task comes from `rng()`, forked from
`rand_state`, so one seed gives one run (TVM draws a seed from the clock when `rand_state` is -1;
msdb does the same, and tests always pass a seed)."""

from __future__ import annotations

import copy
import random
import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from msdb.ir.function import IRModule, PrimFunc

if TYPE_CHECKING:
    from msdb.records.target import Target
    from msdb.schedule.schedule import Schedule

__all__ = ["TuneContext", "GPU_TARGET_KINDS"]

#: Target kinds whose design space is the GPU one (TVM's IsGPUTarget).
GPU_TARGET_KINDS = frozenset({"cuda", "nvptx", "rocm", "vulkan", "metal", "opencl", "webgpu"})


@dataclass
class TuneContext:
    """One task: its module (normalized to `{"main": f}`), target, design-space generator and
    search strategy, the name it is stored under, its seed and the cores its kernels may use."""

    mod: IRModule | None = None
    target: Target | None = None
    space_generator: Any = None  # msdb.tuner.space.generators.SpaceGenerator
    search_strategy: Any = None  # msdb.tuner.search.SearchStrategy
    task_name: str | None = None
    rand_state: int = -1
    num_threads: int = 1
    _rng: random.Random = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.mod is not None:
            self.mod = IRModule.coerce(self.mod, "a task's module")
        if self.rand_state == -1:
            self.rand_state = time.time_ns() & 0x7FFFFFFF
        self._rng = random.Random(self.rand_state)
        if self.space_generator is not None:
            self.space_generator._initialize_with_tune_context(self)
        if self.search_strategy is not None:
            self.search_strategy._initialize_with_tune_context(self)

    def rng(self) -> random.Random:
        """A generator forked from the context's own: each use gets its own stream, and the
        sequence of forks is fixed by the seed."""
        return random.Random(self._rng.getrandbits(64))

    def num_cores(self) -> int:
        """The cores the task's kernels may use: the target's `num-cores`, else the task's
        threads (the parallelism bound of TVM's rules, post-processors and mutators)."""
        cores = self.target.config.get("num-cores") if self.target is not None else None
        return int(cores) if cores else max(1, self.num_threads)

    def space_kind(self) -> str:
        """Which default rules, post-processors and mutators the task's design space uses (TVM's
        GetRuleKindFromTarget): "cuda-tensorcore" for a CUDA target of sm_75 or newer (the
        tensor-core rule falls back to the "cuda" tiling where no wmma intrinsic matches, so an
        fp32 workload gets the "cuda" spaces), "cuda" for another GPU target, else "llvm"
        (docs/architecture.md, "Tuner")."""
        kind = self.target.kind if self.target is not None else "llvm"
        if kind not in GPU_TARGET_KINDS:
            return "llvm"
        arch = str(self.target.config.get("arch", "")) if self.target is not None else ""
        match = re.fullmatch(r"sm_(\d+)[a-z]?", arch)
        return "cuda-tensorcore" if kind == "cuda" and match and int(match.group(1)) >= 75 else "cuda"

    def fork_seed(self) -> int:
        """A seed for a Schedule (`Schedule(mod, seed=context.fork_seed())`)."""
        return self._rng.getrandbits(31)

    def generate_design_space(self) -> list[Schedule]:
        """The design spaces of the task's module (one Schedule per sketch)."""
        if self.mod is None or self.space_generator is None:
            raise ValueError("generate_design_space needs a TuneContext with mod and space_generator")
        result: list[Schedule] = self.space_generator.generate_design_space(self.mod)
        return result

    def clone(self) -> TuneContext:
        """A copy with cloned generator and strategy (and the same seed), as TVM's
        `TuneContext.clone`."""
        twin = copy.copy(self)
        twin._rng = random.Random(self.rand_state)
        if self.space_generator is not None:
            twin.space_generator = self.space_generator.clone()
        if self.search_strategy is not None:
            twin.search_strategy = self.search_strategy.clone()
        return twin
