"""`msdb verify`, `msdb prune`, `msdb migrate`: keeping a database healthy."""

from __future__ import annotations

import click

from msdb.cli.common import ProgressBars, open_db

__all__ = ["verify_command", "prune_command", "migrate_command"]


@click.command(name="verify")
@click.argument("db", metavar="DB")
@click.option("--replay/--no-replay", default=True, show_default=True,
              help="Replay every distinct trace on its workload (the slow part).")
def verify_command(db: str, replay: bool) -> None:
    """Check DB: integrity, rehash, replay.

    Integrity: SQLite's integrity check, dangling references, and every record's stored
    trace, trace hash, mean and validity. Rehash: every workload's IR hashes to the stored
    hashes, and an imported payload still decodes to the same workload. Replay: every
    distinct trace applies to its workload. Prints one line per problem and a summary;
    exits with status 1 when there is a problem. Changes nothing.

    \b
    Example:
        msdb verify msdb.sqlite
        msdb verify msdb.sqlite --no-replay
    """
    from msdb.database.verify import verify_database

    database = open_db(db, read_only=True)
    try:
        with ProgressBars() as progress:
            report = verify_database(database, replay=replay, progress=progress)
    finally:
        database.close()
    for problem in report.problems:
        click.echo(problem)
    click.echo(report.line())
    if not report.ok:
        raise SystemExit(1)


@click.command(name="prune")
@click.argument("db", metavar="DB")
@click.option("--top-k", "top_k", type=int, required=True, metavar="N",
              help="Records to keep per workload and target (the N best valid ones).")
def prune_command(db: str, top_k: int) -> None:
    """Keep only the N best valid records per workload and target of DB.

    Every other record (failed ones included) is deleted in one transaction; workloads,
    targets and provenance stay. Like TVM's dump_pruned, in place and per target. An SQLite
    file is then compacted (VACUUM), so the space goes back to the disk; the line printed says
    the file's size before and after, or, when it could not be compacted (another process was
    using it), how to do it later. An in-memory database is refused.

    \b
    Example:
        msdb prune msdb.sqlite --top-k 5
    """
    from msdb.database.location import refuse_in_memory
    from msdb.database.maintain import prune

    refuse_in_memory(db, "msdb prune")
    database = open_db(db)
    try:
        click.echo(prune(database, top_k=top_k).line())
    finally:
        database.close()


@click.command(name="migrate")
@click.argument("db", metavar="DB")
def migrate_command(db: str) -> None:
    """Upgrade the schema of DB to this msdb's newest revision.

    Opening a database with an older schema upgrades it anyway; this does it explicitly and
    says which revision it was at. A database written by a newer msdb is refused, unchanged.

    \b
    Example:
        msdb migrate msdb.sqlite
        msdb migrate postgresql://db.lab/msdb
    """
    from msdb.database.maintain import migrate

    click.echo(migrate(db).line())
