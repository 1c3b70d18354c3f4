"""The schedule rule interface (docs/architecture.md, "Tuner"): TVM's `ScheduleRule`. A rule
looks at one block of a schedule and returns the schedules it turns it into (none, one, or
several variants: the design spaces multiply); `PostOrderApply` runs every rule on every block.

A user's own rule subclasses `ScheduleRule` and overrides `apply` (and `clone` when it holds
state); `ScheduleRule.create("llvm")` gives TVM's default CPU rules in TVM's order."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from msdb.kinds import load_kind
from msdb.tuner.space.part import SpacePart

if TYPE_CHECKING:
    from msdb.schedule.rv import BlockRV
    from msdb.schedule.schedule import Schedule

__all__ = ["ScheduleRule", "create"]


class ScheduleRule(SpacePart):
    """Base class of schedule rules."""

    def apply(self, sch: Schedule, block: BlockRV) -> list[Schedule]:
        """The schedules `block` becomes; `[sch]` when the rule does not apply."""
        raise NotImplementedError

    @staticmethod
    def create(kind: str = "llvm") -> list[ScheduleRule]:
        return create(kind)


_KINDS = {"llvm": ("msdb.tuner.space.rules.defaults", "llvm_rules"),
          "cuda": ("msdb.tuner.space.rules.defaults", "cuda_rules"),
          "cuda-tensorcore": ("msdb.tuner.space.rules.defaults", "cuda_tensorcore_rules")}


def create(kind: str = "llvm") -> list[ScheduleRule]:
    """The default rules for a target kind ("llvm": TVM's DefaultLLVM, "cuda": DefaultCUDA,
    "cuda-tensorcore": DefaultCUDATensorCore), in the order they run."""
    factory: Any = load_kind(_KINDS, kind, "schedule-rule set")
    rules: list[ScheduleRule] = factory()
    return rules
