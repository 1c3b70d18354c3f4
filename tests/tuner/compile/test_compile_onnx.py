"""msdb.tuner.compile on ONNX ResNets (msdb.model.zoo, random weights) against onnxruntime: an
empty database, both fusion modes, records tuned on ResNet-18 hitting ResNet-34's shared shapes,
and (slow) the full ResNet-18 at 224x224."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from msdb.database.sql import SQLiteDatabase
from msdb.tuner.compile import CompiledModel, MissReason, compile_model
from msdb.tuner.compile.compiler import as_workload
from msdb.tuner.compile.reference import onnxruntime_session

onnx = pytest.importorskip("onnx", reason="the ONNX frontend is the optional extra msdb[onnx]")
onnxruntime = pytest.importorskip("onnxruntime", reason="onnxruntime is the reference (msdb[onnx])")


def _save(tmp: Path, depth: int, image: int, width: int) -> Path:
    from msdb.model.zoo import resnet

    path = tmp / f"resnet{depth}_{image}_{width}.onnx"
    onnx.save(resnet(depth, image=image, width=width, num_classes=10), str(path))
    return path


def _check_against_onnxruntime(compiled: CompiledModel, path: Path, image: int) -> None:
    x = np.random.default_rng(0).standard_normal((1, 3, image, image)).astype("float32")
    (expected,) = onnxruntime_session(path).run(None, {"data": x})
    (actual,) = compiled.run({"data": x})
    # rtol 1e-4 of the output's scale: logits near zero differ by float rounding in absolute terms
    np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=1e-4 * float(np.max(np.abs(expected))))


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    tmp = tmp_path_factory.mktemp("onnx")
    return {depth: _save(tmp, depth, 32, 8) for depth in (18, 34)}


@pytest.mark.slow  # ~6 s each; tests/cli/test_compile_cli.py runs the tvm layout against onnxruntime unmarked
@pytest.mark.parametrize("fuse", ["tvm", "fold", "packed", "winograd", "nchwc"])
def test_small_resnet_with_an_empty_database_matches_onnxruntime(models: dict[int, Path], tmp_path: Path,
                                                                 fuse: str) -> None:
    empty = SQLiteDatabase(tmp_path / "empty.sqlite")
    try:
        compiled = compile_model(models[18], empty, fuse=fuse)
    finally:
        empty.close()
    assert compiled.report and all(e.reason == MissReason.NO_WORKLOAD for e in compiled.report)
    assert sum(e.weight for e in compiled.report) == len(compiled.model.calls)
    _check_against_onnxruntime(compiled, models[18], 32)


@pytest.mark.slow
def test_a_mobilenet_with_clip_bounds_compiles_and_matches_onnxruntime(tmp_path: Path) -> None:
    """ReLU6's Clip bounds reach the kernels as 0-d parameters (TVM's where(isnan(b), ...) folded
    to a scalar): they stay 0-d buffers (a 1-d copy was refused: "parameter 'stem.relu6.where'
    has shape (1,), the model says ()")."""
    from msdb.model.zoo import mobilenet_like

    path = tmp_path / "mobilenet.onnx"
    onnx.save(mobilenet_like(image=32, width=8, num_classes=10), str(path))
    compiled = compile_model(path, None)
    assert any(compiled.model.values[name].shape == () for name in compiled.model.params)
    _check_against_onnxruntime(compiled, path, 32)


@pytest.mark.slow
def test_resnet34_hits_exactly_the_shapes_tuned_on_resnet18(models: dict[int, Path], tmp_path: Path) -> None:
    """ResNet-18's tasks tuned with one trial each; compiling ResNet-34 over that database hits
    every function whose workload (structurally or by anchor block) got a valid record, and
    misses the others."""
    from msdb.model.loader import load
    from msdb.model.tasks import extract_tasks
    from msdb.tuner.model_tuning import tune_model

    resnet18 = load(models[18])
    db = SQLiteDatabase(tmp_path / "r18.sqlite")
    try:
        count = len(extract_tasks(resnet18))
        tune_model(resnet18, None, db, count, 8, max_trials_per_task=1, strategy="replay-trace", cost_model="random",
                   task_scheduler="round-robin", seed=0, check_best=False)
        tuned = [r.workload for r in db.get_all_tuning_records() if r.is_valid]
        compiled = compile_model(models[34], db)
    finally:
        db.close()
    structural = {w.shash for w in tuned}
    anchors = {w.hash("anchor-block") for w in tuned}
    expected = {name for name, func in compiled.model.functions.items()
                if as_workload(func).shash in structural or as_workload(func).hash("anchor-block") in anchors}
    hits = {e.name for e in compiled.report if e.hit}
    assert hits == expected and len(hits) > len(compiled.report) // 2
    for entry in compiled.report:
        if not entry.hit:  # committed by the tuner, but no valid record came of it
            assert entry.reason in (MissReason.NO_RECORD_FOR_TARGET, MissReason.ONLY_FAILED), entry
    _check_against_onnxruntime(compiled, models[34], 32)


@pytest.mark.slow
def test_resnet18_at_224_with_an_empty_database_matches_onnxruntime(tmp_path: Path) -> None:
    path = _save(tmp_path, 18, 224, 64)
    empty = SQLiteDatabase(tmp_path / "empty.sqlite")
    try:
        compiled = compile_model(path, empty)
    finally:
        empty.close()
    assert len(compiled.report) == 27  # TVM's 27 functions (and tasks) of ResNet-18
    _check_against_onnxruntime(compiled, path, 224)


@pytest.mark.slow
@pytest.mark.parametrize("fuse,op,least", [("packed", "conv2d_packed", 6), ("winograd", "conv2d_winograd", 2),
                                           ("nchwc", "conv2d_nchwc", 6)])
def test_packed_resnet_tuned_from_its_design_spaces_hits_and_matches_onnxruntime(models: dict[int, Path],
                                                                                 tmp_path: Path, fuse: str, op: str,
                                                                                 least: int) -> None:
    """`fuse="packed"`, `"winograd"` and `"nchwc"`: each task tuned with one sample of TVM's
    design space (no default schedule: the space itself must schedule the packed, Winograd or
    blocked conv, its unpack and epilogue); the records apply at compile time and the model
    still computes what onnxruntime computes."""
    from msdb.model.loader import load
    from msdb.model.tasks import extract_tasks
    from msdb.tuner.model_tuning import tune_model

    model = load(models[18], fuse=fuse)
    packed = [name for name in model.functions if op in name]
    # packed: the 16-, 32- and 64-channel convs of a width-8 ResNet-18; winograd: its 3x3
    # stride-1 convs of 16 and 32 channels (4x4 and 2x2 outputs); nchwc: every conv, the
    # 8-channel ones in one padded block, and its 3x3 stride-1 convs on blocks by Winograd
    assert len(packed) >= least
    if fuse == "nchwc":
        blocked_winograd = [name for name in model.functions if "conv2d_winograd" in name]
        assert len(blocked_winograd) >= 3  # 8x8, 4x4 (F(4, 3)) and 2x2 (F(2, 3)) outputs
        packed += blocked_winograd
    db = SQLiteDatabase(tmp_path / "packed.sqlite")
    try:
        count = len(extract_tasks(model))
        tune_model(model, None, db, count, 8, max_trials_per_task=1, strategy="replay-trace", cost_model="random",
                   task_scheduler="round-robin", seed=0, check_best=False)
        valid = {r.workload.shash for r in db.get_all_tuning_records() if r.is_valid}
        compiled = compile_model(models[18], db, fuse=fuse)
    finally:
        db.close()
    hits = {e.name for e in compiled.report if e.hit}
    assert {name for name in packed if as_workload(model.functions[name]).shash in valid} <= hits
    assert any(name in hits for name in packed)
    _check_against_onnxruntime(compiled, models[18], 32)


def test_a_nan_output_is_an_infinite_error_unless_the_reference_has_it_too() -> None:
    """`errors` (what `msdb compile --run` and the benchmarks report): NaN used to make every
    comparison false and the error 0; BERT's outputs were NaN on both sides unnoticed."""
    from msdb.tuner.compile.reference import errors

    assert errors([np.array([1.0, np.nan])], [np.array([1.0, 2.0])]) == (np.inf, np.inf)
    assert errors([np.array([1.0, 2.0])], [np.array([1.0, np.nan])]) == (np.inf, np.inf)
    assert errors([np.array([1.0, np.nan, np.inf])], [np.array([1.0, np.nan, np.inf])]) == (0.0, 0.0)
    assert errors([np.array([np.inf])], [np.array([-np.inf])]) == (np.inf, np.inf)
    assert errors([np.array([1.5, 3.0])], [np.array([1.0, 2.0])]) == (1.0, 0.5)


def test_random_inputs_give_a_transformer_a_valid_mask(tmp_path: Path) -> None:
    """Integer inputs are 0 or 1: token ids and a mask BERT reads as meant (finite outputs that
    onnxruntime agrees with)."""
    import onnx

    from msdb.model.loader import load
    from msdb.model.zoo import bert
    from msdb.tuner.compile.reference import errors, random_inputs

    path = tmp_path / "bert.onnx"
    onnx.save(bert(layers=1, hidden=64, heads=2, seq=16, vocab=100), path)
    inputs = random_inputs(load(str(path)), seed=0)
    assert set(np.unique(inputs["attention_mask"])) <= {0, 1} and set(np.unique(inputs["input_ids"])) <= {0, 1}
    expected = onnxruntime_session(path).run(None, inputs)
    assert all(np.isfinite(e).all() for e in expected)
    got = compile_model(str(path), None, num_threads=1).run(inputs)
    assert errors(got, expected)[1] < 1e-4


@pytest.mark.slow
@pytest.mark.parametrize("name", ["bert", "resnet"])
def test_several_threads_give_the_single_threaded_numbers(name: str, tmp_path: Path) -> None:
    """A model compiled for `num-cores` 2 (the default schedules' parallel outer loops) and run
    on two threads computes exactly what one thread computes: the threads split output tiles,
    never a reduction."""
    import onnx

    from msdb.model.zoo import bert, resnet
    from msdb.tuner.compile.reference import random_inputs

    path = tmp_path / f"{name}.onnx"
    proto = bert(layers=1, hidden=64, heads=2, seq=16, vocab=100) if name == "bert" else \
        resnet(18, image=32, width=8, num_classes=10)
    onnx.save(proto, path)
    one = compile_model(str(path), None, {"kind": "llvm", "num-cores": 1}, num_threads=1)
    two = compile_model(str(path), None, {"kind": "llvm", "num-cores": 2}, num_threads=2)
    assert any("GOMP_parallel" in kernel.llvm_ir for kernel in two.kernels.values())  # parallel loops
    assert not any("GOMP_parallel" in kernel.llvm_ir for kernel in one.kernels.values())
    inputs = random_inputs(one)
    for got, want in zip(two.run(inputs), one.run(inputs)):
        np.testing.assert_array_equal(got, want)
