"""Finding a function's record in layered databases, and saying why there is none
(docs/architecture.md, "Compile").

TVM's MetaScheduleApplyDatabase asks one database under that database's own `module_equality`.
msdb asks every layer in order (OrderedUnionDatabase: the first layer with a record wins) and,
in each layer, first structurally and then by anchor block, whatever equality the layer was
opened with: a record tuned on a plain conv2d then still answers a fused conv2d+bias+relu, and
a database opened "structural" still answers anchor-block queries.

A `Database` view answers under its `module_equality` only, so each layer is asked through a
view of the same storage under the other equality (`equality_view`): the hash-indexed views
(SQLite/PostgreSQL, the hub) pick their hash column per query from `module_equality`, so a
shallow copy with another equality reads the same connection through the other column; views
that index their workloads under one equality in memory (memory, JSON) are read by a scan of
their records, as `Database.get_measured` does.
"""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

from msdb.database.base import Database, rank
from msdb.errors import MsdbError
from msdb.records import Target, TuningRecord, Workload
from msdb.tuner.compile.report import MissReason

if TYPE_CHECKING:
    from msdb.ir.function import IRModule, PrimFunc

__all__ = ["Layer", "Lookup", "open_layer", "as_layers", "equality_view", "find_record", "QUERY_MODES"]

#: The equalities each layer is asked under, in order.
QUERY_MODES = ("structural", "anchor-block")


@dataclass(frozen=True)
class Layer:
    """One database of a layered compile and how the user named it (`--db` as given)."""

    database: Database
    label: str


@dataclass(frozen=True)
class Lookup:
    """The answer for one function: the best record and where it came from, or why none."""

    record: TuningRecord | None
    layer: Layer | None = None
    matched_by: str | None = None
    reason: str | None = None
    detail: str | None = None
    targets_with_records: tuple[str, ...] = ()


def open_layer(location: str | os.PathLike[str], *, writable: bool = False) -> Layer:
    """Open a `--db` for reading: an `http(s)://` hub URL (`RemoteDatabase`, asked for its
    database once so an unreachable hub fails here), else a file path or SQLAlchemy URL opened
    read-only (`msdb.database.location.open_database`: nothing is created, migrated or written).
    `writable`: the layer a compile commits to (`transfer_trials`), opened for writing; a hub
    cannot be one. Errors are `MsdbError`s naming the location."""
    text = os.fspath(location)
    if text.startswith(("http://", "https://")):
        if writable:
            raise MsdbError(f"{text} is a hub (read-only): the measured candidates of a compile are committed to "
                            "its first database, so put a database file first")
        from msdb.hub.remote import RemoteDatabase

        remote = RemoteDatabase(text)
        remote.client.database  # noqa: B018 - the probe: raises HubError naming the hub
        return Layer(remote, text)
    from msdb.database.location import open_database

    return Layer(open_database(text, read_only=not writable), text)


def as_layers(database: Database | str | os.PathLike[str] | Sequence[Database | str | os.PathLike[str]] | None,
              *, writable_first: bool = False) -> tuple[list[Layer], list[Layer]]:
    """(layers in query order, the layers this call opened and must close). A database may be a
    `Layer`, a `Database` (an `OrderedUnionDatabase` is unfolded into its children), a location,
    or a list of them. `writable_first`: a location given first is opened for writing
    (`open_layer`)."""
    from msdb.database.union import OrderedUnionDatabase

    if database is None:
        return [], []
    items: list[Any] = list(database) if isinstance(database, (list, tuple)) else [database]
    layers: list[Layer] = []
    opened: list[Layer] = []
    try:
        for item in items:
            if isinstance(item, Layer):
                layers.append(item)
            elif isinstance(item, OrderedUnionDatabase):
                layers.extend(Layer(child, repr(child)) for child in item.databases)
            elif isinstance(item, Database):
                layers.append(Layer(item, repr(item)))
            elif isinstance(item, (str, os.PathLike)):
                layer = open_layer(item, writable=writable_first and not layers)
                opened.append(layer)
                layers.append(layer)
            else:
                raise TypeError(f"compile: database must be a Database, a location or a list of them, "
                                f"got {type(item).__name__}")
    except BaseException:
        for layer in opened:
            layer.database.close()
        raise
    return layers, opened


