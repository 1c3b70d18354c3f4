"""msdb as TVM's database: `as_tvm_database(db)` turns any msdb view, location (file, SQLAlchemy
URL, hub URL) or list of layers into TVM 0.27's `Database`, for `tune_tir`, `tune_relax`,
`compile_relax` and the rest. See docs/architecture.md, "TVM uses msdb".

    from msdb.tvm import as_tvm_database

    database = as_tvm_database("tuning.sqlite", create=True)
    ms.tir_integration.tune_tir(mod, target, work_dir, 64, database=database)
    ms.relax_integration.compile_relax(as_tvm_database(["local.sqlite", "https://hub/..."]), ...)

TVM is imported on the first call, never at `import msdb`; without it the call raises
`TVMNotInstalled` naming the extra to install.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
from typing import TYPE_CHECKING, Any, Sequence

from msdb.errors import MsdbError

if TYPE_CHECKING:
    from msdb.database.base import Database
    from msdb.database.tvm_commits import TVMCommits
    from msdb.interop.tvm.grammar import LineParser
    from msdb.records import Target, TuningRecord, Workload
    from msdb.tvm_lines import TVMLineWriter

__all__ = ["as_tvm_database", "TVMNotInstalled", "TVMWorkloadError", "TVMRecordError", "TVM_VERSION"]

logger = logging.getLogger(__name__)

#: The TVM release this adapter is made for (the `tvm` extra installs it).
TVM_VERSION = "0.27"

#: How many further records a query tries when TVM cannot replay the best one's trace.
_FALLBACK_RECORDS = 8

Location = str | os.PathLike[str]


class TVMNotInstalled(MsdbError, ImportError):
    """`msdb.tvm` needs apache-tvm, which is not importable here."""


class TVMWorkloadError(MsdbError):
    """A TVM module msdb cannot store (a node type msdb's IR has no counterpart for)."""


class TVMRecordError(MsdbError):
    """A record TVM committed that msdb's import grammar refuses (the reason is named)."""


def _import_tvm() -> Any:
    """TVM's package, or `TVMNotInstalled` with the fix."""
    try:
        import tvm
        from tvm.s_tir import meta_schedule  # noqa: F401 - the part of TVM the adapter needs
    except ImportError as exc:
        raise TVMNotInstalled(
            f"msdb.tvm needs apache-tvm {TVM_VERSION} ({exc}); install it with: pip install 'msdb[tvm]'") from None
    return tvm


def as_tvm_database(db: Database | Location | Sequence[Database | Location], *, module_equality: str | None = None,
                    target: Any = None, create: bool = False, read_only: bool = False) -> Any:
    """A TVM `Database` backed by msdb (see the module docstring).

    `db`: an msdb `Database`, a location (file path, SQLAlchemy URL, hub URL) or a list of
    them (layers; commits go to the first). `module_equality`: TVM's parameter; None keeps
    the view's own (a location opens "structural"); a `Database` opened under another one is
    refused. `target`: the target `get_top_k` answers for (a TVM `Target`, a dict or a
    string); None: TVM's current target, else any. `create`: a database file given as the
    first location may be created (else a missing file is an error, and nothing is made).
    `read_only`: every location is opened read-only (a compile that must not write; TVM's
    commits then raise `ReadOnlyDatabase`).

    Errors, before anything is opened or written: `TVMNotInstalled`; `DatabaseOpenError` for a
    location that does not exist or is not an msdb database (left as it was); `HubError` for a
    hub that does not answer; `UnknownModuleEquality`; `TypeError` for anything else."""
    tvm = _import_tvm()
    from msdb.hashing.modes import canonical_mode

    mode = canonical_mode(module_equality) if module_equality is not None else None
    query_target = _msdb_target(target) if target is not None else None
    view, opened = _open_view(db, mode, create=create, read_only=read_only)
    try:
        adapter = _Adapter(tvm, view, opened, query_target)
        return _database_class(tvm)(adapter)
    except BaseException:
        for item in opened:
            item.close()
        raise


# ---------------------------------------------------------------- opening


def _open_view(db: Any, mode: str | None, *, create: bool, read_only: bool) -> tuple[Database, list[Database]]:
    """(the view TVM's calls go to, the databases this call opened and the adapter closes)."""
    from msdb.database.base import Database
    from msdb.database.union import OrderedUnionDatabase

    if isinstance(db, Database):
        _check_mode(db, mode)
        return db, []
    if isinstance(db, (str, os.PathLike)):
        items: list[Any] = [db]
    elif isinstance(db, (list, tuple)):
        items = list(db)
        if not items:
            raise MsdbError("as_tvm_database: an empty list of databases; give at least one location or Database")
    else:
        raise TypeError(f"as_tvm_database takes an msdb Database, a location (path or URL) or a list of them, "
                        f"got {type(db).__name__}")
    for index, item in enumerate(items):
        if isinstance(item, Database):
            _check_mode(item, mode)
        elif not isinstance(item, (str, os.PathLike)):
            raise TypeError(f"as_tvm_database: layer {index} is a {type(item).__name__}; give a location "
                            "(path or URL) or an msdb Database")
    layers: list[Database | None] = [item if isinstance(item, Database) else None for item in items]
    opened: list[Database] = []
    try:
        # the read-only layers first: a bad one fails before the first (writable) one is created
        for index in sorted(range(len(items)), key=lambda i: i == 0):
            if layers[index] is None:
                layer = _open_location(os.fspath(items[index]), mode or "structural",
                                       writable=index == 0 and not read_only, create=create and index == 0)
                opened.append(layer)
                layers[index] = layer
    except BaseException:
        for layer in opened:
            layer.close()
        raise
    views = [layer for layer in layers if layer is not None]
    if len(views) == 1:
        return views[0], opened
    return OrderedUnionDatabase(*views), opened


def _check_mode(db: Database, mode: str | None) -> None:
    """A view answers under its own module equality: one opened under another is refused."""
    if mode is not None and db.module_equality != mode:
        raise MsdbError(f"{db!r} answers under module_equality {db.module_equality!r}, TVM asks for {mode!r}: "
                        f"open it with module_equality={mode!r}, or pass its location instead")


def _open_location(location: str, mode: str, *, writable: bool, create: bool) -> Database:
    """A hub URL (`RemoteDatabase`, asked for its database once so an unreachable hub fails
    here), else a path or SQLAlchemy URL (`open_database`: a missing file is refused unless
    `create`; a layer below the first is opened read-only)."""
    if location.startswith(("http://", "https://")):
        from msdb.hub.remote import RemoteDatabase

        remote = RemoteDatabase(location, mode)
        remote.client.database  # noqa: B018 - the probe: raises HubError naming the hub
        return remote
    from msdb.database.location import open_database

    opened = open_database(location, create=create, read_only=not writable)
    opened.module_equality = mode  # this object is ours: SQL views pick the hash column per query
    return opened


# ---------------------------------------------------------------- conversions


def _plain(value: Any) -> Any:
    """TVM's containers and scalars (ffi arrays and maps, ffi strings, IntImm, FloatImm) as
    plain Python, as TVM's own `_json_de_tvm` makes them (a target's `export()`)."""
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, str):  # ffi's String is a str subclass: a plain one
        return str(value)
    if hasattr(value, "items"):
        return {str(k): _plain(v) for k, v in value.items()}
    if hasattr(value, "value") and not hasattr(value, "__len__"):  # IntImm, FloatImm
        return _plain(value.value)
    if hasattr(value, "__len__") and hasattr(value, "__getitem__"):
        return [_plain(v) for v in value]
    return value


