"""TVM's `time_evaluator` semantics, shared by `Kernel.time_evaluator` and the runner workers.

One warm-up call; then for each repeat, `number` calls are timed together, and while that span
is shorter than `min_repeat_ms`, `number` grows to max(min_repeat_ms / per-call + 1,
number * 1.618) and the repeat is timed again (`number` keeps its grown value for the next
repeat). Each repeat reports span / number in seconds. An optional cache flush runs before each
repeat (`flush_arguments`).
"""

from __future__ import annotations

import ctypes
import functools
from dataclasses import dataclass
from typing import Any, Callable, Sequence

__all__ = ["TimingResult", "evaluate", "flush_arguments"]

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


#: LLVM IR of `msdb_clflush_lines(start, lines)`: `clflush` on `lines` 64-byte lines from `start`.
_CLFLUSH_IR = """
declare void @llvm.x86.sse2.clflush(ptr)

define void @msdb_clflush_lines(ptr %start, i64 %lines) nounwind {
entry:
  %any = icmp sgt i64 %lines, 0
  br i1 %any, label %loop, label %done
loop:
  %i = phi i64 [0, %entry], [%next, %loop]
  %offset = shl i64 %i, 6
  %line = getelementptr i8, ptr %start, i64 %offset
  call void @llvm.x86.sse2.clflush(ptr %line)
  %next = add i64 %i, 1
  %more = icmp slt i64 %next, %lines
  br i1 %more, label %loop, label %done
done:
  ret void
}
"""


@functools.lru_cache(maxsize=1)
def _clflush_lines() -> tuple[Any, Callable[[int, int], None]]:
    """The line flush, compiled once per process (and the loaded object that holds it)."""
    from msdb.tuner.codegen import jit

    spec = jit.host_spec()
    _, obj = jit.compile_ir(_CLFLUSH_IR, spec)
    loaded = jit.load_object(obj, spec)
    return loaded, ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64)(loaded.address("msdb_clflush_lines"))


def flush_arguments(arrays: Sequence[Any]) -> None:
    """Evict every argument but the first from all cache levels, a `clflush` per 64-byte line:
    TVM's `cache_flush_cpu_non_first_arg`, the preprocessing its runners' cache flush uses. In a
    model a kernel's weights come from memory but its first argument, the activation the layer
    before it has just written, from cache (docs/architecture.md, "What msdb adds to TVM's
    tuning loop": why a model's candidates are timed cold, and what this flush replaced)."""
    flush = _clflush_lines()[1]
    for array in arrays[1:]:
        if not array.nbytes:
            continue
        start = array.ctypes.data & ~63
        flush(start, (array.ctypes.data + array.nbytes - start + 63) // 64)
