"""The `msdb` commands through click's CliRunner: exact output where it is deterministic,
help with an Example block everywhere, one-line errors, progress bars."""

from __future__ import annotations

import json
import pathlib
import re
import shutil
import sqlite3

import click
import pytest
from click.testing import CliRunner

from msdb.cli import common
from msdb.cli.main import cli
from tests.cli.helpers import RECORD_FILE, TEAMS, WORKLOAD_FILE, best_mean_by_tvm_shash, query, record_keys, snapshot

SECONDS = re.compile(r"\d+\.\d\d s$")


def run(*args: str) -> click.testing.Result:
    return CliRunner().invoke(cli, [str(a) for a in args], prog_name="msdb")


def masked(text: str) -> list[str]:
    """Output lines with the trailing run time replaced (the one thing that varies)."""
    return [SECONDS.sub("T s", line) for line in text.splitlines()]


@pytest.fixture(scope="module")
def teams_db(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    path = tmp_path_factory.mktemp("cli") / "teams.sqlite"
    result = run("import", path, *TEAMS.values(), "--user", "lead", "--host", "ci")
    assert result.exit_code == 0, result.output
    return path


@pytest.fixture
def db_copy(teams_db: pathlib.Path, tmp_path: pathlib.Path) -> pathlib.Path:
    path = tmp_path / "copy.sqlite"
    shutil.copy(teams_db, path)
    return path


@pytest.mark.parametrize("name", sorted(cli.commands))
def test_every_command_has_help_with_an_example(name: str) -> None:
    result = run(name, "--help")
    assert result.exit_code == 0
    assert f"Usage: msdb {name} " in result.output
    example = result.output.split("Example:", 1)
    assert len(example) == 2, f"`msdb {name} --help` has no Example block"
    assert f"msdb {name} " in example[1]


def test_group_help_lists_the_commands() -> None:
    result = run("--help")
    assert result.exit_code == 0 and "--debug" in result.output
    for name in ("import", "merge", "export", "ls", "show", "verify", "prune", "migrate"):
        assert re.search(rf"^  {name} ", result.output, re.M), name


def test_import_and_reimport_output(tmp_path: pathlib.Path) -> None:
    db = tmp_path / "db.sqlite"
    first = run("import", db, *TEAMS.values())
    assert first.exit_code == 0
    assert masked(first.stdout) == ["workloads: 5 new, 1 known; records: 384 new, 0 duplicate, 1 failed run (stored); T s"]
    assert first.stderr == ""
    before = snapshot(db)
    again = run("import", db, *TEAMS.values())
    assert masked(again.stdout) == ["workloads: 0 new, 6 known; records: 0 new, 384 duplicate, 0 failed runs; T s"]
    assert snapshot(db)[1:] == before[1:]


def test_import_a_pair_of_files_and_a_url(tmp_path: pathlib.Path) -> None:
    team = TEAMS["team_b"]
    result = run("import", f"sqlite:///{tmp_path / 'db.sqlite'}", team / WORKLOAD_FILE, team / RECORD_FILE)
    assert result.exit_code == 0
    assert masked(result.stdout) == ["workloads: 2 new, 0 known; records: 128 new, 0 duplicate, 0 failed runs; T s"]


def test_merge_gives_what_importing_gives(teams_db: pathlib.Path, tmp_path: pathlib.Path) -> None:
    for team in TEAMS:
        assert run("import", tmp_path / f"{team}.sqlite", TEAMS[team], "--user", "lead", "--host", "ci").exit_code == 0
    dest = tmp_path / "team.sqlite"
    result = run("merge", dest, *(tmp_path / f"{team}.sqlite" for team in TEAMS))
    assert result.exit_code == 0
    assert masked(result.stdout) == [
        f"{tmp_path / 'team_a.sqlite'}: workloads: 2 new, 0 known; records: 128 new, 0 duplicate, 1 failed run (stored); T s",
        f"{tmp_path / 'team_b.sqlite'}: workloads: 1 new, 1 known; records: 128 new, 0 duplicate, 0 failed runs; T s",
        f"{tmp_path / 'team_c.sqlite'}: workloads: 2 new, 0 known; records: 128 new, 0 duplicate, 0 failed runs; T s",
    ]
    assert record_keys(dest) == record_keys(teams_db)
    again = run("merge", dest, tmp_path / "team_b.sqlite")
    assert masked(again.stdout) == [
        f"{tmp_path / 'team_b.sqlite'}: workloads: 0 new, 2 known; records: 0 new, 128 duplicate, 0 failed runs; T s"]


LS_TABLE = """\
hash              name    target                 FLOPs  records  best_us  GFLOPS  sources
cd74d25fd1596994  GMM     llvm -num-cores=1    4194304      128    87.65   47.85        2
dbc33896dd21b3ec  linear  llvm -num-cores=1     200832       64    13.59   14.78        1
13ee21f8b269e815  C2D     llvm -num-cores=1  236027904       64  5568.06   42.39        1
b78f473e61d7c626  C1D     llvm -num-cores=1    6291456       64   134.45   46.79        1
3a05acc739a4d067  DEP     llvm -num-cores=1    7225344       64   195.85   36.89        1
"""


def test_ls_table(teams_db: pathlib.Path) -> None:
    result = run("ls", teams_db)
    assert result.exit_code == 0
    assert result.stdout == LS_TABLE


def test_ls_best_latency_is_the_minimum_valid_mean_of_the_files(teams_db: pathlib.Path) -> None:
    result = run("ls", teams_db, "--json")
    rows = json.loads(result.stdout)
    tvm_shash = dict(query(teams_db, "SELECT shash, tvm_shash FROM workload"))
    expected = best_mean_by_tvm_shash(*TEAMS.values())
    assert len(rows) == 5
    for row in rows:
        assert row["best_run_secs"] == pytest.approx(expected[tvm_shash[row["shash"]]], rel=1e-15)
        assert row["best_us"] == pytest.approx(row["best_run_secs"] * 1e6)
        assert row["gflops"] == pytest.approx(row["flops"] / row["best_run_secs"] / 1e9)
        assert row["target"]["kind"] == "llvm"


def test_ls_target_filter(teams_db: pathlib.Path) -> None:
    assert run("ls", teams_db, "--target", "llvm").stdout == LS_TABLE
    nothing = run("ls", teams_db, "--target", "cuda -arch=sm_80")
    assert (nothing.exit_code, nothing.stdout) == (0, "")
    assert nothing.stderr == (f"no record matched target 'cuda -arch=sm_80' in {teams_db}; its records are for: "
                              "llvm -num-cores=1\n")


def test_show(teams_db: pathlib.Path) -> None:
    result = run("show", teams_db, "cd74")
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0] == "# workload cd74d25fd1596994 (GMM): 4194304 FLOPs, 128 records, TVM shash 7523732197612418965"
    assert "@I.ir_module" in result.stdout and 'with T.sblock("Z"):' in result.stdout
    best = next(line for line in lines if line.startswith("# best on "))
    assert best.startswith("# best on llvm -num-cores=1: 87.65 us, 47.85 GFLOPS (record ")
    assert best.endswith(f"import {(TEAMS['team_b'] / RECORD_FILE).resolve()} by lead@ci)")
    assert "def apply_trace(sch: s_tir.Schedule) -> None:" in result.stdout
    assert '  b0 = sch.get_sblock(name="Z", func_name="main")' in lines
    assert run("show", teams_db, "7523732197612418965").stdout == result.stdout  # TVM's shash works too


