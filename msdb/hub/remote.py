"""`RemoteDatabase(url)`: a hub as a read-only `Database`, over datasette's JSON API.

Queries (workloads by the view's hash column, top-k, relatives) go through `msdb.hub.client`;
targets are matched here, so it never answers with another target's record. Answers are cached
for the life of the object; commits raise `ReadOnlyDatabase`. See docs/architecture.md, "Hub" and
"Families".
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Iterable

from msdb.database.base import RELATIVES_LIMIT, Database, Relative, check_limit, family_or_none
from msdb.database.errors import ReadOnlyDatabase
from msdb.database.rows import HASH_COLUMNS, load_workload_ir
from msdb.database.targets import target_of_config
from msdb.hub.client import TIMEOUT_S, HubClient
from msdb.records import Target, TuningRecord, Workload

if TYPE_CHECKING:
    from msdb.ir.function import IRModule, PrimFunc

__all__ = ["RemoteDatabase"]

_WORKLOAD_KEY_COLUMNS = ("id", "shash", "ignore_tensor_hash", "anchor_hash", "name", "tvm_shash")
_RECORD_COLUMNS = ("workload_id", "target_id", "trace", "run_secs", "mean_run_secs", "is_valid", "args_info")


class RemoteDatabase(Database):
    """A read-only view of the hub at `url` (`http://host:port/`); see the module docstring."""

    def __init__(self, url: str, module_equality: str = "structural", *, timeout_s: float = TIMEOUT_S) -> None:
        super().__init__(module_equality)
        self.client = HubClient(url, timeout_s=timeout_s)
        self.url = self.client.url
        self._lock = threading.Lock()
        self._ids: dict[str, list[int]] = {}
        self._workloads: dict[int, Workload] = {}
        self._targets: dict[int, Target | None] = {}
        self._top: dict[tuple[tuple[int, ...], str | None, int], list[TuningRecord]] = {}
        self._measured: dict[tuple[tuple[int, ...], str | None], list[TuningRecord]] = {}
        self._relatives: dict[tuple[str, str, str | None], list[Relative]] = {}

    def __repr__(self) -> str:
        return f"RemoteDatabase({self.url!r})"

    # ---- writes: none ----
    def _refuse(self) -> ReadOnlyDatabase:
        return ReadOnlyDatabase(f"{self.url} is a hub, read-only; commit to a local database (as the second layer "
                                f"of OrderedUnionDatabase(local, remote), commits go to local)")

    def commit_workload(self, mod: IRModule | PrimFunc | Workload) -> Workload:
        raise self._refuse()

    def commit_tuning_record(self, record: TuningRecord) -> None:
        raise self._refuse()

    def commit_tuning_records(self, records: Iterable[TuningRecord]) -> int:
        raise self._refuse()

    # ---- lookups ----
    def _workload_ids(self, workload: Workload) -> list[int]:
        key = workload.hash(self.module_equality)
        with self._lock:
            known = self._ids.get(key)
        if known is not None:
            return known
        column = HASH_COLUMNS[self.module_equality].name
        rows = self.client.all_rows("workload", [(f"{column}__exact", key),
                                                 *[("_col", c) for c in _WORKLOAD_KEY_COLUMNS if c != "id"]])
        ids = []
        for row in rows:
            ids.append(int(row["id"]))
            self._workload_of(row)
        with self._lock:
            self._ids[key] = ids
        return ids

    def _workload_of(self, row: dict[str, Any]) -> Workload:
        workload_id = int(row["id"])
        with self._lock:
            cached = self._workloads.get(workload_id)
            if cached is not None:
                return cached
            workload = Workload(
                hashes={"structural": row["shash"], "ignore-tensor": row["ignore_tensor_hash"],
                        "anchor-block": row["anchor_hash"]},
                loader=lambda: self._load_ir(workload_id), name=row.get("name"), tvm_shash=row.get("tvm_shash"))
            self._workloads[workload_id] = workload
            return workload

    def _workload(self, workload_id: int) -> Workload:
        with self._lock:
            cached = self._workloads.get(workload_id)
        if cached is not None:
            return cached
        rows, _next = self.client.rows("workload", [("id__exact", str(workload_id)),
                                                    *[("_col", c) for c in _WORKLOAD_KEY_COLUMNS if c != "id"]])
        if not rows:
            raise self.client.wrong(f"its records point at workload {workload_id}, which it does not list")
        return self._workload_of(rows[0])

    def _load_ir(self, workload_id: int) -> IRModule:
        rows, _next = self.client.rows("workload", [("id__exact", str(workload_id)), ("_col", "ir_format"),
                                                    ("_col", "ir_blob"), ("_col", "script")])
        if not rows:
            raise self.client.wrong(f"workload {workload_id} is gone")
        row = rows[0]
        return load_workload_ir(row.get("ir_format"), row.get("ir_blob"), str(row["script"]),
                                label=f"{self.url}: workload {workload_id}")

    def _target_ids(self, target: Target | None) -> list[int]:
        """Ids of the hub's target rows `target` accepts (all for None)."""
        with self._lock:
            empty = not self._targets
        if empty:
            targets = {int(row["id"]): target_of_config(str(row["config"]))
                       for row in self.client.all_rows("target", [("_col", "config")])}
            with self._lock:
                self._targets = targets
        if target is None:
            return sorted(self._targets)
        return sorted(tid for tid, t in self._targets.items() if target.matches(t))

    def _record(self, row: dict[str, Any]) -> TuningRecord:
        from msdb.schedule.tvm_json import loads

        target_id = int(row["target_id"])
        if target_id not in self._targets:
            self._targets.clear()
            self._target_ids(None)
        run_secs = loads(row["run_secs"]) if row.get("run_secs") is not None else None
        args = loads(row["args_info"]) if row.get("args_info") is not None else None
        return TuningRecord(row["trace"], self._workload(int(row["workload_id"])), run_secs,
                            self._targets.get(target_id), args)

    def _records(self, params: list[tuple[str, str]], limit: int | None) -> list[TuningRecord]:
        """Records of a filtered, sorted table page, following `_next` until `limit` (all for None)."""
        out: list[TuningRecord] = []
        token = None
        while limit is None or len(out) < limit:
            size = "max" if limit is None or limit - len(out) > 1000 else str(limit - len(out))
            page_params = [*params, ("_size", size), *[("_col", c) for c in _RECORD_COLUMNS]]
            if token is not None:
                page_params.append(("_next", str(token)))
            rows, token = self.client.rows("tuning_record", page_params)
            out.extend(self._record(row) for row in rows)
            if token is None or not rows:
                break
        return out if limit is None else out[:limit]

    # ---- relatives (docs/architecture.md, "Families") ----
    lists_relatives = True

    def relatives(self, workload: IRModule | PrimFunc | Workload, target: Target | str | dict[str, Any] | None = None,
                  *, limit: int = RELATIVES_LIMIT) -> list[Relative]:
        """`Database.relatives` over the hub's JSON API: the family's workload rows (an indexed
        filter on `family_hash`, in commit order), the ones equal to `workload` left out, then
        each one's best valid record on `target` (a one-row page sorted by latency); those with
        a record first, at most `limit`. Cached for the session, as every answer here."""
        import json

        check_limit(limit)
        asked = Workload.coerce(workload)
        family = family_or_none(asked)
        if family is None or limit == 0:
            return []
        query = Target.coerce(target)
        key = (family.hash, asked.hash(self.module_equality), query.canonical_json() if query is not None else None)
        with self._lock:
            cached = self._relatives.get(key)
        if cached is None:
            own = set(self._workload_ids(asked))
            rows = self.client.all_rows("workload", [("family_hash__exact", family.hash), ("_sort", "id"),
                                                     *[("_col", c) for c in (*_WORKLOAD_KEY_COLUMNS, "family_extents")
                                                       if c != "id"]])
            target_ids = ",".join(map(str, self._target_ids(query)))
            found: list[Relative] = []
            for row in rows:
                if int(row["id"]) in own:
                    continue
                best = (self._records([("workload_id__exact", str(row["id"])), ("target_id__in", target_ids),
                                       ("is_valid__exact", "1"), ("_sort", "mean_run_secs")], 1)
                        if target_ids else [])
                extents = json.loads(row.get("family_extents") or "[]")
                if not isinstance(extents, list) or not all(type(v) is int for v in extents):
                    raise self.client.wrong(f"workload {row['id']} has family_extents {str(extents)[:80]!r}, not a "
                                            "list of ints")
                found.append(Relative(self._workload_of(row), tuple(extents), best[0] if best else None))
            cached = [r for r in found if r.best is not None] + [r for r in found if r.best is None]
            with self._lock:
                self._relatives[key] = cached
        return list(cached[:limit])

    # ---- TVM's interface ----
    def has_workload(self, mod: IRModule | PrimFunc | Workload) -> bool:
        return bool(self._workload_ids(Workload.coerce(mod)))

    def _top_k(self, workload: Workload, top_k: int, target: Target | None) -> list[TuningRecord]:
        workload_ids = self._workload_ids(workload)
        if not workload_ids:
            return []
        target_ids = self._target_ids(target)
        if not target_ids:
            return []
        key = (tuple(workload_ids), target.canonical_json() if target is not None else None, top_k)
        with self._lock:
            cached = self._top.get(key)
        if cached is not None:
            return list(cached)
        records = self._records([("workload_id__in", ",".join(map(str, workload_ids))),
                                 ("target_id__in", ",".join(map(str, target_ids))), ("is_valid__exact", "1"),
                                 ("_sort", "mean_run_secs")], top_k)
        with self._lock:
            self._top[key] = records
        return list(records)

    def get_measured(self, workload: IRModule | PrimFunc | Workload,
                     target: Target | str | dict[str, Any] | None = None) -> list[TuningRecord]:
        workload = Workload.coerce(workload)
        query = Target.coerce(target)
        workload_ids = self._workload_ids(workload)
        if not workload_ids:
            return []
        target_ids = self._target_ids(query)
        if not target_ids:
            return []
        key = (tuple(workload_ids), query.canonical_json() if query is not None else None)
        with self._lock:
            cached = self._measured.get(key)
        if cached is not None:
            return list(cached)
        records = self._records([("workload_id__in", ",".join(map(str, workload_ids))),
                                 ("target_id__in", ",".join(map(str, target_ids))), ("_sort", "id")], None)
        with self._lock:
            self._measured[key] = records
        return list(records)

    def get_all_tuning_records(self) -> list[TuningRecord]:
        """Every record of the hub (a full download: prefer `msdb pull` for that)."""
        return self._records([("_sort", "id")], None)

    def __len__(self) -> int:
        data = self.client.get_json(f"{self.client.database}/tuning_record.json",
                                    [("_shape", "objects"), ("_size", "1"), ("_nofacet", "1")])
        count = data.get("filtered_table_rows_count") if isinstance(data, dict) else None
        if not isinstance(count, int):
            raise self.client.wrong("its tuning_record JSON has no row count")
        return count
