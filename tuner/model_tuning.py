"""`tune_model`: tune every task of a model, TVM's `tune_relax` for msdb's models.

TVM's steps (extract the weighted tasks, skip scheduled functions, filter by `op_names`, hand them
to `tune_tasks`), plus the model and its tasks recorded in the database first, and on CPU
targets candidates timed with cold caches (`MODEL_TIMING`). Why cold, with the measurement that
showed it: see docs/architecture.md, "What msdb adds to TVM's tuning loop".
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Sequence

from msdb.model.tasks import ExtractedTask, extract_tasks, record_model_tasks
from msdb.tuner.tune import TuneResult, make_context, tune_tasks, tuning_target

if TYPE_CHECKING:
    from msdb.database.base import Database
    from msdb.model.graph import Model
    from msdb.records.target import Target
    from msdb.tuner.measure.builder import Builder
    from msdb.tuner.measure.runner import Runner
    from msdb.tuner.task_scheduler.base import RoundFn
    from msdb.tuner.tune import MeasureCallbacks

__all__ = ["tune_model", "tunable_tasks", "MODEL_TIMING"]

#: The CPU runner's timing for a model's tasks (see the module docstring): `LocalRunner` and
#: `DaskRunner` keyword arguments.
MODEL_TIMING: dict[str, Any] = {"number": 1, "repeat": 10, "min_repeat_ms": 0.0, "enable_cpu_cache_flush": True}

logger = logging.getLogger(__name__)


def tunable_tasks(tasks: Sequence[ExtractedTask], op_names: Sequence[str] | None = None) -> list[ExtractedTask]:
    """The tasks `tune_relax` tunes: not already scheduled, and (with `op_names`) named with one
    of them as a substring."""
    out = []
    for task in tasks:
        if task.mod["main"].attrs.get("tirx.is_scheduled") or task.mod["main"].attrs.get("tir.is_scheduled"):
            logger.warning("task %s is already scheduled; it is not tuned", task.task_name)
            continue
        if op_names and not any(name in task.task_name for name in op_names):
            continue
        out.append(task)
    return out


def tune_model(model: Model, target: Target | str | None, database: Database, max_trials_global: int,
               num_trials_per_iter: int = 64, *, max_trials_per_task: int | None = None,
               module_equality: str = "structural", op_names: Sequence[str] | None = None,
               space: str = "post-order-apply", strategy: str = "evolutionary", cost_model: Any = "xgb",
               task_scheduler: str = "gradient", seed: int | None = None, num_threads: int = 1,
               builder: Builder | str | None = None, runner: Runner | str | None = None,
               measure_callbacks: MeasureCallbacks = None, on_round: RoundFn | None = None,
               check_best: bool = True, model_name: str | None = None) -> TuneResult:
    """Tune `model`'s tasks on `target` (default: this host with `num_threads` cores) for at most
    `max_trials_global` measurements in all, weighted by the tasks' weights; records the model
    and its tasks (as `model_name`, default the model's name) and every measurement in
    `database` (`measure_callbacks` as `tune_tasks` takes them). Without a `runner` (or with
    "local"), CPU candidates are timed cold (`MODEL_TIMING`)."""
    resolved = tuning_target(target, num_threads)
    tasks = extract_tasks(model, resolved, module_equality=module_equality)
    record_model_tasks(database, model_name or model.name, tasks)
    chosen = tunable_tasks(tasks, op_names)
    if not chosen:
        logger.warning("%s: no task to tune", model.name)
        return TuneResult([])
    contexts = [make_context(task.mod, resolved, space, strategy, seed, task.task_name, num_threads) for task in chosen]
    weights = [float(task.weight) for task in chosen]
    own_runner = None
    if runner in (None, "local") and resolved.kind == "llvm":
        from msdb.tuner.measure.runner import Runner

        runner = own_runner = Runner.create("local", num_threads=num_threads, **MODEL_TIMING)
    try:
        return tune_tasks(contexts, weights, database, max_trials_global, num_trials_per_iter,
                          max_trials_per_task=max_trials_per_task, cost_model=cost_model, task_scheduler=task_scheduler,
                          builder=builder, runner=runner, seed=seed, measure_callbacks=measure_callbacks,
                          on_round=on_round, check_best=check_best, location=f"tune: model {model_name or model.name}")
    finally:
        if own_runner is not None:
            own_runner.close()
