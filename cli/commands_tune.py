"""`msdb tune` and `msdb plot`: tuning a workload into a database, and its tuning curves."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

from msdb.cli.common import OptionError, open_db, target_option
from msdb.model.ops import FUSE_MODES

if TYPE_CHECKING:
    from msdb.ir.function import IRModule
    from msdb.model.graph import Model
    from msdb.records import Target
    from msdb.tuner.task_scheduler.base import TaskRecord

__all__ = ["tune_command", "plot_command", "load_workload", "load_model", "is_model_file", "draw_tuning_curves"]


def load_workload(script: str | None, zoo_name: str | None) -> tuple[str, IRModule]:
    """(task name, module) from a TVMScript file or `--zoo NAME[:INDEX]`: exactly one of them."""
    if (script is None) == (zoo_name is None):
        raise OptionError("give a TVMScript file (WORKLOAD.py) or --zoo NAME[:INDEX], not both and not neither")
    if zoo_name is not None:
        from msdb.ir import zoo

        name, _, index = zoo_name.partition(":")
        if index and not index.isdigit():
            raise OptionError(f"--zoo {zoo_name!r}: INDEX must be a whole number (NAME[:INDEX])")
        return name, zoo.workload(name, int(index or 0))
    from msdb.ir.script.parser import from_script

    path = Path(script)  # type: ignore[arg-type]
    return path.stem, from_script(path.read_text(), str(path))


def is_model_file(path: str | None) -> bool:
    """Whether `msdb tune`'s file argument is a model (an ONNX file, or a Relax-style script with
    an `@R.function main`) rather than one workload in TVMScript."""
    if path is None:
        return False
    if path.lower().endswith(".onnx"):
        return True
    if not path.endswith(".py"):
        return False
    from msdb.model.relax_script import is_relax_script

    try:
        return is_relax_script(Path(path).read_text())
    except (OSError, UnicodeDecodeError):
        return False  # the workload branch reports the unreadable file


def load_model(path: str, fuse: str | None) -> Model:
    """The model in an ONNX file or a Relax-style script (with its `.npz` of weights beside it)."""
    from msdb.model.loader import load

    if fuse is not None and not path.lower().endswith(".onnx"):
        raise OptionError("--fuse applies to ONNX models; a Relax script's functions are already fused")
    return load(path, fuse=fuse or "tvm")


class _TuneProgress:
    """A progress bar on stderr: trials measured, best GFLOPS so far."""

    def __init__(self, trials: int) -> None:
        self.bar = click.progressbar(length=trials, label="tuning", file=sys.stderr, show_pos=True)
        self.bar.__enter__()
        self.done = 0

    def __call__(self, task: TaskRecord, candidates: list[Any], results: list[Any]) -> None:
        best = task.best_ms
        if best is not None and task.flop:
            self.bar.label = f"tuning {task.name}: best {task.flop / best / 1e6:.1f} GFLOPS"
        self.bar.update(len(results))

    def close(self) -> None:
        self.bar.__exit__(None, None, None)


@click.command(name="tune")
@click.argument("db", metavar="DB")
@click.argument("script", metavar="[WORKLOAD.py | MODEL]", required=False, type=click.Path(dir_okay=False))
@click.option("--zoo", "zoo_name", metavar="NAME[:INDEX]", help="A workload of msdb's zoo (TVM's te_workload), e.g. GMM or C2D:0.")
@target_option("The target to tune for (default: this machine, llvm with one core per --threads).")
@click.option("--trials", type=click.IntRange(min=1), default=64, show_default=True, help="Measurements in all.")
@click.option("--per-iter", type=click.IntRange(min=1), default=64, show_default=True, help="Measurements per search round.")
@click.option("--strategy", type=click.Choice(["evolutionary", "replay-trace", "replay-func"]), default="evolutionary",
              show_default=True)
@click.option("--cost-model", metavar="KIND|FILE", default="xgb", show_default=True,
              help="xgb (TVM's default), mlp (pip install -e '.[mlp]'), random, none (no model: the search mutates "
                   "the fastest measured candidates and adds random samples), or a model file from `msdb train-cost-model` or `msdb pull` "
                   "(refused when trained for another target kind or feature layout; the first line of output names "
                   "the file and what it learned from).")
@click.option("--seed", type=int, default=None, help="Seed of every random choice (default: from the clock).")
@click.option("--workers", type=click.IntRange(min=1), default=None, help="Build processes (default: the cores, at most 4).")
@click.option("--threads", type=click.IntRange(min=1), default=1, show_default=True, help="Threads a kernel may use.")
@click.option("--cluster", metavar="tcp://HOST:8786", default=None,
              help="Build and measure on this Dask cluster's workers (pip install -e '.[dask]' in the msdb checkout; "
                   "workers started with "
                   "--nthreads 1 --resources measure=1).")
@click.option("--module-equality", type=click.Choice(["structural", "ignore-tensor", "anchor-block"]),
              default="structural", show_default=True, help="A MODEL's tasks are unique under this equality (TVM's).")
@click.option("--max-trials-per-task", type=click.IntRange(min=1), default=None,
              help="A MODEL's trials per task at most (default: --trials, as TVM).")
@click.option("--profile", is_flag=True, default=False,
              help="Print where the time went (sampling, replay, post-processing, features, cost model, build, run, "
                   "database, other) after the statistics table.")
@click.option("--fuse", type=click.Choice(FUSE_MODES), default=None,
              help="An ONNX MODEL's fusion (default tvm: TVM's tasks; fold: batch-norm folded, epilogues fused; "
                   "packed: fold with conv weights packed in 16-channel blocks; winograd: packed, "
                   "3x3 stride-1 convs by Winograd's F(m, 3); nchwc: fold with activations in 16-channel "
                   "blocks, their 3x3 stride-1 convs by Winograd's F(m, 3) where the tiles fit).")
def tune_command(db: str, script: str | None, zoo_name: str | None, target: Target | None, trials: int, per_iter: int,
                 strategy: str, cost_model: str, seed: int | None, workers: int | None, threads: int,
                 cluster: str | None, module_equality: str, max_trials_per_task: int | None, profile: bool,
                 fuse: str | None) -> None:
    """Tune a workload, or every task of a model, and commit every measurement to DB (created
    when missing).

    The workload is a TVMScript file or a zoo workload. A MODEL is an ONNX file or a Relax-style
    TVMScript file (an @I.ir_module whose @R.function main calls its PrimFuncs with R.call_tir,
    weights in the .npz beside it): its tasks are extracted as TVM does (unique by hash, weight =
    calls), recorded in DB's model and task tables, and tuned with the gradient task scheduler
    sharing --trials. Every candidate is committed as it is
    measured (a failed one as [1e10]); running again continues: modules DB already measured
    for the workload and target are not measured again. Tuners sharing DB (a PostgreSQL team
    server) claim each candidate in it first, so none is measured twice. Prints TVM's
    statistics table, with this run's best and DB's best (which may be an earlier run's or a
    teammate's) in columns of their own. A workload new to DB is named after the zoo workload,
    the script's file or the model's function. Ctrl-C says what was committed, gives the
    round's unmeasured candidates back to other tuners, and exits with status 130. With
    --profile, a table of seconds by phase follows (msdb.tuner.profiler.Profiler).

    A cuda --target is measured on this machine's GPU (pip install -e '.[gpu]' in the msdb checkout): with no usable
    GPU, driver binding or CUDA compiler, tune refuses before storing anything.

    With --cluster, candidates are built and measured on a Dask cluster's workers (each with one
    thread and the `measure` resource: `dask worker ADDRESS --nthreads 1 --resources measure=1`),
    one candidate per worker at a time; this process commits the results.

    \b
    Example:
        msdb tune msdb.sqlite --zoo GMM --trials 64 --seed 0
        msdb tune msdb.sqlite --zoo GMM --cluster tcp://farm:8786
        msdb tune msdb.sqlite examples/models/mlp.py --trials 128
        msdb plot msdb.sqlite <hash> -o curve.png
    """
    from msdb.database.location import refuse_in_memory
    from msdb.tuner.measure.builder import LocalBuilder
    from msdb.tuner.profiler import Profiler

    refuse_in_memory(db, "msdb tune")
    if cluster is not None and workers is not None:
        raise OptionError("--workers sets this machine's build processes; with --cluster the cluster's workers "
                          "build: give one of them")
    model: Model | None = None
    if script is not None and is_model_file(script):
        if zoo_name is not None:
            raise OptionError("give a MODEL or --zoo NAME[:INDEX], not both")
        model = load_model(script, fuse)
    else:
        for option, value in (("--fuse", fuse), ("--max-trials-per-task", max_trials_per_task)):
            if value is not None:
                raise OptionError(f"{option} applies to a MODEL (an .onnx file or a Relax script), not to one workload")
        if module_equality != "structural":
            raise OptionError("--module-equality applies to a MODEL's tasks, not to one workload")
        name, mod = load_workload(script, zoo_name)
    from msdb.tuner.cost_model.saved import model_file_summary
    from msdb.tuner.tune import cost_model_of, names_a_model_file, tuning_target

    # before anything is opened: an unknown kind, or a file that is not a model or was trained
    # for another target kind, is one error line and DB is not created
    chosen_model = cost_model_of(cost_model, seed=seed, num_threads=threads, target=tuning_target(target, threads))
    if names_a_model_file(cost_model):
        click.echo(f"starting from the {model_file_summary(cost_model)}")
    runner: Any = None
    if cluster is None and target is not None and target.kind == "cuda":
        runner = _cuda_runner(target)
    database = None
    builder: Any = None
    client: Any = None
    try:
        database = open_db(db, create=True)
        builder = LocalBuilder(max_workers=workers) if workers is not None else None
        if cluster is not None:
            client, builder, runner = _cluster_measure(cluster, threads, model is not None)
        progress = _TuneProgress(trials)
        profiler = Profiler()
        try:
            with profiler:
                result = _tune(model, mod if model is None else None, target, database, trials, per_iter,
                               max_trials_per_task=max_trials_per_task, module_equality=module_equality,
                               strategy=strategy, cost_model=chosen_model, seed=seed, name=name if model is None else "",
                               threads=threads, builder=builder, runner=runner, on_round=progress)
        finally:
            progress.close()
    except KeyboardInterrupt as exc:
        _interrupted(exc, db)
    finally:
        for piece in (builder, runner, client):
            if piece is not None:
                piece.close()
        if database is not None:
            database.close()
    if model is not None:
        weights = sum(t.weight for t in result.tasks)
        click.echo(f"model {model.name}: {len(result.tasks)} task(s), total weight {weights:g}, recorded in {db}")
    click.echo(result.table())
    for task in result.tasks:
        if task.claimed_elsewhere:
            click.echo(f"{task.name}: {task.claimed_elsewhere} candidate(s) skipped, claimed by another tuner")
        if task.miscomputing:
            click.echo(f"warning: {len(task.miscomputing)} fast record(s) of {task.name} compute wrong numbers and "
                       "were passed over", err=True)
    if profile:
        click.echo(profiler.table())


def _tune(model: Model | None, mod: IRModule | None, target: Target | None, database: Any, trials: int, per_iter: int,
          *, max_trials_per_task: int | None, module_equality: str, strategy: str, cost_model: Any, seed: int | None,
          name: str, threads: int, builder: Any, runner: Any, on_round: Any) -> Any:
    """One tuning run: a model's tasks (`tune_model`) or one workload (`tune_tir`)."""
    from msdb.tuner.tune import tune_tir

    if model is not None:
        from msdb.tuner.model_tuning import tune_model

        return tune_model(model, target, database, trials, per_iter, max_trials_per_task=max_trials_per_task,
                          module_equality=module_equality, strategy=strategy, cost_model=cost_model,
                          seed=seed, num_threads=threads, builder=builder, runner=runner, on_round=on_round)
    return tune_tir(mod, target, database, trials, per_iter, strategy=strategy,  # type: ignore[arg-type]
                    cost_model=cost_model, seed=seed, task_name=name, num_threads=threads, builder=builder,
                    runner=runner, on_round=on_round)


