"""`msdb compile` end to end: a small ResNet-shaped ONNX model compiled over layered databases,
run and checked against onnxruntime; bad input is one line and writes nothing."""

from __future__ import annotations

import json
import os
import pathlib
import re

import pytest
from click.testing import CliRunner

from msdb.cli.main import cli
from msdb.database.sql import SQLiteDatabase
from tests.cli.model_files import BAD_MODELS, bad_model, files_in

onnx = pytest.importorskip("onnx", reason="the ONNX frontend is the optional extra msdb[onnx]")


def run(*args: object) -> object:
    return CliRunner().invoke(cli, [str(a) for a in args], prog_name="msdb")


@pytest.fixture(scope="module")
def small_resnet(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    from msdb.model.zoo import resnet

    path = tmp_path_factory.mktemp("model") / "resnet18_small.onnx"
    onnx.save(resnet(18, image=32, width=8, num_classes=10), str(path))
    return path


@pytest.fixture
def empty_db(tmp_path: pathlib.Path) -> pathlib.Path:
    path = tmp_path / "empty.sqlite"
    SQLiteDatabase(path).close()
    return path


@pytest.mark.slow
def test_compile_runs_matches_onnxruntime_and_writes_the_report(small_resnet: pathlib.Path, empty_db: pathlib.Path,
                                                                tmp_path: pathlib.Path) -> None:
    pytest.importorskip("onnxruntime")
    report = tmp_path / "report.json"
    result = run("compile", small_resnet, "--db", empty_db, "--run", "--repeat", 2, "--report", report)
    assert result.exit_code == 0, result.output
    assert "miss: no such workload" in result.output
    assert re.search(r"hits: 0/\d+ functions, 0/\d+ calls", result.output)
    match = re.search(r"outputs vs onnxruntime [\d.]+: max abs error (\S+), max rel error (\S+)", result.output)
    assert match, result.output
    assert float(match.group(2)) < 1e-4
    rows = json.loads(report.read_text())
    assert rows and all({"name", "hash", "weight", "hit", "db", "reason"} <= set(r) for r in rows)
    assert all(r["hit"] is False and r["reason"] == "no such workload" for r in rows)
    from msdb.model.loader import load

    model = load(str(small_resnet))
    assert sum(r["weight"] for r in rows) == len(model.calls)
    # --run profiles the run: every function's share in the report, the slowest ones named
    assert all(isinstance(r["run_ms"], float) and r["run_ms"] > 0 for r in rows)
    slowest = sorted(rows, key=lambda r: -r["run_ms"])[0]
    line = re.search(r"slowest functions: (\S+) x(\d+) [\d.]+ ms", result.output)
    assert line, result.output
    assert line.group(1) == slowest["name"] and int(line.group(2)) == slowest["weight"]


@pytest.mark.slow
def test_run_on_the_targets_cores_says_what_the_cores_are_doing(small_resnet: pathlib.Path,
                                                                empty_db: pathlib.Path) -> None:
    """`--target "llvm -num-cores=2" --run` runs the parallel loops on two threads and says how
    many cores the process may use and how busy the machine is; the numbers are onnxruntime's."""
    pytest.importorskip("onnxruntime")
    result = run("compile", small_resnet, "--db", empty_db, "--target", "llvm -num-cores=2", "--run", "--repeat", 2)
    assert result.exit_code == 0, result.output
    line = re.search(r"run: [\d.]+ ms median of 2 \(min [\d.]+ ms\), 2 threads(.*); this process may use (\d+) "
                     r"cores?, load average [\d.]+ over the last minute", result.output)
    assert line, result.output
    usable = len(os.sched_getaffinity(0))
    assert int(line.group(2)) == usable
    assert line.group(1) == ("" if usable >= 2 else " (more threads than cores: they take turns)")
    match = re.search(r"max rel error (\S+)", result.output)
    assert match and float(match.group(1)) < 1e-4, result.output
    plain = run("compile", small_resnet, "--db", empty_db, "--run", "--repeat", 1)
    assert re.search(r"\), 1 thread; this process may use", plain.output), plain.output


@pytest.mark.slow
def test_without_run_the_report_has_no_run_times(small_resnet: pathlib.Path, empty_db: pathlib.Path,
                                                 tmp_path: pathlib.Path) -> None:
    report = tmp_path / "report.json"
    result = run("compile", small_resnet, "--db", empty_db, "--report", report)
    assert result.exit_code == 0, result.output
    assert "slowest functions" not in result.output
    assert all(r["run_ms"] is None for r in json.loads(report.read_text()))


@pytest.mark.slow
@pytest.mark.parametrize("fuse,direct", [("winograd", "conv2d_packed"), ("nchwc", "conv2d_nchwc")])
def test_compile_with_winograd_convs_matches_onnxruntime(small_resnet: pathlib.Path, empty_db: pathlib.Path,
                                                        tmp_path: pathlib.Path, fuse: str, direct: str) -> None:
    """`--fuse winograd` (NCHW activations) and `--fuse nchwc` (NCHW16c activations): the 3x3
    stride-1 convs of 16 and 32 channels become Winograd functions, the others stay direct, and
    the run still agrees with onnxruntime to float rounding."""
    pytest.importorskip("onnxruntime")
    report = tmp_path / "report.json"
    result = run("compile", small_resnet, "--db", empty_db, "--fuse", fuse, "--run", "--repeat", 2,
                 "--report", report)
    assert result.exit_code == 0, result.output
    match = re.search(r"outputs vs onnxruntime [\d.]+: max abs error (\S+), max rel error (\S+)", result.output)
    assert match and float(match.group(2)) < 1e-4, result.output
    names = [r["name"] for r in json.loads(report.read_text())]
    assert sum("conv2d_winograd" in name for name in names) >= 2 and any(direct in name for name in names)


@pytest.mark.slow
def test_layered_databases_report_the_answering_db_as_given(small_resnet: pathlib.Path, empty_db: pathlib.Path,
                                                             tmp_path: pathlib.Path) -> None:
    """One conv of the model tuned briefly by msdb's tuner into `local`: it hits there, over an
    empty first layer, and the report names `local` exactly as the option gave it."""
    from msdb.model.loader import load
    from msdb.tuner.tune import tune_tir

    model = load(str(small_resnet))
    name = next(n for n in model.functions if n.startswith("conv2d"))
    local = tmp_path / "local.sqlite"
    db = SQLiteDatabase(local)
    try:
        tune_tir(model.functions[name], None, db, 4, 4, seed=0, cost_model="random", strategy="replay-trace",
                 task_name=name)
    finally:
        db.close()
    report = tmp_path / "r.json"
    result = run("compile", small_resnet, "--db", empty_db, "--db", local, "--report", report)
    assert result.exit_code == 0, result.output
    rows = {r["name"]: r for r in json.loads(report.read_text())}
    assert rows[name]["hit"] is True and rows[name]["db"] == str(local)
    assert rows[name]["matched_by"] == "structural"
    assert re.search(rf"^{re.escape(name)} .* hit in {re.escape(str(local))} \(structural; ", result.output, re.M)


@pytest.mark.slow
def test_transfer_compiles_another_batch_from_the_tuned_models_records(small_resnet: pathlib.Path,
                                                                      tmp_path: pathlib.Path) -> None:
    """`--transfer`: ResNet-18 at batch 2, which nobody tuned, over the (sampled) records of the
    batch-1 model: its convs are transferred, the report names the relative, its model, the
    layer as given and the distance, and the run still matches onnxruntime."""
    pytest.importorskip("onnxruntime")
    from msdb.model.zoo import resnet
    from msdb.records import Target
    from tests.tuner.compile.sampled_records import sampled_records_db

    batch2 = tmp_path / "resnet18_batch2.onnx"
    onnx.save(resnet(18, batch=2, image=32, width=8, num_classes=10), str(batch2))
    db = tmp_path / "tuned.sqlite"
    tuned = sampled_records_db(small_resnet, db, "resnet18_b1", Target.host())
    report = tmp_path / "r.json"
    result = run("compile", batch2, "--db", db, "--transfer", "--run", "--repeat", 1, "--report", report)
    assert result.exit_code == 0, result.output
    match = re.search(r"outputs vs onnxruntime [\d.]+: max abs error (\S+), max rel error (\S+)", result.output)
    assert match and float(match.group(2)) < 1e-4, result.output
    rows = {r["name"]: r for r in json.loads(report.read_text())}
    for name in tuned:
        row = rows[name]
        assert row["scheduled_by"] == "transferred" and row["hit"] is False and row["reason"] == "no such workload"
        assert row["transfer"]["models"] == ["resnet18_b1"] and row["transfer"]["db"] == str(db)
        assert row["transfer"]["distance"] > 0
        # the relative is named after the task that stored it (the source model's function)
        assert row["transfer"]["name"], row["transfer"]
        assert re.search(rf"^{re.escape(name)} .* transferred from {re.escape(row['transfer']['name'])} "
                         rf"{row['transfer']['workload']} of model resnet18_b1 "
                         rf"in {re.escape(str(db))}, distance [\d.]+ \(miss: no such workload\)$", result.output, re.M)
    assert re.search(rf"; transferred: {len(tuned)} functions, \d+ calls", result.output)


@pytest.mark.slow
@pytest.mark.parametrize("case", ["missing model", *BAD_MODELS, "missing db", "not a database", "hub down",
                                  "unknown cpu"])
def test_bad_input_is_one_line_and_writes_nothing(case: str, small_resnet: pathlib.Path, tmp_path: pathlib.Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    model = work / "model.onnx"
    model.write_bytes(small_resnet.read_bytes())
    db = work / "empty.sqlite"
    SQLiteDatabase(db).close()
    args: list[object] = [model, "--db", db]
    expected = ""
    if case == "missing model":
        args[0] = work / "nope.onnx"
        expected = "nope.onnx: no such model file"
    elif case in BAD_MODELS:
        _, expected = bad_model(model, case)
    elif case == "missing db":
        args[2] = work / "nope.sqlite"
        expected = "nope.sqlite: no such database file"
    elif case == "not a database":
        notes = work / "notes.txt"
        notes.write_text("not a database\n")
        args[2] = notes
        expected = f"{notes} is not a SQLite database"
    elif case == "hub down":
        args[2] = "http://127.0.0.1:9/"
        expected = "hub http://127.0.0.1:9/ cannot be reached"
    else:  # LLVM itself would only warn about the name, then abort the whole process
        args += ["--target", "llvm -mcpu=bogus"]
        expected = "-mcpu=bogus is not a processor LLVM knows for"
    before = files_in(work)
    result = run("compile", *args, "--report", work / "report.json")
    assert result.exit_code == 1, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and expected in lines[0], result.output
    assert files_in(work) == before  # no report, no database created or changed


@pytest.mark.slow
def test_relax_script_run_is_compared_with_the_default_schedule_build(tmp_path: pathlib.Path) -> None:
    """The MLC course's MLP (examples/models/mlp.py, weights made beside a copy): with a record of
    linear0 the tuned build is checked against the default-schedule build; without any record
    there is nothing independent to compare with, and the output says so."""
    import shutil

    import numpy as np

    from msdb.ir import zoo
    from msdb.tuner.tune import tune_tir

    root = pathlib.Path(__file__).resolve().parents[2]
    script = tmp_path / "mlp.py"
    shutil.copy(root / "examples" / "models" / "mlp.py", script)
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "mlp.npz", w0=rng.standard_normal((128, 784)).astype("float32") * 0.05,
             b0=rng.standard_normal(128).astype("float32"), w1=rng.standard_normal((10, 128)).astype("float32") * 0.1,
             b1=rng.standard_normal(10).astype("float32"))
    db_path = tmp_path / "mlp.sqlite"
    db = SQLiteDatabase(db_path)
    try:
        tune_tir(zoo.workload("linear0"), None, db, 2, 2, seed=0, cost_model="random", strategy="replay-trace",
                 task_name="linear0")
    finally:
        db.close()
    tuned = run("compile", script, "--db", db_path, "--run", "--repeat", 1)
    assert tuned.exit_code == 0, tuned.output
    assert re.search(rf"^linear0 .* hit in {re.escape(str(db_path))} \(structural; ", tuned.output, re.M)
    match = re.search(r"outputs vs the default-schedule build: max abs error (\S+), max rel error (\S+)", tuned.output)
    assert match and float(match.group(2)) < 1e-4, tuned.output
    plain = run("compile", script, "--run", "--repeat", 1)
    assert plain.exit_code == 0, plain.output
    assert "miss: no database" in plain.output
    assert "outputs not compared: no record was applied" in plain.output


@pytest.mark.parametrize("args,code,expected", [
    (["--db", "{db}", "--transfer-trials", "-1"], 1,  # a usage error is one line too
     "Error: Invalid value for '--transfer-trials': -1 is not in the range x>=0; see 'msdb compile --help'"),
    (["--transfer-trials", "2"], 1, "Error: --transfer-trials: give a --db to commit the measured candidates to"),
    (["--db", "http://127.0.0.1:9/", "--transfer-trials", "1"], 1,
     "Error: --transfer-trials commits to the first --db, and http://127.0.0.1:9/ is a hub (read-only)"),
])
def test_bad_transfer_trials_are_one_error_naming_the_option(args: list[str], code: int, expected: str,
                                                             small_resnet: pathlib.Path, empty_db: pathlib.Path) -> None:
    result = run("compile", small_resnet, *[a.format(db=empty_db) for a in args])
    assert result.exit_code == code, result.output
    assert expected in result.output
    if code == 1:
        assert len(result.output.strip().splitlines()) == 1
