"""Tuning databases (DESIGN.md section 5): TVM MetaSchedule's `Database` interface over several
stores, with target-aware queries.

- `MemoryDatabase`: in memory.
- `JSONDatabase`: TVM's two-file work_dir layout (reads any TVM generation, writes what TVM
  0.27 loads, appends under a file lock).
- `SQLiteDatabase`: SQLAlchemy (SQLite file by default, any URL), schema from the Alembic
  migrations in `msdb.schema`; loaded lazily because it imports SQLAlchemy.
- `UnionDatabase`, `OrderedUnionDatabase`: several databases read as one.
- `ScheduleFnDatabase`: answers from a schedule function.

`Database.create(kind)` builds any of them; `with db:` makes `Database.current()` return it.
"""

from __future__ import annotations

import importlib
from typing import Any

from msdb.database.base import Database, create
from msdb.database.errors import (
    BadRecordLine, DatabaseError, DatabaseOpenError, InvalidQuery, SchemaVersionError, UnknownDatabaseKind,
    UnsupportedOperation, WorkloadNotCommitted,
)
from msdb.database.json_database import JSONDatabase
from msdb.database.memory import MemoryDatabase
from msdb.database.schedule_fn import ScheduleFnDatabase
from msdb.database.union import OrderedUnionDatabase, UnionDatabase

__all__ = [
    "Database", "create", "MemoryDatabase", "JSONDatabase", "SQLiteDatabase", "UnionDatabase",
    "OrderedUnionDatabase", "ScheduleFnDatabase", "DatabaseError", "DatabaseOpenError", "SchemaVersionError",
    "WorkloadNotCommitted", "UnsupportedOperation", "UnknownDatabaseKind", "InvalidQuery", "BadRecordLine",
]


def __getattr__(name: str) -> Any:
    if name == "SQLiteDatabase":
        return importlib.import_module("msdb.database.sqlite").SQLiteDatabase
    raise AttributeError(f"module 'msdb.database' has no attribute {name!r}")
