"""Tuning budgets (docs/benchmarks.md, "Tuning"): msdb's tuner against real TVM 0.27 MetaSchedule
on the same machine, one core each (taskset -c 0, one thread), with numpy/OpenBLAS (and an im2col
GEMM for the conv) measured in the same run as the anchor.

- GMM 1x128x128x128 fp32, 64 trials: best GFLOPS (>= TVM's; aim >= 70% of OpenBLAS), wall time
  (<= TVM's), and the share of a trial spent outside build and run (< 20%), with msdb's seconds
  by phase (sampling, replay, post-processing, features, cost model, build, run, database);
- conv2d NCHW 1x64x56x56, 64 filters 3x3, pad 1, 64 and 200 trials: best GFLOPS >= TVM's.

TVM runs in a subprocess with --tvm-python (default .tvm-venv/bin/python; skipped with a note when
no TVM is found). With --pretrain msdb also tunes into a database holding the three teams' TVM
logs (examples/team_logs), to see whether a shared database makes tuning faster.
Run: taskset -c 0 python bench/bench_tune.py [--workloads gmm,c2d] [--trials 64,200] [--seeds 0,1,2] [--no-tvm] [--pretrain]
     [--mcpu x86-64-v3]
With several seeds, a median row per tuner (issue 29: compare over at least 3 seeds).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def workloads() -> dict[str, tuple[object, float, object]]:
    """name -> (module, FLOPs, numpy anchor: a function timing the same computation)."""
    from msdb.ir import te, zoo
    from msdb.ir.flops import estimate_flops
    from msdb.ir.function import IRModule

    gmm = zoo.build("GMM", 1, 128, 128, 128)
    conv = IRModule.from_func(te.create_prim_func(conv2d_nchw_topi(1, 64, 56, 56, 64, 3, 1, 1)))

    a, b = np.random.rand(128, 128).astype("float32"), np.random.rand(128, 128).astype("float32")
    x = np.random.rand(64 * 9, 56 * 56).astype("float32")
    w = np.random.rand(64, 64 * 9).astype("float32")
    return {
        "gmm": (gmm, float(estimate_flops(gmm)), lambda: a @ b),
        "c2d": (conv, float(estimate_flops(conv)), lambda: w @ x),  # im2col GEMM of the same conv
    }


def conv2d_nchw_topi(n: int, ci: int, h: int, w: int, co: int, k: int, stride: int, pad: int) -> list[object]:
    """TVM topi's conv2d_nchw (what Relax legalizes a Conv to): a `pad_temp` block, then the
    `conv2d_nchw` reduction over (rc, ry, rx)."""
    from msdb.ir import te

    data = te.placeholder((n, ci, h, w), "float32", name="data")
    kernel = te.placeholder((co, ci, k, k), "float32", name="kernel")
    pad_temp = te.pad(data, [0, 0, pad, pad], name="pad_temp")
    rc = te.reduce_axis((0, ci), name="rc")
    ry = te.reduce_axis((0, k), name="ry")
    rx = te.reduce_axis((0, k), name="rx")
    out_h, out_w = (h + 2 * pad - k) // stride + 1, (w + 2 * pad - k) // stride + 1
    conv = te.compute((n, co, out_h, out_w),
                      lambda nn, ff, yy, xx: te.sum(pad_temp[nn, rc, yy * stride + ry, xx * stride + rx]
                                                    * kernel[ff, rc, ry, rx], axis=[rc, ry, rx]),
                      name="conv2d_nchw")
    return [data, kernel, conv]


def seconds(fn: object, min_time: float = 0.3) -> float:
    """Best mean seconds per call over 5 batches of at least `min_time`."""
    fn()  # type: ignore[operator]
    best = float("inf")
    for _ in range(5):
        n, started = 0, time.perf_counter()
        while time.perf_counter() - started < min_time:
            fn()  # type: ignore[operator]
            n += 1
        best = min(best, (time.perf_counter() - started) / n)
    return best


def tune_msdb(mod: object, trials: int, per_iter: int, seed: int, cost_model: str = "xgb",
              pretrain: object = None) -> dict[str, float]:
    """One tuning run into a fresh SQLite file: wall seconds, trials, best mean run seconds,
    and the seconds spent building and running (the rest is search, features and model; the
    tuner's `Profiler` phases)."""
    from msdb import SQLiteDatabase
    from msdb.tuner.measure.builder import LocalBuilder
    from msdb.tuner.measure.runner import LocalRunner
    from msdb.tuner.profiler import PHASES, Profiler
    from msdb.tuner.tune import tune_tir

    with tempfile.TemporaryDirectory() as tmp:
        db = SQLiteDatabase(os.path.join(tmp, "tune.sqlite"))
        if pretrain is not None:
            pretrain(db)  # type: ignore[operator]
        builder = LocalBuilder(max_workers=1)
        runner = LocalRunner(num_threads=1)
        started = time.perf_counter()
        try:
            with Profiler() as profiler:
                result = tune_tir(mod, f"llvm -num-cores=1 -mcpu={host_cpu()}", db, trials, per_iter, seed=seed,  # type: ignore[arg-type]
                                  num_threads=1,
                                  cost_model=cost_model, builder=builder, runner=runner)
        finally:
            builder.close()
            runner.close()
        wall = time.perf_counter() - started
        task = result.tasks[0]
        db.close()
        phases = profiler.get()
        return {"wall": wall, "trials": task.trials, "best": task.best.mean_run_secs if task.best else float("nan"),
                "build": phases["build"], "run": phases["run"],
                "breakdown": " / ".join(f"{name} {phases.get(name, 0.0):.1f}" for name in PHASES)}


def import_team_logs(db: object) -> None:
    """The three teams' TVM 0.27 logs, imported into `db` (what a shared database holds)."""
    from msdb.database.tvm_import import import_tvm

    import_tvm(db, sorted((ROOT / "examples" / "team_logs").iterdir()))  # type: ignore[arg-type]


def tune_tvm(python: str, mod: object, trials: int, per_iter: int, seed: int) -> dict[str, float] | None:
    from msdb.interop.tvm.encode import encode_workload
    from msdb.interop.tvm.payload import payload_bytes

    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, "workload.json")
        Path(script).write_bytes(payload_bytes(encode_workload(mod)))  # type: ignore[arg-type]
        out = subprocess.run([python, str(ROOT / "bench" / "_tvm_tune.py"), script, str(trials), str(per_iter),
                              os.path.join(tmp, "work"), str(seed), host_cpu()], capture_output=True, text=True)
        if out.returncode != 0:
            print(f"TVM failed: {out.stderr[-2000:]}", file=sys.stderr)
            return None
        return json.loads(out.stdout.strip().splitlines()[-1])


