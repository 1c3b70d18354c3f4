"""What a careless user, a read-only disk and a hand-edited database get from the read-only
commands: `ls`, `show`, `verify`, `export` never create, migrate or write;
read-only files and folders can be browsed; errors name the file; empty results say why; the
summaries cannot be misread."""

from __future__ import annotations

import ctypes
import json
import os
import pathlib
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from typing import Iterator

import pytest
from click.testing import CliRunner

from msdb.cli.main import cli
from tests.cli.helpers import RECORD_FILE, TEAMS, WORKLOAD_FILE, snapshot

ROOT = pathlib.Path(__file__).resolve().parents[2]


def run(*args: object):
    return CliRunner().invoke(cli, [str(a) for a in args], prog_name="msdb")


def one_error_line(result, *, names: pathlib.Path | str) -> str:
    """The single `Error:` line of a failed command (no traceback), which names `names`."""
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    assert result.stderr.startswith("Error: ") and result.stderr.count("\n") == 1, result.stderr
    assert str(names) in result.stderr
    return result.stderr.rstrip("\n")


def companions(path: pathlib.Path) -> list[str]:
    return sorted(p.name for p in path.parent.iterdir() if p.name.startswith(path.name + "-"))


def fingerprint(path: pathlib.Path) -> tuple[bytes, list[str]]:
    """The file's bytes and its SQLite companions, read without SQLite (which would leave
    -wal/-shm files of its own)."""
    return path.read_bytes(), companions(path)


