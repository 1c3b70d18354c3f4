"""The SQL database class's first home, kept so that `from msdb.database.sqlite import
SQLiteDatabase` goes on working: the class is `msdb.database.sql.SQLDatabase` (docs/architecture.md,
"Databases")."""

from __future__ import annotations

from msdb.database.sql import SOURCE_KINDS, SQLDatabase, SQLiteDatabase

__all__ = ["SQLDatabase", "SQLiteDatabase", "SOURCE_KINDS"]
