"""Ctrl-C of `msdb tune` and what else a newcomer following the README and the
user guide trips on (docs/architecture.md, "Processes, temporary files and interrupts").

- Ctrl-C of `msdb tune` says what was committed and gives the round's unmeasured claims back
  (a real subprocess, interrupted once its first record is in the database file);
- a cuda --target on a machine without a usable GPU is refused up front, nothing stored;
- `msdb ls` and `msdb show` tell apart targets that differ only in hidden attributes;
- the statistics table says which best is this run's and which is the database's;
- workloads tuned from the zoo or a script carry their name;
- usage errors are one `Error:` line with exit status 1, as the README says;
- `msdb plot`'s legend stays inside the figure, clear of the axes and their labels;
- the README and the user guide say what is true (commands, counts, install lines, timings).
"""

from __future__ import annotations

import os
import pathlib
import re
import signal
import sqlite3
import sys

import pytest
from click.testing import CliRunner

from msdb import SQLiteDatabase
from msdb.cli.main import cli
from msdb.ir import to_script, zoo
from msdb.records import Target, TuningRecord, Workload
from tests.cli.helpers import TEAMS
from tests.cli.procs import msdb, wait_for
from tests.database.helpers import split_trace

ROOT = pathlib.Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
GUIDE = ROOT / "docs" / "user-guide.md"
CPU1 = "llvm -num-cores=1"
FAST = ("--target", CPU1, "--strategy", "replay-trace", "--cost-model", "random", "--seed", "0", "--workers", "1")


def run(*args: object) -> object:
    return CliRunner().invoke(cli, [str(a) for a in args], prog_name="msdb")


@pytest.fixture
def small(tmp_path: pathlib.Path) -> pathlib.Path:
    """matmul 16^3 as a TVMScript file named small.py: quick to build and measure."""
    path = tmp_path / "small.py"
    path.write_text(to_script(zoo.build("matmul", 16, 16, 16)))
    return path


def count(db: pathlib.Path, sql: str) -> int:
    """One number from the database file, read-only; 0 while the file or its tables are not
    there yet (a tuner is creating it)."""
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    except sqlite3.Error:
        return 0
    try:
        return int(conn.execute(sql).fetchone()[0])
    except sqlite3.Error:
        return 0
    finally:
        conn.close()


# ---------------------------------------------------------------- Ctrl-C of msdb tune


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a process group and SIGINT")
def test_ctrl_c_of_tune_says_what_was_committed_and_gives_claims_back(tmp_path: pathlib.Path,
                                                                      small: pathlib.Path) -> None:
    db = tmp_path / "t.sqlite"
    proc = msdb("tune", db, small, "--trials", 400, "--per-iter", 8, *FAST, new_session=True)
    try:
        # the moment: the first record is committed (read from the file, as another process would)
        wait_for(lambda: proc.poll() is not None or count(db, "SELECT count(*) FROM tuning_record") >= 1,
                 "the tuner's first committed record", timeout=300)
        assert proc.poll() is None, proc.communicate()
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C: the whole foreground group gets it
        out, err = proc.communicate(timeout=300)
    finally:
        proc.kill()
    stored = count(db, "SELECT count(*) FROM tuning_record")
    lines = [line for line in err.splitlines() if not line.startswith("tuning")]  # the progress bar's lines
    assert (proc.returncode, out) == (130, ""), err
    assert "Traceback" not in err and "Aborted" not in err, err
    assert len(lines) == 2, lines
    match = re.fullmatch(rf"Interrupted: (\d+) measurements? committed to {re.escape(str(db))} "
                         rf"\(small: (\d+)(; \d+ failed runs?)?; source \d+\)\.", lines[0])
    assert match is not None, lines[0]
    assert int(match.group(1)) == int(match.group(2)) == stored >= 1
    assert lines[1] == "Unmeasured candidates were given back; run the same command again to continue."
    # no claim is left leased (a re-run or another tuner measures those candidates at once);
    # the measured candidates' claims stay, as after a round that ended normally
    assert count(db, "SELECT count(*) FROM measurement_claim WHERE expires_at IS NOT NULL") == 0
    assert count(db, "SELECT count(*) FROM measurement_claim WHERE expires_at IS NULL") >= 1


def test_what_an_interrupted_run_committed_reads_as_one_line() -> None:
    from msdb.tuner.tune import CommittedSoFar, TuneInterrupted

    assert CommittedSoFar().line("t.sqlite") == "no measurement committed to t.sqlite"
    done = CommittedSoFar({"GMM": 5, "relu0": 1}, failed=1, source_id=4)
    assert done.line("t.sqlite") == "6 measurements committed to t.sqlite (GMM: 5, relu0: 1; 1 failed run; source 4)"
    assert CommittedSoFar({"GMM": 1}).line() == "1 measurement committed (GMM: 1)"
    assert isinstance(TuneInterrupted(done), KeyboardInterrupt)  # callers that catch Ctrl-C still do


