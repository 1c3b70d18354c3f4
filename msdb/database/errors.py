"""Errors of the database layer; all are `MsdbError`s so the CLI prints them as one line."""

from __future__ import annotations

from msdb.errors import MsdbError
from msdb.kinds import UnknownKind

__all__ = [
    "DatabaseError", "DatabaseOpenError", "ReadOnlyDatabase", "SchemaVersionError", "WorkloadNotCommitted",
    "UnsupportedOperation", "UnknownDatabaseKind", "InvalidQuery", "BadRecordLine",
]


class DatabaseError(MsdbError):
    """A database operation msdb refuses; the base of the database errors."""


class DatabaseOpenError(DatabaseError):
    """A file or URL msdb cannot open as an msdb database; nothing in it was changed."""


class ReadOnlyDatabase(DatabaseError):
    """A write to a database opened read-only, or to a file this user cannot write; nothing was changed."""


class SchemaVersionError(DatabaseOpenError):
    """The database's schema revision is unknown to this msdb (written by a newer msdb?)."""


class WorkloadNotCommitted(DatabaseError):
    """A tuning record whose workload was never committed to this database."""


class UnsupportedOperation(DatabaseError):
    """This kind of database view does not do that (e.g. committing to a ScheduleFnDatabase)."""


class UnknownDatabaseKind(DatabaseError, UnknownKind):
    """`Database.create` got a kind it does not know."""


class InvalidQuery(DatabaseError, ValueError):
    """A query argument out of range (k < 0, an unknown query kind, ...)."""


class BadRecordLine(DatabaseError):
    """A line of a TVM JSON database file that cannot be read; the message names file:line."""

    def __init__(self, path: str, line: int, reason: str) -> None:
        self.path = path
        self.line = line
        self.reason = reason
        super().__init__(f"{path}:{line}: {reason}")
