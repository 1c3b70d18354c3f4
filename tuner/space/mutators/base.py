"""The mutator interface (docs/architecture.md, "Tuner"): TVM's `Mutator`. The evolutionary
search mutates a parent's trace by changing one sampling decision (a tile size, a compute
location, an unroll step, a parallel extent); the new trace is replayed and post-processed
like any candidate.

A user's own mutator subclasses `Mutator` and overrides `apply`; `Mutator.create("llvm")` gives
TVM's default CPU mutators with their probabilities."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any, Callable

from msdb.kinds import load_kind
from msdb.tuner.space.part import SpacePart

if TYPE_CHECKING:
    from msdb.schedule.schedule import Schedule
    from msdb.schedule.trace import Trace

__all__ = ["Mutator", "ReplayedStates", "create"]

#: A copy of the schedule a trace's replay built, as it stood before instruction `index` (the
#: number of instructions: after the last, where post-processing starts), or None when the
#: search kept none there. A copy is shared: read it, or copy it before changing it.
ReplayedStates = Callable[[int], "Schedule | None"]


class Mutator(SpacePart):
    """Base class of mutators."""

    #: Whether `apply` takes `replayed`: the search then passes the copies it kept of the
    #: parent's replay (docs/architecture.md, "Search"), which a mutator that would replay the
    #: trace to analyze its schedule reads instead.
    reads_replays = False

    def apply(self, trace: Trace, rng: random.Random) -> Trace | None:
        """A new trace (post-processing removed) with one decision changed, or None when the
        trace offers this mutator nothing to change. A mutator with `reads_replays` takes
        `replayed: ReplayedStates | None` as a keyword too."""
        raise NotImplementedError

    @staticmethod
    def create(kind: str = "llvm") -> dict[Mutator, float]:
        return create(kind)


_KINDS = {"llvm": ("msdb.tuner.space.mutators.defaults", "llvm_mutators"),
          "cuda": ("msdb.tuner.space.mutators.defaults", "cuda_mutators"),
          "cuda-tensorcore": ("msdb.tuner.space.mutators.defaults", "cuda_mutators")}


def create(kind: str = "llvm") -> dict[Mutator, float]:
    """The default mutators of a target kind with their probabilities ("llvm": TileSize 0.9,
    ComputeLocation 0.05, Unroll 0.03, Parallel 0.02)."""
    factory: Any = load_kind(_KINDS, kind, "mutator set")
    mutators: dict[Mutator, float] = factory()
    return mutators
