"""Import speed from TVM logs (docs/benchmarks.md: >= 20,000 records/s, faster than real TVM's
JSONDatabase loading the same files).

On one work_dir of N records (default 100,000) synthesized from the bundled team logs, times in
this run: `import_tvm` (the library call behind `msdb import`, no --verify) into a fresh SQLite
file; the same import again (every record a duplicate); real TVM 0.27's `JSONDatabase(work_dir=...)`
loading it in a subprocess (`tvm` from this interpreter, else `--tvm-python`, default
/work/tvm-venv/bin/python then .tvm-venv/bin/python; skipped with a note when none is found,
bounded by `--tvm-timeout`, the ratio then a lower bound). The CPU-second column (this process
and its parsing workers) holds up on a busy machine. See docs/benchmarks.md, "Import from TVM logs".

Prints a markdown table; copy it into docs/benchmarks.md.
Run: python bench/bench_import.py [--records 100000] [--no-tvm] [--workers N]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import pathlib
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
TEAMS = [ROOT / "examples" / "team_logs" / name for name in ("team_a", "team_b", "team_c")]
BUDGET = 20000.0
TVM_CANDIDATES = ("/work/tvm-venv/bin/python", str(ROOT / ".tvm-venv" / "bin" / "python"))

TVM_LOADER = r"""
import sys, time
started = time.perf_counter()
from tvm.s_tir.meta_schedule.database import JSONDatabase
imported = time.perf_counter()
db = JSONDatabase(work_dir=sys.argv[1])
loaded = time.perf_counter()
print(f"{loaded - imported:.6f} {len(db)} {imported - started:.3f}")
"""


def synthesize(out: pathlib.Path, n_records: int, seed: int = 0) -> int:
    """Write a work_dir of `n_records` records into `out`; returns the count written."""
    decoder = json.JSONDecoder()
    workload_lines: list[str] = []
    templates: list[tuple[str, str, list[float], str]] = []  # (head "[i,[trace,", rest ",target,args]]")
    for team in TEAMS:
        base = len(workload_lines)
        workload_lines += [line for line in (team / "database_workload.json").read_text().splitlines() if line.strip()]
        for line in (team / "database_tuning_record.json").read_text().splitlines():
            if not line.strip():
                continue
            comma = line.index(",")
            index = int(line[1:comma]) + base
            start = comma + 2  # after "[i,["
            _, end = decoder.raw_decode(line, start)
            run_secs, end2 = decoder.raw_decode(line, end + 1)
            templates.append((f"[{index},[{line[start:end]},", line[end2:], list(run_secs), ""))
    rng = random.Random(seed)
    out.mkdir(parents=True, exist_ok=True)
    (out / "database_workload.json").write_text("\n".join(workload_lines) + "\n")
    with open(out / "database_tuning_record.json", "w") as handle:
        for i in range(n_records):
            head, tail, run_secs, _ = templates[i % len(templates)]
            if i >= len(templates):
                scale = 1.0 + rng.uniform(-0.05, 0.05)
                run_secs = [x if x >= 1e10 else x * scale for x in run_secs]
            handle.write(head + "[" + ",".join("%.20g" % x for x in run_secs) + "]" + tail + "\n")
    return n_records


def _cpu() -> float:
    """CPU seconds of this process and its finished children (the parallel parsing workers):
    a figure that, unlike wall time, does not depend on what else the machine runs."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def time_msdb(work_dir: pathlib.Path, db_path: pathlib.Path, workers: int | None) -> list[tuple[float, float, str]]:
    """[(wall s, cpu s, summary)] of a first import and of the same import again."""
    from msdb.database.location import open_database
    from msdb.database.tvm_import import import_tvm

    out = []
    db = open_database(db_path, create=True)
    try:
        for _ in range(2):
            started, cpu = time.perf_counter(), _cpu()
            summary = import_tvm(db, [work_dir], workers=workers)
            out.append((time.perf_counter() - started, _cpu() - cpu, summary.line()))
    finally:
        db.close()
    return out


