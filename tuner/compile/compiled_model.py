"""`CompiledModel`: a model's built kernels and the buffers they run on (docs/architecture.md,
"Compile").

Why buffers are allocated once: a model run is a fixed sequence of kernel calls on tensors of
static shapes, so every intermediate tensor gets its array when the model is compiled and every
run reuses it (no allocation in `run`, as TVM's graph executor plans its storage once); the
weights are bound once too. `run` copies the inputs into their buffers and returns copies of the
outputs, so the arrays a caller holds are never overwritten by the next run.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from msdb.errors import MsdbError
from msdb.tuner.compile.report import FunctionReport, format_report, report_json, summary_line

if TYPE_CHECKING:
    import numpy as np

    from msdb.model.graph import Model
    from msdb.records import Target
    from msdb.tuner.kernel import Kernel
    from msdb.tuner.measure.timing import TimingResult

__all__ = ["CompiledModel", "ModelInputError", "FunctionTime"]


class ModelInputError(MsdbError, ValueError):
    """Inputs that do not match the compiled model's inputs (names, shapes, dtypes)."""


@dataclass(frozen=True)
class FunctionTime:
    """One function's share of a model run (`CompiledModel.profile`): its calls and the seconds
    they take per run, timed in the model's order (caches as a real run leaves them)."""

    name: str
    calls: int
    seconds: float


