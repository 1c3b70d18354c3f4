"""Make the TVM-tuned record shipped in tests/data/tvm_resnet_conv_workdir: real TVM 0.27 tunes
one conv2d task of ResNet-18 in TVM's own form, and the best few records are kept.

Why a record made by TVM and not by msdb: a work_dir TVM tuned on a conv2d in topi's form must
hit msdb's compile of the same model, structurally with `fuse="tvm"` and by anchor block with
`fuse="fold"` (docs/architecture.md, "Models" and "Compile"). Only TVM's own tuner shows that
the two sides agree on the workload, its hashes, the trace and the target.

The steps, all TVM's: `msdb.model.zoo.resnet` (the ONNX model the tests compile) -> TVM's Relax
ONNX frontend -> `relax.get_pipeline("zero")` (conv2d stays alone there: no batch-norm fusion)
-> meta_schedule's `extract_tasks` -> the bare conv2d task of `CONV_SHAPES` -> `tune_tasks`
(ReplayTrace) with LocalBuilder/LocalRunner into a JSONDatabase work_dir -> the `KEEP` best
records copied by TVM's JSONDatabase into the output work_dir.

Run it with TVM's venv, pinned to one core (it measures), from the repository root:

    taskset -c 1 .tvm-venv/bin/python -m tests.tuner.compile.make_tvm_conv_record [OUT_DIR] [--trials N]

or through the tvm-marked test with `MSDB_REGENERATE_TVM_RECORD=1` (tests/tuner/compile/
test_tvm_record_hits_tvm.py). The constants below are shared with the tests that use the record
(tests/tuner/compile/test_tvm_record_hits.py), which build the same ONNX model.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import onnx

__all__ = ["IMAGE", "WIDTH", "NUM_CLASSES", "SEED", "CONV_SHAPES", "TVM_TARGET", "KEEP", "DEFAULT_TRIALS",
           "BUILD_TIMEOUT_S", "RUN_TIMEOUT_S", "SHIPPED", "resnet18", "tvm_zero_module", "tvm_conv_task",
           "tune_conv", "make_work_dir"]

#: ResNet-18 as the tests build it: 64x64 images, torchvision's channel widths, seeded weights.
IMAGE = 64
WIDTH = 64
NUM_CLASSES = 10
SEED = 0

#: The conv tuned: the 3x3 convs of the first stage (after the stride-2 stem and max-pool, the
#: 64-channel maps are 16x16), called four times in the model. Argument shapes: data, weight, output.
CONV_SHAPES = ((1, WIDTH, IMAGE // 4, IMAGE // 4), (WIDTH, WIDTH, 3, 3), (1, WIDTH, IMAGE // 4, IMAGE // 4))

#: TVM 0.27 refuses CLI strings ("llvm -num-cores=1" raises), so the dict form. No `mcpu`: TVM
#: adds only its `mtriple` (x86_64-...), so under msdb's target policy (msdb/records/target.py) the
#: record matches any x86_64 llvm CPU, whatever its `mcpu` and `num-cores`.
TVM_TARGET: dict[str, Any] = {"kind": "llvm", "num-cores": 1}

#: Records kept per workload in the shipped work_dir, best first.
KEEP = 3
DEFAULT_TRIALS = 16
#: Seconds TVM's LocalBuilder and LocalRunner wait for one candidate (TVM's defaults: 30 and 30).
BUILD_TIMEOUT_S = 300.0
RUN_TIMEOUT_S = 120.0

SHIPPED = Path(__file__).resolve().parents[2] / "data" / "tvm_resnet_conv_workdir"


def resnet18() -> onnx.ModelProto:
    """The ONNX model both TVM and msdb compile (msdb.model.zoo, random seeded weights)."""
    from msdb.model.zoo import resnet

    return resnet(18, image=IMAGE, width=WIDTH, num_classes=NUM_CLASSES, seed=SEED)


def tvm_zero_module(proto: onnx.ModelProto) -> Any:
    """TVM's Relax module of `proto` after its "zero" pipeline (legalized, fused, weights bound)."""
    from tvm import relax
    from tvm.relax.frontend.onnx import from_onnx

    return relax.get_pipeline("zero")(from_onnx(proto))


def _arg_shapes(func: Any) -> tuple[tuple[int, ...], ...]:
    """The shapes of a TVM PrimFunc's buffer arguments, through meta_schedule's ArgInfo."""
    from tvm.s_tir.meta_schedule.arg_info import ArgInfo

    return tuple(tuple(int(d) for d in info.shape) for info in ArgInfo.from_prim_func(func))