def test_show_errors(teams_db: pathlib.Path) -> None:
    result = run("show", teams_db, "ffff")
    assert (result.exit_code, result.stderr) == (
        1, f"Error: no workload with hash 'ffff' in {teams_db}; `msdb ls` lists them\n")
    result = run("show", teams_db, "")
    assert result.exit_code == 1 and result.stderr.startswith("Error: empty workload hash")


def test_show_ambiguous_prefix(db_copy: pathlib.Path) -> None:
    from msdb.hashing import structural_hash
    from msdb.ir import zoo
    from msdb.database.location import open_database

    mod = zoo.workload("matmul_bias")
    assert structural_hash(mod)[0] == "c"  # as GMM's cd74d25fd1596994
    db = open_database(db_copy)
    try:
        db.commit_workload(mod)
    finally:
        db.close()
    result = run("show", db_copy, "c")
    assert result.exit_code == 1
    assert result.stderr == (f"Error: hash prefix 'c' matches 2 workloads (cd74d25fd1596994, {structural_hash(mod)}); "
                             "give more digits\n")
    assert run("show", db_copy, "cd").exit_code == 0


def test_export(teams_db: pathlib.Path, tmp_path: pathlib.Path) -> None:
    out = tmp_path / "work_dir"
    result = run("export", teams_db, out, "--top-k", "2", "--target", "llvm -num-cores=1")
    assert result.exit_code == 0
    assert masked(result.stdout) == [f"exported 10 records of 5 workloads (5 workload/target pairs) to {out}; T s"]
    assert len((out / RECORD_FILE).read_text().splitlines()) == 10
    result = run("export", teams_db, out, "--top-k", "0")
    assert (result.exit_code, result.stderr) == (1, "Error: --top-k must be at least 1, got 0\n")


