"""Budgets of records that travel (docs/benchmarks.md, "Records that travel"): a database tuned on
ResNet-18 at 224 only, and models nobody tuned compiled over it, one thread.

For each target model (ResNet-18 at other resolutions and at batch 2, a ResNet-50, a
MobileNet-like net) and each `--fuse` mode: coverage (the share of the conv2d and dense functions
that exact and anchor-block lookup miss which `--transfer` answers; outputs checked against
onnxruntime), never slower (with `--transfer-trials 8`, each function against its default
schedule, the worst ratio printed), gain as Transfer-Tuning measures it ((T_default / T_transfer -
1) / (T_default / T_full - 1), T_full the target tuned itself with the source's budget, `--full`)
and the compile cost of `--transfer`. Latencies are medians of whole-model runs, the builds of one
target alternating.

Run: taskset -c 0 python bench/bench_transfer.py [--trials 200] [--fuse tvm,winograd] [--full r18-160,r18-b2]
     [--source-db DIR] (a DIR from an earlier run keeps its tuned databases)
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

from _timing import cpu_line  # noqa: E402

#: name -> (resnet depth, batch, image); "mobilenet" is `mobilenet_like` at 224.
TARGETS: dict[str, tuple[int, int, int]] = {
    "r18-160": (18, 1, 160), "r18-288": (18, 1, 288), "r18-b2": (18, 2, 224), "r50": (50, 1, 224),
    "mobilenet": (0, 1, 224),
}
TRANSFER_TRIALS = 8


def save_model(folder: Path, name: str) -> Path:
    import onnx

    from msdb.model.zoo import mobilenet_like, resnet

    path = folder / f"{name}.onnx"
    if not path.exists():
        if name == "source":
            onnx.save(resnet(18, image=224), str(path))
        else:
            depth, batch, image = TARGETS[name]
            onnx.save(mobilenet_like(image=image) if depth == 0 else resnet(depth, batch=batch, image=image), str(path))
    return path


#: Trials per task and round: 8, so that a budget of a few hundred trials reaches every task of
#: a ResNet (about 20) at least once (the gradient task scheduler visits the tasks round-robin
#: first).
PER_ITER = 8


def tuned_db(model: Path, db_path: Path, trials: int, fuse: str) -> Path:
    """`model` tuned with `trials` in all into `db_path` (kept when it exists: a rerun reuses it;
    written under another name and renamed, so a kept file is always a finished one)."""
    from msdb.database.sql import SQLiteDatabase
    from msdb.model.loader import load
    from msdb.tuner.model_tuning import tune_model

    if db_path.exists():
        return db_path
    partial = db_path.with_name(db_path.name + ".partial")
    partial.unlink(missing_ok=True)
    db = SQLiteDatabase(partial)
    try:
        started = time.perf_counter()
        tune_model(load(str(model), fuse=fuse), None, db, trials, PER_ITER, seed=0)
        print(f"tuned {model.stem} ({fuse}) with {trials} trials in {time.perf_counter() - started:.0f} s")
    finally:
        db.close()
    partial.rename(db_path)
    return db_path


def median_latencies(models: dict[str, Any], inputs: dict[str, np.ndarray], repeat: int) -> dict[str, float]:
    """Median seconds per run of each compiled model, the models alternating run by run."""
    times: dict[str, list[float]] = {name: [] for name in models}
    for compiled in models.values():
        compiled.run(inputs)
    for _ in range(repeat):
        for name, compiled in models.items():
            started = time.perf_counter()
            compiled.run(inputs)
            times[name].append(time.perf_counter() - started)
    return {name: float(np.median(values)) for name, values in times.items()}


def timed(step: Callable[[], Any]) -> tuple[Any, float]:
    started = time.perf_counter()
    result = step()
    return result, time.perf_counter() - started


def is_anchor_kind(name: str) -> bool:
    return "conv2d" in name or "matmul" in name or "dense" in name


def bench_target(name: str, folder: Path, source_db: Path, fuse: str, repeat: int, full_db: Path | None) -> list[str]:
    from msdb.tuner.compile.compiler import compile_model
    from msdb.tuner.compile.reference import errors, onnxruntime_session

    path = save_model(folder, name)
    depth, batch, image = TARGETS[name]
    inputs = {"data": np.random.default_rng(0).standard_normal((batch, 3, image, image)).astype("float32")}
    (expected,) = onnxruntime_session(path).run(None, inputs)
    default, default_s = timed(lambda: compile_model(path, None, fuse=fuse, num_threads=1))
    transfer, transfer_s = timed(lambda: compile_model(path, str(source_db), fuse=fuse, num_threads=1, transfer=True))
    measured_db = folder / f"{name}-{fuse}-trials.sqlite"
    measured_db.unlink(missing_ok=True)
    shutil.copy(source_db, measured_db)
    trials, trials_s = timed(lambda: compile_model(path, str(measured_db), fuse=fuse, num_threads=1,
                                                   transfer_trials=TRANSFER_TRIALS))
    builds = {"default": default, "transfer": transfer, f"trials{TRANSFER_TRIALS}": trials}
    if full_db is not None:
        builds["full"] = compile_model(path, str(full_db), fuse=fuse, num_threads=1)
    worst_error = max(errors(compiled.run(inputs), [expected])[1] for compiled in builds.values())
    latency = median_latencies(builds, inputs, repeat)

    missed = [e for e in transfer.report if is_anchor_kind(e.name) and not e.hit]
    got = [e for e in missed if e.scheduled_by == "transferred"]
    coverage = len(got) / len(missed) if missed else 1.0
    # never slower: the functions transfer_trials decided (the missed conv2d and dense ones)
    decided = {e.name for e in trials.report if is_anchor_kind(e.name) and not e.hit}
    base = {f.name: f.seconds for f in default.profile(inputs, repeat)}
    slowest = max(((f.seconds / base[f.name], f.name) for f in trials.profile(inputs, repeat)
                   if f.name in decided and base.get(f.name)), default=(1.0, "-"))
    misses: dict[str, int] = {}
    for entry in missed:
        if entry.scheduled_by != "transferred":
            why = (entry.transfer_miss or "?").split(":")[0]
            misses[why] = misses.get(why, 0) + 1
    if misses:
        print(f"{name} ({fuse}): not transferred: " + "; ".join(f"{n} x {why}" for why, n in misses.items()))

    def gain(seconds: float) -> str:
        if "full" not in latency:
            return ""
        full_speedup = latency["default"] / latency["full"] - 1
        if full_speedup <= 0:
            return " (full tuning no faster)"
        return f" ({(latency['default'] / seconds - 1) / full_speedup:.0%})"

    trial_key = f"trials{TRANSFER_TRIALS}"
    full = f"{latency['full'] * 1e3:.1f}" if "full" in latency else "-"
    return [f"| {name} ({fuse}) | {len(got)}/{len(missed)} = {coverage:.0%} | {latency['default'] * 1e3:.1f} | "
            f"{latency['transfer'] * 1e3:.1f}{gain(latency['transfer'])} | "
            f"{latency[trial_key] * 1e3:.1f}{gain(latency[trial_key])} | {full} | {slowest[0]:.2f}x ({slowest[1]}) | "
            f"{default_s:.1f} / {transfer_s:.1f} / {trials_s:.1f} | {worst_error:.1e} |"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=200, help="the source's (and each full tuning's) budget")
    parser.add_argument("--fuse", default="tvm,winograd")
    parser.add_argument("--targets", default=",".join(TARGETS))
    parser.add_argument("--full", default="r18-160,r18-b2", help="targets also tuned themselves (T_full)")
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--source-db", type=Path, default=None, help="a folder kept between runs")
    args = parser.parse_args()
    folder = args.source_db or Path(tempfile.mkdtemp(prefix="msdb-transfer-"))
    folder.mkdir(parents=True, exist_ok=True)
    print(f"One thread (sched_getaffinity: {len(os.sched_getaffinity(0))} core(s)); {cpu_line()}; folder {folder}\n")
    rows = ["| target (fuse) | transferred / missed conv2d+dense | default ms | --transfer ms (gain) | "
            f"--transfer-trials {TRANSFER_TRIALS} ms (gain) | full tuning ms | trials vs default, worst function | "
            "compile default / --transfer / trials s | max rel error |", "|---|---|---|---|---|---|---|---|---|"]
    for fuse in args.fuse.split(","):
        source = tuned_db(save_model(folder, "source"), folder / f"source-{fuse}.sqlite", args.trials, fuse)
        for name in args.targets.split(","):
            full = (tuned_db(save_model(folder, name), folder / f"{name}-{fuse}-full.sqlite", args.trials, fuse)
                    if name in args.full.split(",") else None)
            rows.extend(bench_target(name, folder, source, fuse, args.repeat, full))
            print(rows[-1], flush=True)
    print("\n" + "\n".join(rows))


if __name__ == "__main__":
    main()
