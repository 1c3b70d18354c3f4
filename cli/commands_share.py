"""`msdb publish`, `msdb pull`: share a database as a read-only hub snapshot, and sync from a hub."""

from __future__ import annotations

import shlex

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
    It is written in a hidden folder beside OUTDIR, which Ctrl-C removes at once and the next
    publish removes if this one is killed. Prints the command that serves it immutable with
    SQL off.

    \b
    Example:
        msdb publish team.sqlite hub/
    """
    from msdb.cli.common import err
    from msdb.hub.publish import publish

    try:
        result = publish(db, outdir, keep_provenance=keep_provenance)
    except KeyboardInterrupt:
        # Ctrl-C: one line, no traceback; exit status 130, as a shell's
        err(f"Interrupted: nothing was published; {outdir} is as it was.")
        raise SystemExit(130) from None
    counts = result.manifest["counts"]
    click.echo(f"published {counts['tuning_record']} records of {counts['workload']} workloads to {result.outdir} "
               f"(sha256 {result.manifest['sha256']})")
    click.echo("serve it with:")
    click.echo(f"  msdb serve {shlex.quote(str(result.outdir))}")


@click.command(name="pull")
@click.argument("url", metavar="URL")
@click.argument("db", metavar="DB")
@click.option("--timeout", "timeout_s", type=float, default=30.0, show_default=True, metavar="S",
              help="Seconds one request to the hub may take, all of it (a hub that answers slower is cut there).")
@click.option("--skip-bad", is_flag=True, help="List records and workloads that fail msdb's checks on stderr and "
                                               "pull the rest (default: the first one stops the pull).")
@click.option("--user", metavar="U", help="Recorded on the pull source row (default: the current user).")
@click.option("--host", metavar="H", help="Likewise, the host.")
def pull_command(url: str, db: str, timeout_s: float, skip_bad: bool, user: str | None, host: str | None) -> None:
    """Pull the records of the hub at URL that DB lacks into DB.

    URL is the hub's base URL (http://host:port/); DB is created if missing. Records are read
    in pages after the last one pulled from URL, deduplicated as `msdb merge` does, and
    committed page by page: an interrupted pull keeps what it committed, and pulling again goes
    on from there. A new DB appears once the first page is committed: a pull that fails
    before leaves no file.

    The hub is not trusted: each request is limited in time (--timeout) and size, its pages
    must advance, and every record and workload passes the checks `msdb import` makes (run
    times, trace, target, args_info; a workload's hashes are recomputed from its IR). The first
    that fails stops the pull with one line naming it (pages before it stay committed), unless
    --skip-bad.

    \b
    Example:
        msdb pull http://hub.lab:8001/ msdb.sqlite
    """
    from msdb.cli.common import OptionError, ProgressBars, err
    from msdb.database.location import refuse_in_memory
    from msdb.hub.pull import pull

    if not timeout_s > 0:
        raise OptionError(f"--timeout {timeout_s:g}: the seconds a request may take must be positive")
    refuse_in_memory(db, "msdb pull")
    with ProgressBars() as progress:
        summary = pull(url, db, timeout_s=timeout_s, user=user, host=host, progress=progress, skip_bad=skip_bad)
    for refused in summary.refused:
        err(f"{url}: {refused} (skipped)")
    click.echo(summary.line())
