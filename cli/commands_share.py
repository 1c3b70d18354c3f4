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
@click.option("--cost-model", "cost_models", multiple=True, metavar="FILE", type=click.Path(dir_okay=False),
              help="A pretrained cost model file (`msdb train-cost-model`) to ship with the snapshot; repeat for "
                   "models of other kinds or target kinds.")
def publish_command(db: str, outdir: str, keep_provenance: bool, cost_models: tuple[str, ...]) -> None:
    """Write a read-only snapshot of DB into OUTDIR for a hub.

    OUTDIR gets snapshot.sqlite (a consistent copy; private provenance left out unless
    --keep-provenance), manifest.json (versions, counts, sha256) and metadata.json for
    datasette. With --cost-model, each model file is checked and copied to
    cost-models/<kind>-<target kind>.npz, named in the manifest with its sha256, size and
    stamp; `msdb serve OUTDIR` serves it and `msdb pull` fetches it. OUTDIR is written whole
    or not at all; an earlier publish there is replaced.
    It is written in a hidden folder beside OUTDIR, which Ctrl-C removes at once and the next
    publish removes if this one is killed. Prints the command that serves it immutable with
    SQL off.

    \b
    Example:
        msdb publish team.sqlite hub/ --cost-model team-xgb.npz
    """
    from msdb.cli.common import err
    from msdb.hub.publish import publish

    try:
        result = publish(db, outdir, keep_provenance=keep_provenance, cost_models=cost_models)
    except KeyboardInterrupt:
        # Ctrl-C: one line, no traceback; exit status 130, as a shell's
        err(f"Interrupted: nothing was published; {outdir} is as it was.")
        raise SystemExit(130) from None
    counts = result.manifest["counts"]
    click.echo(f"published {counts['tuning_record']} records of {counts['workload']} workloads to {result.outdir} "
               f"(sha256 {result.manifest['sha256']})")
    for model in result.manifest.get("cost_models", []):
        stamp = model["stamp"]
        click.echo(f"  with cost model {model['kind']} for {stamp['target_kind']} ({stamp['records']} records of "
                   f"{stamp['workloads']} workloads): {model['file']} (sha256 {model['sha256']})")
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
@click.option("--cost-model-out", metavar="PATH", type=click.Path(),
              help="Where the hub's cost model goes: a file (a hub that ships one model) or an existing folder "
                   "(default: beside DB, as DB_STEM.<kind>-<target kind>.npz).")
def pull_command(url: str, db: str, timeout_s: float, skip_bad: bool, user: str | None, host: str | None,
                 cost_model_out: str | None) -> None:
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

    A hub that ships cost models (`msdb publish --cost-model`) has each fetched too, checked
    against its manifest (size, sha256, a model file with the stamp it names) and put beside DB
    (or at --cost-model-out) once the records are in; one already there is not fetched again.
    A model that fails a check stops the pull before DB is opened; no file is left half-written.
    So does a destination in a folder that does not exist, or an existing file there that is
    not a cost model file (msdb replaces only a model file).

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
        summary = pull(url, db, timeout_s=timeout_s, user=user, host=host, progress=progress, skip_bad=skip_bad,
                       cost_model_out=cost_model_out)
    for refused in summary.refused:
        err(f"{url}: {refused} (skipped)")
    click.echo(summary.line())
    for model in summary.cost_models:
        click.echo(model.line())
    if cost_model_out is not None and not summary.cost_models:
        click.echo(f"{url}: the hub ships no cost model; nothing written to {cost_model_out}")
