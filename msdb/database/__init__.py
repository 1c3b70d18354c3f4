"""Tuning databases (docs/architecture.md, "Databases"): TVM MetaSchedule's `Database`
interface over several stores, with target-aware queries, and every operation that reads or
writes msdb's SQL tables.

Views:
- `MemoryDatabase`: in memory.
- `JSONDatabase`: TVM's two-file work_dir layout (reads any TVM generation through the one TVM
  line grammar, writes what TVM 0.27 loads, appends under a file lock).
- `SQLiteDatabase` (also `SQLDatabase`): SQLAlchemy (SQLite file by default, any URL:
  PostgreSQL for a team server), schema from the Alembic migrations in `msdb.schema`; loaded
  lazily because it imports SQLAlchemy.
- `UnionDatabase`, `OrderedUnionDatabase`: several databases read as one.
- `ScheduleFnDatabase`: answers from a schedule function.
- `TransferDatabase`: answers a workload nobody tuned with its relatives' records re-fitted to
  it (`transfer`).

`Database.create(kind)` builds any of them; `with db:` makes `Database.current()` return it.

Whole-database operations (modules of this package, loaded lazily; the `msdb` commands call
them): `open_database` (`location`), `import_tvm` / `import_logs` (`tvm_import`),
`export_workdir` (`tvm_export`), `merge_databases` (`merge`), `prune` and `migrate`
(`maintain`; the latter not as a package attribute, which names the `migrate` module), `verify_database` (`verify`), `list_workloads` / `show_workload` (`catalog`).
They share the row helpers of `msdb.database.rows` and `msdb.database.targets`: one way to
write and find each kind of row.
"""

from __future__ import annotations

from msdb.lazy import lazy_getattr

from typing import Any

from msdb.database.base import Database, Relative, create
from msdb.database.errors import (
    BadRecordLine, DatabaseError, DatabaseOpenError, InvalidQuery, ReadOnlyDatabase, SchemaVersionError,
    UnknownDatabaseKind, UnsupportedOperation, WorkloadNotCommitted,
)
from msdb.database.json_database import JSONDatabase
from msdb.database.memory import MemoryDatabase
from msdb.database.schedule_fn import ScheduleFnDatabase
from msdb.database.union import OrderedUnionDatabase, UnionDatabase

#: Names loaded on first use (they import SQLAlchemy): name -> module.
_LAZY = {
    "SQLiteDatabase": "msdb.database.sql",
    "SQLDatabase": "msdb.database.sql",
    "open_database": "msdb.database.location",
    "import_tvm": "msdb.database.tvm_import",
    "import_logs": "msdb.database.tvm_import",
    "export_workdir": "msdb.database.tvm_export",
    "merge_databases": "msdb.database.merge",
    "prune": "msdb.database.maintain",
    "verify_database": "msdb.database.verify",
    "list_workloads": "msdb.database.catalog",
    "show_workload": "msdb.database.catalog",
    "TransferDatabase": "msdb.database.transfer",
}

__all__ = [
    "Database", "Relative", "create", "MemoryDatabase", "JSONDatabase", "UnionDatabase", "OrderedUnionDatabase",
    "ScheduleFnDatabase", "DatabaseError", "DatabaseOpenError", "ReadOnlyDatabase", "SchemaVersionError",
    "WorkloadNotCommitted", "UnsupportedOperation", "UnknownDatabaseKind", "InvalidQuery", "BadRecordLine", *_LAZY,
]


__getattr__ = lazy_getattr(__name__, _LAZY, globals())
