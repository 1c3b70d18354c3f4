"""`GradientBased` (TVM's default scheduler, gradient_based.cc): one round robin first, then the
task whose weighted latency is expected to drop the most, from the recent slope of its best
latency (`window_size` rounds back) and its best latency over the rounds so far:

    gradient = (alpha * (best[n-1-w] - best[n-1]) / w + (1 - alpha) * best[n-1] / n) * weight

A task without a valid measurement yet (`failed_ms`, the ranking's failure rule) scores -1e9; all
equal means a random pick (seeded).
"""

from __future__ import annotations

from msdb.tuner.task_scheduler.base import TaskScheduler, failed_ms

__all__ = ["GradientBased"]


class GradientBased(TaskScheduler):
    def __init__(self, alpha: float = 0.2, window_size: int = 3, seed: int = 0) -> None:
        super().__init__(seed)
        self.alpha = alpha
        self.window_size = window_size
        self._round_robin = 0
        self._history: dict[int, list[float]] = {}

    def next_task_id(self) -> int:
        n_tasks = len(self.tasks)
        while self._round_robin < n_tasks:
            task_id = self._round_robin
            self._round_robin += 1
            if not self.tasks[task_id].is_terminated:
                return task_id
        alive = self.alive()
        if not alive:
            return -1
        grads = [self._gradient(i) for i in alive]
        if max(grads) == min(grads):
            return alive[self.rng.randrange(len(alive))]
        return alive[grads.index(max(grads))]

    def _gradient(self, task_id: int) -> float:
        history = self._history.get(task_id, [])
        n = len(history)
        if n == 0 or failed_ms(history[-1]):
            return -1e9
        best = history[-1]
        w = self.window_size
        slope = (history[n - 1 - w] - best) / w if n >= 1 + w else 0.0
        return (self.alpha * slope + (1 - self.alpha) * best / n) * self.tasks[task_id].task_weight

    def _after_round(self, task_id: int) -> None:
        task = self.tasks[task_id]
        if task.latency_ms:
            self._history.setdefault(task_id, []).append(min(task.latency_ms))
