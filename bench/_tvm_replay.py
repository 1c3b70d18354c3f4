"""Measure a fixture trace with real TVM 0.27 (run by bench_codegen.py with TVM's own Python,
e.g. /work/tvm-venv/bin/python; msdb never imports TVM).

    python _tvm_replay.py <team dir> <workload index> <record rank> <repeat> <threads> [mcpu]

Prints one JSON line: the record's recorded run_secs and TVM's time_evaluator results
(number=3, min_repeat_ms=100) for the kernel TVM builds from the replayed trace.
"""

from __future__ import annotations

import json
import os
import sys


def main() -> None:
    folder, index, rank, repeat, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    mcpu = sys.argv[6] if len(sys.argv) > 6 else None
    os.environ["TVM_NUM_THREADS"] = threads
    import numpy as np
    import tvm
    from tvm import s_tir
    from tvm.s_tir import meta_schedule as ms

    db = ms.database.JSONDatabase(path_workload=f"{folder}/database_workload.json",
                                  path_tuning_record=f"{folder}/database_tuning_record.json")
    # the same order as msdb's bench: records of workload `index` (file order) by mean run_secs
    lines = [json.loads(line) for line in open(f"{folder}/database_tuning_record.json") if line.strip()]
    mine = sorted((r for r in lines if r[0] == index), key=lambda r: sum(r[1][1]) / len(r[1][1]))
    wanted = mine[rank][1][1]
    records = [r for r in db.get_all_tuning_records()
               if r.run_secs and [float(x) for x in r.run_secs] == [float(x) for x in wanted]]
    record = records[0]
    sch = s_tir.Schedule(record.workload.mod)
    record.trace.apply_to_schedule(sch, remove_postproc=False)
    config = {"kind": "llvm", "num-cores": 1, **({"mcpu": mcpu} if mcpu else {})}
    lib = tvm.compile(sch.mod, target=tvm.target.Target(config))
    dev = tvm.cpu()
    rng = np.random.default_rng(0)
    args = [tvm.runtime.tensor(rng.random([int(d) for d in info.shape]).astype(str(info.dtype)), dev)
            for info in record.args_info]
    f = lib.mod.time_evaluator("main", dev, number=3, repeat=repeat, min_repeat_ms=100)
    result = f(*args)
    print(json.dumps({"recorded": [float(x) for x in record.run_secs], "results": [float(x) for x in result.results]}))


if __name__ == "__main__":
    main()
