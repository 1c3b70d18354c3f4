"""`msdb pull`: a hub pulled into an empty database equals a local import of the same logs;
pulling is incremental, resumable after a kill, and a bad hub changes nothing.
Every hub here is a real server subprocess serving a real `msdb publish` directory."""

from __future__ import annotations

import importlib
import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from msdb.cli.main import cli
from msdb.hub.client import HubError
from msdb.hub.publish import METADATA_NAME, SNAPSHOT_NAME
from tests.hub.hubs import (
    ROOT, SERVERS, contents, copy_db, down_url, fake_hub, file_digest, hub_server, make_team_db, published,
)

pull_module = importlib.import_module("msdb.hub.pull")
pull = pull_module.pull


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The bundled team logs imported locally (with a model per team), and published."""
    root = tmp_path_factory.mktemp("team")
    db = make_team_db(root / "team.sqlite")
    return db, published(db, root / "hub")


def _pull_sources(db: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT kind, location FROM source WHERE kind = 'pull'").fetchall()


@pytest.mark.slow
@pytest.mark.parametrize("server", SERVERS)
def test_pull_equals_local_import_and_again_adds_nothing(team: tuple[Path, Path], tmp_path: Path,
                                                         server: str) -> None:
    db, hub = team
    local = tmp_path / "pulled.sqlite"
    with hub_server(hub, tmp_path / "serve.log", server) as url:
        summary = pull(url, local)
        assert (summary.records_read, summary.records_new, summary.records_duplicate) == (384, 384, 0)
        assert summary.workloads_new == 5 and summary.after == 384 and summary.tasks_added > 0
        assert contents(local) == contents(db)
        assert _pull_sources(local) == [("pull", f"{url}#after=384")]
        with sqlite3.connect(local) as conn:
            assert conn.execute("SELECT count(DISTINCT source_id) FROM tuning_record").fetchone()[0] == 1
        before = file_digest(local)
        again = pull(url, local)
        assert (again.records_read, again.records_new, again.pages, again.tasks_added) == (0, 0, 0, 0)
        assert file_digest(local) == before


@pytest.mark.slow
def test_pull_fetches_only_new_records(tmp_path: Path) -> None:
    hub_db = make_team_db(tmp_path / "hub.sqlite", ("team_a",))
    hub = published(hub_db, tmp_path / "hub")
    local = tmp_path / "pulled.sqlite"
    with hub_server(hub, tmp_path / "serve1.log") as url:
        first = pull(url, local)
    assert first.records_new == first.records_read == 128
    # records added on the hub side, republished, served again at the same URL
    make_team_db(hub_db, ("team_b", "team_c"))
    published(hub_db, hub)
    with sqlite3.connect(hub_db) as conn:
        total = conn.execute("SELECT count(*) FROM tuning_record").fetchone()[0]
    port = int(url.rsplit(":", 1)[1].strip("/"))
    _serve_on(hub, port, tmp_path, lambda url2: _check_incremental(url2, url, local, total - 128))
    assert contents(local) == contents(hub_db)


def _check_incremental(url: str, old_url: str, db: Path, new: int) -> None:
    assert url == old_url
    summary = pull(url, db)
    assert (summary.records_read, summary.records_new, summary.records_duplicate) == (new, new, 0)
    assert _pull_sources(db) == [("pull", f"{url}#after={summary.after}")]


def _serve_on(outdir: Path, port: int, tmp_path: Path, check) -> None:
    """`msdb serve OUTDIR --port PORT` (the port a previous server used), polled, then `check(url)`."""
    import urllib.request

    log = tmp_path / f"serve-{port}.log"
    with open(log, "w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "msdb.cli.main", "serve", str(outdir), "--port", str(port)],
                                stdout=subprocess.DEVNULL, stderr=err, cwd=ROOT)
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(url + "-/versions.json", timeout=2).close()
                break
            except OSError:
                if proc.poll() is not None and "address already in use" in log.read_text().lower():
                    pytest.skip("the port was taken by another process meanwhile")
                assert proc.poll() is None, log.read_text()
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.02)  # poll interval
        check(url)
    finally:
        proc.terminate()
        proc.wait(10)


_KILLABLE = """
import importlib, sys
pull = importlib.import_module("msdb.hub.pull")
pull.PAGE_SIZE = 50
pull.MERGE_RECORDS = 50
def progress(phase, done, total):
    print("committed", done, flush=True)
    sys.stdin.readline()  # wait here to be killed
