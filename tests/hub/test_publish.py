"""`msdb publish`: a snapshot without private provenance, a manifest that matches it, atomic
writes, and the printed command serving it read-only."""

from __future__ import annotations

import importlib
import json
import shlex
import sqlite3
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from click.testing import CliRunner

import msdb
from msdb.cli.main import cli
from msdb.database.errors import DatabaseError
from msdb.hub.publish import MANIFEST_NAME, METADATA_NAME, SNAPSHOT_NAME, file_sha256, publish
from tests.hub.hubs import ROOT, contents, hub_server
from tests.hub.serving import free_port

publish_module = importlib.import_module("msdb.hub.publish")

SECRET_USER = "alice-very-private"
SECRET_HOST = "gpu-box-17.secret.lab"


@pytest.fixture(scope="module")
def team_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("team") / "team.sqlite"
    for team in ("team_a", "team_b", "team_c"):
        msdb.import_logs(str(path), [ROOT / "examples" / "team_logs" / team], user=SECRET_USER, host=SECRET_HOST,
                         model=f"model_{team}")
    return path


def test_publish_leaves_no_private_provenance(team_db: Path, tmp_path: Path) -> None:
    out = tmp_path / "hub"
    publish(team_db, out)
    snapshot = out / SNAPSHOT_NAME
    with sqlite3.connect(snapshot) as conn:
        rows = conn.execute("SELECT kind, username, host, location, tvm_version FROM source").fetchall()
    assert rows and all(row[1:4] == (None, None, None) for row in rows)
    assert {row[0] for row in rows} == {"import"} and all(row[4] for row in rows)
    data = snapshot.read_bytes()
    for secret in (SECRET_USER, SECRET_HOST, str(ROOT), "team_logs"):
        assert secret.encode() not in data, secret  # not even in free pages
    # everything else is the database's
    assert contents(snapshot) == contents(team_db)


def test_keep_provenance_keeps_it(team_db: Path, tmp_path: Path) -> None:
    out = tmp_path / "hub"
    publish(team_db, out, keep_provenance=True)
    with sqlite3.connect(out / SNAPSHOT_NAME) as conn:
        rows = conn.execute("SELECT username, host, location FROM source").fetchall()
    assert rows and all(row[0] == SECRET_USER and row[1] == SECRET_HOST and "team_logs" in row[2] for row in rows)
    assert json.loads((out / MANIFEST_NAME).read_text())["provenance"] == "kept"


def test_manifest_matches_the_snapshot(team_db: Path, tmp_path: Path) -> None:
    out = tmp_path / "hub"
    result = publish(team_db, out)
    manifest = json.loads((out / MANIFEST_NAME).read_text())
    assert manifest == result.manifest
    assert manifest["sha256"] == file_sha256(out / SNAPSHOT_NAME)
    assert manifest["msdb_version"] == msdb.__version__
    from msdb.schema import HEAD

    assert manifest["schema_revision"] == HEAD
    with sqlite3.connect(team_db) as conn:
        expected = {table: conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
                    for table in ("workload", "tuning_record", "target", "source", "model", "task")}
    assert manifest["counts"] == expected and expected["tuning_record"] == 384 and expected["task"] > 0
    metadata = json.loads((out / METADATA_NAME).read_text())
    assert metadata["msdb_manifest"] == manifest
    # the snapshot is a rollback-journal file nobody writes: servable immutable
    with sqlite3.connect(out / SNAPSHOT_NAME) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"


def test_publish_is_atomic(team_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "hub"
    publish(team_db, out)
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    def broken(_source: Path) -> dict:
        raise OSError("disk full")

    monkeypatch.setattr(publish_module, "_metadata", broken)
    with pytest.raises(OSError, match="disk full"):
        publish(team_db, out)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hub"]  # no staging folder left
    monkeypatch.undo()
    # a folder that is not a publish directory is refused, untouched
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    with pytest.raises(DatabaseError, match="not an earlier publish directory"):
        publish(team_db, other)
    assert [p.name for p in other.iterdir()] == ["notes.txt"]


@pytest.mark.slow
def test_cli_prints_the_command_that_serves_it_read_only(team_db: Path, tmp_path: Path) -> None:
    out = tmp_path / "hub"
    result = CliRunner().invoke(cli, ["publish", str(team_db), str(out)])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    sha = json.loads((out / MANIFEST_NAME).read_text())["sha256"]
    assert lines[0] == f"published 384 records of 5 workloads to {out} (sha256 {sha})"
    assert lines[1] == "serve it with:"
    command = shlex.split(lines[2])
    assert command == ["msdb", "serve", str(out)]  # the command the user guide recommends
    # run exactly that command (on a free port) and check it serves read-only
    port = free_port()
    log = tmp_path / "serve.log"
    with open(log, "w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "msdb.cli.main", *command[1:], "--port", str(port)],
                                stdout=subprocess.DEVNULL, stderr=err)
    try:
        base = f"http://127.0.0.1:{port}/"
        import time

        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(base + "-/databases.json", timeout=2) as response:
                    databases = json.load(response)
                break
            except OSError:
                assert proc.poll() is None, log.read_text()
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.02)  # poll interval
        assert databases[0]["hash"] == sha and databases[0]["is_mutable"] is False
        with urllib.request.urlopen(base + "snapshot/tuning_record.json?_shape=array&_size=1", timeout=5) as response:
            assert len(json.load(response)) == 1
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(base + "snapshot.json?sql=select+1", timeout=5)
        assert refused.value.code in (400, 403)
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.mark.slow
def test_msdb_serve_serves_the_manifest(team_db: Path, tmp_path: Path) -> None:
    out = tmp_path / "hub"
    publish(team_db, out)
    with hub_server(out, tmp_path / "serve.log") as base:
        with urllib.request.urlopen(base + "-/metadata.json", timeout=5) as response:
            metadata = json.load(response)
        with urllib.request.urlopen(base + "-/databases.json", timeout=5) as response:
            databases = json.load(response)
    assert metadata["msdb_manifest"]["sha256"] == databases[0]["hash"] == file_sha256(out / SNAPSHOT_NAME)


def test_publish_drops_live_tuners_claims(team_db: Path, tmp_path: Path) -> None:
    """A claim is a running tuner's note that it is measuring a candidate (msdb.database.claims):
    the database keeps it, the published snapshot does not, and the browser hides the table."""
    from msdb.database.sql import SQLiteDatabase
    from msdb.hub.metadata import HIDDEN_TABLES

    live = tmp_path / "live.sqlite"
    live.write_bytes(team_db.read_bytes())
    db = SQLiteDatabase(str(live))
    try:
        workload = db.get_all_tuning_records()[0].workload
        assert db.claim_candidates(workload, "llvm -num-cores=1", ["k1", "k2"], owner="tuner-a") == {"k1", "k2"}
    finally:
        db.close()
    with sqlite3.connect(live) as conn:
        assert conn.execute("SELECT count(*) FROM measurement_claim").fetchone()[0] == 2
    out = tmp_path / "hub"
    publish(live, out)
    with sqlite3.connect(out / SNAPSHOT_NAME) as conn:
        assert conn.execute("SELECT count(*) FROM measurement_claim").fetchone()[0] == 0
    assert "measurement_claim" in HIDDEN_TABLES
