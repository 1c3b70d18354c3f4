"""msdb.tuner.compile on models built by hand from TVM-form PrimFuncs (tests/workloads.py):
records found in layered databases structurally and by anchor block, the four miss reasons,
and the compiled model's numbers against NumPy."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from msdb.database.sql import SQLiteDatabase
from msdb.model.graph import Call, Model, TensorInfo
from msdb.records import Target, TuningRecord
from msdb.schedule import Schedule
from msdb.tuner.compile import CompiledModel, MissReason, ModelInputError, compile_model
from msdb.tuner.compile.compiler import as_workload
from tests.workloads import conv_func, max_pool_func

# ---------------------------------------------------------------- the model

C_IN, C, HW = 4, 8, 8


def _functions() -> dict[str, Any]:
    return {
        "fused_conv2d_add_relu": conv_func(1, C_IN, HW, C, 3, 1, 1, epilogue="bu"),
        "fused_conv2d1_add1_relu1": conv_func(1, C, HW, C, 3, 1, 1, epilogue="bu"),
        "fused_conv2d1_add1_add2_relu1": conv_func(1, C, HW, C, 3, 1, 1, epilogue="bru"),
        "max_pool2d": max_pool_func(1, C, HW, 3, 2, 1),
    }


def tiny_resnet(seed: int = 0) -> Model:
    """A ResNet-shaped model: conv+bias+relu (4->8), the 8->8 one twice (weight 2), a residual
    conv+bias+add+relu, then max-pooling."""
    rng = np.random.default_rng(seed)
    act = (1, C, HW, HW)
    values = {
        "x": TensorInfo("x", (1, C_IN, HW, HW)),
        "w0": TensorInfo("w0", (C, C_IN, 3, 3)), "b0": TensorInfo("b0", (1, C, 1, 1)),
        "w1": TensorInfo("w1", (C, C, 3, 3)), "b1": TensorInfo("b1", (1, C, 1, 1)),
        "w2": TensorInfo("w2", (C, C, 3, 3)), "b2": TensorInfo("b2", (1, C, 1, 1)),
        "w3": TensorInfo("w3", (C, C, 3, 3)), "b3": TensorInfo("b3", (1, C, 1, 1)),
        **{name: TensorInfo(name, act) for name in ("y0", "y1", "y2", "y3")},
        "out": TensorInfo("out", (1, C, 4, 4)),
    }
    params = {name: (rng.standard_normal(info.shape) * 0.3).astype("float32")
              for name, info in values.items() if name[0] in "wb"}
    calls = [
        Call("fused_conv2d_add_relu", ("x", "w0", "b0"), ("y0",), "conv0"),
        Call("fused_conv2d1_add1_relu1", ("y0", "w1", "b1"), ("y1",), "conv1"),
        Call("fused_conv2d1_add1_relu1", ("y1", "w2", "b2"), ("y2",), "conv2"),
        Call("fused_conv2d1_add1_add2_relu1", ("y2", "w3", "b3", "y0"), ("y3",), "conv3"),
        Call("max_pool2d", ("y3",), ("out",), "pool"),
    ]
    model = Model("tiny_resnet", (values["x"],), ("out",), _functions(), calls, values, params)
    model.check()
    return model


def _conv(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    out = np.zeros((x.shape[0], w.shape[0], x.shape[2], x.shape[3]), dtype=np.float64)
    for dy in range(3):
        for dx in range(3):
            patch = padded[:, :, dy:dy + x.shape[2], dx:dx + x.shape[3]]
            out += np.einsum("nchw,fc->nfhw", patch, w[:, :, dy, dx])
    return out


def _max_pool(x: np.ndarray) -> np.ndarray:
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=-np.inf)
    return np.max([padded[:, :, dy:dy + 8:2, dx:dx + 8:2] for dy in range(3) for dx in range(3)], axis=0)


def reference(model: Model, x: np.ndarray) -> np.ndarray:
    p = {k: v.astype(np.float64) for k, v in model.params.items()}
    y0 = np.maximum(_conv(x, p["w0"]) + p["b0"], 0)
    y1 = np.maximum(_conv(y0, p["w1"]) + p["b1"], 0)
    y2 = np.maximum(_conv(y1, p["w2"]) + p["b2"], 0)
    y3 = np.maximum(_conv(y2, p["w3"]) + p["b3"] + y0, 0)
    return _max_pool(y3)


def _input(seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((1, C_IN, HW, HW)).astype("float32")


def _entry(compiled: CompiledModel, name: str) -> Any:
    return next(e for e in compiled.report if e.name == name)


def _check_numbers(compiled: CompiledModel, model: Model) -> None:
    x = _input()
    (out,) = compiled.run({"x": x})
    np.testing.assert_allclose(out, reference(model, x.astype(np.float64)), rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------- databases


HOST = Target.host()


@pytest.fixture(scope="module")
def tuned_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A database with a few measurements of the 8->8 conv+bias+relu by msdb's tuner (seeded)."""
    from msdb.tuner.tune import tune_tir

    path = tmp_path_factory.mktemp("tuned") / "tuned.sqlite"
    db = SQLiteDatabase(path)
    try:
        result = tune_tir(_functions()["fused_conv2d1_add1_relu1"], None, db, 4, 4, seed=0, cost_model="random",
                          strategy="replay-trace", task_name="fused_conv2d1_add1_relu1")
        assert result.tasks[0].best is not None
    finally:
        db.close()
    return path


