"""`RandomFeatureExtractor`: seeded random rows, TVM's baseline extractor (it tells whether a
cost model learns anything from real features, and tests the plumbing without IR analysis)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import numpy as np

from msdb.tuner.features.base import FeatureExtractor

if TYPE_CHECKING:
    from msdb.tuner.candidate import MeasureCandidate
    from msdb.tuner.context import TuneContext

__all__ = ["RandomFeatureExtractor"]


class RandomFeatureExtractor(FeatureExtractor):
    """Each candidate gets 1..`max_block_num` rows of `feature_size` uniform [0, 1) values
    (TVM's defaults: 30 features, at most 5 rows, seed 0)."""

    def __init__(self, *, feature_size: int = 30, max_block_num: int = 5, seed: int = 0) -> None:
        if feature_size < 1 or max_block_num < 1:
            raise ValueError(f"feature_size ({feature_size}) and max_block_num ({max_block_num}) must be >= 1")
        self.feature_size = feature_size
        self.max_block_num = max_block_num
        self.rng = np.random.default_rng(seed)

    def layout(self) -> str:
        return f"random(columns={self.feature_size})"

    def extract_from(self, context: TuneContext, candidates: Sequence[MeasureCandidate]) -> list[np.ndarray]:
        out = []
        for _ in candidates:
            rows = int(self.rng.integers(1, self.max_block_num + 1))
            out.append(self.rng.random((rows, self.feature_size), dtype=np.float32))
        return out