# ---------------------------------------------------------------- cuda without a GPU


def _gpu_here() -> bool:
    from msdb.errors import MsdbError
    from msdb.tuner.measure.cuda_runner import CudaRunner

    with CudaRunner() as runner:
        try:
            runner.check_device()
        except MsdbError:
            return False
    return True


def test_tune_for_cuda_without_a_usable_gpu_refuses_and_stores_nothing(tmp_path: pathlib.Path) -> None:
    if _gpu_here():
        pytest.skip("this machine has a usable GPU")
    db = tmp_path / "t.sqlite"
    result = run("tune", db, "--zoo", "GMM", "--target", "cuda", "--trials", 4)
    assert result.exit_code == 1, result.output
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith("Error: --target cuda") and "nothing can be measured on this machine" in line, line
    assert "pycuda" in line or "GPU" in line or "driver" in line, line
    assert list(tmp_path.iterdir()) == []  # no database, no record


# ---------------------------------------------------------------- hidden target attributes


def test_ls_and_show_tell_apart_targets_that_differ_only_in_hidden_attributes(tmp_path: pathlib.Path) -> None:
    db = tmp_path / "t.sqlite"
    imported = run("import", db, TEAMS["team_a"])
    assert imported.exit_code == 0, imported.output
    mod = zoo.build("matmul", 16, 16, 16)
    with SQLiteDatabase(db) as database:
        workload = database.commit_workload(Workload(mod, name="mm"))
        for target in ("llvm -num-cores=1 -mtriple=x86_64-conda-linux-gnu", CPU1):
            database.commit_tuning_record(TuningRecord(split_trace(mod, 4), workload, [1e-5], Target(target)))
    listing = run("ls", db)
    assert listing.exit_code == 0, listing.output
    rows = [line.split("  ")[0] + " | " + re.split(r"\s{2,}", line)[2] for line in listing.output.splitlines()
            if line.startswith(Workload(mod).shash)]
    shash = Workload(mod).shash
    assert rows == [f"{shash} | llvm -num-cores=1 -mtriple=x86_64-conda-linux-gnu", f"{shash} | llvm -num-cores=1"]
    shown = run("show", db, shash)
    assert [line.split(":")[0] for line in shown.output.splitlines() if line.startswith("# best on")] == [
        "# best on llvm -num-cores=1 -mtriple=x86_64-conda-linux-gnu", "# best on llvm -num-cores=1"]


def test_target_labels_add_only_what_tells_targets_apart() -> None:
    from msdb.database.catalog import target_labels

    a = Target("llvm -num-cores=1 -mtriple=x86_64-conda-linux-gnu").config
    b = Target("llvm -num-cores=1").config
    c = Target("cuda -arch=sm_80").config
    assert target_labels([a, a, c, None]) == ["llvm -num-cores=1", "llvm -num-cores=1", "cuda -arch=sm_80", "-"]
    assert target_labels([b, a, c]) == ["llvm -num-cores=1", "llvm -num-cores=1 -mtriple=x86_64-conda-linux-gnu",
                                        "cuda -arch=sm_80"]


# ---------------------------------------------------------------- the statistics table; names


@pytest.mark.slow
def test_statistics_table_says_which_best_is_this_runs_and_which_the_databases(tmp_path: pathlib.Path,
                                                                                small: pathlib.Path) -> None:
    """A teammate's record (here: impossibly fast, 0.1 us) is the database's best; this run's
    own best is what it measured."""
    db = tmp_path / "t.sqlite"
    mod = zoo.build("matmul", 16, 16, 16)
    with SQLiteDatabase(db) as database:
        workload = database.commit_workload(mod)
        database.commit_tuning_record(TuningRecord(split_trace(mod, 4), workload, [1e-7], Target(CPU1)))
    result = run("tune", db, small, "--trials", 4, "--per-iter", 4, *FAST)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    header = [cell.strip() for cell in next(line for line in lines if line.startswith("ID")).split("|")]
    row = dict(zip(header, (cell.strip() for cell in next(line for line in lines if " small " in line).split("|"))))
    assert row["DB best (us)"] == "0.1000"  # the teammate's record
    assert row["This run (us)"] != "N/A" and float(row["This run (us)"]) > 0.1  # what this run measured
    assert float(row["This run (GFLOPS)"]) < float(row["DB best (GFLOPS)"])
    assert lines[-1].startswith("This run: its own best measurement. DB best: the best record in the database")


@pytest.mark.slow
def test_tuned_zoo_and_script_workloads_carry_their_names(tmp_path: pathlib.Path, small: pathlib.Path) -> None:
    db = tmp_path / "t.sqlite"
    for args in (("--zoo", "GMM:0"), (small,)):
        result = run("tune", db, *args, "--trials", 2, "--per-iter", 2, *FAST)
        assert result.exit_code == 0, result.output
    listing = run("ls", db, "--json")
    import json

    assert sorted(row["name"] for row in json.loads(listing.output)) == ["GMM", "small"]