def _best_trace(path: Path) -> Any:
    db = SQLiteDatabase(path, read_only=True)
    try:
        record = db.get_top_k(as_workload(_functions()["fused_conv2d1_add1_relu1"]), 1, HOST)[0]
        return record.trace
    finally:
        db.close()


def _db_with(path: Path, func_name: str, trace: Any, run_secs: list[float], target: Target = HOST) -> SQLiteDatabase:
    db = SQLiteDatabase(path)
    workload = db.commit_workload(as_workload(_functions()[func_name]))
    db.commit_tuning_record(TuningRecord(trace, workload, run_secs, target, None))
    return db


# ---------------------------------------------------------------- tests


@pytest.mark.slow
def test_empty_database_compiles_with_default_schedules_and_matches_numpy(tmp_path: Path) -> None:
    model = tiny_resnet()
    db = SQLiteDatabase(tmp_path / "empty.sqlite")
    compiled = compile_model(model, db)
    db.close()
    assert [e.name for e in compiled.report] == list(model.functions)
    assert [e.weight for e in compiled.report] == [1, 2, 1, 1]
    assert all(not e.hit and e.reason == MissReason.NO_WORKLOAD for e in compiled.report)
    assert compiled.report[0].hash == as_workload(model.functions["fused_conv2d_add_relu"]).shash
    _check_numbers(compiled, model)


@pytest.mark.slow
def test_without_a_database_every_function_says_so() -> None:
    compiled = compile_model(tiny_resnet(), None)
    assert {e.reason for e in compiled.report} == {MissReason.NO_DATABASE}


@pytest.mark.slow
def test_tuned_record_hits_structurally_and_by_anchor_block(tuned_db: Path) -> None:
    model = tiny_resnet()
    compiled = compile_model(model, [str(tuned_db)])
    plain = _entry(compiled, "fused_conv2d1_add1_relu1")
    assert plain.hit and plain.matched_by == "structural" and plain.db == str(tuned_db)
    assert plain.weight == 2 and plain.record_us is not None and plain.record_us > 0
    assert plain.record_gflops is not None and plain.record_gflops > 0
    residual = _entry(compiled, "fused_conv2d1_add1_add2_relu1")  # same conv, the anchor block
    assert residual.hit and residual.matched_by == "anchor-block", residual
    assert _entry(compiled, "fused_conv2d_add_relu").reason == MissReason.NO_WORKLOAD  # another conv shape
    assert _entry(compiled, "max_pool2d").reason == MissReason.NO_WORKLOAD
    _check_numbers(compiled, model)


@pytest.mark.slow
def test_the_package_is_callable_as_compile(tuned_db: Path) -> None:
    import msdb.tuner

    compiled = msdb.tuner.compile(tiny_resnet(), str(tuned_db))
    assert [e.hit for e in compiled.report] == [False, True, True, False]


@pytest.mark.slow
def test_layers_first_with_a_record_wins(tuned_db: Path, tmp_path: Path) -> None:
    trace = _best_trace(tuned_db)
    slow = _db_with(tmp_path / "slow.sqlite", "fused_conv2d1_add1_relu1", trace, [5e-3])
    fast = _db_with(tmp_path / "fast.sqlite", "fused_conv2d1_add1_relu1", trace, [1e-6])
    empty = SQLiteDatabase(tmp_path / "empty.sqlite")
    try:
        compiled = compile_model(tiny_resnet(), [empty, slow, fast])
        entry = _entry(compiled, "fused_conv2d1_add1_relu1")
        assert entry.hit and entry.db == repr(slow) and entry.record_us == pytest.approx(5000.0)
        compiled = compile_model(tiny_resnet(), [fast, slow])
        entry = _entry(compiled, "fused_conv2d1_add1_relu1")
        assert entry.hit and entry.db == repr(fast) and entry.record_us == pytest.approx(1.0)
    finally:
        for db in (slow, fast, empty):
            db.close()