def _msdb_target(target: Any) -> Target | None:
    """An msdb `Target` for a TVM `Target`, a config dict or a string."""
    from msdb.records import Target

    if target is None:
        return None
    if hasattr(target, "export"):
        return Target(_plain(target.export()))
    return Target.coerce(target)


def _json_for_tvm(value: Any) -> Any:
    """msdb's JSON (which keeps floats' spelling in a float subclass) as plain Python for TVM."""
    if isinstance(value, list):
        return [_json_for_tvm(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _json_for_tvm(v) for k, v in value.items()}
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, float):
        return float(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, str):
        return str(value)
    return value


class _Converted:
    """One TVM module seen by the adapter, and msdb's workload for it."""

    __slots__ = ("mod", "workload", "stored")

    def __init__(self, mod: Any, workload: Workload | None) -> None:
        self.mod = mod
        self.workload = workload  # None: msdb cannot read this module
        self.stored: Workload | None = None  # the token the view's commit_workload returned


class _Adapter:
    """The msdb side of the TVM database: conversions, caches and the calls TVM makes."""

    def __init__(self, tvm: Any, view: Database, opened: list[Database], target: Target | None) -> None:
        from tvm.s_tir.meta_schedule.database import TuningRecord as TVMRecord
        from tvm.s_tir.meta_schedule.database import Workload as TVMWorkload
        import tvm_ffi

        self.tvm = tvm
        self.ffi = tvm_ffi
        self.TVMWorkload = TVMWorkload
        self.TVMRecord = TVMRecord
        self.view = view
        self.opened = opened
        self.target = target
        self.tvm_version = str(getattr(tvm, "__version__", "")) or None
        self._lock = threading.RLock()
        self._modules: dict[int, list[_Converted]] = {}  # TVM structural hash -> modules seen
        self._tvm_workloads: dict[int, tuple[Workload, Any]] = {}  # id(msdb workload) -> (it, TVM's)
        self._targets: dict[str, Target | None] = {}
        self._tvm_records: dict[tuple[str, str, str, str | None], Any] = {}  # record_key -> TVM's record
        self.commits: TVMCommits | None = _commits_for(view, self.tvm_version)
        self._lines: TVMLineWriter | None = None
        self._parser: LineParser | None = None
        # what the first query would import, imported while opening
        import msdb.interop.tvm.payload  # noqa: F401
        import msdb.schedule.tvm_json  # noqa: F401

    @property
    def tvm_mode(self) -> str:
        """The module equality in TVM 0.27's spelling."""
        return self.view.module_equality

    def close(self) -> None:
        for db in self.opened:
            db.close()
        self.opened = []
        if self._lines is not None:
            self._lines.close()

    def prepare_commits(self) -> tuple[TVMLineWriter, LineParser]:
        """What commits need, made at the first one (a compile never commits): TVM's line
        writer and the import grammar that reads its lines."""
        with self._lock:
            if self._lines is None or self._parser is None:
                from msdb.interop.tvm.grammar import LineParser
                from msdb.tvm_lines import TVMLineWriter

                self._lines, self._parser = TVMLineWriter(self.tvm), LineParser()
            return self._lines, self._parser

    # ---- TVM -> msdb ----
    def converted(self, mod: Any) -> _Converted:
        """msdb's view of TVM module `mod` (cached; see the module docstring)."""
        key = int(self.ffi.structural_hash(mod))
        with self._lock:
            for entry in self._modules.get(key, ()):
                if entry.mod.same_as(mod) or self.ffi.structural_equal(entry.mod, mod):
                    return entry
        import json

        from msdb.interop.tvm.payload import PayloadError, decode_graph
        from msdb.records import Workload

        try:
            workload: Workload | None = Workload(decode_graph(json.loads(self.tvm.ir.save_json(mod)), check_size=False))
        except PayloadError as exc:
            logger.warning("msdb cannot read a TVM module (%s); msdb has no record for it", exc)
            workload = None
        entry = _Converted(mod, workload)
        with self._lock:
            self._modules.setdefault(key, []).append(entry)
        return entry

    def workload_of(self, mod: Any, *, commit: bool = False) -> Workload | None:
        """msdb's workload for a TVM module or TVM `Workload`: the query form, or with `commit`
        the stored token (committed now when new)."""
        if isinstance(mod, self.TVMWorkload):
            mod = mod.mod
        entry = self.converted(mod)
        if not commit:
            return entry.workload
        if entry.stored is not None:
            return entry.stored
        shash, payload = self.TVMWorkload(mod).as_json()  # TVM's workload line, kept with the workload
        if entry.workload is None:
            raise TVMWorkloadError(f"msdb cannot store a TVM module with TVM structural hash {shash}: its IR "
                                   "holds a node msdb's IR has no counterpart for (see the warning logged above)")
        workload = entry.workload
        workload.tvm_shash, workload.tvm_payload = str(shash), str(payload)
        if workload.name is None:
            from msdb.database.naming import workload_name

            workload.name = workload_name(workload.mod, workload.shash)
        stored = self.view.commit_workload(workload)
        with self._lock:
            entry.stored = stored
        return stored

    def target_of(self, target: Any) -> Target | None:
        if target is None:
            return None
        key = str(target)
        with self._lock:
            if key in self._targets:
                return self._targets[key]
        converted = _msdb_target(target)
        with self._lock:
            self._targets[key] = converted
        return converted

    def default_target(self) -> Target | None:
        """The target `get_top_k` answers for: the adapter's, else TVM's current one, else any."""
        if self.target is not None:
            return self.target
        return self.target_of(self.tvm.target.Target.current(allow_none=True))

    def record_of(self, record: Any) -> TuningRecord:
        """msdb's record for a TVM `TuningRecord` (its workload committed as TVM's rule asks)."""
        from msdb.records import TuningRecord

        workload = self.workload_of(record.workload, commit=True)
        assert workload is not None
        lines, parser = self.prepare_commits()
        line = lines.line(record)
        with self._lock:
            converted = parser.tuning_record(line, [workload], "TVM's workload")
        if isinstance(converted, str):
            raise TVMRecordError(f"msdb cannot store a record TVM committed for workload {workload.shash}: "
                                 f"{converted}")
        return converted

    # ---- msdb -> TVM ----
    def tvm_workload(self, workload: Workload) -> Any:
        """TVM's `Workload` for a stored msdb workload: its TVM payload byte for byte, or TVM
        0.27's encoding of msdb's IR for a workload msdb made itself, hashed by TVM."""
        with self._lock:
            known = self._tvm_workloads.get(id(workload))
        if known is not None and known[0] is workload:
            return known[1]
        payload = workload.tvm_payload
        if payload is None:
            from msdb.interop.tvm.encode import encode_workload

            payload = encode_workload(workload.mod)
        # `from_json` keeps the hash it is given: TVM hashes the module itself (a stored shash may
        # come from another TVM version, whose hash function differed)
        converted = self.TVMWorkload(self.TVMWorkload.from_json(["0", payload]).mod)
        with self._lock:
            self._tvm_workloads[id(workload)] = (workload, converted)
        return converted

    def tvm_record(self, record: TuningRecord) -> Any | None:
        """TVM's `TuningRecord` for an msdb record (its trace replayed by TVM on the stored
        workload), or None with a warning when TVM cannot replay it."""
        key = self.record_key(record)
        with self._lock:
            known = self._tvm_records.get(key)
        if known is not None:
            return known
        workload = self.tvm_workload(record.workload)
        trace, run_secs, target, args_info = record.as_json()
        try:
            converted = self.TVMRecord.from_json(_json_for_tvm([trace, run_secs, target, args_info]), workload)
        except Exception as exc:  # noqa: BLE001 - TVM raises its own error types from C++
            first = str(exc).strip().splitlines()
            logger.warning("TVM cannot replay a record of workload %s (%s); left out: %s", record.workload.shash,
                           record.target, first[-1] if first else type(exc).__name__)
            return None
        with self._lock:
            self._tvm_records[key] = converted
        return converted

    @staticmethod
    def record_key(record: TuningRecord) -> tuple[str, str, str, str | None]:
        """What identifies a measurement (the dedup key of `msdb.database.tvm_commits`): TVM's
        record for it is made once per session, since `from_json` replays the trace. The
        tuner's top-k query of every round then costs no replay for records seen before."""
        _text, trace_hash, run_text, _mean, _valid = record.storage_fields()
        target = record.target.canonical_json() if record.target is not None else ""
        return record.workload.shash, target, trace_hash, run_text

    def tvm_records(self, records: list[TuningRecord], limit: int | None = None) -> list[Any]:
        out = []
        for record in records:
            converted = self.tvm_record(record)
            if converted is not None:
                out.append(converted)
                if limit is not None and len(out) >= limit:
                    break
        return out

    # ---- TVM's calls ----
    def has_workload(self, mod: Any) -> bool:
        workload = self.workload_of(mod)
        return workload is not None and self.view.has_workload(workload)

    def commit_workload(self, mod: Any) -> Any:
        stored = self.workload_of(mod, commit=True)
        assert stored is not None
        return self.tvm_workload(stored)

    def commit_tuning_record(self, record: Any) -> None:
        converted = self.record_of(record)
        if self.commits is not None:
            self.commits.commit(converted)
        else:
            self.view.commit_tuning_record(converted)
        with self._lock:  # TVM's own object answers later top-k queries for this measurement
            self._tvm_records.setdefault(self.record_key(converted), record)

    def get_top_k(self, workload: Any, top_k: int) -> list[Any]:
        found = self.workload_of(workload)
        if found is None:
            from msdb.database.base import check_k

            check_k(int(top_k))
            return []
        records = self.view.get_top_k(found, int(top_k), self.default_target())
        converted = self.tvm_records(records)
        if len(converted) < len(records):  # some could not be replayed: ask for more
            more = self.view.get_top_k(found, int(top_k) + _FALLBACK_RECORDS, self.default_target())
            converted = self.tvm_records(more, int(top_k))
        return converted

    def get_all_tuning_records(self) -> list[Any]:
        query = self.default_target()
        records = [r for r in self.view.get_all_tuning_records() if query is None or query.matches(r.target)]
        return self.tvm_records(records)

    def query_tuning_record(self, mod: Any, target: Any, workload_name: str | None) -> Any | None:
        workload = self.workload_of(mod)
        if workload is None:
            return None
        query = self.target_of(target)
        name = str(workload_name) if workload_name is not None else "main"
        record = self.view.query_tuning_record(workload, query, name)
        if record is None:
            return None
        converted = self.tvm_record(record)
        if converted is None:  # TVM cannot replay the best: the best one it can
            more = self.view.get_top_k(workload, 1 + _FALLBACK_RECORDS, query)
            found = self.tvm_records(more[1:], 1)
            converted = found[0] if found else None
        return converted

    def size(self) -> int:
        return len(self.view)


