"""Entry point of the `msdb` console script.

The group turns every error a user can cause (`MsdbError`, file-system errors, database driver
errors) into one `Error: ...` line on stderr with exit status 1, as sqlite-utils turns its
library exceptions into `click.ClickException`s; `msdb --debug ...` shows the traceback instead.
Usage errors too (a bad option value such as `--trials 0`, a missing argument, a file where a
folder is expected, an unknown command): click would print a usage block and exit 2; msdb prints
click's message, which names the option, and where the command's help is, on one line, with
exit status 1 like every other error (the README promises one line and status 1).
Commands live in `commands_*.py` and import the library only when they run.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import click

from msdb import __version__
from msdb.cli.commands_browse import ls_command, show_command
from msdb.cli.commands_compile import compile_command
from msdb.cli.commands_cost_model import train_cost_model_command
from msdb.cli.commands_hub import serve_command
from msdb.cli.commands_interop import export_command, import_command, merge_command
from msdb.cli.commands_maintain import migrate_command, prune_command, verify_command
from msdb.cli.commands_sample import sample_command
from msdb.cli.commands_share import publish_command, pull_command
from msdb.cli.commands_tune import plot_command, tune_command
from msdb.errors import MsdbError

__all__ = ["cli", "MsdbGroup", "user_error_message", "usage_error_line"]

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"]}


def _one_line(text: str) -> str:
    return " ".join(part.strip() for part in str(text).splitlines() if part.strip()) or "unknown error"


def user_error_message(exc: BaseException) -> str | None:
    """The `Error:` text for an exception a user caused, or None for a bug (traceback)."""
    if isinstance(exc, MsdbError):
        return _one_line(str(exc))
    if isinstance(exc, OSError) and not isinstance(exc, (BlockingIOError, ChildProcessError)):
        where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
        return _one_line(f"{where}{exc.strerror or exc}")
    sa_exc = sys.modules.get("sqlalchemy.exc")
    if sa_exc is not None and isinstance(exc, sa_exc.SQLAlchemyError):
        orig = getattr(exc, "orig", None)
        return _one_line(f"database error: {orig if orig is not None else exc}")
    return None


def usage_error_line(exc: click.UsageError) -> click.ClickException:
    """A usage error as one `Error:` line with exit status 1: click's message (it names the
    option or argument) and the help command of the command it is about."""
    where = exc.ctx.command_path if exc.ctx is not None else "msdb"
    message = _one_line(exc.format_message()).rstrip(".")
    return click.ClickException(f"{message}; see '{where} --help'")


class MsdbGroup(click.Group):
    """A click group that prints user errors as one line (see the module docstring)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.exceptions.NoArgsIsHelpError:
            raise  # `msdb` alone: the help
        except click.UsageError as exc:
            raise usage_error_line(exc) from None

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.exceptions.NoArgsIsHelpError:
            raise
        except click.UsageError as exc:
            raise usage_error_line(exc) from None
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except Exception as exc:
            message = user_error_message(exc)
            if message is None or (ctx.obj or {}).get("debug"):
                raise
            raise click.ClickException(message) from None


@click.group(cls=MsdbGroup, context_settings=CONTEXT_SETTINGS)
@click.version_option(__version__, prog_name="msdb")
@click.option("--debug", is_flag=True, help="Show tracebacks and debug logging instead of one-line errors.")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """msdb: a tuning database for TVM MetaSchedule records.

    Import and merge MetaSchedule logs into one SQLite database, browse and share them, and
    query them at compile time. Every DB argument is a file path or an SQLAlchemy URL.

    \b
    Example:
        msdb import msdb.sqlite examples/team_logs/team_a
        msdb ls msdb.sqlite
    """
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug
    if debug:
        logging.basicConfig(level=logging.DEBUG, format="%(levelname)s %(name)s: %(message)s")


for _command in (import_command, merge_command, export_command, ls_command, show_command, verify_command,
                 prune_command, migrate_command, tune_command, plot_command, publish_command, pull_command,
                 serve_command, compile_command, train_cost_model_command, sample_command):
    cli.add_command(_command)


if __name__ == "__main__":  # pragma: no cover
    cli()