@pytest.mark.slow
def test_layers_given_as_locations_are_named_as_given(tuned_db: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty.sqlite"
    SQLiteDatabase(empty).close()
    compiled = compile_model(tiny_resnet(), [str(empty), str(tuned_db)])
    assert _entry(compiled, "fused_conv2d1_add1_relu1").db == str(tuned_db)
    assert json.loads(compiled.report_json())[1]["db"] == str(tuned_db)


@pytest.mark.slow
def test_a_structural_database_still_answers_by_anchor_block_from_memory(tuned_db: Path) -> None:
    """A memory database indexes workloads under its own equality: the anchor query scans it."""
    from msdb.database.memory import MemoryDatabase

    memory = MemoryDatabase("structural")
    workload = memory.commit_workload(as_workload(_functions()["fused_conv2d1_add1_relu1"]))
    memory.commit_tuning_record(TuningRecord(_best_trace(tuned_db), workload, [2e-5], HOST, None))
    compiled = compile_model(tiny_resnet(), memory)
    assert _entry(compiled, "fused_conv2d1_add1_add2_relu1").matched_by == "anchor-block"


@pytest.mark.slow
def test_miss_no_record_for_this_target_lists_the_targets(tuned_db: Path, tmp_path: Path) -> None:
    gpu = Target("cuda -arch=sm_80")
    db = _db_with(tmp_path / "gpu.sqlite", "fused_conv2d1_add1_relu1", _best_trace(tuned_db), [1e-5], gpu)
    try:
        entry = _entry(compile_model(tiny_resnet(), db), "fused_conv2d1_add1_relu1")
    finally:
        db.close()
    assert not entry.hit and entry.reason == MissReason.NO_RECORD_FOR_TARGET
    assert entry.targets_with_records == [str(gpu)] and str(gpu) in entry.detail


@pytest.mark.slow
def test_miss_only_failed_records(tuned_db: Path, tmp_path: Path) -> None:
    db = _db_with(tmp_path / "failed.sqlite", "fused_conv2d1_add1_relu1", _best_trace(tuned_db), [1e10])
    try:
        compiled = compile_model(tiny_resnet(), db)
    finally:
        db.close()
    assert _entry(compiled, "fused_conv2d1_add1_relu1").reason == MissReason.ONLY_FAILED
    # the residual conv shares the anchor block: its only record failed too
    assert _entry(compiled, "fused_conv2d1_add1_add2_relu1").reason == MissReason.ONLY_FAILED


@pytest.mark.slow
def test_miss_trace_does_not_apply_quotes_the_error(tmp_path: Path) -> None:
    """A trace tuned on a plain conv that only parallelizes it leaves the fused function's pad
    and relu blocks unscheduled: TVM's anchor-trace procedure refuses (TVM aborts the compile;
    msdb reports a miss and uses the default schedule)."""
    plain = conv_func(1, C_IN, HW, C, 3, 1, 1)
    db = SQLiteDatabase(tmp_path / "plain.sqlite")
    workload = db.commit_workload(as_workload(plain))
    sch = Schedule(workload.mod)
    sch.parallel(sch.get_loops(sch.get_sblock("conv2d_nchw"))[1])
    db.commit_tuning_record(TuningRecord(sch.trace, workload, [1e-5], HOST, None))
    model = tiny_resnet()
    try:
        compiled = compile_model(model, db)
    finally:
        db.close()
    entry = _entry(compiled, "fused_conv2d_add_relu")
    assert not entry.hit and entry.reason == MissReason.TRACE_DOES_NOT_APPLY
    assert "unscheduled" in entry.detail and entry.db is None
    _check_numbers(compiled, model)  # the default schedule took over


@pytest.mark.slow
def test_workload_known_without_records(tmp_path: Path) -> None:
    db = SQLiteDatabase(tmp_path / "known.sqlite")
    db.commit_workload(as_workload(_functions()["max_pool2d"]))
    try:
        entry = _entry(compile_model(tiny_resnet(), db), "max_pool2d")
    finally:
        db.close()
    assert entry.reason == MissReason.NO_RECORD_FOR_TARGET and "no target has a valid record" in entry.detail


@pytest.mark.slow
def test_report_json_has_the_documented_keys() -> None:
    compiled = compile_model(tiny_resnet(), None)
    rows = json.loads(compiled.report_json())
    assert [row["name"] for row in rows] == list(_functions())
    for row in rows:
        assert {"name", "hash", "weight", "hit", "db", "reason"} <= set(row)
        assert isinstance(row["hit"], bool) and len(row["hash"]) == 16


@pytest.mark.slow
def test_run_checks_its_inputs() -> None:
    compiled = compile_model(tiny_resnet(), None)
    x = _input()
    with pytest.raises(ModelInputError, match=r"missing input\(s\) 'x'.*unknown|unknown input\(s\) 'y'.*missing"):
        compiled.run({"y": x})
    with pytest.raises(ModelInputError, match=r"input 'x' has shape \[1, 4, 8\], the model takes float32\[1, 4, 8, 8\]"):
        compiled.run({"x": x[..., 0]})
    with pytest.raises(ModelInputError, match=r"input 'x' has dtype float64.*astype\('float32'\)"):
        compiled.run({"x": x.astype("float64")})
    with pytest.raises(ModelInputError, match="takes a dict"):
        compiled.run([x])  # type: ignore[arg-type]


@pytest.mark.slow
def test_buffers_are_reused_and_outputs_are_fresh_arrays() -> None:
    model = tiny_resnet()
    compiled = compile_model(model, None)
    first = compiled.run({"x": _input(1)})[0]
    kept = first.copy()
    second = compiled.run({"x": _input(2)})[0]
    np.testing.assert_array_equal(first, kept)  # the next run did not write into what the caller holds
    assert not np.array_equal(first, second)
    np.testing.assert_allclose(second, reference(model, _input(2).astype(np.float64)), rtol=1e-4, atol=1e-4)
    timing = compiled.benchmark(repeat=2)
    assert len(timing.results) == 2 and all(t > 0 for t in timing.results)


@pytest.mark.slow
def test_profile_splits_a_run_by_function_and_leaves_the_outputs_right() -> None:
    """`profile` names every function once with its call count (the 8->8 conv twice), times
    them per run, slowest first, and a run after it still computes the model."""
    model = tiny_resnet()
    compiled = compile_model(model, None)
    profile = compiled.profile({"x": _input(3)}, repeat=3)
    calls = {f.name: f.calls for f in profile}
    assert calls == {name: [c.function for c in model.calls].count(name) for name in calls}
    assert set(calls) == {c.function for c in model.calls} and calls["fused_conv2d1_add1_relu1"] == 2
    assert all(f.seconds > 0 for f in profile)
    assert [f.seconds for f in profile] == sorted((f.seconds for f in profile), reverse=True)
    _check_numbers(compiled, model)
    with pytest.raises(ValueError, match="repeat must be >= 1"):
        compiled.profile(repeat=0)


def test_a_non_cpu_target_is_refused() -> None:
    from msdb.errors import MsdbError

    with pytest.raises(MsdbError, match="not a CPU"):
        compile_model(tiny_resnet(), None, "cuda -arch=sm_80")


@pytest.mark.slow
def test_kernels_built_in_worker_processes_compute_the_same(tuned_db: Path) -> None:
    model = tiny_resnet()
    compiled = compile_model(model, str(tuned_db), build_workers=2)
    assert [e.hit for e in compiled.report] == [False, True, True, False]
    _check_numbers(compiled, model)


@pytest.mark.slow
def test_a_schedule_function_layer_answers_the_functions_it_accepts(tuned_db: Path) -> None:
    """TVM's ScheduleFnDatabase as the first layer: it schedules max_pool2d (by task name) and
    declines the rest, which fall through to the next layer."""
    from msdb.database.schedule_fn import ScheduleFnDatabase

    def schedule(sch: Schedule) -> bool:
        if sch.mod.attrs.get("task_name") != "max_pool2d":
            return False
        block = sch.get_sblock("pool_max")
        sch.parallel(sch.fuse(*sch.get_loops(block)[:2]))
        return True

    model = tiny_resnet()
    compiled = compile_model(model, [ScheduleFnDatabase(schedule), str(tuned_db)])
    pool = _entry(compiled, "max_pool2d")
    assert pool.hit and pool.matched_by == "schedule function" and pool.record_us is None
    assert _entry(compiled, "fused_conv2d1_add1_relu1").db == str(tuned_db)
    _check_numbers(compiled, model)
