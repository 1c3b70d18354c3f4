"""`msdb import`, `msdb merge`, `msdb export`: TVM logs in, databases together, TVM logs out."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from msdb.cli.common import ProgressBars, err, open_db, target_option

if TYPE_CHECKING:
    from msdb.database.merge import MergeSummary
    from msdb.records import Target

__all__ = ["import_command", "merge_command", "export_command"]


@click.command(name="import")
@click.argument("db", metavar="DB")
@click.argument("paths", metavar="PATH...", nargs=-1, required=True)
@click.option("--skip-bad", is_flag=True, help="List bad lines on stderr and import the rest (default: a bad line "
                                               "stops the import and nothing is written).")
@click.option("--opaque", is_flag=True, help="Import workloads msdb cannot decode (TVM <= 0.21 graph format, unknown "
                                             "node types) as opaque payloads keyed by TVM's shash; never replayed.")
@click.option("--user", metavar="U", help="Who produced the logs (provenance; default: the current user).")
@click.option("--host", metavar="H", help="Where the logs were produced (provenance; default: this host).")
@click.option("--model", metavar="NAME", help="Note that model NAME uses the imported workloads (one task each).")
@click.option("--verify", is_flag=True, help="Replay every trace on its workload first; a trace that fails is a bad "
                                             "line (slow: TVM does this on every load).")
@click.option("--unknown-kinds", is_flag=True, help="Keep trace instructions of kinds TVM does not have (never "
                                                    "replayable) instead of refusing their lines.")
def import_command(db: str, paths: tuple[str, ...], skip_bad: bool, opaque: bool, user: str | None,
                   host: str | None, model: str | None, verify: bool, unknown_kinds: bool) -> None:
    """Import TVM MetaSchedule logs into DB.

    DB is a file path or an SQLAlchemy URL (created if missing). Each PATH is a work_dir
    holding database_workload.json and database_tuning_record.json, or the two files given
    one after the other. Logs of every TVM generation are accepted; traces are stored in
    TVM 0.27's form.

    One transaction for the whole invocation: a malformed or truncated line stops it with
    `path:line: reason` and nothing is written, unless --skip-bad. Blank lines are ignored.
    Workloads and records already in DB are not added again (records are the same when
    workload, target, trace and run_secs are), so re-importing a file adds nothing. Ctrl-C
    before the commit writes nothing (a new DB is not created); after it, one line says what
    was committed (exit status 130 either way).

    Prints: workloads new/known; records new/duplicate, and how many of the new records are
    failed runs (stored, as TVM stores them, never returned as best); seconds. Progress bars
    are drawn on stderr only when it is a terminal.

    \b
    Example:
        msdb import msdb.sqlite ~/tune/work_dir --user alice --model resnet50
        msdb import sqlite:///team.db a/database_workload.json a/database_tuning_record.json
    """
    from msdb.database.tvm_import import ImportInterrupted, import_logs

    summary = None
    try:
        with ProgressBars() as progress:
            summary = import_logs(db, paths, skip_bad=skip_bad, opaque=opaque, user=user, host=host, model=model,
                                  verify=verify, progress=progress, unknown_kinds=unknown_kinds)
        for bad in summary.bad_lines:
            err(f"{bad} (skipped)")
        for note in summary.opaque:
            err(note)
        for failure in summary.replay_failures:
            err(f"{failure} (skipped)")
        click.echo(summary.line())
    except KeyboardInterrupt as exc:
        # Ctrl-C: one line saying what DB holds now, no traceback; exit status 130, as a shell's
        committed = exc.summary if isinstance(exc, ImportInterrupted) else summary
        if committed is None:
            err("Interrupted: nothing was imported.")
        else:
            err(f"Interrupted after the import was committed: {committed.line()}")
        raise SystemExit(130) from None


@click.command(name="merge")
@click.argument("dest", metavar="DEST")
@click.argument("sources", metavar="SRC...", nargs=-1, required=True)
@click.option("--user", metavar="U", help="Recorded on the merge source row that records without provenance get.")
@click.option("--host", metavar="H", help="Likewise, the host.")
@click.option("--skip-bad", is_flag=True, help="Leave out (and list) the workloads and records a database does not "
              "admit, instead of refusing their SRC.")
def merge_command(dest: str, sources: tuple[str, ...], user: str | None, host: str | None, skip_bad: bool) -> None:
    """Merge msdb databases SRC... into DEST.

    DEST and every SRC are file paths or SQLAlchemy URLs (DEST is created if missing; every
    SRC must exist and is only read). Workloads are deduplicated by structural hash, records
    by (workload, target, trace, run_secs); each record keeps its provenance. Merging again
    adds nothing. Every SRC is opened before anything is written; DEST is written in
    transactions of about two seconds, so tuners writing to DEST meanwhile are not starved (a merge
    stopped part way keeps what it committed: merging again adds the rest). A new DEST file is
    built beside it and put in place only when every SRC is in: a merge into a new file that
    fails, is interrupted or killed leaves no file. Ctrl-C prints one line saying what DEST
    kept (exit status 130). What enters DEST passes the checks an import makes (run times, trace,
    instruction kinds, target, args; workload hashes recomputed from the IR): a SRC holding a
    row that fails them is refused with one line naming it, or, with --skip-bad, merged without
    the bad rows, which are listed.

    \b
    Example:
        msdb merge team.sqlite alice.sqlite bob.sqlite
        msdb merge postgresql://db.lab/msdb ./msdb.sqlite
    """
    from msdb.database.location import refuse_in_memory
    from msdb.database.merge import merge_into

    refuse_in_memory(dest, "msdb merge")
    opened = []
    try:
        for src in sources:
            opened.append(open_db(src, read_only=True))
        with ProgressBars() as progress:
            merge_into(dest, opened, user=user, host=host, progress=progress, skip_bad=skip_bad,
                       merged=_merged)
    except KeyboardInterrupt as exc:
        # Ctrl-C: one line saying what DEST kept, no traceback; exit status 130, as a shell's
        err(f"Interrupted: {str(exc) or 'nothing was merged'}.")
        raise SystemExit(130) from None
    finally:
        for database in opened:
            database.close()


def _merged(summary: MergeSummary) -> None:
    """A SRC is in DEST: its line, then each row `--skip-bad` left out, on stderr."""
    click.echo(summary.line())
    for refused in summary.refused:
        err(f"{summary.source}: {refused} (skipped)")


@click.command(name="export")
@click.argument("db", metavar="DB")
@click.argument("outdir", metavar="OUTDIR", type=click.Path(file_okay=False))
@click.option("--top-k", "top_k", type=int, default=1, show_default=True, metavar="N",
              help="Best N valid records per workload and target.")
@target_option("Only records whose target matches T (e.g. 'llvm -mcpu=skylake-avx512', 'cuda -arch=sm_80').")
def export_command(db: str, outdir: str, top_k: int, target: Target | None) -> None:
    """Export DB as a TVM 0.27 work_dir in OUTDIR.

    Writes database_workload.json and database_tuning_record.json with the best N valid
    records of every workload and target, which TVM's JSONDatabase(work_dir=OUTDIR) loads.
    Workloads imported from TVM keep their payload byte for byte; workloads msdb created are
    encoded in TVM 0.27's graph format. The work_dir is written beside OUTDIR and renamed into
    place, so OUTDIR never holds a half-written export. DB is only read. A --target that no
    record matches is an error naming the targets DB has; nothing is written.

    \b
    Example:
        msdb export msdb.sqlite ./tvm_work_dir --top-k 1 --target 'llvm -num-cores=1'
    """
    from msdb.database.tvm_export import export_workdir

    database = open_db(db, read_only=True)
    try:
        with ProgressBars() as progress:
            summary = export_workdir(database, outdir, top_k=top_k, target=target, progress=progress)
    finally:
        database.close()
    for warning in summary.warnings:
        err(f"warning: {warning}")
    for note in summary.skipped:
        err(f"left out {note}")
    click.echo(summary.line())