class CompiledModel:
    """A compiled model: `run({input: array}) -> [output arrays]`, its hit/miss `report`, and
    where compile time went (`timings`, seconds by phase)."""

    def __init__(self, model: Model, kernels: Mapping[str, Kernel], report: Sequence[FunctionReport],
                 target: Target, timings: Mapping[str, float] | None = None, *, num_threads: int | None = None) -> None:
        import numpy as np

        from msdb.tuner.compile.memory_plan import intermediate_buffers

        self.model = model
        self.kernels = dict(kernels)
        self.report: list[FunctionReport] = list(report)
        self.target = target
        self.timings: dict[str, float] = dict(timings or {})
        self.num_threads = num_threads
        for kernel in self.kernels.values():
            kernel.num_threads = num_threads
        self._buffers: dict[str, np.ndarray] = intermediate_buffers(model)
        for name, info in model.values.items():
            if name in self._buffers:
                continue
            dtype = np.dtype("bool") if info.dtype == "bool" else np.dtype(info.dtype)
            if name in model.params:
                # asarray, not ascontiguousarray: that makes a 0-d parameter (a Clip bound) 1-d
                self._buffers[name] = np.asarray(model.params[name], dtype=dtype, order="C")
                if self._buffers[name].shape != info.shape:
                    raise MsdbError(f"{model.name}: parameter {name!r} has shape {self._buffers[name].shape}, "
                                    f"the model says {info.shape}")
            else:
                self._buffers[name] = np.zeros(info.shape, dtype=dtype)
        # each call checked once, here (`Kernel.bind`; `_buffers` keeps the arrays alive): a run
        # only calls (12 us of checks a call were 7% of a MobileNetV2 run)
        self._calls = [self.kernels[call.function].bind(*(self._buffers[n] for n in call.args + call.outputs))
                       for call in model.calls]

    @property
    def input_names(self) -> list[str]:
        return [info.name for info in self.model.inputs]

    @property
    def output_names(self) -> list[str]:
        return list(self.model.outputs)

    def _bind_inputs(self, inputs: Mapping[str, Any]) -> None:
        import numpy as np

        if not isinstance(inputs, Mapping):
            raise ModelInputError(f"{self.model.name}: run takes a dict {{input name: array}}, got "
                                  f"{type(inputs).__name__}")
        expected = {info.name: info for info in self.model.inputs}
        unknown = sorted(set(inputs) - set(expected))
        missing = [name for name in expected if name not in inputs]
        if unknown or missing:
            wanted = ", ".join(f"{i.name} {i.dtype}{list(i.shape)}" for i in self.model.inputs)
            problem = "; ".join(part for part in (
                f"unknown input(s) {', '.join(map(repr, unknown))}" if unknown else "",
                f"missing input(s) {', '.join(map(repr, missing))}" if missing else "") if part)
            raise ModelInputError(f"{self.model.name}: {problem}; the model takes {wanted}")
        for name, info in expected.items():
            value = inputs[name]
            array = value if isinstance(value, np.ndarray) else np.asarray(value)
            if tuple(array.shape) != info.shape:
                raise ModelInputError(f"{self.model.name}: input {name!r} has shape {list(array.shape)}, the model "
                                      f"takes {info.dtype}{list(info.shape)}")
            if str(array.dtype) != info.dtype:
                raise ModelInputError(f"{self.model.name}: input {name!r} has dtype {array.dtype}, the model takes "
                                      f"{info.dtype}{list(info.shape)} (convert it with .astype({info.dtype!r}))")
            np.copyto(self._buffers[name], array)

    def _execute(self) -> None:
        from msdb.tuner.codegen.jit import set_num_threads

        set_num_threads(self.num_threads)
        for call in self._calls:
            call()

    def run(self, inputs: Mapping[str, Any]) -> list[np.ndarray]:
        """Run the model on `inputs` (every input by name, exact shape and dtype); the outputs in
        the model's order, as fresh arrays."""
        self._bind_inputs(inputs)
        self._execute()
        return [self._buffers[name].copy() for name in self.model.outputs]

    def benchmark(self, inputs: Mapping[str, Any] | None = None, repeat: int = 5, number: int = 1,
                  min_repeat_ms: float = 0.0) -> TimingResult:
        """Seconds per whole-model run (TVM's time_evaluator semantics, one warm-up run): on
        `inputs`, else on seeded random inputs (`reference.random_inputs`)."""
        from msdb.tuner.compile.reference import random_inputs
        from msdb.tuner.measure.timing import evaluate

        self._bind_inputs(random_inputs(self) if inputs is None else inputs)

        def timed(n: int) -> int:
            start = time.perf_counter_ns()
            for _ in range(n):
                self._execute()
            return time.perf_counter_ns() - start

        return evaluate(timed, number, repeat, min_repeat_ms)

    def profile(self, inputs: Mapping[str, Any] | None = None, repeat: int = 5) -> list[FunctionTime]:
        """Where a run's time goes: per function, the seconds its calls take per model run
        (median of `repeat` whole runs after one warm-up, each call timed where the model makes
        it, so a kernel finds the caches the previous one left, unlike `benchmark` of a kernel
        alone); slowest first, and each function's `report` entry gets its `run_ms`. On
        `inputs`, else seeded random inputs."""
        from collections import Counter
        from statistics import median

        from msdb.tuner.compile.reference import random_inputs

        if repeat < 1:
            raise ValueError(f"profile: repeat must be >= 1, got {repeat}")
        self._bind_inputs(random_inputs(self) if inputs is None else inputs)
        self._execute()
        names = [call.function for call in self.model.calls]
        runs: list[dict[str, int]] = []
        for _ in range(repeat):
            spent: dict[str, int] = dict.fromkeys(names, 0)
            for name, call in zip(names, self._calls):
                start = time.perf_counter_ns()
                call()
                spent[name] += time.perf_counter_ns() - start
            runs.append(spent)
        out = [FunctionTime(name, count, median(run[name] for run in runs) * 1e-9)
               for name, count in Counter(names).items()]
        by_name = {f.name: f for f in out}
        for entry in self.report:
            if entry.name in by_name:
                entry.run_ms = by_name[entry.name].seconds * 1e3
        return sorted(out, key=lambda f: -f.seconds)

    # ---- the report ----
    @property
    def hits(self) -> list[FunctionReport]:
        return [e for e in self.report if e.hit]

    def report_json(self) -> str:
        """The report as JSON text: a list, one object per function (`FunctionReport.as_json`)."""
        return report_json(self.report)

    def report_table(self) -> str:
        """The report as a plain-text table with a summary line."""
        return format_report(self.report) + "\n" + summary_line(self.report)

    def close(self) -> None:
        """Release the loaded kernels."""
        for kernel in self.kernels.values():
            kernel.close()
        self.kernels.clear()
        self._calls = []

    def __repr__(self) -> str:
        return f"CompiledModel({self.model.name!r}, {len(self.kernels)} functions, {summary_line(self.report)})"
