"""`compile(model, database, target)`: a model's functions scheduled from (layered) databases and
built into one runnable `CompiledModel` (TVM's MetaScheduleApplyDatabase plus a build).

Per function: normalize it as a workload, find the best valid record layer by layer
(`lookup.find_record`), apply it (or answer a miss by transfer, else the default schedule), then
build with llvmlite. `CompiledModel.timings` says where the time went, for bench/bench_compile.py.
See docs/architecture.md, "Compile".
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from typing import TYPE_CHECKING, Any, Sequence

from msdb.errors import MsdbError
from msdb.ir.function import IRModule, PrimFunc
from msdb.records import Target, TuningRecord, Workload
from msdb.tuner.compile.compiled_model import CompiledModel
from msdb.tuner.compile.lookup import Layer, Lookup, as_layers, find_record
from msdb.tuner.compile.report import FunctionReport, MissReason

if TYPE_CHECKING:
    from msdb.database.base import Database
    from msdb.database.transfer import TransferDatabase
    from msdb.model.graph import Model
    from msdb.tuner.kernel import Kernel
    from msdb.tuner.tune import Builder, Runner

__all__ = ["compile_model", "as_workload", "apply_record", "compile_target"]

logger = logging.getLogger(__name__)

#: Seconds one kernel may take to build in a worker (a heavily unrolled tuned conv takes ~10 s).
BUILD_TIMEOUT_S = 600.0

DatabaseArg = Any  # Database | location | a list of them | None (see lookup.as_layers)


def as_workload(func: PrimFunc) -> Workload:
    """The function as a database workload, normalized as task extraction does
    (`msdb.model.tasks.normalize_mod`: `{"main": f}`), so its hashes are the ones tuning stored."""
    from msdb.model.tasks import normalize_mod

    return Workload(normalize_mod(func))


def compile_target(target: Target | str | dict[str, Any] | None) -> Target:
    """The target to query and build for: as given, else this machine (`Target.host()`)."""
    coerced = Target.coerce(target)
    if coerced is None:
        return Target.host()
    if coerced.kind != "llvm":
        raise MsdbError(f"compile: target {coerced} is not a CPU (llvm) target; msdb compiles models for CPUs only")
    return coerced


def apply_record(record: TuningRecord, workload: Workload, target: Target) -> IRModule:
    """The function scheduled by `record` (step 3 of the module docstring); raises the
    schedule's `MsdbError` when the trace does not apply."""
    from msdb.database.base import replay
    from msdb.schedule import Schedule
    from msdb.tuner.space.anchor_trace import schedule_using_anchor_trace

    if record.workload.equal(workload, "ignore-tensor"):
        return replay(record).mod
    sch = Schedule(workload.mod)
    schedule_using_anchor_trace(sch, record.trace, target)
    return sch.mod


def _default_mod(func: PrimFunc, target: Target) -> IRModule:
    from msdb.tuner.space.default_schedule import default_schedule

    return default_schedule(func, target).mod


def _entry(name: str, workload: Workload, weight: int, found: Lookup, flop: int | None) -> FunctionReport:
    entry = FunctionReport(name=name, hash=workload.shash, weight=weight, hit=found.record is not None, flop=flop)
    record = found.record
    if record is not None:
        assert found.layer is not None
        entry.db = found.layer.label
        entry.matched_by = found.matched_by
        entry.scheduled_by = "anchor-block" if found.matched_by == "anchor-block" else "exact"
        secs = record.mean_run_secs
        entry.record_us = secs * 1e6 if math.isfinite(secs) else None  # a schedule function's record: no run
        entry.record_target = str(record.target) if record.target is not None else None
        # the record measured its own workload: an anchor-block match's has other epilogue blocks
        record_flop = flop if found.matched_by == "structural" else _flop(record.workload)
        if record_flop and entry.record_us is not None and secs > 0:
            entry.record_gflops = record_flop / secs / 1e9
    else:
        entry.reason = found.reason
        entry.detail = found.detail
        entry.targets_with_records = list(found.targets_with_records)
    return entry


