"""Building TVM 0.27's own CUDA candidates (docs/benchmarks.md, "CUDA builds of TVM's
candidates"): every candidate shipped in tests/data/cuda_verdicts (a few hundred, five workloads,
made by TVM without a GPU) is replayed in msdb and given msdb's VerifyGPUCode verdict, which must
be TVM's; each accepted one is built to a cubin (lowering and CUDA C, NVRTC, ptxas), and the
seconds of each step are printed per workload: median, slowest, and how many took over 20 s.
With `--tvm-python` (TVM's own Python, e.g. .tvm-venv/bin/python), the CUDA C TVM generates for
the same candidates (bench/_tvm_cuda_source.py) goes through the same NVRTC and ptxas in the
same run: the anchor (less the prelude's `#ifdef __CUDACC_RTC__` block, which includes CUDA
headers NVRTC is not given here; TVM's own helpers, cp.async among them, stay).
No GPU needed. Run:
    taskset -c 1 python bench/bench_cuda_build.py [--workload NAME] [--limit-s 120] [--max-candidates N]
        [--tvm-python PATH]
"""

from __future__ import annotations

import argparse
import gzip
import json
import multiprocessing
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import cpu_line  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "cuda_verdicts"
WORKLOADS = tuple(sorted(p.name.removesuffix(".json.gz") for p in DATA.glob("*.json.gz")))


def _build_in_child(conn: object, mod: Any, target: Any) -> None:
    """Runs in a forked child: build, send the step timings (or the error) back."""
    from msdb.tuner.codegen.cuda import build_cuda

    try:
        conn.send(("ok", build_cuda(mod, target).timings))  # type: ignore[attr-defined]
    except Exception as exc:  # noqa: BLE001 - reported by the parent
        conn.send(("error", f"{type(exc).__name__}: {str(exc)[:200]}"))  # type: ignore[attr-defined]


def _timed_build(mod: Any, target: Any, limit_s: float) -> tuple[str, Any]:
    """("ok", step timings), ("error", why) or ("limit", None): the build runs in a forked child,
    killed at `limit_s` (NVRTC, inside one C call, cannot be interrupted in-process)."""
    context = multiprocessing.get_context("fork")
    parent, child = context.Pipe(duplex=False)
    process = context.Process(target=_build_in_child, args=(child, mod, target))
    process.start()
    try:
        if parent.poll(limit_s):
            return parent.recv()  # type: ignore[no-any-return]
        return "limit", None
    finally:
        process.kill()
        process.join()