class _ScanView(Database):
    """A read-only view of `inner` under another module equality, by a scan of its records (for
    views that index workloads under their own equality only)."""

    def __init__(self, inner: Database, module_equality: str) -> None:
        super().__init__(module_equality)
        self.inner = inner

    def _matching(self, workload: Workload) -> list[TuningRecord]:
        key = workload.hash(self.module_equality)
        return [r for r in self.inner.get_all_tuning_records()
                if r.workload.hash(self.module_equality) == key and r.workload.equal(workload, self.module_equality)]

    def has_workload(self, mod: IRModule | PrimFunc | Workload) -> bool:
        workload = Workload.coerce(mod)
        stored = getattr(self.inner, "workloads", None)
        candidates = stored() if callable(stored) else [r.workload for r in self.inner.get_all_tuning_records()]
        key = workload.hash(self.module_equality)
        return any(w.hash(self.module_equality) == key and w.equal(workload, self.module_equality) for w in candidates)

    def commit_workload(self, mod: IRModule | PrimFunc | Workload) -> Workload:
        raise MsdbError("a compile's query view is read-only")

    def commit_tuning_record(self, record: TuningRecord) -> None:
        raise MsdbError("a compile's query view is read-only")

    def _top_k(self, workload: Workload, top_k: int, target: Target | None) -> list[TuningRecord]:
        return rank(enumerate(self._matching(workload)), top_k, target)

    def get_measured(self, workload: IRModule | PrimFunc | Workload,
                     target: Target | str | dict[str, Any] | None = None) -> list[TuningRecord]:
        query = Target.coerce(target)
        return [r for r in self._matching(Workload.coerce(workload)) if query is None or query.matches(r.target)]

    def get_all_tuning_records(self) -> list[TuningRecord]:
        return self.inner.get_all_tuning_records()

    def __len__(self) -> int:
        return len(self.inner)


def equality_view(database: Database, module_equality: str) -> Database:
    """`database` read under `module_equality` (see the module docstring)."""
    from msdb.database.sql import SQLiteDatabase
    from msdb.hashing import canonical_mode

    from msdb.database.union import OrderedUnionDatabase, UnionDatabase

    mode = canonical_mode(module_equality)
    if database.module_equality == mode:
        return database
    if isinstance(database, (UnionDatabase, OrderedUnionDatabase)):
        return type(database)(*(equality_view(child, mode) for child in database.databases), module_equality=mode)
    remote_cls: Any = None
    try:
        from msdb.hub.remote import RemoteDatabase

        remote_cls = RemoteDatabase
    except ImportError:  # pragma: no cover - the hub's client uses only the standard library
        pass
    if isinstance(database, SQLiteDatabase) or (remote_cls is not None and isinstance(database, remote_cls)):
        view = copy.copy(database)
        view.module_equality = mode
        if remote_cls is not None and isinstance(view, remote_cls):
            view._ids = {}  # its cache of workload ids is keyed by hash value alone, not by column
        return view
    return _ScanView(database, mode)


def _target_names(records: Sequence[TuningRecord]) -> tuple[str, ...]:
    return tuple(sorted({str(r.target) for r in records if r.target is not None and r.is_valid}))


def find_record(layers: Sequence[Layer], workload: Workload, target: Target,
                views: dict[tuple[int, str], Database] | None = None, name: str = "main") -> Lookup:
    """The best valid record for `workload` (the model's function `name`) on `target`: layers in
    order, structural before anchor-block in each; the first answer wins. A `ScheduleFnDatabase`
    layer answers with its function's schedule (a record without run times), as in TVM. Without
    an answer, why (MissReason). `views` caches the equality views across calls (keyed by layer
    index and mode)."""
    from msdb.database.schedule_fn import ScheduleFnDatabase

    views = {} if views is None else views

    def view(index: int, mode: str) -> Database:
        key = (index, mode)
        if key not in views:
            views[key] = equality_view(layers[index].database, mode)
        return views[key]

    if not layers:
        return Lookup(None, reason=MissReason.NO_DATABASE)
    for index, layer in enumerate(layers):
        if isinstance(layer.database, ScheduleFnDatabase):
            record = layer.database.query_tuning_record(workload, target, name)
            if record is not None:
                return Lookup(record, layer, "schedule function")
            continue
        for mode in QUERY_MODES:
            top = view(index, mode).get_top_k(workload, 1, target)
            if top:
                return Lookup(top[0], layer, mode)
    # A miss: find out why, from every layer under both equalities.
    known_in: list[str] = []
    for_target: list[TuningRecord] = []
    everywhere: list[TuningRecord] = []
    for index, layer in enumerate(layers):
        for mode in QUERY_MODES:
            db = view(index, mode)
            measured = db.get_measured(workload, None)
            if measured or db.has_workload(workload):
                if layer.label not in known_in:
                    known_in.append(layer.label)
                everywhere.extend(measured)
                for_target.extend(r for r in measured if target.matches(r.target))
    if not known_in:
        return Lookup(None, reason=MissReason.NO_WORKLOAD)
    where = f"in {', '.join(known_in)}"
    if for_target:
        return Lookup(None, reason=MissReason.ONLY_FAILED,
                      detail=f"{where}: {len(for_target)} record(s) for this target, none ran")
    targets = _target_names(everywhere)
    if targets:
        detail = f"{where}; targets with records: {'; '.join(targets)}"
    else:
        detail = f"{where}; no target has a valid record"
    return Lookup(None, reason=MissReason.NO_RECORD_FOR_TARGET, detail=detail, targets_with_records=targets)
