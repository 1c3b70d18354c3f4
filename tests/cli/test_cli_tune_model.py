"""`msdb tune DB MODEL` on the example MLP (a Relax-style script with its .npz): the model and its
tasks land in the model and task tables, every task gets measured records, and a bad model is
one line with no database written."""

from __future__ import annotations

import json
import pathlib
import sqlite3

import numpy as np
import pytest
from click.testing import CliRunner

from msdb.cli.main import cli
from msdb.hashing import structural_hash
from msdb.ir import zoo
from msdb.tuner.model_tuning import MODEL_TIMING
from tests.cli.model_files import BAD_MODELS, bad_model, files_in, tiny_onnx
from tests.model.relax_scripts import MLP

FAST = ("--target", "llvm -num-cores=1", "--per-iter", "4", "--strategy", "replay-trace", "--cost-model", "random",
        "--seed", "0", "--workers", "1")


def run(*args: object) -> object:
    return CliRunner().invoke(cli, [str(a) for a in args], prog_name="msdb")


@pytest.fixture
def mlp(tmp_path: pathlib.Path) -> pathlib.Path:
    path = tmp_path / "mlp.py"
    path.write_text(MLP.read_text())
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "mlp.npz", w0=rng.standard_normal((128, 784)).astype("float32"),
             b0=np.zeros(128, "float32"), w1=rng.standard_normal((10, 128)).astype("float32"),
             b1=np.zeros(10, "float32"))
    return path


@pytest.mark.slow
def test_tune_a_model_records_its_tasks_and_tunes_each(tmp_path: pathlib.Path, mlp: pathlib.Path) -> None:
    db = tmp_path / "t.sqlite"
    # 12 trials, 4 per round: the gradient scheduler's first round visits each of the 3 tasks once
    result = run("tune", db, mlp, "--trials", 12, *FAST)
    assert result.exit_code == 0, result.output
    assert "model mlp: 3 task(s), total weight 3" in result.output and "Total trials: 12" in result.output
    conn = sqlite3.connect(db)
    tasks = conn.execute("SELECT m.name, t.name, t.weight, w.shash FROM task t JOIN model m ON m.id = t.model_id "
                         "JOIN workload w ON w.id = t.workload_id ORDER BY t.id").fetchall()
    names = conn.execute("SELECT name FROM workload ORDER BY id").fetchall()
    counts = dict(conn.execute("SELECT w.shash, count(*) FROM tuning_record r JOIN workload w ON w.id = r.workload_id "
                               "GROUP BY w.shash").fetchall())
    sources = conn.execute("SELECT kind, location FROM source").fetchall()
    conn.close()
    assert tasks == [("mlp", name, 1.0, structural_hash(zoo.workload(name, 0))) for name in ("linear0", "relu0", "linear1")]
    assert names == [("linear0",), ("relu0",), ("linear1",)]  # named after the model's functions
    # every task measured (relu0's space is small: candidates it already measured are not measured again)
    assert set(counts) == {t[3] for t in tasks} and sum(counts.values()) == 12
    assert sources == [("tune", "tune: model mlp")]
    # a model's candidates are timed cold: ten single calls, caches flushed before each
    conn = sqlite3.connect(db)
    timings = [json.loads(text) for (text,) in conn.execute("SELECT run_secs FROM tuning_record WHERE is_valid")]
    conn.close()
    assert timings and all(len(t) == MODEL_TIMING["repeat"] for t in timings)


def test_tune_a_model_with_an_unknown_function_is_one_line(tmp_path: pathlib.Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(MLP.read_text().replace("R.call_tir(cls.relu0,", "R.call_tir(cls.relu9,"))
    result = run("tune", tmp_path / "t.sqlite", bad, "--trials", 4, *FAST)
    assert result.exit_code == 1
    assert result.output.startswith(f"Error: {bad}:") and "unknown function 'relu9'" in result.output
    assert len(result.output.strip().splitlines()) == 1 and "Traceback" not in result.output
    assert not (tmp_path / "t.sqlite").exists()


@pytest.mark.parametrize("extra,message", [
    (("--zoo", "GMM"), "give a MODEL or --zoo NAME[:INDEX], not both"),
    (("--fuse", "fold"), "--fuse applies to ONNX models"),
])
def test_model_option_clashes(tmp_path: pathlib.Path, mlp: pathlib.Path, extra: tuple[str, ...], message: str) -> None:
    result = run("tune", tmp_path / "t.sqlite", mlp, *extra)
    assert result.exit_code != 0 and message in result.output
    assert not (tmp_path / "t.sqlite").exists()


def test_model_options_on_one_workload_are_refused(tmp_path: pathlib.Path) -> None:
    result = run("tune", tmp_path / "t.sqlite", "--zoo", "GMM", "--module-equality", "anchor-block")
    assert result.exit_code != 0 and "--module-equality applies to a MODEL's tasks" in result.output
    assert not (tmp_path / "t.sqlite").exists()


@pytest.mark.parametrize("case", [*BAD_MODELS, "not a database"])
def test_bad_input_is_one_line_and_writes_nothing(tmp_path: pathlib.Path, case: str) -> None:
    """A bad ONNX model or a DB that is not a database: one `Error:` line naming the file, and
    the folder (model, database) byte for byte as it was: no database created or changed."""
    pytest.importorskip("onnx", reason="the ONNX frontend is the optional extra msdb[onnx]")
    db = tmp_path / "t.sqlite"
    if case == "not a database":
        model, expected = tiny_onnx(tmp_path / "m.onnx"), f"{db} is not a SQLite database"
        db.write_text("notes, not a database\n")
    else:
        model, expected = bad_model(tmp_path / "m.onnx", case)
    before = files_in(tmp_path)
    result = run("tune", db, model, "--trials", 2, *FAST)
    assert result.exit_code == 1, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and expected in lines[0], result.output
    assert files_in(tmp_path) == before


@pytest.mark.slow
@pytest.mark.parametrize("fuse", [(), ("--fuse", "fold")])
def test_tune_an_onnx_model(tmp_path: pathlib.Path, fuse: tuple[str, ...]) -> None:
    db = tmp_path / "t.sqlite"
    result = run("tune", db, tiny_onnx(tmp_path / "tiny.onnx"), "--trials", 4, *fuse, *FAST)
    assert result.exit_code == 0, result.output
    assert "model tiny: 1 task(s), total weight 1" in result.output
    conn = sqlite3.connect(db)
    tasks = conn.execute("SELECT m.name, t.weight, (SELECT count(*) FROM tuning_record r WHERE r.workload_id = "
                         "t.workload_id) FROM task t JOIN model m ON m.id = t.model_id").fetchall()
    conn.close()
    assert tasks == [("tiny", 1.0, 4)]
