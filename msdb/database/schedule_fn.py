"""`ScheduleFnDatabase`: answers queries by running a schedule function (TVM's), storing nothing.

`fn(sch) -> bool` schedules `sch` in place; it sees the module with the attribute `task_name` set
to the query's `workload_name` so it can tell tasks apart, and returns False for "no answer".
Used as the last layer of an `OrderedUnionDatabase` to fall back to a hand-written schedule.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from msdb.database.base import Database
from msdb.database.errors import UnsupportedOperation
from msdb.records import Target, TuningRecord, Workload

if TYPE_CHECKING:
    from msdb.ir.function import IRModule, PrimFunc
    from msdb.schedule import Schedule

__all__ = ["ScheduleFnDatabase"]


class ScheduleFnDatabase(Database):
    """A database whose answers come from `schedule_fn(sch)`."""

    def __init__(self, schedule_fn: Callable[[Schedule], bool], module_equality: str = "structural") -> None:
        if not callable(schedule_fn):
            raise TypeError(f"ScheduleFnDatabase needs a callable, got {type(schedule_fn).__name__}")
        super().__init__(module_equality)
        self.schedule_fn = schedule_fn

    def query_schedule(self, mod: IRModule | PrimFunc | Workload, target: Target | str | dict[str, Any] | None,
                       workload_name: str = "main") -> Schedule | None:
        from msdb.ir.function import IRModule
        from msdb.schedule import Schedule

        module = Workload.coerce(mod).mod
        attrs = dict(module.attrs)
        attrs["task_name"] = workload_name
        sch = Schedule(IRModule(module.functions, attrs))
        if self.schedule_fn(sch) is False:
            return None
        return sch

    def query_tuning_record(self, mod: IRModule | PrimFunc | Workload, target: Target | str | dict[str, Any] | None,
                            workload_name: str = "main") -> TuningRecord | None:
        """A record of the function's trace (no run times, so not valid by TVM's rule)."""
        sch = self.query_schedule(mod, target, workload_name)
        if sch is None:
            return None
        return TuningRecord(sch.trace, Workload.coerce(mod), None, Target.coerce(target), None)

    def has_workload(self, mod: IRModule | PrimFunc | Workload) -> bool:
        """Stores nothing, so has no workload."""
        return False

    def commit_workload(self, mod: IRModule | PrimFunc | Workload) -> Workload:
        raise UnsupportedOperation("a ScheduleFnDatabase stores nothing; commit to a MemoryDatabase, JSONDatabase or SQLiteDatabase")

    def commit_tuning_record(self, record: TuningRecord) -> None:
        raise UnsupportedOperation("a ScheduleFnDatabase stores nothing; commit to a MemoryDatabase, JSONDatabase or SQLiteDatabase")

    def _top_k(self, workload: Workload, top_k: int, target: Target | None) -> list[TuningRecord]:
        return []

    def get_all_tuning_records(self) -> list[TuningRecord]:
        return []

    def __len__(self) -> int:
        return 0
