"""The schedule a function gets when no record and no search gives it one: fixed, fast, for CPU
targets (docs/architecture.md, "Default schedules"). `msdb compile` applies it to every miss;
the evolutionary search measures it in a task's first round. The steps are `default_planner`'s,
the register tile's sizes `register_tile`'s."""

from __future__ import annotations

from typing import Any

from msdb.errors import MsdbError
from msdb.ir.function import IRModule, PrimFunc
from msdb.records.target import Target
from msdb.schedule.schedule import Schedule
from msdb.tuner.space.default_planner import DefaultPlanner

__all__ = ["default_schedule", "DefaultScheduleError"]


class DefaultScheduleError(MsdbError):
    """The default schedule cannot be made for this function or target."""


def default_schedule(func: PrimFunc | IRModule, target: Target | str | dict[str, Any] | None = None) -> Schedule:
    """A fixed schedule of `func` for a CPU `target` (None: this machine, one core); see
    docs/architecture.md, "Default schedules". Deterministic: the same function and target give
    the same trace."""
    coerced = Target.coerce(target) if target is not None else Target({"kind": "llvm", "num-cores": 1})
    assert coerced is not None
    if coerced.kind != "llvm":
        raise DefaultScheduleError(f"default_schedule: target kind {coerced.kind!r} is not a CPU target; msdb's "
                                   "default schedules are for 'llvm' targets")
    planner = DefaultPlanner(Schedule(func, seed=0), coerced)
    planner.run()
    return planner.sch
