"""The abstract `Database`: TVM MetaSchedule's database interface, target-aware.

Semantics follow TVM (docs/tvm-formats.md section 2): `commit_workload` looks a module up under
the view's `module_equality` and returns the stored workload (the token to use later);
`commit_tuning_record` appends, and its workload must have been committed first;
`get_top_k(workload, top_k)` (TVM's parameter name, so `top_k=` works as in TVM) gives at most
top_k *valid* records of an equal workload by ascending mean run time, ties in commit
order; queries replay the best trace on the *stored* workload.

Beyond TVM (docs/targets.md, "In the databases"): `get_top_k`, the queries and `dump_pruned`
take a target and filter by `Target.matches` (never a record of another kind or arch);
`target=None` means any target, as in TVM. `dump_pruned` keeps the best records per workload
*and* target.
"""

from __future__ import annotations

import abc
import heapq
import threading
from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable, Literal, Sequence

from msdb.database.errors import InvalidQuery, UnknownDatabaseKind
from msdb.kinds import load_kind
from msdb.records import Target, TuningRecord, Workload
from msdb.hashing.modes import canonical_mode

if TYPE_CHECKING:
    from msdb.hashing.family import FamilyKey
    from msdb.ir.function import IRModule, PrimFunc
    from msdb.schedule import Schedule

__all__ = ["Database", "QueryKind", "Relative", "RELATIVES_LIMIT", "create"]

QueryKind = Literal["schedule", "record", "ir_module"]

_STACK = threading.local()

#: How many relatives `Database.relatives` returns unless told.
RELATIVES_LIMIT = 50


@dataclass(frozen=True)
class Relative:
    """A workload of the same family as the one asked about (`msdb.hashing.family`: the same
    operator at other sizes or index dtypes), with the sizes its family key abstracted
    (`extents`, aligned with the asked workload's) and its best valid record on the asked target
    (None when it has none). The record's latency was measured on *this* workload, never on the
    one asked about (docs/architecture.md, "Families")."""

    workload: Workload
    extents: tuple[int, ...]
    best: TuningRecord | None

#: `Database.create`'s kinds: name -> (module, class), loaded when asked for (`msdb.kinds`).
DATABASE_KINDS = {
    "json": ("msdb.database.json_database", "JSONDatabase"),
    "memory": ("msdb.database.memory", "MemoryDatabase"),
    "union": ("msdb.database.union", "UnionDatabase"),
    "ordered_union": ("msdb.database.union", "OrderedUnionDatabase"),
    "sqlite": ("msdb.database.sql", "SQLDatabase"),
}


