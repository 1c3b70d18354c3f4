"""Transfer at compile time (docs/architecture.md, "Transfer"): a function that neither
an exact nor an anchor-block record answers is scheduled by its nearest relative's record
re-fitted to it, read through a `msdb.database.transfer.TransferDatabase` over the compile's
layers.

The view lives in msdb and cannot import the tuner, so this module gives it what only the tuner
has: the target's post-processors (`postprocessor`) and TVM's whole anchor-trace procedure bound
to the target (`anchor_trace.schedule_using_anchor_trace`).
"""

from __future__ import annotations

import functools
import logging
import math
from typing import TYPE_CHECKING, Callable, Sequence

from msdb.errors import MsdbError
from msdb.records import Target, Workload
from msdb.tuner.compile.lookup import Layer
from msdb.tuner.compile.report import TransferInfo

if TYPE_CHECKING:
    from msdb.database.base import Database
    from msdb.database.transfer import TransferAnswer, TransferDatabase, TransferredRecord
    from msdb.ir.function import IRModule, PrimFunc
    from msdb.schedule import Schedule
    from msdb.tuner.tune import Builder, Runner

__all__ = ["postprocessor", "transfer_view", "transfer_info", "measure_transfer"]

logger = logging.getLogger(__name__)

#: How much faster than the default schedule a transferred candidate must measure to replace it
#: (`measure_transfer`). Candidates are timed alone; in the model a function runs after others,
#: and a 1x1 conv whose transferred schedule measured 10% faster alone ran 1.36x its default in
#: the MobileNet-like net (docs/benchmarks.md, "Records that travel"): a near tie keeps the
#: default, so "never slower than the default" holds beyond such differences.
MARGIN = 1.15


def postprocessor(target: Target) -> Callable[[Schedule], bool]:
    """The target's post-processors as one callable (what `refit_trace` re-runs on a re-fitted
    schedule): each applies in turn, and one that rejects the schedule rejects it. Fresh
    post-processors per schedule, as a tuning round makes them per task."""
    from msdb.tuner.space.postprocs.base import Postproc

    kind = "cuda" if target.kind == "cuda" else "llvm"

    def postprocess(sch: Schedule) -> bool:
        return all(postproc.apply(sch) for postproc in Postproc.create(kind))

    return postprocess


def transfer_view(layers: Sequence[Layer], target: Target, neighbours: int, *, measured: bool = False
                  ) -> TransferDatabase | None:
    """A `TransferDatabase` over the layers that store records (a schedule-function layer stores
    none), with the tuner's post-processors and anchor-trace procedure for `target`; None
    without such a layer. Its source is not closed with it: the layers belong to the compile.
    `measured`: its answers are measured against the default schedule (`transfer_trials`), so
    relatives of any size may be tried; unmeasured, only those whose sizes are within
    `MAX_EXTENT_RATIO` of the function's."""
    from msdb.database.schedule_fn import ScheduleFnDatabase
    from msdb.database.transfer import TransferDatabase
    from msdb.database.union import OrderedUnionDatabase
    from msdb.tuner.space.anchor_trace import schedule_using_anchor_trace

    stores = [layer.database for layer in layers if not isinstance(layer.database, ScheduleFnDatabase)]
    if not stores:
        return None
    source = stores[0] if len(stores) == 1 else OrderedUnionDatabase(*stores)
    from msdb.database.transfer import MAX_EXTENT_RATIO

    return TransferDatabase(source, neighbours, postprocess=postprocessor(target),
                            anchor=functools.partial(schedule_using_anchor_trace, target=target),
                            max_ratio=math.inf if measured else MAX_EXTENT_RATIO)


def transfer_info(record: TransferredRecord, answer: TransferAnswer, layers: Sequence[Layer]) -> TransferInfo:
    """The report's account of a transferred record: the relative, the layer storing it (the
    first that does) and the models using it there (layers with model tables), the distance."""
    origin = record.transfer
    relative: Workload = origin.workload
    db: str | None = None
    models: list[str] = []
    for layer in layers:
        if layer.database.has_workload(relative):
            db = layer.label
            models_using = getattr(layer.database, "models_using", None)
            if callable(models_using):
                models = list(models_using(relative))
            break
    secs = origin.record.mean_run_secs
    return TransferInfo(workload=relative.shash, name=relative.name, models=models, db=db,
                        distance=round(origin.distance, 6), route=origin.route,
                        relative_us=secs * 1e6 if secs < float("inf") else None,
                        skipped=[str(skip) for skip in answer.skipped])


