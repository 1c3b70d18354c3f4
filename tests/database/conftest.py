"""One fixture, `view`, builds every kind of database view the behavioural suite runs on."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import pytest

from msdb.database import (
    Database, JSONDatabase, MemoryDatabase, OrderedUnionDatabase, SQLiteDatabase, UnionDatabase,
)

VIEW_KINDS = ("memory", "json", "sqlite", "union", "ordered_union")


class ViewFactory:
    """Opens views of one kind over storage in `tmp_path`; `reopen()` opens the same storage again
    (None for in-memory kinds)."""

    def __init__(self, kind: str, tmp_path: Path) -> None:
        self.kind = kind
        self.tmp_path = tmp_path
        self.opened: list[Database] = []

    def __call__(self, module_equality: str = "structural", name: str = "db") -> Database:
        path = self.tmp_path / name
        if self.kind == "memory":
            db: Database = MemoryDatabase(module_equality)
        elif self.kind == "json":
            db = JSONDatabase(work_dir=path, module_equality=module_equality)
        elif self.kind == "sqlite":
            db = SQLiteDatabase(str(path) + ".sqlite", module_equality=module_equality)
        elif self.kind == "union":
            db = UnionDatabase(MemoryDatabase(module_equality))
        else:
            db = OrderedUnionDatabase(SQLiteDatabase(str(path) + ".sqlite", module_equality=module_equality))
        self.opened.append(db)
        return db

    def close(self) -> None:
        for db in self.opened:
            db.close()


@pytest.fixture(params=VIEW_KINDS)
def view(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[..., Database]:
    factory = ViewFactory(request.param, tmp_path)
    yield factory
    factory.close()


PERSISTENT_KINDS = tuple(kind for kind in VIEW_KINDS if kind in ("json", "sqlite", "ordered_union"))


@pytest.fixture(params=PERSISTENT_KINDS)
def persistent_view(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[..., Database]:
    """The views whose records outlive the object: files on disk."""
    factory = ViewFactory(request.param, tmp_path)
    yield factory
    factory.close()
