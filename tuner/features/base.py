"""The feature extractor interface (docs/architecture.md, "Tuner"): TVM's `FeatureExtractor`,
which turns each measure candidate into the rows a cost model learns from.

A candidate becomes a float32 matrix of shape (rows, features): the rows are whatever units the
extractor describes (per-store features: one row per written buffer), so candidates may have
different row counts but every row of one extractor has the same length. Subclass
`FeatureExtractor` and override `extract_from` to plug in an extractor of one's own;
`FeatureExtractor.create(kind)` builds the built-in ones by name.
"""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING, Any, Sequence

from msdb.kinds import UnknownKind, load_kind

if TYPE_CHECKING:
    import numpy as np

    from msdb.tuner.candidate import MeasureCandidate
    from msdb.tuner.context import TuneContext

__all__ = ["FeatureExtractor", "UnknownFeatureExtractor", "create"]


#: what `create` raises for a name msdb does not have (one error class for every kind).
UnknownFeatureExtractor = UnknownKind


class FeatureExtractor(abc.ABC):
    """Base class of feature extractors."""

    @abc.abstractmethod
    def extract_from(self, context: TuneContext, candidates: Sequence[MeasureCandidate]) -> list[np.ndarray]:
        """One float32 array of shape (n_rows, n_features) per candidate, in order."""

    def layout(self) -> str:
        """What the columns mean, as one string: a model trained on one layout is refused by an
        extractor of another (docs/architecture.md, "Features and cost model"). Subclasses
        with options name them."""
        return type(self).__name__

    @staticmethod
    def create(kind: str = "per-store-feature", **kwargs: Any) -> FeatureExtractor:
        """An extractor by name: "per-store-feature" (TVM's default) or "random"."""
        return create(kind, **kwargs)


#: kind -> (module, class), imported on first use.
_KINDS = {
    "per-store-feature": ("msdb.tuner.features.per_store", "PerStoreFeature"),
    "random": ("msdb.tuner.features.random_features", "RandomFeatureExtractor"),
}


def create(kind: str = "per-store-feature", **kwargs: Any) -> FeatureExtractor:
    """An extractor by name; keyword arguments go to its constructor."""
    extractor: FeatureExtractor = load_kind(_KINDS, kind, "feature extractor")(**kwargs)
    return extractor
