"""Training a cost model on a database (`train_cost_model`, `msdb train-cost-model`), TenSet's
ranking metrics, labels normalized per workload, model files that refuse a tuner they do not
fit, and the "none" kind."""

from __future__ import annotations

import re
import shutil
import statistics
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from msdb.cli.main import cli
from msdb.database.sql import SQLiteDatabase
from msdb.database.tvm_import import import_tvm
from msdb.hashing import structural_hash
from msdb.ir import zoo
from msdb.records.record import TuningRecord
from msdb.records.target import Target
from msdb.tuner.cost_model import XGBModel
from msdb.tuner.cost_model.base import create
from msdb.tuner.cost_model.metrics import RankingQuality, pairwise_accuracy, peak_score, ranking_quality
from msdb.tuner.cost_model.mlp_model import MLPModel
from msdb.tuner.cost_model.saved import CostModelFileError, ModelStamp, load_cost_model, read_model_file
from msdb.tuner.cost_model.training import TrainingDataError, TrainingReport, train_cost_model
from msdb.tuner.cost_model.training_data import labels, workload_samples
from msdb.tuner.features.per_store import PerStoreFeature
from msdb.tuner.tune import tune_tasks
from tests.tuner.cost_model.test_cost_models import tiled
from tests.tuner.search._fakes import FakeBuilder, FakeRunner
from tests.tuner.search.test_tune import _context

TEAMS = Path(__file__).resolve().parents[2] / "data" / "fixtures" / "tvm-0.27"
#: records of each team workload the mlp learns: 5 x 24 = 120, past its warm-up of 100, so the
#: file it writes ranks (below the warm-up a model's scores are seeded noise)
MLP_PER_WORKLOAD = 24
#: the held-out line of `msdb train-cost-model`: the model's top-1, top-5 and pairwise accuracy,
#: then a random ranking's
QUALITY = re.compile(r"held out (\d+) workloads \((\d+) candidates\): top-1 peak score (\d\.\d{3}), "
                     r"top-5 (\d\.\d{3}), pairwise accuracy (\d\.\d{3}) "
                     r"\(a random ranking: (\d\.\d{3}), (\d\.\d{3}), (\d\.\d{3})\)")
Figures = tuple[float, float, float]


def reported_quality(line: str) -> tuple[int, int, Figures, Figures]:
    """`(workloads, candidates, the model's figures, a random ranking's)` of the held-out line,
    each figure (top-1, top-5, pairwise accuracy) checked to be a share, top-1 <= top-5."""
    match = QUALITY.fullmatch(line)
    assert match is not None, line
    values = [float(v) for v in match.groups()[2:]]
    model, random = (values[0], values[1], values[2]), (values[3], values[4], values[5])
    for top1, top5, pairwise in (model, random):
        assert 0 <= top1 <= top5 <= 1 and 0 <= pairwise <= 1, line
    return int(match[1]), int(match[2]), model, random


def printed(quality: RankingQuality | None) -> Figures:
    """A report's figures as the command prints them (three decimals)."""
    assert quality is not None
    return (float(f"{quality.top1:.3f}"), float(f"{quality.top5:.3f}"), float(f"{quality.pairwise:.3f}"))


@pytest.fixture(scope="module")
def team_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The three teams' TVM logs (5 llvm workloads, 384 records, one failed) in one database."""
    path = tmp_path_factory.mktemp("teams") / "teams.sqlite"
    db = SQLiteDatabase(path)
    import_tvm(db, sorted(TEAMS.iterdir()))
    db.close()
    return path


