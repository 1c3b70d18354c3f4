"""The Database contract (TVM's semantics, target-aware), run on every view: memory, json,
sqlite, a union of one and an ordered union of one."""

from __future__ import annotations

import numpy as np
import pytest

from msdb.database import Database, InvalidQuery, MemoryDatabase, WorkloadNotCommitted
from msdb.ir import from_script, interpret, to_script
from msdb.records import TuningRecord, Workload

from .helpers import CPU, CPU_OTHER, GPU, matmul, postproc_only_trace, record, split_trace


def test_commit_workload_returns_the_stored_workload(view):
    db = view()
    mod = matmul()
    assert not db.has_workload(mod)
    stored = db.commit_workload(mod)
    assert isinstance(stored, Workload)
    again = db.commit_workload(matmul())  # a structurally equal, distinct module
    assert again.shash == stored.shash
    assert db.has_workload(matmul())
    assert not db.has_workload(matmul("matmul_relu"))
    assert db.get_top_k(again, 5) == []


def test_top_k_ranks_valid_records_by_mean_with_ties_in_commit_order(view):
    db = view()
    w = db.commit_workload(matmul())
    runs = {"slow": [3e-3], "fast": [1e-3, 1e-3], "tie_first": [2e-3], "tie_second": [1e-3, 3e-3],
            "failed": [1e10], "none": None, "empty": [], "partly_failed": [1e-4, 1e10]}
    for inner, (label, run_secs) in zip((1, 2, 4, 8, 16, 1, 2, 4), runs.items()):
        db.commit_tuning_record(record(w, run_secs, inner=inner))
    db.commit_tuning_record(TuningRecord(postproc_only_trace(w.mod), w, [1e-9], CPU))
    top = db.get_top_k(w, 10)
    means = [r.mean_run_secs for r in top]
    # valid: fast 1e-3, tie_first 2e-3, tie_second 2e-3, slow 3e-3, partly_failed (5e9: valid, ranked by its mean)
    assert means == [1e-3, 2e-3, 2e-3, 3e-3, pytest.approx(5e9)]
    assert [r.run_secs for r in top[1:3]] == [(2e-3,), (1e-3, 3e-3)]  # the tie keeps commit order
    assert all(r.is_valid for r in top)
    assert [r.mean_run_secs for r in db.get_top_k(w, 2)] == [1e-3, 2e-3]
    assert db.get_top_k(w, 0) == []
    with pytest.raises(InvalidQuery):
        db.get_top_k(w, -1)


def test_len_and_get_all_include_invalid_records_in_commit_order(view):
    db = view()
    w = db.commit_workload(matmul())
    runs = [[2e-3], [1e10], None, [1e-3]]
    for inner, run_secs in zip((1, 2, 4, 8), runs):
        db.commit_tuning_record(record(w, run_secs, inner=inner))
    assert len(db) == 4
    everything = db.get_all_tuning_records()
    assert [r.run_secs for r in everything] == [(2e-3,), (1e10,), None, (1e-3,)]
    assert [r.is_valid for r in everything] == [True, False, False, True]
    assert [r.trace.as_json() for r in everything] == [split_trace(w.mod, i).as_json() for i in (1, 2, 4, 8)]


def test_record_for_an_uncommitted_workload_is_refused(view):
    db = view()
    db.commit_workload(matmul())
    stranger = Workload(matmul("matmul_relu"))
    with pytest.raises(WorkloadNotCommitted, match="commit_workload"):
        db.commit_tuning_record(record(stranger, [1e-3]))
    assert len(db) == 0


def test_records_of_an_equal_workload_token_from_elsewhere_are_accepted(view):
    db = view()
    db.commit_workload(matmul())
    foreign = MemoryDatabase().commit_workload(matmul())
    db.commit_tuning_record(record(foreign, [1e-3]))
    assert [r.mean_run_secs for r in db.get_top_k(matmul(), 1)] == [1e-3]


def test_query_kinds(view):
    db = view()
    w = db.commit_workload(matmul())
    db.commit_tuning_record(record(w, [2e-3], inner=2))
    db.commit_tuning_record(record(w, [1e-3], inner=8))
    rec = db.query(matmul(), CPU, kind="record")
    assert rec.mean_run_secs == 1e-3
    assert db.query_tuning_record(matmul(), CPU).trace.as_json() == split_trace(w.mod, 8).as_json()
    sch = db.query(matmul(), CPU, kind="schedule")
    assert sch.trace.as_json()[1] == split_trace(w.mod, 8).as_json()[1]
    mod = db.query(matmul(), CPU, kind="ir_module")
    assert to_script(mod) == to_script(sch.mod)
    assert db.query(matmul("matmul_relu"), CPU, kind="record") is None
    assert db.query_schedule(matmul("matmul_relu"), CPU) is None
    assert db.query_ir_module(matmul("matmul_relu"), CPU) is None
    with pytest.raises(InvalidQuery):
        db.query(matmul(), CPU, kind="tensor")


