"""A record msdb's tuner measured on a GPU (tests/data/cuda_tuned_h200: 64 trials of a 4096^2
matmul on an H200, exported by `msdb export`) travels like any TVM log: it imports with its trace
replayed, keeps its `cuda` target, and its schedule lowers to CUDA C that NVRTC and ptxas accept
for the record's arch, with no GPU here (docs/architecture.md, "CUDA")."""

from __future__ import annotations

from pathlib import Path

import pytest

from msdb.database.sql import SQLiteDatabase
from msdb.database.tvm_import import import_logs
from msdb.records import TuningRecord
from msdb.schedule.schedule import Schedule
from msdb.tuner.codegen.cuda import build_cuda

SHIPPED = Path(__file__).resolve().parents[2] / "data" / "cuda_tuned_h200"


@pytest.fixture(scope="module")
def best(tmp_path_factory: pytest.TempPathFactory) -> TuningRecord:
    location = str(tmp_path_factory.mktemp("db") / "gpu.sqlite")
    summary = import_logs(location, [SHIPPED], verify=True)
    assert (summary.workloads_new, summary.records_new, summary.replayed) == (1, 1, 1), summary.line()
    db = SQLiteDatabase(location)
    try:
        (record,) = db.get_all_tuning_records()
    finally:
        db.close()
    return record


def test_the_gpu_tuned_record_keeps_its_cuda_target_and_time(best: TuningRecord) -> None:
    record = best
    assert record.target.kind == "cuda" and record.target.config["arch"] == "sm_90"
    assert record.mean_run_secs == pytest.approx(0.0038055620909090908)


@pytest.mark.slow  # NVRTC and ptxas on a 4096^2 matmul kernel: a few seconds
def test_the_gpu_tuned_schedule_compiles_to_a_cubin_without_a_gpu(best: TuningRecord) -> None:
    record = best
    sch = Schedule(record.workload.mod)
    record.trace.apply_to_schedule(sch, remove_postproc=False)
    built = build_cuda(sch.mod, record.target)
    assert built.arch == "sm_90" and built.cubin[:4] == b"\x7fELF"
    (kernel,) = built.kernels
    # what the H200 ran: 2048 blocks of 256 threads, 12 KiB of shared memory, no spills
    assert kernel["grid"] == [2048, 1, 1] and kernel["block"] == [256, 1, 1]
    assert kernel["shared_bytes"] == 12288 and kernel["spill_stores"] == 0
