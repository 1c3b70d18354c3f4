"""Shared timing helpers for bench/ scripts: medians over repeats, printed as comparable rows."""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from typing import Callable


def median_seconds(fn: Callable[[], object], repeat: int = 50, warmup: int = 3) -> float:
    """Median wall time of `fn()` over `repeat` calls after `warmup` untimed calls."""
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def fresh_process_seconds(code: str, repeat: int = 7) -> float:
    """Median wall time of running `python -c code` in a fresh interpreter, minus an empty one."""

    def run(snippet: str) -> float:
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", snippet], check=True)
        return time.perf_counter() - started

    base = statistics.median(run("pass") for _ in range(repeat))
    return statistics.median(run(code) for _ in range(repeat)) - base


def row(name: str, value: float, unit: str, budget: float | None = None, note: str = "") -> str:
    verdict = "" if budget is None else ("ok" if value <= budget else "OVER")
    budget_text = "" if budget is None else f"< {budget:g} {unit}"
    return f"| {name} | {value:.3f} {unit} | {budget_text} | {verdict} | {note} |"


def cpu_line(mcpu: str | None = None) -> str:
    """Which CPU a figure came from: LLVM's name for the host, its vector width, and
    the `-mcpu` the kernels were built for when it is not the host's."""
    import llvmlite.binding as llvm

    from msdb.tuner.codegen.jit import TargetSpec, host_spec, vector_register_bits

    host = host_spec()
    text = f"CPU: {llvm.get_host_cpu_name()} ({vector_register_bits(host)}-bit vectors)"
    if mcpu and mcpu != host.cpu:
        text += f"; kernels built for -mcpu={mcpu} ({vector_register_bits(TargetSpec(host.triple, mcpu, ''))}-bit vectors)"
    return text

