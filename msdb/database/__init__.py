"""Tuning databases: TVM MetaSchedule's `Database` interface over several stores, with
target-aware queries, and the whole-database operations on msdb's SQL tables.

Views: `MemoryDatabase`, `JSONDatabase`, `SQLiteDatabase` (also `SQLDatabase`), `UnionDatabase`,
`OrderedUnionDatabase`, `ScheduleFnDatabase`, `TransferDatabase`; `Database.create(kind)` builds
any of them. The operations (`open_database`, `import_tvm`, `merge_databases`, ...) and the SQL
view load lazily; `msdb.database.migrate` is the module, not `maintain.migrate`. See
docs/architecture.md, "Databases".
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