def _miss(entry: FunctionReport, reason: str, detail: str) -> None:
    """Turn a found record into a miss (its trace did not apply): the answer is the default schedule."""
    entry.hit = False
    entry.db = entry.matched_by = entry.record_target = None
    entry.record_us = entry.record_gflops = None
    entry.scheduled_by = "default"
    if entry.transfer is not None:  # the transferred module is what failed: say so, keep the first miss
        entry.transfer_miss = f"the schedule transferred from {entry.transfer.workload}: {detail}"
        entry.transfer = None
        return
    entry.reason = reason
    entry.detail = detail


def _flop(workload: Workload) -> int | None:
    from msdb.ir.flops import estimate_flops

    try:
        return int(estimate_flops(workload.mod))
    except MsdbError:
        return None


def compile_model(model: Model | str | os.PathLike[str], database: DatabaseArg = None,
                  target: Target | str | dict[str, Any] | None = None, fuse: str = "tvm", *,
                  num_threads: int | None = None, build_workers: int = 1, transfer: bool = False,
                  transfer_neighbours: int = 3, transfer_trials: int = 0, record_database: Database | None = None,
                  builder: Builder | None = None, runner: Runner | None = None) -> CompiledModel:
    """Compile `model` (a `Model`, or a path for `msdb.model.load(path, fuse=fuse)`) with the
    records of `database` (one `Database` or location, or a list of them: layers, the first
    with a record wins) for `target` (default: this machine). `num_threads`: threads of the
    parallel loops when run (default: the target's `num-cores` when given, else libgomp's).
    `build_workers`: processes that build the kernels (1: in this process). `transfer`: answer
    the functions no record answers with a relative's re-fitted record (the nearest of
    `transfer_neighbours` that fit; nothing is measured). `transfer_trials` N > 0 (implies
    `transfer`): measure up to N of them and the default schedule with `builder` and `runner`
    (default: a local one-process builder and runner), keep the fastest, and commit what was
    measured to `record_database` (default: the first layer's database, which must be
    writable). See the module docstring for what happens to each function."""
    if isinstance(transfer_trials, bool) or not isinstance(transfer_trials, int) or transfer_trials < 0:
        raise MsdbError(f"compile: transfer_trials={transfer_trials!r} must be an int >= 0 (0: measure nothing)")
    timings = {"load": 0.0, "query": 0.0, "apply": 0.0, "build": 0.0}
    started = time.perf_counter()
    if isinstance(model, (str, os.PathLike)):
        from msdb.model.loader import load

        model = load(os.fspath(model), fuse=fuse)
    model.check()
    timings["load"] = time.perf_counter() - started
    build_target = compile_target(target)
    if num_threads is None and target is not None:
        cores = build_target.get("num-cores")
        num_threads = int(cores) if isinstance(cores, int) else None
    layers, opened = as_layers(database, writable_first=bool(transfer_trials) and record_database is None)
    if transfer_trials and record_database is None and not layers:
        raise MsdbError("compile: transfer_trials commits the measured candidates to the first database; give one")
    try:
        transfer_db = None
        trials: _Trials | None = None
        if transfer or transfer_trials:
            from msdb.tuner.compile.transfer import transfer_view

            transfer_db = transfer_view(layers, build_target, max(transfer_neighbours, transfer_trials),
                                        measured=bool(transfer_trials))
        if transfer_trials and transfer_db is not None:
            sink = record_database if record_database is not None else layers[0].database
            _check_writable(sink)
            trials = _Trials(transfer_trials, sink, builder, runner)
        try:
            mods, report = _schedule(model, layers, build_target, timings, transfer_db, trials)
        finally:
            if trials is not None:
                trials.close()
    finally:
        for layer in opened:
            layer.database.close()
    kernels = _build_all(model, mods, report, build_target, max(1, build_workers), timings)
    return CompiledModel(model, kernels, report, build_target, timings, num_threads=num_threads)


