"""Measurement on a Dask cluster (docs/benchmarks.md): what Dask costs per candidate, and what a
second worker buys.

    python bench/bench_dask.py [--candidates 12] [--trials 16] [--min-repeat-ms 100] [--repeat 3]

- overhead per candidate: one worker; each candidate built and run one at a time (in one task,
  as `tune_tir` does with a DaskBuilder and a DaskRunner on one client; and as two tasks), wall
  time minus the worker's compute time of its tasks (the scheduler's task stream; median over
  candidates; budget < 20 ms);
- tuning throughput: `tune_tir` of GMM 64^3 (replay-trace search, random cost model, so that
  measurement is the work) on a `LocalCluster` of 2 worker processes against 1 (budget >= 1.8x).

Prints a markdown table and the machine's load average (a busy machine shrinks the speedup).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def _cluster(n: int) -> Any:
    import distributed

    return distributed.LocalCluster(n_workers=n, threads_per_worker=1, processes=True, resources={"measure": 1},
                                    dashboard_address=":0")


def _candidates(count: int) -> list[Any]:
    """Post-processed schedules of GMM 64^3 from its design space, as the tuner measures them."""
    from msdb.ir import zoo
    from msdb.records.target import Target
    from msdb.tuner.context import TuneContext
    from msdb.tuner.search.base import SearchStrategy
    from msdb.tuner.space.generators.base import SpaceGenerator

    ctx = TuneContext(mod=zoo.build("GMM", 1, 64, 64, 64), target=Target("llvm -num-cores=1"),
                      space_generator=SpaceGenerator.create("post-order-apply"),
                      search_strategy=SearchStrategy.create("replay-trace"), task_name="gmm", rand_state=0,
                      num_threads=1)
    search = ctx.search_strategy
    search.pre_tuning(count, count, ctx.generate_design_space(), None, None)  # type: ignore[union-attr]
    picked = search.generate_measure_candidates() or []  # type: ignore[union-attr]
    return [c.sch.mod for c in picked][:count]


def overhead(mods: list[Any], min_repeat_ms: float, fused: bool) -> tuple[float, float, float]:
    """Per candidate built and run through DaskBuilder / DaskRunner on one worker, one at a time:
    (median wall, median compute time on the worker, median difference: Dask's overhead), in
    seconds. The worker's compute time comes from the scheduler's task stream. `fused`: one task
    builds and runs (what `tune_tir` does with both on one client), else two tasks."""
    import distributed

    from msdb.tuner.measure.builder import BuilderInput
    from msdb.tuner.measure.dask import DaskBuilder, DaskRunner
    from msdb.tuner.measure.runner import RunnerInput

    with _cluster(1) as cluster, distributed.Client(cluster) as client:
        builder = DaskBuilder(client)
        runner = DaskRunner(client, number=1, min_repeat_ms=min_repeat_ms, num_threads=1)
        walls, computes = [], []
        for k, mod in enumerate([mods[0], *mods]):  # the first one warms the worker up
            with distributed.get_task_stream(client) as stream:
                started = time.perf_counter()
                if fused:
                    _, futures = runner.build_and_run(builder, [BuilderInput(mod, "llvm -num-cores=1")], [None])
                    result = futures[0].result()
                else:
                    built = builder.build([BuilderInput(mod, "llvm -num-cores=1")])[0]
                    result = runner.run([RunnerInput(built.artifact_path)])[0].result()
                wall = time.perf_counter() - started
            assert result.ok, result.error_msg
            if not fused:
                os.remove(built.artifact_path)  # type: ignore[arg-type]
                os.remove(f"{built.artifact_path}.json")
            compute = sum(s["stop"] - s["start"] for task in stream.data for s in task["startstops"]
                          if s["action"] == "compute")
            if k:
                walls.append(wall)
                computes.append(compute)
        builder.close()
        runner.close()
    diffs = [w - c for w, c in zip(walls, computes)]
    return statistics.median(walls), statistics.median(computes), statistics.median(diffs)


def throughput(workers: int, trials: int, min_repeat_ms: float) -> float:
    """Measured candidates per second of `tune_tir` on a cluster of `workers` workers."""
    import distributed

    from msdb.database.memory import MemoryDatabase
    from msdb.ir import zoo
    from msdb.tuner.measure.dask import DaskBuilder, DaskRunner
    from msdb.tuner.tune import tune_tir

    with _cluster(workers) as cluster, distributed.Client(cluster) as client:
        client.wait_for_workers(workers)
        with DaskBuilder(client) as builder, DaskRunner(client, number=1, min_repeat_ms=min_repeat_ms,
                                                        num_threads=1) as runner:
            started = time.perf_counter()
            tune_tir(zoo.build("GMM", 1, 64, 64, 64), "llvm -num-cores=1", MemoryDatabase(), trials, trials,
                     builder=builder, runner=runner, seed=0, strategy="replay-trace", cost_model="random",
                     check_best=False, pretrain=False)
            return trials / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--candidates", type=int, default=12)
    parser.add_argument("--trials", type=int, default=16)
    parser.add_argument("--min-repeat-ms", type=float, default=100.0)
    parser.add_argument("--repeat", type=int, default=3, help="Interleaved throughput runs of each cluster size.")
    args = parser.parse_args()
    import logging

    logging.getLogger("distributed").setLevel(logging.WARNING)

    load_before = os.getloadavg()
    mods = _candidates(args.candidates)
    dask_wall, compute, extra = overhead(mods, 10.0, fused=True)
    wall2, compute2, extra2 = overhead(mods, 10.0, fused=False)
    ones, twos = [], []
    for _ in range(args.repeat):  # interleaved, so that a change of the machine's load hits both
        ones.append(throughput(1, args.trials, args.min_repeat_ms))
        twos.append(throughput(2, args.trials, args.min_repeat_ms))
    one, two = statistics.median(ones), statistics.median(twos)
    ratios = ", ".join(f"{t / o:.2f}" for o, t in zip(ones, twos))
    load_after = os.getloadavg()
    print(f"machine: {os.cpu_count()} cores; load average (1, 5, 15 min) before "
          f"{', '.join(f'{x:.2f}' for x in load_before)}, after {', '.join(f'{x:.2f}' for x in load_after)}")
    print()
    print("| measure | value | budget | verdict | note |")
    print("|---|---|---|---|---|")
    print(f"| overhead per candidate, one task (what tuning does) | {extra * 1e3:.1f} ms | < 20 ms | "
          f"{'ok' if extra < 0.020 else 'OVER'} | median of {len(mods)}: wall {dask_wall * 1e3:.1f} ms, "
          f"worker compute {compute * 1e3:.1f} ms (GMM 64^3, min_repeat_ms=10) |")
    print(f"| overhead per candidate, DaskBuilder then DaskRunner | {extra2 * 1e3:.1f} ms | | | wall "
          f"{wall2 * 1e3:.1f} ms, worker compute {compute2 * 1e3:.1f} ms (two tasks, artifact both ways) |")
    print(f"| tuning throughput, 1 worker | {one:.2f} cand/s | | | {args.trials} trials a run, one round, "
          f"min_repeat_ms={args.min_repeat_ms:g} |")
    print(f"| tuning throughput, 2 workers | {two:.2f} cand/s | | | |")
    print(f"| speedup 2 workers / 1 | {two / one:.2f}x | >= 1.8x | {'ok' if two / one >= 1.8 else 'UNDER'} | "
          f"medians of {args.repeat} interleaved runs; each pair: {ratios} |")


if __name__ == "__main__":
    main()
