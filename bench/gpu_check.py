"""One GPU check of msdb's CUDA backend (docs/architecture.md, "CUDA"), for a machine
with a GPU where msdb need not be installed:

    PYTHONPATH=. python3 bench/gpu_check.py --out "$OUT"

Builds the hand schedules of msdb.tuner.codegen.cuda.examples (1024^2 and 4096^2 fp32 matmul, a
256x1024 softmax, the ResNet 56x56x64 3x3 conv2d, a 256^3 int8 dense with __dp4a) and TVM 0.27's
own post-processed candidates of tests/data/cuda_candidates (matmul, conv2d, softmax) with NVRTC
and ptxas for the GPU's arch, runs each on seeded random inputs and checks the outputs against
numpy, times them with CUDA events (TVM's semantics: number / repeat / min_repeat_ms, one
warm-up) through `CudaRunner`, and compares GFLOPS with torch and cupy on the same shapes
(TF32 off) and with the GPU's fp32 peak. Writes gpu_check.json into --out; exit status 0 when
every kernel matches numpy, 1 when one does not, 2 when there is no GPU (the kernels are built
first, so that part is checked anywhere NVRTC and ptxas are). Imports only msdb.ir,
msdb.schedule, msdb.tuner.codegen.cuda and msdb.tuner.measure (no database packages).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
#: TVM 0.27's post-processed CUDA candidates, one JSON file per workload (its README says how made).
CANDIDATES = ROOT / "tests" / "data" / "cuda_candidates"


def _import_msdb_tuner() -> None:
    """Make `msdb.tuner` importable from the repository's `tuner/` folder when msdb is not
    installed (setup.py maps the folder onto that name)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    import msdb

    try:
        import msdb.tuner  # noqa: F401
        return
    except ImportError:
        pass
    spec = importlib.util.spec_from_file_location("msdb.tuner", ROOT / "tuner" / "__init__.py",
                                                  submodule_search_locations=[str(ROOT / "tuner")])
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["msdb.tuner"] = module
    spec.loader.exec_module(module)
    msdb.tuner = module  # type: ignore[attr-defined]


