"""JSONDatabase: TVM's work_dir files, read from real TVM 0.27 logs and written byte for byte
as TVM writes them; bad lines reported with file:line; appends from several writers."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from msdb.database import DatabaseOpenError, JSONDatabase
from msdb.database.json_database import RECORD_FILE, WORKLOAD_FILE
from msdb.records import Target

from .helpers import CPU, GPU, matmul, record

FIXTURES = Path(__file__).resolve().parents[1] / "data" / "fixtures"
TEAM_A = FIXTURES / "tvm-0.27" / "team_a"
TEAM_B = FIXTURES / "tvm-0.27" / "team_b"


def test_real_tvm_logs_load_without_errors():
    db = JSONDatabase(work_dir=TEAM_A, allow_missing=False)
    assert len(db) == 128
    assert len(db.workloads()) == 2
    assert db.load_errors == []
    tvm_target = Target({"keys": ["cpu"], "kind": "llvm", "mtriple": "x86_64-conda-linux-gnu", "num-cores": 1, "tag": ""})
    for workload in db.workloads():
        best = db.get_top_k(workload, 1)[0]
        assert best.target == tvm_target
        valid = [r for r in db.get_all_tuning_records() if r.workload is workload and r.is_valid]
        assert best.mean_run_secs == min(r.mean_run_secs for r in valid)
        assert db.query_schedule(workload.mod, "llvm -mcpu=cascadelake") is not None


@pytest.mark.parametrize("generation", ["team_a_pre0.24", "team_a_pre0.17"])
def test_older_tvm_generations_load(generation):
    db = JSONDatabase(work_dir=FIXTURES / "tvm-legacy" / generation, allow_missing=False)
    assert len(db) == 128 and db.load_errors == []
    workload = db.workloads()[0]
    assert db.query_schedule(workload.mod, None) is not None


def test_copying_a_tvm_work_dir_reproduces_its_files_byte_for_byte(tmp_path):
    source = JSONDatabase(work_dir=TEAM_A, allow_missing=False)
    copy = JSONDatabase(work_dir=tmp_path)
    for workload in source.workloads():
        copy.commit_workload(workload)
    copy.commit_tuning_records(source.get_all_tuning_records())
    for name in (WORKLOAD_FILE, RECORD_FILE):
        assert (tmp_path / name).read_bytes() == (TEAM_A / name).read_bytes()


def test_merging_two_teams_dedups_the_shared_workload_and_rebases_indices(tmp_path):
    merged = JSONDatabase(work_dir=tmp_path)
    for team in (TEAM_A, TEAM_B):
        JSONDatabase(work_dir=team, allow_missing=False).dump_pruned(merged, top_k=1000)
    assert len(merged.workloads()) == 3  # GMM is the same workload in both logs
    reopened = JSONDatabase(work_dir=tmp_path)
    assert reopened.load_errors == []
    assert len(reopened) == len(merged)
    gmm = [w for w in reopened.workloads() if len(reopened.get_top_k(w, 1000)) > 64]
    assert len(gmm) == 1


def test_written_lines_use_tvms_spelling(tmp_path):
    db = JSONDatabase(work_dir=tmp_path)
    w = db.commit_workload(matmul())
    db.commit_tuning_record(record(w, [1e-3, 1e10], GPU))
    line = (tmp_path / RECORD_FILE).read_text()
    assert line.startswith('[0,[[[["GetSBlock",[],["C","main"],["b0"]]')
    assert ',[0.0010000000000000000208,10000000000],{"arch":"sm_80","keys":["cuda","gpu"],"kind":"cuda",' in line
    assert line.endswith('"thread_warp_size":32},null]]\n')


def test_bad_lines_are_reported_with_file_and_line_and_the_rest_loads(tmp_path):
    shutil.copy(TEAM_A / WORKLOAD_FILE, tmp_path / WORKLOAD_FILE)
    good = (TEAM_A / RECORD_FILE).read_text().splitlines()
    lines = [good[0], good[1][: len(good[1]) // 2], "not json at all", "", good[2].replace("[0,", "[7,", 1),
             good[3].replace('"kind":"llvm"', '"kind":"llvmm"'), good[4]]
    (tmp_path / RECORD_FILE).write_text("\n".join(lines) + "\n")
    db = JSONDatabase(work_dir=tmp_path)
    assert len(db) == 2
    path = str(tmp_path / RECORD_FILE)
    reported = [(e.path, e.line) for e in db.load_errors]
    assert reported == [(path, 2), (path, 3), (path, 4), (path, 5), (path, 6)]
    messages = [str(e) for e in db.load_errors]
    assert messages[2] == f"{path}:4: empty line (TVM 0.27 crashes on it)"
    assert messages[3] == f"{path}:5: record points at workload index 7, but {WORKLOAD_FILE} has 2 workload(s)"
    assert "unknown target kind 'llvmm'" in messages[4]


def test_an_undecodable_workload_line_spoils_only_its_records(tmp_path):
    lines = (TEAM_A / WORKLOAD_FILE).read_text().splitlines()
    (tmp_path / WORKLOAD_FILE).write_text('["1","bm90IGEgcGF5bG9hZA=="]\n' + lines[1] + "\n")
    shutil.copy(TEAM_A / RECORD_FILE, tmp_path / RECORD_FILE)
    db = JSONDatabase(work_dir=tmp_path)
    assert len(db.workloads()) == 1
    assert len(db) == 64
    assert str(db.load_errors[0]).startswith(f"{tmp_path / WORKLOAD_FILE}:1: workload payload")
    assert len(db.load_errors) == 1 + 64


def test_appends_from_two_writers_point_at_the_right_workload(tmp_path):
    first, second = JSONDatabase(work_dir=tmp_path), JSONDatabase(work_dir=tmp_path)
    w_second = second.commit_workload(matmul("matmul_relu"))  # line 0, unknown to `first`
    second.commit_tuning_record(record(w_second, [2e-3], CPU))
    w_first = first.commit_workload(matmul())  # must become line 1, not line 0
    first.commit_tuning_record(record(w_first, [1e-3], CPU))
    assert first.commit_workload(matmul("matmul_relu")).shash == w_second.shash  # seen while appending
    again = JSONDatabase(work_dir=tmp_path)
    assert again.load_errors == []
    assert again.query_tuning_record(matmul(), CPU).mean_run_secs == 1e-3
    assert again.query_tuning_record(matmul("matmul_relu"), CPU).mean_run_secs == 2e-3
    assert len((tmp_path / WORKLOAD_FILE).read_text().splitlines()) == 2


def test_a_half_written_line_spoils_only_itself(tmp_path):
    db = JSONDatabase(work_dir=tmp_path)
    w = db.commit_workload(matmul())
    db.commit_tuning_record(record(w, [1e-3], CPU))
    with open(tmp_path / RECORD_FILE, "a") as handle:
        handle.write('[0,[[[["GetSBlock",[],["C"')  # a writer killed mid-line
    with open(tmp_path / WORKLOAD_FILE, "a") as handle:
        handle.write('["12345","AAAA')
    w2 = db.commit_workload(matmul("matmul_relu"))
    db.commit_tuning_record(record(w, [2e-3], CPU, inner=2))
    db.commit_tuning_record(record(w2, [3e-3], CPU))
    again = JSONDatabase(work_dir=tmp_path)
    assert [(e.path.rsplit("/", 1)[1], e.line) for e in again.load_errors] == [(WORKLOAD_FILE, 2), (RECORD_FILE, 2)]
    assert len(again) == 3
    assert again.query_tuning_record(matmul("matmul_relu"), CPU).mean_run_secs == 3e-3


def test_missing_files(tmp_path):
    with pytest.raises(DatabaseOpenError, match="does not exist"):
        JSONDatabase(work_dir=tmp_path / "nothing", allow_missing=False)
    JSONDatabase(work_dir=tmp_path / "new")
    assert (tmp_path / "new" / WORKLOAD_FILE).exists() and (tmp_path / "new" / RECORD_FILE).exists()
    with pytest.raises(DatabaseOpenError, match="work_dir"):
        JSONDatabase()
