"""`XGBModel`: TVM's default cost model, gradient-boosted trees over per-store features (TVM's
`cost_model/xgb_model.py`): a candidate scores the sum of its rows' predictions, trained with
TVM's objective and adaptive training. `pretrain` (beyond TVM) learns from a database's records of
the same target kind. See docs/architecture.md, "Features and cost model".
"""

from __future__ import annotations

import io
import json
import logging
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Iterable, Sequence

import numpy as np

from msdb.errors import MsdbError
from msdb.records.ranking import FAILED_RUN_SECS
from msdb.tuner.cost_model.base import CostModel
from msdb.tuner.features.base import FeatureExtractor

if TYPE_CHECKING:
    import xgboost as xgb

    from msdb.ir.function import IRModule
    from msdb.records.record import TuningRecord
    from msdb.records.target import Target
    from msdb.tuner.candidate import MeasureCandidate
    from msdb.tuner.context import TuneContext
    from msdb.tuner.measure.runner import RunnerResult

__all__ = ["XGBConfig", "XGBModel"]

logger = logging.getLogger(__name__)

_FORMAT = "msdb-xgb-model-1"


@dataclass(frozen=True)
class XGBConfig:
    """XGBoost's tree parameters, TVM's values."""

    max_depth: int = 10
    gamma: float = 0.001
    min_child_weight: float = 0
    eta: float = 0.2


class _Group:
    """The measured candidates of one workload: their feature packs and costs."""

    __slots__ = ("features", "costs")

    def __init__(self) -> None:
        self.features: list[np.ndarray] = []
        self.costs: list[float] = []

    def labels(self) -> np.ndarray:
        """`best cost / cost` (0 for a zero cost, as TVM's division guard gives)."""
        costs = np.asarray(self.costs, dtype=np.float64)
        best = costs.min()
        out = np.zeros_like(costs)
        np.divide(best, costs, out=out, where=costs != 0)
        return out


class _Packs:
    """Candidates' row matrices stacked into one DMatrix, with each row's candidate index (TVM's
    `PackSum`)."""

    def __init__(self, xs: Sequence[np.ndarray], ys: np.ndarray | None = None) -> None:
        import xgboost as xgb

        self.count = len(xs)
        self.ids = np.repeat(np.arange(self.count), [x.shape[0] for x in xs])
        data = np.concatenate(xs, axis=0) if xs else np.zeros((0, 0), dtype=np.float32)
        self.labels = None if ys is None else np.asarray(ys, dtype=np.float64)[self.ids]
        self.dmatrix = xgb.DMatrix(data, label=self.labels, weight=self.labels)

    def sums(self, row_predictions: np.ndarray) -> np.ndarray:
        """Each candidate's score: the sum of its rows' predictions."""
        return np.bincount(self.ids, weights=row_predictions, minlength=self.count)

    def objective(self, row_predictions: np.ndarray, _: Any) -> tuple[np.ndarray, np.ndarray]:
        """Squared error of the pack sums, propagated to each row and weighted by the label."""
        assert self.labels is not None
        error = self.sums(row_predictions)[self.ids] - self.labels
        return error * self.labels, self.labels.copy()

    def rmse(self, row_predictions: np.ndarray, _: Any) -> tuple[str, float]:
        """`p-rmse`: the pack sums' RMSE over rows (what early stopping watches)."""
        assert self.labels is not None
        error = self.sums(row_predictions)[self.ids] - self.labels
        return "p-rmse", float(np.sqrt(np.mean(np.square(error))))

    def average_peak(self, row_predictions: np.ndarray, n: int) -> float:
        """`a-peak@n`: how close the best of the top-n predicted candidates gets to the best
        measured one, averaged over the top n (logged only)."""
        assert self.labels is not None
        rows = np.bincount(self.ids, minlength=self.count)
        truth = np.bincount(self.ids, weights=self.labels, minlength=self.count) / rows
        order = np.argsort(-self.sums(row_predictions), kind="stable")[:n]
        curve = np.maximum.accumulate(truth[order]) / truth.max() if truth.max() > 0 else np.zeros(len(order))
        return float(np.mean(curve)) if len(curve) else 0.0


