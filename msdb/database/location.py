"""Where an msdb database is: a file path or an SQLAlchemy URL, opened the way every command
opens one (`open_database`), and what can be known about it before opening it.

Opening refuses a file path that does not exist unless it is to be created (a typo must not
leave a new, empty database behind), and turns a URL whose dialect or driver is missing into a
`DatabaseOpenError` naming it (with any password hidden) instead of SQLAlchemy's traceback; an
unknown URL scheme says which schemes work. Commands that only read open read-only (see
`open_database`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

from sqlalchemy import create_engine
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import make_url

from msdb.database.errors import DatabaseOpenError
from msdb.database.migrate import SchemaState, schema_state
from msdb.database.sql import SQLiteDatabase
from msdb.database.urls import redact, writable
from msdb.errors import MsdbError

if TYPE_CHECKING:
    from msdb.staging import StagingDir

__all__ = ["open_database", "database_file", "is_behind", "remove_database_file", "where", "is_in_memory",
           "refuse_in_memory"]


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


def open_database(location: str | os.PathLike[str], *, create: bool = False,
                  read_only: bool = False) -> SQLiteDatabase:
    """Open an msdb database by file path or SQLAlchemy URL.

    `create=False` (every command that only reads, or merges from, a database) refuses a file
    path that does not exist instead of creating an empty database there. `read_only=True`
    (`ls`, `show`, `verify`, `export`, `plot`, a merge's sources) also never creates, migrates
    or switches the journal mode of what it opens: SQLite opens the file with `mode=ro`, and
    with `immutable=1` where this user cannot write the file or its folder (a read-only
    mount), so a database on read-only storage can be browsed; `immutable=1` assumes nobody
    writes the file meanwhile (docs/architecture.md, "Databases"). A file that is not yet an
    msdb database is refused, unchanged. Errors are `DatabaseOpenError` (an `MsdbError`)
    naming the location.
    """
    text = os.fspath(location)
    shown = redact(text)
    if not text.strip():
        raise DatabaseOpenError("empty database location; give a file path or an SQLAlchemy URL")
    if create and read_only:
        raise ValueError("open_database: create=True and read_only=True exclude each other")
    if not create:
        path = database_file(text)
        if path is not None and not path.exists():
            raise DatabaseOpenError(f"{path}: no such database file")
    try:
        return SQLiteDatabase(text, read_only=read_only)
    except MsdbError:
        raise
    except sa_exc.NoSuchModuleError as exc:
        raise DatabaseOpenError(f"cannot open database {shown!r}: {_missing_dialect(text, exc)}") from None
    except (sa_exc.ArgumentError, ImportError) as exc:
        raise DatabaseOpenError(f"cannot open database {shown!r}: {exc}") from None
    except sa_exc.SQLAlchemyError as exc:
        raise DatabaseOpenError(f"cannot open database {shown!r}: {exc.__class__.__name__}: {exc}") from None
    except OSError as exc:
        raise DatabaseOpenError(f"cannot open database {shown!r}: {exc.strerror or exc}") from None


def _missing_dialect(location: str, exc: Exception) -> str:
    """Why SQLAlchemy has no dialect for a URL: a scheme it does not know at all (say which
    work), or a known one whose driver is not installed (SQLAlchemy's own words)."""
    from importlib.metadata import entry_points

    import sqlalchemy.dialects

    scheme = location.split("://", 1)[0]
    dialect = scheme.partition("+")[0].lower()
    known = sorted({*sqlalchemy.dialects.__all__, "mariadb"}
                   | {ep.name.partition(".")[0] for ep in entry_points(group="sqlalchemy.dialects")})
    if dialect in known:
        return str(exc)
    return (f"unknown URL scheme {scheme + '://'!r}; give a file path or an SQLAlchemy URL such as "
            f"sqlite:///PATH or postgresql://USER@HOST/DB (schemes: {', '.join(s + '://' for s in known)})")


def is_behind(location: str | os.PathLike[str]) -> bool:
    """Whether `location` holds an msdb database at an older schema revision, which opening it
    would migrate. Asks `msdb.database.migrate.schema_state` through a plain engine (read-only
    for a file) instead of opening the database for msdb; anything that cannot be read is
    False: opening it then says what is wrong."""
    text = os.fspath(location)
    path = database_file(text)
    if path is not None and (not path.is_file() or not writable(path)):
        return False  # a file this user cannot write: a mode=ro reader would leave -wal/-shm beside it
    url = f"sqlite:///file:{quote(str(path.resolve()), safe='/')}?mode=ro&uri=true" if path is not None else text
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


def is_in_memory(location: str | os.PathLike[str]) -> bool:
    """Whether `location` is an in-memory SQLite database (`sqlite://`, `sqlite:///:memory:`,
    `sqlite:///file:NAME?mode=memory&uri=true`), which vanishes when the process ends."""
    text = os.fspath(location)
    if "://" not in text or not text.startswith("sqlite"):
        return False
    try:
        url = make_url(text)
    except Exception:  # noqa: BLE001 - opening reports a malformed URL
        return False
    database = url.database or ""
    if database in ("", ":memory:"):
        return True
    return database.startswith("file:") and (database.startswith("file::memory:")
                                             or url.query.get("mode") == "memory")


def stage_new_file(file: Path, kind: str, location: str | None = None) -> tuple[StagingDir, Path, str]:
    """Where `kind` ("import", "merge", "pull": `msdb.staging.NEW_DATABASE_KINDS`) builds the new
    database `file`: a locked staging folder beside it (what killed commands left for it removed
    first), the file in it, and that file as a location to open (the `location` URL with its
    database swapped, when the user gave a URL). Linked into place once complete, so a failed
    or killed command leaves no file (docs/architecture.md, "Processes, temporary files and
    interrupts"). `DatabaseOpenError` when the folder does not exist or cannot take one."""
    from msdb.staging import stage_new_database

    if not file.parent.is_dir():
        raise DatabaseOpenError(f"cannot create database {file}: folder {file.parent} does not exist")
    try:
        stage = stage_new_database(file, kind)
    except OSError as exc:
        raise DatabaseOpenError(f"cannot create database {file}: {exc.strerror or exc}") from None
    temp = stage.path / file.name
    if location is None or "://" not in location:
        return stage, temp, str(temp)
    return stage, temp, make_url(location).set(database=str(temp)).render_as_string(hide_password=False)


def refuse_in_memory(location: str | os.PathLike[str], command: str) -> None:
    """Raise `DatabaseOpenError` for an in-memory database given to a command whose result
    lives in the database (`msdb import`, a merge's DEST, `msdb tune`, `msdb prune`): it would
    report success and keep nothing."""
    if is_in_memory(location):
        raise DatabaseOpenError(
            f"{os.fspath(location)} is an in-memory database: what {command} writes there vanishes when the "
            "command ends; give a file path (e.g. msdb.sqlite) or a server URL")
