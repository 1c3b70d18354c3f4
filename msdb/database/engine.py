"""The SQL database's connection layer: the SQLAlchemy engine with msdb's per-dialect settings
(SQLite pragmas and explicit BEGINs, PostgreSQL snapshots and the write lock), the write
transaction, the checks of a file before SQLite touches it, and WAL handling under
contention. Why each setting: docs/architecture.md, "Databases" ("SQLite settings")."""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import quote

from sqlalchemy import create_engine, event
from sqlalchemy.engine import URL, Connection, Engine

from msdb.database.errors import DatabaseOpenError

__all__ = ["SQLITE_MAGIC", "BUSY_TIMEOUT_S", "PAGE_SIZE", "CACHE_KIB", "PG_WRITE_LOCK", "dbapi_connection",
           "check_file", "is_read_only_error", "create_database_engine", "install_sqlite_settings",
           "install_postgresql_settings", "set_cache_size", "write_connection", "set_wal", "remove_idle_wal"]

logger = logging.getLogger(__name__)

SQLITE_MAGIC = b"SQLite format 3\x00"
BUSY_TIMEOUT_S = 30.0
PAGE_SIZE = 16384
CACHE_KIB = 32768
#: The key of the advisory lock every PostgreSQL write transaction takes ("msdbwrit" in ASCII).
PG_WRITE_LOCK = 0x6D73646277726974


def dbapi_connection(conn: Connection) -> Any:
    """The driver's own connection under `conn` (an open connection always has one)."""
    dbapi = conn.connection.dbapi_connection
    assert dbapi is not None
    return dbapi


def check_file(path: Path, *, must_exist: bool = False) -> None:
    """Refuse a path that cannot be an SQLite database, before SQLite touches it."""
    if path.is_dir():
        raise DatabaseOpenError(f"{path} is a directory, not a database file")
    if not path.exists():
        if must_exist:
            raise DatabaseOpenError(f"{path}: no such database file")
        if not path.parent.is_dir():
            raise DatabaseOpenError(f"cannot create database {path}: folder {path.parent} does not exist")
        return
    try:
        with open(path, "rb") as handle:
            head = handle.read(len(SQLITE_MAGIC))
    except OSError as exc:
        raise DatabaseOpenError(f"cannot read database {path}: {exc.strerror}") from None
    if head and head != SQLITE_MAGIC:
        raise DatabaseOpenError(f"{path} is not a SQLite database (it does not start with the SQLite header); "
                                "nothing was changed")


def is_read_only_error(exc: BaseException) -> bool:
    """Whether a driver error is SQLite's "attempt to write a readonly database"."""
    return "readonly database" in str(getattr(exc, "orig", None) or exc)


def create_database_engine(url: URL | str, *, echo: bool = False, busy_timeout_s: float = BUSY_TIMEOUT_S) -> Engine:
    """The engine of a database at `url`, with msdb's settings for its dialect installed."""
    driver = url if isinstance(url, str) else url.drivername
    connect_args: dict[str, Any] = {"timeout": busy_timeout_s} if driver.startswith("sqlite") else {}
    engine = create_engine(url, echo=echo, connect_args=connect_args)
    install_sqlite_settings(engine, busy_timeout_s)
    install_postgresql_settings(engine)
    return engine


def install_sqlite_settings(engine: Engine, busy_timeout_s: float) -> None:
    """Connection pragmas and explicit BEGINs for SQLite; no-ops on other dialects."""
    if engine.dialect.name != "sqlite":
        return

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # pysqlite's own transaction handling would BEGIN lazily (DEFERRED) and COMMIT before
        # DDL; we issue BEGIN ourselves in _on_begin instead (SQLAlchemy's documented recipe).
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
        cursor.execute("PRAGMA synchronous = NORMAL")
        cursor.execute("PRAGMA foreign_keys = ON")
        cursor.execute(f"PRAGMA cache_size = -{CACHE_KIB}")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Connection) -> None:
        # IMMEDIATE takes the write lock up front: a transaction that reads and then writes can
        # otherwise fail with SQLITE_BUSY without waiting (lock upgrade deadlock).
        mode = "IMMEDIATE" if connection.get_execution_options().get("msdb_write") else "DEFERRED"
        connection.exec_driver_sql(f"BEGIN {mode}")


