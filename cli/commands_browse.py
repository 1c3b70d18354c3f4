"""`msdb ls` and `msdb show`: what a database holds."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import click

from msdb.cli.common import err, open_db, target_option

if TYPE_CHECKING:
    from msdb.records import Target

__all__ = ["ls_command", "show_command"]


@click.command(name="ls")
@click.argument("db", metavar="DB")
@target_option("Only targets that match T (msdb's target policy: same kind and device).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per row, in a JSON list, with full precision.")
def ls_command(db: str, target: Target | None, as_json: bool) -> None:
    """List the workloads of DB, one row per workload and target.

    Columns: structural hash, name, target, FLOPs, records, best latency in microseconds
    (the minimum mean run time of valid records), GFLOPS at that latency, and the number of
    provenance sources (imports, merges, tuning runs) its records came from. When no record
    matches --target, one line on stderr says which targets DB has. DB is only read.

    \b
    Example:
        msdb ls msdb.sqlite
        msdb ls msdb.sqlite --target 'llvm -num-cores=1' --json
    """
    from msdb.database.catalog import format_table, workload_listing

    database = open_db(db, read_only=True)
    try:
        listing = workload_listing(database, target=target)
    finally:
        database.close()
    for warning in listing.warnings:
        err(f"warning: {warning}")
    if as_json:
        click.echo(json.dumps([row.as_json() for row in listing.rows], indent=2))
    elif listing.no_match is None:
        click.echo(format_table(listing.rows))
    if listing.no_match is not None:
        err(listing.no_match)


@click.command(name="show")
@click.argument("db", metavar="DB")
@click.argument("workload_hash", metavar="HASH")
@target_option("Only the best records for targets that match T.")
def show_command(db: str, workload_hash: str, target: Target | None) -> None:
    """Show a workload of DB as TVMScript and its best trace as schedule code.

    HASH is msdb's structural hash from `msdb ls` (a unique prefix is enough) or TVM's
    decimal shash from a log. For every target with a valid record, the best one is printed
    as `def apply_trace(sch): ...`, the way TVM prints a trace. A note says which form the
    script is in: as imported from TVM (TVM's function attributes) or msdb's own; the hash
    ignores those attributes. DB is only read.

    \b
    Example:
        msdb show msdb.sqlite cd74d25f
        msdb show msdb.sqlite 7523732197612418965 --target llvm
    """
    from msdb.database.catalog import format_details, show_workload

    database = open_db(db, read_only=True)
    try:
        details = show_workload(database, workload_hash, target=target)
    finally:
        database.close()
    click.echo(format_details(details), nl=False)
