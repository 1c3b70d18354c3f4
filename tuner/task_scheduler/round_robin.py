"""`RoundRobin` (TVM's scheduler of the same name): tasks take turns."""

from __future__ import annotations

from msdb.tuner.task_scheduler.base import TaskScheduler

__all__ = ["RoundRobin"]


class RoundRobin(TaskScheduler):
    """The next task alive after the last one served."""

    def __init__(self, seed: int = 0) -> None:
        super().__init__(seed)
        self._last = -1

    def next_task_id(self) -> int:
        n = len(self.tasks)
        for step in range(1, n + 1):
            candidate = (self._last + step) % n
            if not self.tasks[candidate].is_terminated:
                self._last = candidate
                return candidate
        return -1
