"""Pretrained cost models (docs/benchmarks.md, "Pretrained cost models"): does a model trained on
other workloads' measurements find a new workload's fast schedules in fewer trials?

1. A training set, TenSet's recipe: `sample_tasks` measures --per-workload random design-space
   samples of each SEEN workload (convs, 1x1 and strided convs, a depthwise conv, matmuls,
   reductions, ...). Its size and what it cost to measure are printed.
2. `train_cost_model` trains an xgb model (and an mlp one when PyTorch is installed) on it.
3. Ranking quality on the six UNSEEN workloads (convs of other shapes, a depthwise conv, a dense,
   a batch matmul; none of them in the training set): 32 random samples of each are measured,
   and TenSet's top-1 / top-5 peak score and pairwise accuracy are printed for a random
   ranking, for each pretrained model, and for each kind trained on 16 of the workload's own
   samples (scored on the other 16: what a model has learned after 16 trials of its own).
4. Search: for each unseen workload and seed, a from-scratch tune (xgb, --scratch-trials) and a
   tune from the pretrained model (--pretrained-trials), --per-iter candidates a round, one
   core; "trials to reach" is the first trial at which the pretrained tune's best is at least
   as fast as the from-scratch tune's best (none: more than --pretrained-trials). The budget:
   the geometric mean of scratch trials / trials to reach >= 4.

Run: taskset -c 1 python bench/bench_pretrained.py [--workdir DIR] [--seeds 0,1,2] [--per-workload 32]
A --workdir keeps the training and scoring databases, so a second run measures only the tunes.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import cpu_line  # noqa: E402

#: (zoo name, parameters): what the training set samples.
SEEN = [
    ("C2D", (1, 14, 14, 128, 128, 3, 1, 1)), ("C2D", (1, 28, 28, 64, 64, 3, 1, 1)),
    ("C2D", (1, 28, 28, 128, 256, 1, 1, 0)), ("C2D", (1, 28, 28, 64, 128, 3, 2, 1)),
    ("C2D", (1, 56, 56, 16, 32, 3, 1, 1)), ("DEP", (1, 56, 56, 32, 3, 1, 1)), ("DEP", (1, 28, 28, 128, 3, 2, 1)),
    ("GMM", (1, 64, 64, 64)), ("GMM", (1, 256, 64, 128)), ("GMM", (4, 64, 64, 64)), ("GMM", (1, 4, 1024, 256)),
    ("C1D", (1, 64, 64, 64, 3, 1, 1)), ("GRP", (1, 28, 28, 64, 64, 3, 1, 1, 1, 4)),
    ("CBR", (1, 28, 28, 32, 64, 3, 1, 1)), ("TBG", (1, 64, 8, 32)), ("NRM", (1, 256, 256)), ("SFM", (256, 256)),
]
#: the workloads the training set never saw.
UNSEEN = [
    ("conv 3x3", "C2D", (1, 28, 28, 96, 96, 3, 1, 1)), ("conv 1x1", "C2D", (1, 14, 14, 256, 128, 1, 1, 0)),
    ("conv 3x3 s2", "C2D", (1, 56, 56, 32, 64, 3, 2, 1)), ("depthwise", "DEP", (1, 28, 28, 96, 3, 1, 1)),
    ("dense", "GMM", (1, 8, 512, 256)), ("batch matmul", "GMM", (8, 64, 64, 64)),
]


def tasks(specs: list[tuple[str, str, tuple[int, ...]]]) -> list[object]:
    from msdb.ir import zoo
    from msdb.model.tasks import ExtractedTask, normalize_mod

    return [ExtractedTask(name, normalize_mod(zoo.build(kind, *params)), 1) for name, kind, params in specs]


def sampled(path: Path, specs: list[tuple[str, str, tuple[int, ...]]], per_workload: int, seed: int) -> dict[str, float]:
    """Sample `specs` into the database at `path` unless it is there already; its figures."""
    from msdb.database.sql import SQLiteDatabase
    from msdb.tuner.sampling import sample_tasks

    if path.exists():
        db = SQLiteDatabase(path)
        count = len(db)
        db.close()
        return {"records": count, "reused": 1}
    db = SQLiteDatabase(path)
    try:
        result = sample_tasks(tasks(specs), None, db, per_workload, seed=seed)
    finally:
        db.close()
    return {"records": result.records, "failed": result.failed, "wall_s": result.wall_s, "measure_s": result.measure_s}


def train(db_path: Path, out: Path, kind: str, seed: int) -> dict[str, float]:
    from msdb.database.sql import SQLiteDatabase
    from msdb.tuner.cost_model.training import train_cost_model

    db = SQLiteDatabase(db_path, read_only=True)
    try:
        report = train_cost_model(db, out, kind=kind, seed=seed)
    finally:
        db.close()
    held = report.held_out
    return {"records": report.records, "workloads": report.workloads, "train_s": report.seconds,
            "heldout_top1": held.top1 if held else float("nan"), "heldout_pairwise": held.pairwise if held else float("nan")}


def ranking(score_db: Path, models: dict[str, Path], seed: int) -> dict[str, dict[str, float]]:
    """TenSet's metrics on the unseen workloads' random samples, per ranking."""
    from msdb.database.sql import SQLiteDatabase
    from msdb.tuner.cost_model.base import create
    from msdb.tuner.cost_model.metrics import ranking_quality
    from msdb.tuner.cost_model.saved import load_cost_model
    from msdb.tuner.cost_model.training_data import WorkloadSamples, workload_samples

    db = SQLiteDatabase(score_db, read_only=True)
    samples = workload_samples(db.get_all_tuning_records(), "llvm", seed=seed)
    db.close()
    rng = np.random.default_rng(seed)
    rows: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {"random": []}
    for s in samples:
        rows["random"].append((rng.random(len(s.costs)), np.asarray(s.costs)))
    for name, path in models.items():
        model = load_cost_model(path, target="llvm", seed=seed)
        rows[f"{name} pretrained"] = [(np.asarray(model.predict(s.context, s.candidates)), np.asarray(s.costs))
                                      for s in samples]
        own: list[tuple[np.ndarray, np.ndarray]] = []
        for s in samples:  # trained on half of the workload's own samples, scored on the other half
            order = rng.permutation(len(s.costs))
            half = len(order) // 2
            first, rest = order[:half], order[half:]
            fresh = create(name, seed=seed, num_warmup_samples=0)
            fresh.learn([WorkloadSamples(s.key, s.context, [s.candidates[i] for i in first],  # type: ignore[union-attr]
                                         [s.costs[i] for i in first])])
            own.append((np.asarray(fresh.predict(s.context, [s.candidates[i] for i in rest])),  # type: ignore[union-attr]
                        np.asarray([s.costs[i] for i in rest])))
        rows[f"{name} on 16 own"] = own
    return {name: vars(ranking_quality(groups)) for name, groups in rows.items()}


def curve(mod: object, cost_model: object, trials: int, per_iter: int, seed: int) -> tuple[list[float], float]:
    """Best seconds after each trial of one tune (fresh database), and its wall time."""
    from msdb.database.sql import SQLiteDatabase
    from msdb.tuner.tune import tune_tir

    with tempfile.TemporaryDirectory() as tmp:
        db = SQLiteDatabase(Path(tmp) / "t.sqlite")
        started = time.perf_counter()
        tune_tir(mod, None, db, trials, per_iter, cost_model=cost_model, seed=seed, pretrain=False,  # type: ignore[arg-type]
                 check_best=False)
        wall = time.perf_counter() - started
        secs = [r.mean_run_secs for r in db.get_all_tuning_records()]
        db.close()
    return list(np.minimum.accumulate(np.asarray(secs, dtype=np.float64))), wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--per-workload", type=int, default=32)
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--scratch-trials", type=int, default=64)
    parser.add_argument("--pretrained-trials", type=int, default=32)
    parser.add_argument("--per-iter", type=int, default=16)
    parser.add_argument("--workloads", default=None, help="comma-separated names of UNSEEN to tune (default: all)")
    parser.add_argument("--kinds", default="xgb,mlp")
    args = parser.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="bench_pretrained-"))
    work.mkdir(parents=True, exist_ok=True)
    print(cpu_line(), flush=True)
    seen = [(f"{k}{p}", k, p) for k, p in SEEN]
    print("training set:", json.dumps(sampled(work / "train.sqlite", seen, args.per_workload, 0)), flush=True)
    print("scoring set:", json.dumps(sampled(work / "score.sqlite", UNSEEN, 32, 1)), flush=True)
    kinds = [k for k in args.kinds.split(",") if k]
    if "mlp" in kinds:
        try:
            import torch  # noqa: F401
        except ImportError:
            print("mlp: PyTorch not installed; skipped")
            kinds.remove("mlp")
    models = {}
    for kind in kinds:
        models[kind] = work / f"{kind}.npz"
        print(f"train {kind}:", json.dumps(train(work / "train.sqlite", models[kind], kind, 0)), flush=True)
    print("\nranking quality on the unseen workloads' random samples (peak score@1, @5, pairwise accuracy):")
    for name, q in ranking(work / "score.sqlite", models, 0).items():
        print(f"  {name:18s} top-1 {q['top1']:.3f}  top-5 {q['top5']:.3f}  pairwise {q['pairwise']:.3f}")
    from msdb.ir import zoo

    seeds = [int(s) for s in args.seeds.split(",")]
    chosen = [u for u in UNSEEN if args.workloads is None or u[0] in args.workloads.split(",")]
    print(f"\nsearch: from scratch (xgb, {args.scratch_trials} trials) vs pretrained ({args.pretrained_trials} trials), "
          f"{args.per_iter} per round", flush=True)
    cache = work / f"scratch-{args.scratch_trials}-{args.per_iter}.json"  # from-scratch curves, kept for reruns
    scratch: dict[tuple[str, int], tuple[list[float], float]] = {}
    if cache.exists():
        scratch = {(n, int(sd)): (c, w) for n, sd, c, w in json.loads(cache.read_text())}
    for kind, path in models.items():
        ratios = []
        for name, zoo_kind, params in chosen:
            mod = zoo.build(zoo_kind, *params)
            for seed in seeds:
                if (name, seed) not in scratch:
                    scratch[name, seed] = curve(mod, "xgb", args.scratch_trials, args.per_iter, seed)
                    cache.write_text(json.dumps([[n, sd, c, w] for (n, sd), (c, w) in scratch.items()]))
                best, scratch_wall = scratch[name, seed][0][-1], scratch[name, seed][1]
                pre, pre_wall = curve(mod, str(path), args.pretrained_trials, args.per_iter, seed)
                reach = next((i + 1 for i, v in enumerate(pre) if v <= best), None)
                ratio = args.scratch_trials / (reach if reach is not None else args.pretrained_trials + 1)
                ratios.append(ratio)
                at16 = pre[min(15, len(pre) - 1)]
                print(f"  {kind} {name:13s} seed {seed}: scratch best {best * 1e6:9.1f} us ({scratch_wall:5.0f} s); "
                      f"pretrained best@16 {at16 * 1e6:9.1f} us, best@{len(pre)} {pre[-1] * 1e6:9.1f} us "
                      f"({pre_wall:5.0f} s); reaches scratch best at trial "
                      f"{reach if reach is not None else '>' + str(args.pretrained_trials)}", flush=True)
        gmean = math.exp(sum(map(math.log, ratios)) / len(ratios))
        print(f"  {kind}: geometric mean of scratch trials / trials to reach: {gmean:.2f}x (budget >= 4x; "
              f"a tune that never reaches counts as {args.pretrained_trials + 1} trials)", flush=True)


if __name__ == "__main__":
    main()
