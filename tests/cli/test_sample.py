"""`msdb sample`: a tiny ONNX model's task sampled into a real SQLite database (the model and its
task recorded, one summary line), and the bad paths: one `Error:` line, status 1, nothing written."""

from __future__ import annotations

import pathlib
import re
import sqlite3

import pytest
from click.testing import CliRunner

from msdb.cli.main import cli
from tests.cli.model_files import bad_model, files_in, tiny_onnx

FAST = ("--target", "llvm -num-cores=1", "--seed", "0", "--workers", "1")
SUMMARY = re.compile(r"^(?P<db>\S+): 1 task\(s\), 3 record\(s\) written \((?P<failed>\d+) failed\), seed 0: "
                     r"[\d.]+ s wall, [\d.]+ s measuring \(build \+ run\), [\d.]+ records/s$")


def run(*args: object) -> object:
    return CliRunner().invoke(cli, [str(a) for a in args], prog_name="msdb")


@pytest.mark.slow
def test_sample_a_model_records_its_task_and_the_samples(tmp_path: pathlib.Path) -> None:
    pytest.importorskip("onnx", reason="the ONNX frontend is the optional extra msdb[onnx]")
    db = tmp_path / "s.sqlite"
    result = run("sample", db, tiny_onnx(tmp_path / "tiny.onnx"), "--per-workload", 3, *FAST)
    assert result.exit_code == 0, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and SUMMARY.match(lines[0]) and lines[0].startswith(f"{db}: "), result.output
    conn = sqlite3.connect(db)
    tasks = conn.execute("SELECT m.name, t.weight, (SELECT count(*) FROM tuning_record r WHERE r.workload_id = "
                         "t.workload_id) FROM task t JOIN model m ON m.id = t.model_id").fetchall()
    sources = conn.execute("SELECT kind, location FROM source").fetchall()
    failed = conn.execute("SELECT count(*) FROM tuning_record WHERE NOT is_valid").fetchone()[0]
    conn.close()
    assert tasks == [("tiny", 1.0, 3)]
    assert sources == [("tune", "sample: tiny")]
    assert int(SUMMARY.match(lines[0])["failed"]) == failed  # type: ignore[index]


def _bad(tmp_path: pathlib.Path, case: str) -> tuple[list[object], str]:
    db = tmp_path / "s.sqlite"
    if case == "unknown zoo name":
        return ["sample", db, "--zoo", "resnet19", "--per-workload", 2], "--zoo 'resnet19': no zoo model or workload"
    if case == "per-workload 0":
        return ["sample", db, "--zoo", "GMM", "--per-workload", 0], "--per-workload"
    if case == "no per-workload":
        return ["sample", db, "--zoo", "GMM"], "--per-workload"
    if case == "model and zoo":
        model = tiny_onnx(tmp_path / "m.onnx")
        return ["sample", db, model, "--zoo", "GMM", "--per-workload", 2], "not both and not neither"
    if case == "neither":
        return ["sample", db, "--per-workload", 2], "not both and not neither"
    if case == "in-memory db":
        return ["sample", "sqlite://", "--zoo", "GMM", "--per-workload", 2], "sqlite:// is an in-memory database"
    model, expected = bad_model(tmp_path / "m.onnx", "truncated onnx")
    return ["sample", db, model, "--per-workload", 2], expected


@pytest.mark.parametrize("case", ["unknown zoo name", "per-workload 0", "no per-workload", "model and zoo", "neither",
                                  "in-memory db", "unreadable model"])
@pytest.mark.parametrize("db_exists", [False, True])
def test_bad_input_is_one_line_and_changes_nothing(tmp_path: pathlib.Path, case: str, db_exists: bool) -> None:
    pytest.importorskip("onnx", reason="the ONNX frontend is the optional extra msdb[onnx]")
    args, expected = _bad(tmp_path, case)
    if db_exists:  # a database with a record already: left byte for byte as it was
        from msdb import SQLiteDatabase
        from msdb.ir import zoo

        db = SQLiteDatabase(tmp_path / "s.sqlite")
        db.commit_workload(zoo.build("GMM", 1, 16, 16, 16))
        db.close()
    before = files_in(tmp_path)
    result = run(*args, *FAST)
    assert result.exit_code == 1, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and expected in lines[0], result.output
    assert files_in(tmp_path) == before
