"""GPU tuning figures (docs/benchmarks.md, "GPU tuning"): msdb's own tuner, TVM's default CUDA
design space, 64 trials, on a 4096^2 fp32 matmul and a ResNet-18 conv2d.

Runs only on a machine with an NVIDIA GPU. Per workload it prints and writes to `--out` the best
kernel's GFLOPS (against the GPU's fp32 peak and torch on the same shapes, TF32 off), the wall
time per trial, whether the best kernel computes the workload's numbers (numpy), and keeps the
records in `--out/gpu.sqlite` and their `msdb export` in `--out/cuda_workdir.tar.gz`.

    pip install --target /tmp/site '.[gpu]' && cd /tmp && PYTHONPATH=/tmp/site python3 REPO/bench/bench_cuda.py \
        --out /tmp/out [--trials 64] [--deadline-s 300]

(from outside the repository: the builder's and runner's worker processes import the installed
msdb, and a checkout's `msdb/` folder in the working directory would shadow it).
"""

from __future__ import annotations

import argparse
import json
import os
import tarfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np


def _device_facts() -> dict[str, Any]:
    """The GPU's name, compute capability and fp32 peak (Hopper and Ampere: 128 fp32 lanes per SM)."""
    import torch

    props = torch.cuda.get_device_properties(0)
    major, minor = torch.cuda.get_device_capability(0)
    clock_khz = _max_sm_clock_khz()
    lanes = 128 if major in (8, 9) and not (major == 8 and minor == 0) else 64
    peak = props.multi_processor_count * clock_khz * 1e3 * lanes * 2 / 1e9
    return {"name": props.name, "arch": f"sm_{major}{minor}", "sms": props.multi_processor_count,
            "clock_mhz": clock_khz / 1e3, "fp32_peak_gflops": peak}


