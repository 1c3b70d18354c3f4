"""Model budgets (docs/benchmarks.md, "Models"; docs/architecture.md, "Compile"): a zoo model end
to end, msdb's compile against onnxruntime (all graph optimizations, the same thread count) in the
same run, alternating calls.

- default schedules (an empty database): latency and its ratio to onnxruntime (issue budgets:
  BERT-base-like <= 1.2x, ResNet-50 and MobileNetV2-like <= 1.0x in the fastest mode);
- compile time with a warm database (every function hits), by phase: load/lower, query, apply,
  build (budget < 30 s);
- with --tune N: the model's tasks tuned with N trials in all, then latency and ratio again
  (budget <= 1.0x); after the table, the slowest functions (`CompiledModel.profile`);
- with more than one build (a warm database, --tune): every build and onnxruntime again in one
  loop (`round_robin`), so that the builds compare with each other in the same minutes too; two
  copies of each build, built in opposite orders (a build's placement in memory moves its speed).

The warm database is --db when given, else one made by tuning every task with --warm-trials
trials each (replay-trace, random cost model: only so that every function has a record).
Run: taskset -c 0 python bench/bench_compile.py [--model resnet18|resnet50|mobilenet|bert|gpt2] [--depth 18]
     [--image 224] [--fuse fold|packed] [--threads N] [--tune 2000] [--db warm.sqlite]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def ort_latency(path: str, inputs: dict[str, np.ndarray], repeat: int, threads: int = 1
                ) -> tuple[object, float, list[np.ndarray]]:
    """onnxruntime on `threads` intra-op threads: its session (every build is timed against it),
    median seconds per run (after one warm-up) and its outputs."""
    from msdb.tuner.compile.reference import onnxruntime_session

    session = onnxruntime_session(path, threads)
    outputs = session.run(None, inputs)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        session.run(None, inputs)
        times.append(time.perf_counter() - start)
    return session, float(np.median(times)), outputs


def paired_latency(compiled: object, session: object, inputs: dict[str, np.ndarray], repeat: int
                   ) -> tuple[float, float]:
    """Median seconds per run of the compiled model and of onnxruntime, the two runs alternating
    (`repeat` pairs, after a warm-up of each), so that the machine's load drifts over both alike
    (on a shared machine onnxruntime alone moved between 19 and 23 ms from one minute to the next)."""
    ours, theirs = [], []
    compiled.run(inputs)  # type: ignore[attr-defined]
    session.run(None, inputs)  # type: ignore[attr-defined]
    for _ in range(repeat):
        start = time.perf_counter()
        compiled.run(inputs)  # type: ignore[attr-defined]
        middle = time.perf_counter()
        session.run(None, inputs)  # type: ignore[attr-defined]
        theirs.append(time.perf_counter() - middle)
        ours.append(middle - start)
    return float(np.median(ours)), float(np.median(theirs))


def round_robin(builds: list[tuple[str, object]], session: object, inputs: dict[str, np.ndarray], repeat: int
                ) -> list[tuple[str, float, float]]:
    """Each label's median seconds per run and its median ratio to the onnxruntime run of the same
    round, every build and onnxruntime run once a round (`repeat` rounds, the builds' order
    rotated each round): the separate tables of `paired_latency` are minutes apart, and this
    machine's speed moved by half within an hour (docs/benchmarks.md, stop 33). Builds that share
    a label are pooled: `main` passes two copies of each, built in opposite orders, because where
    a build's code and arrays land in memory moves its speed by up to 8% (stop 34)."""
    labels = list(dict.fromkeys(label for label, _ in builds))
    times: dict[str, list[float]] = {label: [] for label in labels}
    ratios: dict[str, list[float]] = {label: [] for label in labels}
    for round_ in range(repeat):
        shift = round_ % len(builds)
        spent: list[tuple[str, float]] = []
        for label, compiled in builds[shift:] + builds[:shift]:
            start = time.perf_counter()
            compiled.run(inputs)  # type: ignore[attr-defined]
            spent.append((label, time.perf_counter() - start))
        start = time.perf_counter()
        session.run(None, inputs)  # type: ignore[attr-defined]
        theirs = time.perf_counter() - start
        for label, seconds in spent:
            times[label].append(seconds)
            ratios[label].append(seconds / theirs)
    return [(label, float(np.median(times[label])), float(np.median(ratios[label]))) for label in labels]


