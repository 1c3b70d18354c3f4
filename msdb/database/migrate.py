"""Schema state and migrations of an msdb SQL database, through Alembic's API.

The schema is created and changed only by the migrations in `msdb.schema`. `schema_state`
inspects a connection without writing anything and says what opening it would do; `upgrade`
runs Alembic on the caller's connection (inside the caller's transaction), and
`alembic_config` builds the configuration in code, so no alembic.ini exists anywhere. The
configuration carries the tables of `msdb.database.models` to the Alembic environment
(`config.attributes["target_metadata"]`, for autogenerate and `alembic check`), so `msdb.schema`
imports nothing of `msdb.database`.
Alembic is imported only when a migration actually runs, which keeps opening an up-to-date
database fast.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING

from sqlalchemy import inspect, text

from msdb.schema import HEAD, REVISIONS, SCRIPT_LOCATION

if TYPE_CHECKING:
    from alembic.config import Config
    from sqlalchemy.engine import Connection

__all__ = ["SchemaState", "schema_state", "alembic_config", "upgrade", "current_revision", "HEAD", "REVISIONS"]

VERSION_TABLE = "alembic_version"


class SchemaState(enum.Enum):
    """What an inspected database is, from msdb's point of view."""

    EMPTY = "empty"              # no tables: a new database, to be created at head
    CURRENT = "current"          # at HEAD
    BEHIND = "behind"            # an older msdb revision: upgrade on open
    UNKNOWN_REVISION = "unknown_revision"  # a revision this msdb does not know (newer msdb?)
    FOREIGN = "foreign"          # tables, but no msdb revision: another application's database


def current_revision(connection: Connection) -> str | None:
    """The database's Alembic revision, or None when it has no version table or row."""
    if not inspect(connection).has_table(VERSION_TABLE):
        return None
    row = connection.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).first()
    return row[0] if row is not None else None


def schema_state(connection: Connection) -> tuple[SchemaState, str | None, list[str]]:
    """`(state, revision, table_names)` of the database behind `connection`; reads only."""
    tables = sorted(inspect(connection).get_table_names())
    if not tables:
        return SchemaState.EMPTY, None, tables
    if VERSION_TABLE not in tables:
        return SchemaState.FOREIGN, None, tables
    revision = current_revision(connection)
    if revision == HEAD:
        return SchemaState.CURRENT, revision, tables
    if revision in REVISIONS:
        return SchemaState.BEHIND, revision, tables
    if revision is None and tables == [VERSION_TABLE]:
        return SchemaState.EMPTY, None, tables
    return SchemaState.UNKNOWN_REVISION, revision, tables


def alembic_config(connection: Connection | None = None, url: str | None = None) -> Config:
    """An Alembic `Config` for msdb's migrations, with the current tables as its target
    metadata; `connection` is used by env.py when given."""
    from alembic.config import Config

    from msdb.database.models import metadata

    config = Config()
    config.set_main_option("script_location", SCRIPT_LOCATION)
    config.attributes["target_metadata"] = metadata
    if url is not None:
        config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def upgrade(connection: Connection, revision: str = "head") -> None:
    """Migrate the database behind `connection` to `revision` (in the caller's transaction)."""
    from alembic import command

    command.upgrade(alembic_config(connection), revision)
