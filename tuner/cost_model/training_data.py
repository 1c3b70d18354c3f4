"""Stored measurements turned into what a cost model learns from: for each workload, its
records replayed into measure candidates, with their costs (docs/architecture.md, "Features
and cost model"). One path for every model kind's `pretrain` and for `msdb train-cost-model`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Sequence

import numpy as np

from msdb.errors import MsdbError
from msdb.records.ranking import FAILED_RUN_SECS, ran

if TYPE_CHECKING:
    from msdb.records.record import TuningRecord
    from msdb.records.target import Target
    from msdb.tuner.candidate import MeasureCandidate
    from msdb.tuner.context import TuneContext

__all__ = ["WorkloadSamples", "cost_of", "labels", "workload_samples"]

logger = logging.getLogger(__name__)


def cost_of(run_secs: Sequence[float] | None) -> float:
    """TVM's cost of a measurement: the median of its run times, `FAILED_RUN_SECS` when it has none."""
    if not run_secs:
        return FAILED_RUN_SECS
    return float(np.median(np.asarray(run_secs, dtype=np.float64)))


def labels(costs: Sequence[float]) -> np.ndarray:
    """Labels normalized within a workload: `best cost / cost` (0 for a zero cost, as TVM's
    division guard gives), so workloads of any size train one model."""
    values = np.asarray(costs, dtype=np.float64)
    out = np.zeros_like(values)
    if len(values):
        np.divide(values.min(), values, out=out, where=values != 0)
    return out


@dataclass
class WorkloadSamples:
    """One workload's replayed records: `candidates[i]` was measured at `costs[i]`."""

    key: str
    context: TuneContext
    candidates: list[MeasureCandidate] = field(default_factory=list)
    costs: list[float] = field(default_factory=list)


def workload_samples(records: Iterable[TuningRecord], target: Target | str | dict[str, Any] | None = None, *,
                     max_per_workload: int | None = None, seed: int = 0) -> list[WorkloadSamples]:
    """The records that ran (of `target`'s kind; any kind without a target), grouped by the
    structural hash of their workload and replayed. `max_per_workload` keeps that many of each
    workload, spread evenly over its ranking (best to worst), to bound the time a large
    database takes. A record that does not replay is skipped; a workload left empty is left out."""
    from msdb.records.target import Target
    from msdb.schedule.schedule import Schedule
    from msdb.tuner.candidate import MeasureCandidate
    from msdb.tuner.context import TuneContext

    wanted = Target.coerce(target)
    by_workload: dict[str, list[TuningRecord]] = {}
    for record in records:
        if not ran(record.run_secs) or (wanted is not None and (record.target is None
                                                                or record.target.kind != wanted.kind)):
            continue
        by_workload.setdefault(record.workload.hash("structural"), []).append(record)
    out = []
    for key, group in by_workload.items():
        group = _spread(group, max_per_workload)
        workload = group[0].workload.mod
        samples = WorkloadSamples(key, TuneContext(mod=workload, target=group[0].target, rand_state=seed))
        for record in group:
            sch = Schedule(workload)
            try:
                record.trace.apply_to_schedule(sch, remove_postproc=False)
            except (MsdbError, ValueError, KeyError) as exc:
                logger.debug("a record of workload %s does not replay (%s); skipped", key, exc)
                continue
            samples.candidates.append(MeasureCandidate.of(sch))
            samples.costs.append(cost_of(record.run_secs))
        if samples.candidates:
            out.append(samples)
    return out


def _spread(records: list[TuningRecord], limit: int | None) -> list[TuningRecord]:
    """At most `limit` records spread evenly over the ranking (all of them without a limit)."""
    if limit is None or len(records) <= limit:
        return records
    ranked = sorted(records, key=lambda r: r.mean_run_secs)
    picks = np.unique(np.linspace(0, len(ranked) - 1, num=max(limit, 1)).round().astype(int))
    return [ranked[i] for i in picks]
