"""`SQLDatabase` (also `SQLiteDatabase`): msdb's tuning database in SQL, an SQLite file by
default or any SQLAlchemy URL (PostgreSQL for a team server). This module is the class: opening
(what a file is checked for before a byte is written, read-only opening), workloads, targets,
records and their queries. Its connection layer is `msdb.database.engine`, its bulk INSERT and
COPY paths `msdb.database.bulk`, what a location names `msdb.database.urls`; how it all works:
docs/architecture.md, "Databases"."""

from __future__ import annotations

import contextlib
import functools
import logging
import os
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Sequence

from sqlalchemy import Integer, bindparam, func, select, true, union_all
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import URL, Connection, Engine

from msdb.database import models as M
from msdb.database.base import RELATIVES_LIMIT, Database, Relative, check_limit
from msdb.database.bulk import bulk_cache_kib, insert_record_params
from msdb.database.engine import (
    BUSY_TIMEOUT_S, PAGE_SIZE, check_file, create_database_engine, is_read_only_error, remove_idle_wal, set_wal,
    write_connection,
)
from msdb.database.errors import DatabaseError, DatabaseOpenError, ReadOnlyDatabase, SchemaVersionError, WorkloadNotCommitted
from msdb.database.migrate import HEAD, SchemaState, schema_state, upgrade
from msdb.database.rows import (
    HASH_COLUMNS, SOURCE_KINDS, default_host, default_user, ensure_task, find_workload_id, insert_row, insert_source,
    stored_ir, workload_row,
)
from msdb.database.targets import MAX_TARGET_ID, TargetTable
from msdb.database.urls import read_only_url, redact, resolve_url, writable
from msdb.records import Target, TuningRecord, Workload
from msdb.version import __version__ as MSDB_VERSION

if TYPE_CHECKING:
    from msdb.database.admission import Admission, StorageFields
    from msdb.ir.function import IRModule, PrimFunc

__all__ = ["SQLDatabase", "SQLiteDatabase", "SOURCE_KINDS"]

logger = logging.getLogger(__name__)


# Statements of the query path, built once (SQLAlchemy then reuses their compiled form).
_WORKLOAD_IDS = {
    mode: select(M.workload.c.id).where(column == bindparam("h")).order_by(M.workload.c.id)
    for mode, column in HASH_COLUMNS.items()
}
_WORKLOAD_IDS_AND_TARGETS = {
    mode: select(M.workload.c.id, MAX_TARGET_ID.scalar_subquery()).where(column == bindparam("h"))
    .order_by(M.workload.c.id)
    for mode, column in HASH_COLUMNS.items()
}