def _interrupted(exc: KeyboardInterrupt, db: str) -> NoReturn:
    """Ctrl-C: what this run committed in one line, that the round's unmeasured candidates were
    given back, and how to go on; no traceback, exit status 130 (as `msdb import`)."""
    from msdb.tuner.tune import TuneInterrupted

    if isinstance(exc, TuneInterrupted):
        click.echo(f"Interrupted: {exc.committed.line(db)}.", err=True)
        click.echo("Unmeasured candidates were given back; run the same command again to continue.", err=True)
    else:
        click.echo(f"Interrupted before tuning began: no measurement committed to {db}.", err=True)
    raise SystemExit(130) from None


def _cuda_runner(target: Target) -> Any:
    """A `CudaRunner` that has found its GPU, for a cuda --target measured on this machine; else
    one `Error:` line saying why nothing could be measured (no driver binding, no driver, no
    device) or built (no NVRTC or ptxas), before DB is opened: a run that can only store
    failed records stores nothing."""
    from msdb.tuner.codegen.cuda.nvrtc import CudaToolError, find_nvrtc, find_ptxas
    from msdb.tuner.measure.cuda_runner import CudaRunner, CudaRuntimeError

    try:
        find_nvrtc()
        find_ptxas()
    except CudaToolError as exc:
        raise OptionError(f"--target {target}: CUDA kernels cannot be built on this machine: {exc}") from None
    runner = CudaRunner()
    try:
        runner.check_device()
    except CudaRuntimeError as exc:
        runner.close()
        raise OptionError(f"--target {target}: nothing can be measured on this machine: {exc}; nothing was "
                          "stored (measure on a machine with the GPU, or with --cluster)") from None
    except BaseException:
        runner.close()
        raise
    return runner