def _commits_for(view: Database, tvm_version: str | None) -> TVMCommits | None:
    """The SQL door for TVM's records when commits land in an SQL database: the view itself, or
    the first layer of a union (where a union commits)."""
    from msdb.database.sql import SQLiteDatabase
    from msdb.database.tvm_commits import TVMCommits
    from msdb.database.union import OrderedUnionDatabase, UnionDatabase

    sink: Database = view
    while isinstance(sink, (UnionDatabase, OrderedUnionDatabase)):
        sink = sink.databases[0]
    if isinstance(sink, SQLiteDatabase) and not sink.read_only:
        return TVMCommits(sink, tvm_version=tvm_version)
    return None


# ---------------------------------------------------------------- TVM's class


@functools.lru_cache(maxsize=1)
def _database_class(tvm: Any) -> Any:
    """The TVM database class (built once TVM is imported): TVM's `PyDatabase` whose TVM object
    also carries the module equality (TVM's `derived_object` passes a class's `fields` first,
    so a small subclass of TVM's object puts it last, where TVM's constructor takes it)."""
    from tvm.ir.utils import derived_object
    from tvm.s_tir.meta_schedule.database.database import PyDatabase, _PyDatabase

    class _MsdbTVMObject(_PyDatabase):
        def __init__(self, module_equality: str, *methods: Any) -> None:
            super().__init__(*methods, module_equality=module_equality)

    class _Base(PyDatabase):
        _tvm_metadata = {**PyDatabase._tvm_metadata, "cls": _MsdbTVMObject, "fields": ["module_equality"]}

    @derived_object
    class MsdbTVMDatabase(_Base):
        """msdb as a TVM database (`msdb.tvm.as_tvm_database`). `msdb` is the msdb view it
        reads and writes; `close()` closes the databases `as_tvm_database` opened."""

        def __init__(self, adapter: _Adapter) -> None:
            self._adapter = adapter
            self.module_equality = adapter.tvm_mode
            self.msdb = adapter.view

        def has_workload(self, mod: Any) -> bool:
            return self._adapter.has_workload(mod)

        def commit_workload(self, mod: Any) -> Any:
            return self._adapter.commit_workload(mod)

        def commit_tuning_record(self, record: Any) -> None:
            self._adapter.commit_tuning_record(record)

        def get_top_k(self, workload: Any, top_k: int) -> list[Any]:
            return self._adapter.get_top_k(workload, top_k)

        def get_all_tuning_records(self) -> list[Any]:
            return self._adapter.get_all_tuning_records()

        def query_tuning_record(self, mod: Any, target: Any, workload_name: str | None = None) -> Any:
            return self._adapter.query_tuning_record(mod, target, workload_name)

        def __len__(self) -> int:
            return self._adapter.size()

        def close(self) -> None:
            self._adapter.close()

        def __repr__(self) -> str:
            return f"as_tvm_database({self.msdb!r})"

    return MsdbTVMDatabase
