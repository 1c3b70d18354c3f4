"""`get_top_k` takes TVM's keyword name, `top_k`, on every view (issue 16); the positional form
keeps working."""

from __future__ import annotations

import pytest

from msdb.database import InvalidQuery, ScheduleFnDatabase

from .helpers import matmul, record


def test_get_top_k_takes_tvms_keyword_on_every_view(view):
    db = view()
    w = db.commit_workload(matmul())
    for inner, mean in zip((1, 2, 4), (3e-3, 1e-3, 2e-3)):
        db.commit_tuning_record(record(w, [mean], inner=inner))
    assert [r.mean_run_secs for r in db.get_top_k(w, top_k=2)] == [1e-3, 2e-3]
    assert [r.mean_run_secs for r in db.get_top_k(workload=w, top_k=1, target=None)] == [1e-3]
    assert [r.mean_run_secs for r in db.get_top_k(w, 2)] == [1e-3, 2e-3]  # positional, as before
    with pytest.raises(InvalidQuery, match="top_k must be >= 0, got -1"):
        db.get_top_k(w, top_k=-1)


def test_get_top_k_keyword_on_a_schedule_function_view():
    db = ScheduleFnDatabase(lambda sch: True)
    assert db.get_top_k(matmul(), top_k=3) == [] and db.get_top_k(matmul(), 3) == []
