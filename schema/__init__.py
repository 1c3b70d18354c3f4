"""msdb's SQL schema history: the Alembic environment (`env.py`) and migrations (`versions/`).

The migrations are the only definition of how the schema came to be; `msdb.database.models`
describes the head for queries, and a test checks that both agree. Alembic is configured in code
(`msdb.database.migrate.alembic_config`), with `script_location` pointing at this package's
folder, so no alembic.ini is needed.

`REVISIONS` lists every revision id in order, oldest first, and `HEAD` is the last: opening a
database compares its `alembic_version` with them without importing Alembic, which keeps
opening fast; a test checks they match the scripts.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["REVISIONS", "HEAD", "SCRIPT_LOCATION"]

#: Every revision id, oldest first.
REVISIONS: tuple[str, ...] = ("2841e53b42af", "394d00b99009", "5b0c7e1d9a42", "8c4f2a61d0b3", "079e64e30cff",
                              "6f1d2a9c4b7e")

#: The newest revision: what a database is upgraded to on open.
HEAD: str = REVISIONS[-1]

#: The folder holding env.py and versions/ (Alembic's script_location).
SCRIPT_LOCATION: str = str(Path(__file__).resolve().parent)
