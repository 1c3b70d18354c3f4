"""`get_top_k` takes TVM's keyword name, `top_k`, on every view; the positional form
keeps working. Its checks are `Database.get_top_k`'s, once for every view."""

from __future__ import annotations

import pytest

from msdb.database import Database, InvalidQuery, MemoryDatabase, ScheduleFnDatabase, TransferDatabase
from msdb.records import Target, Workload

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


class _OnlyTheQuery(Database):
    """A view that implements the query alone (`_top_k`): the checks are `Database.get_top_k`'s."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[tuple[object, int, object]] = []

    def _top_k(self, workload, top_k, target):
        self.asked.append((workload, top_k, target))
        return []

    def has_workload(self, mod):
        return False

    def commit_workload(self, mod):
        raise NotImplementedError

    def commit_tuning_record(self, record):
        raise NotImplementedError

    def get_all_tuning_records(self):
        return []

    def __len__(self):
        return 0


def test_get_top_k_checks_and_coerces_once_for_a_view_that_implements_only_the_query():
    db = _OnlyTheQuery()
    with pytest.raises(TypeError, match="get_top_k: top_k must be an int, got bool"):
        db.get_top_k(matmul(), True)
    with pytest.raises(InvalidQuery, match="get_top_k: top_k must be >= 0, got -1"):
        db.get_top_k(matmul(), -1)
    assert db.get_top_k(matmul(), 0, "llvm") == [] and db.asked == []  # 0 answers nothing, unasked
    assert db.get_top_k(matmul(), 2, "llvm") == []
    [(workload, k, target)] = db.asked
    assert isinstance(workload, Workload) and k == 2 and target == Target("llvm")
    db.get_top_k(matmul(), 1)
    assert db.asked[-1][2] is None  # no target: any target, as in TVM


@pytest.mark.slow
@pytest.mark.parametrize("bad", ["2", 2.0, False])
def test_every_view_refuses_a_top_k_that_is_not_an_int(view, bad):
    db = view()
    w = db.commit_workload(matmul())
    with pytest.raises(TypeError, match=f"get_top_k: top_k must be an int, got {type(bad).__name__}"):
        db.get_top_k(w, bad)


@pytest.mark.parametrize("make", [lambda: ScheduleFnDatabase(lambda sch: True),
                                  lambda: TransferDatabase(MemoryDatabase())], ids=["schedule_fn", "transfer"])
def test_the_views_that_store_nothing_check_top_k_too(make):
    db = make()
    with pytest.raises(InvalidQuery, match="top_k must be >= 0, got -1"):
        db.get_top_k(matmul(), -1)
    with pytest.raises(TypeError, match="top_k must be an int, got str"):
        db.get_top_k(matmul(), "1")
    assert db.get_top_k(matmul(), 0) == []
