"""Feature extractors (docs/architecture.md, "Tuner"): what a cost model sees of a candidate.

- `base`: `FeatureExtractor` (subclass it to plug in one's own) and `create(kind)`;
- `per_store`: `PerStoreFeature`, TVM's default, one row of 164 features per written buffer;
- `store_walk`: the walk that finds each store's loops and accesses; `groups`: the features;
- `random_features`: `RandomFeatureExtractor`, seeded random rows (TVM's baseline).
"""

from __future__ import annotations

from msdb.tuner.features.base import FeatureExtractor, UnknownFeatureExtractor, create
from msdb.tuner.features.groups import feature_names
from msdb.tuner.features.per_store import PerStoreFeature
from msdb.tuner.features.random_features import RandomFeatureExtractor

__all__ = ["FeatureExtractor", "UnknownFeatureExtractor", "create", "PerStoreFeature", "RandomFeatureExtractor",
           "feature_names"]
