"""Shared by the publish, pull and remote tests: team databases from the bundled logs, publish
directories made by `msdb.hub.publish`, real hub servers in subprocesses on free loopback ports
(polled until they answer, never slept on), fake hubs that misbehave, and a comparison of two
databases' contents."""

from __future__ import annotations

import contextlib
import hashlib
import http.server
import shutil
import socket
import sqlite3
import sys
import threading
from pathlib import Path
from typing import Any, Iterator

import pytest

from msdb.hub.publish import METADATA_NAME, SNAPSHOT_NAME, publish
from tests.hub.serving import ROOT, make_team_db, running_server

__all__ = ["ROOT", "make_team_db", "published", "hub_server", "contents", "file_digest", "fake_hub", "loopback_server",
           "SERVERS"]

#: How a test serves a publish directory: `msdb serve DIR` (msdb's metadata and canned queries,
#: the manifest in the metadata), the command `msdb publish` prints (datasette with the
#: metadata.json it wrote), or bare datasette (no metadata at all: table JSON only).
SERVERS = ("msdb-serve", "datasette-printed", "datasette-bare")


def published(db: Path, out: Path, **options: Any) -> Path:
    """`msdb publish DB OUT` (an earlier publish in OUT is replaced)."""
    publish(db, out, **options)
    return out


def _command(kind: str, outdir: Path, port: int) -> list[str]:
    if kind == "msdb-serve":
        return [sys.executable, "-m", "msdb.cli.main", "serve", str(outdir), "--port", str(port)]
    base = [sys.executable, "-m", "datasette", "serve", "-i", str(outdir / SNAPSHOT_NAME), "--setting",
            "default_allow_sql", "off", "-h", "127.0.0.1", "-p", str(port)]
    if kind == "datasette-printed":
        base += ["-m", str(outdir / METADATA_NAME)]
    return base


@contextlib.contextmanager
def hub_server(outdir: Path, log: Path, kind: str = "msdb-serve", timeout: float = 60.0) -> Iterator[str]:
    """A hub serving the publish directory `outdir` in a subprocess (`SERVERS`); yields its base
    URL (with a trailing slash) once it answers; stopped on exit."""
    with running_server(lambda port: _command(kind, outdir, port), log, kind, timeout) as base:
        yield base + "/"


def contents(path: Path) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """What a database holds, independent of row ids and provenance: its workloads, its records
    (by workload hash and target config) and its models' tasks, each sorted."""
    with contextlib.closing(sqlite3.connect(path)) as conn:
        workloads = sorted(conn.execute(
            "SELECT shash, ignore_tensor_hash, anchor_hash, name, flops, script, ir_format, ir_blob, tvm_payload, "
            "tvm_shash FROM workload"))
        records = sorted(conn.execute(
            "SELECT w.shash, t.config, r.trace, r.trace_hash, r.run_secs, r.mean_run_secs, r.is_valid, r.args_info "
            "FROM tuning_record r JOIN workload w ON w.id = r.workload_id JOIN target t ON t.id = r.target_id"))
        tasks = sorted(conn.execute(
            "SELECT m.name, k.name, w.shash, k.weight FROM task k JOIN model m ON m.id = k.model_id "
            "JOIN workload w ON w.id = k.workload_id"))
    return workloads, records, tasks


def file_digest(path: Path) -> str | None:
    """sha256 of a database file and its WAL (None when missing): unchanged means unchanged."""
    if not path.exists():
        return None
    digest = hashlib.sha256(path.read_bytes())
    wal = path.with_name(path.name + "-wal")
    if wal.exists():
        digest.update(wal.read_bytes())
    return digest.hexdigest()


class _Fake(http.server.BaseHTTPRequestHandler):
    mode = "html"
    release: threading.Event  # set by `fake_hub`

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        if self.mode == "silent":
            self.release.wait(30)
            return
        if self.mode == "html":
            body, kind = b"<html><body><h1>Welcome to nginx!</h1></body></html>", "text/html; charset=utf-8"
        elif self.mode == "wrong-json":
            body, kind = b'{"ok": true, "rows": "not a list"}', "application/json"
        else:
            body, kind = b'[{"name": "other", "hash": null}]', "application/json"
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@contextlib.contextmanager
def loopback_server(handler: type[http.server.BaseHTTPRequestHandler], release: threading.Event) -> Iterator[str]:
    """`handler` served from a thread on a free loopback port; yields the base URL. On the way
    out `release` is set first, so that handlers holding a request open (a silent or trickling
    fake hub) return, then the server stops."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        release.set()
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def fake_hub(mode: str) -> Iterator[str]:
    """An HTTP server on a free loopback port that is no hub: `html` (a web page), `wrong-json`
    (JSON of another shape), `no-msdb` (a datasette-like list without msdb's tables), `silent`
    (accepts, never answers). Yields its base URL."""
    release = threading.Event()
    with loopback_server(type(f"_Fake_{mode}", (_Fake,), {"mode": mode, "release": release}), release) as url:
        yield url


def down_url() -> str:
    """A loopback URL nothing listens on."""
    with contextlib.closing(socket.socket()) as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/"


def copy_db(src: Path, dest: Path) -> Path:
    shutil.copyfile(src, dest)
    return dest