def _cluster_measure(address: str, threads: int, for_model: bool) -> tuple[Any, Any, Any]:
    """(client, DaskBuilder, DaskRunner) on one connection to the cluster at `address`; a model's
    candidates timed cold, as `tune_model`'s own runner times them (`MODEL_TIMING`)."""
    try:
        from distributed import Client
    except ImportError:
        raise OptionError("--cluster needs Dask distributed: pip install -e '.[dask]' in the msdb checkout") from None
    from msdb.tuner.measure.dask import DaskBuilder, DaskClusterError, DaskRunner

    try:
        client = Client(address, timeout=30)
    except (OSError, TimeoutError) as err:
        raise DaskClusterError(f"--cluster {address}: cannot reach the Dask scheduler: {err}; start one with "
                               "`dask scheduler` and pass its tcp://HOST:PORT") from None
    builder = None
    try:
        builder = DaskBuilder(client)
        from msdb.tuner.model_tuning import MODEL_TIMING

        timing = MODEL_TIMING if for_model else {}
        return client, builder, DaskRunner(client, num_threads=threads, **timing)
    except BaseException:
        if builder is not None:
            builder.close()
        client.close()
        raise


#: Legend lines longer than this are wrapped (a source's label holds an import's whole path).
LEGEND_WIDTH = 80


