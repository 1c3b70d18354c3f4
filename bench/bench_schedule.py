"""Trace replay (docs/benchmarks.md, "Trace replay": replaying a real GMM trace < 20 ms median).

Replays every record of the bundled team_a log on its decoded workload (what `--verify`, the
tuner and TVM's own JSONDatabase load do per record) and prints the median per workload.

Prints a markdown table; copy it into docs/benchmarks.md.
Run: python bench/bench_schedule.py
"""

from __future__ import annotations

import json
import os
import pathlib
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))

from _timing import row  # noqa: E402

from msdb.interop.tvm.payload import decode_workload  # noqa: E402
from msdb.schedule import Schedule, Trace  # noqa: E402

TEAM_A = pathlib.Path(__file__).resolve().parents[1] / "examples" / "team_logs" / "team_a"
BUDGET_MS = 20.0


def replay_ms(mod: object, traces: list[list]) -> float:
    """Median milliseconds of one replay (a fresh Schedule, the whole trace with postprocs)."""
    samples = []
    for trace in traces:
        started = time.perf_counter()
        sch = Schedule(mod)
        Trace.from_json(trace).apply_to_schedule(sch, remove_postproc=False)
        samples.append(time.perf_counter() - started)
    return statistics.median(samples) * 1e3


def main() -> None:
    workloads = [json.loads(line) for line in (TEAM_A / "database_workload.json").read_text().splitlines() if line]
    records = [json.loads(line) for line in (TEAM_A / "database_tuning_record.json").read_text().splitlines() if line]
    rows = ["| measure | median | budget | verdict | note |", "|---|---|---|---|---|"]
    for index, (_, payload) in enumerate(workloads):
        mod = decode_workload(payload)
        traces = [r[1][0] for r in records if r[0] == index]
        replay_ms(mod, traces[:3])  # warm: imports, caches
        buffers = ",".join(b.name for b in mod.main.buffers)
        rows.append(row(f"replay of a team_a trace on workload {index} ({buffers})", replay_ms(mod, traces), "ms",
                        BUDGET_MS, f"{len(traces)} traces"))
    print("\n".join(rows))


if __name__ == "__main__":
    main()
