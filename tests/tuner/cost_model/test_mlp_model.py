"""The "mlp" cost model (PyTorch): it learns to rank a workload's candidates, warm-starts when a
search updates it, is deterministic, saves and loads the same numbers, refuses files that do not
fit, runs in a real search, and says how to install PyTorch when it is missing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from msdb.database import MemoryDatabase
from msdb.database.sql import SQLiteDatabase
from msdb.database.tvm_import import import_tvm
from msdb.hashing import structural_hash
from msdb.records.record import TuningRecord
from msdb.tuner.cost_model import CostModel, XGBModel
from msdb.tuner.cost_model.mlp_model import MLPConfig, MLPModel, lambda_rank_loss
from msdb.tuner.cost_model.saved import CostModelFileError, load_cost_model, read_model_file, write_model_file
from msdb.tuner.cost_model.training_data import WorkloadSamples, workload_samples
from msdb.tuner.measure.runner import RunnerResult
from msdb.tuner.tune import check_record, tune_tir
from tests.tuner.cost_model.test_cost_models import context, dataset, gmm, pretraining_records, spearman
from tests.tuner.search._fakes import FakeBuilder, FakeRunner
from tests.tuner.search.test_tune_default_space import CPU, SMALL, small_evolutionary

TEAMS = Path(__file__).resolve().parents[2] / "data" / "fixtures" / "tvm-0.27"


def trained(seed: int = 0) -> MLPModel:
    mod = gmm()
    candidates, results, _ = dataset(mod)
    model = MLPModel(seed=seed, num_warmup_samples=0)
    model.update(context(mod), candidates, results)
    return model


def test_create_by_name_and_noise_below_the_warmup() -> None:
    model = CostModel.create("mlp", seed=11, num_threads=2)
    assert isinstance(model, MLPModel) and model.seed == 11 and model.num_threads == 2
    mod = gmm()
    candidates, results, _ = dataset(mod)
    model.update(context(mod), candidates, results)  # 36 < 100 measured: still warming up, not trained
    assert model.net is None and model.measured.size == 36 and not model.can_rank()
    expected = np.random.default_rng(11).uniform(0.0, 1.0, len(candidates))
    assert np.array_equal(model.predict(context(mod), candidates), expected)
    model.num_warmup_samples = 40
    model.update(context(mod), candidates[:4], results[:4])  # 40 measured: the first training
    assert model.net is not None and model.can_rank()


def test_without_torch_create_says_how_to_install_it_and_msdb_never_imports_it() -> None:
    code = ("import sys; import msdb.tuner, msdb.tuner.cost_model.mlp_model; assert 'torch' not in sys.modules\n"
            "sys.modules['torch'] = None\n"
            "from msdb.errors import MsdbError\n"
            "from msdb.tuner.cost_model import CostModel\n"
            "try:\n    CostModel.create('mlp')\n"
            "except MsdbError as exc:\n    print(exc)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout == "the 'mlp' cost model needs PyTorch: pip install -e '.[mlp]' in the msdb checkout\n"


def test_the_loss_prefers_the_right_order() -> None:
    labels = torch.tensor([1.0, 0.5, 0.1, 0.0])
    right, wrong = torch.tensor([3.0, 2.0, 1.0, 0.0]), torch.tensor([0.0, 1.0, 2.0, 3.0])
    assert lambda_rank_loss(right, labels) < lambda_rank_loss(torch.zeros(4), labels) < lambda_rank_loss(wrong, labels)
    scores = torch.zeros(4, requires_grad=True)
    lambda_rank_loss(scores, labels).backward()
    assert scores.grad is not None and scores.grad[0] < 0 < scores.grad[3]  # pushes the best up, the worst down


def test_mlp_learns_a_known_ranking_and_ranks_held_out_schedules() -> None:
    mod = gmm()
    candidates, results, seconds = dataset(mod)
    held = np.arange(len(candidates)) % 4 == 3
    model = MLPModel(seed=0, num_warmup_samples=0)
    model.update(context(mod), [c for c, h in zip(candidates, held) if not h],
                 [r for r, h in zip(results, held) if not h])
    scores = model.predict(context(mod), candidates)
    assert scores.shape == (36,) and scores.dtype == np.float64
    assert spearman(scores[~held], -seconds[~held]) > 0.9
    assert spearman(scores[held], -seconds[held]) > 0.8  # schedules it never saw


@pytest.mark.slow
def test_mlp_ranks_held_out_measured_records_of_a_fixture_workload(tmp_path: Path) -> None:
    db = SQLiteDatabase(tmp_path / "teams.sqlite")
    import_tvm(db, sorted(TEAMS.iterdir()))
    records = db.get_all_tuning_records()
    db.close()
    by_workload: dict[str, list[TuningRecord]] = {}
    for record in records:
        by_workload.setdefault(record.workload.hash("structural"), []).append(record)
    (samples,) = workload_samples(max(by_workload.values(), key=len), "llvm")  # the batch matmul, 128 records
    held = np.arange(len(samples.candidates)) % 4 == 3
    train = WorkloadSamples(samples.key, samples.context, [c for c, h in zip(samples.candidates, held) if not h],
                            [c for c, h in zip(samples.costs, held) if not h])
    costs = np.array(samples.costs)[held]
    correlations = []
    for seed in range(3):
        model = MLPModel(seed=seed, num_warmup_samples=0)
        assert model.learn([train]) == len(train.candidates) == 96
        correlations.append(spearman(model.predict(samples.context, [c for c, h in zip(samples.candidates, held)
                                                                      if h]), -costs))
    # Random scores average 0 (standard deviation about 0.1 for three seeds of 32 candidates).
    assert np.mean(correlations) > 0.25 and min(correlations) > 0.1


def test_an_update_warm_starts_and_keeps_the_process_thread_count(monkeypatch: pytest.MonkeyPatch) -> None:
    process_threads = torch.get_num_threads()
    monkeypatch.setattr(torch, "get_num_threads", lambda: 3)  # what the process had before the model
    inside: list[int] = []
    monkeypatch.setattr(torch, "set_num_threads", inside.append)
    mod = gmm()
    candidates, results, _ = dataset(mod)
    model = MLPModel(seed=0, num_warmup_samples=0, num_threads=1)
    model.update(context(mod), candidates[:20], results[:20])
    net = model.net
    assert net is not None
    before = {k: v.clone() for k, v in net.state_dict().items()}
    model.update(context(mod), candidates[20:], results[20:])
    assert model.net is net and model.measured.size == 36  # the same network, trained further
    assert any(not torch.equal(before[k], v) for k, v in net.state_dict().items())
    model.predict(context(mod), candidates)
    assert inside and inside[0::2] == [1] * len(inside[0::2]) and inside[1::2] == [3] * len(inside[1::2])
    assert len(inside) % 2 == 0  # the model's one thread while it works, then the process's three again
    monkeypatch.undo()
    assert torch.get_num_threads() == process_threads
    # A failed run is a cost of 1e10 in the workload's group (label ~0), whatever its run_secs say.
    model.update(context(mod), candidates[:1], [RunnerResult([1e-6], "runner: timeout")])
    assert model.measured.groups[structural_hash(mod)].costs[-1] == 1e10
    with pytest.raises(ValueError, match="2 candidates but 1 results"):
        model.update(context(mod), candidates[:2], results[:1])


@pytest.mark.slow
def test_mlp_is_deterministic_and_round_trips(tmp_path: Path) -> None:
    mod = gmm()
    candidates, _, _ = dataset(mod)
    a, b = trained(seed=5), trained(seed=5)
    predicted = a.predict(context(mod), candidates)
    assert np.array_equal(predicted, b.predict(context(mod), candidates))
    assert not np.array_equal(predicted, trained(seed=6).predict(context(mod), candidates))
    path = str(tmp_path / "model.npz")
    a.save(path)
    meta, arrays = read_model_file(path, "msdb-mlp-model-1")
    assert meta["stamp"]["target_kind"] == "llvm" and meta["stamp"]["records"] == 36
    assert meta["config"] == MLPConfig().__dict__ and arrays["features"].dtype == np.float32
    by_file = load_cost_model(path, target="llvm -num-cores=1", seed=99)
    assert isinstance(by_file, MLPModel) and by_file.measured.size == 36 and by_file.target_kind == "llvm"
    loaded = MLPModel(seed=99, num_warmup_samples=0)
    loaded.load(path)
    assert np.array_equal(loaded.predict(context(mod), candidates), predicted)
    assert [g.costs for g in loaded.measured.groups.values()] == [g.costs for g in a.measured.groups.values()]
    # The loaded model goes on learning as the saved one would have.
    candidates2, results2, _ = dataset(mod)
    for model in (a, loaded):
        model.update(context(mod), candidates2[:8], results2[:8])
    assert np.array_equal(loaded.predict(context(mod), candidates), a.predict(context(mod), candidates))
    fresh = MLPModel(seed=1)
    fresh.save(path)  # an untrained model saves and loads too
    fresh.load(path)
    assert fresh.net is None and fresh.measured.size == 0 and not fresh.can_rank()


def test_a_model_file_for_other_features_or_another_target_is_refused(tmp_path: Path) -> None:
    path = str(tmp_path / "mlp.npz")
    trained().save(path)
    with pytest.raises(CostModelFileError, match=r"mlp\.npz: the cost model was trained on 'llvm' measurements, "
                                                 r"but the target is 'cuda'"):
        load_cost_model(path, target="cuda")
    with pytest.raises(CostModelFileError, match=r"mlp\.npz: the cost model was trained on features "
                                                 r"'per-store-feature\(.*\)', but this tuner extracts 'random"):
        load_cost_model(path, extractor="random")
    with pytest.raises(CostModelFileError, match=r"mlp\.npz: a 'mlp' cost model, not 'xgb'"):
        XGBModel().load(path)


def test_a_damaged_model_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "mlp.npz"
    trained().save(str(path))
    meta, arrays = read_model_file(path)
    name = next(k for k in arrays if k.startswith("net.") and k.endswith(".weight"))
    arrays[name] = arrays[name][:, :3]  # a layer of the wrong shape
    bad = tmp_path / "bad.npz"
    write_model_file(bad, meta, arrays)
    with pytest.raises(CostModelFileError, match=r"bad\.npz: a damaged MLP model file \(RuntimeError"):
        load_cost_model(bad)
    del arrays["costs"]
    write_model_file(bad, meta, arrays)
    with pytest.raises(CostModelFileError, match=r"bad\.npz: a damaged MLP model file \(KeyError"):
        load_cost_model(bad)
    cut = tmp_path / "cut.npz"
    cut.write_bytes(path.read_bytes()[:1000])
    with pytest.raises(CostModelFileError, match=r"cut\.npz: not a cost model file"):
        load_cost_model(cut)


def test_mlp_pretrains_from_records_of_the_target_kind() -> None:
    mod = gmm()
    records, elsewhere = pretraining_records(mod)
    model = MLPModel(seed=0, num_warmup_samples=0)
    assert model.pretrain(records + elsewhere, target="llvm") == len(records)
    assert list(model.measured.groups) == [structural_hash(mod)] and model.target_kind == "llvm"
    candidates, results, seconds = dataset(mod)
    assert spearman(model.predict(context(mod), candidates), -seconds) > 0.9
    with pytest.raises(ValueError, match="learned 'llvm' measurements; it cannot learn 'cuda' ones"):
        model.update(context(mod, "cuda"), candidates[:1], results[:1])


@pytest.mark.slow
def test_a_real_search_with_the_mlp_model() -> None:
    db = MemoryDatabase()
    model = MLPModel(seed=0, num_warmup_samples=0)  # ranks from the second round: the search evolves with it
    result = tune_tir(SMALL["gmm"], CPU, db, 8, 4, strategy=small_evolutionary(), cost_model=model, seed=1)
    (task,) = result.tasks
    records = db.get_all_tuning_records()
    assert task.trials == len(records) == 8 and task.best is not None and task.best.is_valid
    assert all(check_record(r) is None for r in records)
    assert model.can_rank() and model.measured.size == 8 and model.target_kind == "llvm"


@pytest.mark.slow
def test_a_search_with_mlp_by_name_makes_the_model_and_is_deterministic() -> None:
    def run() -> list[str]:
        db = MemoryDatabase()
        tune_tir(SMALL["c2d"], CPU, db, 8, 4, strategy=small_evolutionary(), cost_model="mlp", seed=4,
                 builder=FakeBuilder(), runner=FakeRunner(), check_best=False)  # type: ignore[arg-type]
        return [str(r.trace.as_json()) for r in db.get_all_tuning_records()]

    first = run()
    assert len(first) == 8 and run() == first
