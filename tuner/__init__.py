"""msdb's own tuner (docs/architecture.md, "Tuner"): search space, search, cost models, codegen,
measurement, task scheduling and compile. Imports point one way: tuner -> msdb.

Code generation and measurement (this package's CPU backend):

    kernel = build(mod)                         # llvmlite: lower -> LLVM IR -> O3 -> object code
    kernel(a, b, c)                             # numpy arrays, outputs written in place
    kernel.time_evaluator(number=3, repeat=1, min_repeat_ms=100)(a, b, c).results

    Builder.create("local", max_workers, timeout_sec).build([BuilderInput(mod), ...]) -> [BuilderResult]
    Runner.create("local", timeout_sec, number, ...).run([RunnerInput(path), ...]) -> [RunnerFuture]
    with Profiler() as p: tune_tir(...)   ->  p.table()

Names are loaded lazily so that `import msdb.tuner` does not import llvmlite.
"""

from __future__ import annotations

from msdb.lazy import lazy_getattr

from typing import Any

#: name -> (module, attribute), imported on first use.
_LAZY: dict[str, tuple[str, str | None]] = {
    "build": ("msdb.tuner.kernel", "build"),
    "Kernel": ("msdb.tuner.kernel", "Kernel"),
    "load_kernel": ("msdb.tuner.kernel", "load_kernel"),
    "TimingResult": ("msdb.tuner.measure.timing", "TimingResult"),
    "Builder": ("msdb.tuner.measure.builder", "Builder"),
    "Runner": ("msdb.tuner.measure.runner", "Runner"),
    "RunnerFuture": ("msdb.tuner.measure.runner", "RunnerFuture"),
    "MeasureCallback": ("msdb.tuner.measure.callback", "MeasureCallback"),
    "Profiler": ("msdb.tuner.profiler", "Profiler"),
    "tune_tir": ("msdb.tuner.tune", "tune_tir"),
    "tune_tasks": ("msdb.tuner.tune", "tune_tasks"),
    "LocalBuilder": ("msdb.tuner.measure.builder", "LocalBuilder"),
    "BuilderInput": ("msdb.tuner.measure.builder", "BuilderInput"),
    "BuilderResult": ("msdb.tuner.measure.builder", "BuilderResult"),
    "LocalRunner": ("msdb.tuner.measure.runner", "LocalRunner"),
    "RunnerInput": ("msdb.tuner.measure.runner", "RunnerInput"),
    "RunnerResult": ("msdb.tuner.measure.runner", "RunnerResult"),
    "CodegenError": ("msdb.tuner.codegen.errors", "CodegenError"),
    "tune_model": ("msdb.tuner.model_tuning", "tune_model"),
    # the package is callable: msdb.tuner.compile(model, database, target) (see its docstring)
    "compile": ("msdb.tuner.compile", None),
    "CompiledModel": ("msdb.tuner.compile.compiled_model", "CompiledModel"),
}

__all__ = sorted(_LAZY)


__getattr__ = lazy_getattr(__name__, _LAZY, globals())
