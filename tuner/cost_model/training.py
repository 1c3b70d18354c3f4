"""Training a cost model on a database: `msdb train-cost-model` (docs/architecture.md,
"Features and cost model").

Every measured record of one target kind is replayed and featurized (`training_data`), labels
normalized within each workload. Some workloads are held out: a model trained on the others
is scored on them with TenSet's metrics (`metrics`), beside a random ranking of the same
candidates, so the report says how well the model ranks workloads it never saw. The file
written is then trained on every workload.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from msdb.errors import MsdbError
from msdb.records.ranking import ran
from msdb.tuner.cost_model.metrics import RankingQuality, ranking_quality
from msdb.tuner.cost_model.training_data import WorkloadSamples, workload_samples

if TYPE_CHECKING:
    from msdb.database.base import Database
    from msdb.records.record import TuningRecord
    from msdb.records.target import Target
    from msdb.tuner.cost_model.base import CostModel

__all__ = ["TrainingDataError", "TrainingReport", "train_cost_model", "DEFAULT_MAX_PER_WORKLOAD"]

logger = logging.getLogger(__name__)

#: records replayed per workload at most (spread over its ranking): each costs a replay and a
#: featurization, about 10 ms, so a database of large tunes trains in minutes, not hours.
DEFAULT_MAX_PER_WORKLOAD = 256


class TrainingDataError(MsdbError):
    """A database that gives a cost model nothing to learn (the message says why)."""


@dataclass(frozen=True)
class TrainingReport:
    """What `train_cost_model` did: the model file, what it learned from, how long it took,
    and its ranking quality on held-out workloads (`held_out`, beside `random`: the same
    candidates ranked at random; both None when there were too few workloads to hold any out)."""

    path: str
    kind: str
    target_kind: str
    workloads: int
    records: int
    skipped: int
    held_out: RankingQuality | None
    random: RankingQuality | None
    seconds: float


def train_cost_model(database: Database, output: str | os.PathLike[str], *, kind: str = "xgb",
                     target: Target | str | None = None, holdout: float = 0.2, seed: int = 0,
                     max_per_workload: int | None = DEFAULT_MAX_PER_WORKLOAD, num_threads: int = 1) -> TrainingReport:
    """Train a `kind` model on `database`'s measured records of `target`'s kind (when None: the
    one kind the database has records of) and save it to `output`. `holdout` is the share of
    workloads (at least one when there are two or more; 0 for none) held out to score it."""
    from msdb.records.target import Target

    if not 0 <= holdout < 1:
        raise ValueError(f"holdout must be in [0, 1), got {holdout}")
    folder = Path(output).resolve().parent
    if not folder.is_dir():
        raise TrainingDataError(f"{output}: cannot write the model there: no folder {folder}")
    _model(kind, seed, num_threads)  # an unknown kind, or mlp without PyTorch, before minutes of replays
    started = time.perf_counter()
    records = database.get_all_tuning_records()
    target_kind = _target_kind(records, Target.coerce(target), database)
    samples = workload_samples(records, target_kind, max_per_workload=max_per_workload, seed=seed)
    used = sum(len(s.candidates) for s in samples)
    if not samples:
        raise TrainingDataError(f"{_name(database)}: none of the measured {target_kind!r} records replays on its "
                                "workload; nothing to train on")
    held_out = random = None
    test, train = _split(samples, holdout, seed)
    if test:  # scored without a warm-up: what a model ranks at all, however few records it learned
        model = _model(kind, seed, num_threads, num_warmup_samples=0)
        model.learn(train)  # type: ignore[attr-defined]
        if model.can_rank():
            held_out = ranking_quality([(np.asarray(model.predict(s.context, s.candidates)), np.asarray(s.costs))
                                        for s in test])
            rng = np.random.default_rng(seed)
            random = ranking_quality([(rng.random(len(s.costs)), np.asarray(s.costs)) for s in test])
        else:
            logger.warning("the model trained without the held-out workloads does not rank yet (too few records); "
                           "no held-out score")
    model = _model(kind, seed, num_threads)
    model.learn(samples)  # type: ignore[attr-defined]
    model.save(os.fspath(output))
    return TrainingReport(os.fspath(output), kind, target_kind, len(samples), used, len(records) - used, held_out,
                          random, time.perf_counter() - started)


def _model(kind: str, seed: int, num_threads: int, **kwargs: Any) -> CostModel:
    from msdb.tuner.cost_model.base import create

    model = create(kind, seed=seed, num_threads=num_threads, **kwargs)
    if model is None or not hasattr(model, "learn"):
        raise ValueError(f"a {kind!r} cost model cannot be trained on a database (use xgb or mlp)")
    return model


def _target_kind(records: Sequence[TuningRecord], target: Target | None, database: Database) -> str:
    """The target kind to train on: `target`'s, or the only kind with measured records."""
    measured = [r for r in records if ran(r.run_secs) and r.target is not None]
    kinds = sorted({r.target.kind for r in measured if r.target is not None})
    if target is not None:
        if target.kind not in kinds:
            have = f"it has measured records of {', '.join(map(repr, kinds))} targets" if kinds else \
                _nothing_measured(records)
            raise TrainingDataError(f"{_name(database)}: no measured records of {target.kind!r} targets to train on "
                                    f"({have})")
        return target.kind
    if not kinds:
        raise TrainingDataError(f"{_name(database)}: no measured records to train on ({_nothing_measured(records)})")
    if len(kinds) > 1:
        raise TrainingDataError(f"{_name(database)}: measured records of several target kinds "
                                f"({', '.join(kinds)}); pass --target to pick one")
    return kinds[0]


def _nothing_measured(records: Sequence[TuningRecord]) -> str:
    if not records:
        return "the database has no records"
    return f"all {len(records)} records failed or were never run"


def _split(samples: Sequence[WorkloadSamples], holdout: float, seed: int) -> tuple[list[WorkloadSamples],
                                                                                   list[WorkloadSamples]]:
    """(held out, kept): a seeded share of the workloads, chosen by their sorted keys."""
    if holdout <= 0 or len(samples) < 2:
        return [], list(samples)
    ordered = sorted(samples, key=lambda s: s.key)
    picks = set(np.random.default_rng(seed).permutation(len(ordered))[:max(1, round(holdout * len(ordered)))].tolist())
    return ([s for i, s in enumerate(ordered) if i in picks], [s for i, s in enumerate(ordered) if i not in picks])


def _name(database: Any) -> str:
    return str(getattr(database, "path", None) or "the database")