def install_postgresql_settings(engine: Engine) -> None:
    """Read transactions on PostgreSQL see one snapshot (REPEATABLE READ), as SQLite's do: a
    merge or publish from a team server reads workloads, then records, consistently while
    tuners commit. Write transactions stay READ COMMITTED: each statement after the advisory
    lock (`write_connection`) sees every commit before it; a REPEATABLE READ snapshot would be
    taken before the lock was granted."""
    if engine.dialect.name != "postgresql":
        return

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Connection) -> None:
        if not connection.get_execution_options().get("msdb_write"):
            connection.exec_driver_sql("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")


def set_cache_size(conn: Connection, kib: int) -> None:
    """SQLite's page cache of `conn` (outside or inside a transaction; not transactional). A
    connection that cannot take it is left alone: this only tunes speed."""
    dbapi = dbapi_connection(conn)
    try:
        dbapi.execute(f"PRAGMA cache_size = -{int(kib)}")
    except conn.dialect.loaded_dbapi.Error as exc:
        logger.debug("could not set the page cache to %d KiB: %s", kib, exc)


@contextlib.contextmanager
def write_connection(engine: Engine, *, cache_kib: int | None = None) -> Iterator[Connection]:
    """A connection of `engine` in a write transaction, committed on exit: BEGIN IMMEDIATE on
    SQLite; on PostgreSQL the advisory lock first, so writers queue as SQLite's make them.
    `cache_kib` gives SQLite's page cache that size for the transaction (see
    `msdb.database.bulk.bulk_cache_kib`); after it ends the cache is set back to `CACHE_KIB`,
    which frees the pages above that."""
    with engine.connect() as conn:
        conn.execution_options(msdb_write=True)
        resized = cache_kib is not None and cache_kib > CACHE_KIB and conn.dialect.name == "sqlite"
        if resized and cache_kib is not None:
            set_cache_size(conn, cache_kib)
        try:
            with conn.begin():
                if conn.dialect.name == "postgresql":
                    conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({PG_WRITE_LOCK})")
                yield conn
        finally:
            if resized:
                set_cache_size(conn, CACHE_KIB)


def set_wal(engine: Engine, *, where: str, busy_timeout_s: float, page_size: int | None = None) -> None:
    """Switch an SQLite file to WAL mode (persistent, set once per file); a page size only for a
    new file, where it still applies (records hold a few KB of trace JSON: 4 KB pages would hold
    one each). SQLite's "attempt to write a readonly database" is raised as it comes, for the
    caller to name the file.

    Switching a file to WAL needs an exclusive lock, and SQLite answers "database is
    locked" at once, without its busy handler, when another connection holds a lock then
    (several processes opening one new file: one creates the schema while another
    switches). So the switch is retried, re-reading the mode (another process may have
    switched it meanwhile), until the busy timeout runs out, as the busy handler would."""
    import sqlite3
    import time

    deadline = time.monotonic() + busy_timeout_s
    pause = 0.001
    while True:
        raw = engine.raw_connection()
        try:
            cursor = raw.cursor()
            if page_size is not None:
                cursor.execute(f"PRAGMA page_size = {int(page_size)}")
            mode = cursor.execute("PRAGMA journal_mode").fetchone()[0]
            if str(mode).lower() != "wal":
                cursor.execute("PRAGMA journal_mode = WAL")
            cursor.close()
            return
        except sqlite3.OperationalError as exc:
            if is_read_only_error(exc) or "locked" not in str(exc):
                raise
            if time.monotonic() + pause > deadline:
                raise DatabaseOpenError(
                    f"{where}: cannot switch to WAL mode: {exc} by another connection for over "
                    f"{busy_timeout_s:g} s; nothing was changed") from None
        finally:
            raw.close()
        time.sleep(pause)  # another connection holds the lock: wait as SQLite's busy handler does
        pause = min(pause * 2, 0.1)


def remove_idle_wal(path: Path, *, where: str, busy_timeout_s: float) -> None:
    """Remove the empty `-wal` and its `-shm` of the SQLite file `path`, which a `mode=ro` reader
    makes SQLite create and cannot remove (docs/architecture.md, "Databases"): a connection
    that may write reads one row and closes, and SQLite deletes both files only if it is the
    last connection. A log with commits in it is left alone (closing last would copy them into
    the database file: a write)."""
    import sqlite3

    wal = path.with_name(path.name + "-wal")
    try:
        if not wal.exists() or wal.stat().st_size != 0:
            return
        conn = sqlite3.connect(f"file:{quote(str(path), safe='/')}?mode=rw", uri=True, timeout=busy_timeout_s)
        try:
            conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
        finally:
            conn.close()
    except (OSError, sqlite3.Error) as exc:
        logger.debug("%s: left SQLite's -wal/-shm files in place: %s", where, exc)