def tvm_conv_task(mod: Any, target: Any) -> Any:
    """The ExtractedTask of the bare conv2d with `CONV_SHAPES` among TVM's tasks of `mod`."""
    from tvm.s_tir.meta_schedule.relax_integration import extract_tasks

    tasks = extract_tasks(mod, target)
    found = [t for t in tasks if t.task_name.startswith("conv2d")
             and _arg_shapes(t.dispatched[0]["main"]) == CONV_SHAPES]
    if len(found) != 1:
        names = ", ".join(f"{t.task_name}{_arg_shapes(t.dispatched[0]['main'])}" for t in tasks)
        raise LookupError(f"expected one conv2d task of shapes {CONV_SHAPES}, found {len(found)} among: {names}")
    return found[0]


def tune_conv(task: Any, work_dir: Path, trials: int, seed: int = SEED) -> Any:
    """Tune `task` with TVM's ReplayTrace search (`trials` measured candidates in one round), one
    build and one run worker; returns TVM's JSONDatabase in `work_dir`.

    Why ReplayTrace: below 100 measured candidates TVM's XGBoost model predicts random scores
    (its warm-up), so at this budget the evolutionary search also picks at random, after about
    25 s of population sampling per round. The timeouts are generous because the machines the
    tests run on are shared: a build starved of CPU is a timeout, not a slow schedule."""
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.meta_schedule.relax_integration import extracted_tasks_to_tune_contexts

    contexts, weights = extracted_tasks_to_tune_contexts([task], str(work_dir), strategy="replay-trace",
                                                         num_threads=1, seed=seed)
    return ms.tune_tasks(
        tasks=contexts, task_weights=weights, work_dir=str(work_dir),
        max_trials_global=trials, num_trials_per_iter=trials,
        builder=ms.builder.LocalBuilder(max_workers=1, timeout_sec=BUILD_TIMEOUT_S),
        runner=ms.runner.LocalRunner(timeout_sec=RUN_TIMEOUT_S),
        cost_model="random", task_scheduler="round-robin",
    )


def _keep_best(source: Any, workload_mod: Any, out: Path) -> Any:
    """Copy the `KEEP` best records of `workload_mod` from `source` into a fresh JSONDatabase at
    `out` (TVM writes both files, so the shipped lines are TVM's own)."""
    from tvm.s_tir import meta_schedule as ms

    out.mkdir(parents=True, exist_ok=True)
    for name in ("database_workload.json", "database_tuning_record.json"):
        (out / name).unlink(missing_ok=True)
    best = ms.database.JSONDatabase(work_dir=str(out))
    workload = source.commit_workload(workload_mod)
    records = source.get_top_k(workload, KEEP)
    if not records:
        raise RuntimeError("TVM measured no valid candidate for the conv2d task; raise --trials")
    best.commit_workload(workload_mod)
    for record in records:
        best.commit_tuning_record(record)
    return best


def make_work_dir(out: Path, trials: int = DEFAULT_TRIALS) -> dict[str, Any]:
    """Tune and write the pruned work_dir to `out`; returns what was made (task name, weight,
    target, best mean run time in seconds) for the README and the caller."""
    import tvm

    target = tvm.target.Target(TVM_TARGET)
    task = tvm_conv_task(tvm_zero_module(resnet18()), target)
    with tempfile.TemporaryDirectory(prefix="msdb-tvm-tune-") as scratch:
        db = tune_conv(task, Path(scratch), trials)
        best = _keep_best(db, task.dispatched[0], out)
    records = best.get_all_tuning_records()
    secs = min(sum(float(s) for s in r.run_secs) / len(r.run_secs) for r in records)
    return {"task": task.task_name, "weight": int(task.weight), "records": len(records), "trials": trials,
            "target": str(target), "best_us": secs * 1e6, "tvm": tvm.__version__}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description="Tune ResNet-18's 64-channel 3x3 conv2d with real TVM 0.27; write the best records as a work_dir.")
    parser.add_argument("out", nargs="?", type=Path, default=SHIPPED, help="the work_dir to write")
    parser.add_argument("--trials", type=int, default=DEFAULT_TRIALS, help="candidates TVM measures")
    args = parser.parse_args(argv)
    print(json.dumps(make_work_dir(args.out, args.trials)))


if __name__ == "__main__":
    main()