class Database(abc.ABC):
    """A tuning database view. `module_equality` ("structural", "ignore-tensor" (alias
    "ignore-ndarray") or "anchor-block") decides which workloads count as the same."""

    def __init__(self, module_equality: str = "structural") -> None:
        self.module_equality = canonical_mode(module_equality)

    # ---- TVM's interface (implemented by each view) ----
    @abc.abstractmethod
    def has_workload(self, mod: IRModule | PrimFunc | Workload) -> bool:
        """Whether an equal workload (under `module_equality`) is stored."""

    @abc.abstractmethod
    def commit_workload(self, mod: IRModule | PrimFunc | Workload) -> Workload:
        """Look up an equal workload or store this one; returns the stored workload."""

    @abc.abstractmethod
    def commit_tuning_record(self, record: TuningRecord) -> None:
        """Append a record; its workload must have been committed to this database."""

    def get_top_k(self, workload: IRModule | PrimFunc | Workload, top_k: int,
                  target: Target | str | dict[str, Any] | None = None) -> list[TuningRecord]:
        """At most `top_k` valid records of an equal workload whose target matches `target` (any
        when None), by ascending mean run time, ties in commit order. `top_k < 0` is an error.

        The arguments are checked and coerced here, once for every view; each view answers in
        `_top_k`."""
        check_k(top_k)
        if top_k == 0:
            return []
        return self._top_k(Workload.coerce(workload), top_k, Target.coerce(target))

    @abc.abstractmethod
    def _top_k(self, workload: Workload, top_k: int, target: Target | None) -> list[TuningRecord]:
        """`get_top_k` after its checks: `top_k >= 1`, the workload and target coerced. Each view
        implements it."""

    def get_measured(self, workload: IRModule | PrimFunc | Workload,
                     target: Target | str | dict[str, Any] | None = None) -> list[TuningRecord]:
        """Every record of an equal workload whose target matches `target` (any when None),
        failed runs included, in commit order: what the tuner must not measure again. Views
        with an index override this scan."""
        workload = Workload.coerce(workload)
        query = Target.coerce(target)
        key = workload.hash(self.module_equality)
        return [r for r in self.get_all_tuning_records()
                if r.workload.hash(self.module_equality) == key and r.workload.equal(workload, self.module_equality)
                and (query is None or query.matches(r.target))]

    @abc.abstractmethod
    def get_all_tuning_records(self) -> list[TuningRecord]:
        """Every record, invalid ones included, in commit order."""

    @abc.abstractmethod
    def __len__(self) -> int:
        """The number of records."""

    # ---- shared behaviour ----
    def commit_tuning_records(self, records: Iterable[TuningRecord]) -> int:
        """Commit many records (views override this with one transaction); returns the count."""
        count = 0
        for record in records:
            self.commit_tuning_record(record)
            count += 1
        return count

    def commit_model_tasks(self, model_name: str,
                           tasks: Sequence[tuple[str, IRModule | PrimFunc | Workload, float]]) -> list[int] | None:
        """Note that model `model_name` uses each `(task_name, workload, weight)` of `tasks`
        (`msdb.model.extract_tasks`' tasks: which models use which workloads, docs/architecture.md
        "Models"). Views with `model` and `task` tables store them in one transaction and return
        the task ids; the others (TVM's JSON and memory databases know no models) commit the
        workloads only and return None."""
        for _name, workload, _weight in tasks:
            self.commit_workload(workload)
        return None

    def query_tuning_record(self, mod: IRModule | PrimFunc | Workload, target: Target | str | dict[str, Any] | None,
                            workload_name: str = "main") -> TuningRecord | None:
        """The best valid record for `mod` on `target`, or None. `workload_name` is TVM's task
        name; hash-keyed views ignore it, as TVM does."""
        top = self.get_top_k(mod, 1, target)
        return top[0] if top else None

    def query_schedule(self, mod: IRModule | PrimFunc | Workload, target: Target | str | dict[str, Any] | None,
                       workload_name: str = "main") -> Schedule | None:
        """The best record's trace replayed on the *stored* workload (whose block names the
        trace uses), or None."""
        record = self.query_tuning_record(mod, target, workload_name)
        if record is None:
            return None
        return replay(record)

    def query_ir_module(self, mod: IRModule | PrimFunc | Workload, target: Target | str | dict[str, Any] | None,
                        workload_name: str = "main") -> IRModule | None:
        """The scheduled module of `query_schedule`, or None."""
        sch = self.query_schedule(mod, target, workload_name)
        return sch.mod if sch is not None else None

    def query(self, mod: IRModule | PrimFunc | Workload, target: Target | str | dict[str, Any] | None, *,
              workload_name: str = "main", kind: QueryKind = "schedule") -> Any:
        """Dispatch to `query_schedule` / `query_tuning_record` / `query_ir_module` by `kind`."""
        if kind == "schedule":
            return self.query_schedule(mod, target, workload_name)
        if kind == "record":
            return self.query_tuning_record(mod, target, workload_name)
        if kind == "ir_module":
            return self.query_ir_module(mod, target, workload_name)
        raise InvalidQuery(f"unknown query kind {kind!r}; expected 'schedule', 'record' or 'ir_module'")

    def dump_pruned(self, destination: Database, top_k: int = 1) -> int:
        """Copy the best `top_k` valid records of every workload *and target* into
        `destination` (TVM keeps one per workload, ignoring targets). Returns the number of
        records written."""
        if top_k < 1:
            raise InvalidQuery(f"dump_pruned: top_k must be >= 1, got {top_k}")
        groups: dict[tuple[str, str | None], list[tuple[float, int, TuningRecord]]] = defaultdict(list)
        for order, record in enumerate(self.get_all_tuning_records()):
            if not record.is_valid:
                continue
            key = (record.workload.hash(self.module_equality),
                   record.target.canonical_json() if record.target is not None else None)
            groups[key].append((record.mean_run_secs, order, record))
        chosen: list[TuningRecord] = []
        for entries in groups.values():
            entries.sort(key=lambda e: (e[0], e[1]))
            chosen.extend(e[2] for e in entries[:top_k])
        return self._copy_into(destination, chosen)

    @staticmethod
    def _copy_into(destination: Database, records: list[TuningRecord]) -> int:
        """Commit `records` into `destination` in one transaction, each workload committed
        there once (records hold the tokens `destination.commit_workload` returned)."""
        tokens: dict[int, Workload] = {}
        out: list[TuningRecord] = []
        for record in records:
            stored = tokens.get(id(record.workload))
            if stored is None:
                stored = tokens[id(record.workload)] = destination.commit_workload(record.workload)
            out.append(record.with_workload(stored))
        return destination.commit_tuning_records(out)

    # ---- relatives: workloads of the same family (msdb.hashing.family) ----
    #: whether `relatives` can answer at all (the views that store workloads): a transfer over a
    #: view that cannot says so instead of "no relatives"
    lists_relatives: bool = False

    def relatives(self, workload: IRModule | PrimFunc | Workload, target: Target | str | dict[str, Any] | None = None,
                  *, limit: int = RELATIVES_LIMIT) -> list[Relative]:
        """The stored workloads of `workload`'s family other than itself (the workloads equal to
        it under the view's module equality), each with its best valid record on `target`
        (msdb's target policy; None: any target): those with such a record first, then in commit
        order; at most `limit`. This base stores no workloads, so it has none; the views that
        store workloads answer from their stores."""
        check_limit(limit)
        return []

    # ---- measurement claims: several tuners on one database (msdb.database.claims) ----
    def claim_candidates(self, workload: IRModule | PrimFunc | Workload, target: Target | str | dict[str, Any] | None,
                         keys: Sequence[str], *, owner: str, lease_s: float | None = None) -> set[str]:
        """Which of `keys` (module keys of candidates of `workload` on `target`) the search
        session `owner` may measure: it claimed them, and no other session will measure them.
        This base keeps claims in the process; SQL databases keep them in the database, leased
        for `lease_s` seconds (default `CLAIM_LEASE_S`) until settled."""
        from msdb.database.claims import process_claims

        return process_claims(self).claim(self._claim_scope(workload, target), keys, owner)

    def settle_claims(self, workload: IRModule | PrimFunc | Workload, target: Target | str | dict[str, Any] | None, *,
                      owner: str, measured: Iterable[str] = (), unmeasured: Iterable[str] = ()) -> None:
        """`owner`'s claims on `measured` keys stay for good (their records are committed); those
        on `unmeasured` keys are given back for any session to claim."""
        from msdb.database.claims import process_claims

        process_claims(self).settle(self._claim_scope(workload, target), owner, measured, unmeasured)

    def _claim_scope(self, workload: IRModule | PrimFunc | Workload,
                     target: Target | str | dict[str, Any] | None) -> tuple[str, str]:
        coerced = Target.coerce(target)
        return Workload.coerce(workload).hash(self.module_equality), coerced.canonical_json() if coerced else ""

    def close(self) -> None:
        """Release files and connections (views holding none do nothing)."""

    # ---- context stack (TVM's `with db:` / `Database.current()`) ----
    def __enter__(self) -> Database:
        stack = _context_stack()
        stack.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        stack = _context_stack()
        if not stack or stack[-1] is not self:
            raise RuntimeError("database context stack is out of order")
        stack.pop()

    @staticmethod
    def current() -> Database | None:
        """The innermost database entered with `with db:` in this thread, or None."""
        stack = _context_stack()
        return stack[-1] if stack else None

    # ---- factory ----
    @staticmethod
    def create(kind: str | Callable[..., bool] = "json", *args: Any, **kwargs: Any) -> Database:
        """A view of a kind of `DATABASE_KINDS` (`"sqlite"` also opens a PostgreSQL URL), or a
        schedule function (-> `ScheduleFnDatabase`); `args`/`kwargs` go to its constructor."""
        if callable(kind):
            from msdb.database.schedule_fn import ScheduleFnDatabase

            return ScheduleFnDatabase(kind, *args, **kwargs)
        view: Database = load_kind(DATABASE_KINDS, kind, "database kind", error=UnknownDatabaseKind,
                                   alternative="or a schedule function")(*args, **kwargs)
        return view


