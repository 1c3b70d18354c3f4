"""Every bad input a user can hand `msdb import` (and the DB/option arguments of the other
commands): one `Error:` line naming the file and line or the option, exit status 1, and the
database exactly as it was (file sha256, row counts and rows)."""

from __future__ import annotations

import base64
import json
import pathlib
import shutil
import struct

import pytest
from click.testing import CliRunner

from msdb.cli.main import cli
from tests.cli.helpers import RECORD_FILE, TEAMS, WORKLOAD_FILE, edit_lines, snapshot, with_unknown_node

TAIL = "; nothing was imported (--skip-bad imports the other lines)"


def run(*args: object):
    return CliRunner().invoke(cli, [str(a) for a in args], prog_name="msdb")


@pytest.fixture(scope="module")
def base_db(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    path = tmp_path_factory.mktemp("bad") / "base.sqlite"
    assert run("import", path, TEAMS["team_c"]).exit_code == 0
    return path


@pytest.fixture
def db(base_db: pathlib.Path, tmp_path: pathlib.Path) -> pathlib.Path:
    path = tmp_path / "db.sqlite"
    shutil.copy(base_db, path)
    return path


@pytest.fixture
def wd(tmp_path: pathlib.Path) -> pathlib.Path:
    path = tmp_path / "team_a"
    shutil.copytree(TEAMS["team_a"], path)
    return path


def refused(db: pathlib.Path, *args: object) -> str:
    """Run `msdb import DB args...`, check it failed cleanly, return the one stderr line."""
    before = snapshot(db)
    result = run("import", db, *args)
    assert result.exit_code == 1, result.output
    assert result.stdout == ""
    assert result.stderr.startswith("Error: ") and result.stderr.count("\n") == 1, result.stderr
    assert "Traceback" not in result.output
    assert snapshot(db) == before
    return result.stderr.rstrip("\n")


def _payload_edit(wd: pathlib.Path, make) -> None:
    def edit(lines: list[str]) -> list[str]:
        shash, payload = json.loads(lines[0])
        return [json.dumps([shash, make(payload)]) + "\n"] + lines[1:]

    edit_lines(wd / WORKLOAD_FILE, edit)


def test_blank_lines_are_ignored_not_fatal(db: pathlib.Path, wd: pathlib.Path) -> None:
    edit_lines(wd / RECORD_FILE, lambda ls: ls[:10] + ["\n"] + ls[10:] + ["\n", "\n"])
    edit_lines(wd / WORKLOAD_FILE, lambda ls: ls[:1] + ["   \n"] + ls[1:])
    result = run("import", db, wd)
    assert result.exit_code == 0 and result.stderr == ""
    assert result.stdout.startswith("workloads: 2 new, 0 known; records: 128 new, 0 duplicate, 1 failed run (stored); ")


def test_truncated_last_line(db: pathlib.Path, wd: pathlib.Path) -> None:
    edit_lines(wd / RECORD_FILE, lambda ls: ls[:-1] + [ls[-1][:300]])
    assert refused(db, wd) == (f"Error: {wd / RECORD_FILE}:128: truncated JSON (Expecting value at column "
                               f"301){TAIL}")


def test_record_pointing_at_a_missing_workload(db: pathlib.Path, wd: pathlib.Path) -> None:
    edit_lines(wd / RECORD_FILE, lambda ls: ls[:4] + ["[2" + ls[4][2:]] + ls[5:])
    assert refused(db, wd) == (f"Error: {wd / RECORD_FILE}:5: record points at workload index 2, but "
                               f"database_workload.json has 2 workload(s){TAIL}")


def test_base64_that_does_not_decode(db: pathlib.Path, wd: pathlib.Path) -> None:
    _payload_edit(wd, lambda p: p[:100] + "!!" + p[102:])
    message = refused(db, wd)
    assert message.startswith(f"Error: {wd / WORKLOAD_FILE}:1: workload payload is not valid base64 (")
    assert message.endswith(f"(and 64 more bad lines){TAIL}")  # its records cannot be imported either


def test_length_prefix_that_disagrees(db: pathlib.Path, wd: pathlib.Path) -> None:
    def shorter(payload: str) -> str:
        raw = base64.b64decode(payload)
        return base64.b64encode(struct.pack("<Q", len(raw) - 8 + 5) + raw[8:]).decode()

    _payload_edit(wd, shorter)
    message = refused(db, wd)
    length = len(base64.b64decode(json.loads((TEAMS["team_a"] / WORKLOAD_FILE).read_text().splitlines()[0])[1])) - 8
    assert message == (f"Error: {wd / WORKLOAD_FILE}:1: workload payload's length prefix says {length + 5} bytes but "
                       f"{length} follow (and 64 more bad lines){TAIL}")


def test_json_graph_with_an_unknown_node_type(db: pathlib.Path, wd: pathlib.Path) -> None:
    _payload_edit(wd, with_unknown_node)
    message = refused(db, wd)
    assert message.startswith(f"Error: {wd / WORKLOAD_FILE}:1: unsupported node type 'tirx.Frobnicate' (node ")
    assert "--opaque imports it as an opaque payload keyed by TVM's shash 7523732197612418965" in message
    result = run("import", db, wd, "--opaque")
    assert result.exit_code == 0
    assert "imported as an opaque payload (TVM shash 7523732197612418965)" in result.stderr


def test_target_string_that_does_not_parse(db: pathlib.Path, wd: pathlib.Path) -> None:
    def edit(lines: list[str]) -> list[str]:
        record = json.loads(lines[6])
        record[1][2] = "llvm -mcpu='skylake"
        return lines[:6] + [json.dumps(record) + "\n"] + lines[7:]

    edit_lines(wd / RECORD_FILE, edit)
    assert refused(db, wd) == (f"Error: {wd / RECORD_FILE}:7: bad target: target string \"llvm -mcpu='skylake\": "
                               f"No closing quotation{TAIL}")


def test_target_option_that_does_not_parse(db: pathlib.Path, tmp_path: pathlib.Path) -> None:
    for command in (["ls", db], ["export", db, tmp_path / "out"], ["show", db, "b78f"]):
        before = snapshot(db)
        result = run(*command, "--target", "gpu -arch=sm_80")
        assert result.exit_code == 1
        assert result.stderr == ("Error: --target: target 'gpu -arch=sm_80': unknown target kind 'gpu'; known "
                                 "kinds: c, composite, cuda, ext_dev, hexagon, hybrid, llvm, "
                                 "metal, nvptx, opencl, rocm, stackvm, vulkan, webgpu\n")
        assert snapshot(db) == before
    assert not (tmp_path / "out").exists()


def test_missing_file(db: pathlib.Path, wd: pathlib.Path) -> None:
    (wd / RECORD_FILE).unlink()
    assert refused(db, wd / WORKLOAD_FILE, wd / RECORD_FILE) == f"Error: {wd / RECORD_FILE}: no such file"
    assert refused(db, wd.parent / "nowhere") == f"Error: {wd.parent / 'nowhere'}: no such file or directory"
    assert refused(db, wd / WORKLOAD_FILE) == (f"Error: {wd / WORKLOAD_FILE}: a file needs its partner: pass a "
                                               "work_dir, or the workload file followed by the record file")


@pytest.mark.parametrize("spelling", ["path", "url"])
def test_a_refused_import_into_a_new_database_leaves_no_file(wd: pathlib.Path, tmp_path: pathlib.Path,
                                                            spelling: str) -> None:
    new = tmp_path / "new.sqlite"
    edit_lines(wd / RECORD_FILE, lambda ls: ls[:-1] + [ls[-1][:300]])  # found after the first rows were written
    result = run("import", new if spelling == "path" else f"sqlite:///{new}", wd)
    assert result.exit_code == 1 and result.stderr.startswith(f"Error: {wd / RECORD_FILE}:128: truncated JSON")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["team_a"]


def test_directory_without_the_two_files(db: pathlib.Path, tmp_path: pathlib.Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    assert refused(db, empty) == (f"Error: {empty}: not a MetaSchedule work_dir (missing database_workload.json, "
                                  "database_tuning_record.json)")
    (empty / WORKLOAD_FILE).write_text("")
    assert refused(db, empty) == f"Error: {empty}: not a MetaSchedule work_dir (missing database_tuning_record.json)"


def test_a_bad_line_in_a_later_work_dir_writes_nothing_from_earlier_ones(db: pathlib.Path, wd: pathlib.Path) -> None:
    edit_lines(wd / RECORD_FILE, lambda ls: ls[:-1] + ["[0,[[[],[]]"])
    message = refused(db, TEAMS["team_b"], wd)
    assert message.startswith(f"Error: {wd / RECORD_FILE}:128: truncated JSON")


@pytest.mark.parametrize("location, message", [
    ("postgresql://scott:tiger@127.0.0.1:9/msdb",
     "Error: postgresql://scott:***@127.0.0.1:9/msdb cannot be opened as a database: connection failed: "),
    ("nosuchdialect://x", "Error: cannot open database 'nosuchdialect://x': unknown URL scheme 'nosuchdialect://'; "
                          "give a file path or an SQLAlchemy URL such as sqlite:///PATH or postgresql://USER@HOST/DB "
                          "(schemes: mariadb://, mssql://, mysql://, oracle://, postgresql://, sqlite://)"),
    ("sqlite:////nonexistent-msdb-dir/x.db", "Error: cannot create database /nonexistent-msdb-dir/x.db: folder "
                                             "/nonexistent-msdb-dir does not exist"),
])
def test_db_url_that_cannot_be_opened(location: str, message: str, tmp_path: pathlib.Path) -> None:
    result = run("import", location, TEAMS["team_c"])
    assert (result.exit_code, result.stdout) == (1, "")
    if message.endswith("connection failed: "):  # the driver's own words follow (port 9 refuses)
        assert result.stderr.startswith(message) and "tiger" not in result.stderr and result.stderr.count("\n") == 1
    else:
        assert result.stderr == message + "\n"
    for command in ("ls", "verify", "migrate"):
        other = run(command, location)
        assert other.exit_code == 1 and other.stderr.count("\n") == 1 and other.stderr.startswith("Error: ")


def test_db_file_that_is_not_a_database(tmp_path: pathlib.Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("not a database\n")
    for args in (["import", notes, TEAMS["team_c"]], ["ls", notes], ["merge", tmp_path / "dest.sqlite", notes]):
        result = run(*args)
        assert result.exit_code == 1
        assert result.stderr == (f"Error: {notes} is not a SQLite database (it does not start with the SQLite "
                                 "header); nothing was changed\n")
    assert notes.read_text() == "not a database\n"
    assert not (tmp_path / "dest.sqlite").exists()  # every SRC is opened before DEST is created


def test_read_commands_do_not_create_a_database(tmp_path: pathlib.Path) -> None:
    missing = tmp_path / "typo.sqlite"
    for args in (["ls", missing], ["show", missing, "abc"], ["export", missing, tmp_path / "out"],
                 ["verify", missing], ["prune", missing, "--top-k", "1"], ["merge", tmp_path / "d.sqlite", missing]):
        result = run(*args)
        assert (result.exit_code, result.stderr) == (1, f"Error: {missing}: no such database file\n"), args
    assert sorted(p.name for p in tmp_path.iterdir()) == []
