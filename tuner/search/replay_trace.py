"""`ReplayTrace` (TVM's strategy of the same name): each candidate replays a random design
space's trace with every sampling decision drawn anew. No cost model; the baseline the
evolutionary search must beat."""

from __future__ import annotations

from typing import TYPE_CHECKING

from msdb.schedule.trace import Trace
from msdb.tuner.search.base import SearchStrategy
from msdb.tuner.search.replay import ReplayFailures, apply_trace, module_key

if TYPE_CHECKING:
    from msdb.schedule.schedule import Schedule
    from msdb.tuner.candidate import MeasureCandidate

__all__ = ["ReplayTrace"]


class ReplayTrace(SearchStrategy):
    """Random decisions on the design spaces' traces; a round gives up after `max_fail_count`
    candidates in a row that fail or repeat a measured module."""

    def __init__(self, max_fail_count: int = 100) -> None:
        super().__init__()
        self.max_fail_count = max_fail_count
        self.failures = ReplayFailures()

    def generate_measure_candidates(self) -> list[MeasureCandidate] | None:
        from msdb.tuner.candidate import MeasureCandidate

        context = self._context()
        assert context.mod is not None
        wanted = self._round_size()
        if wanted == 0:
            return None
        postprocs = context.space_generator.postprocs if context.space_generator is not None else []
        equality = self.database.module_equality if self.database is not None else "structural"
        picked: list[Schedule] = []
        pending: list[tuple[str, Schedule]] = []  # claimed (`_claim`) once a round's worth is found
        misses = 0
        while len(picked) < wanted and misses < self.max_fail_count:
            space = self.design_spaces[self.rng.randrange(len(self.design_spaces))]
            sch = apply_trace(context.mod, Trace(space.insts), postprocs, self.rng.getrandbits(31), self.failures)
            key = module_key(sch.mod, equality) if sch is not None else None
            if key is None or key in self.measured:
                misses += 1
                continue
            misses = 0
            self.measured.add(key)
            pending.append((key, sch))  # type: ignore[arg-type]
            if len(picked) + len(pending) >= wanted:
                picked.extend(self._claim(pending))
                pending = []
        picked.extend(self._claim(pending))
        return [MeasureCandidate.of(sch) for sch in picked] or None
