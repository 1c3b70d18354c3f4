"""TVM 0.27 loads what msdb exports of a GPU-tuned database: the H200 record of
tests/data/cuda_tuned_h200, imported into msdb and exported again, is found by TVM's
JSONDatabase for its cuda target and its trace replays in TVM (docs/architecture.md, "CUDA")."""

from __future__ import annotations

from pathlib import Path

import pytest

from msdb.database.sql import SQLiteDatabase
from msdb.database.tvm_export import export_workdir
from msdb.database.tvm_import import import_logs

pytestmark = pytest.mark.tvm

SHIPPED = Path(__file__).resolve().parents[2] / "data" / "cuda_tuned_h200"


def test_tvm_loads_and_replays_msdbs_export_of_the_gpu_record(tmp_path: Path) -> None:
    import tvm
    from tvm.s_tir import meta_schedule as ms

    location = str(tmp_path / "gpu.sqlite")
    import_logs(location, [SHIPPED], verify=True)
    db = SQLiteDatabase(location)
    try:
        summary = export_workdir(db, tmp_path / "work_dir", top_k=1)
    finally:
        db.close()
    assert (summary.workloads, summary.records) == (1, 1)
    tvm_db = ms.database.JSONDatabase(work_dir=str(tmp_path / "work_dir"), allow_missing=False)
    (record,) = tvm_db.get_all_tuning_records()
    target = tvm.target.Target(record.target)
    assert target.kind.name == "cuda" and str(target.attrs["arch"]) == "sm_90"
    assert float(record.run_secs[0]) == pytest.approx(0.0038055620909090908)
    sch = tvm_db.query_schedule(record.workload.mod, target, "main")
    assert sch is not None
    assert "threadIdx.x" in sch.mod.script() and "shared" in sch.mod.script()
