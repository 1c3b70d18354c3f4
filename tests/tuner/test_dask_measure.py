"""Measurement on a Dask cluster (docs/architecture.md, "Tuner"): a real `LocalCluster` with two
worker processes, each with one thread and the `measure` resource; no mocks. A small GMM is
tuned through `DaskBuilder` / `DaskRunner` into a database, a worker killed mid-measurement is a
failed record while tuning goes on, a kernel that hangs is a failed record and its worker is
restarted, and `msdb tune --cluster` tunes on the cluster."""

from __future__ import annotations

import os
import pathlib
import signal
import threading
import time
from typing import Any, Iterator

import dask
import distributed  # in the `test` extra: these tests run in CI, never skip
import pytest
from click.testing import CliRunner

from msdb import SQLiteDatabase
from msdb.cli.main import cli
from msdb.database.memory import MemoryDatabase
from msdb.ir import to_script, zoo
from msdb.records.ranking import FAILED_RUN_SECS
from msdb.tuner.measure.builder import BuilderInput
from msdb.tuner.measure.dask import DaskBuilder, DaskClusterError, DaskRunner
from msdb.tuner.measure.runner import RunnerInput
from msdb.tuner.tune import check_record, tune_tir

TARGET = "llvm -num-cores=1"


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    # A LocalCluster closes the nanny of a worker that stays away past lost-worker-timeout (15 s);
    # a hung worker's restart (the nanny's kill timeout, then a fresh process) may take longer on
    # a loaded machine. Workers started by `dask worker` have no such timeout.
    with dask.config.set({"distributed.deploy.lost-worker-timeout": "300s"}), \
            distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, resources={"measure": 1},
                                     dashboard_address=":0") as local:
        yield local


@pytest.fixture
def client(cluster: Any) -> Iterator[Any]:
    with distributed.Client(cluster) as c:
        c.wait_for_workers(2, timeout=180)
        yield c


def _records(db: Any) -> list[Any]:
    return list(db.get_all_tuning_records())  # failed ones included


@pytest.mark.slow
def test_tuning_on_the_cluster_commits_valid_records(client: Any) -> None:
    db = MemoryDatabase()
    with DaskBuilder(client) as builder, DaskRunner(client, number=2, min_repeat_ms=5, num_threads=1) as runner:
        result = tune_tir(zoo.build("GMM", 1, 16, 16, 16), TARGET, db, 5, 5, builder=builder, runner=runner,
                          seed=0, strategy="replay-trace", cost_model="random")
    records = _records(db)
    assert len(records) == 5 and result.tasks[0].trials == 5
    for record in records:
        assert record.run_secs[0] < FAILED_RUN_SECS
        assert check_record(record) is None
    assert result.tasks[0].best is not None
    assert not client.processing() or not any(client.processing().values())  # nothing left on the workers


def _kill_a_worker_mid(client: Any, prefix: str) -> tuple[threading.Thread, list[str]]:
    """A thread that polls the scheduler until a task named `prefix...` is in flight, then kills
    its worker process (SIGKILL); the list gets the worker's address."""
    pids = client.run(os.getpid)
    killed: list[str] = []

    def kill_one() -> None:
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline:
            for worker, keys in client.processing().items():
                if any(str(k).startswith(prefix) for k in keys) and worker in pids:
                    os.kill(pids[worker], signal.SIGKILL)
                    killed.append(worker)
                    return
            time.sleep(0.02)  # polling interval, not synchronization

    killer = threading.Thread(target=kill_one, daemon=True)
    killer.start()
    return killer, killed


@pytest.mark.slow
def test_separate_build_and_run_tasks(client: Any) -> None:
    """DaskBuilder's artifacts land in the tuner's folder and DaskRunner ships them back."""
    mod = zoo.build("GMM", 1, 16, 16, 16)
    with DaskBuilder(client) as builder, DaskRunner(client, number=2, min_repeat_ms=5, num_threads=1) as runner:
        built = builder.build([BuilderInput(mod, TARGET)] * 3)
        assert all(b.ok and pathlib.Path(b.artifact_path).parent == pathlib.Path(builder.artifact_dir)  # type: ignore[arg-type]
                   for b in built), built
        results = [f.result() for f in runner.run([RunnerInput(b.artifact_path) for b in built] + [RunnerInput(None)])]
    assert [r.ok for r in results] == [True, True, True, False]
    assert all(0 < r.run_secs[0] < FAILED_RUN_SECS for r in results[:3])  # type: ignore[index]
    assert "build failed" in (results[3].error_msg or "")