def _schedule(model: Model, layers: Sequence[Layer], target: Target, timings: dict[str, float],
              transfer: TransferDatabase | None = None, trials: _Trials | None = None
              ) -> tuple[dict[str, IRModule], list[FunctionReport]]:
    """Steps 1-5 of the module docstring: the scheduled module of every function, and the report."""
    counts = model.call_counts()
    views: dict[tuple[int, str], Database] = {}
    mods: dict[str, IRModule] = {}
    report: list[FunctionReport] = []
    for name, func in model.functions.items():
        t0 = time.perf_counter()
        workload = as_workload(func)
        found = find_record(layers, workload, target, views, name)
        entry = _entry(name, workload, counts.get(name, 0), found, _flop(workload))
        t1 = time.perf_counter()
        timings["query"] += t1 - t0
        mod: IRModule | None = None
        if found.record is not None:
            try:
                mod = apply_record(found.record, workload, target)
            except MsdbError as exc:
                logger.warning("%s: the record from %s does not apply: %s", name, entry.db, exc)
                _miss(entry, MissReason.TRACE_DOES_NOT_APPLY, f"the record from {entry.db}: {exc}")
        if mod is None and transfer is not None:
            mod = _transferred(entry, func, workload, target, transfer, layers, trials)
        mods[name] = mod if mod is not None else _default_mod(func, target)
        timings["apply"] += time.perf_counter() - t1
        report.append(entry)
    return mods, report


def _check_writable(database: Database) -> None:
    """`transfer_trials` commits what it measures: refuse, before anything is built or measured, a
    database that cannot take records (opened read-only, or a view that stores nothing)."""
    from msdb.database.schedule_fn import ScheduleFnDatabase
    from msdb.database.transfer import TransferDatabase
    from msdb.hub.remote import RemoteDatabase

    if getattr(database, "read_only", False) or isinstance(database, (ScheduleFnDatabase, TransferDatabase,
                                                                      RemoteDatabase)):
        raise MsdbError(f"compile: transfer_trials commits the measured candidates to {database!r}, which cannot take "
                        "records (read-only or a view); give a writable database first or as record_database")


class _Trials:
    """What `transfer_trials` measures with, made on first use and closed after the compile."""

    def __init__(self, count: int, database: Database, builder: Builder | None, runner: Runner | None) -> None:
        self.count = count
        self.database = database
        self._builder, self._runner = builder, runner
        self._own: list[Any] = []

    def tools(self) -> tuple[Builder, Runner]:
        if self._builder is None:
            from msdb.tuner.measure.builder import LocalBuilder

            self._builder = LocalBuilder(max_workers=1, timeout_sec=BUILD_TIMEOUT_S)
            self._own.append(self._builder)
        if self._runner is None:
            from msdb.tuner.measure.runner import LocalRunner
            from msdb.tuner.model_tuning import MODEL_TIMING

            # timed cold, as a model's tuning times them: in the model each function runs after
            # others that evicted its data (a warm timing picked a schedule 18% slower there)
            self._runner = LocalRunner(num_threads=1, **MODEL_TIMING)
            self._own.append(self._runner)
        return self._builder, self._runner

    def close(self) -> None:
        for tool in self._own:
            tool.close()


