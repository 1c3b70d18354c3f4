"""`msdb compile`: a model compiled with layered databases, its hit/miss report, and a checked run."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from msdb.cli.common import OptionError, target_option
from msdb.model.ops import FUSE_MODES

#: Functions named on the "slowest functions" line of `--run` (all of them are in the report's
#: `run_ms`).
SLOWEST_SHOWN = 5

if TYPE_CHECKING:
    from msdb.records import Target

__all__ = ["compile_command"]


@click.command(name="compile")
@click.argument("model_path", metavar="MODEL", type=click.Path(dir_okay=False))
@click.option("--db", "dbs", metavar="DB", multiple=True,
              help="A database to take records from (path, SQLAlchemy URL or hub URL); repeat to layer them: the "
                   "first that has a record for a function answers. Opened read-only.")
@target_option("The target to compile for (default: this machine); only records whose target matches are used.")
@click.option("--fuse", type=click.Choice(FUSE_MODES), default="tvm", show_default=True,
              help="tvm: TVM's fusion (conv2d alone); fold: batch-norm folded into the conv, epilogue fused into it; "
                   "packed: fold, with conv weights packed in 16-channel blocks; winograd: packed, with 3x3 "
                   "stride-1 convs computed by Winograd's F(m, 3) (its rounding differs from a direct conv's by "
                   "1e-6 to 1e-5 of the output's scale); nchwc: fold, with every activation between convs in "
                   "16-channel blocks, and their 3x3 stride-1 convs by Winograd's F(m, 3) where the tiles fit "
                   "(fastest on CPUs for CNNs).")
@click.option("--run", "run_model", is_flag=True,
              help="Time the whole model (on the target's -num-cores threads, default one; the line says how "
                   "many cores this process may use and how busy the machine is), name its slowest functions "
                   "(each function's run_ms in "
                   "--report), and compare its outputs with onnxruntime (.onnx) or the default-schedule build "
                   "(Relax scripts).")
@click.option("--repeat", type=click.IntRange(min=1), default=5, show_default=True, help="Timed runs with --run.")
@click.option("--workers", type=click.IntRange(min=1), default=1, show_default=True,
              help="Processes that build the kernels (LLVM is most of a compile with tuned records).")
@click.option("--transfer", is_flag=True,
              help="Schedule a function no record answers (exactly or by anchor block) with its nearest relative's "
                   "record (the same operator at other sizes) re-fitted to it; nothing is measured. The report "
                   "names the relative, its models and the distance.")
@click.option("--transfer-trials", metavar="N", type=click.IntRange(min=0), default=0, show_default=True,
              help="With a transfer: measure up to N re-fitted candidates per function and the default schedule, "
                   "keep the fastest (the default unless a re-fitted one is 1.15x faster), and commit every "
                   "measured one to the first --db (opened writable) under a 'transfer' source naming the record it "
                   "came from, so the next compile hits exactly. Implies --transfer.")
@click.option("--report", "report_path", metavar="FILE.json", type=click.Path(dir_okay=False),
              help="Also write the report as JSON: a list, one object per function.")
def compile_command(model_path: str, dbs: tuple[str, ...], target: Target | None, fuse: str, run_model: bool,
                    repeat: int, workers: int, transfer: bool, transfer_trials: int, report_path: str | None) -> None:
    """Compile MODEL (.onnx, or a Relax-style .py with its weights in a .npz beside it) with the
    records of the --db layers and print which functions hit.

    Every function is looked up in the layers in order, structurally and then by anchor block;
    the best record of the first layer that has one is applied, anything else gets a default
    schedule. Each miss says why: no such workload, workload known but no record for this
    target (and which targets have one), only failed records, or trace does not apply. With
    --transfer a miss may be answered by a relative's record re-fitted to it ("transferred from
    ..."), else the report says why none fit.

    \b
    Example:
        msdb compile resnet34.onnx --db local.sqlite --db team.sqlite --run --report hits.json
    """
    from msdb.tuner.compile.compiler import compile_model
    from msdb.tuner.compile.lookup import open_layer
    from msdb.tuner.compile.report import format_report, summary_line

    if not Path(model_path).is_file():
        raise OptionError(f"{model_path}: no such model file")
    if report_path is not None:
        folder = Path(report_path).parent
        if str(folder) and not folder.is_dir():
            raise OptionError(f"--report {report_path}: folder {folder} does not exist")
    if transfer_trials and not dbs:
        raise OptionError("--transfer-trials: give a --db to commit the measured candidates to")
    if transfer_trials and dbs[0].startswith(("http://", "https://")):
        raise OptionError(f"--transfer-trials commits to the first --db, and {dbs[0]} is a hub (read-only); "
                          "put a database file first")
    layers: list[Any] = []
    try:
        for index, location in enumerate(dbs):
            layers.append(open_layer(location, writable=index == 0 and bool(transfer_trials)))
        threads = _run_threads(target)
        compiled = compile_model(model_path, layers, target, fuse=fuse, num_threads=threads if run_model else None,
                                 build_workers=workers, transfer=transfer, transfer_trials=transfer_trials)
    finally:
        for layer in layers:
            layer.database.close()
    try:
        click.echo(format_report(compiled.report))
        click.echo(summary_line(compiled.report))
        if run_model:
            from msdb.tuner.compile.reference import compare_with_reference, random_inputs

            inputs = random_inputs(compiled)
            comparison = compare_with_reference(compiled, model_path, inputs)
            timing = compiled.benchmark(inputs, repeat=repeat)
            click.echo(f"run: {timing.median * 1e3:.2f} ms median of {repeat} (min {timing.min * 1e3:.2f} ms), "
                       f"{_cores_line(threads)}")
            slowest = compiled.profile(inputs, repeat)[:SLOWEST_SHOWN]
            click.echo("slowest functions: " + ", ".join(
                f"{f.name} x{f.calls} {f.seconds * 1e3:.2f} ms" for f in slowest))
            click.echo(comparison.line())
        if report_path is not None:
            from msdb.staging import write_atomically

            write_atomically(report_path, compiled.report_json() + "\n")
            click.echo(f"wrote {report_path}")
    finally:
        compiled.close()


def _run_threads(target: Target | None) -> int:
    """Threads of a `--run`: the target's `-num-cores`, else one (a timing that does not depend
    on what else the machine runs)."""
    cores = target.get("num-cores") if target is not None else None
    return int(cores) if isinstance(cores, int) and cores > 0 else 1


def _cores_line(threads: int) -> str:
    """'2 threads; this process may use 2 cores, load average 0.41 over the last minute': what
    the timing ran on and how busy the machine was (other work on the cores slows a run)."""
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    load = f", load average {os.getloadavg()[0]:.2f} over the last minute" if hasattr(os, "getloadavg") else ""
    plural = "s" if threads != 1 else ""
    warning = " (more threads than cores: they take turns)" if threads > usable else ""
    return f"{threads} thread{plural}{warning}; this process may use {usable} core{'s' if usable != 1 else ''}{load}"
