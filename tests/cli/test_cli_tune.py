"""`msdb tune` and `msdb plot` end to end through the command line: a small workload tuned into
a new database with the real builder and runner, resumed, plotted; bad input is one line."""

from __future__ import annotations

import pathlib

import pytest
from click.testing import CliRunner

from msdb import SQLiteDatabase
from msdb.cli.main import cli
from msdb.ir import to_script, zoo


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