#: The LLVM CPU both tuners build for (`--mcpu`, default the host's)
MCPU: list[str] = []


def host_cpu() -> str:
    """The CPU both tuners build for, as LLVM names it: `--mcpu`, else the host's (`-mcpu`;
    TVM's plain `llvm` target builds for the generic x86-64 CPU, SSE2 only)."""
    import llvmlite.binding as llvm

    return MCPU[0] if MCPU else str(llvm.get_host_cpu_name())


def find_tvm(explicit: str | None) -> str | None:
    for python in (explicit, str(ROOT / ".tvm-venv" / "bin" / "python")):
        if python and os.path.exists(python) and subprocess.run([python, "-c", "import tvm"],
                                                                 capture_output=True).returncode == 0:
            return python
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default="gmm,c2d")
    parser.add_argument("--trials", default="64", help="comma-separated trial counts")
    parser.add_argument("--per-iter", type=int, default=32)
    parser.add_argument("--seeds", default="0", help="comma-separated seeds; with several, a median row")
    parser.add_argument("--no-tvm", action="store_true")
    parser.add_argument("--tvm-python", default=None)
    parser.add_argument("--pretrain", action="store_true", help="also tune into a database holding the team logs")
    parser.add_argument("--mcpu", default=None,
                        help="the LLVM CPU both tuners build for (default: the host's; x86-64-v3 for the AVX2 path "
                             "on an AVX-512 host)")
    args = parser.parse_args()
    if args.mcpu:
        MCPU.append(args.mcpu)
    tvm = None if args.no_tvm else find_tvm(args.tvm_python)
    seeds = [int(s) for s in args.seeds.split(",")]
    table = workloads()
    import llvmlite.binding as llvm

    print(f"CPU {llvm.get_host_cpu_name()}, building for -mcpu={host_cpu()}; affinity: cores {sorted(os.sched_getaffinity(0))}; "
          f"load average {os.getloadavg()[0]:.2f}")
    print("| workload | trials | seed | tuner | best GFLOPS | vs anchor | vs TVM | wall s | s/trial | outside build+run |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in args.workloads.split(","):
        mod, flops, anchor = table[name]
        anchor_gflops = flops / seconds(anchor) / 1e9
        print(f"| {name} | - | - | numpy/OpenBLAS{' im2col' if name == 'c2d' else ''} | {anchor_gflops:.1f} | 1.00 | | | | |")
        for trials in map(int, args.trials.split(",")):
            rows: dict[str, list[tuple[float, float]]] = {}
            for seed in seeds:
                tvm_row = tune_tvm(tvm, mod, trials, args.per_iter, seed) if tvm else None
                tvm_gflops = flops / tvm_row["best"] / 1e9 if tvm_row and tvm_row["best"] else None
                if tvm_row:
                    rows.setdefault("TVM 0.27", []).append((tvm_gflops or 0.0, tvm_row["wall"]))
                    print(f"| {name} | {trials} | {seed} | TVM 0.27 | {tvm_gflops or 0:.1f} | "
                          f"{(tvm_gflops or 0) / anchor_gflops:.2f} | 1.00 | {tvm_row['wall']:.0f} | "
                          f"{tvm_row['wall'] / max(tvm_row['trials'], 1):.2f} | ({tvm_row.get('failed', 0)} failed) |")
                runs = [("msdb", None)] + ([("msdb, shared db", import_team_logs)] if args.pretrain else [])
                for label, pretrain in runs:
                    mine = tune_msdb(mod, trials, args.per_iter, seed, pretrain=pretrain)
                    gflops = flops / mine["best"] / 1e9
                    rows.setdefault(label, []).append((gflops, mine["wall"]))
                    vs_tvm = f"{gflops / tvm_gflops:.2f}" if tvm_gflops else "(no TVM)"
                    outside = 1 - (mine["build"] + mine["run"]) / mine["wall"]
                    print(f"| {name} | {trials} | {seed} | {label} | {gflops:.1f} | {gflops / anchor_gflops:.2f} | "
                          f"{vs_tvm} | {mine['wall']:.0f} | {mine['wall'] / max(mine['trials'], 1):.2f} | {outside:.0%} |")
                    print(f"|   | | | seconds by phase: {mine['breakdown']} | | | | | | |")
                sys.stdout.flush()
            if len(seeds) > 1:
                tvm_median = float(np.median([g for g, _ in rows["TVM 0.27"]])) if "TVM 0.27" in rows else None
                for label, values in rows.items():
                    gflops = float(np.median([g for g, _ in values]))
                    wall = float(np.median([w for _, w in values]))
                    vs_tvm = f"{gflops / tvm_median:.2f}" if tvm_median else "(no TVM)"
                    print(f"| {name} | {trials} | median | {label} | {gflops:.1f} | {gflops / anchor_gflops:.2f} | "
                          f"{vs_tvm} | {wall:.0f} | | |")
                sys.stdout.flush()

if __name__ == "__main__":
    main()