def _transferred(entry: FunctionReport, func: PrimFunc, workload: Workload, target: Target,
                 transfer: TransferDatabase, layers: Sequence[Layer], trials: _Trials | None) -> IRModule | None:
    """Step 4: the nearest relative's re-fitted schedule of a missed function (or, with
    `trials`, the fastest measured candidate), noted in its report entry; None (and why, in
    `transfer_miss`) when no relative's record fits or the default schedule measured fastest."""
    from msdb.tuner.compile.transfer import MARGIN as TRANSFER_MARGIN
    from msdb.tuner.compile.transfer import measure_transfer, transfer_info

    answer = transfer.answer(workload, target)
    if not answer.records:
        entry.transfer_miss = answer.reason
        if answer.skipped:
            entry.transfer_miss = f"{answer.reason}: " + "; ".join(str(skip) for skip in answer.skipped)
        return None
    if trials is not None:
        builder, runner = trials.tools()
        mod, info, measured = measure_transfer(entry.name, func, workload, target, answer, trials.count, builder,
                                               runner, trials.database, layers)
        if info is None:
            entry.transfer_miss = (f"the default schedule measured fastest, or no transferred candidate "
                                   f"{TRANSFER_MARGIN:g}x faster ({measured})")
            return mod
        info.measured = measured
        entry.scheduled_by = "transferred"
        entry.transfer = info
        entry.record_target = str(target)
        return mod
    entry.scheduled_by = "transferred"
    entry.transfer = transfer_info(answer.records[0], answer, layers)
    entry.record_target = str(answer.records[0].target) if answer.records[0].target is not None else None
    logger.info("%s: transferred from %s", entry.name, entry.transfer.describe())
    return answer.schedules[0].mod


def _build_all(model: Model, mods: dict[str, IRModule], report: list[FunctionReport], target: Target,
               workers: int, timings: dict[str, float]) -> dict[str, Kernel]:
    """Step 5: every scheduled module built, in this process (`workers` 1) or by a LocalBuilder
    with `workers` processes (LLVM's O3 on unrolled tuned kernels is most of a warm compile). A
    tuned module that does not build is a miss (trace does not apply) and gets the default
    schedule."""
    from msdb.tuner.kernel import build

    started = time.perf_counter()
    kernels: dict[str, Kernel] = {}
    failed: dict[str, str] = {}
    if workers <= 1:
        for entry in report:
            try:
                kernels[entry.name] = build(mods[entry.name], target)
            except MsdbError as exc:
                if entry.scheduled_by == "default":
                    for kernel in kernels.values():  # the compile fails: release what was loaded
                        kernel.close()
                    raise
                failed[entry.name] = str(exc)
    else:
        kernels, failed = _build_in_workers(mods, report, target, workers)
    for entry in report:
        if entry.name in failed:
            logger.warning("%s: the tuned module from %s does not build: %s", entry.name,
                           entry.db or entry.scheduled_by, failed[entry.name])
            origin = f"the record from {entry.db}" if entry.transfer is None else "it"
            _miss(entry, MissReason.TRACE_DOES_NOT_APPLY, f"{origin} does not build: {failed[entry.name]}")
            kernels[entry.name] = build(_default_mod(model.functions[entry.name], target), target)
    timings["build"] += time.perf_counter() - started
    return kernels


def _build_in_workers(mods: dict[str, IRModule], report: list[FunctionReport], target: Target, workers: int
                      ) -> tuple[dict[str, Kernel], dict[str, str]]:
    from msdb.tuner.codegen import CodegenError
    from msdb.tuner.kernel import load_kernel
    from msdb.tuner.measure.builder import BuilderInput, LocalBuilder

    kernels: dict[str, Kernel] = {}
    failed: dict[str, str] = {}
    names = [entry.name for entry in report]
    with LocalBuilder(max_workers=workers, timeout_sec=BUILD_TIMEOUT_S) as builder:
        results = builder.build([BuilderInput(mods[name], target) for name in names])
        for entry, result in zip(report, results):
            if result.artifact_path is None:
                if entry.scheduled_by == "default":
                    for kernel in kernels.values():  # the compile fails: release what was loaded
                        kernel.close()
                    raise CodegenError(f"{entry.name}: {result.error_msg}")
                failed[entry.name] = str(result.error_msg)
                continue
            with open(result.artifact_path + ".json") as meta, open(result.artifact_path, "rb") as obj:
                kernels[entry.name] = load_kernel(obj.read(), json.load(meta))
    return kernels, failed