create = Database.create


def _context_stack() -> list[Database]:
    stack = getattr(_STACK, "stack", None)
    if stack is None:
        stack = _STACK.stack = []
    return stack


def check_limit(limit: int) -> None:
    """`InvalidQuery` for a `relatives` limit that is not a non-negative int."""
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise InvalidQuery(f"limit={limit!r}: the number of relatives must be an int >= 0")


def family_or_none(workload: Workload) -> FamilyKey | None:
    """`workload.family`, or None for a workload without readable IR (an opaque TVM payload):
    such a workload has no relatives (`msdb.hashing.family`)."""
    from msdb.errors import MsdbError

    try:
        return workload.family
    except MsdbError:
        return None


def check_k(top_k: int) -> None:
    """TVM: top_k < 0 is an error, top_k == 0 gives no records."""
    if not isinstance(top_k, int) or isinstance(top_k, bool):
        raise TypeError(f"get_top_k: top_k must be an int, got {type(top_k).__name__}")
    if top_k < 0:
        raise InvalidQuery(f"get_top_k: top_k must be >= 0, got {top_k}")


def replay(record: TuningRecord) -> Schedule:
    """A schedule of the record's stored workload with the record's trace applied (TVM's
    query_schedule: postprocessing instructions kept)."""
    from msdb.schedule import Schedule

    sch = Schedule(record.workload.mod)
    record.trace.apply_to_schedule(sch, remove_postproc=False)
    return sch


def rank(records: Iterable[tuple[int, TuningRecord]], k: int, target: Target | None) -> list[TuningRecord]:
    """The top k valid records among `(commit_order, record)` pairs matching `target`."""
    verdicts: dict[int, bool] = {}  # records share their Target objects: match each once
    candidates = []
    for order, record in records:
        if not record.is_valid:
            continue
        if target is not None:
            verdict = verdicts.get(id(record.target))
            if verdict is None:
                verdict = verdicts[id(record.target)] = target.matches(record.target)
            if not verdict:
                continue
        candidates.append((record.mean_run_secs, order, record))
    return [c[2] for c in heapq.nsmallest(k, candidates, key=lambda c: (c[0], c[1]))]
