"""`ScheduleFn` (TVM's space generator of the same name): a user's function writes the design
space with sampling primitives (`sch.sample_perfect_tile`, ...). It gets a traced schedule of
the module and returns nothing (the schedule itself is the space), a schedule, or a list of
them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from msdb.schedule.schedule import Schedule
from msdb.tuner.space.generators.base import SpaceGenerator

if TYPE_CHECKING:
    from msdb.ir.function import IRModule

__all__ = ["ScheduleFn"]


class ScheduleFn(SpaceGenerator):
    """Design spaces from `sch_fn(sch)`; no schedule rules of its own."""

    def __init__(self, sch_fn: Callable[[Schedule], Any], sch_rules: Any = None, **kwargs: Any) -> None:
        super().__init__(sch_rules=sch_rules, **kwargs)
        self.sch_fn = sch_fn

    def generate_design_space(self, mod: IRModule) -> list[Schedule]:
        sch = Schedule(mod, seed=self._fork_seed())
        returned = self.sch_fn(sch)
        if returned is None:
            return [sch]
        if isinstance(returned, Schedule):
            return [returned]
        spaces = list(returned) if isinstance(returned, (list, tuple)) else [returned]
        if not all(isinstance(s, Schedule) for s in spaces):
            raise TypeError(f"ScheduleFn: the schedule function returned {returned!r}; "
                            "expected None, a Schedule or a list of Schedules")
        return spaces