def test_query_schedule_replays_on_the_stored_workload_and_computes_the_same(view):
    db = view()
    stored = db.commit_workload(matmul())
    db.commit_tuning_record(record(stored, [1e-3], inner=4))
    # the same workload with another block name: equal (names do not count) but the trace
    # names block "C", so the replay must use the stored module
    renamed = from_script(to_script(matmul()).replace('"C"', '"matmul_block"'))
    assert db.has_workload(renamed)
    sch = db.query_schedule(renamed, CPU)
    assert sch is not None
    rng = np.random.default_rng(0)
    a = rng.random((16, 16), dtype=np.float32)
    b = rng.random((16, 16), dtype=np.float32)
    c = np.zeros((16, 16), dtype=np.float32)
    interpret(sch.mod, a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)


def test_targets_filter_queries(view):
    db = view()
    w = db.commit_workload(matmul())
    db.commit_tuning_record(record(w, [1e-4], target=GPU, inner=1))
    db.commit_tuning_record(record(w, [2e-3], target=CPU, inner=2))
    db.commit_tuning_record(record(w, [1e-3], target=CPU_OTHER, inner=4))
    db.commit_tuning_record(record(w, [5e-5], target=None, inner=8))
    assert db.query_tuning_record(matmul(), GPU).target == GPU
    assert db.query_tuning_record(matmul(), CPU).target == CPU  # never the faster GPU or znver3 record
    assert db.query_tuning_record(matmul(), "cuda -arch=sm_90") is None
    assert db.query_tuning_record(matmul(), "llvm").mean_run_secs == 1e-3  # any llvm CPU
    assert db.query_tuning_record(matmul(), None).target is None  # TVM's "any target": the best of all
    assert [r.target for r in db.get_top_k(w, 5, "llvm")] == [CPU_OTHER, CPU]
    assert len(db.get_top_k(w, 5)) == 4


def test_dump_pruned_keeps_the_best_per_workload_and_target(view):
    db = view()
    w1 = db.commit_workload(matmul())
    w2 = db.commit_workload(matmul("matmul_relu"))
    for inner, (run_secs, target) in zip((1, 2, 4, 8), [([3e-3], CPU), ([1e-3], CPU), ([2e-3], GPU), ([1e10], GPU)]):
        db.commit_tuning_record(record(w1, run_secs, target, inner=inner))
    db.commit_tuning_record(record(w2, [4e-3], CPU, inner=2))
    dest = MemoryDatabase()
    assert db.dump_pruned(dest) == 3
    got = sorted((r.workload.shash, str(r.target), r.mean_run_secs) for r in dest.get_all_tuning_records())
    assert got == sorted([(w1.shash, str(CPU), 1e-3), (w1.shash, str(GPU), 2e-3), (w2.shash, str(CPU), 4e-3)])
    dest2 = MemoryDatabase()
    assert db.dump_pruned(dest2, top_k=2) == 4
    with pytest.raises(InvalidQuery):
        db.dump_pruned(MemoryDatabase(), top_k=0)


def test_context_stack(view):
    outer, inner = view(name="outer"), view(name="inner")
    assert Database.current() is None
    with outer:
        assert Database.current() is outer
        with inner as entered:
            assert entered is inner
            assert Database.current() is inner
        assert Database.current() is outer
    assert Database.current() is None


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["structural", "ignore-tensor", "ignore-ndarray", "anchor-block"])
def test_top_k_of_the_committed_token_in_every_mode(view, mode):
    db = view(mode)
    w = db.commit_workload(matmul("matmul_relu"))
    db.commit_tuning_record(record(w, [1e-3]))
    assert [r.mean_run_secs for r in db.get_top_k(db.commit_workload(matmul("matmul_relu")), 3)] == [1e-3]
    assert db.query_tuning_record(matmul("matmul_relu"), CPU).mean_run_secs == 1e-3


def test_anchor_block_view_shares_records_across_fusions(view):
    anchor = view("anchor-block", name="anchor")
    w = anchor.commit_workload(matmul("matmul_relu"))
    anchor.commit_tuning_record(record(w, [1e-3]))
    assert anchor.has_workload(matmul("matmul_bias"))
    found = anchor.query_tuning_record(matmul("matmul_bias"), CPU)
    assert found is not None and found.mean_run_secs == 1e-3

    structural = view("structural", name="structural")
    w = structural.commit_workload(matmul("matmul_relu"))
    structural.commit_tuning_record(record(w, [1e-3]))
    assert not structural.has_workload(matmul("matmul_bias"))
    assert structural.query_tuning_record(matmul("matmul_bias"), CPU) is None


def test_bulk_commit_is_all_or_nothing(view):
    db = view()
    w = db.commit_workload(matmul())
    stranger = Workload(matmul("matmul_bias"))
    good = [record(w, [1e-3], inner=i) for i in (1, 2)]
    with pytest.raises(WorkloadNotCommitted):
        db.commit_tuning_records(good + [record(stranger, [1e-3])])
    assert len(db) == 0
    assert db.commit_tuning_records(good) == 2
    assert len(db) == 2


def test_records_survive_reopening(persistent_view):
    view = persistent_view
    db = view()
    w = db.commit_workload(matmul())
    db.commit_tuning_record(record(w, [2e-3], CPU, inner=2))
    db.commit_tuning_record(record(w, [1e-3], GPU, inner=4))
    db.close()
    again = view()
    assert len(again) == 2
    assert again.query_tuning_record(matmul(), CPU).mean_run_secs == 2e-3
    assert again.query_tuning_record(matmul(), GPU).trace.as_json() == split_trace(w.mod, 4).as_json()
    assert again.query_tuning_record(matmul(), GPU).target == GPU