def _references() -> dict[str, Callable[..., None]]:
    import numpy as np

    def matmul(a: Any, b: Any, c: Any) -> None:
        c[...] = (a.astype(np.float64) @ b.astype(np.float64)).astype(c.dtype)

    def softmax(a: Any, out: Any) -> None:
        x = a.astype(np.float64)
        e = np.exp(x - x.max(axis=1, keepdims=True))
        out[...] = (e / e.sum(axis=1, keepdims=True)).astype(out.dtype)

    def conv2d(inp: Any, weight: Any, out: Any) -> None:  # NHWC, HWIO, stride 1, padding 1
        n, h, w, _ = inp.shape
        kh, kw = weight.shape[:2]
        padded = np.pad(inp.astype(np.float64), ((0, 0), (1, 1), (1, 1), (0, 0)))
        acc = np.zeros(out.shape, np.float64)
        for r in range(kh):
            for s in range(kw):
                acc += padded[:, r:r + h, s:s + w, :] @ weight[r, s].astype(np.float64)
        out[...] = acc.astype(out.dtype)

    def dense_int8(x: Any, w: Any, y: Any) -> None:
        y[...] = x.astype(np.int32) @ w.astype(np.int32).T

    def conv2d_nchw(inp: Any, weight: Any, out: Any) -> None:  # NCHW, OIHW, stride 1, padding 1 (TVM's fixture)
        n, _, h, w = inp.shape
        kh, kw = weight.shape[2:]
        padded = np.pad(inp.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
        acc = np.zeros(out.shape, np.float64)
        for r in range(kh):
            for s in range(kw):
                acc += np.einsum("nchw,oc->nohw", padded[:, :, r:r + h, s:s + w], weight[:, :, r, s].astype(np.float64))
        out[...] = acc.astype(out.dtype)

    return {"matmul": matmul, "softmax": softmax, "conv2d": conv2d, "dense_int8": dense_int8,
            "conv2d_nchw": conv2d_nchw}


def _peak_fp32(report: dict[str, Any]) -> float | None:
    """SMs x boost clock x 128 FP32 lanes x 2 (FMA), in GFLOPS (Ampere/Hopper SMs)."""
    try:
        import cupy

        props = cupy.cuda.runtime.getDeviceProperties(0)
        sms, clock_khz = int(props["multiProcessorCount"]), int(props["clockRate"])
        report["sms"], report["clock_mhz"] = sms, clock_khz / 1e3
        return sms * clock_khz * 1e3 * 128 * 2 / 1e9
    except Exception as err:  # cupy missing or a driver without clockRate
        report["peak_error"] = f"{type(err).__name__}: {err}"
        return None


def _time_torch(fn: Callable[[], Any], number: int = 20, repeat: int = 5) -> float | None:
    import torch

    fn()
    torch.cuda.synchronize()
    best = None
    for _ in range(repeat):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(number):
            fn()
        end.record()
        end.synchronize()
        per = start.elapsed_time(end) / 1e3 / number
        best = per if best is None else min(best, per)
    return best


def _baselines(shapes: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    try:
        import torch

        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        dev = torch.device("cuda")
        for n in shapes["matmul"]:
            a, b = torch.rand(n, n, device=dev), torch.rand(n, n, device=dev)
            out[f"torch_matmul_{n}_s"] = _time_torch(lambda: torch.matmul(a, b))
        x = torch.rand(256, 1024, device=dev)
        out["torch_softmax_s"] = _time_torch(lambda: torch.softmax(x, dim=1))
        inp = torch.rand(1, 64, 56, 56, device=dev)
        w = torch.rand(64, 64, 3, 3, device=dev)
        out["torch_conv2d_s"] = _time_torch(lambda: torch.nn.functional.conv2d(inp, w, padding=1))
    except Exception as err:
        out["torch_error"] = f"{type(err).__name__}: {err}"
    try:
        import cupy

        for n in shapes["matmul"]:
            a, b = cupy.random.rand(n, n, dtype=cupy.float32), cupy.random.rand(n, n, dtype=cupy.float32)
            cupy.matmul(a, b)
            cupy.cuda.Device(0).synchronize()
            start, end = cupy.cuda.Event(), cupy.cuda.Event()
            best = None
            for _ in range(5):
                start.record()
                for _ in range(20):
                    cupy.matmul(a, b)
                end.record()
                end.synchronize()
                per = cupy.cuda.get_elapsed_time(start, end) / 1e3 / 20
                best = per if best is None else min(best, per)
            out[f"cupy_matmul_{n}_s"] = best
    except Exception as err:
        out["cupy_error"] = f"{type(err).__name__}: {err}"
    return out


def _arch() -> str:
    try:
        import torch

        major, minor = torch.cuda.get_device_capability(0)
        return f"sm_{major}{minor}"
    except Exception:
        return "sm_90"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=os.environ.get("OUT") or tempfile.mkdtemp(prefix="msdb-gpu-check-"))
    parser.add_argument("--min-repeat-ms", type=float, default=50.0)
    args = parser.parse_args()
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    report: dict[str, Any] = {"kernels": {}}

    def finish(status: int) -> int:
        report["wall_s"] = time.perf_counter() - started
        (out_dir / "gpu_check.json").write_text(json.dumps(report, indent=2))
        print(json.dumps(report, indent=2))
        return status

    _import_msdb_tuner()
    from msdb.tuner.measure.builder import build_cuda_artifact
    from msdb.tuner.measure.cuda_runner import CudaDevice, CudaRunner, CudaRuntimeError, check_against_numpy
    from msdb.tuner.measure.runner import RunnerInput
    from msdb.tuner.codegen.cuda import examples

    arch = _arch()
    report["arch"] = arch
    target = {"kind": "cuda", "arch": arch}
    refs = _references()
    cases: list[tuple[str, Callable[[], Any], str, float]] = [
        ("matmul_1024", lambda: examples.matmul(1024), "matmul", 2.0 * 1024 ** 3),
        ("matmul_4096", lambda: examples.matmul(4096), "matmul", 2.0 * 4096 ** 3),
        ("softmax_256x1024", lambda: examples.softmax(256, 1024), "softmax", 5.0 * 256 * 1024),
        ("conv2d_resnet_56x56x64_3x3", examples.conv2d, "conv2d", 2.0 * 56 * 56 * 64 * 64 * 9),
        ("dense_int8_256", examples.dense_int8, "dense_int8", 2.0 * 256 ** 3),
    ]
    # TVM 0.27's own post-processed candidates, as TVM printed them (read from the JSON files; the
    # test suite's helpers are not bench's to import)
    from msdb.ir.script import from_script

    tvm_ref = {"matmul": ("matmul", 2.0 * 1024 ** 3), "conv2d": ("conv2d_nchw", 2.0 * 56 * 56 * 64 * 64 * 9),
               "softmax": ("softmax", 5.0 * 256 * 1024)}
    for workload, (ref_name, flops) in tvm_ref.items():
        shipped = json.loads((CANDIDATES / f"{workload}.json").read_text())
        for index, candidate in enumerate(shipped["candidates"]):
            name = f"tvm_{workload}-candidate{index}"
            if name == "tvm_matmul-candidate3":  # 128 vthreads over a 4096-float register tile: minutes to build
                report["kernels"][name] = {"not_built": "its build takes minutes (128 vthreads)"}
                continue
            cases.append((name, (lambda text=candidate["tvm_script"]: from_script(text)), ref_name, flops))
    # build first: NVRTC and ptxas need no GPU
    paths: dict[str, str] = {}
    all_ok = True
    for name, make, _, _ in cases:
        entry: dict[str, Any] = {}
        report["kernels"][name] = entry
        try:
            t0 = time.perf_counter()
            paths[name] = build_cuda_artifact(make(), target, str(out_dir / "artifacts"))
            entry["build_s"] = time.perf_counter() - t0
            entry["kernels"] = json.loads(Path(paths[name] + ".json").read_text())["kernels"]
        except Exception as err:
            entry["error"] = f"{type(err).__name__}: {err}"
            entry["traceback"] = traceback.format_exc()[-4000:]
            all_ok = False
    try:
        device = CudaDevice()
    except CudaRuntimeError as err:
        report["error"] = f"no GPU: {err}"
        print(f"gpu_check: no GPU: {err}", file=sys.stderr)
        return finish(2)
    report["device"] = device.name
    report["binding"] = device.backend
    runner = CudaRunner(number=3, repeat=3, min_repeat_ms=args.min_repeat_ms, isolated=False)
    for name, _, ref, flops in cases:
        entry = report["kernels"][name]
        if name not in paths:
            continue
        path = paths[name]
        try:
            check = check_against_numpy(None, path, reference=refs[ref], rtol=1e-3, atol=1e-3)
            entry["check"] = check
            all_ok = all_ok and check["ok"]
            (result,) = [f.result() for f in runner.run([RunnerInput(path, "cuda")])]
            entry["run_secs"] = result.run_secs
            if result.error_msg:
                entry["error"] = result.error_msg
                all_ok = False
            else:
                best = min(result.run_secs or [float("inf")])
                entry["gflops"] = flops / best / 1e9
        except Exception as err:
            entry["error"] = f"{type(err).__name__}: {err}"
            entry["traceback"] = traceback.format_exc()[-4000:]
            all_ok = False
    peak = _peak_fp32(report)
    report["fp32_peak_gflops"] = peak
    base = _baselines({"matmul": [1024, 4096]})
    report["baselines"] = base
    for n in (1024, 4096):
        mine = report["kernels"][f"matmul_{n}"].get("gflops")
        for lib in ("torch", "cupy"):
            secs = base.get(f"{lib}_matmul_{n}_s")
            if secs:
                report[f"{lib}_matmul_{n}_gflops"] = 2.0 * n ** 3 / secs / 1e9
                if mine:
                    report[f"matmul_{n}_vs_{lib}"] = mine / report[f"{lib}_matmul_{n}_gflops"]
        if mine and peak:
            report[f"matmul_{n}_fraction_of_peak"] = mine / peak
    conv = report["kernels"]["conv2d_resnet_56x56x64_3x3"].get("gflops")
    if conv and base.get("torch_conv2d_s"):
        report["conv2d_vs_torch"] = conv / (2.0 * 56 * 56 * 64 * 64 * 9 / base["torch_conv2d_s"] / 1e9)
    tvm_best: dict[str, float] = {}
    for name, entry in report["kernels"].items():
        if name.startswith("tvm_") and entry.get("gflops") and entry.get("check", {}).get("ok"):
            workload = name[4:].split("-")[0]
            tvm_best[workload] = max(tvm_best.get(workload, 0.0), entry["gflops"])
    report["tvm_candidates_best_gflops"] = tvm_best
    report["all_match_numpy"] = all_ok
    return finish(0 if all_ok else 1)


if __name__ == "__main__":
    sys.exit(main())
