"""The cost model interface (docs/architecture.md, "Tuner"): TVM's `CostModel`, which scores
candidates for the evolutionary search (higher is better) and learns from measured results.

The search calls `predict` on every population it evolves and the task scheduler calls
`update` after each measured round. Subclass `CostModel` to plug in a model of one's own;
`CostModel.create(kind)` builds the built-in ones by name.
"""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING, Any, Sequence

from msdb.kinds import UnknownKind, load_kind

if TYPE_CHECKING:
    import numpy as np

    from msdb.tuner.candidate import MeasureCandidate
    from msdb.tuner.context import TuneContext
    from msdb.tuner.measure.runner import RunnerResult

__all__ = ["CostModel", "UnknownCostModel", "create"]


#: what `create` raises for a name msdb does not have (one error class for every kind).
UnknownCostModel = UnknownKind


class CostModel(abc.ABC):
    """Base class of cost models."""

    @abc.abstractmethod
    def update(self, context: TuneContext, candidates: Sequence[MeasureCandidate],
               results: Sequence[RunnerResult]) -> None:
        """Learn from measured candidates (`results[i]` is `candidates[i]`'s)."""

    @abc.abstractmethod
    def predict(self, context: TuneContext, candidates: Sequence[MeasureCandidate]) -> np.ndarray:
        """A float64 score per candidate: higher means expected faster."""

    def can_rank(self) -> bool:
        """Whether `predict` ranks candidates now; False while it returns random scores (TVM's
        XGBoost below its warm-up, the random model). The evolutionary search does not evolve
        a population under scores that say nothing."""
        return True

    @abc.abstractmethod
    def save(self, path: str) -> None:
        """Write the model (and what it learned from) to `path`."""

    @abc.abstractmethod
    def load(self, path: str) -> None:
        """Replace the model's state by what `save` wrote to `path`."""

    @staticmethod
    def create(kind: str = "xgb", *, seed: int = 0, num_threads: int = 1, **kwargs: Any) -> CostModel | None:
        """A model by name: "xgb" (TVM's default), "mlp" (needs the `mlp` extra: PyTorch),
        "random", or "none" (None: no model; see `create`)."""
        return create(kind, seed=seed, num_threads=num_threads, **kwargs)


#: kind -> (module, class), imported on first use (xgboost loads only when asked for).
_KINDS = {
    "xgb": ("msdb.tuner.cost_model.xgb_model", "XGBModel"),
    "mlp": ("msdb.tuner.cost_model.mlp_model", "MLPModel"),
    "random": ("msdb.tuner.cost_model.random_model", "RandomModel"),
}

#: every name `create` takes: the model kinds and "none".
KINDS = (*_KINDS, "none")


def create(kind: str = "xgb", *, seed: int = 0, num_threads: int = 1, **kwargs: Any) -> CostModel | None:
    """A model by name, seeded; `num_threads` is what the model may use to train (XGBoost's
    nthread); other keyword arguments go to its constructor. "none" is TVM's kind without a
    model: None, and the evolutionary search then mutates the fastest measured candidates and
    adds random samples, as it does while a model cannot rank (docs/architecture.md, "Features
    and cost model")."""
    if kind == "none":
        return None
    cls = load_kind(_KINDS, kind, "cost model", alternative='or "none": no model')
    if kind == "random":
        kwargs.pop("extractor", None)
        model: CostModel = cls(seed=seed, **kwargs)
    else:
        model = cls(seed=seed, num_threads=num_threads, **kwargs)
    return model
