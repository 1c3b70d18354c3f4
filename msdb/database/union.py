"""`UnionDatabase` and `OrderedUnionDatabase`: several databases read as one.

TVM's unions only answer queries. msdb's also answer `has_workload`, `get_top_k`,
`get_all_tuning_records` and `len`, so a local database layered over a shared one
(`OrderedUnionDatabase(local, shared)`) can seed a tuner too, and commits go to the first child
(the writable, local layer). Every child filters by target itself, so a union of a CPU and a
GPU database never answers a CPU query with a GPU record (apache/tvm#15549).

- `UnionDatabase(*dbs)`: every child is asked; the best mean wins, the earlier child on a tie.
- `OrderedUnionDatabase(*dbs)`: children in order; the first that has an answer gives it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Sequence

from msdb.database.base import RELATIVES_LIMIT, Database, Relative, check_limit
from msdb.database.errors import DatabaseError
from msdb.records import Target, TuningRecord, Workload

if TYPE_CHECKING:
    from msdb.ir.function import IRModule, PrimFunc
    from msdb.schedule import Schedule

__all__ = ["UnionDatabase", "OrderedUnionDatabase"]


class _Union(Database):
    def __init__(self, *databases: Database, module_equality: str | None = None) -> None:
        if not databases:
            raise DatabaseError(f"{type(self).__name__} needs at least one database")
        for db in databases:
            if not isinstance(db, Database):
                raise TypeError(f"{type(self).__name__} takes Database views, got {type(db).__name__}")
        super().__init__(module_equality or databases[0].module_equality)
        self.databases: tuple[Database, ...] = tuple(databases)

    def has_workload(self, mod: IRModule | PrimFunc | Workload) -> bool:
        workload = Workload.coerce(mod)
        return any(db.has_workload(workload) for db in self.databases)

    def commit_workload(self, mod: IRModule | PrimFunc | Workload) -> Workload:
        """Stored in the first child (the writable layer)."""
        return self.databases[0].commit_workload(mod)

    def commit_model_tasks(self, model_name: str,
                           tasks: Sequence[tuple[str, IRModule | PrimFunc | Workload, float]]) -> list[int] | None:
        """Recorded in the first child (the writable layer)."""
        return self.databases[0].commit_model_tasks(model_name, tasks)

    def commit_tuning_record(self, record: TuningRecord) -> None:
        """Appended to the first child."""
        self.databases[0].commit_tuning_record(record)

    def commit_tuning_records(self, records: Iterable[TuningRecord]) -> int:
        return self.databases[0].commit_tuning_records(records)

    def claim_candidates(self, workload: IRModule | PrimFunc | Workload, target: Target | str | dict[str, Any] | None,
                         keys: Sequence[str], *, owner: str, lease_s: float | None = None) -> set[str]:
        """Claimed in the first child, where the measured records go (msdb.database.claims)."""
        return self.databases[0].claim_candidates(workload, target, keys, owner=owner, lease_s=lease_s)

    def settle_claims(self, workload: IRModule | PrimFunc | Workload, target: Target | str | dict[str, Any] | None, *,
                      owner: str, measured: Iterable[str] = (), unmeasured: Iterable[str] = ()) -> None:
        self.databases[0].settle_claims(workload, target, owner=owner, measured=measured, unmeasured=unmeasured)

    def get_measured(self, workload: IRModule | PrimFunc | Workload,
                     target: Target | str | dict[str, Any] | None = None) -> list[TuningRecord]:
        """What every child measured, child by child."""
        workload = Workload.coerce(workload)
        return [record for db in self.databases for record in db.get_measured(workload, target)]

    def get_all_tuning_records(self) -> list[TuningRecord]:
        """Every child's records, child by child."""
        out: list[TuningRecord] = []
        for db in self.databases:
            out.extend(db.get_all_tuning_records())
        return out

    @property
    def lists_relatives(self) -> bool:  # type: ignore[override]
        return any(db.lists_relatives for db in self.databases)

    def relatives(self, workload: IRModule | PrimFunc | Workload, target: Target | str | dict[str, Any] | None = None,
                  *, limit: int = RELATIVES_LIMIT) -> list[Relative]:
        """Every child's relatives, child by child (a workload two children store is listed once:
        from the earlier child that has a record of it, else the earlier child; a child's copy
        with no record, such as failed trials, never hides another child's record), those with a
        record first; at most `limit`."""
        check_limit(limit)
        workload = Workload.coerce(workload)
        found: dict[str, Relative] = {}
        for db in self.databases:
            for relative in db.relatives(workload, target, limit=limit):
                key = relative.workload.hash(self.module_equality)
                kept = found.get(key)
                if kept is None or (kept.best is None and relative.best is not None):
                    found[key] = relative
        ordered = sorted(found.values(), key=lambda relative: relative.best is None)
        return ordered[:limit]

    def __len__(self) -> int:
        return sum(len(db) for db in self.databases)

    def close(self) -> None:
        for db in self.databases:
            db.close()


class UnionDatabase(_Union):
    """Asks every child; the best mean run time wins, the earlier child on a tie."""

    def _top_k(self, workload: Workload, top_k: int, target: Target | None) -> list[TuningRecord]:
        merged: list[tuple[float, int, int, TuningRecord]] = []
        for child, db in enumerate(self.databases):
            for position, record in enumerate(db.get_top_k(workload, top_k, target)):
                merged.append((record.mean_run_secs, child, position, record))
        merged.sort(key=lambda m: m[:3])
        return [m[3] for m in merged[:top_k]]

    def query_tuning_record(self, mod: IRModule | PrimFunc | Workload, target: Target | str | dict[str, Any] | None,
                            workload_name: str = "main") -> TuningRecord | None:
        """Every child's answer; the best mean wins, the earlier child on a tie."""
        workload = Workload.coerce(mod)
        target = Target.coerce(target)
        best: TuningRecord | None = None
        for db in self.databases:
            record = db.query_tuning_record(workload, target, workload_name)
            if record is not None and (best is None or record.mean_run_secs < best.mean_run_secs):
                best = record
        return best


class OrderedUnionDatabase(_Union):
    """Children in order; the first that has records for the workload and target answers."""

    def _top_k(self, workload: Workload, top_k: int, target: Target | None) -> list[TuningRecord]:
        for db in self.databases:
            top = db.get_top_k(workload, top_k, target)
            if top:
                return top
        return []

    def query_tuning_record(self, mod: IRModule | PrimFunc | Workload, target: Target | str | dict[str, Any] | None,
                            workload_name: str = "main") -> TuningRecord | None:
        workload = Workload.coerce(mod)
        target = Target.coerce(target)
        for db in self.databases:
            record = db.query_tuning_record(workload, target, workload_name)
            if record is not None:
                return record
        return None

    def query_schedule(self, mod: IRModule | PrimFunc | Workload, target: Target | str | dict[str, Any] | None,
                       workload_name: str = "main") -> Schedule | None:
        """The first child's schedule (a ScheduleFnDatabase child answers with its function)."""
        workload = Workload.coerce(mod)
        target = Target.coerce(target)
        for db in self.databases:
            sch = db.query_schedule(workload, target, workload_name)
            if sch is not None:
                return sch
        return None
