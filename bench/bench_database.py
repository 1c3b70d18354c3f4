"""Budgets of the database layer (docs/benchmarks.md, "Databases"): a SQLite database of
1M records over 1,000 workloads and 3 targets opens in < 200 ms, answers query_tuning_record
in < 1 ms (median) and takes bulk commits at >= 20k records/s; and the same data in TVM's JSON
layout (msdb's JSONDatabase) for comparison.

Records: 1,000 GMM workloads (real msdb IR), the real TVM 0.27 traces of tests/data/fixtures
round-robin, 5% failed runs, seeded run times; committed in batches of --batch records (one
transaction each, as an import). The CPU-time rate and the load average are printed beside the
wall-clock rate, which depends on the machine's load.

Prints a markdown table; copy it into docs/benchmarks.md.
Run: python bench/bench_database.py [--records N] [--workloads W] [--batch B] [--dir DIR] [--no-json]
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator

sys.path.insert(0, os.path.dirname(__file__))

from _timing import fresh_process_seconds, row  # noqa: E402

from msdb.database import JSONDatabase, SQLiteDatabase  # noqa: E402
from msdb.interop.tvm.grammar import LineParser  # noqa: E402
from msdb.ir import zoo  # noqa: E402
from msdb.ir.function import IRModule  # noqa: E402
from msdb.records import Target, TuningRecord, Workload  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "data" / "fixtures" / "tvm-0.27"
TARGETS = (Target("llvm -mcpu=skylake-avx512 -num-cores=4"), Target("llvm -mcpu=znver3 -num-cores=8"),
           Target("cuda -arch=sm_80"))


def shapes(count: int) -> list[tuple[int, int, int]]:
    """`count` distinct small matmul shapes."""
    side = max(2, round(count ** (1 / 3)) + 1)
    out = [(16 * (1 + a), 16 * (1 + b), 16 * (1 + c)) for a in range(side) for b in range(side) for c in range(side)]
    return out[:count]


def bench_workload(shape: tuple[int, int, int]) -> IRModule:
    """The benchmark's workload of one shape: TVM's GMM (a batch-1 matmul), which the fixture
    logs' GMM records were tuned on, so their traces belong to it."""
    return zoo.build("GMM", 1, *shape)


def real_traces() -> list[str]:
    """Trace JSON text of every record in the fixture logs that fits the benchmark's matmul
    workloads (block names and loops): a database admits no record whose trace cannot belong to
    its workload (msdb/database/admission.py), so the others cannot be committed to them."""
    parser = LineParser()
    gmm = Workload(bench_workload((16, 16, 16)))
    traces = []
    for team in sorted(FIXTURES.iterdir()):
        workloads = [gmm] * len((team / "database_workload.json").read_text().splitlines())
        for line in (team / "database_tuning_record.json").read_text().splitlines():
            fields = parser.record(line, workloads, "database_workload.json")
            if isinstance(fields, tuple):
                traces.append(fields[2])
    assert traces, "no fixture trace fits the benchmark's GMM"
    return traces


