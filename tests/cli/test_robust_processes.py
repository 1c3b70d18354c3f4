"""What a killed or interrupted `msdb import` (and a killed tuner) leaves
behind (docs/architecture.md, "Processes, temporary files and interrupts").

Every test runs the real command in a subprocess and watches its processes through /proc:
- its parsing workers (and the tuner's build and run workers) die with it, SIGKILL included;
- a killed or failed import into a new file leaves no file, and never deletes a file another
  process wrote into meanwhile;
- Ctrl-C (SIGINT to the process group, as a terminal sends it) before the commit prints one
  line saying nothing was imported, and no worker traceback; after the commit, one line saying
  what was committed.
Moments are made certain by watching the process, never by sleeping: the workers exist only
while the log is parsed, which is before the commit; a stopped process group (SIGSTOP) cannot
move on while it is checked.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap

import pytest

from tests.cli.helpers import RECORD_FILE, TEAMS
from tests.cli.procs import (
    alive, children, distinct_records, kill_all, msdb, state, survivors, synthesize, wait_for,
)

pytestmark = [pytest.mark.skipif(not sys.platform.startswith("linux"), reason="watches processes through /proc"),
              pytest.mark.slow, pytest.mark.timeout(600)]

#: Records in the big log: enough that parsing it takes a while on one core.
BIG = 40_000


@pytest.fixture(scope="module")
def big_log(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    return synthesize(tmp_path_factory.mktemp("big") / "work_dir", BIG)


@pytest.fixture(scope="module")
def big_bad_log(big_log: pathlib.Path, tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """The big log with a truncated last line: the import fails at its end, nothing written."""
    out = tmp_path_factory.mktemp("bad") / "work_dir"
    shutil.copytree(big_log, out)
    with open(out / RECORD_FILE, "a") as handle:
        handle.write('[0,[[[["GetSBlock",[],["Z"\n')
    return out


def records(db: pathlib.Path) -> int:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return int(conn.execute("SELECT count(*) FROM tuning_record").fetchone()[0])
    finally:
        conn.close()


def import_team(db: pathlib.Path, team: str = "team_c") -> None:
    done = subprocess.run([sys.executable, "-m", "msdb.cli.main", "import", str(db), str(TEAMS[team])],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr


def parsing_workers(proc: subprocess.Popen[str]) -> list[tuple[int, str]]:
    """The import's forked parsing workers, once both are there (they exist only while the log
    is parsed, before the commit)."""
    return wait_for(lambda: len(found := children(proc.pid)) >= 2 and found, "the import's two parsing workers")


def stop_group(pid: int) -> None:
    """SIGSTOP the process group of `pid` and wait until its leader is stopped."""
    os.killpg(pid, signal.SIGSTOP)
    wait_for(lambda: state(pid) == "T", "the import to stop")


# ---------------------------------------------------------------- 1. workers die with their parent


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_a_killed_import_leaves_no_worker_and_no_new_file(big_log: pathlib.Path, tmp_path: pathlib.Path,
                                                          signum: int) -> None:
    db = tmp_path / "new.sqlite"
    proc = msdb("import", db, big_log)
    workers: list[tuple[int, str]] = []
    try:
        workers = parsing_workers(proc)
        proc.send_signal(signum)
        proc.wait(timeout=60)
        wait_for(lambda: not survivors(workers), "the parsing workers to die with the import")
    finally:
        kill_all(workers)
        proc.kill()
        proc.communicate()
    # 2. nothing of the new database is left under its name ...
    assert [p.name for p in tmp_path.iterdir() if not p.name.startswith(".new.sqlite.import-")] == []
    # ... and the next import removes the killed one's staging folder
    import_team(db)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new.sqlite"]
    assert records(db) == 128


_BUSY = '''
import pathlib
import time


def run(marker):
    pathlib.Path(marker).touch()
    time.sleep(600)
'''

_TUNER = '''
import sys
import threading

sys.path.insert(0, sys.argv[1])
from msdb.tuner.measure.builder import LocalBuilder
from msdb.tuner.measure.runner import LocalRunner

if sys.argv[2] == "runner":
    worker = LocalRunner().worker
else:
    # as LocalBuilder.build does: the worker is started by a pool thread, which ends at once;
    # the worker must outlive that thread (it dies with the process, not the thread)
    builder = LocalBuilder(max_workers=1)
    box = []
    thread = threading.Thread(target=lambda: box.append(builder._acquire()))
    thread.start()
    thread.join()
    worker = box[0]
print(worker.pid, flush=True)
worker.call("busy:run", (sys.argv[3],), 600)
'''


@pytest.mark.parametrize("kind", ["builder", "runner"])
def test_a_killed_tuner_leaves_no_build_or_run_worker(tmp_path: pathlib.Path, kind: str) -> None:
    (tmp_path / "busy.py").write_text(textwrap.dedent(_BUSY))
    marker = tmp_path / "busy"
    proc = subprocess.Popen([sys.executable, "-c", _TUNER, str(tmp_path), kind, str(marker)], text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    worker: list[tuple[int, str]] = []
    try:
        assert proc.stdout is not None
        pid = int(proc.stdout.readline())
        worker = [p for p in children(proc.pid) if p[0] == pid]
        assert worker, f"worker {pid} is not a child of the tuner"
        wait_for(marker.exists, f"the {kind} worker to run a call")  # busy in a call: not reading its pipe
        assert alive(worker[0])
        proc.kill()
        proc.wait(timeout=60)
        wait_for(lambda: not survivors(worker), f"the {kind} worker to die with the tuner")
    finally:
        kill_all(worker)
        proc.kill()
        proc.communicate()


# ---------------------------------------------------------------- 2. a failing import deletes nothing


def test_a_failing_import_never_deletes_a_file_another_process_imported_into(
        big_bad_log: pathlib.Path, tmp_path: pathlib.Path) -> None:
    db = tmp_path / "shared.sqlite"
    failing = msdb("import", db, big_bad_log)
    workers: list[tuple[int, str]] = []
    try:
        workers = parsing_workers(failing)  # the failing import is under way: it believes it creates db
        import_team(db, "team_a")  # another process creates db and imports into it meanwhile
        out, err = failing.communicate(timeout=300)
    finally:
        kill_all(workers)
        failing.kill()
    assert failing.returncode == 1 and "truncated JSON" in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["shared.sqlite"]
    assert records(db) == 128  # still there, with the other process's records


def test_two_imports_into_one_new_file_both_land(big_log: pathlib.Path, tmp_path: pathlib.Path) -> None:
    db = tmp_path / "shared.sqlite"
    first = msdb("import", db, big_log, new_session=True)
    workers: list[tuple[int, str]] = []
    try:
        workers = parsing_workers(first)
        stop_group(first.pid)  # the first import holds still, mid-way
        import_team(db, "team_c")  # the second one creates the file meanwhile (it waits for no lock)
        os.killpg(first.pid, signal.SIGCONT)
        out, err = first.communicate(timeout=300)
    finally:
        kill_all(workers)
        first.kill()
    assert first.returncode == 0, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["shared.sqlite"]
    assert records(db) == distinct_records(BIG) + 128  # both imports' records


# ---------------------------------------------------------------- 4. Ctrl-C


@pytest.mark.parametrize("existing", [False, True], ids=["new-file", "existing-db"])
def test_ctrl_c_while_parsing_says_nothing_was_imported(big_log: pathlib.Path, tmp_path: pathlib.Path,
                                                        existing: bool) -> None:
    db = tmp_path / "db.sqlite"
    if existing:
        import_team(db)
    proc = msdb("import", db, big_log, new_session=True)
    workers: list[tuple[int, str]] = []
    try:
        workers = parsing_workers(proc)
        stop_group(proc.pid)
        assert all(alive(w) for w in workers)  # stopped while parsing, so before the commit
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C: the whole foreground group gets it
        os.killpg(proc.pid, signal.SIGCONT)
        out, err = proc.communicate(timeout=300)
        wait_for(lambda: not survivors(workers), "the parsing workers to end")
    finally:
        kill_all(workers)
        proc.kill()
    assert (proc.returncode, out) == (130, "")
    assert [line for line in err.splitlines() if "import" in line] == ["Interrupted: nothing was imported."]
    assert "Traceback" not in err and "KeyboardInterrupt" not in err and "Aborted" not in err, err
    if existing:
        assert sorted(p.name for p in tmp_path.iterdir()) == ["db.sqlite"]
        assert records(db) == 128
    else:
        assert list(tmp_path.iterdir()) == []


def test_ctrl_c_after_the_commit_says_what_was_committed(tmp_path: pathlib.Path) -> None:
    """With --skip-bad the skipped lines are listed after the commit; a reader that does not
    read them holds the import there (a full pipe), where Ctrl-C then arrives."""
    wd = tmp_path / "wd"
    shutil.copytree(TEAMS["team_a"], wd)
    with open(wd / RECORD_FILE, "a") as handle:
        handle.write('[0,[[["GetSBlock"\n' * 20_000)  # about 2 MB of "skipped" lines: far more than a pipe holds
    db = tmp_path / "db.sqlite"
    proc = msdb("import", db, wd, "--skip-bad", new_session=True)
    try:
        assert proc.stderr is not None
        first = wait_for(lambda: (line := proc.stderr.readline()).endswith("(skipped)\n") or not line and "EOF",
                         "the first skipped line")
        assert first is True, "the import ended before listing its skipped lines"
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=300)
    finally:
        proc.kill()
    lines = [line for line in err.splitlines() if not line.endswith("(skipped)")]
    assert proc.returncode == 130 and out == ""
    assert len(lines) == 1 and lines[0].startswith("Interrupted after the import was committed: "), lines
    assert "128 new" in lines[0]
    assert records(db) == 128
