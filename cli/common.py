"""What the `msdb` commands share: opening databases, the --target option, progress bars.

Only click is imported here at module level, so `msdb --help` stays fast; the library (and
SQLAlchemy behind it) loads inside the commands.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Callable

import click

from msdb.errors import MsdbError

if TYPE_CHECKING:
    from msdb.database.sql import SQLiteDatabase
    from msdb.records import Target

__all__ = ["PROGRESS_THRESHOLD", "OptionError", "open_db", "parse_target", "target_option", "err", "ProgressBars",
           "stderr_is_terminal"]

#: Operations on more records than this draw a progress bar on stderr.
PROGRESS_THRESHOLD = 5000


class OptionError(MsdbError):
    """A command-line option with a value msdb cannot use (the message names the option)."""


def open_db(location: str, *, create: bool = False, read_only: bool = False) -> SQLiteDatabase:
    """An `SQLiteDatabase` for a path or SQLAlchemy URL (`create`: a missing file becomes a new
    database; otherwise it is an error). `read_only`: for commands that only read; nothing is
    created, migrated or written (`msdb.database.location.open_database`)."""
    from msdb.database.location import open_database

    return open_database(location, create=create, read_only=read_only)


def parse_target(_ctx: click.Context, param: click.Parameter, value: str | None) -> Target | None:
    """click callback: `--target` as a `Target` (a CLI string or a JSON config)."""
    if value is None:
        return None
    from msdb.records import Target, TargetError

    try:
        return Target(value)
    except TargetError as exc:
        raise OptionError(f"--{param.name}: {exc}") from None


def target_option(help_text: str) -> Callable[[Any], Any]:
    return click.option("--target", "target", metavar="T", callback=parse_target, expose_value=True,
                        help=help_text)


def stderr_is_terminal() -> bool:
    """Whether stderr is a terminal: progress bars are drawn only there (in a log or a pipe a
    bar is a stray line)."""
    return sys.stderr.isatty()


def err(message: str) -> None:
    """A line for the user that is not the command's result (warnings, skipped lines)."""
    click.echo(message, err=True)


class ProgressBars:
    """A `progress(phase, done, total)` callback for the library (a `msdb.interop.ProgressFn`)
    that draws one click progress bar per phase on stderr, only for phases of more than
    `PROGRESS_THRESHOLD` items and only when stderr is a terminal. Use as a context manager so
    the last bar is closed."""

    def __init__(self, threshold: int = PROGRESS_THRESHOLD) -> None:
        self.threshold = threshold
        self.enabled = stderr_is_terminal()
        self.phase: str | None = None
        self.bar: Any = None
        self.last = 0

    def __call__(self, phase: str, done: int, total: int) -> None:
        if phase != self.phase:
            self.close()
            self.phase = phase
            self.last = 0
            if self.enabled and total > self.threshold:
                self.bar = click.progressbar(length=total, label=phase, file=sys.stderr)
                self.bar.__enter__()
        if self.bar is not None and done > self.last:
            self.bar.update(done - self.last)
            self.last = done

    def close(self) -> None:
        if self.bar is not None:
            self.bar.__exit__(None, None, None)
            self.bar = None

    def __enter__(self) -> ProgressBars:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