def find_tvm_python(explicit: str | None) -> str | None:
    if explicit:
        return explicit
    if importlib.util.find_spec("tvm") is not None:
        return sys.executable
    for candidate in TVM_CANDIDATES:
        if os.access(candidate, os.X_OK):
            return candidate
    return None


def time_tvm(python: str, work_dir: pathlib.Path, timeout: float) -> tuple[float | None, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    try:
        done = subprocess.run([python, "-c", TVM_LOADER, str(work_dir)], capture_output=True, text=True,
                              timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return None, f"TVM did not finish loading within {timeout:.0f} s"
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["?"]
        return None, f"TVM failed: {tail[0][:120]}"
    seconds, count, import_s = done.stdout.split()
    return float(seconds), f"{count} records loaded (tvm import {import_s} s, not counted)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--no-tvm", action="store_true", help="skip the TVM column")
    parser.add_argument("--tvm-python", default=None, help="an interpreter with apache-tvm 0.27")
    parser.add_argument("--tvm-timeout", type=float, default=1800.0)
    parser.add_argument("--keep", default=None, help="write the synthesized work_dir and database here")
    parser.add_argument("--workers", type=int, default=None,
                        help="parsing processes for msdb (default: msdb's choice; 1: none)")
    args = parser.parse_args()

    scratch = pathlib.Path(args.keep) if args.keep else pathlib.Path(tempfile.mkdtemp(prefix="msdb-bench-import-"))
    try:
        work_dir = scratch / "work_dir"
        db_path = scratch / "bench.sqlite"
        for stale in (db_path, scratch / "bench.sqlite-wal", scratch / "bench.sqlite-shm"):
            stale.unlink(missing_ok=True)
        n = synthesize(work_dir, args.records)
        size_mb = sum(p.stat().st_size for p in work_dir.iterdir()) / 1e6
        (first_s, first_cpu, first_line), (again_s, again_cpu, _) = time_msdb(work_dir, db_path, args.workers)
        rate = n / first_s
        rows = [
            f"Synthesized work_dir: {n} records, {size_mb:.1f} MB; {os.cpu_count()} CPUs; msdb: {first_line}",
            "",
            "| measure | wall s | records/s | CPU s | records/CPU-s | budget | verdict |",
            "|---|---|---|---|---|---|---|",
            f"| msdb import, {n} records into a new SQLite file (no --verify) | {first_s:.2f} | {rate:,.0f} | "
            f"{first_cpu:.2f} | {n / first_cpu:,.0f} | >= {BUDGET:,.0f}/s | {'ok' if rate >= BUDGET else 'UNDER'} |",
            f"| msdb re-import of the same files (all duplicates, adds nothing) | {again_s:.2f} | {n / again_s:,.0f} | "
            f"{again_cpu:.2f} | {n / again_cpu:,.0f} | | |",
        ]
        python = None if args.no_tvm else find_tvm_python(args.tvm_python)
        name = "TVM 0.27 JSONDatabase(work_dir) load of the same files"
        if python is None:
            note = "skipped (--no-tvm)" if args.no_tvm else "skipped: no TVM found (pip install apache-tvm==0.27.0.post1)"
            rows.append(f"| {name}: {note} | - | - | | | | |")
        else:
            seconds, note = time_tvm(python, work_dir, args.tvm_timeout)
            if seconds is None:
                rows.append(f"| {name}: {note} | > {args.tvm_timeout:.0f} | < {n / args.tvm_timeout:,.0f} | | | | |")
                rows.append(f"| ratio TVM load / msdb import | > {args.tvm_timeout / first_s:.1f}x | | | | > 1 | ok |")
            else:
                rows.append(f"| {name} ({note}) | {seconds:.2f} | {n / seconds:,.0f} | | | | |")
                rows.append(f"| ratio TVM load / msdb import | {seconds / first_s:.1f}x | | | | > 1 | "
                            f"{'ok' if seconds > first_s else 'OVER'} |")
        print("\n".join(rows))
    finally:
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
