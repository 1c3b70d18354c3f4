"""`msdb publish`, `msdb pull`: share a database as a read-only hub snapshot, and sync from a hub."""

from __future__ import annotations

import click

__all__ = ["publish_command", "pull_command"]


@click.command(name="publish")
@click.argument("db", metavar="DB")
@click.argument("outdir", metavar="OUTDIR", type=click.Path(file_okay=False))
@click.option("--keep-provenance", is_flag=True,
              help="Keep who imported or tuned records, on which host, from which files (default: left out).")
def publish_command(db: str, outdir: str, keep_provenance: bool) -> None:
    """Write a read-only snapshot of DB into OUTDIR for a hub.

    OUTDIR gets snapshot.sqlite (a consistent copy; private provenance left out unless
    --keep-provenance), manifest.json (versions, counts, sha256) and metadata.json for
    datasette. OUTDIR is written whole or not at all; an earlier publish there is replaced.
    Prints the command that serves it immutable with SQL off.

    \b
    Example:
        msdb publish team.sqlite hub/
    """
    from msdb.hub.publish import publish

    result = publish(db, outdir, keep_provenance=keep_provenance)
    counts = result.manifest["counts"]
    click.echo(f"published {counts['tuning_record']} records of {counts['workload']} workloads to {result.outdir} "
               f"(sha256 {result.manifest['sha256']})")
    click.echo("serve it with:")
    click.echo(f"  {result.command()}")


@click.command(name="pull")
@click.argument("url", metavar="URL")
@click.argument("db", metavar="DB")
@click.option("--timeout", "timeout_s", type=float, default=30.0, show_default=True, metavar="S",
              help="Seconds one request to the hub may take.")
@click.option("--user", metavar="U", help="Recorded on the pull source row (default: the current user).")
@click.option("--host", metavar="H", help="Likewise, the host.")
def pull_command(url: str, db: str, timeout_s: float, user: str | None, host: str | None) -> None:
    """Pull the records of the hub at URL that DB lacks into DB.

    URL is the hub's base URL (http://host:port/); DB is created if missing. Records are read
    in pages after the last one pulled from URL, deduplicated as `msdb merge` does, and
    committed page by page: an interrupted pull keeps what it committed, and pulling again goes
    on from there.

    \b
    Example:
        msdb pull http://hub.lab:8001/ msdb.sqlite
    """
    from msdb.cli.common import ProgressBars
    from msdb.database.location import refuse_in_memory
    from msdb.hub.pull import pull

    refuse_in_memory(db, "msdb pull")
    with ProgressBars() as progress:
        summary = pull(url, db, timeout_s=timeout_s, user=user, host=host, progress=progress)
    click.echo(summary.line())
