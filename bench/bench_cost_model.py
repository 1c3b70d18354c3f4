"""The XGBoost cost model's share of a trial, and how well it ranks real measurements.

- cost per trial: one search round scores ~2000 candidates (4 generations of a 512 population)
  and learns from 64 measurements; the round's `predict` calls plus its `update`, divided by 64,
  must stay well under a trial's ~0.1 s overhead budget. Timed on the logged GMM 128^3 schedules
  (repeated to 2048 candidates, rows cache off) after the model has 256 measurements;
- ranking: 4-fold cross-validated Spearman correlation between predicted score and measured
  speed on each logged workload of the bundled team logs (TVM 0.27 measurements), and the best
  measured speed among the 8 top-predicted candidates relative to the best overall.

Prints a markdown table; copy it into docs/benchmarks.md.
Run: python bench/bench_cost_model.py
"""

from __future__ import annotations

import os
import pathlib
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))

from _timing import row  # noqa: E402

from msdb.database.json_database import JSONDatabase  # noqa: E402
from msdb.ir.expr import const_int  # noqa: E402
from msdb.records.record import TuningRecord  # noqa: E402
from msdb.schedule.schedule import Schedule  # noqa: E402
from msdb.tuner.candidate import MeasureCandidate  # noqa: E402
from msdb.tuner.context import TuneContext  # noqa: E402
from msdb.tuner.cost_model.xgb_model import XGBModel  # noqa: E402
from msdb.tuner.features.per_store import PerStoreFeature  # noqa: E402
from msdb.tuner.measure.runner import RunnerResult  # noqa: E402

LOGS = pathlib.Path(__file__).resolve().parents[1] / "examples" / "team_logs"


def by_workload() -> dict[str, list[tuple[TuningRecord, MeasureCandidate]]]:
    out: dict[str, list[tuple[TuningRecord, MeasureCandidate]]] = {}
    for team in sorted(p.name for p in LOGS.iterdir()):
        for record in JSONDatabase(work_dir=LOGS / team).get_all_tuning_records():
            sch = Schedule(record.workload.mod)
            record.trace.apply_to_schedule(sch, remove_postproc=False)
            out.setdefault(record.workload.shash, []).append((record, MeasureCandidate.of(sch)))
    return out


def result(record: TuningRecord) -> RunnerResult:
    return RunnerResult(list(record.run_secs or []), None)


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1])


def round_cost_ms(items: list[tuple[TuningRecord, MeasureCandidate]]) -> tuple[float, float]:
    """(predict ms for 2048 candidates, update ms for 64) with 256 measurements learned."""
    record = items[0][0]
    context = TuneContext(mod=record.workload.mod, target=record.target, rand_state=0)
    model = XGBModel(extractor=PerStoreFeature(cache_size=0), seed=0, num_warmup_samples=0, adaptive_training=False)
    history = (items * 4)[:256]
    model.update(context, [c for _, c in history], [result(r) for r, _ in history])
    population = [c for _, c in (items * 16)[:2048]]
    started = time.perf_counter()
    model.predict(context, population)
    predict_ms = (time.perf_counter() - started) * 1e3
    started = time.perf_counter()
    model.update(context, [c for _, c in items[:64]], [result(r) for r, _ in items[:64]])
    return predict_ms, (time.perf_counter() - started) * 1e3


def ranking(items: list[tuple[TuningRecord, MeasureCandidate]], repeats: int = 3) -> tuple[float, float]:
    record = items[0][0]
    context = TuneContext(mod=record.workload.mod, target=record.target, rand_state=0)
    costs = np.array([r.mean_run_secs for r, _ in items])
    ran = costs < 1e9
    rng = np.random.default_rng(0)
    correlations, top8 = [], []
    for repeat in range(repeats):
        folds = np.array_split(rng.permutation(len(items)), 4)
        predicted = np.zeros(len(items))
        for f, test in enumerate(folds):
            train = np.concatenate([fold for g, fold in enumerate(folds) if g != f])
            model = XGBModel(seed=repeat, num_warmup_samples=0)
            model.update(context, [items[i][1] for i in train], [result(items[i][0]) for i in train])
            predicted[test] = model.predict(context, [items[i][1] for i in test])
        correlations.append(spearman(predicted[ran], -costs[ran]))
        top8.append(costs.min() / costs[np.argsort(-predicted)[:8]].min())
    return float(np.mean(correlations)), float(np.mean(top8))


def main() -> None:
    workloads = by_workload()
    rows = ["| measure | value | budget | verdict | note |", "|---|---|---|---|---|"]
    gmm = max(workloads.values(), key=len)
    predict_ms, update_ms = round_cost_ms(gmm)
    rows.append(row("XGB predict, 2048 GMM 128^3 candidates", predict_ms, "ms", None, "features included"))
    rows.append(row("XGB update, 64 GMM 128^3 results (320 in all)", update_ms, "ms", None, "features and training"))
    rows.append(row("cost model per trial (predict + update) / 64", (predict_ms + update_ms) / 64, "ms", 20.0,
                    "a fifth of a ~0.1 s trial overhead"))
    for items in workloads.values():
        output = items[0][0].workload.mod.main.buffers[-1]
        name = f"{output.name} {'x'.join(str(const_int(d)) for d in output.shape)}"
        rho, top = ranking(items)
        rows.append(row(f"ranking of logged {name} schedules (Spearman, 4-fold)", rho, "", None,
                        f"{len(items)} records; best of top-8 predicted = {top:.2f} x best"))
    print("\n".join(rows))


if __name__ == "__main__":
    main()
