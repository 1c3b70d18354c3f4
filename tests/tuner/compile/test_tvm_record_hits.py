"""A work_dir real TVM 0.27 tuned on ResNet-18's bare conv2d (shipped in
tests/data/tvm_resnet_conv_workdir, made by tests/tuner/compile/make_tvm_conv_record.py) answers
msdb's compile of the same ONNX model: `msdb import` puts it in a fresh SQLite database; with
`fuse="tvm"` the conv function of that shape hits structurally, with `fuse="fold"` the fused
conv+bias(+add)+relu functions of that shape hit by anchor block, and in both modes the compiled
model matches onnxruntime (docs/architecture.md, "Models" and "Compile").

Target: the models are compiled for msdb's default, this machine (`Target.host()`: its triple,
`mcpu` and `num-cores`). TVM wrote the record's target as `{"kind": "llvm", "mtriple":
"x86_64-conda-linux-gnu", "num-cores": 1, ...}` without an `mcpu`, and msdb's match policy
(msdb/records/target.py) accepts it for any x86_64 llvm host: an `mcpu` stated on one side
only is not compared, the triple's vendor/OS part and `num-cores` are ignored.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest

from msdb.database.sql import SQLiteDatabase
from msdb.database.tvm_import import import_logs
from msdb.interop.tvm.workdir import RECORD_FILE
from msdb.records import Target, TuningRecord
from msdb.tuner.compile import CompiledModel, MissReason, compile_model
from msdb.tuner.compile.reference import onnxruntime_session
from tests.tuner.compile.make_tvm_conv_record import CONV_SHAPES, IMAGE, KEEP, SHIPPED, resnet18

pytestmark = pytest.mark.slow  # each compile of the 64x64 ResNet-18 takes several seconds on one core


@pytest.fixture(scope="module")
def onnx_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("model") / "resnet18_64.onnx"
    onnx.save(resnet18(), str(path))
    return path


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, TuningRecord]:
    """(the fresh database the shipped work_dir was imported into, its best record)."""
    location = str(tmp_path_factory.mktemp("db") / "tvm.sqlite")
    summary = import_logs(location, [SHIPPED], verify=True)
    assert (summary.workloads_new, summary.records_new, summary.replayed) == (1, KEEP, KEEP), summary.line()
    assert not summary.replay_failures and not summary.bad_lines
    db = SQLiteDatabase(location)
    try:
        (best,) = db.get_top_k(db.get_all_tuning_records()[0].workload, 1)
    finally:
        db.close()
    return location, best


def _best_mean_in_shipped_file() -> float:
    """The best mean run time TVM wrote in the shipped record file, read as plain JSON."""
    means = []
    for line in (SHIPPED / RECORD_FILE).read_text().splitlines():
        run_secs = json.loads(line)[1][1]
        means.append(sum(run_secs) / len(run_secs))
    return min(means)


def _functions_of_the_tuned_conv(compiled: CompiledModel) -> dict[str, int]:
    """{function: call count} of the model's functions whose data and weight arguments and
    output have the tuned conv's shapes (read from the model graph, not from any hash)."""
    model = compiled.model
    counts = model.call_counts()
    found: dict[str, int] = {}
    for call in model.calls:
        shapes = (*(model.values[a].shape for a in call.args[:2]), model.values[call.outputs[0]].shape)
        if tuple(tuple(s) for s in shapes) == CONV_SHAPES:
            found[call.function] = counts[call.function]
    return found


def _check_against_onnxruntime(compiled: CompiledModel, path: Path) -> None:
    x = np.random.default_rng(0).standard_normal((1, 3, IMAGE, IMAGE)).astype("float32")
    (expected,) = onnxruntime_session(path).run(None, {"data": x})
    (actual,) = compiled.run({"data": x})
    np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=1e-5 * float(np.max(np.abs(expected))))


def _compile(onnx_path: Path, location: str, fuse: str) -> CompiledModel:
    return compile_model(onnx_path, location, fuse=fuse, num_threads=1)


def test_the_host_target_accepts_the_record_tvm_wrote(imported: tuple[str, TuningRecord]) -> None:
    _, best = imported
    assert best.target is not None and best.target.get("mcpu") is None
    assert best.target.get("num-cores") == 1
    assert Target.host().matches(best.target), f"this machine ({Target.host()}) does not accept {best.target}"
    assert best.mean_run_secs == pytest.approx(_best_mean_in_shipped_file(), rel=1e-12)


def test_tvm_fusion_hits_the_conv_structurally(onnx_path: Path, imported: tuple[str, TuningRecord]) -> None:
    location, best = imported
    compiled = _compile(onnx_path, location, "tvm")
    convs = _functions_of_the_tuned_conv(compiled)
    assert convs == {"conv2d1": 4}  # TVM's task name and weight for this conv (the README)
    hits = [e for e in compiled.report if e.hit]
    assert [(e.name, e.weight, e.matched_by, e.db) for e in hits] == [("conv2d1", 4, "structural", location)]
    (hit,) = hits
    assert hit.hash == best.workload.shash
    assert hit.record_us == pytest.approx(best.mean_run_secs * 1e6)
    assert hit.record_target == str(best.target)
    misses = {e.reason for e in compiled.report if not e.hit}
    assert misses == {MissReason.NO_WORKLOAD}
    _check_against_onnxruntime(compiled, onnx_path)


def test_fold_fusion_hits_the_fused_convs_by_anchor_block(onnx_path: Path,
                                                          imported: tuple[str, TuningRecord]) -> None:
    location, best = imported
    compiled = _compile(onnx_path, location, "fold")
    convs = _functions_of_the_tuned_conv(compiled)
    # the first conv of each basic block gets bias + relu, the second bias + residual add + relu
    assert convs == {"fused_conv2d1_add1_relu1": 2, "fused_conv2d1_add1_add2_relu1": 2}
    hits: dict[str, Any] = {e.name: e for e in compiled.report if e.hit}
    assert set(hits) == set(convs)
    for name, entry in hits.items():
        assert (entry.weight, entry.matched_by, entry.db) == (convs[name], "anchor-block", location)
        assert entry.hash != best.workload.shash  # a different function: only its anchor block is the record's
        assert entry.record_us == pytest.approx(best.mean_run_secs * 1e6)
    misses = {e.reason for e in compiled.report if not e.hit}
    assert misses == {MissReason.NO_WORKLOAD}
    _check_against_onnxruntime(compiled, onnx_path)
