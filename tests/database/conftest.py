"""One fixture, `view`, builds every kind of database view the behavioural suite runs on, SQLite
and PostgreSQL included (`postgres`: a fresh database on the session's throwaway server,
tests/postgres_server.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterator

import pytest

from msdb.database import Database

from ..postgres_server import PostgresServer

VIEW_KINDS = ("memory", "json", "sqlite", "postgres", "union", "ordered_union")


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """One throwaway PostgreSQL server for the session, started on first use. PostgreSQL is part
    of the test set-up (README, .ci/run), as chromium is: a missing one fails, never skips."""
    server = PostgresServer.start()
    if server is None:
        pytest.fail("PostgreSQL is not installed (no initdb): `apt-get update && apt-get install -y postgresql` "
                    "(the README's test command and .ci/run do it)")
    yield server
    server.stop()


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> str:
    """A fresh, empty database on the session's PostgreSQL server."""
    return postgres_server.url()


class ViewFactory:
    """Opens views of one kind over storage in `tmp_path`; `reopen()` opens the same storage again
    (None for in-memory kinds)."""

    def __init__(self, kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
        self.kind = kind
        self.tmp_path = tmp_path
        self.request = request
        self.opened: list[Database] = []
        self.urls: dict[str, str] = {}

    def __call__(self, module_equality: str = "structural", name: str = "db") -> Database:
        """A view made by `Database.create`, the one way msdb makes a view by kind."""
        path = self.tmp_path / name
        if self.kind == "memory":
            db = Database.create("memory", module_equality)
        elif self.kind == "json":
            db = Database.create("json", work_dir=path, module_equality=module_equality)
        elif self.kind == "union":
            db = Database.create("union", Database.create("memory", module_equality))
        elif self.kind == "ordered_union":
            db = Database.create("ordered_union", Database.create("sqlite", self._location(name),
                                                                  module_equality=module_equality))
        else:  # "sqlite" or "postgres": one SQL view, at a file or at a server's URL
            db = Database.create("sqlite", self._location(name), module_equality=module_equality)
        self.opened.append(db)
        return db

    def _location(self, name: str) -> str:
        """Where the SQL storage named `name` lives: a file in `tmp_path`, or for `postgres` a
        fresh database on the session's server (the same one each time `name` is asked for)."""
        if self.kind != "postgres":
            return str(self.tmp_path / name) + ".sqlite"
        if name not in self.urls:
            self.urls[name] = self.request.getfixturevalue("postgres_server").url()
        return self.urls[name]

    def close(self) -> None:
        for db in self.opened:
            db.close()


@pytest.fixture(params=VIEW_KINDS)
def view(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[..., Database]:
    factory = ViewFactory(request.param, tmp_path, request)
    yield factory
    factory.close()


PERSISTENT_KINDS = tuple(kind for kind in VIEW_KINDS if kind in ("json", "sqlite", "postgres", "ordered_union"))


@pytest.fixture(params=PERSISTENT_KINDS)
def persistent_view(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[..., Database]:
    """The views whose records outlive the object: files on disk."""
    factory = ViewFactory(request.param, tmp_path, request)
    yield factory
    factory.close()
