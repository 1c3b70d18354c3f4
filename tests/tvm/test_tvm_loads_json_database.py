"""Real TVM 0.27 loads the work_dir msdb writes: SQLite -> dump_pruned -> JSONDatabase, with an
msdb-created workload and the imported workloads of a real TVM log. Needs apache-tvm 0.27
(skipped without it); .ci/run's TVM stage runs `-m tvm tests/tvm`, so add this folder there to
run it in CI."""

from __future__ import annotations

from pathlib import Path

import pytest

from msdb.database import JSONDatabase, SQLiteDatabase
from msdb.ir import zoo
from msdb.records import Target, TuningRecord
from msdb.schedule import Schedule

pytestmark = pytest.mark.tvm

TEAM_B = Path(__file__).resolve().parents[1] / "data" / "fixtures" / "tvm-0.27" / "team_b"


def test_tvm_loads_and_replays_what_msdb_dumps(tmp_path):
    pytest.importorskip("tvm")
    from tvm.s_tir import meta_schedule as ms
    from tvm.target import Target as TVMTarget

    mod = zoo.workload("matmul")
    sch = Schedule(mod, seed=1)
    i, j, _ = sch.get_loops(sch.get_block("C"))
    outer, inner = sch.split(i, sch.sample_perfect_tile(i, n=2, max_innermost_factor=64, decision=[8, 16]))
    sch.reorder(outer, j, inner)
    sch.parallel(outer)
    sqlite = SQLiteDatabase(tmp_path / "t.db")
    workload = sqlite.commit_workload(mod)
    cpu = Target({"kind": "llvm", "num-cores": 1, "mtriple": "x86_64-pc-linux-gnu"})
    sqlite.commit_tuning_records([TuningRecord(sch.trace, workload, [1e-3, 1.1e-3], cpu),
                                  TuningRecord(sch.trace, workload, [1e10], cpu)])
    team = JSONDatabase(work_dir=TEAM_B, allow_missing=False)
    for w in team.workloads():
        sqlite.commit_workload(w)
    sqlite.commit_tuning_records(team.get_all_tuning_records())
    assert sqlite.dump_pruned(JSONDatabase(work_dir=tmp_path / "out"), top_k=3) == 7
    sqlite.close()

    loaded = ms.database.JSONDatabase(work_dir=str(tmp_path / "out"))
    assert len(loaded) == 7
    scripts = {}
    for record in loaded.get_all_tuning_records():
        scripts.setdefault(record.workload.mod.script(), record.workload)
    assert len(scripts) == 3
    for stored in scripts.values():
        assert len(loaded.get_top_k(stored, 3)) >= 1
        assert loaded.query_schedule(stored.mod, TVMTarget({"kind": "llvm", "num-cores": 1}), "main") is not None