@pytest.fixture(scope="module")
def base_db(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    path = tmp_path_factory.mktemp("robust") / "base.sqlite"
    assert run("import", path, TEAMS["team_a"], TEAMS["team_c"]).exit_code == 0
    return path


@pytest.fixture
def db(base_db: pathlib.Path, tmp_path: pathlib.Path) -> pathlib.Path:
    path = tmp_path / "db.sqlite"
    shutil.copy(base_db, path)
    return path


READ_COMMANDS = (("ls",), ("show", "b78f"), ("verify", "--no-replay"), ("export", "OUT"))


def read_command(args: tuple[str, ...], db: pathlib.Path, tmp_path: pathlib.Path) -> list[str]:
    return [args[0], str(db), *(str(tmp_path / "out") if a == "OUT" else a for a in args[1:])]


# ---- 1. read-only commands never create, migrate or write ----

@pytest.mark.parametrize("args", READ_COMMANDS, ids=lambda a: a[0])
def test_read_commands_leave_a_zero_byte_file_as_it_was(args: tuple[str, ...], tmp_path: pathlib.Path) -> None:
    empty = tmp_path / "empty.sqlite"
    empty.touch()
    result = run(*read_command(args, empty, tmp_path))
    line = one_error_line(result, names=empty)
    assert line == (f"Error: {empty} is an empty file (0 bytes), not an msdb database; it was opened read-only and "
                    "nothing was changed (`msdb import` or `msdb migrate` creates the schema)")
    assert empty.read_bytes() == b"" and companions(empty) == []
    assert not (tmp_path / "out").exists()


def test_ls_leaves_an_empty_sqlite_file_and_an_older_schema_unchanged(db: pathlib.Path, tmp_path: pathlib.Path) -> None:
    blank = tmp_path / "blank.sqlite"
    conn = sqlite3.connect(blank)
    conn.execute("PRAGMA user_version = 7")  # a valid SQLite file with no tables
    conn.close()
    before = blank.read_bytes()
    assert "is an empty database (no tables), not an msdb database" in one_error_line(run("ls", blank), names=blank)
    assert blank.read_bytes() == before and companions(blank) == []

    from alembic import command
    from sqlalchemy import create_engine

    from msdb.database.migrate import REVISIONS, alembic_config

    engine = create_engine(f"sqlite:///{db}")
    with engine.begin() as conn2:
        command.downgrade(alembic_config(conn2), REVISIONS[-2])
    engine.dispose()
    before_old = fingerprint(db)
    line = one_error_line(run("ls", db), names=db)
    assert f"has msdb schema revision {REVISIONS[-2]}, older than this msdb's" in line and "msdb migrate" in line
    assert fingerprint(db) == before_old


def test_ls_on_a_writable_database_changes_nothing_and_leaves_no_wal_files(db: pathlib.Path) -> None:
    before = fingerprint(db)
    assert before[1] == []
    for args in (("ls", db), ("show", db, "b78f"), ("verify", db, "--no-replay")):
        assert run(*args).exit_code == 0
        assert fingerprint(db) == before, args
    snapshot(db)  # a plain mode=ro reader leaves an empty -wal/-shm pair behind ...
    assert companions(db) == ["db.sqlite-shm", "db.sqlite-wal"]
    assert run("ls", db).exit_code == 0
    assert fingerprint(db) == before  # ... which the next read-only open removes


def test_library_read_only_open_refuses_writes_naming_the_file(db: pathlib.Path) -> None:
    from msdb.database import ReadOnlyDatabase, open_database
    from msdb.ir import zoo

    database = open_database(db, read_only=True)
    try:
        workload = database.workloads()[0]
        assert database.get_top_k(workload, top_k=1)  # queries work
        with pytest.raises(ReadOnlyDatabase, match=f"^{db} was opened read-only"):
            database.commit_workload(zoo.workload("matmul"))
    finally:
        database.close()
    assert companions(db) == []


def test_an_immutable_url_opens_read_only(db: pathlib.Path) -> None:
    from msdb.database import ReadOnlyDatabase, open_database
    from msdb.ir import zoo

    before = fingerprint(db)
    url = f"sqlite:///file:{db}?immutable=1&uri=true"
    assert run("ls", url).stdout.count("llvm -num-cores=1") == 4
    database = open_database(url)
    try:
        assert database.read_only and len(database) == 256
        with pytest.raises(ReadOnlyDatabase, match=str(db)):  # names the file, not SQLite's bare words
            database.commit_workload(zoo.workload("matmul"))
    finally:
        database.close()
    assert fingerprint(db) == before


# ---- 1 and 2 with real permissions: a user who cannot write the file or its folder ----

def _drop_file_permission_override() -> None:  # pragma: no cover - runs in the child
    """Before exec: drop CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH from the bounding set, so
    root's program obeys file modes as any user does."""
    libc = ctypes.CDLL(None, use_errno=True)
    for capability in (1, 2):
        if libc.prctl(24, capability, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def as_plain_user(*args: object, cwd: pathlib.Path, python: tuple[str, ...] = ("-m", "msdb.cli.main"),
                  ) -> subprocess.CompletedProcess[str]:
    """`msdb ARGS` (or `python PYTHON ARGS`) in a child process that file permissions apply to
    (root's overrides dropped)."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run([sys.executable, *python, *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300,
                          preexec_fn=_drop_file_permission_override if os.geteuid() == 0 else None)


@pytest.fixture
def locked(base_db: pathlib.Path) -> Iterator[pathlib.Path]:
    """A folder holding a copy of the database, writable until the test locks it; the folder
    and file modes are restored afterwards so it can be removed."""
    folder = pathlib.Path(tempfile.mkdtemp(prefix="msdb-ro-"))
    shutil.copy(base_db, folder / "db.sqlite")
    probe = folder / "probe"
    probe.write_text("x")
    probe.chmod(0o444)
    try:
        check = subprocess.run([sys.executable, "-c", f"open({str(probe)!r}, 'a')"], capture_output=True,
                               preexec_fn=_drop_file_permission_override if os.geteuid() == 0 else None)
    except OSError as exc:
        shutil.rmtree(folder)
        pytest.skip(f"cannot run a process that file modes apply to: {exc}")
    probe.unlink()
    if check.returncode == 0:
        shutil.rmtree(folder)
        pytest.skip("this user writes read-only files anyway (no way to test file modes here)")
    try:
        yield folder / "db.sqlite"
    finally:
        folder.chmod(0o755)
        for path in folder.iterdir():
            path.chmod(0o644)
        shutil.rmtree(folder)


@pytest.mark.slow
def test_ls_of_a_read_only_file_leaves_no_wal_files(locked: pathlib.Path) -> None:
    locked.chmod(0o444)
    before = locked.read_bytes()
    for args in (("ls", locked), ("show", locked, "b78f"), ("verify", locked, "--no-replay")):
        result = as_plain_user(*args, cwd=locked.parent)
        assert result.returncode == 0, result.stderr
        assert companions(locked) == [], args
    assert locked.read_bytes() == before


@pytest.mark.slow
def test_a_database_in_a_read_only_folder_can_be_browsed(locked: pathlib.Path) -> None:
    locked.parent.chmod(0o555)
    result = as_plain_user("ls", locked, cwd=locked.parent)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("llvm -num-cores=1") == 4 and result.stderr == ""
    out = pathlib.Path(tempfile.mkdtemp(prefix="msdb-ro-out-"))
    try:
        exported = as_plain_user("export", locked, out / "wd", cwd=locked.parent)
        assert exported.returncode == 0, exported.stderr
        assert (out / "wd" / RECORD_FILE).read_text().count("\n") == 4
    finally:
        shutil.rmtree(out)
    assert sorted(p.name for p in locked.parent.iterdir()) == ["db.sqlite"]


def test_a_read_only_zero_byte_file_gives_one_line(locked: pathlib.Path) -> None:
    empty = locked.parent / "empty.sqlite"
    empty.touch()
    empty.chmod(0o444)
    result = as_plain_user("ls", empty, cwd=locked.parent)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr == (f"Error: {empty} is an empty file (0 bytes), not an msdb database; it was opened "
                             "read-only and nothing was changed (`msdb import` or `msdb migrate` creates the schema)\n")
    assert empty.read_bytes() == b"" and companions(empty) == []


def test_the_library_queries_a_read_only_file_without_being_told(locked: pathlib.Path) -> None:
    locked.chmod(0o444)
    before = locked.read_bytes()
    code = """if True:
        import sys
        from msdb.database import ReadOnlyDatabase, SQLiteDatabase
        from msdb.ir import zoo
        db = SQLiteDatabase(sys.argv[1])
        print(len(db), len(db.get_top_k(db.workloads()[0], top_k=2)))
        try:
            db.commit_workload(zoo.workload("matmul"))
        except ReadOnlyDatabase as exc:
            print(exc)
        db.close()
    """
    result = as_plain_user(locked, cwd=locked.parent, python=("-c", code))
    assert result.returncode == 0, result.stderr
    assert result.stdout == (f"256 2\n{locked}: attempt to write a readonly database: this user cannot write the "
                             "file or its folder (permissions, a read-only mount); nothing was changed\n")
    assert locked.read_bytes() == before and companions(locked) == []


@pytest.mark.slow
def test_writing_a_read_only_file_names_it(locked: pathlib.Path) -> None:
    locked.chmod(0o444)
    before = locked.read_bytes()
    result = as_plain_user("import", locked, TEAMS["team_b"], cwd=locked.parent)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr == (f"Error: {locked}: attempt to write a readonly database: this user cannot write the file "
                             "or its folder (permissions, a read-only mount); nothing was changed\n")
    assert locked.read_bytes() == before and companions(locked) == []
    empty = locked.parent / "empty.sqlite"
    empty.touch()
    empty.chmod(0o444)
    result = as_plain_user("import", empty, TEAMS["team_b"], cwd=locked.parent)
    assert result.returncode == 1 and result.stderr.startswith(f"Error: {empty}: attempt to write a readonly database")
    assert empty.read_bytes() == b"" and companions(empty) == []


# ---- 3. empty results say why ----

def test_ls_with_a_target_nothing_matches_says_which_targets_exist(db: pathlib.Path) -> None:
    for target in ("cuda", "cuda -arch=zz"):
        result = run("ls", db, "--target", target)
        assert (result.exit_code, result.stdout) == (0, "")
        assert result.stderr == f"no record matched target {target!r} in {db}; its records are for: llvm -num-cores=1\n"
    as_json = run("ls", db, "--target", "cuda", "--json")
    assert json.loads(as_json.stdout) == [] and as_json.stderr.startswith("no record matched target 'cuda'")


def test_export_with_a_target_nothing_matches_says_why_and_writes_nothing(db: pathlib.Path,
                                                                          tmp_path: pathlib.Path) -> None:
    out = tmp_path / "out"
    line = one_error_line(run("export", db, out, "--target", "cuda -arch=sm_80"), names=db)
    assert line == (f"Error: no record matched target 'cuda -arch=sm_80' in {db}; its records are for: "
                    "llvm -num-cores=1; nothing was written")
    assert not out.exists()


def test_ls_and_export_check_the_target_string_alike(db: pathlib.Path, tmp_path: pathlib.Path) -> None:
    lines = {one_error_line(run(*args, "--target", "gpu -arch=sm_80"), names="gpu")
             for args in (("ls", db), ("export", db, tmp_path / "out"))}
    assert lines == {"Error: --target: target 'gpu -arch=sm_80': unknown target kind 'gpu'; known kinds: c, "
                     "composite, cuda, ext_dev, hexagon, hybrid, llvm, metal, nvptx, opencl, rocm, stackvm, vulkan, "
                     "webgpu"}  # TVM's internal example_target_hook is not offered


def test_an_unknown_url_scheme_says_which_schemes_work() -> None:
    line = one_error_line(run("ls", "notaurl://x"), names="notaurl://x")
    assert "Can't load plugin" not in line
    assert line.startswith("Error: cannot open database 'notaurl://x': unknown URL scheme 'notaurl://'; give a file "
                           "path or an SQLAlchemy URL such as sqlite:///PATH")
    assert "postgresql://" in line and "sqlite://" in line


# ---- 4. wording ----

def test_the_import_summary_counts_failed_runs_as_stored_records(tmp_path: pathlib.Path) -> None:
    result = run("import", tmp_path / "db.sqlite", TEAMS["team_a"])
    assert result.exit_code == 0
    assert "invalid" not in result.stdout
    assert result.stdout.startswith("workloads: 2 new, 0 known; records: 128 new, 0 duplicate, 1 failed run (stored); ")


@pytest.mark.slow
def test_no_progress_lines_when_stderr_is_not_a_terminal(tmp_path: pathlib.Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from msdb.cli import common

    monkeypatch.setattr(common.ProgressBars.__init__, "__defaults__", (10,))  # every phase is "big"
    result = run("import", tmp_path / "db.sqlite", TEAMS["team_a"], "--verify")
    assert result.exit_code == 0, result.output
    assert result.stderr == ""  # no stray "importing" / "checking" / "replaying" lines
    assert run("verify", tmp_path / "db.sqlite").stderr == ""


def test_an_unterminated_string_names_its_column_once(tmp_path: pathlib.Path) -> None:
    wd = tmp_path / "team_c"
    shutil.copytree(TEAMS["team_c"], wd)
    lines = (wd / RECORD_FILE).read_text().splitlines(keepends=True)
    (wd / RECORD_FILE).write_text("".join(lines[:-1]) + '[0, [[["Sample\n')
    line = one_error_line(run("import", tmp_path / "db.sqlite", wd), names=RECORD_FILE)
    assert "at at" not in line
    assert "(Unterminated string starting at column " in line


# ---- 5. rows deleted by hand ----

def _delete(db: pathlib.Path, sql: str) -> None:
    conn = sqlite3.connect(db)  # foreign keys are off in a plain sqlite3 session, as in the sqlite3 shell
    conn.execute(sql)
    conn.commit()
    conn.close()


def test_ls_and_export_skip_records_of_a_deleted_workload_row(db: pathlib.Path, tmp_path: pathlib.Path) -> None:
    _delete(db, "DELETE FROM workload WHERE id = 1")
    listed = run("ls", db)
    assert listed.exit_code == 0 and "Traceback" not in listed.output
    assert listed.stdout.count("llvm -num-cores=1") == 3
    assert listed.stderr == (f"warning: 64 records of workload row 1 left out: that row does not exist in {db} "
                             "(deleted by hand?); `msdb verify` lists them\n")
    exported = run("export", db, tmp_path / "out")
    assert exported.exit_code == 0 and "Traceback" not in exported.output
    assert exported.stderr == (f"warning: records of workload row 1 left out: that row does not exist in {db} "
                               "(deleted by hand?); `msdb verify` lists them\n")
    assert (tmp_path / "out" / WORKLOAD_FILE).read_text().count("\n") == 3


def test_ls_and_export_skip_records_of_a_deleted_target_row(db: pathlib.Path, tmp_path: pathlib.Path) -> None:
    _delete(db, "DELETE FROM target WHERE id = 1")
    listed = run("ls", db)
    assert listed.exit_code == 0 and "Traceback" not in listed.output
    assert listed.stderr == (f"warning: 256 records of target row 1 left out: that row does not exist in {db} "
                             "(deleted by hand?); `msdb verify` lists them\n")
    exported = run("export", db, tmp_path / "out")
    assert exported.exit_code == 0 and "Traceback" not in exported.output
    assert exported.stderr.startswith("warning: records of target row 1 left out: that row does not exist")
    assert (tmp_path / "out" / RECORD_FILE).read_text() == ""


# ---- 6. which form of the script `show` prints ----

def test_show_says_which_form_of_the_script_it_prints(db: pathlib.Path, tmp_path: pathlib.Path) -> None:
    from msdb.database import open_database
    from msdb.ir import zoo

    imported = run("show", db, "b78f").stdout.splitlines()
    assert imported[1].startswith("# script: as imported from TVM, with that TVM's function attributes (0.27: "
                                  "tirx.noalias, s_tir=True")
    assert any('"tirx.noalias": True' in line for line in imported)
    own = tmp_path / "own.sqlite"
    database = open_database(own, create=True)
    try:
        shash = database.commit_workload(zoo.workload("matmul")).shash
    finally:
        database.close()
    shown = run("show", own, shash).stdout.splitlines()
    assert shown[1].startswith("# script: msdb's form (tir.noalias; TVM 0.27 writes the same workload with "
                               "tirx.noalias and s_tir=True)")
    assert any('"tir.noalias": True' in line for line in shown)