# ---------------------------------------------------------------- usage errors


@pytest.mark.parametrize("args,message", [
    (("tune", "{db}", "--zoo", "GMM", "--trials", "0"), "Error: Invalid value for '--trials': 0 is not in the range "
                                                         "x>=1; see 'msdb tune --help'"),
    (("tune", "{db}", "--zoo", "GMM", "--trials", "-5"), "Error: Invalid value for '--trials': -5 is not in the range "
                                                          "x>=1; see 'msdb tune --help'"),
    (("export", "{db}", "{file}"), "Error: Invalid value for 'OUTDIR': Directory '{file}' is a file; "
                                   "see 'msdb export --help'"),
    (("publish", "{db}", "{file}"), "Error: Invalid value for 'OUTDIR': Directory '{file}' is a file; "
                                    "see 'msdb publish --help'"),
    (("ls",), "Error: Missing argument 'DB'; see 'msdb ls --help'"),
    (("tune", "{db}", "--zoo", "GMM", "--strategy", "nope"), "Error: Invalid value for '--strategy': 'nope' is not "
                                                             "one of 'evolutionary', 'replay-trace', 'replay-func'; "
                                                             "see 'msdb tune --help'"),
    (("frobnicate",), "Error: No such command 'frobnicate'; see 'msdb --help'"),
    (("--frobnicate",), "Error: No such option '--frobnicate'; see 'msdb --help'"),
])
def test_usage_errors_are_one_error_line_and_exit_status_1(tmp_path: pathlib.Path, args: tuple[str, ...],
                                                           message: str) -> None:
    db, file = tmp_path / "t.sqlite", tmp_path / "a-file"
    file.write_text("not a folder")
    result = run(*(a.format(db=db, file=file) for a in args))
    assert (result.exit_code, result.stdout, result.stderr) == (1, "", message.format(file=file) + "\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]  # nothing written


# ---------------------------------------------------------------- msdb plot


def test_plot_legend_of_long_paths_stays_in_the_figure_clear_of_the_axes() -> None:
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from msdb.cli.commands_tune import draw_tuning_curves
    from msdb.database.catalog import TuningCurve

    path = "/home/someone/projects/tuning/" + "deeply/nested/" * 6 + "database_tuning_record.json"
    curves = [TuningCurve(i, f"#{i} import {path} by alice@alice-workstation 2026-11-29 07:43",
                          [100.0 / (i + 1), 50.0 / (i + 1)]) for i in range(4)]
    fig = draw_tuning_curves(curves, "workload cd74d25fd1596994")
    try:
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
        (legend,) = fig.legends
        box = legend.get_window_extent(renderer)
        (ax,) = fig.axes
        assert fig.bbox.x0 <= box.x0 and box.x1 <= fig.bbox.x1 and fig.bbox.y0 <= box.y0 and box.y1 <= fig.bbox.y1
        for other in (ax.get_window_extent(renderer), ax.xaxis.label.get_window_extent(renderer),
                      ax.yaxis.label.get_window_extent(renderer)):
            assert not box.overlaps(other)
        assert all(len(line) <= 80 for text in legend.get_texts() for line in text.get_text().splitlines())
    finally:
        plt.close(fig)


# ---------------------------------------------------------------- the README and the user guide


def test_readme_lists_every_command_and_installs_extras_from_the_checkout() -> None:
    text = README.read_text()
    table = [line for line in text.splitlines() if line.startswith("| `msdb ")]
    listed = {name for line in table for name in re.findall(r"`msdb ([\w-]+)", line)}
    assert listed >= set(cli.commands), sorted(set(cli.commands) - listed)
    assert "pip install 'msdb[" not in text  # that installs whatever the registry has under the name
    assert "pip install -e '.[plot]'" in text


def test_readme_states_how_long_things_take_and_on_what() -> None:
    text = README.read_text()
    assert "about 2 minutes on one core" not in text
    assert re.search(r"main job takes about \d+ minutes", text) and re.search(r"tests take about \d+ minutes", text)
    assert "AVX2" in text  # the machine the figures were taken on


def test_user_guide_counts_its_jobs_right() -> None:
    text = GUIDE.read_text()
    sections = re.findall(r"^## (\d+)\. ", text, flags=re.M)
    assert sections == [str(i) for i in range(1, len(sections) + 1)]
    numbers = {"seven": 7, "eight": 8, "nine": 9, "ten": 10}
    said = re.search(r"walks through (\w+) jobs", text)
    assert said is not None and numbers[said.group(1)] == len(sections)
    intro = text.split("## ", 1)[0]
    assert re.findall(r"^(\d+)\. ", intro, flags=re.M) == sections
    assert "msdb serve" in text and "pip install 'msdb[" not in text
