"""`RandomModel`: seeded uniform [0, 1) scores, TVM's baseline model (a search that does no
better with a real model than with this one learned nothing)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Sequence

import numpy as np

from msdb.tuner.cost_model.base import CostModel

if TYPE_CHECKING:
    from msdb.tuner.candidate import MeasureCandidate
    from msdb.tuner.context import TuneContext
    from msdb.tuner.measure.runner import RunnerResult

__all__ = ["RandomModel"]


class RandomModel(CostModel):
    """Ignores results; each score is uniform in [0, 1) from a generator seeded with `seed`.
    `save` keeps the generator's state, so a loaded model continues the same sequence."""

    def __init__(self, *, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)

    def update(self, context: TuneContext, candidates: Sequence[MeasureCandidate],
               results: Sequence[RunnerResult]) -> None:
        if len(candidates) != len(results):
            raise ValueError(f"update: {len(candidates)} candidates but {len(results)} results")

    def can_rank(self) -> bool:
        return False

    def predict(self, context: TuneContext, candidates: Sequence[MeasureCandidate]) -> np.ndarray:
        return self.rng.random(len(candidates), dtype=np.float64)

    def save(self, path: str) -> None:
        with open(path, "w") as f:
            json.dump({"kind": "random", "state": self.rng.bit_generator.state}, f)

    def load(self, path: str) -> None:
        with open(path) as f:
            saved = json.load(f)
        if not isinstance(saved, dict) or saved.get("kind") != "random":
            raise ValueError(f"{path} is not a saved RandomModel")
        self.rng.bit_generator.state = saved["state"]
