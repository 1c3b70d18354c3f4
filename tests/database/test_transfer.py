"""`TransferDatabase` (docs/architecture.md, "Transfer"): a workload nobody tuned is
answered with its nearest relatives' records re-fitted to it, for the asked target only, with
where each came from and no latency of its own; a relative that does not fit is skipped with its
reason; a workload with records of its own gets none; it layers last in an ordered union."""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

from msdb.database import Database, InvalidQuery, MemoryDatabase, OrderedUnionDatabase, SQLiteDatabase, \
    UnsupportedOperation
from msdb.database.transfer import TransferDatabase, TransferredRecord, family_distance
from msdb.hashing import family_key
from msdb.ir import interpret, zoo
from msdb.records import TuningRecord, Workload
from msdb.schedule import Schedule
from tests.tuner._util import random_arrays

from .helpers import CPU, CPU_OTHER, GPU, matmul, record


@pytest.fixture(params=["memory", "sqlite"])
def make_db(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], Database]:
    opened: list[Database] = []

    def make() -> Database:
        db: Database = MemoryDatabase() if request.param == "memory" else SQLiteDatabase(tmp_path / "t.sqlite")
        opened.append(db)
        return db

    yield make  # type: ignore[misc]
    for db in opened:
        db.close()


def fixed_split_record(workload: Workload, factors: list[int]) -> TuningRecord:
    """A valid record whose split has constant factors: it fits no matmul whose extent they do not cover."""
    sch = Schedule(workload.mod)
    i, _j, _k = sch.get_loops(sch.get_block("C"))
    sch.split(i, factors)
    return TuningRecord(sch.trace, workload, [1e-6], CPU)


def fill(db: Database) -> dict[int, Workload]:
    """Matmuls 32 and 128 with CPU records, 64 with a GPU record only, 24 with a CPU record that
    fits nothing bigger than 32 (a constant split [4, 8])."""
    stored = {n: db.commit_workload(matmul(n=n)) for n in (32, 128, 64, 24)}
    db.commit_tuning_records([record(stored[32], [1e-3]), record(stored[128], [2e-3], inner=8),
                              record(stored[64], [1e-4], GPU), fixed_split_record(stored[24], [4, 8])])
    return stored


def test_distance_is_the_sum_of_log_ratios() -> None:
    assert family_distance((0, 32, 16), (0, 16, 16)) == pytest.approx(math.log(33 / 17))
    assert family_distance((1, 2), (2, 1)) == family_distance((2, 1), (1, 2))
    assert family_distance((1, 2), (1, 2, 3)) == math.inf


def test_nearest_relatives_answer_refitted_without_a_latency(make_db: Callable[[], Database]) -> None:
    db = make_db()
    stored = fill(db)
    view = TransferDatabase(db, neighbours=2)
    asked = Workload(matmul(n=16))
    top = view.get_top_k(asked, 5, CPU)
    # 24 is nearest, 32 next; 64 has only a GPU record; 128 is beyond the two neighbours
    assert [r.transfer.workload.shash for r in top] == [stored[24].shash, stored[32].shash]  # type: ignore[attr-defined]
    for transferred in top:
        assert isinstance(transferred, TransferredRecord)
        assert transferred.workload.shash == asked.shash and transferred.target == CPU
        assert transferred.run_secs is None and not transferred.is_valid  # never another workload's latency
        origin = transferred.transfer
        assert origin.distance == pytest.approx(family_distance(family_key(asked.mod).extents,
                                                                family_key(origin.workload.mod).extents))
        assert origin.record.workload.shash == origin.workload.shash and origin.record.run_secs is not None
    assert top[1].trace_json[1] == [[2, [4, 4]]]  # the [8, 4] tile of 32 re-fitted to 16
    record_ = view.query_tuning_record(asked, CPU)
    assert record_ is not None and record_.trace_json == top[0].trace_json
    # the re-fitted schedule computes the matmul
    sch = view.query_schedule(asked, CPU)
    assert sch is not None
    arrays = random_arrays(asked.mod, seed=0)
    expected = [a.copy() for a in arrays]
    interpret(asked.mod, *expected)
    interpret(sch.mod, *arrays)
    np.testing.assert_allclose(arrays[-1], expected[-1], rtol=1e-5)
    assert view.query_ir_module(asked, CPU) is not None


