"""What a killed or interrupted `msdb publish` and `msdb merge` leave
behind (docs/architecture.md, "Processes, temporary files and interrupts").

- `msdb publish` killed with SIGKILL leaves its hidden staging folder; the next publish, to any
  OUTDIR beside it, removes it. Ctrl-C removes it at once, even while the copy waits or runs,
  and says in one line that nothing was published (exit status 130).
- `msdb merge` into a new file builds the file in a staging folder: killed, it leaves no
  database file and no WAL where DEST was asked for, and the next merge or import removes the
  folder. Ctrl-C says in one line what DEST kept (exit status 130).

Every test runs the real command in a subprocess. Moments are made certain by what the test
holds or watches, never by sleeping: a publish waits for the test's exclusive lock on DB (a
writer in the middle of a commit), so it is inside its copy step for as long as the test wants;
a merge is known to be writing once its DEST (or its staged DEST) has a WAL that grows.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import re
import signal
import sqlite3
import subprocess
import sys
from typing import Callable, Iterator, TypeVar

import pytest

import msdb
from msdb.hub.publish import MANIFEST_NAME, SNAPSHOT_NAME, publish
from tests.cli.procs import msdb as run_msdb
from tests.cli.procs import synthesize, wait_for
from tests.hub.serving import make_team_db

pytestmark = [pytest.mark.skipif(not sys.platform.startswith("linux"), reason="signals and flock"),
              pytest.mark.timeout(300)]

T = TypeVar("T")

#: Records in the merge's SRC: enough that merging them takes seconds on one core.
BIG = 12_000


@pytest.fixture(scope="module")
def team_db(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """A small team database in rollback-journal mode, so that a writer's lock keeps readers out."""
    db = make_team_db(tmp_path_factory.mktemp("team") / "team.sqlite", ("team_a",))
    with contextlib.closing(sqlite3.connect(db)) as conn:
        conn.execute("PRAGMA journal_mode=DELETE")
    return db


