"""What the search hands to measurement (docs/architecture.md, "Tuner"): TVM's
`MeasureCandidate`, a post-processed schedule and the arguments its kernel takes.

The schedule's trace is what a database stores for the candidate, so a candidate carries the
schedule itself rather than a built module."""

from __future__ import annotations

from dataclasses import dataclass

from msdb.records.record import ArgInfo
from msdb.schedule.schedule import Schedule

__all__ = ["MeasureCandidate"]


@dataclass(frozen=True)
class MeasureCandidate:
    """A post-processed schedule (`sch.trace` is what gets stored) and its arguments' infos."""

    sch: Schedule
    args_info: list[ArgInfo]

    @staticmethod
    def of(sch: Schedule) -> MeasureCandidate:
        """A candidate whose arguments are those of the schedule's module's entry function."""
        return MeasureCandidate(sch, ArgInfo.from_prim_func(sch.mod))