def test_prune(db_copy: pathlib.Path) -> None:
    result = run("prune", db_copy, "--top-k", "2")
    assert result.exit_code == 0
    assert re.fullmatch(r"kept 10 records, deleted 374; file \d+\.\d MB -> \d+\.\d MB; T s", *masked(result.stdout))
    assert "     2 " in run("ls", db_copy).stdout
    result = run("prune", db_copy, "--top-k", "0")
    assert result.exit_code == 1 and result.stderr.startswith("Error: --top-k must be at least 1 (got 0)")


def test_migrate(db_copy: pathlib.Path, tmp_path: pathlib.Path) -> None:
    from msdb.database.migrate import HEAD

    assert run("migrate", db_copy).stdout == f"{db_copy}: schema already at the newest revision {HEAD}\n"
    empty = tmp_path / "empty.sqlite"
    empty.touch()
    assert run("migrate", empty).stdout == f"{empty}: created the schema at revision {HEAD}\n"
    result = run("migrate", tmp_path / "missing.sqlite")
    assert (result.exit_code, result.stderr) == (1, f"Error: {tmp_path / 'missing.sqlite'}: no such database file\n")


def test_migrate_refuses_an_unknown_revision(db_copy: pathlib.Path) -> None:
    conn = sqlite3.connect(db_copy)
    conn.execute("UPDATE alembic_version SET version_num = 'not-a-revision'")
    conn.commit()
    conn.close()
    before = snapshot(db_copy)
    result = run("migrate", db_copy)
    assert result.exit_code == 1
    assert "has schema revision 'not-a-revision', which msdb" in result.stderr and result.stderr.count("\n") == 1
    assert snapshot(db_copy) == before


def test_migrate_upgrades_an_older_schema(db_copy: pathlib.Path) -> None:
    from alembic import command
    from sqlalchemy import create_engine

    from msdb.database.migrate import HEAD, REVISIONS, alembic_config

    older = REVISIONS[-2] if len(REVISIONS) > 1 else None
    if older is not None:
        engine = create_engine(f"sqlite:///{db_copy}")
        with engine.begin() as conn:
            command.downgrade(alembic_config(conn), older)
        engine.dispose()
        assert query(db_copy, "SELECT version_num FROM alembic_version") == [(older,)]
        assert run("migrate", db_copy).stdout == f"{db_copy}: schema upgraded from revision {older} to {HEAD}\n"
    assert query(db_copy, "SELECT version_num FROM alembic_version") == [(HEAD,)]
    assert run("ls", db_copy).stdout == LS_TABLE  # the records survived


def _downgrade(db: pathlib.Path, revision: str) -> None:
    from alembic import command
    from sqlalchemy import create_engine

    from msdb.database.migrate import alembic_config

    engine = create_engine(f"sqlite:///{db}")
    with engine.begin() as conn:
        command.downgrade(alembic_config(conn), revision)
    engine.dispose()


