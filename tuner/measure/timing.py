"""TVM's `time_evaluator` semantics, shared by `Kernel.time_evaluator` and the runner workers.

One warm-up call; then for each repeat, `number` calls are timed together, and while that span
is shorter than `min_repeat_ms`, `number` grows to max(min_repeat_ms / per-call + 1,
number * 1.618) and the repeat is timed again (`number` keeps its grown value for the next
repeat). Each repeat reports span / number in seconds. An optional cache flush runs before each
repeat.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

__all__ = ["TimingResult", "evaluate", "flush_cpu_cache"]

_GOLDEN = 1.618
_ZERO_LIMIT = 100


@dataclass(frozen=True)
class TimingResult:
    """Seconds per call of each repeat (TVM's ProfileResult)."""

    results: tuple[float, ...]
    number: int

    @property
    def mean(self) -> float:
        return sum(self.results) / len(self.results)

    @property
    def median(self) -> float:
        ordered = sorted(self.results)
        n = len(ordered)
        return ordered[n // 2] if n % 2 else 0.5 * (ordered[n // 2 - 1] + ordered[n // 2])

    @property
    def min(self) -> float:
        return min(self.results)

    @property
    def max(self) -> float:
        return max(self.results)


def evaluate(timed: Callable[[int], int], number: int = 3, repeat: int = 1, min_repeat_ms: float = 100.0,
             preproc: Callable[[], None] | None = None) -> TimingResult:
    """Time a kernel: `timed(n)` runs it n times and returns the elapsed nanoseconds."""
    if number < 1 or repeat < 1:
        raise ValueError(f"number ({number}) and repeat ({repeat}) must be at least 1")
    timed(1)  # warm-up: page faults, lazy binding, thread pool start
    results: list[float] = []
    for _ in range(repeat):
        if preproc is not None:
            preproc()
        duration_ms = 0.0
        zeros = 0
        while True:
            if duration_ms > 0.0:
                number = int(max(min_repeat_ms / (duration_ms / number) + 1, number * _GOLDEN))
            nanos = timed(number)
            if nanos <= 0:
                zeros += 1
            duration_ms = max(nanos, 0) / 1e6
            if duration_ms >= min_repeat_ms or zeros >= _ZERO_LIMIT:
                break
        results.append(duration_ms / 1e3 / number)
    return TimingResult(tuple(results), number)


_FLUSH_BYTES = 64 << 20
_flush_buffer: list = []


def flush_cpu_cache() -> None:
    """Evict caches by writing a buffer larger than the last-level cache."""
    import numpy as np

    if not _flush_buffer:
        _flush_buffer.append(np.empty(_FLUSH_BYTES // 8, dtype=np.float64))
    buf = _flush_buffer[0]
    buf.fill(1.0)

