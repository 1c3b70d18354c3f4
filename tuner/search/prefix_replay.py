"""Mutants replayed from where they first differ from their parent (docs/architecture.md,
"Search").

A mutant is its parent's trace with one decision changed (a tile size, a compute location,
an unroll step) or one annotation rewritten. Everything the trace does before that
instruction is what the parent's replay already did, so a replay of the mutant can start
from a copy of the parent's schedule as it stood there. While a candidate is replayed its
schedule is copied before each sampling instruction (the places a mutant can first differ)
and after its last instruction; a mutant of it resumes from the last copy at or before its
first difference. The mutators that analyze the parent's schedule to choose a change (the
compute locations it could take, the loops its parallel annotation could fuse) read the same
copies (`states_of`) instead of replaying the parent again.

The result is the module, trace and decisions a replay from the start gives:
- a mutant's trace is fully decided, so a replay from the start draws nothing from its RNG
  before the resumed part, and the resumed schedule's RNG is seeded as a fresh one would be;
- the resumed schedule shares the parent's RVs and loop variables for the prefix, which only
  names them (the trace's JSON numbers RVs by order, and structural hashing and equality map
  variables by position).

Copies are kept only for the current generation's members (`keep_only`), a few tens of KB of
shared IR each.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from msdb.ir.function import IRModule
    from msdb.schedule.schedule import Schedule
    from msdb.schedule.trace import Trace
    from msdb.tuner.space.mutators.base import ReplayedStates

__all__ = ["PrefixReplays"]

#: The seed of a kept copy's own RNG, never drawn from: a resumed replay copies the copy with
#: the mutant's seed.
_UNUSED_SEED = 0


class PrefixReplays:
    """The copies of each live candidate's schedule before its sampling instructions."""

    def __init__(self) -> None:
        # id(candidate schedule) -> (that schedule, [(instruction index, copy before it)])
        self._copies: dict[int, tuple[Schedule, list[tuple[int, Schedule]]]] = {}
        self.resumed = 0  # mutants replayed from a copy (for the benchmark's breakdown)
        self.skipped_instructions = 0

    def begin(self, mod: IRModule, trace: Trace, seed: int, parent: Schedule | None
              ) -> tuple[Schedule, int, list[tuple[int, Schedule]], Callable[[int, Schedule], None]]:
        """How to replay `trace` with `seed`: (the schedule to replay on, the instruction to
        start at, the list of copies the replay fills, the `branch_point` hook of
        `Trace.apply_to_schedule` that fills it). A fully decided `trace` mutated from `parent` (what a mutator returns) starts
        from the parent's last copy at or before their first difference, and inherits the
        parent's copies before that; anything else starts from the beginning."""
        from msdb.schedule.schedule import Schedule

        sch, start, copies = Schedule(mod, seed=seed), 0, []
        kept = self._copies.get(id(parent)) if parent is not None else None
        if kept is not None and kept[0] is parent:
            first = _first_difference(kept[0].trace, trace)
            earlier = [(index, copy) for index, copy in kept[1] if index <= first]
            if earlier:
                start, copy = earlier[-1]
                sch = copy.copy(seed=seed)
                copies = earlier[:-1]
                self.resumed += 1
                self.skipped_instructions += start

        def branch_point(index: int, at: Schedule) -> None:
            copies.append((index, at.copy(seed=_UNUSED_SEED)))

        return sch, start, copies, branch_point

    def remember(self, sch: Schedule, copies: list[tuple[int, Schedule]]) -> None:
        """Keep `copies` (a replay's, in instruction order) for mutants of `sch`."""
        if copies:
            self._copies[id(sch)] = (sch, copies)

    def states_of(self, sch: Schedule) -> ReplayedStates | None:
        """What a mutator may read instead of replaying `sch`'s trace: the kept copy of `sch`
        as it stood before instruction `index` (None when none was kept there); None when no
        copy of `sch` is kept."""
        kept = self._copies.get(id(sch))
        if kept is None or kept[0] is not sch:
            return None
        by_index = dict(kept[1])
        return by_index.get

    def keep_only(self, members: list[Schedule]) -> None:
        """Drop the copies of every schedule not in `members`."""
        alive = {id(sch) for sch in members}
        for key in [key for key in self._copies if key not in alive]:
            del self._copies[key]

    def clear(self) -> None:
        self._copies.clear()


def _first_difference(parent: Trace, mutant: Trace) -> int:
    """The index of the first instruction of `mutant` that is not the parent's same
    instruction with the same decision."""
    ours, theirs = mutant.insts, parent.insts
    decided, parent_decided = mutant.decisions, parent.decisions
    limit = min(len(ours), len(theirs))
    for i in range(limit):
        inst = ours[i]
        if inst is not theirs[i]:
            return i
        if inst in decided and decided[inst] != parent_decided.get(inst):
            return i
    return limit
