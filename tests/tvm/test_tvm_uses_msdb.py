"""Real TVM 0.27 reads and writes msdb directly through `msdb.tvm.as_tvm_database`:
TVM's own tune and compile calls with an msdb database where they take TVM's.

- conversions are exact both ways: what TVM commits is stored with TVM's workload line (shash,
  payload) and the trace text TVM's JSON writer writes, and reads back equal to TVM's own
  JSONDatabase's records (trace, run_secs, target, args_info); a record committed twice is
  stored once, under one `tvm` source;
- queries are target-aware and follow the module equality asked for;
- two TVM tuning processes (`tune_tir` of a GMM and of a conv2d) into one SQLite file at once:
  every candidate TVM measured is a row, `msdb ls` lists both workloads, and `msdb export` of
  the result loads in TVM's JSONDatabase with equal records;
- `compile_relax` of the ONNX ResNet-18 over msdb holding a record TVM tuned and one msdb's
  tuner tuned: the functions TVM's JSONDatabase hits are hit, the output matches onnxruntime,
  and a faster record for another target in the same database is not applied;
- a hub (a real `msdb serve` on loopback) as the shared layer under a local database;
- bad input gives one clear error and changes nothing.

Budget on a 2-core machine: the tuning test is most of the time (each process pays TVM's
LocalBuilder worker start once: one batch of trials)."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import msdb
from msdb.database.errors import DatabaseOpenError
from msdb.schedule.tvm_json import dumps as tvm_dumps
from msdb.schedule.tvm_json import loads as tvm_loads
from tests.tvm.test_tvm_loads_export import _plain

pytestmark = pytest.mark.tvm

ROOT = Path(__file__).resolve().parents[2]
TEAM_A = ROOT / "tests" / "data" / "fixtures" / "tvm-0.27" / "team_a"
LLVM = {"kind": "llvm", "num-cores": 1}
CUDA = {"kind": "cuda", "arch": "sm_80"}


@pytest.fixture(scope="module")
def tvm() -> Any:
    return pytest.importorskip("tvm")


def _json_db(work_dir: Path, **options: Any) -> Any:
    from tvm.s_tir import meta_schedule as ms

    return ms.database.JSONDatabase(work_dir=str(work_dir), **options)


def _copy_team_a(tmp_path: Path) -> Path:
    """The fixture work_dir copied: TVM's JSONDatabase never touches the shipped files."""
    return Path(shutil.copytree(TEAM_A, tmp_path / "team_a"))


def _commit_all(db: Any, records: list[Any]) -> None:
    """TVM's records committed as TVM's AddToDatabase commits them."""
    from tvm.s_tir import meta_schedule as ms

    for record in records:
        workload = db.commit_workload(record.workload.mod)
        db.commit_tuning_record(ms.database.TuningRecord(record.trace, workload, record.run_secs, record.target,
                                                         record.args_info))


def _tvm_key(record: Any) -> tuple[str, str, str, str]:
    """A TVM record as comparable text: trace, run_secs, target, args_info."""
    args = None if record.args_info is None else [_plain(a.as_json()) for a in record.args_info]
    target = None if record.target is None else _plain(record.target.export())
    return (json.dumps(_plain(record.trace.as_json())), json.dumps(_plain(record.run_secs)),
            json.dumps(target, sort_keys=True), json.dumps(args))


def _rows(path: Path, sql: str) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def _written_records(work_dir: Path) -> list[tuple[str, str]]:
    """(trace text, run_secs text) of every record line TVM's writer wrote, byte for byte (msdb's
    JSON reader keeps each float's spelling, so writing a part back gives its exact bytes)."""
    out = []
    for line in (work_dir / "database_tuning_record.json").read_text().splitlines():
        _index, (trace, run_secs, _target, _args) = tvm_loads(line)
        out.append((tvm_dumps(trace), tvm_dumps(run_secs)))
    return sorted(out)


# ---------------------------------------------------------------- conversions


