"""The default mutators of each target kind with their probabilities (docs/architecture.md,
"Tuner"), what `Mutator.create(kind)` returns: TVM's `Mutator::DefaultLLVM`."""

from __future__ import annotations

from msdb.tuner.space.mutators.base import Mutator
from msdb.tuner.space.mutators.compute_location import MutateComputeLocation
from msdb.tuner.space.mutators.parallel import MutateParallel
from msdb.tuner.space.mutators.tile_size import MutateTileSize
from msdb.tuner.space.mutators.unroll import MutateUnroll

__all__ = ["llvm_mutators", "cuda_mutators"]


def llvm_mutators() -> dict[Mutator, float]:
    """TVM's CPU mutators: mostly tile sizes, rarely compute locations, unroll steps and
    parallel extents."""
    return {MutateTileSize(): 0.9, MutateComputeLocation(): 0.05, MutateUnroll(): 0.03,
            MutateParallel(max_jobs_per_core=16): 0.02}


def cuda_mutators() -> dict[Mutator, float]:
    """TVM's GPU mutators (`Mutator::DefaultCUDA`): tile sizes (and cooperative-fetch widths),
    unroll steps, and threads per block."""
    from msdb.tuner.space.mutators.thread_binding import MutateThreadBinding

    return {MutateTileSize(): 0.9, MutateUnroll(): 0.08, MutateThreadBinding(): 0.02}
