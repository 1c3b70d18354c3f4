"""Unions are target-aware (apache/tvm#15549), answer get_top_k/has_workload, commit to their
first child; ScheduleFnDatabase and Database.create."""

from __future__ import annotations

import pytest

from msdb.database import (
    Database, DatabaseError, JSONDatabase, MemoryDatabase, OrderedUnionDatabase, ScheduleFnDatabase, SQLiteDatabase,
    UnionDatabase, UnknownDatabaseKind, UnsupportedOperation,
)

from .helpers import CPU, GPU, matmul, record, split_trace


@pytest.fixture
def cpu_and_gpu(tmp_path):
    cpu = SQLiteDatabase(tmp_path / "cpu.db")
    w = cpu.commit_workload(matmul())
    cpu.commit_tuning_record(record(w, [2e-3], CPU, inner=2))
    gpu = MemoryDatabase()
    w = gpu.commit_workload(matmul())
    gpu.commit_tuning_record(record(w, [1e-5], GPU, inner=4))  # much faster, wrong device for CPU
    yield cpu, gpu
    cpu.close()


@pytest.mark.parametrize("union", [UnionDatabase, OrderedUnionDatabase])
def test_a_cpu_query_never_gets_the_gpu_record(cpu_and_gpu, union):
    cpu, gpu = cpu_and_gpu
    for db in (union(gpu, cpu), union(cpu, gpu)):
        assert db.query_tuning_record(matmul(), CPU).target == CPU
        assert db.query_tuning_record(matmul(), GPU).target == GPU
        assert [r.target for r in db.get_top_k(matmul(), 5, CPU)] == [CPU]
        assert db.query_schedule(matmul(), CPU).trace.as_json()[1] == split_trace(matmul(), 2).as_json()[1]
        assert db.query_tuning_record(matmul(), "cuda -arch=sm_70") is None
        assert db.has_workload(matmul()) and not db.has_workload(matmul("matmul_relu"))
        assert len(db) == 2


def test_union_takes_the_best_mean_and_ordered_union_the_first_answer():
    first, second = MemoryDatabase(), MemoryDatabase()
    for db, secs in ((first, 2e-3), (second, 1e-3)):
        w = db.commit_workload(matmul())
        db.commit_tuning_record(record(w, [secs], CPU))
    assert UnionDatabase(first, second).query_tuning_record(matmul(), CPU).mean_run_secs == 1e-3
    assert OrderedUnionDatabase(first, second).query_tuning_record(matmul(), CPU).mean_run_secs == 2e-3
    assert [r.mean_run_secs for r in UnionDatabase(first, second).get_top_k(matmul(), 5)] == [1e-3, 2e-3]
    assert [r.mean_run_secs for r in OrderedUnionDatabase(first, second).get_top_k(matmul(), 5)] == [2e-3]
    assert [r.mean_run_secs for r in OrderedUnionDatabase(MemoryDatabase(), second).get_top_k(matmul(), 5)] == [1e-3]


def test_union_ties_go_to_the_earlier_child():
    first, second = MemoryDatabase(), MemoryDatabase()
    for db, inner in ((first, 2), (second, 4)):
        w = db.commit_workload(matmul())
        db.commit_tuning_record(record(w, [1e-3], CPU, inner=inner))
    best = UnionDatabase(second, first).query_tuning_record(matmul(), CPU)
    assert best.trace.as_json() == split_trace(matmul(), 4).as_json()


def test_unions_commit_to_their_first_child(tmp_path):
    local, shared = JSONDatabase(work_dir=tmp_path), MemoryDatabase()
    layered = OrderedUnionDatabase(local, shared)
    w = layered.commit_workload(matmul())
    layered.commit_tuning_record(record(w, [1e-3], CPU))
    assert len(local) == 1 and len(shared) == 0
    with pytest.raises(DatabaseError):
        UnionDatabase()


def test_schedule_fn_database_answers_last_in_an_ordered_union():
    seen = []

    def schedule(sch) -> bool:
        seen.append(sch.mod.attrs["task_name"])
        if seen[-1] != "dense":
            return False
        block = sch.get_block("C")
        sch.parallel(sch.get_loops(block)[0])
        return True

    fallback = ScheduleFnDatabase(schedule)
    tuned = MemoryDatabase()
    w = tuned.commit_workload(matmul("matmul_relu"))
    tuned.commit_tuning_record(record(w, [1e-3], CPU))
    layered = OrderedUnionDatabase(tuned, fallback)
    assert layered.query_schedule(matmul("matmul_relu"), CPU, "relu").trace.as_json() == \
        split_trace(matmul("matmul_relu"), 4).as_json()
    sch = layered.query_schedule(matmul(), CPU, "dense")
    assert [inst.kind for inst in sch.trace.insts] == ["GetSBlock", "GetLoops", "Parallel"]
    assert layered.query_schedule(matmul(), CPU, "conv") is None
    assert seen == ["dense", "conv"]
    rec = fallback.query_tuning_record(matmul(), CPU, "dense")
    assert rec is not None and not rec.is_valid
    assert not fallback.has_workload(matmul()) and len(fallback) == 0 and fallback.get_top_k(matmul(), 3) == []
    with pytest.raises(UnsupportedOperation):
        fallback.commit_workload(matmul())


def test_create(tmp_path):
    assert isinstance(Database.create("memory"), MemoryDatabase)
    assert isinstance(Database.create("json", work_dir=tmp_path / "j"), JSONDatabase)
    sqlite = Database.create("sqlite", tmp_path / "s.db", module_equality="anchor-block")
    assert isinstance(sqlite, SQLiteDatabase) and sqlite.module_equality == "anchor-block"
    sqlite.close()
    assert isinstance(Database.create("union", MemoryDatabase()), UnionDatabase)
    assert isinstance(Database.create("ordered_union", MemoryDatabase()), OrderedUnionDatabase)
    assert isinstance(Database.create(lambda sch: False), ScheduleFnDatabase)
    with pytest.raises(UnknownDatabaseKind, match="'postgres'"):
        Database.create("postgres")
    with pytest.raises(ValueError, match=r"unknown (module equality|structural hash mode).*'exact'"):
        MemoryDatabase("exact")
