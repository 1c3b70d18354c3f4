"""`compile(..., transfer=True)`: a ResNet-18 at another resolution, which nobody
tuned, compiled over the records of one at 32x32: every conv is scheduled by its nearest
relative's record re-fitted to it, the report says from which workload, model and layer at what
distance (and why the exact lookup missed), the rest get the default schedule with the reason no
transfer applied, and the outputs match onnxruntime."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from msdb.database.sql import SQLiteDatabase
from msdb.records import Target
from msdb.tuner.compile import MissReason, compile_model
from msdb.tuner.compile.reference import onnxruntime_session
from msdb.tuner.compile.report import format_report, summary_line
from tests.tuner.compile.sampled_records import sampled_records_db

onnx = pytest.importorskip("onnx", reason="the ONNX frontend is the optional extra msdb[onnx]")
pytest.importorskip("onnxruntime", reason="onnxruntime is the reference (msdb[onnx])")


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, list[str]]:
    from msdb.model.zoo import resnet

    tmp = tmp_path_factory.mktemp("transfer")
    tuned, other = tmp / "r18_32.onnx", tmp / "r18_48.onnx"
    onnx.save(resnet(18, image=32, width=8, num_classes=10), str(tuned))
    onnx.save(resnet(18, image=48, width=8, num_classes=10), str(other))
    db = tmp / "r18_32.sqlite"
    names = sampled_records_db(tuned, db, "resnet18_32", Target.host())
    return other, db, names


@pytest.mark.slow
def test_a_model_nobody_tuned_compiles_from_its_relatives_records(setup: tuple[Path, Path, list[str]]) -> None:
    model, db_path, tuned = setup
    db = SQLiteDatabase(db_path, read_only=True)
    try:
        compiled = compile_model(model, db, transfer=True)
    finally:
        db.close()
    try:
        convs = [e for e in compiled.report if "conv2d" in e.name]
        assert len(convs) == len(tuned)
        for entry in convs:
            assert entry.scheduled_by == "transferred" and not entry.hit, entry
            assert entry.reason == MissReason.NO_WORKLOAD  # why not exact or anchor-block
            assert entry.transfer is not None and entry.transfer.models == ["resnet18_32"]
            assert entry.transfer.distance > 0 and entry.transfer.relative_us == pytest.approx(1e3)
            assert entry.record_us is None  # no latency of its own
            # the relative is named after the source model's function that stored it
            assert entry.transfer.name and f"transferred from {entry.transfer.name} {entry.transfer.workload} of model " \
                "resnet18_32" in entry.answer()
        for entry in compiled.report:
            if entry.scheduled_by != "transferred":
                assert entry.scheduled_by == "default" and entry.transfer_miss, entry
        assert summary_line(compiled.report).endswith(f"; transferred: {len(convs)} functions, "
                                                      f"{sum(e.weight for e in convs)} calls")
        assert "no transfer: no relative has a valid record for this target" in format_report(compiled.report)
        assert compiled.report_json()  # the transfer provenance is JSON too
        x = np.random.default_rng(0).standard_normal((1, 3, 48, 48)).astype("float32")
        (expected,) = onnxruntime_session(model).run(None, {"data": x})
        (actual,) = compiled.run({"data": x})
        np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=1e-4 * float(np.max(np.abs(expected))))
    finally:
        compiled.close()


@pytest.mark.slow
def test_without_transfer_the_relatives_are_not_used(setup: tuple[Path, Path, list[str]]) -> None:
    model, db_path, _ = setup
    db = SQLiteDatabase(db_path, read_only=True)
    try:
        compiled = compile_model(model, db)
    finally:
        db.close()
    try:
        assert all(e.scheduled_by == "default" and e.transfer is None and e.transfer_miss is None
                   for e in compiled.report)
        assert "transferred" not in summary_line(compiled.report)
    finally:
        compiled.close()


@pytest.mark.slow
def test_transfer_trials_measure_commit_and_the_next_compile_hits_exactly(setup: tuple[Path, Path, list[str]],
                                                                          tmp_path: Path) -> None:
    """`transfer_trials=1`: per conv the nearest re-fitted candidate and the default schedule are
    measured (one timed call each: the test checks what is kept, never how fast), every measured
    one is committed under a `transfer` source naming where it came from, and a second compile,
    without transfer, hits every conv exactly; both match onnxruntime."""
    import shutil

    from sqlalchemy import select

    from msdb.database import models as M
    from msdb.tuner.measure.runner import LocalRunner

    model, db_path, tuned = setup
    work = tmp_path / "work.sqlite"
    shutil.copy(db_path, work)
    x = np.random.default_rng(0).standard_normal((1, 3, 48, 48)).astype("float32")
    (expected,) = onnxruntime_session(model).run(None, {"data": x})
    db = SQLiteDatabase(work)
    try:
        with LocalRunner(number=1, repeat=1, min_repeat_ms=0, num_threads=1) as runner:
            first = compile_model(model, db, transfer_trials=1, runner=runner)
        with db.engine.connect() as conn:
            sources = conn.execute(select(M.source.c.kind, M.source.c.location)).all()
        second = compile_model(model, db)
    finally:
        db.close()
    try:
        convs = [e for e in first.report if "conv2d" in e.name]
        for entry in convs:
            if entry.scheduled_by == "transferred":
                assert entry.transfer is not None and entry.transfer.measured
                assert entry.transfer.measured.startswith("measured 2: ") and "default schedule" in entry.transfer.measured
            else:
                assert entry.transfer_miss and entry.transfer_miss.startswith("the default schedule measured fastest")
        transfers = [location for kind, location in sources if kind == "transfer"]
        assert len(transfers) == 2 * len(tuned)  # one candidate and the default per conv
        assert sum(location == "default schedule" for location in transfers) == len(tuned)
        assert all(location == "default schedule" or (location.startswith(f"{db!r}: workload ")
                                                       and ", record trace " in location) for location in transfers)
        hits = {e.name: e for e in second.report if e.hit}
        assert set(tuned) <= set(hits) and all(hits[name].matched_by == "structural" for name in tuned)
        for compiled in (first, second):
            (actual,) = compiled.run({"data": x})
            np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=1e-4 * float(np.max(np.abs(expected))))
    finally:
        first.close()
        second.close()


@pytest.mark.slow
@pytest.mark.parametrize("trials", [-1, 1.5, True])
def test_bad_transfer_trials_are_one_clear_error(setup: tuple[Path, Path, list[str]], trials: object) -> None:
    from msdb.errors import MsdbError

    with pytest.raises(MsdbError, match=f"transfer_trials={trials!r} must be an int >= 0"):
        compile_model(setup[0], None, transfer_trials=trials)  # type: ignore[arg-type]


@pytest.mark.slow
def test_transfer_trials_without_a_database_or_over_a_hub_are_one_clear_error(setup: tuple[Path, Path, list[str]]
                                                                             ) -> None:
    from msdb.errors import MsdbError

    with pytest.raises(MsdbError, match="transfer_trials commits the measured candidates to the first database"):
        compile_model(setup[0], None, transfer_trials=1)
    with pytest.raises(MsdbError, match="is a hub .read-only."):
        compile_model(setup[0], ["http://127.0.0.1:9/hub", str(setup[1])], transfer_trials=1)
    read_only = SQLiteDatabase(setup[1], read_only=True)
    try:
        with pytest.raises(MsdbError, match="cannot take records"):
            compile_model(setup[0], read_only, transfer_trials=1)
    finally:
        read_only.close()


@pytest.mark.slow
def test_transfer_trials_open_a_database_given_by_path_for_writing(setup: tuple[Path, Path, list[str]],
                                                                   tmp_path: Path) -> None:
    """A first database given as a path (not an open `Database`) is opened writable when the
    compile must commit what it measured, and what it committed is there afterwards."""
    import shutil

    from msdb.tuner.measure.runner import LocalRunner

    model, db_path, tuned = setup
    work = tmp_path / "work.sqlite"
    shutil.copy(db_path, work)
    probe = SQLiteDatabase(work, read_only=True)
    before = len(probe.get_all_tuning_records())
    probe.close()
    with LocalRunner(number=1, repeat=1, min_repeat_ms=0, num_threads=1) as runner:
        compiled = compile_model(model, str(work), transfer_trials=1, runner=runner)
    compiled.close()
    db = SQLiteDatabase(work, read_only=True)
    try:
        assert len(db.get_all_tuning_records()) == before + 2 * len(tuned)
    finally:
        db.close()
