"""Task schedulers (docs/architecture.md, "Tuner"): how tasks share one trial budget.

- `base`: `TaskScheduler` (subclass it to plug in a policy), `TaskRecord`, `create(kind)`;
- `gradient`: `GradientBased`, TVM's default;
- `round_robin`: `RoundRobin`.
"""

from __future__ import annotations

from msdb.tuner.task_scheduler.base import TaskRecord, TaskScheduler, UnknownTaskScheduler, create
from msdb.tuner.task_scheduler.gradient import GradientBased
from msdb.tuner.task_scheduler.round_robin import RoundRobin

__all__ = ["TaskRecord", "TaskScheduler", "UnknownTaskScheduler", "create", "GradientBased", "RoundRobin"]
