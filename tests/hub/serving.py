"""Shared by the hub's serve and browser tests: a team database made from the bundled TVM logs,
a publish directory made from it the way `msdb publish` lays one out, and a real `msdb serve`
subprocess on a free loopback port, polled until it answers (never slept on)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Iterator

import httpx
import pytest

import msdb
from msdb.hub.serve import MANIFEST_NAME, SNAPSHOT_NAME

ROOT = Path(__file__).resolve().parents[2]
TEAM_LOGS = ROOT / "examples" / "team_logs"
#: team -> the model its tasks are recorded under (team_a and team_b both tuned GMM).
MODELS = {"team_a": "resnet", "team_b": "bert", "team_c": "mobilenet"}


def make_team_db(path: Path, teams: tuple[str, ...] = ("team_a", "team_b", "team_c")) -> Path:
    """The bundled team logs imported into `path`, one model per team."""
    for team in teams:
        msdb.import_logs(str(path), [TEAM_LOGS / team], model=MODELS[team])
    return path


def make_publish_dir(db: Path, out: Path) -> Path:
    """A publish directory as `msdb publish` writes one (`snapshot.sqlite` beside
    `manifest.json`): a consistent copy through SQLite's backup API, in rollback-journal mode."""
    out.mkdir(parents=True)
    snapshot = out / SNAPSHOT_NAME
    with contextlib.closing(sqlite3.connect(db)) as src, contextlib.closing(sqlite3.connect(snapshot)) as dst:
        src.backup(dst)
        dst.execute("PRAGMA journal_mode=DELETE")
    digest = hashlib.sha256(snapshot.read_bytes()).hexdigest()
    (out / MANIFEST_NAME).write_text(json.dumps({"snapshot": SNAPSHOT_NAME, "sha256": digest}) + "\n")
    return out


def free_port() -> int:
    with contextlib.closing(socket.socket()) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def running_server(command: Callable[[int], list[str]], log: Path, what: str,
                   timeout: float = 60.0) -> Iterator[str]:
    """`command(port)` in a subprocess; yields its base URL (no trailing slash) once
    `/-/versions.json` answers. A port taken between choosing and binding (the server then
    exits) is retried on another. The server is stopped (SIGTERM, then SIGKILL) on exit."""
    for _attempt in range(3):
        port = free_port()
        with open(log, "w") as err:
            proc = subprocess.Popen(command(port), stdout=subprocess.DEVNULL, stderr=err, cwd=ROOT)
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + timeout
        try:
            while proc.poll() is None:
                try:
                    if httpx.get(f"{base}/-/versions.json", timeout=2).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    pytest.fail(f"{what} did not answer within {timeout:g} s: {log.read_text()}")
                time.sleep(0.02)  # poll interval, not synchronization
            if proc.poll() is not None:
                if "address already in use" in log.read_text().lower():
                    continue
                pytest.fail(f"{what} exited with {proc.returncode}: {log.read_text()}")
            yield base
            return
        finally:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
    pytest.fail(f"{what} found no free port in 3 tries")


@contextlib.contextmanager
def running_hub(path: Path, log: Path, timeout: float = 60.0) -> Iterator[str]:
    """`msdb serve PATH --port P` (see `running_server`)."""
    with running_server(lambda port: [sys.executable, "-m", "msdb.cli.main", "serve", str(path), "--port", str(port)],
                        log, "msdb serve", timeout) as base:
        yield base