def test_tvm_records_round_trip_through_msdb_exactly(tvm: Any, tmp_path: Path) -> None:
    from msdb.tvm import as_tvm_database

    json_db = _json_db(_copy_team_a(tmp_path))
    records = json_db.get_all_tuning_records()
    path = tmp_path / "msdb.sqlite"
    db = as_tvm_database(path, create=True)
    try:
        _commit_all(db, records)
        assert len(db) == len(records) == 128
        _commit_all(db, records[:10])  # the same measurements again: stored once
        assert len(db) == 128

        # TVM's workload line kept byte for byte, the trace text as TVM's writer wrote it
        workloads = {tuple(r.workload.as_json()) for r in records}
        assert set(_rows(path, "SELECT tvm_shash, tvm_payload FROM workload")) == workloads
        assert sorted(_rows(path, "SELECT trace, run_secs FROM tuning_record")) == _written_records(TEAM_A)
        sources = _rows(path, "SELECT kind, username IS NOT NULL, host IS NOT NULL, tvm_version FROM source")
        assert sources == [("tvm", 1, 1, tvm.__version__)]

        # and back: TVM gets the records its own JSONDatabase gives (trace, run_secs, target, args)
        target = tvm.target.Target(LLVM)
        for workload in {r.workload.as_json()[0]: r.workload for r in records}.values():
            ours = db.get_top_k(db.commit_workload(workload.mod), 100)
            theirs = json_db.get_top_k(workload, 100)
            assert [_tvm_key(r) for r in ours] == [_tvm_key(r) for r in theirs] and ours
            sch, expected = db.query_schedule(workload.mod, target, "main"), json_db.query_schedule(
                workload.mod, target, "main")
            tvm.ir.assert_structural_equal(sch.mod, expected.mod)
        assert sorted(map(_tvm_key, db.get_all_tuning_records())) == sorted(map(_tvm_key, records))
    finally:
        db.close()



