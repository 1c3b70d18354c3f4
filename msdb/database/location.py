"""Where an msdb database is: a file path or an SQLAlchemy URL, opened the way every command
opens one (`open_database`), and what can be known about it before opening it.

Opening refuses a file path that does not exist unless it is to be created (a typo must not
leave a new, empty database behind), and turns a URL whose dialect or driver is missing into a
`DatabaseOpenError` naming it (with any password hidden) instead of SQLAlchemy's traceback.
"""

from __future__ import annotations

import os
from pathlib import Path

from sqlalchemy import create_engine
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import make_url

from msdb.database.errors import DatabaseOpenError
from msdb.database.migrate import SchemaState, schema_state
from msdb.database.sqlite import SQLiteDatabase
from msdb.errors import MsdbError

__all__ = ["open_database", "database_file", "redact", "is_behind", "remove_database_file", "where"]


def redact(location: str) -> str:
    """A URL with its password hidden (error messages end up in logs and bug reports)."""
    if "://" not in location:
        return location
    try:
        return make_url(location).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - an unparsable URL is shown as given
        return location


def where(db: SQLiteDatabase) -> str:
    """How messages name an opened database: its file, else its URL without the password."""
    return str(db.path) if db.path is not None else redact(db.url)


def database_file(location: str) -> Path | None:
    """The file behind a path or an sqlite URL; None for other URLs and in-memory SQLite."""
    if "://" not in location:
        return Path(location).expanduser()
    if not location.startswith("sqlite"):
        return None
    try:
        database = make_url(location).database
    except Exception:  # noqa: BLE001 - let SQLiteDatabase report a malformed URL
        return None
    if not database or database == ":memory:" or database.startswith("file:"):
        return None
    return Path(database).expanduser()


def open_database(location: str | os.PathLike[str], *, create: bool = False) -> SQLiteDatabase:
    """Open an msdb database by file path or SQLAlchemy URL.

    `create=False` (every command that only reads, or merges from, a database) refuses a file
    path that does not exist instead of creating an empty database there. Errors are
    `DatabaseOpenError` (an `MsdbError`) naming the location.
    """
    text = os.fspath(location)
    shown = redact(text)
    if not text.strip():
        raise DatabaseOpenError("empty database location; give a file path or an SQLAlchemy URL")
    if not create:
        path = database_file(text)
        if path is not None and not path.exists():
            raise DatabaseOpenError(f"{path}: no such database file")
    try:
        return SQLiteDatabase(text)
    except MsdbError:
        raise
    except (sa_exc.ArgumentError, sa_exc.NoSuchModuleError, ImportError) as exc:
        raise DatabaseOpenError(f"cannot open database {shown!r}: {exc}") from None
    except sa_exc.SQLAlchemyError as exc:
        raise DatabaseOpenError(f"cannot open database {shown!r}: {exc.__class__.__name__}: {exc}") from None
    except OSError as exc:
        raise DatabaseOpenError(f"cannot open database {shown!r}: {exc.strerror or exc}") from None


def is_behind(location: str | os.PathLike[str]) -> bool:
    """Whether `location` holds an msdb database at an older schema revision, which opening it
    would migrate. Asks `msdb.database.migrate.schema_state` through a plain engine (read-only
    for a file) instead of opening the database for msdb; anything that cannot be read is
    False: opening it then says what is wrong."""
    text = os.fspath(location)
    path = database_file(text)
    if path is not None and not path.is_file():
        return False
    url = f"sqlite:///file:{path.resolve()}?mode=ro&uri=true" if path is not None else text
    try:
        engine = create_engine(url)
    except (sa_exc.ArgumentError, sa_exc.NoSuchModuleError, ImportError):
        return False
    try:
        with engine.connect() as conn:
            return schema_state(conn)[0] is SchemaState.BEHIND
    except sa_exc.SQLAlchemyError:
        return False
    finally:
        engine.dispose()


def remove_database_file(path: Path) -> None:
    """Remove a database file this process created and its SQLite companions (`-wal`, `-shm`):
    an operation refused after creating it leaves no new, empty database behind."""
    for leftover in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        leftover.unlink(missing_ok=True)