def _max_sm_clock_khz() -> float:
    """The SM's maximum clock, from nvidia-smi (what the fp32 peak is quoted at)."""
    import subprocess

    out = subprocess.run(["nvidia-smi", "--query-gpu=clocks.max.sm", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True, check=True, timeout=30).stdout
    return float(out.split()[0]) * 1e3


def _torch_gflops(fn: Callable[[], Any], flop: float) -> float:
    """torch's time for `fn` with CUDA events (median of 20 after 3 warm-ups)."""
    import torch

    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(20):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return flop / float(np.median(times)) / 1e9


def _matmul_reference(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> None:
    c[...] = (a.astype(np.float64) @ b.astype(np.float64)).astype(c.dtype)


def _conv_reference(data: np.ndarray, weight: np.ndarray, out: np.ndarray) -> None:
    import torch

    result = torch.nn.functional.conv2d(torch.from_numpy(data).double(), torch.from_numpy(weight).double(), padding=1)
    out[...] = result.numpy().astype(out.dtype)


Workload = tuple[Any, Callable[[float], float], Callable[..., None]]


def _workloads() -> dict[str, Workload]:
    """name -> (PrimFunc, torch GFLOPS of the same computation, a float64 reference writing the
    output in place: msdb's interpreter would take hours on these sizes)."""
    import torch

    from msdb.ir import te
    from msdb.ir.zoo import matmul
    from msdb.model.legalize import legalize_op

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    a, b, c = matmul(4096, 4096, 4096)
    gmm = te.create_prim_func([a, b, c])
    # ResNet-18's 64-channel 3x3 conv in TVM's topi form, as tests/data/cuda_candidates ships it
    from msdb.ir import from_script

    shipped = Path(__file__).resolve().parent.parent / "tests" / "data" / "cuda_candidates" / "conv2d.json"
    conv = from_script(json.loads(shipped.read_text())["workload"])

    ta, tb = torch.randn(4096, 4096, device="cuda"), torch.randn(4096, 4096, device="cuda")
    tx, tw = torch.randn(1, 64, 56, 56, device="cuda"), torch.randn(64, 64, 3, 3, device="cuda")
    return {
        "matmul_4096": (gmm, lambda flop: _torch_gflops(lambda: ta @ tb, flop), _matmul_reference),
        "conv2d_resnet_64x56x56_3x3": (conv, lambda flop: _torch_gflops(
            lambda: torch.nn.functional.conv2d(tx, tw, padding=1), flop), _conv_reference),
    }


def _check_best(record: Any, target: Any, artifact_dir: str, reference: Callable[..., None]) -> dict[str, Any]:
    """Rebuild the best record and compare its outputs with numpy (float64 reference)."""
    from msdb.schedule.schedule import Schedule
    from msdb.tuner.measure.builder import build_cuda_artifact
    from msdb.tuner.measure.cuda_runner import check_against_numpy

    func = record.workload.mod
    sch = Schedule(func)
    record.trace.apply_to_schedule(sch, remove_postproc=False)
    path = build_cuda_artifact(sch.mod, target, artifact_dir)
    return check_against_numpy(func, path, reference=reference)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--trials", type=int, default=64)
    parser.add_argument("--per-iter", type=int, default=32)
    parser.add_argument("--workloads", default="matmul_4096,conv2d_resnet_64x56x56_3x3")
    parser.add_argument("--deadline-s", type=float, default=300.0, help="skip the workloads left after this")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()

    from msdb.database.sql import SQLiteDatabase
    from msdb.database.tvm_export import export_workdir
    from msdb.ir.flops import estimate_flops
    from msdb.records.target import Target
    from msdb.tuner.measure.builder import LocalBuilder
    from msdb.tuner.measure.cuda_runner import CudaRunner
    from msdb.tuner.tune import tune_tir

    facts = _device_facts()
    print(json.dumps(facts), flush=True)
    target = Target(f"cuda -arch={facts['arch']}")
    db = SQLiteDatabase(str(args.out / "gpu.sqlite"))
    results: dict[str, Any] = {"device": facts, "trials": args.trials, "workloads": {}}
    workloads = _workloads()
    for name in args.workloads.split(","):
        if time.perf_counter() - started > args.deadline_s:
            results["workloads"][name] = {"skipped": "deadline"}
            continue
        func, torch_gflops, reference_fn = workloads[name]
        flop = float(estimate_flops(func))
        builder = LocalBuilder(max_workers=min(os.cpu_count() or 1, 16), timeout_sec=20)
        runner = CudaRunner(timeout_sec=20, number=3, repeat=1, min_repeat_ms=40)
        t0 = time.perf_counter()
        try:
            result = tune_tir(func, target, db, args.trials, args.per_iter, seed=0, task_name=name,
                              builder=builder, runner=runner, check_best=False)
        finally:
            builder.close()
            runner.close()
        wall = time.perf_counter() - t0
        task = result.tasks[0]
        row: dict[str, Any] = {"flop": flop, "trials": task.trials, "wall_s": wall,
                               "wall_per_trial_s": wall / max(task.trials, 1)}
        if task.best is not None:
            best_gflops = flop / task.best.mean_run_secs / 1e9
            row.update(best_us=task.best.mean_run_secs * 1e6, gflops=best_gflops,
                       fraction_of_fp32_peak=best_gflops / facts["fp32_peak_gflops"])
            try:
                row["check"] = _check_best(task.best, target, str(args.out / "artifacts"), reference_fn)
            except Exception as err:  # noqa: BLE001 - reported, the figures still stand
                row["check"] = {"ok": False, "error": f"{type(err).__name__}: {err}"}
        reference = torch_gflops(flop)
        row["torch_fp32_gflops"] = reference
        if "gflops" in row:
            row["ratio_to_torch"] = row["gflops"] / reference
        results["workloads"][name] = row
        print(name, json.dumps(row), flush=True)
        (args.out / "bench_cuda.json").write_text(json.dumps(results, indent=2, default=str))

    summary = export_workdir(db, args.out / "cuda_workdir", top_k=1)
    with tarfile.open(args.out / "cuda_workdir.tar.gz", "w:gz") as tar:
        tar.add(args.out / "cuda_workdir", arcname="cuda_workdir")
    results["export"] = str(summary)
    (args.out / "bench_cuda.json").write_text(json.dumps(results, indent=2, default=str))
    print(json.dumps(results, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
