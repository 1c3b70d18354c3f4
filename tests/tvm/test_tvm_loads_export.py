"""Real TVM 0.27 loads what `msdb export` writes and replays msdb's best records (run where
apache-tvm 0.27.0.post1 is importable; .ci/run runs this folder in a separate virtualenv)."""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest

from msdb.database.location import open_database
from msdb.database.tvm_export import export_workdir
from msdb.database.tvm_import import import_tvm
from msdb.interop.tvm.payload import payload_bytes
from msdb.ir import zoo
from msdb.records import TuningRecord
from msdb.schedule import Schedule

pytestmark = pytest.mark.tvm

ROOT = pathlib.Path(__file__).resolve().parents[2]
TEAMS = [ROOT / "tests" / "data" / "fixtures" / "tvm-0.27" / name for name in ("team_a", "team_b", "team_c")]
TARGET = {"kind": "llvm", "num-cores": 1}


def _plain(value: Any) -> Any:
    """TVM's containers and strings as plain Python (lists, str, int, float)."""
    if isinstance(value, (str, bool, int, float)) or value is None:
        return value
    if isinstance(value, dict) or hasattr(value, "items"):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)) or hasattr(value, "__len__"):
        return [_plain(v) for v in value]
    if hasattr(value, "value"):
        return value.value
    return value


def _own_workload_record(db: Any) -> None:
    """A workload msdb created itself (exported in TVM 0.27's graph format) with a schedule that
    samples, splits, reorders, parallelizes and vectorizes."""
    mod = zoo.workload("matmul")
    workload = db.commit_workload(mod)
    for run_secs, decision in (([3e-4], [4, 32]), ([2e-4], [8, 16])):
        sch = Schedule(mod)
        block = sch.get_block("C")
        i, j, k = sch.get_loops(block)
        j0, j1 = sch.split(j, sch.sample_perfect_tile(j, n=2, max_innermost_factor=32, decision=decision))
        sch.reorder(i, j0, k, j1)
        sch.parallel(i)
        sch.vectorize(j1)
        db.commit_tuning_record(TuningRecord(sch.trace, workload, run_secs, TARGET))


def _best_traces(db: Any) -> dict[str, Any]:
    """msdb's best valid trace JSON per exported workload, keyed by the workload line's shash."""
    from sqlalchemy import text

    with db.engine.connect() as conn:
        rows = conn.execute(text(
            "SELECT COALESCE(w.tvm_shash, ''), w.shash, r.trace FROM tuning_record r JOIN workload w ON w.id = "
            "r.workload_id WHERE r.is_valid ORDER BY r.mean_run_secs DESC, r.id DESC")).all()
    best = {}
    for tvm_shash, shash, trace in rows:  # worst first, so the best one is written last
        best[tvm_shash or str(int(shash, 16))] = json.loads(trace)
    return best


def test_tvm_json_database_loads_the_export_and_replays_msdb_best(tmp_path: pathlib.Path) -> None:
    import tvm
    from tvm.s_tir.meta_schedule.database import JSONDatabase

    db = open_database(tmp_path / "msdb.sqlite", create=True)
    try:
        import_tvm(db, TEAMS)
        _own_workload_record(db)
        summary = export_workdir(db, tmp_path / "work_dir", top_k=1)
        best = _best_traces(db)
    finally:
        db.close()
    assert (summary.workloads, summary.records, summary.skipped) == (6, 6, [])

    tvm_db = JSONDatabase(work_dir=str(tmp_path / "work_dir"))
    assert len(tvm_db) == 6
    target = tvm.target.Target(TARGET)
    lines = (tmp_path / "work_dir" / "database_workload.json").read_text().splitlines()
    for line in lines:
        shash, payload = json.loads(line)
        mod = tvm.ir.load_json(payload_bytes(payload).decode())
        record = tvm_db.query_tuning_record(mod, target, "main")
        assert record is not None, f"TVM finds no record for workload {shash}"
        assert _plain(record.trace.as_json()) == best[shash]
        sch = tvm_db.query_schedule(mod, target, "main")
        assert sch is not None
        assert _plain(sch.trace.as_json()) == best[shash]
