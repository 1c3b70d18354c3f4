"""Per-store feature extraction (budget: a few ms per candidate, so that scoring ~2000 candidates
per round of 64 measurements stays a small part of a trial).

Candidates: the bundled team logs' TVM 0.27 records replayed into post-processed schedules (GMM
128^3, `zoo.workload("C2D")`, conv1d, depthwise conv2d, the MLP layer), and the ResNet-18 layer
`zoo.build("C2D", 1, 56, 56, 64, 64, 3, 1, 1)` scheduled by hand over a grid of tile sizes. Each
module is extracted with the per-module cache off; the median and maximum per candidate are
printed.

Prints a markdown table; copy it into docs/benchmarks.md.
Run: python bench/bench_features.py
"""

from __future__ import annotations

import itertools
import os
import pathlib
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))

from _timing import row  # noqa: E402

from msdb.database.json_database import JSONDatabase  # noqa: E402
from msdb.ir import zoo  # noqa: E402
from msdb.ir.expr import const_int  # noqa: E402
from msdb.ir.function import IRModule  # noqa: E402
from msdb.schedule.schedule import Schedule  # noqa: E402
from msdb.tuner.features.per_store import PerStoreFeature  # noqa: E402
from msdb.tuner.features.store_walk import walk_function  # noqa: E402

LOGS = pathlib.Path(__file__).resolve().parents[1] / "examples" / "team_logs"
BUDGET_MS = 5.0


def logged() -> dict[str, list[IRModule]]:
    """Post-processed modules of every logged record, by workload (named after its output)."""
    out: dict[str, list[IRModule]] = {}
    for team in sorted(p.name for p in LOGS.iterdir()):
        for record in JSONDatabase(work_dir=LOGS / team).get_all_tuning_records():
            mod = record.workload.mod
            sch = Schedule(mod)
            record.trace.apply_to_schedule(sch, remove_postproc=False)
            output = mod.main.buffers[-1]
            shape = "x".join(str(const_int(d)) for d in output.shape)
            out.setdefault(f"logged {output.name} {shape}", []).append(sch.mod)
    return out


def resnet_conv() -> list[IRModule]:
    """The 56x56x64 3x3 conv2d scheduled by hand, one module per tile-size choice."""
    mod = zoo.build("C2D", 1, 56, 56, 64, 64, 3, 1, 1)
    out = []
    for th, tw, tc, tr in itertools.product([1, 2, 4, 7], [2, 4, 8], [4, 8, 16], [2, 4, 8]):
        sch = Schedule(mod, seed=0)
        conv = sch.get_block("conv2d_nhwc")
        _, h, w, co, rh, rw, rc = sch.get_loops(conv)
        h0, h1 = sch.split(h, [None, th])
        w0, w1 = sch.split(w, [None, tw])
        co0, co1 = sch.split(co, [None, tc])
        rc0, rc1 = sch.split(rc, [None, tr])
        sch.reorder(h0, w0, co0, rh, rw, rc0, h1, w1, rc1, co1)
        sch.vectorize(co1)
        sch.parallel(h0)
        sch.compute_at(sch.get_block("PadInput"), w0)
        sch.decompose_reduction(conv, rh)
        out.append(sch.mod)
    return out


def per_candidate_ms(extractor: PerStoreFeature, mods: list[IRModule]) -> list[float]:
    samples = []
    for mod in mods:
        started = time.perf_counter()
        extractor.extract_mod(mod)
        samples.append((time.perf_counter() - started) * 1e3)
    return samples


def main() -> None:
    extractor = PerStoreFeature(cache_size=0)
    workloads = logged()
    workloads["hand-scheduled C2D 1x56x56x64, 3x3"] = resnet_conv()
    rows = ["| measure | median | budget | verdict | note |", "|---|---|---|---|---|"]
    for name, mods in workloads.items():
        per_candidate_ms(extractor, mods[:5])  # imports, caches
        samples = per_candidate_ms(extractor, mods)
        loops = max(len(site.loops) for mod in mods for site in walk_function(mod.main).sites)
        note = (f"{len(mods)} schedules, {extractor.extract_mod(mods[0]).shape[0]} rows, up to {loops} loops "
                f"around a store; max {max(samples):.2f} ms")
        rows.append(row(f"features of a {name} candidate", statistics.median(samples), "ms", BUDGET_MS, note))
    print("\n".join(rows))


if __name__ == "__main__":
    main()