def test_the_scratch_folder_of_tvms_writer_lives_as_long_as_the_session(tvm: Any, tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Commits read TVM's record lines back from a scratch JSONDatabase in the temporary
    directory (msdb.tvm_lines): made at the first commit, removed at close; one a killed session
    left is removed by the next session's first commit."""
    import tempfile

    from msdb.tvm import as_tvm_database
    from msdb.tvm_lines import SCRATCH_PREFIX

    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    left = scratch / f"{SCRATCH_PREFIX}killed1"  # what a killed session leaves: no process holds it
    left.mkdir()
    (left / "database_tuning_record.json").write_text("")
    records = _json_db(_copy_team_a(tmp_path)).get_all_tuning_records()
    db = as_tvm_database(tmp_path / "msdb.sqlite", create=True)
    try:
        assert sorted(p.name for p in scratch.iterdir()) == [left.name]  # a session that only reads makes none
        _commit_all(db, records[:3])
        made = sorted(scratch.iterdir())
        assert len(made) == 1 and made[0].name.startswith(SCRATCH_PREFIX) and made[0] != left
    finally:
        db.close()
    assert list(scratch.iterdir()) == []
    stored = msdb.open_database(tmp_path / "msdb.sqlite", read_only=True)
    assert len(stored) == 3
    stored.close()

def test_a_record_whose_trace_cannot_belong_to_its_workload_is_refused_and_nothing_is_stored(
        tvm: Any, tmp_path: Path) -> None:
    """TVM builds a `TuningRecord` from any trace and workload; msdb's import grammar reads the
    line TVM's writer makes of it and refuses a trace naming blocks its workload does not have,
    with one error naming the workload, and the database keeps what it held."""
    from tvm.s_tir import meta_schedule as ms

    from msdb.tvm import as_tvm_database

    records = _json_db(_copy_team_a(tmp_path)).get_all_tuning_records()
    by_workload = {r.workload.as_json()[0]: r for r in records}
    first, other = list(by_workload.values())[:2]
    path = tmp_path / "msdb.sqlite"
    db = as_tvm_database(path, create=True)
    try:
        _commit_all(db, [first])
        stored = _rows(path, "SELECT trace, run_secs FROM tuning_record")
        token = db.commit_workload(other.workload.mod)
        mismatched = ms.database.TuningRecord(first.trace, token, first.run_secs, first.target, first.args_info)
        with pytest.raises(Exception, match="msdb cannot store a record TVM committed for workload [0-9a-f]{16}: "
                                            ".*cannot belong to workload"):
            db.commit_tuning_record(mismatched)
        assert _rows(path, "SELECT trace, run_secs FROM tuning_record") == stored
        assert len(db) == 1
    finally:
        db.close()


def test_queries_are_target_aware_and_follow_the_module_equality(tvm: Any, tmp_path: Path) -> None:
    from tvm import te, tirx
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.meta_schedule.testing.te_workload import create_te_workload

    from msdb.tvm import as_tvm_database

    msdb.import_logs(str(tmp_path / "team.sqlite"), [TEAM_A])
    db = as_tvm_database(tmp_path / "team.sqlite")
    llvm, cuda = tvm.target.Target(LLVM), tvm.target.Target(CUDA)
    gmm = tvm.IRModule({"main": create_te_workload("GMM", 0)})
    try:
        best = db.query_tuning_record(gmm, llvm, "main")
        slowest = db.get_top_k(db.commit_workload(gmm), 100)[-1]
        # a record for a GPU, faster than any: never handed to a CPU query
        db.commit_tuning_record(ms.database.TuningRecord(slowest.trace, db.commit_workload(gmm), [1e-9], cuda,
                                                         slowest.args_info))
        assert _tvm_key(db.query_tuning_record(gmm, llvm, "main")) == _tvm_key(best)
        assert _plain(db.query_tuning_record(gmm, cuda, "main").target.export())["kind"] == "cuda"
        workload = db.commit_workload(gmm)
        assert _plain(db.get_top_k(workload, 1)[0].target.export())["kind"] == "cuda"  # no target: TVM's "any"
        with llvm:
            assert [_tvm_key(r) for r in db.get_top_k(workload, 1)] == [_tvm_key(best)]
        cpu_only = as_tvm_database(tmp_path / "team.sqlite", target=LLVM)
        assert [_tvm_key(r) for r in cpu_only.get_top_k(cpu_only.commit_workload(gmm), 1)] == [_tvm_key(best)]
        assert len(cpu_only.get_all_tuning_records()) == 128 and len(db.get_all_tuning_records()) == 129
        cpu_only.close()
    finally:
        db.close()

    # GMM followed by a relu: another workload structurally, the same by anchor block
    a = te.placeholder((1, 128, 128), name="A")
    b = te.placeholder((1, 128, 128), name="B")
    k = te.reduce_axis((0, 128), name="k")
    c = te.compute((1, 128, 128), lambda n, i, j: te.sum(a[n, i, k] * b[n, k, j], axis=k), name="C")
    d = te.compute((1, 128, 128), lambda n, i, j: te.max(c[n, i, j], tirx.const(0, "float32")), name="D")
    fused = tvm.IRModule({"main": te.create_prim_func([a, b, d])})
    structural = as_tvm_database(tmp_path / "team.sqlite", module_equality="structural")
    anchor = as_tvm_database(tmp_path / "team.sqlite", module_equality="anchor-block")
    tvm_anchor = _json_db(_copy_team_a(tmp_path), module_equality="anchor-block")
    try:
        assert structural.query_tuning_record(fused, llvm, "main") is None
        assert structural.has_workload(gmm) and not structural.has_workload(fused)
        assert anchor.has_workload(fused)
        assert _tvm_key(anchor.query_tuning_record(fused, llvm, "main")) == _tvm_key(
            tvm_anchor.query_tuning_record(fused, llvm, "main"))
        tvm.ir.assert_structural_equal(anchor.query_schedule(fused, llvm, "main").mod,
                                       tvm_anchor.query_schedule(fused, llvm, "main").mod)
    finally:
        structural.close()
        anchor.close()


# ---------------------------------------------------------------- TVM tunes into msdb


def test_two_tvm_tuners_commit_every_measurement_into_one_database(tvm: Any, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from msdb.cli.main import cli

    path = tmp_path / "team.sqlite"
    msdb.open_database(path, create=True).close()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    procs = {name: subprocess.Popen([sys.executable, "-m", "tests.tvm.tune_into_msdb", str(path), name,
                                     str(tmp_path / f"work_{name}"), str(tmp_path / f"truth_{name}"), "4"],
                                    cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for name in ("gmm", "conv2d")}
    try:
        for name, proc in procs.items():
            out, _ = proc.communicate(timeout=1800)  # a generous bound for a starved machine, not a timing
            assert proc.returncode == 0, f"{name}: TVM's tune_tir into msdb failed:\n{out[-4000:]}"
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    # every candidate TVM measured is a row, with the trace text TVM's writer wrote
    measured = sorted(_written_records(tmp_path / "truth_gmm") + _written_records(tmp_path / "truth_conv2d"))
    assert len(measured) == 8
    assert sorted(_rows(path, "SELECT trace, run_secs FROM tuning_record")) == measured
    truth_workloads = {tuple(json.loads(line)) for name in ("gmm", "conv2d")
                       for line in (tmp_path / f"truth_{name}" / "database_workload.json").read_text().splitlines()}
    assert set(_rows(path, "SELECT tvm_shash, tvm_payload FROM workload")) == truth_workloads
    assert sorted(_rows(path, "SELECT kind, tvm_version FROM source")) == [("tvm", tvm.__version__)] * 2
    valid = _rows(path, "SELECT count(*) FROM tuning_record WHERE is_valid")[0][0]
    assert valid >= 2, "no candidate built and ran: nothing to export"

    listing = CliRunner().invoke(cli, ["ls", str(path)], prog_name="msdb")
    assert listing.exit_code == 0, listing.output
    shashes = [row[0] for row in _rows(path, "SELECT shash FROM workload")]
    assert all(shash in listing.output for shash in shashes) and len(shashes) == 2

    export = CliRunner().invoke(cli, ["export", str(path), str(tmp_path / "exported"), "--top-k", "100"],
                                prog_name="msdb")
    assert export.exit_code == 0, export.output
    loaded = _json_db(tmp_path / "exported", allow_missing=False)
    from msdb.tvm import as_tvm_database

    db = as_tvm_database(path)
    try:
        theirs = sorted(map(_tvm_key, loaded.get_all_tuning_records()))
        ours = sorted(_tvm_key(r) for r in db.get_all_tuning_records() if r.run_secs is not None
                      and any(float(s) < 1e9 for s in _plain(r.run_secs)))
        assert theirs == ours and len(theirs) == valid
    finally:
        db.close()


# ---------------------------------------------------------------- TVM compiles over msdb


def test_compile_relax_of_resnet18_over_msdb_matches_tvm_and_onnxruntime(tvm: Any, tmp_path: Path) -> None:
    from tvm import relax, tirx
    from tvm.relax.frontend.onnx import from_onnx
    from tvm.s_tir import meta_schedule as ms

    from msdb.interop.tvm.payload import decode_workload
    from msdb.records import Target
    from msdb.tuner.compile.reference import onnxruntime_session
    from msdb.tuner.tune import tune_tir
    from msdb.tvm import as_tvm_database
    from tests.tuner.compile.make_tvm_conv_record import IMAGE, SHIPPED, resnet18, tvm_zero_module

    proto = resnet18()
    target = tvm.target.Target(LLVM)
    path = tmp_path / "msdb.sqlite"
    msdb.import_logs(str(path), [SHIPPED])  # the record TVM tuned for the first stage's conv2d
    shipped = _json_db(SHIPPED).get_all_tuning_records()
    tasks = {t.task_name: t for t in ms.relax_integration.extract_tasks(relax.get_pipeline("zero")(from_onnx(proto)),
                                                                        target)}
    # msdb's own tuner tunes another function of the model, decoded from TVM's module
    other = next(name for name in sorted(tasks) if name.startswith("fused_matmul"))  # the classifier
    mod = decode_workload(ms.database.Workload(tasks[other].dispatched[0]).as_json()[1])
    db = msdb.open_database(path)
    try:
        tune_tir(mod, Target(LLVM), db, 2, 2, strategy="replay-trace", cost_model="random", seed=1, task_name=other)
    finally:
        db.close()
    # and the fastest record of all is for a GPU, with another trace: never applied on the CPU
    tvm_db = as_tvm_database(path)
    conv = tasks["conv2d1"].dispatched[0]
    tvm_db.commit_tuning_record(ms.database.TuningRecord(shipped[-1].trace, tvm_db.commit_workload(conv), [1e-9],
                                                         tvm.target.Target(CUDA), shipped[-1].args_info))
    best_cpu = min(shipped, key=lambda r: float(np.mean(_plain(r.run_secs))))
    assert _tvm_key(tvm_db.query_tuning_record(conv, target, "conv2d1")) == _tvm_key(best_cpu)

    # TVM's JSONDatabase over the same records (export: every workload and target)
    msdb.export_workdir(msdb.open_database(path, read_only=True), tmp_path / "exported", top_k=100)
    json_db = _json_db(tmp_path / "exported")
    assert _plain(json_db.query_tuning_record(conv, target, "conv2d1").target.export())["kind"] == "cuda"

    def scheduled_with(database: Any) -> set[str]:
        with target, database:
            lowered = tvm_zero_module(proto)
        return {gv.name_hint for gv, func in lowered.functions.items()
                if isinstance(func, tirx.PrimFunc) and bool(func.attrs.get("tirx.is_scheduled", False))}

    hit = scheduled_with(tvm_db)
    assert hit == scheduled_with(json_db) == {"conv2d1", other}

    executable = ms.relax_integration.compile_relax(tvm_db, from_onnx(proto), target, None)
    vm = relax.VirtualMachine(executable, tvm.cpu())
    x = np.random.default_rng(0).standard_normal((1, 3, IMAGE, IMAGE)).astype("float32")
    actual = vm["main"](tvm.runtime.tensor(x)).numpy()
    (expected,) = onnxruntime_session(proto).run(None, {"data": x})
    np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=1e-5 * float(np.max(np.abs(expected))))
    tvm_db.close()


# ---------------------------------------------------------------- layers


def test_a_hub_is_the_shared_layer_under_a_local_database(tvm: Any, tmp_path: Path) -> None:
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.meta_schedule.testing.te_workload import create_te_workload

    from msdb.tvm import as_tvm_database
    from tests.hub.hubs import hub_server, make_team_db, published

    team = make_team_db(tmp_path / "team.sqlite", ("team_a",))
    hub_files = published(team, tmp_path / "hub")
    local = tmp_path / "local.sqlite"
    gmm = tvm.IRModule({"main": create_te_workload("GMM", 0)})
    target = tvm.target.Target(LLVM)
    hub_before = (hub_files / "snapshot.sqlite").read_bytes() if (hub_files / "snapshot.sqlite").exists() else None
    with hub_server(hub_files, tmp_path / "serve.log") as url:
        db = as_tvm_database([local, url], create=True)
        try:
            from_hub = db.query_tuning_record(gmm, target, "main")
            team_best = _json_db(_copy_team_a(tmp_path)).query_tuning_record(gmm, target, "main")
            assert _tvm_key(from_hub) == _tvm_key(team_best)
            assert ms.tir_integration.compile_tir(db, gmm, target) is not None
            # a record TVM commits lands in the local layer and wins there, even a slower one
            worst = db.get_top_k(db.commit_workload(gmm), 100)[-1]
            db.commit_tuning_record(ms.database.TuningRecord(worst.trace, db.commit_workload(gmm), [1.0], target,
                                                             worst.args_info))
            assert _plain(db.query_tuning_record(gmm, target, "main").run_secs) == [1.0]
        finally:
            db.close()
        assert _rows(local, "SELECT count(*) FROM tuning_record") == [(1,)]

        hub_only = as_tvm_database(url)
        try:
            with pytest.raises(Exception, match="read-only"):
                hub_only.commit_workload(gmm)
        finally:
            hub_only.close()
    if hub_before is not None:
        assert (hub_files / "snapshot.sqlite").read_bytes() == hub_before


# ---------------------------------------------------------------- bad input


def test_bad_locations_give_one_clear_error_and_change_nothing(tvm: Any, tmp_path: Path) -> None:
    from msdb.hashing.modes import UnknownModuleEquality
    from msdb.hub.client import HubError
    from msdb.tvm import as_tvm_database
    from tests.hub.hubs import down_url

    missing = tmp_path / "missing.sqlite"
    with pytest.raises(DatabaseOpenError, match="missing.sqlite: no such database file"):
        as_tvm_database(missing)
    assert not missing.exists()

    not_a_db = tmp_path / "notes.sqlite"
    not_a_db.write_bytes(b"my notes, not a database\n")
    with pytest.raises(DatabaseOpenError, match="notes.sqlite"):
        as_tvm_database(not_a_db)
    assert not_a_db.read_bytes() == b"my notes, not a database\n"

    first = tmp_path / "first.sqlite"
    with pytest.raises(DatabaseOpenError, match="no such database file"):
        as_tvm_database([first, missing], create=True)  # a bad layer fails before the first is created
    assert not first.exists()
    msdb.open_database(first, create=True).close()
    with pytest.raises(HubError):
        as_tvm_database([str(down_url())])
    with pytest.raises(UnknownModuleEquality, match="'by-name'"):
        as_tvm_database(first, module_equality="by-name")
    with pytest.raises(TypeError, match="got int"):
        as_tvm_database(42)
    db = msdb.open_database(first)
    with pytest.raises(msdb.MsdbError, match="module_equality 'structural', TVM asks for 'anchor-block'"):
        as_tvm_database(db, module_equality="anchor-block")
    db.close()
    read_only = as_tvm_database(first, read_only=True)
    try:
        from tvm.s_tir.meta_schedule.testing.te_workload import create_te_workload

        with pytest.raises(Exception, match="read-only|ReadOnly"):
            read_only.commit_workload(tvm.IRModule({"main": create_te_workload("GMM", 0)}))
    finally:
        read_only.close()
