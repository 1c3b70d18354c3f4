"""What schedule rules, post-processors and mutators share (docs/architecture.md, "Tuner"):
each joins a task through `_initialize_with_tune_context` (the task's target bounds its
parallelism) and is cloned for another task without the first task's context."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from msdb.tuner.context import TuneContext

__all__ = ["SpacePart"]

_Part = TypeVar("_Part", bound="SpacePart")


class SpacePart:
    """Base of `ScheduleRule`, `Postproc` and `Mutator`."""

    context: TuneContext | None = None

    def _initialize_with_tune_context(self, context: TuneContext) -> None:
        self.context = context

    def clone(self: _Part) -> _Part:
        """A copy for another task (the context is set again when it joins one)."""
        twin = copy.copy(self)
        twin.context = None
        return twin

    def _num_cores(self) -> int:
        """The task's cores (1 outside a task)."""
        return self.context.num_cores() if self.context is not None else 1

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"
