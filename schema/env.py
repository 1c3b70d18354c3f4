"""Alembic environment for msdb's schema.

msdb runs Alembic from code (`msdb.database.migrate.alembic_config`): the caller puts its open
connection in `config.attributes["connection"]` and the migrations run inside the caller's
transaction, so opening a database upgrades it atomically. Without a connection (e.g. `alembic`
on the command line with `-x url=...` or `sqlalchemy.url` set), an engine is made from the URL.
SQLite needs batch mode to alter tables (`render_as_batch`).

The tables the migrations must agree with (for autogenerate and `alembic check`) come from the
caller too, in `config.attributes["target_metadata"]`: the schema package imports nothing of
`msdb.database` (docs/architecture.md, "Which way imports point"); without them, upgrades and
downgrades still run.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine, pool
from sqlalchemy.engine import Connection

config = context.config
target_metadata = config.attributes.get("target_metadata")


def _url() -> str:
    url = context.get_x_argument(as_dictionary=True).get("url") or config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError("no database: pass a connection in config.attributes['connection'] or -x url=...")
    return url


def _configure(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )


def run_migrations_offline() -> None:
    """Emit SQL for a URL without connecting (`alembic upgrade --sql`)."""
    context.configure(url=_url(), target_metadata=target_metadata, literal_binds=True,
                      dialect_opts={"paramstyle": "named"}, render_as_batch=_url().startswith("sqlite"))
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    """Run the migrations on the caller's connection, or on a fresh engine for the URL."""
    connection = config.attributes.get("connection")
    if connection is not None:
        _configure(connection)
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = create_engine(_url(), poolclass=pool.NullPool)
    with engine.connect() as connection:
        _configure(connection)
        with context.begin_transaction():
            context.run_migrations()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