def measure_transfer(name: str, func: PrimFunc, workload: Workload, target: Target, answer: TransferAnswer,
                     trials: int, builder: Builder, runner: Runner, database: Database,
                     layers: Sequence[Layer]) -> tuple[IRModule, TransferInfo | None, str]:
    """`--transfer-trials`: measure up to `trials` of the re-fitted candidates and the default
    schedule, and keep the fastest, the default unless a transferred candidate measured
    `MARGIN` times faster. Every measured candidate is committed to
    `database` as a real record of this function (failures as [1e10], as the tuner does), each
    under its own `transfer` source naming the record it came from ("default schedule" for the
    default), so the next compile hits exactly. Returns the chosen module, the transfer
    provenance when a transferred candidate won (else None), and a line on what was measured."""
    from msdb.records.record import ArgInfo, TuningRecord
    from msdb.tuner.space.default_schedule import default_schedule
    from msdb.tuner.measure.builder import BuilderInput
    from msdb.tuner.measure.callback import remove_artifact

    candidates: list[tuple[str, Schedule, TransferredRecord | None]] = [
        (f"transferred from {record.transfer.workload.shash}", sch, record)
        for record, sch in list(zip(answer.records, answer.schedules))[:trials]]
    candidates.append(("default schedule", default_schedule(func, target), None))
    args_info = ArgInfo.from_prim_func(workload.mod)
    built, futures = runner.build_and_run(builder, [BuilderInput(sch.mod, target) for _, sch, _ in candidates],
                                          [args_info] * len(candidates))
    results = [future.result() for future in futures]
    for build in built:
        if build.artifact_path is not None:
            remove_artifact(build.artifact_path)
    stored = database.commit_workload(workload)
    add_source = getattr(database, "add_source", None)
    timed: list[tuple[float, int]] = []
    for index, ((label, sch, origin), result) in enumerate(zip(candidates, results)):
        run_secs = result.recorded_run_secs
        record = TuningRecord(sch.trace, stored, run_secs, target, args_info)
        if add_source is None:  # a view without a source table (memory, JSON): the record alone
            database.commit_tuning_record(record)
        else:
            source_id = add_source("transfer", _origin_location(origin, layers))
            database.commit_tuning_record(record, source_id=source_id)  # type: ignore[call-arg]
        if record.is_valid:
            timed.append((record.mean_run_secs, index))
        else:
            logger.info("%s: candidate %s failed: %s", name, label, result.error_msg)
    measured = ", ".join(f"{candidates[i][0]} {secs * 1e6:.1f} us" for secs, i in sorted(timed))
    if not timed:
        raise MsdbError(f"{name}: no transfer candidate nor the default schedule built and ran: "
                        f"{results[-1].error_msg}")
    best_secs, best = min(timed)
    default_secs = next((secs for secs, index in timed if candidates[index][2] is None), None)
    if default_secs is not None and best_secs > default_secs / MARGIN:
        best = len(candidates) - 1  # not clearly faster than the default schedule: keep the default
    label, sch, origin = candidates[best]
    summary = f"measured {len(candidates)}: {measured}"
    if origin is None:
        return sch.mod, None, summary
    return sch.mod, transfer_info(origin, answer, layers), summary


def _origin_location(origin: TransferredRecord | None, layers: Sequence[Layer]) -> str:
    """The `source.location` of a measured candidate: the record it came from (its layer, its
    workload's structural hash and its trace hash), or the default schedule."""
    if origin is None:
        return "default schedule"
    relative = origin.transfer.workload
    layer = next((layer.label for layer in layers if layer.database.has_workload(relative)), "?")
    return f"{layer}: workload {relative.shash}, record trace {origin.transfer.record.trace_hash()}"
