"""`ReplayFunc` (TVM's strategy of the same name): each candidate re-runs the space generator
(a schedule function samples as it goes) and post-processes one of the schedules it makes."""

from __future__ import annotations

from typing import TYPE_CHECKING

from msdb.errors import MsdbError
from msdb.tuner.search.base import SearchStrategy
from msdb.tuner.search.replay import ReplayFailures, module_key

if TYPE_CHECKING:
    from msdb.schedule.schedule import Schedule
    from msdb.tuner.candidate import MeasureCandidate

__all__ = ["ReplayFunc"]


class ReplayFunc(SearchStrategy):
    """Fresh design spaces for every candidate; gives up a round after `max_fail_count`
    failures or repeats in a row."""

    def __init__(self, max_fail_count: int = 100) -> None:
        super().__init__()
        self.max_fail_count = max_fail_count
        self.failures = ReplayFailures()

    def generate_measure_candidates(self) -> list[MeasureCandidate] | None:
        from msdb.tuner.candidate import MeasureCandidate

        context = self._context()
        assert context.mod is not None and context.space_generator is not None
        wanted = self._round_size()
        if wanted == 0:
            return None
        generator = context.space_generator
        equality = self.database.module_equality if self.database is not None else "structural"
        picked: list[Schedule] = []
        pending: list[tuple[str, Schedule]] = []  # claimed (`_claim`) once a round's worth is found
        misses = 0
        while len(picked) < wanted and misses < self.max_fail_count:
            try:
                spaces = generator.generate_design_space(context.mod)
                sch = spaces[self.rng.randrange(len(spaces))]
                sch.enter_postproc()
                ok = all(postproc.apply(sch) for postproc in generator.postprocs)
            except MsdbError as exc:
                self.failures[type(exc).__name__] += 1
                ok = False
            key = module_key(sch.mod, equality) if ok else None
            if key is None or key in self.measured:
                misses += 1
                continue
            misses = 0
            self.measured.add(key)
            pending.append((key, sch))
            if len(picked) + len(pending) >= wanted:
                picked.extend(self._claim(pending))
                pending = []
        picked.extend(self._claim(pending))
        return [MeasureCandidate.of(sch) for sch in picked] or None