@pytest.fixture(scope="module")
def trained(team_db: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    out = tmp_path_factory.mktemp("model") / "llvm-xgb.npz"
    db = SQLiteDatabase(team_db, read_only=True)
    try:
        report = train_cost_model(db, out, seed=3)
    finally:
        db.close()
    return out, report


@pytest.fixture(scope="module")
def trained_mlp(team_db: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, TrainingReport]:
    out = tmp_path_factory.mktemp("model") / "llvm-mlp.npz"
    db = SQLiteDatabase(team_db, read_only=True)
    try:
        report = train_cost_model(db, out, kind="mlp", seed=3, max_per_workload=MLP_PER_WORKLOAD)
    finally:
        db.close()
    return out, report


# ---- metrics ---------------------------------------------------------------------------------
def test_peak_score_is_the_best_pick_among_the_top_k_over_the_best() -> None:
    costs = np.array([4.0, 1.0, 2.0, 8.0])
    assert peak_score(np.array([0.9, 0.1, 0.5, 0.0]), costs, 1) == pytest.approx(0.25)  # picked cost 4
    assert peak_score(np.array([0.9, 0.1, 0.5, 0.0]), costs, 2) == pytest.approx(0.5)  # then cost 2
    assert peak_score(-costs, costs, 1) == 1.0
    with pytest.raises(ValueError, match="k >= 1"):
        peak_score(costs, costs, 0)


def test_pairwise_accuracy_counts_ordered_pairs_and_ties_half() -> None:
    costs = np.array([1.0, 2.0, 3.0])
    assert pairwise_accuracy(-costs, costs) == 1.0
    assert pairwise_accuracy(costs, costs) == 0.0
    assert pairwise_accuracy(np.zeros(3), costs) == 0.5
    assert pairwise_accuracy(np.array([3.0, 1.0, 2.0]), costs) == pytest.approx(2 / 3)
    assert pairwise_accuracy(np.arange(3.0), np.ones(3)) is None  # nothing to order
    quality = ranking_quality([(-costs, costs), (costs, costs)])
    assert (quality.top1, quality.pairwise, quality.workloads, quality.candidates) == (pytest.approx(2 / 3), 0.5, 2, 6)


# ---- labels --------------------------------------------------------------------------------------
def test_labels_are_normalized_within_each_workload() -> None:
    """Two workloads over 10^5 times apart: a record's label is its workload's best cost over its
    own cost (a cost: the median of its run times), so each workload's best is 1 and the slow
    workload's labels are not squashed towards 0 by the fast one's, in the samples and in what a
    model learns."""
    fast, slow = zoo.build("GMM", 1, 16, 16, 16), zoo.build("GMM", 1, 64, 64, 64)
    tilings = [(1, 1), (2, 4), (4, 2), (8, 8)]
    run_secs = {"fast": [[4e-6, 2e-6, 3e-6], [1e-6], [5e-6, 7e-6], [2e-6, 2e-6, 9e-6]],
                "slow": [[2.0], [0.5, 0.25, 0.75], [8.0, 1.0], [1.5, 1.5]]}
    records = [TuningRecord(tiled(mod, fi, fj).trace, mod, secs, Target("llvm -num-cores=1"))
               for name, mod in (("fast", fast), ("slow", slow)) for (fi, fj), secs in zip(tilings, run_secs[name])]
    expected = {}
    for name, mod in (("fast", fast), ("slow", slow)):
        costs = [statistics.median(secs) for secs in run_secs[name]]
        expected[structural_hash(mod)] = [min(costs) / cost for cost in costs]
    assert expected[structural_hash(fast)] == pytest.approx([1 / 3, 1, 1 / 6, 1 / 2])
    assert expected[structural_hash(slow)] == pytest.approx([1 / 4, 1, 1 / 9, 1 / 3])

    samples = workload_samples(records, "llvm")
    assert sorted(s.key for s in samples) == sorted(expected)
    for s in samples:
        assert labels(s.costs).tolist() == pytest.approx(expected[s.key], rel=1e-12)
    model = XGBModel(seed=0, num_warmup_samples=0)
    assert model.learn(samples) == 8
    learned = {key: group.labels().tolist() for key, group in model.measured.groups.items()}
    assert learned == {key: pytest.approx(value, rel=1e-12) for key, value in expected.items()}
    assert all(max(values) == 1.0 for values in learned.values())  # each workload's best, exactly


# ---- training on a database ---------------------------------------------------------------------
@pytest.mark.slow
def test_training_reports_held_out_quality_and_writes_a_model_that_loads(trained: tuple[Path, object]) -> None:
    path, report = trained
    assert (report.kind, report.target_kind, report.workloads) == ("xgb", "llvm", 5)  # type: ignore[attr-defined]
    assert report.records == 383 and report.skipped == 1  # type: ignore[attr-defined]  # the failed run
    held, random = report.held_out, report.random  # type: ignore[attr-defined]
    assert held is not None and random is not None and held.workloads == 1
    assert 0 < held.top1 <= held.top5 <= 1 and 0 <= held.pairwise <= 1
    meta, _ = read_model_file(path)
    stamp = ModelStamp.from_json(meta["stamp"], str(path))
    assert stamp == ModelStamp(PerStoreFeature().layout(), "llvm", 5, 383)
    model = load_cost_model(path, target="llvm -num-cores=1")
    assert isinstance(model, XGBModel) and model.can_rank() and model.target_kind == "llvm"


@pytest.mark.slow
def test_a_loaded_model_predicts_what_the_trained_one_did(team_db: Path, tmp_path: Path) -> None:
    db = SQLiteDatabase(team_db, read_only=True)
    records = db.get_all_tuning_records()
    db.close()
    samples = workload_samples(records, "llvm", max_per_workload=24, seed=0)
    model = XGBModel(seed=1, num_warmup_samples=0)
    model.learn(samples)
    before = [model.predict(s.context, s.candidates) for s in samples]
    model.save(str(tmp_path / "m.npz"))
    loaded = load_cost_model(tmp_path / "m.npz", target=Target("llvm"), seed=9)
    assert all(np.array_equal(loaded.predict(s.context, s.candidates), b) for s, b in zip(samples, before))


@pytest.mark.slow
def test_a_model_is_refused_for_another_target_kind_or_feature_layout(trained: tuple[Path, object]) -> None:
    path, _ = trained
    with pytest.raises(CostModelFileError, match=r"trained on 'llvm' measurements, but the target is 'cuda'"):
        load_cost_model(path, target="cuda -arch=sm_80")
    other = PerStoreFeature(buffers_per_store=3)
    with pytest.raises(CostModelFileError, match=r"trained on features 'per-store-feature\(buffers=5.*extracts "
                                                 r"'per-store-feature\(buffers=3"):
        load_cost_model(path, target="llvm", extractor=other)
    with pytest.raises(CostModelFileError, match="extracts"):
        XGBModel(extractor=other).load(str(path))  # a direct load checks the layout too


@pytest.mark.slow
def test_an_mlp_trained_on_a_database_reports_held_out_quality_and_its_file_predicts_the_same(
        trained_mlp: tuple[Path, TrainingReport], team_db: Path) -> None:
    path, report = trained_mlp
    assert (report.kind, report.target_kind, report.workloads, report.records) == ("mlp", "llvm", 5, 120)
    held, random = report.held_out, report.random
    assert held is not None and random is not None
    assert (held.workloads, held.candidates) == (random.workloads, random.candidates) == (1, MLP_PER_WORKLOAD)
    for quality in (held, random):
        assert 0 <= quality.top1 <= quality.top5 <= 1 and 0 <= quality.pairwise <= 1
    meta, _ = read_model_file(path, with_arrays=False)
    assert meta["format"] == "msdb-mlp-model-1"
    assert ModelStamp.from_json(meta["stamp"], str(path)) == ModelStamp(PerStoreFeature().layout(), "llvm", 5, 120)
    loaded = load_cost_model(path, target="llvm -num-cores=1", seed=9)
    assert isinstance(loaded, MLPModel) and loaded.can_rank() and loaded.target_kind == "llvm"
    # The model train_cost_model saved is the one its seed learns from the same replayed records.
    db = SQLiteDatabase(team_db, read_only=True)
    records = db.get_all_tuning_records()
    db.close()
    samples = workload_samples(records, "llvm", max_per_workload=MLP_PER_WORKLOAD, seed=3)
    in_memory = MLPModel(seed=3)
    assert in_memory.learn(samples) == 120 and in_memory.can_rank()
    for s in samples:
        expected = in_memory.predict(s.context, s.candidates)
        assert len(set(expected.tolist())) > 1  # a ranking, not one score for all
        assert np.array_equal(loaded.predict(s.context, s.candidates), expected)


def test_files_that_are_not_models_are_refused_naming_them(tmp_path: Path) -> None:
    text = tmp_path / "notes.txt"
    text.write_text("not a model\n")
    with pytest.raises(CostModelFileError, match=r"notes.txt: not a cost model file \(not an .npz archive\)"):
        load_cost_model(text)
    with pytest.raises(CostModelFileError, match=r"missing.npz: cannot read the cost model file"):
        load_cost_model(tmp_path / "missing.npz")
    other = tmp_path / "other.npz"
    np.savez(other, x=np.zeros(3))
    with pytest.raises(CostModelFileError, match=r"other.npz: not a cost model file"):
        load_cost_model(other)
    model = XGBModel()
    model.save(str(tmp_path / "m.npz"))
    damaged = tmp_path / "damaged.npz"
    damaged.write_bytes((tmp_path / "m.npz").read_bytes()[:200])
    with pytest.raises(CostModelFileError, match="damaged.npz"):
        load_cost_model(damaged)


def test_training_on_nothing_says_why(tmp_path: Path) -> None:
    db = SQLiteDatabase(tmp_path / "empty.sqlite")
    with pytest.raises(TrainingDataError, match=r"empty.sqlite: no measured records to train on \(the database has no "
                                                r"records\)"):
        train_cost_model(db, tmp_path / "m.npz")
    db.close()
    failed = tmp_path / "failed.sqlite"
    shutil.copy(tmp_path / "empty.sqlite", failed)
    fdb = SQLiteDatabase(failed)
    good = SQLiteDatabase(tmp_path / "one.sqlite")
    import_tvm(good, [TEAMS / "team_a"])
    for r in good.get_all_tuning_records()[:3]:
        fdb.commit_tuning_record(TuningRecord(r.trace, fdb.commit_workload(r.workload.mod), [1e10], r.target))
    good.close()
    with pytest.raises(TrainingDataError, match=r"failed.sqlite: no measured records to train on \(all 3 records "
                                                r"failed or were never run\)"):
        train_cost_model(fdb, tmp_path / "m.npz")
    with pytest.raises(TrainingDataError, match=r"no measured records of 'cuda' targets"):
        train_cost_model(fdb, tmp_path / "m.npz", target="cuda")
    fdb.close()
    assert not (tmp_path / "m.npz").exists()


# ---- the command --------------------------------------------------------------------------------
@pytest.mark.slow
def test_train_cost_model_command(team_db: Path, tmp_path: Path) -> None:
    out = tmp_path / "m.npz"
    result = CliRunner().invoke(cli, ["train-cost-model", str(team_db), "-o", str(out), "--per-workload", "16",
                                      "--seed", "2"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("trained a xgb cost model on 80 records of 5 workloads (llvm targets;")
    assert lines[1].startswith("held out 1 workloads (16 candidates): top-1 peak score ")
    assert "a random ranking:" in lines[1] and lines[2] == f"wrote {out}"
    assert reported_quality(lines[1])[:2] == (1, 16)  # and top-1, top-5, pairwise: shares, top-1 <= top-5
    assert isinstance(load_cost_model(out, target="llvm"), XGBModel)
    bad = CliRunner().invoke(cli, ["train-cost-model", str(team_db), "-o", str(out), "--target", "cuda"])
    assert bad.exit_code == 1 and "no measured records of 'cuda' targets to train on" in bad.output


@pytest.mark.slow
def test_train_cost_model_command_trains_an_mlp(team_db: Path, trained_mlp: tuple[Path, TrainingReport],
                                                tmp_path: Path) -> None:
    path, report = trained_mlp
    out = tmp_path / "m.npz"
    result = CliRunner().invoke(cli, ["train-cost-model", str(team_db), "-o", str(out), "--kind", "mlp",
                                      "--per-workload", str(MLP_PER_WORKLOAD), "--seed", "3"])
    assert result.exit_code == 0, result.output
    first, quality, wrote = result.output.splitlines()
    assert first.startswith("trained a mlp cost model on 120 records of 5 workloads (llvm targets; 264 other records "
                            "left out) in ")
    # the figures train_cost_model reported for the same arguments (the mlp is deterministic)
    assert reported_quality(quality) == (1, MLP_PER_WORKLOAD, printed(report.held_out), printed(report.random))
    assert wrote == f"wrote {out}"
    model = load_cost_model(out, target="llvm")
    assert isinstance(model, MLPModel) and model.can_rank()
    _, by_command = read_model_file(out)
    _, by_library = read_model_file(path)
    weights = sorted(k for k in by_library if k.startswith("net."))
    assert weights and sorted(k for k in by_command if k.startswith("net.")) == weights
    assert all(np.array_equal(by_command[k], by_library[k]) for k in weights)


# ---- the "none" kind and a model file in a search --------------------------------------------------
def test_the_none_kind_is_no_model_and_a_search_runs_without_one(tmp_path: Path) -> None:
    from msdb.tuner.profiler import Profiler

    assert create("none") is None
    db = SQLiteDatabase(tmp_path / "t.sqlite")
    task = _context("evolutionary", 4)
    with Profiler() as profiler:
        result = tune_tasks([task], [1.0], db, 8, 4, cost_model="none", seed=4,
                            builder=FakeBuilder(), runner=FakeRunner(), task_scheduler="round-robin")
    assert result.tasks[0].trials == 8 == len(db.get_all_tuning_records())
    assert task.search_strategy.cost_model is None  # type: ignore[union-attr]
    assert profiler.get().get("cost model", 0.0) == 0.0 and profiler.get().get("features", 0.0) == 0.0
    db.close()


@pytest.mark.slow
def test_a_search_starts_from_a_model_file(trained: tuple[Path, object], tmp_path: Path) -> None:
    path, _ = trained
    db = SQLiteDatabase(tmp_path / "t.sqlite")
    task = _context("evolutionary", 5)
    result = tune_tasks([task], [1.0], db, 8, 4, cost_model=str(path), seed=5,
                        builder=FakeBuilder(), runner=FakeRunner(), task_scheduler="round-robin", pretrain=False)
    assert result.tasks[0].trials == 8
    model = task.search_strategy.cost_model  # type: ignore[union-attr]
    assert isinstance(model, XGBModel) and model.prior_size == 383 and model.data_size == 383 + 8
    assert model.last_train_size == 383 + 8  # it learned the new workload from its first rounds
    with pytest.raises(CostModelFileError, match="not a cost model file"):
        tune_tasks([_context("evolutionary", 5)], [1.0], db, 8, 4, cost_model=str(tmp_path / "t.sqlite"), seed=5,
                   builder=FakeBuilder(), runner=FakeRunner())
    db.close()


def test_tune_names_a_kind_or_a_file_it_cannot_use_in_one_line(tmp_path: Path) -> None:
    db = tmp_path / "t.sqlite"
    notes = tmp_path / "notes.txt"
    notes.write_text("not a model\n")
    for value, message in [("xbg", "Error: unknown cost model 'xbg'; known: xgb, mlp, random (or \"none\": no model)"),
                           (str(notes), f"Error: {notes}: not a cost model file (not an .npz archive)"),
                           (str(tmp_path / "gone.npz"), f"Error: {tmp_path / 'gone.npz'}: cannot read the cost model file")]:
        result = CliRunner().invoke(cli, ["tune", str(db), "--zoo", "GMM", "--trials", "2", "--cost-model", value])
        assert result.exit_code == 1 and message in result.output, result.output
        assert not db.exists()  # refused before the database is opened
