"""The cost models: random scores below the warm-up, XGBoost learning a known ranking of GMM
schedules, save/load, seeds, the factory, and pretraining from database records."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from msdb.hashing import structural_hash
from msdb.ir import IRModule, zoo
from msdb.records.record import TuningRecord
from msdb.records.target import Target
from msdb.schedule.schedule import Schedule
from msdb.tuner.candidate import MeasureCandidate
from msdb.tuner.context import TuneContext
from msdb.tuner.cost_model import CostModel, RandomModel, UnknownCostModel, XGBModel
from msdb.tuner.cost_model.training_data import cost_of
from msdb.tuner.measure.runner import RunnerResult

N = 32
TILES = [1, 2, 4, 8, 16, 32]


def gmm() -> IRModule:
    return zoo.build("GMM", 1, N, N, N)


def tiled(mod: IRModule, fi: int, fj: int) -> Schedule:
    """i split by fi and j by fj, the j tile innermost and vectorized."""
    sch = Schedule(mod, seed=0)
    i, j, k = sch.get_loops(sch.get_block("Z"))[-3:]
    i0, i1 = sch.split(i, [None, fi])
    j0, j1 = sch.split(j, [None, fj])
    sch.reorder(i0, j0, i1, k, j1)
    sch.vectorize(j1)
    return sch


def fake_seconds(fi: int, fj: int) -> float:
    """A known cost: wider vectors are much faster, larger i tiles a little."""
    return 1e-3 * (6 - math.log2(fj)) - 1e-5 * math.log2(fi)


def pretraining_records(mod: IRModule) -> tuple[list[TuningRecord], list[TuningRecord]]:
    """(every tiling of `mod` as a stored llvm record with its known cost, one record measured
    on cuda that an llvm model must leave out)."""
    pairs = [(fi, fj) for fi in TILES for fj in TILES]
    records = [TuningRecord(tiled(mod, fi, fj).trace, mod, [fake_seconds(fi, fj)], Target("llvm")) for fi, fj in pairs]
    return records, [TuningRecord(tiled(mod, 1, 1).trace, mod, [1e-6], Target("cuda"))]


def dataset(mod: IRModule) -> tuple[list[MeasureCandidate], list[RunnerResult], np.ndarray]:
    pairs = [(fi, fj) for fi in TILES for fj in TILES]
    candidates = [MeasureCandidate.of(tiled(mod, fi, fj)) for fi, fj in pairs]
    seconds = np.array([fake_seconds(fi, fj) for fi, fj in pairs])
    return candidates, [RunnerResult([s], None) for s in seconds], seconds


def context(mod: IRModule, target: str = "llvm") -> TuneContext:
    return TuneContext(mod=mod, target=Target(target), rand_state=0)


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1])


def test_create_and_unknown_kind() -> None:
    assert isinstance(CostModel.create("random", seed=3), RandomModel)
    model = CostModel.create("xgb", seed=3, num_threads=2)
    assert isinstance(model, XGBModel) and model.seed == 3 and model.num_threads == 2
    with pytest.raises(UnknownCostModel, match=r"unknown cost model 'gbm'; known: xgb, mlp, random"):
        CostModel.create("gbm")


def test_random_model_is_seeded_and_saves_its_state(tmp_path: Path) -> None:
    mod = gmm()
    candidates = [MeasureCandidate.of(Schedule(mod, seed=0))] * 5
    a, b = RandomModel(seed=7), RandomModel(seed=7)
    first = a.predict(context(mod), candidates)
    assert np.array_equal(first, b.predict(context(mod), candidates))
    assert first.dtype == np.float64 and ((0 <= first) & (first < 1)).all()
    a.save(str(tmp_path / "random.json"))
    c = RandomModel(seed=0)
    c.load(str(tmp_path / "random.json"))
    assert np.array_equal(a.predict(context(mod), candidates), c.predict(context(mod), candidates))


def test_cost_of_a_result() -> None:
    assert cost_of([3.0, 1.0, 2.0]) == 2.0  # TVM's mean cost is the median
    assert cost_of([]) == cost_of(None) == 1e10


def test_xgb_predicts_seeded_noise_below_the_warmup() -> None:
    mod = gmm()
    candidates, results, _ = dataset(mod)
    model = XGBModel(seed=11)
    model.update(context(mod), candidates, results)  # 36 < 100 measured: still warming up
    assert model.booster is not None and model.data_size == 36
    expected = np.random.default_rng(11).uniform(0.0, 1.0, len(candidates))
    assert np.array_equal(model.predict(context(mod), candidates), expected)


def test_xgb_learns_a_ranking_and_failures_cost_1e10() -> None:
    mod = gmm()
    candidates, results, seconds = dataset(mod)
    model = XGBModel(seed=0, num_warmup_samples=0)
    model.update(context(mod), candidates, results)
    scores = model.predict(context(mod), candidates)
    assert scores.shape == (36,) and scores.dtype == np.float64
    assert spearman(scores, -seconds) > 0.9
    best = int(np.argmin(seconds))
    assert scores[best] >= np.sort(scores)[-6]  # the fastest schedule is among the six best scored
    # A failed run is a cost of 1e10 in the workload's group (label ~0), whatever its run_secs say.
    model.update(context(mod), candidates[:1], [RunnerResult([1e10], "runner: timeout")])
    assert model.data[structural_hash(mod)].costs[-1] == 1e10


def test_xgb_adaptive_training_waits_for_a_fifth_more_data() -> None:
    mod = gmm()
    candidates, results, _ = dataset(mod)
    model = XGBModel(seed=0, num_warmup_samples=0)
    model.update(context(mod), candidates[:30], results[:30])
    booster = model.booster
    model.update(context(mod), candidates[30:35], results[30:35])  # 5 < 30 / 5 new: no retraining
    assert model.booster is booster and model.data_size == 35 and model.last_train_size == 30
    model.update(context(mod), candidates[35:], results[35:])  # 6 >= 30 / 5 since the last training
    assert model.booster is not booster and model.last_train_size == 36


def test_xgb_adaptive_training_counts_the_sessions_own_data_after_pretraining(tmp_path: Path) -> None:
    """A pretrained or loaded model learns the new workload from its first rounds: what it knew
    before does not count in the fifth adaptive training waits for."""
    mod = gmm()
    candidates, results, _ = dataset(mod)
    other = zoo.build("GMM", 1, 16, 32, 64)
    prior = [TuningRecord(Schedule(other, seed=0).trace, other, [1e-3 * (i + 1)], Target("llvm")) for i in range(8)]
    model = XGBModel(seed=0, num_warmup_samples=0)
    model.pretrain(prior * 4, target="llvm")
    assert model.prior_size == model.data_size == model.last_train_size == 32
    booster = model.booster
    model.update(context(mod), candidates[:4], results[:4])  # 4 < 32 / 5, but the session's first data
    assert model.booster is not booster and model.last_train_size == 36
    booster = model.booster
    model.update(context(mod), candidates[4:8], results[4:8])  # 4 >= 4 / 5 of the session's own
    assert model.booster is not booster
    model.save(str(tmp_path / "m.npz"))
    loaded = XGBModel(seed=0, num_warmup_samples=0)
    loaded.load(str(tmp_path / "m.npz"))
    assert loaded.prior_size == loaded.data_size == 40
    booster = loaded.booster
    loaded.update(context(mod), candidates[8:10], results[8:10])
    assert loaded.booster is not booster and loaded.last_train_size == 42


def test_xgb_is_deterministic_and_round_trips(tmp_path: Path) -> None:
    mod = gmm()
    candidates, results, _ = dataset(mod)
    a, b = XGBModel(seed=5, num_warmup_samples=0), XGBModel(seed=5, num_warmup_samples=0)
    for model in (a, b):
        model.update(context(mod), candidates, results)
    predicted = a.predict(context(mod), candidates)
    assert np.array_equal(predicted, b.predict(context(mod), candidates))
    path = str(tmp_path / "model.npz")
    a.save(path)
    loaded = XGBModel(seed=99, num_warmup_samples=0)
    loaded.load(path)
    assert loaded.data_size == a.data_size == 36 and loaded.last_train_size == a.last_train_size
    assert np.array_equal(loaded.predict(context(mod), candidates), predicted)
    assert [g.costs for g in loaded.data.values()] == [g.costs for g in a.data.values()]
    fresh = XGBModel(seed=1)
    fresh.save(path)  # an untrained model saves and loads too
    fresh.load(path)
    assert fresh.booster is None and fresh.data_size == 0


@pytest.mark.slow
def test_xgb_pretrains_from_records_of_the_target_kind() -> None:
    mod = gmm()
    records, elsewhere = pretraining_records(mod)
    model = XGBModel(seed=0, num_warmup_samples=0)
    assert model.pretrain(records + elsewhere, target="llvm") == len(records)
    assert list(model.data) == [structural_hash(mod)]  # the same group a tuning session updates
    assert model.booster is not None and model.last_train_size == 36
    candidates, results, seconds = dataset(mod)
    assert spearman(model.predict(context(mod), candidates), -seconds) > 0.9
    model.update(context(mod), candidates[:8], results[:8])
    assert list(model.data) == [structural_hash(mod)] and model.data_size == 44
    spread = XGBModel(seed=0)
    assert spread.pretrain(records, target=Target("llvm"), max_per_workload=5) == 5
    kept = sorted(spread.data[structural_hash(mod)].costs)
    assert kept[0] == min(fake_seconds(fi, fj) for fi in TILES for fj in TILES)  # the best and the worst are kept
    assert kept[-1] == max(fake_seconds(fi, fj) for fi in TILES for fj in TILES)
