"""The search loop's own cost (docs/benchmarks.md, "The search loop"): what an evolutionary
search spends on sampling, replay, post-processing, features and the cost model per candidate,
with measurement taken out (the search tests' fake builder, which builds nothing, and fake runner,
whose time is a hash of the module: tests/tuner/search/_fakes.py), so only the search is timed. The XGB model ranks from the first round (no warm-up),
as a pretrained model does: every round evolves the population.

Prints seconds by phase, search seconds per measured candidate, and a digest of the measured traces:
two versions of msdb that give the same digest chose the same candidates. With `--measure local`
the candidates are built and timed for real (LocalBuilder, LocalRunner), so the table is a real
tune's once the model ranks, and the search's share of its wall time is the issue's budget
(at most 20% at 64 trials); the digest then depends on the timings.
Run: taskset -c 1 python bench/bench_search.py [--workload c2d|gmm|winograd] [--trials 128] [--measure local]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))  # the tests' fake builder and runner
from _timing import cpu_line  # noqa: E402

from tests.tuner.search._fakes import FakeBuilder, FakeRunner  # noqa: E402


def workload(name: str) -> object:
    from msdb.ir import zoo

    if name == "gmm":
        return zoo.build("GMM", 1, 128, 128, 128)
    if name == "c2d":
        return zoo.build("C2D", 1, 56, 56, 64, 64, 3, 1, 1)
    if name == "winograd":  # ResNet-18's 64x56x56 3x3 conv as `--fuse winograd` makes it, F(4, 3)
        from msdb.ir import te
        from msdb.ir.function import IRModule
        from msdb.model.legalize.winograd import conv2d_winograd

        data = te.placeholder((1, 64, 56, 56), "float32", name="data")
        weight = te.placeholder((6, 6, 4, 64, 16), "float32", name="weight")
        out = conv2d_winograd(data, weight, [1, 1], [1, 1])
        return IRModule.from_func(te.create_prim_func([data, weight, out]))
    raise SystemExit(f"unknown workload {name!r}")


def main() -> None:
    from msdb.database.sql import SQLiteDatabase
    from msdb.tuner.cost_model.xgb_model import XGBModel
    from msdb.tuner.profiler import Profiler
    from msdb.tuner.tune import make_context, tune_tasks, tuning_target

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workload", default="c2d")
    parser.add_argument("--trials", type=int, default=128)
    parser.add_argument("--per-iter", type=int, default=64)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--measure", choices=("fake", "local"), default="fake",
                        help="fake: nothing built or timed (the search alone); local: a real tune")
    args = parser.parse_args()
    print(cpu_line())
    mod = workload(args.workload)
    context = make_context(mod, tuning_target(None, 1), "post-order-apply", "evolutionary", args.seed, "t", 1)
    with tempfile.TemporaryDirectory() as tmp:
        db = SQLiteDatabase(Path(tmp) / "t.sqlite")
        started = time.perf_counter()
        with Profiler() as profiler:
            tune_tasks([context], [1.0], db, args.trials, args.per_iter, cost_model=XGBModel(seed=0, num_warmup_samples=0),
                       seed=args.seed, builder=FakeBuilder() if args.measure == "fake" else "local",
                       runner=FakeRunner() if args.measure == "fake" else "local", pretrain=False, check_best=False)
        wall = time.perf_counter() - started
        traces = "\n".join(str(r.storage_fields()[0]) for r in db.get_all_tuning_records())
        count = len(db)
        db.close()
    phases = profiler.get()
    print(f"{args.workload}: {count} candidates measured, {args.trials // args.per_iter} rounds, wall {wall:.1f} s")
    print(profiler.table())
    search = sum(phases.get(p, 0.0) for p in ("search", "sampling", "replay", "post-processing", "features", "cost model"))
    print(f"search (search + sampling + replay + post-processing + features + cost model): {search:.1f} s, "
          f"{search / max(count, 1):.2f} s per measured candidate, {search / wall:.0%} of the wall time")
    strategy = context.search_strategy
    dropped = getattr(strategy, "failures", {})
    print(f"replays dropped, by reason: {dict(dropped.most_common()) if dropped else 'none'}")
    prefixes = getattr(strategy, "_prefixes", None)
    if prefixes is not None:
        print(f"mutants resumed from a parent's copy: {prefixes.resumed}, "
              f"{prefixes.skipped_instructions / max(prefixes.resumed, 1):.1f} instructions skipped each")
    print("digest of the measured traces:", hashlib.sha256(traces.encode()).hexdigest()[:16])


if __name__ == "__main__":
    main()
