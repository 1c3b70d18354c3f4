"""msdb: a SQLite-backed, TVM-compatible tuning database and record-sharing hub.

The names a TVM MetaSchedule user reaches for are here, as in `tvm.s_tir.meta_schedule`:

    from msdb import SQLiteDatabase, TuningRecord, Workload, Target, Schedule, Trace

Importing this package stays cheap (docs/benchmarks.md: `import msdb` < 300 ms): every name
below loads its module on first use (PEP 562), and llvmlite, xgboost, pycuda and datasette load
only inside the modules that need them. docs/architecture.md maps the packages behind them.
"""

from __future__ import annotations

from msdb.lazy import lazy_getattr

from typing import TYPE_CHECKING, Any

from msdb.version import __version__

#: Public name -> the module that defines it, imported on first use.
_LAZY: dict[str, str] = {
    # databases (msdb.database)
    "Database": "msdb.database.base",
    "MemoryDatabase": "msdb.database.memory",
    "JSONDatabase": "msdb.database.json_database",
    "SQLiteDatabase": "msdb.database.sql",
    "SQLDatabase": "msdb.database.sql",
    "UnionDatabase": "msdb.database.union",
    "OrderedUnionDatabase": "msdb.database.union",
    "ScheduleFnDatabase": "msdb.database.schedule_fn",
    "open_database": "msdb.database.location",
    "import_logs": "msdb.database.tvm_import",
    "export_workdir": "msdb.database.tvm_export",
    "merge_databases": "msdb.database.merge",
    "RemoteDatabase": "msdb.hub.remote",  # a hub as a read-only view (docs/architecture.md, "Hub")
    # records (msdb.records)
    "TuningRecord": "msdb.records.record",
    "ArgInfo": "msdb.records.record",
    "Workload": "msdb.records.workload",
    "Target": "msdb.records.target",
    # IR, schedules, hashing
    "IRModule": "msdb.ir.function",
    "PrimFunc": "msdb.ir.function",
    "Schedule": "msdb.schedule.schedule",
    "Trace": "msdb.schedule.trace",
    "structural_hash": "msdb.hashing.api",
    "structural_equal": "msdb.hashing.api",
    # errors
    "MsdbError": "msdb.errors",
}

__all__ = ["__version__", *_LAZY]

if TYPE_CHECKING:
    from msdb.database.base import Database
    from msdb.database.json_database import JSONDatabase
    from msdb.database.location import open_database
    from msdb.database.memory import MemoryDatabase
    from msdb.database.merge import merge_databases
    from msdb.database.schedule_fn import ScheduleFnDatabase
    from msdb.database.sql import SQLDatabase, SQLiteDatabase
    from msdb.database.tvm_export import export_workdir
    from msdb.database.tvm_import import import_logs
    from msdb.database.union import OrderedUnionDatabase, UnionDatabase
    from msdb.errors import MsdbError
    from msdb.hashing.api import structural_equal, structural_hash
    from msdb.hub.remote import RemoteDatabase
    from msdb.ir.function import IRModule, PrimFunc
    from msdb.records.record import ArgInfo, TuningRecord
    from msdb.records.target import Target
    from msdb.records.workload import Workload
    from msdb.schedule.schedule import Schedule
    from msdb.schedule.trace import Trace


__getattr__ = lazy_getattr(__name__, _LAZY, globals())


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
