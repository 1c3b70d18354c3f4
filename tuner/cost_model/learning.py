"""What every learning cost model keeps the same way (docs/architecture.md, "Features and cost
model"): the measured candidates grouped by workload (labels are normalized within a workload,
so the groups must stay apart), the group key of a task, and the one target kind a model may
learn. `XGBModel` and `MLPModel` share these so that their files and their refusals agree.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

import numpy as np

from msdb.model_file import ModelStamp
from msdb.tuner.cost_model.base import CostModel
from msdb.tuner.cost_model.training_data import WorkloadSamples, cost_of, labels, workload_samples

if TYPE_CHECKING:
    from msdb.ir.function import IRModule
    from msdb.records.record import TuningRecord
    from msdb.records.target import Target
    from msdb.tuner.features.base import FeatureExtractor
    from msdb.tuner.candidate import MeasureCandidate
    from msdb.tuner.context import TuneContext
    from msdb.tuner.measure.runner import RunnerResult

__all__ = ["Group", "LearningCostModel", "MeasuredGroups", "WorkloadKeys", "measured_round", "note_target"]


def measured_round(learned: str | None, context: TuneContext, candidates: Sequence[MeasureCandidate],
                   results: Sequence[RunnerResult],
                   featurize: Callable[[TuneContext, Sequence[MeasureCandidate]], list[np.ndarray]]
                   ) -> tuple[str | None, list[np.ndarray], list[float]] | None:
    """What an `update` learns from a measured round: (the target kind the model knows after
    it, `note_target`; each candidate's features; its cost, `cost_of`, a failed run costing
    `FAILED_RUN_SECS`), or None for an empty round. Lengths that differ are a ValueError."""
    if len(candidates) != len(results):
        raise ValueError(f"update: {len(candidates)} candidates but {len(results)} results")
    if not candidates:
        return None
    kind = note_target(learned, context.target)
    costs = [cost_of(r.run_secs if r.error_msg is None else None) for r in results]
    return kind, featurize(context, candidates), costs


def note_target(learned: str | None, target: Target | None) -> str | None:
    """The target kind a model knows after learning measurements on `target`: `learned`, or
    the target's kind when it had learned none. Measurements of another kind would make its
    scores meaningless for both, so they are a ValueError."""
    if target is None:
        return learned
    if learned is None:
        return target.kind
    if target.kind != learned:
        raise ValueError(f"this cost model learned {learned!r} measurements; it cannot learn {target.kind!r} "
                         f"ones ({target})")
    return learned


class WorkloadKeys:
    """The group of a task: the structural hash of its workload, hashed once per module object
    (the search asks for the same module every round)."""

    def __init__(self) -> None:
        self._last: tuple[IRModule, str] | None = None

    def key(self, context: TuneContext) -> str:
        from msdb.hashing import structural_hash

        mod = context.mod
        if mod is None:
            raise ValueError("a cost model learns from a TuneContext with a module")
        if self._last is None or self._last[0] is not mod:
            self._last = (mod, structural_hash(mod))
        return self._last[1]


class Group:
    """The measured candidates of one workload: their feature rows and costs."""

    __slots__ = ("features", "costs")

    def __init__(self) -> None:
        self.features: list[np.ndarray] = []
        self.costs: list[float] = []

    def labels(self) -> np.ndarray:
        """Labels normalized within the workload (`training_data.labels`)."""
        return labels(self.costs)


class MeasuredGroups:
    """Measured candidates by workload key, in the order the keys first came; `size` counts
    the candidates. `arrays`/`from_arrays` are how a model file keeps them (no pickles)."""

    def __init__(self) -> None:
        self.groups: dict[str, Group] = {}
        self.size = 0

    def add(self, key: str, features: Sequence[np.ndarray], costs: Sequence[float]) -> int:
        """Add a workload's measured candidates; one without rows says nothing and is left
        out, as in TVM. Returns how many were added."""
        group = self.groups.get(key)
        if group is None:
            group = self.groups[key] = Group()
        added = 0
        for x, cost in zip(features, costs):
            if len(x):
                group.features.append(np.asarray(x, dtype=np.float32))
                group.costs.append(float(cost))
                added += 1
        self.size += added
        return added

    def arrays(self, width: int = 0) -> dict[str, np.ndarray]:
        """The groups as flat arrays: keys, group sizes, each candidate's row count, all rows
        stacked, and the costs."""
        groups = list(self.groups.items())
        features = [f for _, g in groups for f in g.features]
        width = features[0].shape[1] if features else width
        return {
            "group_keys": np.array([k for k, _ in groups], dtype=str),
            "group_sizes": np.array([len(g.costs) for _, g in groups], dtype=np.int64),
            "rows": np.array([f.shape[0] for f in features], dtype=np.int64),
            "features": np.concatenate(features, axis=0) if features else np.zeros((0, width), np.float32),
            "costs": np.array([c for _, g in groups for c in g.costs], dtype=np.float64),
        }

    @staticmethod
    def from_arrays(saved: dict[str, np.ndarray]) -> MeasuredGroups:
        """What `arrays` wrote; KeyError or ValueError when the arrays do not fit together."""
        rows, sizes, costs = saved["rows"], saved["group_sizes"], saved["costs"]
        all_features = saved["features"]
        if all_features.ndim != 2 or int(rows.sum()) != all_features.shape[0] or int(sizes.sum()) != len(rows) \
                or len(costs) != len(rows) or len(sizes) != len(saved["group_keys"]):
            raise ValueError("the stored groups, rows, features and costs do not match")
        starts = np.concatenate([[0], np.cumsum(rows)]).astype(np.int64)
        out = MeasuredGroups()
        index = 0
        for key, size in zip(saved["group_keys"], sizes):
            group = out.groups[str(key)] = Group()
            for i in range(index, index + int(size)):
                group.features.append(all_features[starts[i]:starts[i + 1]].astype(np.float32, copy=False))
                group.costs.append(float(costs[i]))
            index += int(size)
        out.size = index
        return out


class LearningCostModel(CostModel):
    """What a cost model that learns from measurements shares, whatever it learns with (XGB,
    the MLP): its extractor, the measured candidates by workload (`measured`), the target kind
    it learned, the stamp its file carries, and pretraining from records. A subclass sets
    `extractor`, `seed`, `measured`, `target_kind` and `_keys` and implements `learn` and
    `_learn_round`."""

    extractor: FeatureExtractor
    seed: int
    measured: MeasuredGroups
    target_kind: str | None
    _keys: WorkloadKeys

    def update(self, context: TuneContext, candidates: Sequence[MeasureCandidate],
               results: Sequence[RunnerResult]) -> None:
        """Learn a measured round: every candidate's features and cost (`measured_round`),
        under its workload's group key, handed to `_learn_round`; an empty round is nothing."""
        measured = measured_round(self.target_kind, context, candidates, results, self._features)
        if measured is None:
            return
        self.target_kind, features, costs = measured
        self._learn_round(self._keys.key(context), features, costs)

    def _learn_round(self, key: str, features: list[np.ndarray], costs: list[float]) -> None:
        """Add a measured round of workload `key` and train as the model's schedule says."""
        raise NotImplementedError

    def stamp(self) -> ModelStamp:
        """What this model's numbers are about (`msdb.model_file.ModelStamp`)."""
        return ModelStamp(self.extractor.layout(), self.target_kind, len(self.measured.groups), self.measured.size)

    def pretrain(self, records: Iterable[TuningRecord], target: Target | str | dict[str, Any] | None = None, *,
                 max_per_workload: int | None = None) -> int:
        """Learn from existing measurements: each record that ran, of `target`'s kind (any,
        without a target), is replayed on its workload, featurized and labelled within its
        workload like a measured candidate (`training_data.workload_samples`, where
        `max_per_workload` is explained), then the model is trained. Returns how many records
        were added."""
        return self.learn(workload_samples(records, target, max_per_workload=max_per_workload, seed=self.seed))

    def learn(self, samples: Sequence[WorkloadSamples]) -> int:
        """Add replayed workloads' candidates and costs, then train; how many were added."""
        raise NotImplementedError

    def _add_samples(self, samples: Sequence[WorkloadSamples]) -> int:
        """Add replayed workloads' candidates and costs (the target kind checked); how many."""
        added = 0
        for group in samples:
            self.target_kind = note_target(self.target_kind, group.context.target)
            added += self.measured.add(group.key, self._features(group.context, group.candidates), group.costs)
        return added

    def _features(self, context: TuneContext, candidates: Sequence[MeasureCandidate]) -> list[np.ndarray]:
        """The extractor's features of the candidates, timed as the profiler's "features" phase."""
        from msdb.tuner.profiler import Profiler

        with Profiler.timeit("features"):
            return list(self.extractor.extract_from(context, candidates))
