"""`XGBModel`: TVM's default cost model, gradient-boosted trees over per-store features (TVM's
`cost_model/xgb_model.py`): a candidate scores the sum of its rows' predictions, trained with
TVM's objective and adaptive training. `pretrain` (beyond TVM) learns from a database's records of
the same target kind. See docs/architecture.md, "Features and cost model".
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from msdb.model_file import CostModelFileError, ModelStamp, read_model_file, write_model_file
from msdb.tuner.cost_model.learning import Group, LearningCostModel, MeasuredGroups, WorkloadKeys
from msdb.tuner.cost_model.training_data import WorkloadSamples
from msdb.tuner.features.base import FeatureExtractor

if TYPE_CHECKING:
    import xgboost as xgb

    from msdb.tuner.candidate import MeasureCandidate
    from msdb.tuner.context import TuneContext

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


class XGBModel(LearningCostModel):
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
        self.measured = MeasuredGroups()
        self.last_train_size = 0
        self.prior_size = 0  # candidates learned before this session: pretrained or loaded
        self.booster: xgb.Booster | None = None
        self.rng = np.random.default_rng(seed)
        self._keys = WorkloadKeys()
        self.target_kind: str | None = None  # of the measurements learned (the stamp's)

    @property
    def data(self) -> dict[str, Group]:
        """The measured candidates by workload key."""
        return self.measured.groups

    @property
    def data_size(self) -> int:
        """How many measured candidates the model holds."""
        return self.measured.size

    # ---- the CostModel interface (`update` is LearningCostModel's) -----------------------
    def _learn_round(self, key: str, features: list[np.ndarray], costs: list[float]) -> None:
        if self.booster is not None and key in self.data and logger.isEnabledFor(logging.DEBUG):
            self._log_validation(key, features, costs)
        self._add(key, features, costs)
        online, trained = self.data_size - self.prior_size, self.last_train_size - self.prior_size
        if self.adaptive_training and online - trained < trained / 5:
            return  # not enough new data to be worth a retraining (TVM's adaptive training)
        self._train()

    def can_rank(self) -> bool:
        return self.booster is not None and self.data_size >= self.num_warmup_samples

    def predict(self, context: TuneContext, candidates: Sequence[MeasureCandidate]) -> np.ndarray:
        if not self.can_rank():
            return self.rng.uniform(0.0, 1.0, len(candidates))
        return self._predict(self._features(context, candidates))

    def save(self, path: str) -> None:
        """One .npz model file (`msdb.model_file.write_model_file`, no pickles): the booster as
        XGBoost's JSON, every group's feature rows and costs, the counters, the warm-up
        generator's state, and the stamp (feature layout, target kind) a loader checks."""
        meta = {
            "format": _FORMAT, "stamp": self.stamp().to_json(), "data_size": self.data_size,
            "last_train_size": self.last_train_size, "rng": self.rng.bit_generator.state,
            "config": asdict(self.config),
        }
        arrays: dict[str, np.ndarray] = {
            **self.measured.arrays(),
            "booster": np.frombuffer(bytes(self.booster.save_raw("json")), dtype=np.uint8)
            if self.booster is not None else np.zeros(0, dtype=np.uint8),
        }
        write_model_file(path, meta, arrays)
        logger.info("saved XGBModel (%d measured candidates) to %s", self.data_size, path)

    def load(self, path: str) -> None:
        """Replace the state by a saved model's; `CostModelFileError` (naming `path`) for a
        file that is not an XGB model or whose features are not this model's extractor's."""
        import xgboost as xgb

        meta, saved = read_model_file(path, _FORMAT)
        stamp = ModelStamp.from_json(meta.get("stamp"), path)
        stamp.check(path, self.extractor, None)
        try:
            measured = MeasuredGroups.from_arrays(saved)
            raw = saved["booster"].tobytes()
            booster = None
            if raw:
                booster = xgb.Booster()
                booster.load_model(bytearray(raw))
            last_train_size = int(meta["last_train_size"])
            rng = np.random.default_rng()
            rng.bit_generator.state = meta["rng"]
        except (KeyError, ValueError, TypeError, xgb.core.XGBoostError) as exc:
            raise CostModelFileError(f"{path}: a damaged XGB model file ({type(exc).__name__}: {exc})") from None
        self.measured, self.booster, self.last_train_size = measured, booster, last_train_size
        self.prior_size = self.data_size
        self.target_kind = stamp.target_kind
        self.rng = rng

    # ---- beyond TVM: learning from a database ----------------------------------------------
    def learn(self, samples: Sequence[WorkloadSamples]) -> int:
        """Add replayed workloads' candidates and costs, then train; returns how many were added.
        What it learned counts as prior knowledge: adaptive training then waits for a fifth more
        of the session's own measurements, not of the whole data, so a pretrained model
        learns the new workload from its first rounds."""
        added = self._add_samples(samples)
        if added:
            self._train()
        self.prior_size = self.data_size
        logger.info("trained on %d records of %d workloads", added, len(samples))
        return added

    # ---- internals -------------------------------------------------------------------------
    def _add(self, key: str, features: Sequence[np.ndarray], costs: Sequence[float]) -> None:
        self.measured.add(key, features, costs)

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
