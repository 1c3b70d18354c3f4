"""The schedule rule interface (docs/architecture.md, "Tuner"): TVM's `ScheduleRule`. A rule
looks at one block of a schedule and returns the schedules it turns it into (none, one, or
several variants: the design spaces multiply); `PostOrderApply` runs every rule on every block.

A user's own rule subclasses `ScheduleRule` and overrides `apply` (and `clone` when it holds
state); `ScheduleRule.create("llvm")` gives TVM's default CPU rules in TVM's order."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from msdb.tuner.kinds import load_kind

if TYPE_CHECKING:
    from msdb.schedule.rv import BlockRV
    from msdb.schedule.schedule import Schedule
    from msdb.tuner.context import TuneContext

__all__ = ["ScheduleRule", "create"]


class ScheduleRule:
    """Base class of schedule rules."""

    context: TuneContext | None = None

    def _initialize_with_tune_context(self, context: TuneContext) -> None:
        self.context = context

    def apply(self, sch: Schedule, block: BlockRV) -> list[Schedule]:
        """The schedules `block` becomes; `[sch]` when the rule does not apply."""
        raise NotImplementedError

    def clone(self) -> ScheduleRule:
        """A copy for another task (the context is set again when it joins one)."""
        twin = copy.copy(self)
        twin.context = None
        return twin

    def _num_cores(self) -> int:
        """The cores the task's kernels may use (the target's num-cores, else the task's
        threads)."""
        context = self.context
        if context is None:
            return 1
        cores = context.target.config.get("num-cores") if context.target is not None else None
        return int(cores) if cores else max(1, context.num_threads)

    @staticmethod
    def create(kind: str = "llvm") -> list[ScheduleRule]:
        return create(kind)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


_KINDS = {"llvm": ("msdb.tuner.space.rules.defaults", "llvm_rules")}


def create(kind: str = "llvm") -> list[ScheduleRule]:
    """The default rules for a target kind ("llvm": TVM's DefaultLLVM), in the order they run."""
    factory: Any = load_kind(_KINDS, kind, "schedule-rule set")
    rules: list[ScheduleRule] = factory()
    return rules