def compile_on(path: str, database: object, fuse: str, target: object, threads: int, workers: int = 1) -> object:
    """The model compiled with `database` for `target` (the host with `threads` cores when None)."""
    from msdb.tuner.compile.compiler import compile_model

    if target is None and threads > 1:
        target = {"kind": "llvm", "num-cores": threads}
    return compile_model(path, database, target, fuse=fuse, num_threads=threads, build_workers=workers)


def compile_and_time(path: str, database: object, session: object, repeat: int, inputs: dict[str, np.ndarray],
                     expected: list[np.ndarray], label: str, workers: int = 1, fuse: str = "tvm",
                     target: object = None, threads: int = 1) -> object:
    from msdb.tuner.compile.reference import errors
    from msdb.tuner.compile.report import summary_line

    start = time.perf_counter()
    compiled = compile_on(path, database, fuse, target, threads, workers)
    total = time.perf_counter() - start
    phases = ", ".join(f"{k} {v:.1f} s" for k, v in compiled.timings.items())
    max_abs, max_rel = errors(compiled.run(inputs), expected)
    ours, theirs = paired_latency(compiled, session, inputs, repeat)
    print(f"| {label} | {summary_line(compiled.report)} | compile {total:.1f} s ({phases}) | "
          f"{ours * 1e3:.2f} ms | {theirs * 1e3:.2f} ms | {ours / theirs:.2f}x | {max_rel:.1e} |")
    sys.stdout.flush()
    PROFILES.append((label, compiled.profile(inputs, repeat)))
    return compiled


#: (build label, CompiledModel.profile) of each compile, printed after the table.
PROFILES: list[tuple[str, list]] = []


def print_profiles(top: int = 8) -> None:
    """Where each build's run time goes: its slowest functions, timed in the model's order."""
    for label, profile in PROFILES:
        total = sum(f.seconds for f in profile)
        slowest = ", ".join(f"{f.name} x{f.calls} {f.seconds * 1e3:.2f} ms" for f in profile[:top])
        print(f"\n{label}: {total * 1e3:.2f} ms in kernels; slowest: {slowest}")


def warm_up_database(path: str, db_path: Path, trials_per_task: int, fuse: str) -> None:
    from msdb.database.sql import SQLiteDatabase
    from msdb.model.loader import load
    from msdb.model.tasks import extract_tasks
    from msdb.tuner.model_tuning import tune_model

    model = load(path, fuse=fuse)
    tasks = extract_tasks(model)
    db = SQLiteDatabase(db_path)
    try:
        start = time.perf_counter()
        tune_model(model, None, db, trials_per_task * len(tasks), trials_per_task,
                   max_trials_per_task=trials_per_task, strategy="replay-trace", cost_model="random",
                   task_scheduler="round-robin", seed=0, check_best=False)
        print(f"warm database: {len(tasks)} tasks x {trials_per_task} trials in {time.perf_counter() - start:.0f} s")
    finally:
        db.close()


def tune(path: str, db_path: Path, trials: int, fuse: str) -> None:
    from msdb.database.sql import SQLiteDatabase
    from msdb.model.loader import load
    from msdb.tuner.model_tuning import tune_model

    db = SQLiteDatabase(db_path)
    try:
        start = time.perf_counter()
        result = tune_model(load(path, fuse=fuse), None, db, trials, 64, seed=0)
        print(f"tuned {len(result.tasks)} tasks with {trials} trials in {time.perf_counter() - start:.0f} s")
        print(result.table())
    finally:
        db.close()


