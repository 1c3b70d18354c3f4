"""How well a cost model ranks the candidates of workloads it did not learn: TenSet's metrics
(docs/architecture.md, "Features and cost model"), the numbers `msdb train-cost-model` reports.

- peak score@k: among the model's top-k picks of a workload's candidates, the best true
  throughput divided by the workload's best; 1.0 when the top-k holds the fastest candidate.
- pairwise accuracy: of the pairs of candidates whose costs differ, the share the model orders
  as the measurements do (ties in the model's scores count half).
Both are averaged over workloads, each workload weighing the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

__all__ = ["RankingQuality", "pairwise_accuracy", "peak_score", "ranking_quality"]


def peak_score(scores: np.ndarray, costs: np.ndarray, k: int) -> float:
    """Peak score@k of one workload (higher `scores` = predicted faster; `costs` in seconds)."""
    if k < 1 or not len(costs):
        raise ValueError(f"peak_score needs k >= 1 and some candidates (k={k}, {len(costs)} candidates)")
    throughput = 1.0 / np.asarray(costs, dtype=np.float64)
    top = np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")[:k]
    return float(throughput[top].max() / throughput.max())


def pairwise_accuracy(scores: np.ndarray, costs: np.ndarray) -> float | None:
    """Pairwise accuracy of one workload; None when no two costs differ (nothing to order)."""
    s = np.asarray(scores, dtype=np.float64)
    c = np.asarray(costs, dtype=np.float64)
    truth = np.sign(c[None, :] - c[:, None])  # +1 where i is faster than j
    predicted = np.sign(s[:, None] - s[None, :])
    pairs = truth != 0
    if not pairs.any():
        return None
    agree = np.where(predicted == 0, 0.5, (predicted == truth).astype(np.float64))
    return float(agree[pairs].mean())


@dataclass(frozen=True)
class RankingQuality:
    """TenSet's metrics averaged over `workloads` workloads of `candidates` candidates in all."""

    top1: float
    top5: float
    pairwise: float
    workloads: int
    candidates: int


def ranking_quality(groups: Sequence[tuple[np.ndarray, np.ndarray]]) -> RankingQuality:
    """The metrics over `(scores, costs)` pairs, one per workload."""
    if not groups:
        raise ValueError("ranking_quality needs at least one workload")
    pairwise = [p for p in (pairwise_accuracy(s, c) for s, c in groups) if p is not None]
    return RankingQuality(top1=float(np.mean([peak_score(s, c, 1) for s, c in groups])),
                          top5=float(np.mean([peak_score(s, c, 5) for s, c in groups])),
                          pairwise=float(np.mean(pairwise)) if pairwise else 0.5,
                          workloads=len(groups), candidates=sum(len(c) for _, c in groups))
