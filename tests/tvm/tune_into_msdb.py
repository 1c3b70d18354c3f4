"""One TVM tuner committing into an msdb database, for tests/tvm/test_tvm_uses_msdb.py (run as
a process of its own, so that two of them can tune into one database at once):

    python -m tests.tvm.tune_into_msdb DB WORKLOAD WORK_DIR TRUTH_DIR [TRIALS]

TVM 0.27's `tune_tir` tunes WORKLOAD ("gmm" or "conv2d", small shapes) with `as_tvm_database(DB)`
as its database, LocalBuilder/LocalRunner (one worker, long timeouts: TVM's LocalBuilder imports
`tvm.s_tir.tensor_intrin` in each fresh worker, 28 s on a 2-core machine) and TVM's replay-trace
search. Every candidate TVM measures is also committed, by a measure callback and
exactly as TVM's AddToDatabase commits it, into TVM's own `JSONDatabase` at TRUTH_DIR: what TVM
measured, written by TVM's writer, to compare msdb's rows with.
"""

from __future__ import annotations

import os
import sys
from typing import Any

TARGET = {"kind": "llvm", "num-cores": 1}
FAILED = 1e10


def workload(name: str) -> Any:
    """The TVM module tuned: a 32x32x32 matmul, or a 3x3 conv2d over 1x8x8x8."""
    import tvm
    from tvm import te, topi

    if name == "gmm":
        a = te.placeholder((1, 32, 32), name="A")
        b = te.placeholder((1, 32, 32), name="B")
        k = te.reduce_axis((0, 32), name="k")
        c = te.compute((1, 32, 32), lambda n, i, j: te.sum(a[n, i, k] * b[n, k, j], axis=k), name="C")
        return tvm.IRModule({"main": te.create_prim_func([a, b, c])})
    if name == "conv2d":
        data = te.placeholder((1, 8, 8, 8), name="data")
        weight = te.placeholder((8, 8, 3, 3), name="weight")
        out = topi.nn.conv2d_nchw(data, weight, 1, 1, 1)
        return tvm.IRModule({"main": te.create_prim_func([data, weight, out])})
    raise SystemExit(f"unknown workload {name!r}; expected gmm or conv2d")


def truth_callback(truth_dir: str) -> Any:
    """A measure callback committing every measured candidate into TVM's JSONDatabase at
    `truth_dir`, as TVM's AddToDatabase commits it to the tuning database."""
    from tvm.ir.utils import derived_object
    from tvm.s_tir import meta_schedule as ms

    os.makedirs(truth_dir, exist_ok=True)
    truth = ms.database.JSONDatabase(work_dir=truth_dir)

    @derived_object
    class CopyToJSONDatabase(ms.measure_callback.PyMeasureCallback):
        def apply(self, task_scheduler: Any, task_id: int, measure_candidates: Any, builder_results: Any,
                  runner_results: Any) -> None:
            task = task_scheduler.tasks_[task_id].ctx
            work = truth.commit_workload(task.mod)
            for candidate, built, ran in zip(measure_candidates, builder_results, runner_results):
                if built.error_msg is not None or ran.error_msg is not None or ran.run_secs is None:
                    run_secs = [FAILED]
                else:
                    run_secs = [float(s) for s in ran.run_secs]
                truth.commit_tuning_record(ms.database.TuningRecord(
                    candidate.sch.trace, work, run_secs, task.target, candidate.args_info))

    return CopyToJSONDatabase()


def main(argv: list[str]) -> None:
    db_path, name, work_dir, truth_dir = argv[:4]
    trials = int(argv[4]) if len(argv) > 4 else 4
    import tvm
    from tvm.s_tir import meta_schedule as ms

    from msdb.tvm import as_tvm_database

    database = as_tvm_database(db_path)
    callbacks = [*ms.measure_callback.MeasureCallback.create("default"), truth_callback(truth_dir)]
    ms.tir_integration.tune_tir(
        workload(name), tvm.target.Target(TARGET), work_dir, trials, num_trials_per_iter=trials,
        database=database, measure_callbacks=callbacks, cost_model="random",
        builder=ms.builder.LocalBuilder(max_workers=1, timeout_sec=300),
        runner=ms.runner.LocalRunner(timeout_sec=120),
        strategy="replay-trace",  # the evolutionary search samples a population first: minutes here
        num_tuning_cores=1, seed=1)
    database.close()


if __name__ == "__main__":
    main(sys.argv[1:])
