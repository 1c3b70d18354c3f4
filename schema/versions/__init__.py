"""Alembic migration scripts of msdb's schema, oldest first (file names are date-prefixed)."""

__all__: list[str] = []
