"""Budgets of TVM using msdb as its database, measured against TVM 0.27's own JSONDatabase over
the same records in the same run (docs/benchmarks.md, "TVM uses msdb"):

1. compile: TVM's `compile_relax` of ResNet-18 (64x64 images) over a 1M-record msdb database:
   under 1 s of database time in all;
2. tuning: TVM's `tune_tir` with msdb as its database: at most 5 ms of database time per trial.

Database time is what TVM spends inside the database: each database is wrapped in a timing TVM
`PyDatabase`, JSONDatabase's load timed on its own. The records are bench/bench_database.py's plus
the TVM-tuned ResNet-18 conv2d record of tests/data/tvm_resnet_conv_workdir.

Run with TVM's venv, pinned: taskset -c 1 .tvm-venv/bin/python bench/bench_tvm_database.py
[--records N] [--dir DIR] [--trials T] [--json-records N] [--skip-compile] [--skip-tune]
Prints a markdown table; copy it into docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _timing import cpu_line, row  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
LLVM = {"kind": "llvm", "num-cores": 1}
#: The work_dir of TVM's tuned ResNet-18 conv2d record (tests/tuner/compile/make_tvm_conv_record.py made it).
SHIPPED = ROOT / "tests" / "data" / "tvm_resnet_conv_workdir"
#: The ResNet-18 of that record: 64x64 images, width 64, 10 classes, seed 0 (msdb.model.zoo).
RESNET = {"image": 64, "width": 64, "num_classes": 10, "seed": 0}


def timed_database(inner: Any) -> Any:
    """`inner` (a TVM database) behind a PyDatabase that times every call TVM makes."""
    from tvm.ir.utils import derived_object
    from tvm.s_tir.meta_schedule.database import PyDatabase

    @derived_object
    class Timed(PyDatabase):
        def __init__(self, inner: Any) -> None:
            self.inner = inner
            self.seconds = 0.0
            self.calls: Counter[str] = Counter()
            self.by_call: Counter[str] = Counter()

        def _call(self, name: str, *args: Any) -> Any:
            started = time.perf_counter()
            try:
                return getattr(self.inner, name)(*args)
            finally:
                spent = time.perf_counter() - started
                self.seconds += spent
                self.calls[name] += 1
                self.by_call[name] += spent

        def has_workload(self, mod: Any) -> bool:
            return self._call("has_workload", mod)

        def commit_workload(self, mod: Any) -> Any:
            return self._call("commit_workload", mod)

        def commit_tuning_record(self, record: Any) -> None:
            self._call("commit_tuning_record", record)

        def get_top_k(self, workload: Any, top_k: int) -> Any:
            return self._call("get_top_k", workload, top_k)

        def get_all_tuning_records(self) -> Any:
            return self._call("get_all_tuning_records")

        def query_tuning_record(self, mod: Any, target: Any, workload_name: Any = None) -> Any:
            return self._call("query_tuning_record", mod, target, workload_name)

        def query_schedule(self, mod: Any, target: Any, workload_name: Any = None) -> Any:
            return self._call("query_schedule", mod, target, workload_name)

        def query_ir_module(self, mod: Any, target: Any, workload_name: Any = None) -> Any:
            return self._call("query_ir_module", mod, target, workload_name)

        def __len__(self) -> int:
            return self._call("__len__")

    return Timed(inner)


def build_database(path: Path, records: int, json_dir: Path | None, json_records: int) -> None:
    """bench/bench_database.py's records into `path` (skipped when it holds them already), the
    shipped ResNet-18 conv2d record imported, and the first `json_records` of them in TVM's
    layout at `json_dir`."""
    import bench_database as B

    import msdb
    from msdb.database import JSONDatabase, SQLiteDatabase

    B.SHAPES.extend(B.shapes(1000))
    traces = B.real_traces()
    if not path.exists():
        db = SQLiteDatabase(path)
        workloads = [db.commit_workload(B.bench_workload(s)) for s in B.SHAPES]
        for chunk in B.batches(workloads, traces, records, 50_000):
            db.commit_tuning_records(chunk)
        db.close()
        msdb.import_logs(str(path), [SHIPPED])
    if json_dir is not None and not (json_dir / "database_tuning_record.json").exists():
        json_db = JSONDatabase(work_dir=json_dir)
        workloads = [json_db.commit_workload(B.bench_workload(s)) for s in B.SHAPES]
        for chunk in B.batches(workloads, traces, json_records, 50_000):  # the same records (seeded)
            json_db.commit_tuning_records(chunk)
        for record in JSONDatabase(work_dir=SHIPPED).get_all_tuning_records():
            json_db.commit_tuning_record(record.with_workload(json_db.commit_workload(record.workload)))


def bench_compile(path: Path, json_dir: Path | None, rows: list[str], notes: list[str]) -> None:
    import tvm
    from tvm.relax.frontend.onnx import from_onnx
    from tvm.s_tir import meta_schedule as ms

    from msdb.model.zoo import resnet
    from msdb.tvm import as_tvm_database

    target = tvm.target.Target(LLVM)
    proto = resnet(18, **RESNET)
    started = time.perf_counter()
    opened = as_tvm_database(path, read_only=True)
    open_s = time.perf_counter() - started
    msdb_db = timed_database(opened)
    started = time.perf_counter()
    ms.relax_integration.compile_relax(msdb_db, from_onnx(proto), target, None)
    wall = time.perf_counter() - started
    total = open_s + msdb_db.seconds
    rows.append(row("compile_relax ResNet-18: database time (msdb, 1M records)", total, "s", 1.0,
                    f"open {open_s * 1e3:.0f} ms + {sum(msdb_db.calls.values())} calls "
                    f"({dict(msdb_db.calls)}); compile wall {wall:.1f} s"))
    opened.close()
    if json_dir is None:
        return
    started = time.perf_counter()
    json_db = ms.database.JSONDatabase(work_dir=str(json_dir), allow_missing=False)
    load_s = time.perf_counter() - started
    count = len(json_db)
    timed = timed_database(json_db)
    started = time.perf_counter()
    ms.relax_integration.compile_relax(timed, from_onnx(proto), target, None)
    wall = time.perf_counter() - started
    rows.append(row(f"compile_relax ResNet-18: database time (TVM JSONDatabase, {count:,} records)",
                    load_s + timed.seconds, "s", None,
                    f"load {load_s:.1f} s ({count / load_s:,.0f} records/s) + queries {timed.seconds * 1e3:.0f} ms; "
                    f"compile wall {wall:.1f} s"))


def gmm_module() -> Any:
    """The module tuned: a batch-1 32x32x32 matmul (msdb's zoo GMM), as TVM reads it from
    msdb's encoding of it (a TVM `IRModule`)."""
    from tvm.s_tir.meta_schedule.database import Workload as TVMWorkload

    from msdb.interop.tvm.encode import encode_workload
    from msdb.ir import zoo

    return TVMWorkload.from_json(["0", encode_workload(zoo.build("GMM", 1, 32, 32, 32))]).mod


def bench_tune(work: Path, trials: int, rows: list[str]) -> None:
    import tvm
    from tvm.s_tir import meta_schedule as ms

    import msdb
    from msdb.tvm import as_tvm_database

    target = tvm.target.Target(LLVM)
    per_iter = min(trials, 16)
    for name in ("msdb", "JSONDatabase"):
        scratch = Path(tempfile.mkdtemp(prefix=f"tvm-tune-{name}-", dir=work))
        if name == "msdb":
            msdb.open_database(scratch / "tune.sqlite", create=True).close()
            inner = as_tvm_database(scratch / "tune.sqlite")
        else:
            (scratch / "json").mkdir()
            inner = ms.database.JSONDatabase(work_dir=str(scratch / "json"))
        database = timed_database(inner)
        started = time.perf_counter()
        ms.tir_integration.tune_tir(
            gmm_module(), target, str(scratch / "work"), trials, num_trials_per_iter=per_iter,
            database=database, cost_model="random", num_tuning_cores=1, seed=1,
            builder=ms.builder.LocalBuilder(max_workers=1, timeout_sec=300),
            runner=ms.runner.LocalRunner(timeout_sec=120),
            strategy=ms.search_strategy.EvolutionarySearch(population_size=64, init_min_unmeasured=16,
                                                           genetic_num_iters=2))
        wall = time.perf_counter() - started
        measured = database.calls["commit_tuning_record"]
        rows.append(row(f"tune_tir GMM 32^3: database time per trial ({name})", database.seconds / max(measured, 1) * 1e3,
                        "ms", 5.0 if name == "msdb" else None,
                        f"{measured} trials; calls and ms in all: "
                        + ", ".join(f"{k} {database.calls[k]} x = {v * 1e3:.0f}" for k, v in database.by_call.items())
                        + f"; tuning wall {wall:.0f} s"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--json-records", type=int, default=None,
                        help="records in TVM's JSONDatabase (default: as many as msdb's; its load replays each)")
    parser.add_argument("--dir", type=Path, default=None, help="where to write (kept between runs)")
    parser.add_argument("--trials", type=int, default=32)
    parser.add_argument("--skip-compile", action="store_true")
    parser.add_argument("--skip-tune", action="store_true")
    parser.add_argument("--no-json", action="store_true", help="no JSONDatabase for the compile budget")
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    import tvm

    work = args.dir or Path(tempfile.mkdtemp(prefix="msdb-bench-tvm-"))
    work.mkdir(parents=True, exist_ok=True)
    rows = ["| measure | value | budget | verdict | note |", "|---|---|---|---|---|"]
    notes = [cpu_line(), f"TVM {tvm.__version__}; load average at start {os.getloadavg()[0]:.1f} on "
             f"{os.cpu_count()} cores"]
    if not args.skip_compile:
        json_dir = None if args.no_json else work / "json"
        build_database(work / "bench.sqlite", args.records, json_dir, args.json_records or args.records)
        bench_compile(work / "bench.sqlite", json_dir, rows, notes)
    if not args.skip_tune:
        bench_tune(work, args.trials, rows)
    notes.append(f"load average at end {os.getloadavg()[0]:.1f}")
    print("\n".join(rows))
    print()
    for note in notes:
        print(f"- {note}")


if __name__ == "__main__":
    main()