def main() -> None:
    from msdb.ir import from_script
    from msdb.ir.function import IRModule
    from msdb.records.target import Target
    from msdb.schedule import Schedule, Trace
    from msdb.tuner.codegen.cuda.nvrtc import nvrtc_version
    from msdb.tuner.context import TuneContext
    from msdb.tuner.space.postprocs.verify_gpu_code import VerifyGPUCode

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workload", action="append", choices=WORKLOADS)
    parser.add_argument("--limit-s", type=float, default=120.0, help="a build taking longer counts as failed")
    parser.add_argument("--max-candidates", type=int, default=None, help="only the first N candidates of each workload")
    parser.add_argument("--tvm-python", help="TVM 0.27's Python: compile TVM's CUDA C of the same candidates too")
    args = parser.parse_args()
    print(cpu_line(), f"NVRTC {'.'.join(map(str, nvrtc_version()))}")
    print("| workload | candidates (accepted / refused) | verdicts equal TVM's | built | lower+emit s median / max "
          "| NVRTC s median / max | ptxas s median / max | total s median / max | over 20 s "
          "| TVM's CUDA C: NVRTC + ptxas s median / max |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in args.workload or WORKLOADS:
        data = json.loads(gzip.decompress((DATA / f"{name}.json.gz").read_bytes()))
        data["candidates"] = data["candidates"][:args.max_candidates]
        workload = IRModule.coerce(from_script(data["workload"]))
        context = TuneContext(mod=workload, target=Target(data["target"]))
        verify = VerifyGPUCode()
        verify._initialize_with_tune_context(context)
        agree, built, failures = 0, 0, []
        steps: dict[str, list[float]] = {"lower_emit": [], "nvrtc": [], "ptxas": [], "total": []}
        accepted = sum(c["verdict"] == "accepted" for c in data["candidates"])
        for i, item in enumerate(data["candidates"]):
            sch = Schedule(workload)
            Trace.from_json(item["trace"]).apply_to_schedule(sch, remove_postproc=False)
            ours = "accepted" if verify.apply(sch) else "refused"
            agree += ours == item["verdict"]
            if ours != item["verdict"]:
                failures.append(f"{name}[{i}]: msdb {ours}, TVM {item['verdict']}")
            if item["verdict"] != "accepted":
                continue
            started = time.perf_counter()
            status, result = _timed_build(sch.mod, data["target"], args.limit_s)
            if status == "limit":
                failures.append(f"{name}[{i}]: build over {args.limit_s:g} s")
                steps["total"].append(args.limit_s)
                continue
            if status == "error":
                failures.append(f"{name}[{i}]: {result}")
                continue
            built += 1
            for key in ("lower_emit", "nvrtc", "ptxas"):
                steps[key].append(result[key])
            steps["total"].append(time.perf_counter() - started)

        def stat(key: str) -> str:
            values = steps[key]
            return f"{statistics.median(values):.2f} / {max(values):.2f}" if values else "-"

        over = sum(t > 20 for t in steps["total"])
        anchor = _tvm_compile_seconds(args.tvm_python, name, data) if args.tvm_python else []
        tvm_text = f"{statistics.median(anchor):.2f} / {max(anchor):.2f}" if anchor else "-"
        print(f"| {name} | {len(data['candidates'])} ({accepted} / {len(data['candidates']) - accepted}) | "
              f"{agree} of {len(data['candidates'])} | {built} of {accepted} | {stat('lower_emit')} | {stat('nvrtc')} | "
              f"{stat('ptxas')} | {stat('total')} | {over} | {tvm_text} |", flush=True)
        for line in failures:
            print("  ", line, flush=True)


def _tvm_compile_seconds(tvm_python: str, name: str, data: dict[str, Any]) -> list[float]:
    """NVRTC + ptxas seconds of the CUDA C TVM generates for each accepted candidate."""
    from msdb.tuner.codegen.cuda import target_arch
    from msdb.tuner.codegen.cuda.nvrtc import assemble_cubin, compile_ptx

    accepted = [str(i) for i, c in enumerate(data["candidates"]) if c["verdict"] == "accepted"]
    helper = Path(__file__).with_name("_tvm_cuda_source.py")
    done = subprocess.run([tvm_python, str(helper), str(DATA / f"{name}.json.gz"), *accepted], check=True,
                          capture_output=True, text=True)
    arch = target_arch(data["target"])
    seconds = []
    for index, source in json.loads(done.stdout).items():
        if isinstance(source, dict):
            print(f"   TVM's own build of {name}[{index}] fails: {source['error']}")
            continue
        started = time.perf_counter()
        try:
            assemble_cubin(compile_ptx(_without_header_block(source), arch), arch)
        except Exception as exc:  # noqa: BLE001 - reported, the run goes on
            lines = str(exc).splitlines()
            print(f"   TVM's CUDA C of {name}[{index}] did not build: {(lines[1:] or lines or [''])[0][:200]}")
            continue
        seconds.append(time.perf_counter() - started)
    return seconds


def _without_header_block(source: str) -> str:
    """TVM's CUDA C less its first `#ifdef __CUDACC_RTC__ ... #endif` block (nested blocks
    included): it includes `cuda/std` headers, which this NVRTC is not given."""
    out, depth = [], 0
    seen = False
    for line in source.split("\n"):
        text = line.strip()
        if not seen and depth == 0 and text.startswith("#ifdef __CUDACC_RTC__"):
            seen, depth = True, 1
            continue
        if depth:
            depth += 1 if text.startswith("#if") else -1 if text.startswith("#endif") else 0
            continue
        out.append(line)
    return "\n".join(out)


if __name__ == "__main__":
    main()