@pytest.mark.slow
def test_a_worker_killed_in_a_separate_run_task_fails_that_candidate(client: Any) -> None:
    mod = zoo.build("GMM", 1, 16, 16, 16)
    with DaskBuilder(client) as builder, DaskRunner(client, number=1, min_repeat_ms=1500, num_threads=1) as runner:
        built = builder.build([BuilderInput(mod, TARGET)] * 3)
        killer, killed = _kill_a_worker_mid(client, "msdb-run-")
        results = [f.result() for f in runner.run([RunnerInput(b.artifact_path) for b in built])]
    killer.join(timeout=5)
    assert killed, "no measurement was seen in flight"
    assert sum(not r.ok for r in results) == 1, results
    assert any(f"worker {killed[0]} died while processing the candidate" in (r.error_msg or "") for r in results)
    client.wait_for_workers(2, timeout=180)  # the nanny brings the worker back for the next test


@pytest.mark.slow
def test_a_worker_killed_mid_measurement_is_a_failed_record(client: Any) -> None:
    killer, killed = _kill_a_worker_mid(client, "msdb-measure-")
    db = MemoryDatabase()
    errors: list[str] = []
    with DaskBuilder(client) as builder, DaskRunner(client, number=1, min_repeat_ms=1500, num_threads=1) as runner:
        tune_tir(zoo.build("GMM", 1, 16, 16, 16), TARGET, db, 4, 4, builder=builder, runner=runner, seed=1,
                 strategy="replay-trace", cost_model="random",
                 on_round=lambda task, cands, results: errors.extend(r.error_msg for r in results if r.error_msg))
    killer.join(timeout=5)
    assert killed, "no measurement was seen in flight"
    records = _records(db)
    assert len(records) == 4  # tuning finished: every candidate committed
    failed = [r for r in records if r.run_secs[0] >= FAILED_RUN_SECS]
    assert len(failed) == 1
    assert len(errors) == 1 and f"worker {killed[0]} died while processing the candidate" in errors[0], errors
    assert [r for r in records if r.run_secs[0] < FAILED_RUN_SECS]
    client.wait_for_workers(2, timeout=180)  # the nanny brings the worker back for the next test


@pytest.mark.slow
def test_a_candidate_past_its_timeout_is_a_failed_result(client: Any) -> None:
    mod = zoo.build("GMM", 1, 16, 16, 16)
    with DaskBuilder(client) as builder, DaskRunner(client, timeout_sec=0.5, number=1, min_repeat_ms=1500,
                                                     num_threads=1) as runner:
        built = builder.build([BuilderInput(mod, TARGET)])
        started = time.monotonic()
        results = [f.result() for f in runner.run([RunnerInput(built[0].artifact_path)])]
        assert time.monotonic() - started < 1.4  # the tuner does not wait for the candidate
    # closing the runner waited for the timed-out worker's restart: both workers measure again
    client.wait_for_workers(2, timeout=180)
    assert not results[0].ok and "timeout after 0.5s" in (results[0].error_msg or "")


def _hanging_module() -> Any:
    """A kernel that hangs for real: C[i] += A[i] for 4096 floats over two reduction loops of
    2**15 each (4.4e12 additions, hours on one core: no compiler folds a float sum into a
    formula); every loop and every fusion of loops a schedule may make fits in int32."""
    from msdb.ir import te
    from msdb.ir.function import IRModule

    a = te.placeholder((4096,), name="A")
    k1, k2 = te.reduce_axis((0, 1 << 15), name="k1"), te.reduce_axis((0, 1 << 15), name="k2")
    c = te.compute((4096,), lambda i: te.sum(a[i] * 1.0, axis=[k1, k2]), name="C")
    return IRModule.from_func(te.create_prim_func([a, c]))