def test_import_into_an_older_schema_migrates_only_when_it_imports(db_copy: pathlib.Path,
                                                                   tmp_path: pathlib.Path) -> None:
    from msdb.database.migrate import HEAD, REVISIONS

    older = REVISIONS[-2]
    _downgrade(db_copy, older)
    wd = tmp_path / "team_a"
    shutil.copytree(TEAMS["team_a"], wd)
    good = (wd / RECORD_FILE).read_text()
    (wd / RECORD_FILE).write_text(good[:-100])  # a truncated last line
    before = snapshot(db_copy)
    refused = run("import", db_copy, wd)
    assert refused.exit_code == 1 and f"{RECORD_FILE}:128: truncated JSON" in refused.stderr
    assert snapshot(db_copy) == before  # not even migrated
    assert query(db_copy, "SELECT version_num FROM alembic_version") == [(older,)]
    (wd / RECORD_FILE).write_text(good)
    imported = run("import", db_copy, wd)
    assert imported.exit_code == 0 and "records: 0 new, 128 duplicate" in imported.stdout
    assert query(db_copy, "SELECT version_num FROM alembic_version") == [(HEAD,)]


def test_verify_clean_and_broken(tmp_path: pathlib.Path) -> None:
    db = tmp_path / "db.sqlite"
    assert run("import", db, TEAMS["team_c"]).exit_code == 0
    assert run("prune", db, "--top-k", "3").exit_code == 0
    result = run("verify", db)
    assert result.exit_code == 0
    assert masked(result.stdout) == ["checked 2 workloads and 6 records, 6 traces replayed: 0 problems; T s"]
    conn = sqlite3.connect(db)
    first, second = [row[0] for row in conn.execute("SELECT id FROM tuning_record ORDER BY id LIMIT 2")]
    conn.execute("UPDATE tuning_record SET mean_run_secs = 1.0 WHERE id = ?", (first,))
    conn.execute("UPDATE tuning_record SET trace = replace(trace, '\"PadInput\"', '\"NoSuchBlock\"') WHERE id = ?",
                 (second,))
    conn.commit()
    conn.close()
    result = run("verify", db)
    assert result.exit_code == 1
    out = masked(result.stdout)
    assert out[0].startswith(f"record {first}: mean_run_secs 1.0 but run_secs ")
    assert out[1] == f"record {second}: trace_hash " + out[1].split("trace_hash ")[1]
    assert out[1].endswith("does not match its trace")
    assert out[2].startswith(f"record {second} (workload ") and "replay failed" in out[2]
    assert out[-1] == "checked 2 workloads and 6 records, 6 traces replayed: 3 problems; T s"
    assert masked(run("verify", db, "--no-replay").stdout)[-1] == "checked 2 workloads and 6 records: 2 problems; T s"


def test_skip_bad_lists_lines_on_stderr(tmp_path: pathlib.Path) -> None:
    wd = tmp_path / "wd"
    shutil.copytree(TEAMS["team_c"], wd)
    lines = (wd / RECORD_FILE).read_text().splitlines(keepends=True)
    (wd / RECORD_FILE).write_text("".join(lines[:3] + ["[9,[[[],[]],null,null,null]]\n"] + lines[3:]))
    result = run("import", tmp_path / "db.sqlite", wd, "--skip-bad")
    assert result.exit_code == 0
    assert result.stderr == (f"{wd / RECORD_FILE}:4: record points at workload index 9, but database_workload.json "
                             "has 2 workload(s) (skipped)\n")
    assert masked(result.stdout) == [
        "workloads: 2 new, 0 known; records: 128 new, 0 duplicate, 0 failed runs; 1 bad line skipped; T s"]


def test_verify_option_of_import(tmp_path: pathlib.Path) -> None:
    wd = tmp_path / "wd"
    shutil.copytree(TEAMS["team_c"], wd)
    lines = (wd / RECORD_FILE).read_text().splitlines(keepends=True)
    record = json.loads(lines[1])
    tile = next(d for d in record[1][0][1] if isinstance(d[1], list))
    tile[1][0] = 0  # a tile factor of 0: the trace fits the workload but does not replay
    (wd / RECORD_FILE).write_text(lines[0] + json.dumps(record, separators=(",", ":")) + "\n")
    result = run("import", tmp_path / "db.sqlite", wd, "--verify")  # a trace that fails is a bad line
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.startswith(f"Error: {wd / RECORD_FILE}:2: replay failed: ")
    assert result.stderr.rstrip("\n").endswith("; nothing was imported (--skip-bad imports the other lines)")
    result = run("import", tmp_path / "db.sqlite", wd, "--verify", "--skip-bad")
    assert result.exit_code == 0
    assert result.stderr.startswith(f"{wd / RECORD_FILE}:2: replay failed: ")
    assert result.stderr.rstrip("\n").endswith(" (skipped)")
    assert masked(result.stdout) == [
        "workloads: 2 new, 0 known; records: 1 new, 0 duplicate, 0 failed runs; 2 traces replayed, 1 failed; T s"]


