"""Entry point of the `msdb` console script."""

from __future__ import annotations

import click

from msdb import __version__

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"]}


@click.group(context_settings=CONTEXT_SETTINGS)
@click.version_option(__version__, prog_name="msdb")
def cli() -> None:
    """msdb: a tuning database for TVM MetaSchedule records.

    Import and merge MetaSchedule logs into one SQLite database, browse and share them, and
    query them at compile time.
    """


if __name__ == "__main__":  # pragma: no cover
    cli()
