"""A throwaway PostgreSQL server for the tests: Debian's `postgresql` package, a fresh
cluster in a temporary folder, run by an unprivileged user (PostgreSQL refuses root) on a
loopback port and a private socket folder; stopped and removed at the end. No mocks.

`PostgresServer.start()` returns None when no PostgreSQL binaries are installed; the tests then
fail (tests/database/conftest.py), as the browser test does without chromium: the README's
test command and .ci/run install the package.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

#: The user the server runs as when the tests run as root.
SERVER_USER = "nobody"


def _bin_dir() -> Path | None:
    found = shutil.which("initdb")
    if found:
        return Path(found).parent
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    return Path(candidates[-1]).parent if candidates else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PostgresServer:
    """One running throwaway cluster; `url(name)` creates a fresh database and returns its URL."""

    def __init__(self, bin_dir: Path, durable: bool = False) -> None:
        self.bin_dir = bin_dir
        self.durable = durable
        self.root = Path(tempfile.mkdtemp(prefix="msdb-pg-"))
        self.data = self.root / "data"
        self.sockets = self.root / "sockets"
        self.sockets.mkdir()
        self.port = _free_port()
        self.user = "msdb"
        self.process: subprocess.Popen[bytes] | None = None
        self._as: list[str] = []
        if os.geteuid() == 0:
            entry = pwd.getpwnam(SERVER_USER)
            for path in (self.root, self.sockets):
                os.chown(path, entry.pw_uid, entry.pw_gid)
            self._as = ["runuser", "-u", SERVER_USER, "--"]

    @classmethod
    def start(cls, *, durable: bool = False) -> PostgresServer | None:
        """A running server; `durable=True` keeps PostgreSQL's default fsync and commit
        settings (benchmarks), else they are off (a throwaway cluster for tests)."""
        bin_dir = _bin_dir()
        if bin_dir is None:
            return None
        server = cls(bin_dir, durable)
        try:
            server._init_and_run()
        except BaseException:
            server.stop()
            raise
        return server

    def _init_and_run(self) -> None:
        subprocess.run([*self._as, str(self.bin_dir / "initdb"), "-D", str(self.data), "-U", self.user,
                        "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C"],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        # fsync off unless durable: a throwaway cluster; max_connections for 8 writer processes and the pools
        fast = [] if self.durable else ["-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"]
        self.process = subprocess.Popen(
            [*self._as, str(self.bin_dir / "postgres"), "-D", str(self.data), "-k", str(self.sockets),
             "-p", str(self.port), "-h", "127.0.0.1", *fast, "-c", "max_connections=200"],
            stdout=subprocess.DEVNULL, stderr=open(self.root / "server.log", "wb"))
        deadline = time.monotonic() + 30
        while True:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", self.port)) == 0:
                    break
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"PostgreSQL did not start: {(self.root / 'server.log').read_text()[-2000:]}")
            time.sleep(0.05)
        # accepting TCP is not yet accepting logins: wait for a query to work
        while True:
            try:
                self.execute("SELECT 1")
                return
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def execute(self, sql: str, database: str = "postgres") -> None:
        import psycopg

        with psycopg.connect(host="127.0.0.1", port=self.port, user=self.user, dbname=database,
                             autocommit=True) as conn:
            conn.execute(sql)

    def url(self, name: str | None = None) -> str:
        """A new, empty database on the server, as a `postgresql+psycopg://` URL."""
        name = name or "t_" + uuid.uuid4().hex[:12]
        self.execute(f'CREATE DATABASE "{name}"')
        return f"postgresql+psycopg://{self.user}@127.0.0.1:{self.port}/{name}"

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            # fast shutdown (clients disconnected) by the server's own user: runuser stands between
            subprocess.run([*self._as, str(self.bin_dir / "pg_ctl"), "-D", str(self.data), "stop", "-m", "fast",
                            "-w", "-t", "30"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.root, ignore_errors=True)
