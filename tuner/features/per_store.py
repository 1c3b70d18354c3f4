"""`PerStoreFeature`: TVM's default feature extractor, one row of 164 features per buffer a
candidate writes (docs/architecture.md, "Tuner"; what each column means: `groups`; how the IR
is read: `store_walk`).

The evolutionary search scores about 2000 candidates per round, and the cost model extracts the
measured ones again when it learns from them, so extraction must take a few milliseconds: the
walk reads the scheduled IR without lowering it, what a store node computes is cached per node
(schedules of one workload share their stores), and the rows of a recently seen module are
cached per module object.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Sequence

import numpy as np

from msdb.identity_cache import IdentityCache
from msdb.ir.function import IRModule
from msdb.tuner.features.base import FeatureExtractor
from msdb.tuner.features.groups import feature_length, feature_names, function_rows
from msdb.tuner.features.store_walk import walk_function

if TYPE_CHECKING:
    from msdb.records.target import Target
    from msdb.tuner.candidate import MeasureCandidate
    from msdb.tuner.context import TuneContext

__all__ = ["PerStoreFeature"]

logger = logging.getLogger(__name__)


class PerStoreFeature(FeatureExtractor):
    """TVM's per-store features. Defaults are TVM's: 5 buffers per store, 10 samples of the
    arithmetic intensity curve, 64-byte cache lines (164 features per row). The rows of the last
    `cache_size` modules are kept (the cost model extracts a round's measured candidates again
    after the search scored them); a cached module stays alive while its entry does."""

    def __init__(self, *, buffers_per_store: int = 5, arith_intensity_curve_num_samples: int = 10,
                 cache_line_bytes: int = 64, cache_size: int = 512) -> None:
        if buffers_per_store < 1 or arith_intensity_curve_num_samples < 1 or cache_line_bytes < 1:
            raise ValueError("buffers_per_store, arith_intensity_curve_num_samples and cache_line_bytes must be >= 1")
        self.buffers_per_store = buffers_per_store
        self.arith_intensity_curve_num_samples = arith_intensity_curve_num_samples
        self.cache_line_bytes = cache_line_bytes
        self.feature_vector_length = feature_length(buffers_per_store, arith_intensity_curve_num_samples)
        self.cache_size = cache_size
        self._cache: IdentityCache[np.ndarray] = IdentityCache(cache_size)

    def layout(self) -> str:
        return (f"per-store-feature(buffers={self.buffers_per_store},curve={self.arith_intensity_curve_num_samples},"
                f"cache_line={self.cache_line_bytes},columns={self.feature_vector_length})")

    def feature_names(self) -> list[str]:
        """The name of each column."""
        return feature_names(self.buffers_per_store, self.arith_intensity_curve_num_samples)

    def extract_from(self, context: TuneContext, candidates: Sequence[MeasureCandidate]) -> list[np.ndarray]:
        is_gpu = _is_gpu(context.target)
        return [self.extract_mod(candidate.sch.mod, is_gpu=is_gpu) for candidate in candidates]

    def extract_mod(self, mod: IRModule, *, is_gpu: bool = False) -> np.ndarray:
        """The rows of a scheduled module (every function's, in order): float32, shape
        (written buffers, 164). The array is shared with the cache: do not modify it."""
        return self._cache.get(mod, lambda: self._rows(mod, is_gpu), extra=is_gpu)

    def _rows(self, mod: IRModule, is_gpu: bool) -> np.ndarray:
        rows: list[list[float]] = []
        for func in mod.functions.values():
            rows += function_rows(walk_function(func), func.buffers, is_gpu=is_gpu,
                                  cache_line_bytes=self.cache_line_bytes, buffers_per_store=self.buffers_per_store,
                                  curve_samples=self.arith_intensity_curve_num_samples)
        array = np.array(rows, dtype=np.float32).reshape(len(rows), self.feature_vector_length)
        array.setflags(write=False)
        return array


def _is_gpu(target: Target | None) -> bool:
    """TVM's test: the target's keys include "gpu"."""
    if target is None:
        return False
    keys = target.get("keys") or ()
    return "gpu" in keys