def main() -> None:
    from msdb.model.lower import FUSE_MODES

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="resnet",
                        help="resnet (--depth, --image), or a zoo model by name: resnet50, mobilenet, bert, gpt2, ...")
    parser.add_argument("--depth", type=int, default=18)
    parser.add_argument("--image", type=int, default=224)
    parser.add_argument("--layers", type=int, default=None, help="a transformer's layers (default: the zoo's 12)")
    parser.add_argument("--threads", type=int, default=1, help="threads of both msdb's runs and onnxruntime's")
    parser.add_argument("--repeat", type=int, default=20, help="runs of each build, alternating with onnxruntime's")
    parser.add_argument("--db", type=Path, default=None, help="a warm database (default: made with --warm-trials)")
    parser.add_argument("--warm-trials", type=int, default=2)
    parser.add_argument("--tune", type=int, default=0, metavar="N", help="also tune the tasks with N trials in all")
    parser.add_argument("--workers", type=int, default=0,
                        help="also compile with the warm database building in this many processes")
    parser.add_argument("--tune-db", type=Path, default=None, help="where --tune commits (default: a temp file)")
    parser.add_argument("--mcpu", default=None,
                        help="build the kernels for this LLVM CPU (e.g. x86-64-v3 for the AVX2 path on an AVX-512 host)")
    parser.add_argument("--skip-warm", action="store_true", help="no warm database (default schedules, and --tune)")
    parser.add_argument("--fuse", choices=FUSE_MODES, default="tvm",
                        help="how the model's operators are fused (msdb.model.load): TVM's layout, folded, or "
                             "folded with packed conv weights")
    args = parser.parse_args()

    import onnx

    from msdb.database.sql import SQLiteDatabase
    from msdb.model import zoo
    from msdb.model.loader import load
    from msdb.tuner.compile.reference import random_inputs

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from _timing import cpu_line

    threads = args.threads
    target = {"kind": "llvm", "mcpu": args.mcpu, "num-cores": threads} if args.mcpu else None
    if args.model == "resnet":
        name, proto = f"ResNet-{args.depth} at {args.image}x{args.image}", zoo.resnet(args.depth, image=args.image)
    elif args.layers is not None:
        name, proto = f"{args.model}, {args.layers} layers", zoo.NAMED[args.model](layers=args.layers)
    else:
        name, proto = args.model, zoo.named(args.model)
    print(f"{name}, {threads} thread(s) (sched_getaffinity: {len(os.sched_getaffinity(0))} core(s)); "
          f"onnxruntime with intra_op_num_threads={threads}; fuse={args.fuse}")
    print(cpu_line(args.mcpu) + "\n")
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "model.onnx")
        onnx.save(proto, path)
        inputs = random_inputs(load(path, fuse=args.fuse))
        session, ort_s, expected = ort_latency(path, inputs, args.repeat, threads)
        print(f"onnxruntime: {ort_s * 1e3:.2f} ms\n")
        print("| build | hits | compile time | latency | onnxruntime, alternating runs | vs onnxruntime | "
              "max rel error |")
        print("|---|---|---|---|---|---|---|")
        empty = Path(tmp) / "empty.sqlite"
        SQLiteDatabase(empty).close()
        builds: list[tuple[str, object]] = []
        databases: list[tuple[str, str]] = []  # (label, database) of each build, for the second copies
        label = "default schedules (empty db)"
        builds.append((label, compile_and_time(path, str(empty), session, args.repeat, inputs, expected, label,
                                               fuse=args.fuse, target=target, threads=threads)))
        databases.append((label, str(empty)))
        if not args.skip_warm:
            warm = args.db
            if warm is None:
                warm = Path(tmp) / "warm.sqlite"
                warm_up_database(path, warm, args.warm_trials, args.fuse)
            label = f"warm db {warm.name}"
            builds.append((label, compile_and_time(path, str(warm), session, args.repeat, inputs, expected, label,
                                                   fuse=args.fuse, target=target, threads=threads)))
            databases.append((label, str(warm)))
            if args.workers > 1:
                compile_and_time(path, str(warm), session, args.repeat, inputs, expected,
                                 f"warm db, {args.workers} build processes", args.workers, args.fuse)
        if args.tune:
            tuned = args.tune_db or Path(tmp) / "tuned.sqlite"
            tune(path, tuned, args.tune, args.fuse)
            label = f"tuned, {args.tune} trials"
            builds.append((label, compile_and_time(path, str(tuned), session, args.repeat, inputs, expected, label,
                                                   fuse=args.fuse, target=target, threads=threads)))
            databases.append((label, str(tuned)))
        if len(builds) > 1:
            for label, database in reversed(databases):  # second copies, built in the opposite order
                builds.append((label, compile_on(path, database, args.fuse, target, threads)))
            print(f"\nEvery build (two copies of each, built in opposite orders) and onnxruntime in one loop "
                  f"({args.repeat} rounds, the builds' order rotated):\n")
            print("| build | latency | vs onnxruntime (median of each round's ratio) |\n|---|---|---|")
            for label, seconds, ratio in round_robin(builds, session, inputs, args.repeat):
                print(f"| {label} | {seconds * 1e3:.2f} ms | {ratio:.2f}x |")
        print_profiles()


if __name__ == "__main__":
    main()
