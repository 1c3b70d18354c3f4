"""Mutators (docs/architecture.md, "Tuner"): TVM's `Mutator` and its CPU defaults, one module
each; `Mutator.create("llvm")` gives them with their probabilities."""

from __future__ import annotations

from msdb.tuner.space.mutators.base import Mutator, create
from msdb.tuner.space.mutators.compute_location import MutateComputeLocation
from msdb.tuner.space.mutators.parallel import MutateParallel
from msdb.tuner.space.mutators.tile_size import MutateTileSize
from msdb.tuner.space.mutators.unroll import MutateUnroll

__all__ = ["Mutator", "create", "MutateTileSize", "MutateComputeLocation", "MutateUnroll", "MutateParallel"]