def test_progress_bars_on_stderr_for_big_jobs(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(common, "PROGRESS_THRESHOLD", 100)
    monkeypatch.setattr(common.ProgressBars.__init__, "__defaults__", (100,))
    monkeypatch.setattr(common, "stderr_is_terminal", lambda: True)  # bars are drawn only on a terminal
    result = run("import", tmp_path / "db.sqlite", TEAMS["team_a"], TEAMS["team_b"])
    assert result.exit_code == 0
    assert "importing" in result.stderr  # one pass: rows are written while the lines are read
    assert masked(result.stdout) == ["workloads: 3 new, 1 known; records: 256 new, 0 duplicate, 1 failed run (stored); T s"]


def test_debug_shows_the_traceback(tmp_path: pathlib.Path) -> None:
    from msdb.database.errors import DatabaseOpenError

    plain = run("ls", tmp_path / "missing.sqlite")
    assert (plain.exit_code, plain.stderr) == (1, f"Error: {tmp_path / 'missing.sqlite'}: no such database file\n")
    debug = run("--debug", "ls", tmp_path / "missing.sqlite")
    assert debug.exit_code == 1 and isinstance(debug.exception, DatabaseOpenError)


def test_errors_are_one_line_without_traceback(tmp_path: pathlib.Path) -> None:
    from msdb.cli.main import user_error_message

    assert user_error_message(FileNotFoundError(2, "No such file or directory", "x.json")) == \
        "x.json: No such file or directory"
    assert user_error_message(ValueError("a bug")) is None  # bugs keep their traceback
    from msdb.errors import MsdbError

    assert user_error_message(MsdbError("two\nlines")) == "two lines"


def test_opaque_workloads_are_kept_shown_and_never_replayed(tmp_path: pathlib.Path) -> None:
    from tests.cli.helpers import edit_lines, legacy_payload

    wd = tmp_path / "wd"
    shutil.copytree(TEAMS["team_c"], wd)
    edit_lines(wd / WORKLOAD_FILE, lambda ls: [ls[0], json.dumps([json.loads(ls[1])[0], legacy_payload()]) + "\n"])
    db = tmp_path / "db.sqlite"
    result = run("import", db, wd, "--opaque")
    assert result.exit_code == 0
    assert result.stderr == (f"{wd / WORKLOAD_FILE}:2: imported as an opaque payload (TVM shash 9915929228997527995): "
                             "workload is in TVM's legacy (<= 0.21) graph format (tvm_version 0.20.0)\n")
    assert run("prune", db, "--top-k", "2").exit_code == 0
    result = run("verify", db)
    assert result.exit_code == 0
    assert masked(result.stdout) == ["checked 2 workloads and 4 records, 2 traces replayed: 0 problems; T s"]
    ls = run("ls", db).stdout.splitlines()
    assert ls[2] == "899c7518d04f89bb  opaque-9915929228997527995  llvm -num-cores=1        -        2   195.85       -        1"
    show = run("show", db, "9915929228997527995").stdout
    assert "# opaque TVM workload (TVM shash 9915929228997527995)" in show and "def apply_trace" in show
    exported = run("export", db, tmp_path / "out")
    assert exported.stderr.startswith("left out workload 899c7518d04f89bb (TVM shash 9915929228997527995): opaque")
    assert masked(exported.stdout) == [f"exported 1 records of 1 workloads (1 workload/target pairs) to "
                                       f"{tmp_path / 'out'}; 1 workload left out; T s"]