def synthesize(workloads: list[Workload], traces: list[str], start: int, count: int, rng: random.Random) -> list[TuningRecord]:
    out = []
    n_w = len(workloads)
    for r in range(start, start + count):
        run = [1e10] if rng.random() < 0.05 else [rng.uniform(1e-5, 1e-2)]
        out.append(TuningRecord(traces[r % len(traces)], workloads[r % n_w], run, TARGETS[(r // n_w) % 3]))
    return out


def row_at_least(name: str, value: float, unit: str, budget: float, note: str = "") -> str:
    """A table row for a budget that is a floor (throughput), where `_timing.row` checks ceilings."""
    verdict = "ok" if value >= budget else "UNDER"
    return f"| {name} | {value:.3f} {unit} | >= {budget:g} {unit} | {verdict} | {note} |"


def batches(workloads: list[Workload], traces: list[str], records: int, batch: int) -> Iterator[list[TuningRecord]]:
    """The benchmark's records in bulk-commit batches; the same records on every call (seeded),
    so each database gets them without holding all of them in memory."""
    rng = random.Random(0)
    for start in range(0, records, batch):
        yield synthesize(workloads, traces, start, min(batch, records - start), rng)


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1e3


def bench_queries(db, modules, rng: random.Random, repeat: int) -> tuple[float, float]:
    """(median ms with the module's hashes already known, median ms including hashing a
    module object the database has not seen)."""
    warm = []
    for _ in range(repeat):
        mod = modules[rng.randrange(len(modules))]
        target = TARGETS[rng.randrange(3)]
        started = time.perf_counter()
        found = db.query_tuning_record(mod, target)
        warm.append(time.perf_counter() - started)
        assert found is not None and found.target == target
    cold = []
    for i in range(min(repeat, len(modules))):
        fresh = bench_workload(SHAPES[i])  # a new object: its hashes are not cached
        started = time.perf_counter()
        found = db.query_tuning_record(fresh, TARGETS[i % 3])
        cold.append(time.perf_counter() - started)
        assert found is not None
    return median_ms(warm), median_ms(cold)


SHAPES: list[tuple[int, int, int]] = []


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--workloads", type=int, default=1000)
    parser.add_argument("--queries", type=int, default=2000)
    parser.add_argument("--batch", type=int, default=50_000, help="records per bulk commit (one transaction)")
    parser.add_argument("--dir", type=Path, default=None, help="where to write (default: a temporary folder)")
    parser.add_argument("--no-json", action="store_true", help="skip the JSONDatabase comparison")
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    rng = random.Random(0)
    work = args.dir or Path(tempfile.mkdtemp(prefix="msdb-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    db_path = work / "bench.db"
    for suffix in ("", "-wal", "-shm"):
        Path(str(db_path) + suffix).unlink(missing_ok=True)
    json_dir = work / "json"
    shutil.rmtree(json_dir, ignore_errors=True)

    SHAPES.extend(shapes(args.workloads))
    traces = real_traces()
    rows = ["| measure | value | budget | verdict | note |", "|---|---|---|---|---|"]
    notes = [f"{args.records:,} records, {args.workloads:,} workloads, {len(TARGETS)} targets, "
             f"{len(traces)} real traces (mean {statistics.mean(map(len, traces)):.0f} B), "
             f"{args.batch:,} records per bulk commit",
             f"load average at start {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"]

    # ---- SQLite: workloads, then bulk commits ----
    db = SQLiteDatabase(db_path)
    started = time.perf_counter()
    workloads = [db.commit_workload(bench_workload(s)) for s in SHAPES]
    workload_s = time.perf_counter() - started
    os.sync()  # start with no one else's dirty pages queued for the disk
    sqlite_wall = sqlite_cpu = 0.0
    for chunk in batches(workloads, traces, args.records, args.batch):
        wall, cpu = time.perf_counter(), time.process_time()
        db.commit_tuning_records(chunk)
        sqlite_wall += time.perf_counter() - wall
        sqlite_cpu += time.process_time() - cpu
        del chunk
    db.close()
    notes.append(f"load average after the commits {os.getloadavg()[0]:.1f}")

    # ---- JSON: the same records, after the SQLite phase (its appends would otherwise share
    # the disk with SQLite's checkpoints) ----
    json_wall = 0.0
    if not args.no_json:
        json_db = JSONDatabase(work_dir=json_dir)
        for w in workloads:
            json_db.commit_workload(w)
        os.sync()
        for chunk in batches(workloads, traces, args.records, args.batch):
            wall = time.perf_counter()
            json_db.commit_tuning_records(chunk)
            json_wall += time.perf_counter() - wall
            del chunk
        del json_db
    gc.collect()
    size = sum(Path(str(db_path) + s).stat().st_size for s in ("", "-wal") if Path(str(db_path) + s).exists())
    rows.append(row("commit_workload (SQLite)", workload_s / args.workloads * 1e3, "ms", None, "hash x3, TVMScript, IR blob, FLOPs"))
    rows.append(row_at_least("bulk commit wall (SQLite)", args.records / sqlite_wall / 1e3, "k rec/s", 20,
                             "wall clock"))
    rows.append(row("bulk commit CPU time (SQLite)", args.records / sqlite_cpu / 1e3, "k rec/s", None,
                    "records per second of this process's CPU time (shared machine)"))
    rows.append(row("file size per record (SQLite)", size / args.records, "B", None, f"{size / 1e9:.2f} GB in all"))

    # ---- SQLite: open and query ----
    opens = []
    for _ in range(20):
        started = time.perf_counter()
        probe = SQLiteDatabase(db_path)
        opens.append(time.perf_counter() - started)
        probe.close()
    rows.append(row("open (SQLite, in process)", median_ms(opens), "ms", 200))
    code = f"from msdb.database import SQLiteDatabase; SQLiteDatabase({str(db_path)!r}).close()"
    rows.append(row("import msdb + SQLAlchemy + open (fresh process)", fresh_process_seconds(code, repeat=3) * 1e3,
                    "ms", None, "includes interpreter-level imports"))
    db = SQLiteDatabase(db_path)
    modules = [bench_workload(s) for s in SHAPES]
    for mod in modules:  # hash each query module once, as a compile flow does
        Workload(mod).hashes
    warm, cold = bench_queries(db, modules, rng, args.queries)
    rows.append(row("query_tuning_record median (SQLite)", warm, "ms", 1, "module hashes known"))
    rows.append(row("query_tuning_record median incl. hashing (SQLite)", cold, "ms", None, "a module object never seen"))
    any_target = []
    for _ in range(args.queries):
        mod = modules[rng.randrange(len(modules))]
        started = time.perf_counter()
        db.query_tuning_record(mod, None)
        any_target.append(time.perf_counter() - started)
    rows.append(row("query_tuning_record median, target=None (SQLite)", median_ms(any_target), "ms", None, "3 targets merged"))
    relatives = []
    for _ in range(min(args.queries, 200)):
        mod = modules[rng.randrange(len(modules))]
        target = TARGETS[rng.randrange(3)]
        started = time.perf_counter()
        found = db.relatives(mod, target)
        relatives.append(time.perf_counter() - started)
        assert found, "every matmul shape is a relative of every other"
    rows.append(row("relatives median (SQLite)", median_ms(relatives), "ms", 5,
                    f"the {args.workloads:,} matmul shapes are one family, each with its best record "
                    "on the target; first 50"))
    db.close()

    # ---- JSON comparison ----
    if not args.no_json:
        json_size = sum(p.stat().st_size for p in json_dir.iterdir())
        rows.append(row("bulk commit wall (JSON)", args.records / json_wall / 1e3, "k rec/s", None, "appends under flock"))
        rows.append(row("file size per record (JSON)", json_size / args.records, "B", None))
        started = time.perf_counter()
        loaded = JSONDatabase(work_dir=json_dir)
        load_s = time.perf_counter() - started
        assert len(loaded) == args.records and not loaded.load_errors
        rows.append(row("load (JSON)", load_s * 1e3, "ms", None, "vs SQLite open above"))
        warm, cold = bench_queries(loaded, modules, rng, args.queries)
        rows.append(row("query_tuning_record median (JSON)", warm, "ms", None, "module hashes known"))
        rows.append(row("query_tuning_record median incl. hashing (JSON)", cold, "ms", None))
    print("\n".join(rows))
    print()
    print("; ".join(notes))
    if args.dir is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