pull.pull(sys.argv[1], sys.argv[2], progress=progress)
"""


@pytest.mark.slow
def test_killed_pull_resumes(team: tuple[Path, Path], tmp_path: Path) -> None:
    db, hub = team
    local = tmp_path / "pulled.sqlite"
    with hub_server(hub, tmp_path / "serve.log") as url:
        proc = subprocess.Popen([sys.executable, "-c", _KILLABLE, url, str(local)], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()  # the first page is committed
            assert line.strip() == "committed 50", proc.stderr.read() if proc.stderr else ""
            deadline = time.monotonic() + 30
            while _pull_sources(local) != [("pull", f"{url}#after=50")]:  # poll the DB
                assert time.monotonic() < deadline
                time.sleep(0.02)
            proc.kill()
            proc.wait(10)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        with sqlite3.connect(local) as conn:
            assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
            assert conn.execute("SELECT count(*) FROM tuning_record").fetchone()[0] == 50
        rest = pull(url, local)
        assert (rest.records_read, rest.records_new) == (384 - 50, 384 - 50)
    assert contents(local) == contents(db)


@pytest.fixture
def existing(team: tuple[Path, Path], tmp_path: Path) -> Path:
    """A local database with data in it, to show a failed pull leaves it unchanged."""
    return copy_db(team[0], tmp_path / "local.sqlite")


def _refused(url: str, db: Path, match: str, **options: object) -> None:
    before = file_digest(db)
    with pytest.raises(HubError, match=match) as error:
        pull(url, db, **options)
    assert url.rstrip("/") in str(error.value) and "\n" not in str(error.value)
    assert file_digest(db) == before


@pytest.mark.slow
@pytest.mark.parametrize("mode, match", [
    ("down", "cannot be reached"), ("html", "text/html, not JSON"), ("wrong-json", "is not a list of databases"),
    ("no-msdb", "has a tuning_record table"), ("silent", "no answer within 0.5 s"),
])
def test_bad_hub_is_one_clear_error_and_changes_nothing(existing: Path, tmp_path: Path, mode: str,
                                                        match: str) -> None:
    options = {"timeout_s": 0.5} if mode == "silent" else {}
    if mode == "down":
        url = down_url()
        _refused(url, existing, match, **options)
        _refused(url, tmp_path / "new.sqlite", match, **options)
        assert not (tmp_path / "new.sqlite").exists()
        return
    with fake_hub(mode) as url:
        _refused(url, existing, match, **options)
        _refused(url, tmp_path / "new.sqlite", match, **options)
        assert not (tmp_path / "new.sqlite").exists()


@pytest.mark.slow
def test_checksum_mismatch_is_refused(team: tuple[Path, Path], existing: Path, tmp_path: Path) -> None:
    import shutil

    hub = tmp_path / "hub"
    shutil.copytree(team[1], hub)
    with sqlite3.connect(hub / SNAPSHOT_NAME) as conn:  # the snapshot changed after publishing
        conn.execute("DELETE FROM tuning_record WHERE id > 300")
    with hub_server(hub, tmp_path / "serve.log", "datasette-printed") as url:
        _refused(url, existing, "does not match its manifest")
    metadata = json.loads((hub / METADATA_NAME).read_text())
    assert metadata["msdb_manifest"]["sha256"] != ""


def test_cli_pull_prints_one_error_line(existing: Path) -> None:
    with fake_hub("html") as url:
        result = CliRunner().invoke(cli, ["pull", url, str(existing)])
    assert result.exit_code == 1
    assert result.output.count("\n") == 1 and result.output.startswith(f"Error: hub {url}: ")


@pytest.mark.slow
def test_cli_pull(team: tuple[Path, Path], tmp_path: Path) -> None:
    local = tmp_path / "pulled.sqlite"
    with hub_server(team[1], tmp_path / "serve.log") as url:
        result = CliRunner().invoke(cli, ["pull", url, str(local)])
    assert result.exit_code == 0, result.output
    assert result.output.startswith(f"{url}: 384 records read in 1 pages: 384 new, 0 duplicate; workloads: 5 new; "
                                    f"up to hub record 384;")
    assert contents(local) == contents(team[0])


@pytest.mark.slow
def test_records_another_writer_adds_meanwhile_stay_deduplicated(team: tuple[Path, Path], tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Between two batches of a pull, another writer commits a record the hub sends later: the
    pull learns it (`DedupCache.learn`) and does not store it twice."""
    db, hub = team
    local = tmp_path / "pulled.sqlite"
    monkeypatch.setattr(pull_module, "PAGE_SIZE", 50)
    monkeypatch.setattr(pull_module, "MERGE_RECORDS", 50)
    written: list[int] = []

    def other_writer(_phase: str, done: int, _total: int) -> None:
        if done != 200:
            return
        with sqlite3.connect(db) as hub_conn, sqlite3.connect(local) as conn:
            known = {row[0]: row[1] for row in conn.execute("SELECT shash, id FROM workload")}
            targets = {row[0]: row[1] for row in conn.execute("SELECT config, id FROM target")}
            for row in hub_conn.execute(
                    "SELECT r.id, w.shash, t.config, r.trace, r.trace_hash, r.run_secs, r.mean_run_secs, r.is_valid, "
                    "r.args_info FROM tuning_record r JOIN workload w ON w.id = r.workload_id "
                    "JOIN target t ON t.id = r.target_id WHERE r.id > 250 ORDER BY r.id"):
                if row[1] in known and row[2] in targets:
                    conn.execute("INSERT INTO tuning_record (workload_id, target_id, trace, trace_hash, run_secs, "
                                 "mean_run_secs, is_valid, args_info) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                                 (known[row[1]], targets[row[2]], *row[3:]))
                    written.append(row[0])
                    break

    with hub_server(hub, tmp_path / "serve.log") as url:
        summary = pull(url, local, progress=other_writer)
    assert written and summary.records_duplicate == 1 and summary.records_new == 383
    assert contents(local) == contents(db)
