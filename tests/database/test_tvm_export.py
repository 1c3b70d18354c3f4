"""Exporting a database as a TVM 0.27 work_dir: best N per workload and target, imported payloads
unchanged, msdb's own workloads encoded, atomic replacement."""

from __future__ import annotations

import json
import pathlib

import pytest

from msdb.hashing import structural_equal, structural_hash
from msdb.database.catalog import NoRecordMatched
from msdb.database.location import open_database
from msdb.database.tvm_export import ExportError, export_workdir
from msdb.database.tvm_import import import_tvm
from msdb.interop.tvm.payload import decode_workload
from msdb.ir import zoo
from msdb.records import TuningRecord
from msdb.schedule import Schedule
from tests.cli.helpers import (
    RECORD_FILE, TEAMS, WORKLOAD_FILE, best_mean_by_tvm_shash, copy_team, edit_lines, legacy_payload, snapshot,
    with_unknown_node,
)


@pytest.fixture(scope="module")
def teams_db(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    path = tmp_path_factory.mktemp("export") / "teams.sqlite"
    db = open_database(path, create=True)
    try:
        import_tvm(db, list(TEAMS.values()))
    finally:
        db.close()
    return path


def _export(db_path: pathlib.Path, out: pathlib.Path, **options):
    db = open_database(db_path)
    try:
        return export_workdir(db, out, **options)
    finally:
        db.close()


def _lines(path: pathlib.Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if line.strip()]


def test_best_record_per_workload_with_original_bytes(teams_db: pathlib.Path, tmp_path: pathlib.Path) -> None:
    summary = _export(teams_db, tmp_path / "out")
    assert (summary.workloads, summary.records, summary.pairs) == (5, 5, 5)
    workload_lines = _lines(tmp_path / "out" / WORKLOAD_FILE)
    originals = {line for team in TEAMS.values() for line in _lines(team / WORKLOAD_FILE)}
    assert set(workload_lines) <= originals  # payload and TVM's shash byte for byte
    original_bodies = {line.split(",", 1)[1] for team in TEAMS.values() for line in _lines(team / RECORD_FILE)}
    best = best_mean_by_tvm_shash(*TEAMS.values())
    for line in _lines(tmp_path / "out" / RECORD_FILE):
        index, body = line.split(",", 1)
        assert body in original_bodies  # trace, run_secs, target and args as TVM wrote them
        record = json.loads(line)
        shash = json.loads(workload_lines[record[0]])[0]
        run_secs = record[1][1]
        assert sum(run_secs) / len(run_secs) == pytest.approx(best[shash], rel=1e-15)


def test_export_then_import_adds_nothing(teams_db: pathlib.Path, tmp_path: pathlib.Path) -> None:
    _export(teams_db, tmp_path / "out", top_k=3)
    before = snapshot(teams_db)
    db = open_database(teams_db)
    try:
        summary = import_tvm(db, [tmp_path / "out"])
    finally:
        db.close()
    assert (summary.records_new, summary.records_duplicate, summary.workloads_new) == (0, 15, 0)
    assert snapshot(teams_db)[1:] == before[1:]


def test_top_k_orders_by_mean(teams_db: pathlib.Path, tmp_path: pathlib.Path) -> None:
    _export(teams_db, tmp_path / "out", top_k=4)
    by_workload: dict[int, list[float]] = {}
    for line in _lines(tmp_path / "out" / RECORD_FILE):
        record = json.loads(line)
        by_workload.setdefault(record[0], []).append(sum(record[1][1]) / len(record[1][1]))
    assert sorted(by_workload) == [0, 1, 2, 3, 4]
    assert all(len(means) == 4 and means == sorted(means) for means in by_workload.values())


def test_target_filter(teams_db: pathlib.Path, tmp_path: pathlib.Path) -> None:
    assert _export(teams_db, tmp_path / "llvm", target="llvm -num-cores=8").records == 5  # num-cores is a knob
    with pytest.raises(NoRecordMatched, match=r"no record matched target 'cuda -arch=sm_80' in .*teams.*; its records "
                                               r"are for: llvm -num-cores=1; nothing was written$"):
        _export(teams_db, tmp_path / "cuda", target={"kind": "cuda", "arch": "sm_80"})
    assert not (tmp_path / "cuda").exists()
    assert _export(teams_db, tmp_path / "skx", target="llvm -mcpu=skylake-avx512").records == 5  # records say no mcpu


def test_workloads_msdb_created_are_encoded_for_tvm(tmp_path: pathlib.Path) -> None:
    db_path = tmp_path / "own.sqlite"
    db = open_database(db_path, create=True)
    try:
        mod = zoo.workload("matmul")
        workload = db.commit_workload(mod)
        sch = Schedule(mod)
        block = sch.get_block("C")
        i, _, _ = sch.get_loops(block)
        sch.split(i, [None, 8])
        db.commit_tuning_record(TuningRecord(sch.trace, workload, [1e-4], "llvm -num-cores=1"))
        summary = export_workdir(db, tmp_path / "out")
    finally:
        db.close()
    assert (summary.workloads, summary.records) == (1, 1)
    [(shash, payload)] = [json.loads(line) for line in _lines(tmp_path / "out" / WORKLOAD_FILE)]
    assert shash == str(int(structural_hash(mod), 16))
    assert structural_equal(decode_workload(payload), mod)


def test_existing_export_is_replaced_atomically(teams_db: pathlib.Path, tmp_path: pathlib.Path) -> None:
    out = tmp_path / "out"
    _export(teams_db, out, top_k=2)
    _export(teams_db, out, top_k=1)
    assert len(_lines(out / RECORD_FILE)) == 5
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # nothing left beside it


def test_refuses_to_replace_other_things(teams_db: pathlib.Path, tmp_path: pathlib.Path) -> None:
    out = tmp_path / "notes"
    out.mkdir()
    (out / "todo.txt").write_text("keep me")
    with pytest.raises(ExportError, match=r"holds other files \(todo.txt\)"):
        _export(teams_db, out)
    assert (out / "todo.txt").read_text() == "keep me"
    (tmp_path / "file").write_text("x")
    with pytest.raises(ExportError, match="exists and is not a directory"):
        _export(teams_db, tmp_path / "file")
    with pytest.raises(ExportError, match="does not exist"):
        _export(teams_db, tmp_path / "no" / "such" / "dir")
    with pytest.raises(ExportError, match="at least 1"):
        _export(teams_db, tmp_path / "out", top_k=0)


def test_opaque_workloads(tmp_path: pathlib.Path) -> None:
    legacy = copy_team("team_c", tmp_path / "legacy")
    unknown = copy_team("team_a", tmp_path / "unknown")
    edit_lines(legacy / WORKLOAD_FILE, lambda ls: [ls[0], json.dumps([json.loads(ls[1])[0], legacy_payload()]) + "\n"])
    weird = json.dumps([json.loads(_lines(unknown / WORKLOAD_FILE)[0])[0],
                        with_unknown_node(json.loads(_lines(unknown / WORKLOAD_FILE)[0])[1])])
    edit_lines(unknown / WORKLOAD_FILE, lambda ls: [weird + "\n", ls[1]])
    db = open_database(tmp_path / "db.sqlite", create=True)
    try:
        import_tvm(db, [legacy, unknown], opaque=True)
        summary = export_workdir(db, tmp_path / "out")
    finally:
        db.close()
    assert summary.workloads == 3 and len(summary.skipped) == 1
    assert "legacy (<= 0.21) graph format" in summary.skipped[0]
    exported = [json.loads(line) for line in _lines(tmp_path / "out" / WORKLOAD_FILE)]
    assert json.loads(weird) in exported  # an unknown node type goes back unchanged