def test_a_relative_that_does_not_fit_is_skipped_with_its_reason(make_db: Callable[[], Database],
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    db = make_db()
    stored = fill(db)
    view = TransferDatabase(db, neighbours=3)
    with caplog.at_level(logging.INFO, logger="msdb.database.transfer"):
        answer = view.answer(matmul(n=64), CPU)  # 64's own record is for the GPU: transferred on the CPU
    assert [r.transfer.workload.shash for r in answer.records] == [stored[32].shash, stored[128].shash]
    (skip,) = answer.skipped
    assert skip.workload.shash == stored[24].shash and "multiply to 32, less than its extent 64" in skip.reason
    assert skip.reason in caplog.text


def test_never_another_targets_record_and_never_over_its_own(make_db: Callable[[], Database]) -> None:
    db = make_db()
    stored = fill(db)
    view = TransferDatabase(db)
    assert view.query_tuning_record(matmul(n=16), GPU).transfer.workload.shash == stored[64].shash  # type: ignore[union-attr]
    assert view.answer(matmul(n=16), "cuda -arch=sm_70").reason == "no relative has a valid record for this target"
    assert view.get_top_k(matmul(n=16), 1, CPU_OTHER) == []
    answer = view.answer(stored[32], CPU)
    assert answer.records == () and answer.reason == "the workload has records of its own"
    assert view.answer(zoo.build("GMM", 1, 16, 16, 16), CPU).reason == "no relatives"  # another family
    # matmul+relu has the matmul as anchor block: a relative, re-fitted through the anchor route
    fused = view.answer(matmul("matmul_relu", n=16), CPU).records[0]
    assert fused.transfer.route == "anchor" and fused.transfer.workload.shash == stored[24].shash


def test_layered_last_in_an_ordered_union(make_db: Callable[[], Database]) -> None:
    shared = make_db()
    stored = fill(shared)
    local = MemoryDatabase()
    union = OrderedUnionDatabase(local, shared, TransferDatabase(shared))
    own = union.query_tuning_record(stored[32], CPU)
    assert own is not None and not isinstance(own, TransferredRecord) and own.mean_run_secs == 1e-3
    transferred = union.query_tuning_record(matmul(n=16), CPU)
    assert isinstance(transferred, TransferredRecord)
    assert union.get_top_k(matmul(n=16), 1, CPU)[0].trace_json == transferred.trace_json
    assert union.query_schedule(matmul(n=16), CPU) is not None
    assert union.get_measured(matmul(n=16), CPU) == []  # nothing measured: a tuner still measures it
    union.close()


@pytest.mark.parametrize("args,error,match", [
    (("not a database",), TypeError, "source must be a Database view"),
    ((MemoryDatabase(), 0), InvalidQuery, "neighbours=0"),
    ((MemoryDatabase(), 1.5), InvalidQuery, "neighbours=1.5"),
])
def test_bad_arguments_are_one_clear_error(args: tuple[Any, ...], error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        TransferDatabase(*args)
    with pytest.raises(TypeError, match="postprocess must be callable"):
        TransferDatabase(MemoryDatabase(), postprocess="llvm")  # type: ignore[arg-type]


def test_it_stores_nothing() -> None:
    view = TransferDatabase(MemoryDatabase())
    with pytest.raises(UnsupportedOperation, match="stores nothing"):
        view.commit_workload(matmul())
    assert len(view) == 0 and view.get_all_tuning_records() == [] and not view.has_workload(matmul())
    with pytest.raises(InvalidQuery):
        view.get_top_k(matmul(), -1, CPU)


def test_two_functions_with_one_anchor_block_get_their_own_answers() -> None:
    """Under anchor-block equality a plain matmul and a matmul + relu are one workload to look
    up, but each answer holds schedules of the module asked: the second is not served the first's
    cached answer (which has no relu)."""
    db = MemoryDatabase()
    stored = db.commit_workload(matmul(n=32))
    db.commit_tuning_record(record(stored, [1e-3]))
    view = TransferDatabase(db, module_equality="anchor-block")
    plain, fused = Workload(matmul(n=16)), Workload(matmul("matmul_relu", n=16))
    first, second = view.answer(plain, CPU), view.answer(fused, CPU)
    assert first.records and second.records and first is not second
    assert first.records[0].workload.shash == plain.shash and second.records[0].workload.shash == fused.shash
    from msdb.ir import to_script

    assert "T.max(" in to_script(second.schedules[0].mod) and "T.max(" not in to_script(first.schedules[0].mod)


def test_a_union_does_not_let_a_copy_without_records_hide_a_relatives_record(tmp_path: Path) -> None:
    local, shared = MemoryDatabase(), MemoryDatabase()
    local.commit_workload(matmul(n=32))  # stored, no valid record (as failed trials leave it)
    best = shared.commit_workload(matmul(n=32))
    shared.commit_tuning_record(record(best, [1e-3]))
    union = OrderedUnionDatabase(local, shared)
    (relative,) = union.relatives(matmul(n=16), CPU)
    assert relative.best is not None and list(relative.best.run_secs or []) == [1e-3]
    assert TransferDatabase(union).get_top_k(matmul(n=16), 1, CPU)


def test_a_view_that_cannot_list_relatives_says_so() -> None:
    from msdb.database import ScheduleFnDatabase

    view = TransferDatabase(ScheduleFnDatabase(lambda sch: True))
    assert "cannot list relatives" in (view.answer(matmul(n=16), CPU).reason or "")


def test_unmeasured_transfers_stay_within_a_size_ratio() -> None:
    """A relative whose sizes are more than `max_ratio` times apart is not transferred unless the
    caller measures what it gets (`max_ratio=math.inf`): re-fitted across such a gap, a schedule
    was measured up to 10x slower than the default schedule."""
    from msdb.database.transfer import MAX_EXTENT_RATIO, extent_ratio

    db = MemoryDatabase()
    far = db.commit_workload(matmul(n=128))
    db.commit_tuning_record(record(far, [2e-3], inner=8))
    asked = Workload(matmul(n=16))
    assert extent_ratio(family_key(asked.mod).extents, family_key(far.mod).extents) > MAX_EXTENT_RATIO
    answer = TransferDatabase(db).answer(asked, CPU)
    assert not answer.records and "more than 4x apart" in (answer.reason or "")
    anywhere = TransferDatabase(db, max_ratio=math.inf).answer(asked, CPU)
    assert [r.transfer.workload.shash for r in anywhere.records] == [far.shash]
    with pytest.raises(InvalidQuery, match="max_ratio=0.5 must be a number >= 1"):
        TransferDatabase(db, max_ratio=0.5)
