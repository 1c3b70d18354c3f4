"""Tune a TVMScript workload with real TVM 0.27's MetaSchedule (run by bench_tune.py with TVM's
own Python; msdb never imports TVM).

    python _tvm_tune.py <workload.json> <trials> <per_iter> <work_dir> <seed> <mcpu>

The workload is TVM's own JSON of the module, as msdb encodes it for TVM's logs.

Runs under whatever CPU affinity the caller set (bench_tune.py: one core), one tuning core, for
`-mcpu=<mcpu>` (the host's CPU as llvmlite names it: TVM's plain `llvm` target builds for the
generic x86-64 CPU, SSE2 only, while msdb builds for the host).
TVM's LocalBuilder and LocalRunner get `timeout_sec=120`: each fresh worker imports
`tvm.s_tir.tensor_intrin` (about 28 s on a 2-core host), so with the default 30 s the first
builds and runs of every worker fail and TVM's figures come out too low (issue 29).
Prints one JSON line: wall seconds, trials measured, best mean run seconds.
"""

from __future__ import annotations

import json
import sys
import time


def main() -> None:
    script, trials, per_iter, work_dir, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
    mcpu = sys.argv[6]
    import tvm
    from tvm.s_tir import meta_schedule as ms

    mod = tvm.ir.load_json(open(script).read())
    target = tvm.target.Target({"kind": "llvm", "num-cores": 1, "mcpu": mcpu})
    started = time.perf_counter()
    database = ms.tune_tir(mod, target, work_dir, max_trials_global=trials, num_trials_per_iter=per_iter,
                           num_tuning_cores=1, seed=seed,
                           builder=ms.builder.LocalBuilder(max_workers=1, timeout_sec=120),
                           runner=ms.runner.LocalRunner(timeout_sec=120))
    wall = time.perf_counter() - started
    records = database.get_all_tuning_records()
    means = [sum(float(x) for x in r.run_secs) / len(r.run_secs) for r in records if r.run_secs]
    valid = [m for m in means if m < 1e9]
    print(json.dumps({"wall": wall, "trials": len(records), "failed": len(means) - len(valid),
                      "best": min(valid) if valid else None}))


if __name__ == "__main__":
    main()
