"""Temporary folders that never pile up, `prune` that gives the space back,
in-memory databases refused where the result would vanish (docs/architecture.md, "Processes,
temporary files and interrupts")."""

from __future__ import annotations

import fcntl
import os
import pathlib
import shutil
import sqlite3
import tempfile
import time

import pytest
from click.testing import CliRunner, Result

from msdb.cli.main import cli
from tests.cli.helpers import RECORD_FILE, TEAMS, WORKLOAD_FILE


def run(*args: object) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args], prog_name="msdb")


@pytest.fixture
def db(tmp_path: pathlib.Path) -> pathlib.Path:
    path = tmp_path / "db" / "teams.sqlite"
    path.parent.mkdir()
    result = run("import", path, *TEAMS.values())
    assert result.exit_code == 0, result.output
    return path


def workdir_files(path: pathlib.Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(path.iterdir())}


def leave_export_leftovers(out: pathlib.Path, *, outdir_moved_aside: bool = False) -> list[pathlib.Path]:
    """What kills of `msdb export OUT` at different moments leave beside OUT: staging folders with
    partial files, and (killed between its two renames) OUT moved aside with no new OUT."""
    parent = out.parent
    leftovers = []
    for i in range(3):
        staging = parent / f".{out.name}.export-kill{i}"
        staging.mkdir()
        (staging / WORKLOAD_FILE).write_text('["1", "AAAA')  # cut off mid-write
        leftovers.append(staging)
    old = parent / f".{out.name}.old-kill"
    if outdir_moved_aside:
        os.rename(out, old)
    else:
        shutil.copytree(out, old)
    leftovers.append(old)
    return leftovers


# ---------------------------------------------------------------- 3. export's temporary folders


def test_the_next_export_removes_what_killed_exports_left(db: pathlib.Path, tmp_path: pathlib.Path) -> None:
    out = tmp_path / "out"
    assert run("export", db, out).exit_code == 0
    exported = workdir_files(out)
    leave_export_leftovers(out)
    result = run("export", db, out)
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["db", "out"]
    assert workdir_files(out) == exported
    for _ in range(3):  # and they never pile up
        assert run("export", db, out).exit_code == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["db", "out"]


def test_an_export_killed_between_its_renames_gets_its_outdir_back(db: pathlib.Path, tmp_path: pathlib.Path) -> None:
    out = tmp_path / "out"
    assert run("export", db, out, "--top-k", "2").exit_code == 0
    exported = workdir_files(out)
    leave_export_leftovers(out, outdir_moved_aside=True)
    assert not out.exists()  # as the kill left it
    result = run("export", db, out, "--top-k", "2")
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["db", "out"]
    assert workdir_files(out) == exported


def test_a_running_exports_folders_are_left_alone(db: pathlib.Path, tmp_path: pathlib.Path) -> None:
    out = tmp_path / "out"
    busy = tmp_path / ".out.export-busy"
    busy.mkdir()
    (busy / RECORD_FILE).write_text("")
    fd = os.open(busy, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)  # as a concurrent export holds its staging folder
    try:
        assert run("export", db, out).exit_code == 0
        assert busy.is_dir()
    finally:
        os.close(fd)
    assert run("export", db, out).exit_code == 0
    assert not busy.exists()  # its owner is gone now


def test_the_tuners_artifact_folders_never_pile_up(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from msdb.tuner.measure.builder import LocalBuilder

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    stale = tmp_path / "msdb-build-killed"  # what a killed tuner left: artifacts, a half-written one
    stale.mkdir()
    (stale / "main-0123456789ab.o.json.tmp4242").write_text("{")
    recent = tmp_path / "msdb-build-recent"  # no lock, but changed a moment ago: maybe an older msdb's
    recent.mkdir()
    (recent / "main-ba9876543210.o").write_bytes(b"")
    an_hour_ago = time.time() - 3600
    os.utime(stale, (an_hour_ago, an_hour_ago))
    builder = LocalBuilder(max_workers=1)
    own = pathlib.Path(builder.artifact_dir)
    assert not stale.exists() and own.parent == tmp_path and own.is_dir()
    other = LocalBuilder(max_workers=1)  # a concurrent builder leaves the first one's folder alone
    assert own.is_dir()
    other.close()
    builder.close()
    assert list(tmp_path.iterdir()) == [recent]
    given = tmp_path / "mine"
    given.mkdir()
    LocalBuilder(artifact_dir=str(given)).close()
    assert given.is_dir()  # a folder the caller gave is the caller's


# ---------------------------------------------------------------- 5. prune gives the space back


def test_prune_shrinks_the_file(db: pathlib.Path) -> None:
    before = db.stat().st_size
    result = run("prune", db, "--top-k", "1")
    assert result.exit_code == 0, result.output
    after = db.stat().st_size
    assert after < before / 2
    assert f"file {before / 1e6:.1f} MB -> " in result.stdout
    assert not (db.parent / (db.name + "-wal")).exists() or (db.parent / (db.name + "-wal")).stat().st_size == 0
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert conn.execute("PRAGMA freelist_count").fetchone()[0] == 0
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        conn.close()


@pytest.mark.slow
def test_prune_while_another_process_reads_says_when_the_file_shrinks(db: pathlib.Path) -> None:
    reader = sqlite3.connect(db, isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM tuning_record").fetchone()  # holds a snapshot of the old pages
    try:
        result = run("prune", db, "--top-k", "1")
    finally:
        reader.execute("COMMIT")
        reader.close()
    assert result.exit_code == 0, result.output
    assert "the file shrinks to that once the other processes reading it close it" in result.stdout
    promised = float(result.stdout.split(" -> ")[1].split(" MB")[0])
    assert db.stat().st_size == pytest.approx(promised * 1e6, abs=0.05e6)  # the last one to close folded the WAL


# ---------------------------------------------------------------- 6. in-memory URLs


@pytest.mark.parametrize("url", ["sqlite://", "sqlite:///:memory:", "sqlite:///file:m?mode=memory&uri=true"])
@pytest.mark.parametrize("command", ["import", "merge", "tune", "prune"])
def test_an_in_memory_database_is_refused_where_the_result_would_vanish(url: str, command: str,
                                                                        tmp_path: pathlib.Path) -> None:
    args = {"import": ["import", url, TEAMS["team_a"]],
            "merge": ["merge", url, tmp_path / "src.sqlite"],
            "tune": ["tune", url, "--zoo", "GMM", "--trials", "1"],
            "prune": ["prune", url, "--top-k", "1"]}[command]
    if command == "merge":
        assert run("import", tmp_path / "src.sqlite", TEAMS["team_c"]).exit_code == 0
    result = run(*args)
    assert (result.exit_code, result.stdout) == (1, "")
    assert result.stderr == (f"Error: {url} is an in-memory database: what msdb {command} writes there vanishes when "
                             "the command ends; give a file path (e.g. msdb.sqlite) or a server URL\n")