def draw_tuning_curves(curves: list[Any], title: str) -> Any:
    """A matplotlib figure of best latency against trials, one step line per `TuningCurve`.

    The legend goes below the axes, outside them, in a figure grown to hold it, each label
    wrapped at `LEGEND_WIDTH` characters (a path is broken at its slashes): inside the axes, a
    legend of long import paths was clipped at the figure's edge and covered the axis label."""
    import matplotlib.pyplot as plt

    labels = ["\n".join(curve.label_lines(LEGEND_WIDTH)) for curve in curves]
    lines = sum(label.count("\n") + 1 for label in labels)
    fig, ax = plt.subplots(figsize=(7, 4.5 + 0.22 * lines), layout="constrained")
    for curve, label in zip(curves, labels):
        xs = [i + 1 for i, y in enumerate(curve.best_us) if y is not None]
        ys = [y for y in curve.best_us if y is not None]
        ax.step(xs, ys, where="post", label=label)
    ax.set_xlabel("trials")
    ax.set_ylabel("best latency (us)")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    fig.legend(loc="outside lower center", fontsize="small", ncols=1, frameon=False)
    return fig


@click.command(name="plot")
@click.argument("db", metavar="DB")
@click.argument("workload_hash", metavar="HASH")
@click.option("-o", "--output", type=click.Path(dir_okay=False), required=True, help="The image to write (PNG, SVG, PDF).")
@target_option("Only records of targets that match T.")
def plot_command(db: str, workload_hash: str, output: str, target: Target | None) -> None:
    """Plot best latency against trials for a workload of DB, one line per run (source).

    Needs matplotlib (pip install -e '.[plot]' in the msdb checkout).

    \b
    Example:
        msdb plot msdb.sqlite cd74d25f -o curve.png
    """
    from msdb.database.catalog import tuning_curves

    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise OptionError("msdb plot needs matplotlib: pip install -e '.[plot]' in the msdb checkout") from None
    database = open_db(db, read_only=True)
    try:
        shash, curves = tuning_curves(database, workload_hash, target=target)
    finally:
        database.close()
    if not curves:
        raise OptionError(f"workload {shash} has no records{' for that --target' if target is not None else ''}")
    fig = draw_tuning_curves(curves, f"workload {shash}")
    fig.savefig(output, bbox_inches="tight")
    plt.close(fig)
    click.echo(f"wrote {output}: {len(curves)} run(s), {sum(len(c.best_us) for c in curves)} records")
