"""`Profiler`: where a tuning run's time goes, TVM's meta_schedule Profiler
(docs/architecture.md, "Tuner", "Profiling").

    with Profiler() as p:
        tune_tir(mod, target, db, 64)
        with Profiler.timeit("my step"):        # user code gets a phase of its own
            ...
    p.get()     # {"sampling": 1.2, "replay": 3.4, ..., "other": 0.3, "Total": 20.1}
    print(p.table())

The tuner times its phases (`PHASES`) with `Profiler.timeit`; without an active profiler that
costs nothing. Unlike TVM's (which adds each scope's whole time, nested scopes included), a
phase here counts its own time only: time in a phase nested inside another counts for the inner
one, so the phases and "other" (what no phase covers) add up to "Total", the profiler's wall time.
A profiler is active in the thread that entered it; phases timed in other threads or in forked
workers are not seen (they run while a phase of this thread waits for them).
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator

__all__ = ["Profiler", "PHASES"]

#: The tuner's phases, in the order of a round: the search strategy's own steps (mutating,
#: deduplicating, selecting: what its round spends in no other phase), drawing random samples of
#: the design spaces, replaying traces, post-processing, feature extraction, the cost model
#: (training and prediction, features excluded), building, running, and database reads and
#: writes.
PHASES = ("search", "sampling", "replay", "post-processing", "features", "cost model", "build", "run", "database")

_active = threading.local()


@dataclass
class _Scope:
    """An open phase: when it began, and the seconds of the phases nested in it so far."""

    started: float
    nested: float = 0.0


def _stack() -> list[Profiler]:
    stack: list[Profiler] | None = getattr(_active, "profilers", None)
    if stack is None:
        stack = _active.profilers = []
    return stack


class Profiler:
    """Seconds by phase of what runs inside `with Profiler() as p:` (see the module docstring)."""

    def __init__(self) -> None:
        self._seconds: dict[str, float] = {}
        self._scopes: list[_Scope] = []  # open phases, innermost last
        self._started: float | None = None
        self._total: float | None = None

    def __enter__(self) -> Profiler:
        _stack().append(self)
        self._started = time.perf_counter()
        self._total = None
        return self

    def __exit__(self, *exc: Any) -> None:
        assert self._started is not None
        self._total = time.perf_counter() - self._started
        stack = _stack()
        if stack and stack[-1] is self:
            stack.pop()

    @staticmethod
    def current() -> Profiler | None:
        """The innermost profiler active in this thread, if any."""
        stack = _stack()
        return stack[-1] if stack else None

    @staticmethod
    @contextmanager
    def timeit(name: str) -> Iterator[None]:
        """Count the block's own time (nested phases excluded) as phase `name` of the active
        profiler; nothing without one."""
        profiler = Profiler.current()
        if profiler is None:
            yield
            return
        scope = _Scope(time.perf_counter())
        profiler._scopes.append(scope)
        try:
            yield
        finally:
            elapsed = time.perf_counter() - scope.started
            profiler._scopes[:] = [s for s in profiler._scopes if s is not scope]
            profiler._seconds[name] = profiler._seconds.get(name, 0.0) + elapsed - scope.nested
            if profiler._scopes:
                profiler._scopes[-1].nested += elapsed

    @property
    def total(self) -> float:
        """The profiler's wall time: inside its `with` block so far, or all of it once left."""
        if self._total is not None:
            return self._total
        return time.perf_counter() - self._started if self._started is not None else 0.0

    def get(self) -> dict[str, float]:
        """Seconds by phase: the tuner's `PHASES` (0 when a phase did not occur), any other
        phase timed, "other" (the time no phase covers) and "Total" (the profiler's wall time)."""
        out = {name: 0.0 for name in PHASES}
        out.update(self._seconds)
        total = self.total
        out["other"] = total - sum(out.values())
        out["Total"] = total
        return out

    def table(self) -> str:
        """The phases as a text table, largest first: seconds and share of the total."""
        stats = self.get()
        total = stats.pop("Total")
        rows = sorted(stats.items(), key=lambda kv: -kv[1])
        width = max(len("Phase"), *(len(name) for name in stats))
        lines = [f"{'Phase':<{width}} | {'Seconds':>9} | {'Share':>6}", "-" * (width + 21)]
        for name, secs in rows:
            share = secs / total * 100 if total > 0 else 0.0
            lines.append(f"{name:<{width}} | {secs:9.3f} | {share:5.1f}%")
        lines.append("-" * (width + 21))
        lines.append(f"{'Total':<{width}} | {total:9.3f} | {100.0 if total > 0 else 0.0:5.1f}%")
        return "\n".join(lines)