class SQLDatabase(Database):
    """A tuning database in SQLite (default) or any SQLAlchemy database URL.

    `SQLiteDatabase("tuning.db", module_equality="structural")`. What opening checks, what
    `read_only=True` guarantees and how queries use the indexes: docs/architecture.md,
    "Databases".
    """

    def __init__(self, path_or_url: str | os.PathLike[str], module_equality: str = "structural", *,
                 echo: bool = False, busy_timeout_s: float = BUSY_TIMEOUT_S, read_only: bool = False) -> None:
        super().__init__(module_equality)
        self.url, self.path, url_read_only = resolve_url(path_or_url)
        self._read_only_asked = read_only or url_read_only
        self._where = str(self.path) if self.path is not None else redact(self.url)  # no password in messages
        unwritable = False
        if self.path is not None:
            check_file(self.path, must_exist=self._read_only_asked)
            if self.path.exists():
                unwritable = not writable(self.path)
            elif not os.access(self.path.parent, os.W_OK):
                raise ReadOnlyDatabase(f"cannot create database {self.path}: this user cannot write its folder "
                                       f"{self.path.parent} (permissions, a read-only mount)")
        #: Nothing is written: asked for, or a file this user cannot write (which can still be read).
        self.read_only = self._read_only_asked or unwritable
        engine_url: URL | str = self.url
        self._cleanup_wal = False
        if self.read_only and self.path is not None and not url_read_only:
            engine_url = read_only_url(self.url, self.path, immutable=unwritable)
            self._cleanup_wal = not unwritable
        self._engine = create_database_engine(engine_url, echo=echo, busy_timeout_s=busy_timeout_s)
        self._busy_timeout_s = busy_timeout_s
        self._key = object()
        self._workloads: dict[int, Workload] = {}
        self._targets = TargetTable()
        self._args_cache: dict[str, Any] = {}
        self._undo: list[Callable[[], None]] = []
        try:
            self._open()
        except sa_exc.DatabaseError as exc:
            self.close()
            if is_read_only_error(exc):
                raise self._read_only_error() from None
            raise DatabaseOpenError(f"{self._where} cannot be opened as a database: {exc.orig}; nothing was changed") from None
        except BaseException:
            self.close()
            raise

    # ---- opening ----
    def _open(self) -> None:
        with self._engine.connect() as conn:
            state, revision, tables = schema_state(conn)
        self._refuse(state, revision, tables)
        if self.read_only:
            self._refuse_read_only(state, revision)
            return
        if state is SchemaState.EMPTY:
            self._set_wal(page_size=PAGE_SIZE)
        if state in (SchemaState.EMPTY, SchemaState.BEHIND):
            with self._write() as conn:
                state, revision, tables = schema_state(conn)  # another process may have done it
                self._refuse(state, revision, tables)
                if state is not SchemaState.CURRENT:
                    logger.info("%s: migrating schema from %s to %s", self._where, revision or "nothing", HEAD)
                    upgrade(conn)
        self._set_wal()

    def _refuse(self, state: SchemaState, revision: str | None, tables: list[str]) -> None:
        if state is SchemaState.FOREIGN:
            shown = ", ".join(tables[:8]) + (", ..." if len(tables) > 8 else "")
            raise DatabaseOpenError(f"{self._where} is a database of another application (tables: {shown}), "
                                    "not an msdb database; nothing was changed")
        if state is SchemaState.UNKNOWN_REVISION:
            raise SchemaVersionError(
                f"{self._where} has schema revision {revision!r}, which msdb {MSDB_VERSION} does not know "
                f"(its newest is {HEAD!r}); it was written by a newer msdb or another application. "
                "Upgrade msdb to open it; nothing was changed")

    def _refuse_read_only(self, state: SchemaState, revision: str | None) -> None:
        """A read-only open takes only a database at this msdb's schema: creating or upgrading
        one is a write (docs/architecture.md, "Databases")."""
        if state in (SchemaState.EMPTY, SchemaState.BEHIND) and not self._read_only_asked:
            raise self._read_only_error()  # a writer's open of a file it cannot write
        if state is SchemaState.EMPTY:
            empty_file = self.path is not None and self.path.stat().st_size == 0
            what = "an empty file (0 bytes)" if empty_file else "an empty database (no tables)"
            raise DatabaseOpenError(
                f"{self._where} is {what}, not an msdb database; it was opened read-only and nothing was "
                "changed (`msdb import` or `msdb migrate` creates the schema)")
        if state is SchemaState.BEHIND:
            raise DatabaseOpenError(
                f"{self._where} has msdb schema revision {revision or 'none'}, older than this msdb's {HEAD}; "
                f"it was opened read-only, so it was not upgraded and nothing was changed: run `msdb migrate` on it "
                "first")

    def _read_only_error(self) -> ReadOnlyDatabase:
        if self._read_only_asked:
            return ReadOnlyDatabase(f"{self._where} was opened read-only; open it without read_only=True to write")
        return ReadOnlyDatabase(
            f"{self._where}: attempt to write a readonly database: this user cannot write the file or its folder "
            "(permissions, a read-only mount); nothing was changed")

    def _set_wal(self, page_size: int | None = None) -> None:
        """WAL mode for an SQLite file (`msdb.database.engine.set_wal`); a read-only file raises
        `ReadOnlyDatabase` naming it."""
        import sqlite3

        if self._engine.dialect.name != "sqlite" or self.path is None:
            return
        try:
            set_wal(self._engine, where=self._where, busy_timeout_s=self._busy_timeout_s, page_size=page_size)
        except sqlite3.OperationalError as exc:
            if is_read_only_error(exc):
                raise self._read_only_error() from None
            raise

    @contextlib.contextmanager
    def _write(self, *, cache_kib: int | None = None) -> Iterator[Connection]:
        """A connection in a write transaction (`msdb.database.engine.write_connection`: BEGIN
        IMMEDIATE on SQLite, the advisory lock on PostgreSQL), committed on exit. If it rolls
        back, the ids cached for rows it inserted are forgotten too. `cache_kib`: SQLite's page
        cache for the transaction (see `msdb.database.bulk.bulk_cache_kib`). A database opened
        read-only, or a file this user cannot write, raises `ReadOnlyDatabase` naming the file."""
        if self.read_only:
            raise self._read_only_error()
        undo: list[Callable[[], None]] = []
        self._undo = undo
        try:
            with write_connection(self._engine, cache_kib=cache_kib) as conn:
                yield conn
        except BaseException as exc:
            for action in reversed(undo):
                action()
            if isinstance(exc, sa_exc.OperationalError) and is_read_only_error(exc):
                raise self._read_only_error() from None
            raise
        finally:
            self._undo = []

    @contextlib.contextmanager
    def write_transaction(self, *, records: int = 0) -> Iterator[Connection]:
        """A connection in one write transaction (BEGIN IMMEDIATE on SQLite), committed on exit
        and rolled back on any exception, for writers that insert rows themselves (import,
        merge, prune). `records`: about how many records it will insert, to size SQLite's page
        cache for the transaction as a bulk commit does (see `msdb.database.bulk.bulk_cache_kib`)."""
        with self._write(cache_kib=bulk_cache_kib(records) if records else None) as conn:
            yield conn

    @contextlib.contextmanager
    def _read(self) -> Iterator[Connection]:
        """A connection in a read transaction (one consistent snapshot)."""
        with self._engine.connect() as conn:
            yield conn

    def close(self) -> None:
        self._engine.dispose()
        if self._cleanup_wal:
            self._cleanup_wal = False
            assert self.path is not None  # only a read-only open of a file cleans up
            remove_idle_wal(self.path, where=self._where, busy_timeout_s=self._busy_timeout_s)

    @property
    def engine(self) -> Engine:
        """The SQLAlchemy engine (for tools such as `msdb migrate`, tests and the hub)."""
        return self._engine

    # ---- workloads ----
    def _workload(self, conn: Connection, workload_id: int, row: Any = None) -> Workload:
        """The stored workload token of a row (cached; its IR is decoded on first use)."""
        cached = self._workloads.get(workload_id)
        if cached is not None:
            return cached
        if row is None:
            w = M.workload.c
            row = conn.execute(select(w.shash, w.ignore_tensor_hash, w.anchor_hash, w.name, w.tvm_payload, w.tvm_shash)
                               .where(w.id == workload_id)).one()
        workload = Workload(
            hashes={"structural": row.shash, "ignore-tensor": row.ignore_tensor_hash, "anchor-block": row.anchor_hash},
            loader=lambda: self._load_ir(workload_id), name=row.name, tvm_payload=row.tvm_payload,
            tvm_shash=row.tvm_shash)
        workload._db_ids[self._key] = workload_id
        self._workloads[workload_id] = workload
        return workload

    def _load_ir(self, workload_id: int) -> IRModule:
        with self._read() as conn:
            return stored_ir(conn, workload_id, label=f"{self._where}: workload")

    def _workload_ids(self, conn: Connection, workload: Workload) -> list[int]:
        """Rows equal to `workload` under the view's module equality (by hash)."""
        rows = conn.execute(_WORKLOAD_IDS[self.module_equality], {"h": workload.hash(self.module_equality)})
        return [row[0] for row in rows]

    def _lookup(self, conn: Connection, workload: Workload) -> list[int]:
        """`_workload_ids`, refreshing the target cache in the same round trip (a query needs both)."""
        rows = conn.execute(_WORKLOAD_IDS_AND_TARGETS[self.module_equality],
                            {"h": workload.hash(self.module_equality)}).all()
        if rows and (rows[0][1] or 0) > self._targets.max_id:
            self._targets.refresh(conn, rows[0][1])
        return [row[0] for row in rows]

    def has_workload(self, mod: IRModule | PrimFunc | Workload) -> bool:
        workload = Workload.coerce(mod)
        if self._key in workload._db_ids:
            return True
        with self._read() as conn:
            return bool(self._workload_ids(conn, workload))

    def commit_workload(self, mod: IRModule | PrimFunc | Workload) -> Workload:
        workload = Workload.coerce(mod)
        known = workload._db_ids.get(self._key)
        if known is not None and known in self._workloads:
            return self._workloads[known]
        with self._write() as conn:
            return self._commit_workload(conn, workload)

    def _stored_workload_id(self, conn: Connection, workload: Workload) -> int | None:
        """The row of a workload equal to `workload` under the view's module equality."""
        known = workload._db_ids.get(self._key)
        if known is not None:
            return known
        mode = self.module_equality
        workload_id = find_workload_id(conn, workload.hash(mode), lambda wid: self._workload(conn, wid).equal(workload, mode),
                                       mode=mode)
        if workload_id is not None:
            workload._db_ids[self._key] = workload_id
        return workload_id

    def _commit_workload(self, conn: Connection, workload: Workload) -> Workload:
        workload_id = self._stored_workload_id(conn, workload)
        if workload_id is not None:
            return self._workload(conn, workload_id)
        from msdb.database.admission import Admission

        # the one rule of what enters a database: hashes are the IR's, never the caller's claim
        Admission(self._where, refusal=" nothing was committed").workload(workload)
        row = workload_row(workload.mod, hashes=workload.hashes, name=workload.name, tvm_payload=workload.tvm_payload,
                           tvm_shash=workload.tvm_shash)
        workload_id = insert_row(conn, M.workload, row)
        workload._db_ids[self._key] = workload_id
        self._workloads[workload_id] = workload

        def forget() -> None:
            workload._db_ids.pop(self._key, None)
            self._workloads.pop(workload_id, None)

        self._undo.append(forget)
        return workload

    def workloads(self) -> list[Workload]:
        """Every stored workload (tokens; IR decoded on use), in commit order."""
        w = M.workload.c
        with self._read() as conn:
            rows = conn.execute(select(w.id, w.shash, w.ignore_tensor_hash, w.anchor_hash, w.name, w.tvm_payload,
                                       w.tvm_shash).order_by(w.id)).all()
            return [self._workload(conn, row.id, row) for row in rows]

    # ---- targets ----
    def matching_target_ids(self, conn: Connection, target: Target | None) -> list[int]:
        """Ids of the target rows whose target `target` accepts (msdb's policy; every row for
        None), for the whole-database operations (listings, export)."""
        self._targets.refresh(conn)
        return self._targets.matching(target)

    def target_of(self, conn: Connection, target_id: int) -> Target | None:
        """The target of row `target_id`."""
        if target_id not in self._targets.targets:
            self._targets.refresh(conn)
        return self._targets.targets[target_id]

    def stored_target_id(self, conn: Connection, target: Target | None) -> int | None:
        """The id of `target`'s row (exactly its config), None when the database has none."""
        return self._targets.stored_id(conn, target)

    def stored_workload_id(self, conn: Connection, workload: Workload) -> int | None:
        """The row of a workload equal to `workload` under the view's module equality (a token
        `commit_workload` returned knows its row), None when not stored."""
        return self._stored_workload_id(conn, workload)

    def target_row_id(self, conn: Connection, target: Target | None) -> int:
        """The id of `target`'s row, inserted if new (inside a write transaction)."""
        return self._targets.row_id(conn, target, self._undo)

    def target_row_id_for_config(self, conn: Connection, config: str) -> int:
        """`target_row_id` for a canonical config as stored (a merge copies them)."""
        return self._targets.row_id_for_config(conn, config, self._undo)

    # ---- records ----
    def commit_tuning_record(self, record: TuningRecord, *, source_id: int | None = None) -> None:
        self.commit_tuning_records([record], source_id=source_id)

    def commit_tuning_records(self, records: Iterable[TuningRecord], *, source_id: int | None = None,
                              admission: Admission | None = None, skip_stored: bool = False) -> int:
        """Commit many records in one transaction (all or none); returns how many. `admission`:
        the door's own rule (`new_admission`), kept across calls by a session that commits one
        record at a time so that what it learnt of earlier records (their sketches, targets)
        is not learnt again; default a fresh one. `skip_stored`: leave out the records stored
        already (the dedup key of `msdb import`, `rows.stored_record_id`), checked inside the
        write transaction, so two writers committing one measurement store it once; the count
        returned is then of the records stored."""
        records = records if isinstance(records, list) else list(records)
        if not records:
            return 0
        fields = self._admit(records, admission or self.new_admission())
        with self._write(cache_kib=bulk_cache_kib(len(records))) as conn:
            if skip_stored:
                records, fields = self._new_records(conn, records, fields)
                if not records:
                    return 0
            insert_record_params(conn, lambda null, bools: self._record_params(conn, records, fields, source_id,
                                                                               null=null, bools=bools))
        return len(records)

    def new_admission(self) -> Admission:
        """The one rule of what enters a database (`msdb.database.admission`: the checks `msdb
        import` makes of a log line) as commits into this database apply it: it raises (no
        skipping), and says that nothing was committed."""
        from msdb.database.admission import Admission

        return Admission(self._where, refusal=" nothing was committed")

    def _admit(self, records: list[TuningRecord], admission: Admission) -> list[StorageFields]:
        """The stored fields of each record, once `admission` has admitted them all, before
        the write lock is taken; `AdmissionError` (nothing committed) for the first it
        refuses."""
        many = len(records) > 1
        fields = [admission.record(f"record {i} of {len(records)}" if many else "the record", record)
                  for i, record in enumerate(records)]
        return [admitted for admitted in fields if admitted is not None]

    def _new_records(self, conn: Connection, records: list[TuningRecord],
                     fields: list[StorageFields]) -> tuple[list[TuningRecord], list[StorageFields]]:
        """`records` (and their `fields`) less those stored already and the later copies of one
        measurement."""
        from msdb.database.rows import stored_record_id

        kept: tuple[list[TuningRecord], list[StorageFields]] = ([], [])
        seen: set[tuple[int, str | None, str, str | None]] = set()
        for record, field in zip(records, fields):
            workload_id = self._record_workload_id(conn, record.workload)
            target_id = self._targets.stored_id(conn, record.target)
            key = (workload_id, record.target.canonical_json() if record.target is not None else None, field[1],
                   field[2])
            if key in seen:
                continue
            seen.add(key)
            if target_id is None or stored_record_id(conn, workload_id, target_id, field) is None:
                kept[0].append(record)
                kept[1].append(field)
        return kept

    def _record_params(self, conn: Connection, records: list[TuningRecord], fields: list[StorageFields],
                       source_id: int | None, *, null: Any, bools: tuple[Any, Any]) -> list[Any]:
        """The `tuning_record` values of `records`, flat, `RECORD_COLUMNS` per record, with NULL
        spelled `null` and False/True as `bools` (`msdb.database.bulk.insert_record_params`); new
        targets are inserted on the way.

        This loop is most of a bulk commit's Python time. Records of a batch usually share
        their workload, target and arg-info objects, so each of those is resolved (row id
        looked up, arg infos serialized) once per object, keyed by `id()` (the objects live as
        long as `records`); the rest is `fields`, each record's `TuningRecord.storage_fields`
        as admission computed them (which neither parses nor re-serializes the trace)."""
        from msdb.schedule.tvm_json import dumps

        workload_ids: dict[int, int] = {}
        target_ids: dict[int, int] = {}
        args_text: dict[int, str] = {}
        source = null if source_id is None else source_id
        params: list[Any] = []
        extend = params.extend
        for record, (trace, trace_hash, run_text, mean, valid) in zip(records, fields):
            workload = record.workload
            workload_id = workload_ids.get(id(workload))
            if workload_id is None:
                workload_id = workload_ids[id(workload)] = self._record_workload_id(conn, workload)
            target = record.target
            target_id = target_ids.get(id(target))
            if target_id is None:
                target_id = target_ids[id(target)] = self.target_row_id(conn, target)
            args_key = record.args_info_key()
            if args_key is None:
                args_json = null
            else:
                args_json = args_text.get(id(args_key))
                if args_json is None:
                    args_json = args_text[id(args_key)] = dumps(record.args_info_json())
            extend((workload_id, target_id, source, trace, trace_hash, null if run_text is None else run_text,
                    null if mean is None else mean, bools[valid], args_json))
        return params

    def _record_workload_id(self, conn: Connection, workload: Workload) -> int:
        workload_id = self._stored_workload_id(conn, workload)
        if workload_id is None:
            raise WorkloadNotCommitted(
                f"the record's workload (structural hash {workload.shash}) was not committed to {self._where}; "
                "call commit_workload(mod) first and build the record with the workload it returns")
        return workload_id

    def _record_from_row(self, conn: Connection, row: Any) -> TuningRecord:
        from msdb.schedule.tvm_json import loads

        run_secs = loads(row.run_secs) if row.run_secs is not None else None
        args = None
        if row.args_info is not None:
            args = self._args_cache.get(row.args_info)
            if args is None:
                args = self._args_cache[row.args_info] = loads(row.args_info)
        return TuningRecord(row.trace, self._workload(conn, row.workload_id), run_secs,
                            self._targets.targets.get(row.target_id), args)

    @staticmethod
    @functools.lru_cache(maxsize=64)
    def top_k_statement(pairs: int) -> Any:
        """The SELECT behind `get_top_k` for `pairs` (workload, target) pairs, with bind
        parameters `w0, t0, w1, t1, ...` and `k`: per pair an index range scan of
        `ix_tuning_record_top_k`, ordered and limited there; several pairs are merged by a
        UNION ALL of those scans (at most k rows each). Built once per shape."""
        r = M.tuning_record.c
        columns = (r.id, r.workload_id, r.target_id, r.trace, r.run_secs, r.mean_run_secs, r.args_info)
        k = bindparam("k", type_=Integer)

        def one(i: int) -> Any:
            return (select(*columns)
                    .where(r.workload_id == bindparam(f"w{i}", type_=Integer),
                           r.target_id == bindparam(f"t{i}", type_=Integer), r.is_valid == true())
                    .order_by(r.mean_run_secs, r.id).limit(k))

        if pairs == 1:
            return one(0)
        parts = [select(sub.c) for sub in (one(i).subquery() for i in range(pairs))]
        merged = union_all(*parts).subquery()
        return select(merged).order_by(merged.c.mean_run_secs, merged.c.id).limit(k)

    def _top_rows(self, conn: Connection, workload_ids: Sequence[int], target_ids: Sequence[int], k: int) -> list[Any]:
        pairs = [(w, t) for w in workload_ids for t in target_ids]
        params: dict[str, int] = {"k": k}
        for i, (workload_id, target_id) in enumerate(pairs):
            params[f"w{i}"] = workload_id
            params[f"t{i}"] = target_id
        return list(conn.execute(self.top_k_statement(len(pairs)), params))

    def _top_k(self, workload: Workload, top_k: int, target: Target | None) -> list[TuningRecord]:
        with self._read() as conn:
            workload_ids = self._lookup(conn, workload)
            if not workload_ids:
                return []
            target_ids = self._targets.matching(target)
            if not target_ids:
                return []
            return [self._record_from_row(conn, row) for row in self._top_rows(conn, workload_ids, target_ids, top_k)]

    @staticmethod
    @functools.lru_cache(maxsize=4)
    def relatives_statement(by_target: bool, with_record: bool) -> Any:
        """A SELECT behind `relatives`: the workloads of family `:family` (an index lookup on
        `ix_workload_family_hash`, whose entries run in commit order) other than the ids `:own`
        that have (`with_record`) or have not a valid record (on the target ids `:targets` when
        `by_target`), in commit order, at most `:limit`, each with the id of its best valid
        record (a correlated top-k index scan). The family is walked in index order and the walk
        stops at `:limit` rows, and the best record is looked up for those rows only: a family of
        a thousand shapes costs what its first rows cost (bench/bench_database.py)."""
        w, r = M.workload.c, M.tuning_record.c
        conditions = [r.workload_id == w.id, r.is_valid == true()]
        if by_target:
            conditions.append(r.target_id.in_(bindparam("targets", expanding=True)))
        best = (select(r.id).where(*conditions).order_by(r.mean_run_secs, r.id).limit(1)
                .correlate(M.workload).scalar_subquery())
        has_record = select(r.id).where(*conditions).correlate(M.workload).exists()
        return (select(w.id, w.family_extents, best.label("best_id"))
                .where(w.family_hash == bindparam("family"), w.id.not_in(bindparam("own", expanding=True)),
                       has_record if with_record else ~has_record)
                .order_by(w.id).limit(bindparam("limit", type_=Integer)))

    lists_relatives = True

    def relatives(self, workload: IRModule | PrimFunc | Workload, target: Target | str | dict[str, Any] | None = None,
                  *, limit: int = RELATIVES_LIMIT) -> list[Relative]:
        """`Database.relatives` as indexed queries (`relatives_statement`: the relatives with a
        record, then, when fewer than `limit`, those without). The family key of a
        stored workload is read from its row; one not stored is keyed from its IR. A stored
        workload without a key (an opaque TVM payload) has no relatives."""
        import json

        check_limit(limit)
        asked = Workload.coerce(workload)
        query = Target.coerce(target)
        w, r = M.workload.c, M.tuning_record.c
        with self._read() as conn:
            own = self._lookup(conn, asked)
            if own:
                family = conn.execute(select(w.family_hash).where(w.id == own[0])).scalar()
            else:
                family = asked.family.hash
            if family is None or limit == 0:
                return []
            params: dict[str, Any] = {"family": family, "own": own or [-1], "limit": limit}
            if query is not None:
                params["targets"] = self.matching_target_ids(conn, query)
            else:
                self._targets.refresh(conn)
            rows = list(conn.execute(self.relatives_statement(query is not None, True), params).all())
            if len(rows) < limit:  # then the ones without a record, in commit order
                params["limit"] = limit - len(rows)
                rows += conn.execute(self.relatives_statement(query is not None, False), params).all()
            best_ids = [row.best_id for row in rows if row.best_id is not None]
            records = {}
            if best_ids:
                for row in conn.execute(select(r.id, r.workload_id, r.target_id, r.trace, r.run_secs, r.args_info)
                                        .where(r.id.in_(best_ids))):
                    records[row.id] = self._record_from_row(conn, row)
            return [Relative(self._workload(conn, row.id), tuple(json.loads(row.family_extents or "[]")),
                             records.get(row.best_id)) for row in rows]

    def get_measured(self, workload: IRModule | PrimFunc | Workload,
                     target: Target | str | dict[str, Any] | None = None) -> list[TuningRecord]:
        workload = Workload.coerce(workload)
        target = Target.coerce(target)
        r = M.tuning_record.c
        with self._read() as conn:
            workload_ids = self._lookup(conn, workload)
            target_ids = self._targets.matching(target) if workload_ids else []
            if not target_ids:
                return []
            rows = conn.execute(select(r.id, r.workload_id, r.target_id, r.trace, r.run_secs, r.args_info)
                                .where(r.workload_id.in_(workload_ids), r.target_id.in_(target_ids)).order_by(r.id))
            return [self._record_from_row(conn, row) for row in rows]

    def get_all_tuning_records(self) -> list[TuningRecord]:
        r = M.tuning_record.c
        with self._read() as conn:
            self._targets.refresh(conn)
            self._prefetch_workloads(conn)
            rows = conn.execute(select(r.id, r.workload_id, r.target_id, r.trace, r.run_secs, r.args_info)
                                .order_by(r.id))
            return [self._record_from_row(conn, row) for row in rows]

    def _prefetch_workloads(self, conn: Connection) -> None:
        w = M.workload.c
        rows = conn.execute(select(w.id, w.shash, w.ignore_tensor_hash, w.anchor_hash, w.name, w.tvm_payload, w.tvm_shash))
        for row in rows:
            self._workload(conn, row.id, row)

    def __len__(self) -> int:
        with self._read() as conn:
            return int(conn.execute(select(func.count()).select_from(M.tuning_record)).scalar() or 0)

    def dump_pruned(self, destination: Database, top_k: int = 1) -> int:
        """The best `top_k` valid records of every workload and target, found with the top-k
        index per (workload, target) pair instead of reading every record."""
        if top_k < 1:
            return super().dump_pruned(destination, top_k)
        r = M.tuning_record.c
        groups: dict[tuple[str, int], list[int]] = {}
        with self._read() as conn:
            self._targets.refresh(conn)
            self._prefetch_workloads(conn)
            pairs = conn.execute(select(r.workload_id, r.target_id).where(r.is_valid == true()).distinct()
                                 .order_by(r.workload_id, r.target_id)).all()
            for workload_id, target_id in pairs:
                key = (self._workloads[workload_id].hash(self.module_equality), target_id)
                groups.setdefault(key, []).append(workload_id)
            chosen = [self._record_from_row(conn, row)
                      for (_, target_id), workload_ids in groups.items()
                      for row in self._top_rows(conn, workload_ids, [target_id], top_k)]
        return self._copy_into(destination, chosen)

    # ---- provenance, models and tasks ----
    def add_source(self, kind: str, location: str | None = None, *, sha256: str | None = None,
                   workload_sha256: str | None = None, tvm_version: str | None = None) -> int:
        """Record where the next records come from (`kind` one of `SOURCE_KINDS`; `sha256` of
        the record file, `workload_sha256` of the workload file they were read from), by this
        user on this host; pass the id to `commit_tuning_records`."""
        with self._write() as conn:
            return insert_source(conn, kind=kind, location=location, sha256=sha256, workload_sha256=workload_sha256,
                                 username=default_user(), host=default_host(), tvm_version=tvm_version)

    def add_task(self, model_name: str, task_name: str, workload: IRModule | PrimFunc | Workload,
                 weight: float = 1.0) -> int:
        """Note that model `model_name` uses `workload` as task `task_name` with `weight` (the
        workload is committed if new); returns the task id. A model uses a workload as one
        task: re-adding it (under any name) updates that task's weight; a name another
        workload's task has gets `#<workload row id>` appended (`msdb.database.rows.ensure_task`)."""
        with self._write() as conn:
            stored = self._commit_workload(conn, Workload.coerce(workload))
            return ensure_task(conn, model_name, stored._db_ids[self._key], task_name, weight)

    # ---- measurement claims (msdb.database.claims: rows of measurement_claim, leased) ----
    def claim_candidates(self, workload: IRModule | PrimFunc | Workload, target: Target | str | dict[str, Any] | None,
                         keys: Sequence[str], *, owner: str, lease_s: float | None = None) -> set[str]:
        from msdb.database.claims import CLAIM_LEASE_S, claim_rows

        if not keys:
            return set()
        with self._write() as conn:
            workload_id = self._commit_workload(conn, Workload.coerce(workload))._db_ids[self._key]
            target_id = self.target_row_id(conn, Target.coerce(target))
            return claim_rows(conn, workload_id, target_id, keys, owner, CLAIM_LEASE_S if lease_s is None else lease_s)

    def settle_claims(self, workload: IRModule | PrimFunc | Workload, target: Target | str | dict[str, Any] | None, *,
                      owner: str, measured: Iterable[str] = (), unmeasured: Iterable[str] = ()) -> None:
        from msdb.database.claims import settle_rows

        measured, unmeasured = list(measured), list(unmeasured)
        if not measured and not unmeasured:
            return
        with self._write() as conn:
            workload_id = self._commit_workload(conn, Workload.coerce(workload))._db_ids[self._key]
            target_id = self.target_row_id(conn, Target.coerce(target))
            settle_rows(conn, workload_id, target_id, owner, measured, unmeasured)

    def commit_model_tasks(self, model_name: str,
                           tasks: Sequence[tuple[str, IRModule | PrimFunc | Workload, float]]) -> list[int] | None:
        """`add_task` for every `(task_name, workload, weight)` of a model, in one transaction
        (all or none): the model row, the workloads that are new, and one task row per
        workload (an existing one gets the new weight; `msdb.database.rows.ensure_task`)."""
        tasks = list(tasks)
        if not model_name:
            raise DatabaseError("a model needs a name to record its tasks")
        with self._write() as conn:
            ids: list[int] = []
            for task_name, workload, weight in tasks:
                stored = self._commit_workload(conn, Workload.coerce(workload))
                ids.append(ensure_task(conn, model_name, stored._db_ids[self._key], task_name, float(weight)))
            return ids

    def models_using(self, workload: IRModule | PrimFunc | Workload) -> list[str]:
        """The names of the models with a task on `workload` (by its structural hash), sorted:
        where a transferred record came from, for the compile report."""
        w, t, m = M.workload.c, M.task.c, M.model.c
        statement = (select(m.name).distinct().select_from(M.task.join(M.model, m.id == t.model_id)
                                                           .join(M.workload, w.id == t.workload_id))
                     .where(w.shash == Workload.coerce(workload).shash).order_by(m.name))
        with self._read() as conn:
            return [str(name) for name in conn.execute(statement).scalars()]

    def __repr__(self) -> str:
        return f"SQLiteDatabase({self._where!r}, module_equality={self.module_equality!r})"


#: The name the class had first, when it held SQLite files only (the public API keeps it).
SQLiteDatabase = SQLDatabase