@pytest.mark.slow
def test_a_hung_candidate_fails_and_its_worker_is_restarted(client: Any) -> None:
    """The hung kernel's worker is restarted (a fresh process: the hung thread cannot be
    stopped); the other candidates of the round are measured meanwhile, and afterwards both
    workers measure again."""
    pids_before = client.run(os.getpid)
    with DaskBuilder(client) as builder, DaskRunner(client, timeout_sec=10.0, number=1, min_repeat_ms=5,
                                                     num_threads=1) as runner:
        built = builder.build([BuilderInput(_hanging_module(), TARGET)] +
                              [BuilderInput(zoo.build("GMM", 1, 16, 16, 16), TARGET)] * 3)
        assert all(b.ok for b in built), built
        results = [f.result() for f in runner.run([RunnerInput(b.artifact_path) for b in built])]
        assert not results[0].ok and "timeout after 10s" in (results[0].error_msg or "")
        hung = (results[0].error_msg or "").rsplit(" on ", 1)[1]
        assert [r.ok for r in results[1:]] == [True, True, True], results
        assert runner.wait_for_restarts(180)
        client.wait_for_workers(2, timeout=180)
        pids_after = client.run(os.getpid)
        assert pids_before[hung] not in pids_after.values()  # the hung process is gone
        assert len(pids_after) == 2
        again = [f.result() for f in runner.run([RunnerInput(b.artifact_path) for b in built[1:3]])]
        assert [r.ok for r in again] == [True, True], again


@pytest.mark.slow
def test_tuning_a_workload_whose_kernels_hang_finishes_with_failed_records(client: Any) -> None:
    db = MemoryDatabase()
    with DaskBuilder(client, timeout_sec=10.0) as builder, DaskRunner(client, timeout_sec=2.0, number=1,
                                                                      num_threads=1) as runner:
        result = tune_tir(_hanging_module(), TARGET, db, 3, 3, builder=builder, runner=runner, seed=0,
                          strategy="replay-trace", cost_model="random", check_best=False)
        assert runner.wait_for_restarts(180)
    records = _records(db)
    assert len(records) == 3 and result.tasks[0].trials == 3  # every candidate committed, tuning finished
    assert all(list(r.run_secs) == [FAILED_RUN_SECS] for r in records)
    client.wait_for_workers(2, timeout=180)  # restarted: the next test measures on both


def test_a_cluster_without_measuring_workers_is_refused() -> None:
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                  dashboard_address=":0") as plain, distributed.Client(plain) as c:
        with pytest.raises(DaskClusterError, match="--resources measure=1"):
            DaskRunner(c)


@pytest.mark.slow
def test_cli_tune_on_a_cluster(cluster: Any, tmp_path: pathlib.Path) -> None:
    workload = tmp_path / "small_gmm.py"
    workload.write_text(to_script(zoo.build("GMM", 1, 16, 16, 16)))
    db = tmp_path / "t.sqlite"
    result = CliRunner().invoke(cli, ["tune", str(db), str(workload), "--target", TARGET, "--trials", "4",
                                      "--per-iter", "4", "--strategy", "replay-trace", "--cost-model", "random",
                                      "--seed", "0", "--cluster", cluster.scheduler_address], prog_name="msdb")
    assert result.exit_code == 0, result.output
    assert "Total trials: 4" in result.output
    with SQLiteDatabase(db) as database:
        records = database.get_all_tuning_records()
    assert len(records) == 4 and all(r.run_secs[0] < FAILED_RUN_SECS for r in records)
    assert all(len(r.run_secs) == 1 for r in records)  # one workload: TVM's warm timing, one repeat


@pytest.mark.slow
def test_cli_tune_a_model_on_a_cluster_times_it_cold(cluster: Any, tmp_path: pathlib.Path) -> None:
    """A model's tasks on the cluster are timed as `tune_model` times them locally: ten single
    calls, caches flushed before each (`MODEL_TIMING`)."""
    from msdb.tuner.model_tuning import MODEL_TIMING
    from tests.cli.model_files import tiny_onnx

    model = tiny_onnx(tmp_path / "tiny.onnx")
    db = tmp_path / "t.sqlite"
    result = CliRunner().invoke(cli, ["tune", str(db), str(model), "--target", TARGET, "--trials", "4",
                                      "--per-iter", "4", "--strategy", "replay-trace", "--cost-model", "random",
                                      "--seed", "0", "--cluster", cluster.scheduler_address], prog_name="msdb")
    assert result.exit_code == 0, result.output
    with SQLiteDatabase(db) as database:
        records = database.get_all_tuning_records()
    assert records and all(r.run_secs[0] < FAILED_RUN_SECS for r in records)
    assert all(len(r.run_secs) == MODEL_TIMING["repeat"] for r in records)


def test_cli_cluster_and_workers_are_one_line(tmp_path: pathlib.Path) -> None:
    result = CliRunner().invoke(cli, ["tune", str(tmp_path / "t.sqlite"), "--zoo", "GMM", "--workers", "2",
                                      "--cluster", "tcp://127.0.0.1:1"], prog_name="msdb")
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert "with --cluster the cluster's workers build" in result.output
