"""`msdb sample`: random design-space samples of models' tasks measured into a database, a training
set for cost models (msdb.tuner.sampling; docs/architecture.md, "Sampling")."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import click

from msdb.cli.common import OptionError, open_db, target_option, stderr_is_terminal
from msdb.cli.commands_tune import is_model_file, load_model, load_workload

if TYPE_CHECKING:
    from msdb.model.graph import Model
    from msdb.model.tasks import ExtractedTask
    from msdb.records import Target

__all__ = ["sample_command", "load_zoo"]


def load_zoo(names: tuple[str, ...]) -> tuple[list[Model], list[ExtractedTask]]:
    """(models, single-workload tasks) for `--zoo` names: a model of `msdb.model.zoo.NAMED`
    (e.g. resnet18), else a workload of msdb's TE zoo as `msdb tune --zoo NAME[:INDEX]` takes it
    (e.g. GMM, C2D:1). Every name is checked before anything is built."""
    from msdb.ir import zoo as workload_zoo
    from msdb.model import zoo as model_zoo

    for name in names:
        if name not in model_zoo.NAMED and name.partition(":")[0] not in workload_zoo.names():
            raise OptionError(f"--zoo {name!r}: no zoo model or workload of that name; models: "
                              f"{', '.join(model_zoo.NAMED)}; workloads (NAME[:INDEX]): "
                              f"{', '.join(workload_zoo.names())}")
    from msdb.model.lower import lower
    from msdb.model.onnx_frontend import from_onnx
    from msdb.model.tasks import ExtractedTask, normalize_mod

    models: list[Model] = []
    tasks: list[ExtractedTask] = []
    for name in names:
        if name in model_zoo.NAMED:
            models.append(lower(from_onnx(model_zoo.named(name), name), "tvm"))
        else:
            task_name, mod = load_workload(None, name)
            tasks.append(ExtractedTask(task_name, normalize_mod(mod), 1))
    return models, tasks


class _SampleProgress:
    """A progress bar on stderr (only on a terminal): samples measured."""

    def __init__(self, total: int) -> None:
        self.bar: Any = None
        if stderr_is_terminal():
            self.bar = click.progressbar(length=total, label="sampling", file=sys.stderr, show_pos=True)
            self.bar.__enter__()

    def __call__(self, task: Any, candidates: list[Any], results: list[Any]) -> None:
        if self.bar is not None:
            self.bar.label = f"sampling {task.name}"
            self.bar.update(len(results))

    def close(self) -> None:
        if self.bar is not None:
            self.bar.__exit__(None, None, None)
            self.bar = None


@click.command(name="sample")
@click.argument("db", metavar="DB")
@click.argument("model_path", metavar="[MODEL]", required=False, type=click.Path(dir_okay=False))
@click.option("--zoo", "zoo_names", metavar="NAME", multiple=True,
              help="A model of msdb's zoo (resnet18, resnet34, resnet50, mobilenet, mlp, bert, gpt2) or a zoo "
                   "workload (GMM, C2D:1, ...); repeat for several.")
@click.option("--per-workload", type=click.IntRange(min=1), required=True,
              help="Distinct random samples measured per task.")
@target_option("The target to measure on (default: this machine, llvm with one core).")
@click.option("--seed", type=int, default=None, help="Seed of every random choice (default: from the clock; printed).")
@click.option("--workers", type=click.IntRange(min=1), default=None, help="Build processes (default: the cores, at most 4).")
def sample_command(db: str, model_path: str | None, zoo_names: tuple[str, ...], per_workload: int,
                   target: Target | None, seed: int | None, workers: int | None) -> None:
    """Measure --per-workload random samples of the design space of every task of a model (or of
    --zoo models and workloads) and commit every measurement to DB (created when missing): a
    training set for `msdb train-cost-model`, TenSet's recipe.

    The tasks are extracted as `msdb tune DB MODEL` extracts them (the model and its tasks are
    recorded in DB); a workload shared by several models is sampled once. Each sample draws
    every decision of a random design space anew and is post-processed; one that fails is drawn
    again, and only modules DB has not measured count. Samples are built, timed (cold, as a
    model's tasks are tuned) and committed like tuned candidates, failures as [1e10]. The same
    --seed gives the same samples (in a DB that measured some of them already, those are
    skipped for new ones). Prints one summary line.

    \b
    Example:
        msdb sample train.sqlite --zoo resnet18 --per-workload 8 --seed 0
        msdb sample train.sqlite --zoo GMM --zoo C2D:1 --per-workload 32
    """
    from msdb.database.location import refuse_in_memory
    from msdb.tuner.measure.builder import LocalBuilder
    from msdb.tuner.sampling import model_tasks, sample_tasks, unique_tasks
    from msdb.tuner.tune import tuning_target

    refuse_in_memory(db, "msdb sample")
    if bool(model_path) == bool(zoo_names):
        raise OptionError("give a MODEL (an .onnx file, a Relax script or a WORKLOAD.py) or --zoo NAME, "
                          "not both and not neither")
    models: list[Model] = []
    tasks: list[ExtractedTask] = []
    if model_path is not None and is_model_file(model_path):
        models = [load_model(model_path, None)]
    elif model_path is not None:
        from msdb.model.tasks import ExtractedTask, normalize_mod

        name, mod = load_workload(model_path, None)
        tasks = [ExtractedTask(name, normalize_mod(mod), 1)]
    else:
        models, tasks = load_zoo(zoo_names)
    resolved = tuning_target(target, 1)
    names = [m.name for m in models] + [t.task_name for t in tasks]
    database = None
    builder = None
    progress = None
    try:
        database = open_db(db, create=True)
        every = unique_tasks(model_tasks(models, resolved, database) + tasks)
        builder = LocalBuilder(max_workers=workers) if workers is not None else None
        progress = _SampleProgress(len(every) * per_workload)
        result = sample_tasks(every, resolved, database, per_workload, seed=seed, builder=builder,
                              on_round=progress, location=f"sample: {', '.join(names)}")
    except KeyboardInterrupt as exc:
        from msdb.cli.commands_tune import _interrupted

        if progress is not None:
            progress.close()  # before the message, so the bar does not overwrite it
        _interrupted(exc, db)
    finally:
        if progress is not None:
            progress.close()
        if builder is not None:
            builder.close()
        if database is not None:
            database.close()
    click.echo(f"{db}: {result.summary()}")
