"""msdb's exception hierarchy: every error a user can cause derives from `MsdbError`, so the CLI
can print it as one line (docs/architecture.md, "Command line")."""

from __future__ import annotations

__all__ = ["MsdbError", "ScriptError", "ScheduleError"]


class MsdbError(Exception):
    """Base of every error msdb raises on purpose."""


class ScriptError(MsdbError):
    """TVMScript that msdb cannot parse; carries the source line and column."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None, source_name: str = "<script>") -> None:
        self.reason = message
        self.line = line
        self.column = column
        self.source_name = source_name
        where = f"{source_name}:{line}:{column}: " if line is not None else f"{source_name}: "
        super().__init__(where + message)


class ScheduleError(MsdbError):
    """A schedule primitive was asked to do something illegal; the schedule is unchanged."""
