"""`msdb tune` and `msdb plot` end to end through the command line: a small workload tuned into
a new database with the real builder and runner, resumed, plotted; a tune that starts from a
model file `msdb train-cost-model` wrote; bad input is one line."""

from __future__ import annotations

import pathlib

import pytest
from click.testing import CliRunner

from msdb import SQLiteDatabase
from msdb.cli.main import cli
from msdb.database import MemoryDatabase
from msdb.hashing import structural_hash
from msdb.ir import to_script, zoo
from msdb.records import Target
from msdb.tuner.tune import tune_tir
from tests.cli.helpers import TEAMS
from tests.tuner.search._fakes import FakeBuilder, FakeRunner


def run(*args: object) -> object:
    return CliRunner().invoke(cli, [str(a) for a in args], prog_name="msdb")


@pytest.fixture
def workload(tmp_path: pathlib.Path) -> pathlib.Path:
    path = tmp_path / "small_gmm.py"
    path.write_text(to_script(zoo.build("GMM", 1, 32, 32, 32)))
    return path


@pytest.mark.slow
def test_tune_commits_prints_the_table_and_resumes(tmp_path: pathlib.Path, workload: pathlib.Path) -> None:
    db = tmp_path / "t.sqlite"
    args = (db, workload, "--target", "llvm -num-cores=1", "--trials", 4, "--per-iter", 4, "--strategy", "replay-trace",
            "--cost-model", "random", "--seed", 0, "--workers", 1)
    first = run("tune", *args)
    assert first.exit_code == 0, first.output
    assert "This run (GFLOPS)" in first.output and "DB best (GFLOPS)" in first.output
    assert "Total trials: 4" in first.output
    assert " small_gmm " in first.output
    second = run("tune", *args)
    assert second.exit_code == 0, second.output
    with SQLiteDatabase(db) as database:
        traces = [r.storage_fields()[1] for r in database.get_all_tuning_records()]
    assert len(traces) == 8 and len(set(traces)) == 8  # the second run measured only new candidates

    listing = run("ls", db)  # the hash comes from ls, as a user would take it
    shash = listing.output.splitlines()[-1].split()[0]
    png = tmp_path / "curve.png"
    plotted = run("plot", db, shash, "-o", png)
    assert plotted.exit_code == 0, plotted.output
    assert "2 run(s), 8 records" in plotted.output
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000


@pytest.mark.slow
def test_tune_starts_from_a_model_file(tmp_path: pathlib.Path) -> None:
    """A model trained on one database (team_a's 127 measured GMM and linear records: past XGBoost's
    warm-up, so it ranks from the first round) drives an evolutionary tune of a workload it never
    saw into another database. The command names the model it starts from, and the search shows
    it: its first round measures what `tune_tir` starting from the same file picks for the same
    seed, not what a new (not yet ranking) xgb model picks, and the file is left as it was."""
    teams, model = tmp_path / "teams.sqlite", tmp_path / "llvm-xgb.npz"
    assert run("import", teams, TEAMS["team_a"]).exit_code == 0
    trained = run("train-cost-model", teams, "-o", model, "--per-workload", 64, "--seed", 0)
    assert trained.exit_code == 0 and trained.output.startswith("trained a xgb cost model on 127 records of 2 "
                                                                "workloads"), trained.output
    saved = model.read_bytes()
    mod = zoo.build("linear1", 1, 4, 8)  # a tiny space: the genetic rounds a ranking model runs are short
    workload = tmp_path / "small_linear.py"
    workload.write_text(to_script(mod))
    db = tmp_path / "t.sqlite"
    result = run("tune", db, workload, "--target", "llvm -num-cores=1", "--trials", 4, "--per-iter", 4,
                 "--strategy", "evolutionary", "--cost-model", model, "--seed", 0, "--workers", 1)
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[0] == (f"starting from the xgb cost model {model}, trained on 127 record(s) of 2 "
                                             "workload(s) measured on 'llvm'")
    assert "Total trials: 4" in result.output and " small_linear " in result.output
    with SQLiteDatabase(db) as database:
        records = database.get_all_tuning_records()
    assert len(records) == 4 and {r.workload.hash("structural") for r in records} == {structural_hash(mod)}
    assert all(r.is_valid for r in records)
    measured = [r.storage_fields()[1] for r in records]

    def first_round(cost_model: str) -> list[str]:
        memory = MemoryDatabase()
        tune_tir(mod, Target("llvm -num-cores=1"), memory, 4, 4, cost_model=cost_model, seed=0,
                 task_name="small_linear", builder=FakeBuilder(), runner=FakeRunner(), check_best=False)
        return [r.storage_fields()[1] for r in memory.get_all_tuning_records()]

    assert measured == first_round(str(model))
    assert measured != first_round("xgb")
    assert model.read_bytes() == saved


@pytest.mark.parametrize("extra,message", [
    ((), "give a TVMScript file (WORKLOAD.py) or --zoo NAME[:INDEX], not both and not neither"),
    (("--zoo", "GMM:x"), "--zoo 'GMM:x': INDEX must be a whole number"),
    (("--zoo", "NOPE"), "NOPE"),
    (("--zoo", "GMM:99"), "GMM has configs 0..3, asked for index 99"),
])
def test_tune_bad_workload_options_are_one_line(tmp_path: pathlib.Path, extra: tuple[str, ...], message: str) -> None:
    result = run("tune", tmp_path / "t.sqlite", *extra)
    assert result.exit_code != 0
    assert message in result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "t.sqlite").exists()  # refused before the database is created


def test_tune_script_with_an_error_names_the_file(tmp_path: pathlib.Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("@I.ir_module\nclass Module:\n    this is not tvmscript\n")
    result = run("tune", tmp_path / "t.sqlite", bad)
    assert result.exit_code == 1
    assert result.output.startswith("Error: ") and "bad.py" in result.output
    assert not (tmp_path / "t.sqlite").exists()


def test_plot_of_an_unknown_hash_is_one_line(tmp_path: pathlib.Path, workload: pathlib.Path) -> None:
    db = tmp_path / "t.sqlite"
    SQLiteDatabase(db).close()
    result = run("plot", db, "ffffffff", "-o", tmp_path / "x.png")
    assert result.exit_code == 1 and result.output.startswith("Error: ") and "ffffffff" in result.output
    assert not (tmp_path / "x.png").exists()