class XGBModel(CostModel):
    """TVM's XGBoost model (see the module docstring); `seed` makes training and the warm-up
    noise deterministic, `num_threads` is XGBoost's nthread."""

    def __init__(self, *, extractor: FeatureExtractor | str = "per-store-feature", config: XGBConfig = XGBConfig(),
                 seed: int = 0, num_threads: int = 1, num_warmup_samples: int = 100, early_stopping_rounds: int = 50,
                 average_peak_n: int = 32, adaptive_training: bool = True) -> None:
        self.extractor = FeatureExtractor.create(extractor) if isinstance(extractor, str) else extractor
        self.config = config
        self.seed = seed
        self.num_threads = num_threads
        self.num_warmup_samples = num_warmup_samples
        self.early_stopping_rounds = early_stopping_rounds
        self.average_peak_n = average_peak_n
        self.adaptive_training = adaptive_training
        self.data: dict[str, _Group] = {}
        self.data_size = 0
        self.last_train_size = 0
        self.booster: xgb.Booster | None = None
        self.rng = np.random.default_rng(seed)
        self._hashed: tuple[IRModule, str] | None = None

    # ---- the CostModel interface ---------------------------------------------------------
    def update(self, context: TuneContext, candidates: Sequence[MeasureCandidate],
               results: Sequence[RunnerResult]) -> None:
        if len(candidates) != len(results):
            raise ValueError(f"update: {len(candidates)} candidates but {len(results)} results")
        if not candidates:
            return
        features = self._features(context, candidates)
        costs = [_cost(r.run_secs if r.error_msg is None else None) for r in results]
        key = self._workload_key(context)
        if self.booster is not None and key in self.data and logger.isEnabledFor(logging.DEBUG):
            self._log_validation(key, features, costs)
        self._add(key, features, costs)
        if self.adaptive_training and self.data_size - self.last_train_size < self.last_train_size / 5:
            return  # not enough new data to be worth a retraining (TVM's adaptive training)
        self._train()

    def can_rank(self) -> bool:
        return self.booster is not None and self.data_size >= self.num_warmup_samples

    def predict(self, context: TuneContext, candidates: Sequence[MeasureCandidate]) -> np.ndarray:
        if not self.can_rank():
            return self.rng.uniform(0.0, 1.0, len(candidates))
        return self._predict(self._features(context, candidates))

    def save(self, path: str) -> None:
        """One .npz file (no pickles): the booster as XGBoost's JSON, every group's feature
        rows and costs, the counters and the warm-up generator's state."""
        groups = list(self.data.items())
        features = [f for _, g in groups for f in g.features]
        width = features[0].shape[1] if features else 0
        meta = {
            "format": _FORMAT, "data_size": self.data_size, "last_train_size": self.last_train_size,
            "rng": self.rng.bit_generator.state, "config": asdict(self.config),
        }
        arrays: dict[str, Any] = {
            "meta": np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8),
            "group_keys": np.array([k for k, _ in groups], dtype=str),
            "group_sizes": np.array([len(g.costs) for _, g in groups], dtype=np.int64),
            "rows": np.array([f.shape[0] for f in features], dtype=np.int64),
            "features": np.concatenate(features, axis=0) if features else np.zeros((0, width), np.float32),
            "costs": np.array([c for _, g in groups for c in g.costs], dtype=np.float64),
            "booster": np.frombuffer(bytes(self.booster.save_raw("json")), dtype=np.uint8)
            if self.booster is not None else np.zeros(0, dtype=np.uint8),
        }
        with open(path, "wb") as f:
            np.savez(f, **arrays)
        logger.info("saved XGBModel (%d measured candidates) to %s", self.data_size, path)

    def load(self, path: str) -> None:
        import xgboost as xgb

        with open(path, "rb") as f:
            saved = np.load(io.BytesIO(f.read()), allow_pickle=False)
            meta = json.loads(saved["meta"].tobytes().decode())
            if meta.get("format") != _FORMAT:
                raise ValueError(f"{path} is not a saved XGBModel (format {meta.get('format')!r})")
            rows = saved["rows"]
            starts = np.concatenate([[0], np.cumsum(rows)])
            all_features = saved["features"]
            costs = saved["costs"]
            data: dict[str, _Group] = {}
            index = 0
            for key, size in zip(saved["group_keys"], saved["group_sizes"]):
                group = data[str(key)] = _Group()
                for i in range(index, index + int(size)):
                    group.features.append(all_features[starts[i]:starts[i + 1]])
                    group.costs.append(float(costs[i]))
                index += int(size)
            raw = saved["booster"].tobytes()
        booster = None
        if raw:
            booster = xgb.Booster()
            booster.load_model(bytearray(raw))
        self.data, self.booster = data, booster
        self.data_size, self.last_train_size = int(meta["data_size"]), int(meta["last_train_size"])
        self.rng.bit_generator.state = meta["rng"]

    # ---- beyond TVM: learning from a database ----------------------------------------------
    def pretrain(self, records: Iterable[TuningRecord], target: Target | str | dict[str, Any] | None = None, *,
                 max_per_workload: int | None = None) -> int:
        """Learn from existing measurements: each record of `target`'s kind (any, without a
        target) is replayed on its workload, featurized and labelled within its workload like a
        measured candidate, then the model is trained. `max_per_workload` keeps that many
        records of each workload, spread evenly over its ranking (best to worst), to bound the
        time a large database takes. Records that do not replay are skipped. Returns how many
        records were added."""
        from msdb.records.target import Target
        from msdb.schedule.schedule import Schedule
        from msdb.tuner.candidate import MeasureCandidate
        from msdb.tuner.context import TuneContext

        wanted = Target.coerce(target)
        by_workload: dict[str, list[TuningRecord]] = {}
        for record in records:
            if not record.run_secs or (wanted is not None and (record.target is None
                                                               or record.target.kind != wanted.kind)):
                continue
            by_workload.setdefault(record.workload.hash("structural"), []).append(record)
        added = 0
        for key, group in by_workload.items():
            group = _spread(group, max_per_workload)
            workload = group[0].workload.mod
            candidates, costs = [], []
            for record in group:
                sch = Schedule(workload)
                try:
                    record.trace.apply_to_schedule(sch, remove_postproc=False)
                except (MsdbError, ValueError, KeyError) as exc:
                    logger.debug("pretrain: a record of workload %s does not replay (%s); skipped", key, exc)
                    continue
                candidates.append(MeasureCandidate.of(sch))
                costs.append(_cost(record.run_secs))
            if not candidates:
                continue
            context = TuneContext(mod=workload, target=group[0].target, rand_state=self.seed)
            self._add(key, self._features(context, candidates), costs)
            added += len(candidates)
        if added:
            self._train()
        logger.info("pretrained on %d records of %d workloads", added, len(by_workload))
        return added

    # ---- internals -------------------------------------------------------------------------
    def _features(self, context: TuneContext, candidates: Sequence[MeasureCandidate]) -> list[np.ndarray]:
        """The extractor's features of the candidates, timed as the profiler's "features" phase."""
        from msdb.tuner.profiler import Profiler

        with Profiler.timeit("features"):
            return list(self.extractor.extract_from(context, candidates))

    def _workload_key(self, context: TuneContext) -> str:
        """The group of a task: the structural hash of its workload (hashed once per module)."""
        from msdb.hashing import structural_hash

        mod = context.mod
        if mod is None:
            raise ValueError("XGBModel.update needs a TuneContext with a module")
        if self._hashed is None or self._hashed[0] is not mod:
            self._hashed = (mod, structural_hash(mod))
        return self._hashed[1]

    def _add(self, key: str, features: Sequence[np.ndarray], costs: Sequence[float]) -> None:
        """Add measured candidates to a workload's group (candidates without rows say nothing
        and are left out, as in TVM)."""
        group = self.data.get(key)
        if group is None:
            group = self.data[key] = _Group()
        for x, cost in zip(features, costs):
            if len(x):
                group.features.append(np.asarray(x, dtype=np.float32))
                group.costs.append(cost)
                self.data_size += 1

    def _train(self) -> None:
        import xgboost as xgb

        self.last_train_size = self.data_size
        xs = [f for g in self.data.values() for f in g.features]
        if not xs:
            return
        ys = np.concatenate([g.labels() for g in self.data.values() if g.costs])
        packs = _Packs(xs, ys)
        params = {**asdict(self.config), "seed": self.seed, "nthread": self.num_threads,
                  "disable_default_eval_metric": 1, "verbosity": 0}
        self.booster = xgb.train(params, packs.dmatrix, num_boost_round=10000, obj=packs.objective,
                                 evals=[(packs.dmatrix, "tr")], custom_metric=packs.rmse,
                                 early_stopping_rounds=self.early_stopping_rounds, verbose_eval=False)
        if logger.isEnabledFor(logging.DEBUG):
            predictions = self.booster.predict(packs.dmatrix, output_margin=True)
            logger.debug("XGB trained on %d candidates (%d rows): %d rounds, p-rmse %.6f, a-peak@%d %.6f",
                         len(xs), len(packs.ids), self.booster.num_boosted_rounds(), packs.rmse(predictions, None)[1],
                         self.average_peak_n, packs.average_peak(predictions, self.average_peak_n))

    def _predict(self, xs: Sequence[np.ndarray]) -> np.ndarray:
        assert self.booster is not None
        packs = _Packs([np.asarray(x, dtype=np.float32) for x in xs])
        if not len(packs.ids):
            return np.zeros(len(xs))
        return packs.sums(self.booster.predict(packs.dmatrix, output_margin=True))

    def _log_validation(self, key: str, features: Sequence[np.ndarray], costs: Sequence[float]) -> None:
        """TVM's validation log: how well the current model ranks a new round before it learns."""
        kept = [(x, c) for x, c in zip(features, costs) if len(x)]
        if not kept:
            return
        best = min(self.data[key].costs)
        ys = np.array([best / c if c else 0.0 for _, c in kept])
        packs = _Packs([x for x, _ in kept], ys)
        assert self.booster is not None
        predictions = self.booster.predict(packs.dmatrix, output_margin=True)
        logger.debug("XGB validation: p-rmse %.6f, a-peak@%d %.6f", packs.rmse(predictions, None)[1],
                     self.average_peak_n, packs.average_peak(predictions, self.average_peak_n))


def _cost(run_secs: Sequence[float] | None) -> float:
    """TVM's cost of a measurement: the median of its run times, 1e10 when it has none."""
    if not run_secs:
        return FAILED_RUN_SECS
    return float(np.median(np.asarray(run_secs, dtype=np.float64)))


def _spread(records: list[TuningRecord], limit: int | None) -> list[TuningRecord]:
    """At most `limit` records spread evenly over the ranking (all of them without a limit)."""
    if limit is None or len(records) <= limit:
        return records
    ranked = sorted(records, key=lambda r: r.mean_run_secs)
    picks = np.unique(np.linspace(0, len(ranked) - 1, num=max(limit, 1)).round().astype(int))
    return [ranked[i] for i in picks]
