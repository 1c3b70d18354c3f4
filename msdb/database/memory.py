"""`MemoryDatabase`: workloads and records in Python lists (TVM's MemoryDatabase), with a hash
index so lookups are not linear scans. `JSONDatabase` is this store plus file appends."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable

from msdb.database.base import RELATIVES_LIMIT, Database, Relative, check_limit, family_or_none, rank
from msdb.database.errors import WorkloadNotCommitted
from msdb.records import Target, TuningRecord, Workload

if TYPE_CHECKING:
    from msdb.ir.function import IRModule, PrimFunc

__all__ = ["MemoryDatabase"]


class MemoryDatabase(Database):
    """Everything in memory; nothing persists. Workloads are deduplicated under
    `module_equality` (hash, then a full structural comparison, as TVM does)."""

    def __init__(self, module_equality: str = "structural") -> None:
        super().__init__(module_equality)
        self._workloads: list[Workload] = []
        self._by_hash: dict[str, list[int]] = {}
        self._records: list[TuningRecord] = []
        self._records_of: list[list[int]] = []
        # identifies this database in a workload token's cache of where it is stored
        self._key = object()

    # ---- workloads ----
    def _find(self, workload: Workload) -> int | None:
        """Index of the stored workload equal to `workload`, or None."""
        index = workload._db_ids.get(self._key)
        if index is not None:
            return index
        for candidate in self._by_hash.get(workload.hash(self.module_equality), ()):
            if self._workloads[candidate].equal(workload, self.module_equality):
                workload._db_ids[self._key] = candidate
                return candidate
        return None

    def _store_workload(self, workload: Workload) -> int:
        index = len(self._workloads)
        self._workloads.append(workload)
        self._by_hash.setdefault(workload.hash(self.module_equality), []).append(index)
        self._records_of.append([])
        workload._db_ids[self._key] = index
        return index

    def has_workload(self, mod: IRModule | PrimFunc | Workload) -> bool:
        return self._find(Workload.coerce(mod)) is not None

    def commit_workload(self, mod: IRModule | PrimFunc | Workload) -> Workload:
        workload = Workload.coerce(mod)
        index = self._find(workload)
        if index is None:
            index = self._store_workload(workload)
        return self._workloads[index]

    def workloads(self) -> list[Workload]:
        """The stored workloads, in commit order."""
        return list(self._workloads)

    # ---- records ----
    def _resolve(self, record: TuningRecord) -> tuple[int, TuningRecord]:
        index = self._find(record.workload)
        if index is None:
            raise WorkloadNotCommitted(
                f"the record's workload (structural hash {record.workload.shash}) was not committed to this "
                "database; call commit_workload(mod) first and build the record with the workload it returns")
        stored = self._workloads[index]
        return index, (record if record.workload is stored else record.with_workload(stored))

    def _append_record(self, index: int, record: TuningRecord) -> None:
        self._records_of[index].append(len(self._records))
        self._records.append(record)

    def commit_tuning_record(self, record: TuningRecord) -> None:
        index, record = self._resolve(record)
        self._append_record(index, record)

    def commit_tuning_records(self, records: Iterable[TuningRecord]) -> int:
        resolved = [self._resolve(r) for r in records]  # all or nothing: check every record first
        for index, record in resolved:
            self._append_record(index, record)
        return len(resolved)

    def _top_k(self, workload: Workload, top_k: int, target: Target | None) -> list[TuningRecord]:
        index = self._find(workload)
        if index is None:
            return []
        return rank(((i, self._records[i]) for i in self._records_of[index]), top_k, target)

    def get_measured(self, workload: IRModule | PrimFunc | Workload,
                     target: Target | str | dict[str, Any] | None = None) -> list[TuningRecord]:
        index = self._find(Workload.coerce(workload))
        if index is None:
            return []
        query = Target.coerce(target)
        records = (self._records[i] for i in self._records_of[index])
        return [r for r in records if query is None or query.matches(r.target)]

    def get_all_tuning_records(self) -> list[TuningRecord]:
        return list(self._records)

    lists_relatives = True

    def relatives(self, workload: IRModule | PrimFunc | Workload, target: Target | str | dict[str, Any] | None = None,
                  *, limit: int = RELATIVES_LIMIT) -> list[Relative]:
        """`Database.relatives` by a scan of the stored workloads: each workload's family key is
        computed once and kept on it (a store in memory is small; the SQL database has the index)."""
        check_limit(limit)
        asked = Workload.coerce(workload)
        own = self._find(asked)
        key = family_or_none(self._workloads[own] if own is not None else asked)
        if key is None or limit == 0:
            return []
        query = Target.coerce(target)
        found: list[Relative] = []
        for index, candidate in enumerate(self._workloads):
            if index == own:
                continue
            other = family_or_none(candidate)
            if other is None or other.hash != key.hash:
                continue
            best = rank(((i, self._records[i]) for i in self._records_of[index]), 1, query)
            found.append(Relative(candidate, other.extents, best[0] if best else None))
        found.sort(key=lambda relative: relative.best is None)  # stable: commit order within each part
        return found[:limit]

    def __len__(self) -> int:
        return len(self._records)
