"""Budgets of the hub (docs/benchmarks.md, "Hub"; docs/architecture.md, "Hub"), over loopback:
- `msdb pull` of 100k records >= 10k records/s into an empty database; a no-op pull < 1 s;
- with 1M records served, the workload page and the canned best-record query p95 < 100 ms (the
  page's first view, which computes the tuning curves of a large workload, is reported apart).

Records are synthesized from the bundled team logs (examples/team_logs, imported with msdb's
importer): their 384 records copied with run times scaled by a per-copy factor, so every copy
is a distinct measurement for dedup, with real traces. The pull hub is a `msdb publish`
directory served by `msdb serve` in a subprocess; the 1M-record hub is the live database file
served by `msdb serve` (publishing 4 GB would only time `VACUUM INTO`).

On a machine with fewer free cores than the two processes need, the wall-clock pull rate
includes the server's time: the note gives the puller's own rate per CPU second too.

Prints a markdown table. Run: python bench/bench_hub.py [--pull-records N] [--served-records M] [--dir DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import shutil
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Iterator

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import row  # noqa: E402

import msdb  # noqa: E402
from msdb.hub.publish import publish  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TEAM_LOGS = ROOT / "examples" / "team_logs"


def team_db(path: Path) -> Path:
    for team in ("team_a", "team_b", "team_c"):
        msdb.import_logs(str(path), [TEAM_LOGS / team], model=f"model_{team}")
    return path


def grow(path: Path, records: int) -> int:
    """Add copies of the first 384 records that did not fail until `path` holds about `records`;
    the count. Each copy's run time is scaled a little, so that copies are distinct records; a
    failed run (TVM's 1e10 mark) is not copied: scaled past the mark, a pull's admission would
    rightly refuse it."""
    with contextlib.closing(sqlite3.connect(path)) as conn:
        have = conn.execute("SELECT count(*) FROM tuning_record").fetchone()[0]
        kept = "r.id <= 384 AND r.mean_run_secs < 1e10"
        base = int(conn.execute(f"SELECT count(*) FROM tuning_record r WHERE {kept}").fetchone()[0])
        copies = max(0, math.ceil((records - have) / base))
        step = 10_000
        for start in range(1, copies + 1, step):
            stop = min(copies, start + step - 1)
            offset = int(conn.execute("SELECT coalesce(max(id), 0) FROM tuning_record").fetchone()[0])
            conn.execute(f"""
                WITH RECURSIVE n(i) AS (SELECT {start} UNION ALL SELECT i + 1 FROM n WHERE i < {stop})
                INSERT INTO tuning_record (workload_id, target_id, source_id, trace, trace_hash, run_secs,
                                           mean_run_secs, is_valid, args_info)
                SELECT workload_id, target_id, source_id, trace, trace_hash,
                       json_array(mean_run_secs * (1 + (i + {offset}) * 1e-7)),
                       mean_run_secs * (1 + (i + {offset}) * 1e-7), is_valid, args_info
                FROM n, tuning_record r WHERE {kept} ORDER BY i, r.id""")
            conn.commit()
        return int(conn.execute("SELECT count(*) FROM tuning_record").fetchone()[0])


def free_port() -> int:
    with contextlib.closing(socket.socket()) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def served(path: Path, log: Path) -> Iterator[str]:
    port = free_port()
    with open(log, "w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "msdb.cli.main", "serve", str(path), "--port", str(port)],
                                stdout=subprocess.DEVNULL, stderr=err, cwd=ROOT)
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + 300
        while True:
            try:
                urllib.request.urlopen(url + "-/versions.json", timeout=5).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"msdb serve did not start: {log.read_text()}") from None
                time.sleep(0.05)
        yield url
    finally:
        proc.terminate()
        proc.wait(30)


def p95(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pull-records", type=int, default=100_000)
    parser.add_argument("--served-records", type=int, default=1_000_000)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--dir", type=Path, default=None, help="work folder (default: a temporary one, removed)")
    args = parser.parse_args()
    from msdb.hub.pull import pull

    work = Path(tempfile.mkdtemp(prefix="bench_hub-", dir=args.dir))
    rows = []
    try:
        hub_db = team_db(work / "hub.sqlite")
        count = grow(hub_db, args.pull_records)
        publish(hub_db, work / "hub")
        with served(work / "hub", work / "serve.log") as url:
            started, cpu = time.perf_counter(), time.process_time()
            summary = pull(url, work / "pulled.sqlite")
            seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
            assert summary.records_new == count, summary.line()
            rows.append(row(f"pull {count} records (empty DB)", count / seconds, "records/s", None,
                            f"{seconds:.2f} s, {summary.pages} pages; budget >= 10000 records/s: "
                            f"{'ok' if count / seconds >= 10_000 else 'UNDER'}; the puller alone: "
                            f"{count / cpu:.0f} records per CPU second (the server shares the machine's cores)"))
            noop = []
            for _ in range(5):
                started = time.perf_counter()
                again = pull(url, work / "pulled.sqlite")
                noop.append(time.perf_counter() - started)
                assert again.records_read == 0
            rows.append(row("no-op pull (median of 5)", statistics.median(noop), "s", 1.0))
        (work / "pulled.sqlite").unlink()
        shutil.rmtree(work / "hub")
        count = grow(hub_db, args.served_records)
        with contextlib.closing(sqlite3.connect(hub_db)) as conn:
            hashes = [r[0] for r in conn.execute("SELECT shash FROM workload ORDER BY id")]
        with served(hub_db, work / "serve-big.log") as url:
            database = hub_db.stem
            samples = []
            for i in range(args.requests + 10):
                query = urllib.parse.urlencode({"shash": hashes[i % len(hashes)], "target_kind": "llvm",
                                                "_shape": "array"})
                started = time.perf_counter()
                with urllib.request.urlopen(f"{url}{database}/best_record.json?{query}", timeout=30) as response:
                    body = json.load(response)
                elapsed = time.perf_counter() - started
                assert body and body[0]["shash"] == hashes[i % len(hashes)], body
                if i >= 10:  # warm-up
                    samples.append(elapsed)
            rows.append(row(f"canned best_record p95 ({count} records served)", p95(samples) * 1e3, "ms", 100.0,
                            f"median {statistics.median(samples) * 1e3:.1f} ms over {len(samples)} requests"))
            firsts, pages = [], []
            for i in range(args.requests + len(hashes)):
                started = time.perf_counter()
                with urllib.request.urlopen(f"{url}-/msdb/{database}/workload/{hashes[i % len(hashes)]}",
                                            timeout=120) as response:
                    page = response.read()
                elapsed = time.perf_counter() - started
                assert b"<svg" in page
                (firsts if i < len(hashes) else pages).append(elapsed)
            rows.append(row(f"workload page p95 ({count} records served)", p95(pages) * 1e3, "ms", 100.0,
                            f"median {statistics.median(pages) * 1e3:.1f} ms over {len(pages)} requests; first view "
                            f"of each of the {len(hashes)} workloads (curves computed): max {max(firsts):.2f} s"))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("| what | value | budget | verdict | note |")
    print("|---|---|---|---|---|")
    for line in rows:
        print(line)
    print(f"\n(loopback, {os.cpu_count()} CPUs visible, load average {os.getloadavg()[0]:.2f})")


if __name__ == "__main__":
    main()