@pytest.fixture(scope="module")
def big_src(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    root = tmp_path_factory.mktemp("big")
    db = root / "src.sqlite"
    msdb.import_logs(str(db), [synthesize(root / "work_dir", BIG)])
    return db


@contextlib.contextmanager
def locked(db: pathlib.Path) -> Iterator[None]:
    """`db` held as a writer holds it while committing (an exclusive lock): readers wait."""
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        conn.execute("BEGIN EXCLUSIVE")
        yield
        conn.execute("ROLLBACK")
    finally:
        conn.close()


def hidden(folder: pathlib.Path, marker: str) -> list[pathlib.Path]:
    return sorted(p for p in folder.iterdir() if p.name.startswith(".") and marker in p.name)


def copying(folder: pathlib.Path) -> list[pathlib.Path]:
    """The staging folders of publishes that have begun their copy (the snapshot file exists)."""
    return [p for p in hidden(folder, ".publish-") if (p / SNAPSHOT_NAME).exists()]


def records(db: pathlib.Path) -> int:
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        return int(conn.execute("SELECT count(*) FROM tuning_record").fetchone()[0])


def wal_size(db: pathlib.Path) -> int:
    try:
        return db.with_name(db.name + "-wal").stat().st_size
    except OSError:
        return 0


def running(proc: subprocess.Popen[str], condition: Callable[[], T], what: str) -> T:
    """`wait_for(condition)` while `proc` runs; fails with its stderr if it ends first."""
    def check() -> T:
        value = condition()
        if not value and proc.poll() is not None:
            pytest.fail(f"the command ended with {proc.returncode} before {what}: {proc.communicate()[1]}")
        return value

    return wait_for(check, what)


def ctrl_c(proc: subprocess.Popen[str], *waits: tuple[Callable[[], object], str]) -> tuple[int, str, str]:
    """Ctrl-C, as a terminal sends it to its foreground group (`proc` started with
    `new_session`), once each of `waits` (condition, what) held in turn; `ended(proc)`. A
    command still running when the test fails is killed."""
    try:
        for condition, what in waits:
            running(proc, condition, what)
        os.killpg(proc.pid, signal.SIGINT)
        return ended(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def ended(proc: subprocess.Popen[str], timeout: float = 60.0) -> tuple[int, str, str]:
    """The exit status, stdout and stderr of `proc`, which must end within `timeout` seconds."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"the command did not end within {timeout:g} s: {err}")
    return proc.returncode, out, err


@pytest.mark.slow
def test_killed_publish_leaves_a_folder_the_next_publish_removes(team_db: pathlib.Path,
                                                                 tmp_path: pathlib.Path) -> None:
    out = tmp_path / "hub"
    with locked(team_db):
        proc = run_msdb("publish", team_db, out)
        try:
            running(proc, lambda: copying(tmp_path), "the publish to begin its copy")
        finally:
            proc.kill()
            proc.communicate()
    left = hidden(tmp_path, ".publish-")
    assert len(left) == 1 and not out.exists()  # what SIGKILL leaves: the staging folder only
    # the next publish, to another OUTDIR beside it, removes it
    result = publish(team_db, tmp_path / "other")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other"]
    assert (result.outdir / MANIFEST_NAME).is_file()


def test_publish_puts_back_an_earlier_publish_a_killed_one_moved_aside(team_db: pathlib.Path,
                                                                      tmp_path: pathlib.Path) -> None:
    """Killed between moving an earlier publish aside and renaming the new one into place: the
    state is made by hand (no signal lands there reliably), then the next publish repairs it."""
    out = tmp_path / "hub"
    publish(team_db, out)
    manifest = (out / MANIFEST_NAME).read_text()
    out.rename(tmp_path / ".hub.old-abcd1234")
    (tmp_path / ".hub.publish-wxyz_789").mkdir()  # that publish's staging folder, copy begun
    (tmp_path / ".hub.publish-wxyz_789" / SNAPSHOT_NAME).write_bytes(b"")
    publish(team_db, tmp_path / "other")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hub", "other"]
    assert (out / MANIFEST_NAME).read_text() == manifest


def test_ctrl_c_of_publish_removes_its_folder_at_once(team_db: pathlib.Path, tmp_path: pathlib.Path) -> None:
    out = tmp_path / "hub"
    publish(team_db, out)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    with locked(team_db):  # held until the publish ends: it cannot finish its copy meanwhile
        proc = run_msdb("publish", team_db, out, new_session=True)
        status, stdout, stderr = ctrl_c(proc, (lambda: copying(tmp_path), "the publish to begin its copy"))
    assert status == 130, stderr
    assert stderr == f"Interrupted: nothing was published; {out} is as it was.\n" and stdout == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hub"]
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


@pytest.mark.slow
def test_killed_merge_into_a_new_file_leaves_no_file(big_src: pathlib.Path, tmp_path: pathlib.Path) -> None:
    dest = tmp_path / "team.sqlite"
    proc = run_msdb("merge", dest, big_src)
    try:
        staged = running(proc, lambda: [p / dest.name for p in hidden(tmp_path, ".merge-") if wal_size(p / dest.name)],
                          "the merge to write its new file")
        assert not dest.exists()
    finally:
        proc.kill()
        proc.communicate()
    assert staged[0].exists()
    assert [p.name for p in tmp_path.iterdir() if not p.name.startswith(".")] == []  # no file, no WAL
    # the next merge into it removes the folder and makes the file whole
    status, stdout, stderr = ended(run_msdb("merge", dest, big_src), timeout=240)
    assert status == 0, stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["team.sqlite"]
    assert records(dest) == records(big_src)


@pytest.mark.slow
def test_import_removes_a_killed_merges_folder(big_src: pathlib.Path, tmp_path: pathlib.Path) -> None:
    dest = tmp_path / "team.sqlite"
    proc = run_msdb("merge", dest, big_src)
    try:
        running(proc, lambda: [p for p in hidden(tmp_path, ".merge-") if wal_size(p / dest.name)],
                 "the merge to write its new file")
    finally:
        proc.kill()
        proc.communicate()
    msdb.import_logs(str(dest), [pathlib.Path(__file__).parents[1] / "data" / "fixtures" / "tvm-0.27" / "team_a"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["team.sqlite"]


@pytest.mark.slow
def test_ctrl_c_of_merge_into_a_new_file_creates_nothing(big_src: pathlib.Path, tmp_path: pathlib.Path) -> None:
    dest = tmp_path / "team.sqlite"
    proc = run_msdb("merge", dest, big_src, new_session=True)
    status, stdout, stderr = ctrl_c(proc, (lambda: [p for p in hidden(tmp_path, ".merge-") if wal_size(p / dest.name)],
                                           "the merge to write its new file"))
    assert status == 130 and stdout == ""
    assert stderr == f"Interrupted: nothing was merged; {dest} was not created.\n"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_ctrl_c_of_merge_says_what_was_committed(big_src: pathlib.Path, tmp_path: pathlib.Path) -> None:
    dest = make_team_db(tmp_path / "team.sqlite", ("team_b",))
    first = tmp_path / "first.sqlite"
    make_team_db(first, ("team_c",))
    kept = records(dest)
    proc = run_msdb("merge", dest, first, big_src, new_session=True)
    grown: list[int] = []  # the WAL's size once the first SRC is in

    def first_merged() -> bool:
        if records(dest) > kept and wal_size(dest) > 0:
            grown.append(wal_size(dest))
            return True
        return False

    status, stdout, stderr = ctrl_c(proc, (first_merged, "the merge of the first SRC"),
                                    (lambda: wal_size(dest) > grown[0], "the merge to write records of the second SRC"))
    assert status == 130, stderr
    assert stdout.startswith(f"{first}: workloads:") and len(stdout.splitlines()) == 1
    after_first = kept + int(re.search(r"records: (\d+) new", stdout)[1])  # type: ignore[index]
    line = re.fullmatch(
        rf"Interrupted: merged in full: {re.escape(str(first))}; {re.escape(str(big_src))} stopped part way: "
        rf"{re.escape(str(dest))} gained (\d+) records meanwhile, in the transactions it committed "
        rf"\(merging {re.escape(str(big_src))} again adds the rest\)\.\n", stderr)
    assert line is not None, stderr
    assert records(dest) == after_first + int(line[1])
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []
