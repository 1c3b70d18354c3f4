"""Budgets of PostgreSQL as msdb's team server (docs/benchmarks.md, "PostgreSQL"): bulk commits at
>= 20k records/s and a top-1 query (`get_top_k(workload, 1, target)`) in < 2 ms (median) at
1M records, and EXPLAIN showing an index scan on `ix_tuning_record_top_k` for top-k.

The records are bench_database.py's (1,000 real GMM workloads, real TVM 0.27 traces, 3
targets, 5% failures, seeded run times), committed in batches of --batch records through
`SQLDatabase.commit_tuning_records` (one transaction each, psycopg 3 executemany).

The server: --url of an existing (empty) database, else a throwaway cluster started like the
tests' (tests/postgres_server.py: Debian's postgresql, an unprivileged user, a loopback port)
with PostgreSQL's default durability (fsync on, synchronous commit) unless --fast.

Prints a markdown table; copy it into docs/benchmarks.md.
Run: python bench/bench_postgres.py [--records N] [--workloads W] [--batch B] [--url URL] [--fast]
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from _timing import row  # noqa: E402
from bench_database import SHAPES, TARGETS, batches, bench_workload, median_ms, real_traces, row_at_least, shapes  # noqa: E402
from postgres_server import PostgresServer  # noqa: E402

from msdb.database import SQLDatabase  # noqa: E402
from msdb.ir import zoo  # noqa: E402
from msdb.records import Workload  # noqa: E402


def top_k_plan(db: SQLDatabase, workload_id: int, target_id: int) -> list[str]:
    """EXPLAIN of the top-1 statement for one (workload, target) pair."""
    with db.engine.connect() as conn:
        compiled = SQLDatabase.top_k_statement(1).compile(dialect=conn.dialect)
        params = compiled.construct_params({"k": 1, "w0": workload_id, "t0": target_id})
        return list(conn.exec_driver_sql("EXPLAIN " + compiled.string, params).scalars())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--workloads", type=int, default=1000)
    parser.add_argument("--queries", type=int, default=2000)
    parser.add_argument("--batch", type=int, default=50_000, help="records per bulk commit (one transaction)")
    parser.add_argument("--url", default=None, help="an empty PostgreSQL database (default: a throwaway server)")
    parser.add_argument("--fast", action="store_true", help="throwaway server with fsync and synchronous commit off")
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    server = None
    url = args.url
    if url is None:
        server = PostgresServer.start(durable=not args.fast)
        if server is None:
            sys.exit("no PostgreSQL binaries (initdb): apt-get install postgresql, or pass --url")
        url = server.url("bench")
    try:
        run(args, url, durable=not args.fast if server is not None else None)
    finally:
        if server is not None:
            server.stop()


def run(args: argparse.Namespace, url: str, durable: bool | None) -> None:
    rng = random.Random(0)
    SHAPES.extend(shapes(args.workloads))
    traces = real_traces()
    rows = ["| measure | value | budget | verdict | note |", "|---|---|---|---|---|"]
    server_note = ("--url server" if durable is None else
                   "throwaway local server, " + ("default durability (fsync on)" if durable else "fsync off"))
    notes = [f"{args.records:,} records, {args.workloads:,} workloads, {len(TARGETS)} targets, "
             f"{len(traces)} real traces, {args.batch:,} records per bulk commit; PostgreSQL: {server_note}",
             f"load average at start {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"]

    db = SQLDatabase(url)
    started = time.perf_counter()
    workloads = [db.commit_workload(bench_workload(s)) for s in SHAPES]
    workload_s = time.perf_counter() - started
    wall_total = cpu_total = 0.0
    for chunk in batches(workloads, traces, args.records, args.batch):
        wall, cpu = time.perf_counter(), time.process_time()
        db.commit_tuning_records(chunk)
        wall_total += time.perf_counter() - wall
        cpu_total += time.process_time() - cpu
        del chunk
    notes.append(f"load average after the commits {os.getloadavg()[0]:.1f}")
    assert len(db) == args.records
    with db.engine.begin() as conn:  # what autovacuum would do soon after a bulk load
        conn.exec_driver_sql("ANALYZE")
    rows.append(row("commit_workload (PostgreSQL)", workload_s / args.workloads * 1e3, "ms", None))
    rows.append(row_at_least("bulk commit wall (PostgreSQL)", args.records / wall_total / 1e3, "k rec/s", 20,
                             "wall clock, client and server on this machine"))
    rows.append(row("bulk commit CPU time (PostgreSQL client)", args.records / cpu_total / 1e3, "k rec/s", None,
                    "records per second of this process's CPU time"))

    modules = [bench_workload(s) for s in SHAPES]
    for mod in modules:  # hash each query module once, as a compile flow does
        Workload(mod).hashes
    samples = []
    for i in range(args.queries + 50):
        mod = modules[rng.randrange(len(modules))]
        target = TARGETS[rng.randrange(3)]
        started = time.perf_counter()
        found = db.get_top_k(mod, 1, target)
        if i >= 50:  # warm-up: the connection pool, statement caches
            samples.append(time.perf_counter() - started)
        assert len(found) == 1 and found[0].target == target
    rows.append(row("top-1 query median (PostgreSQL)", median_ms(samples), "ms", 2, "get_top_k(workload, 1, target)"))
    rows.append(row("top-1 query p95 (PostgreSQL)", statistics.quantiles(samples, n=20)[-1] * 1e3, "ms", None))
    plan = top_k_plan(db, 1, 1)
    scan = "Index Scan using ix_tuning_record_top_k" in "\n".join(plan) and not any("Sort" in p for p in plan)
    rows.append(f"| EXPLAIN top-k | {'index scan, no sort' if scan else 'NOT an index scan'} | index scan | "
                f"{'ok' if scan else 'FAILED'} | {plan[-1].strip() if plan else ''} |")
    db.close()
    print("\n".join(rows))
    print()
    print("\n".join("    " + line for line in plan))
    print()
    print("; ".join(notes))


if __name__ == "__main__":
    main()
