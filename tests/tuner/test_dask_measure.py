"""Measurement on a Dask cluster (docs/architecture.md, "Tuner"): a real `LocalCluster` with two
worker processes, each with one thread and the `measure` resource; no mocks. A small GMM is
tuned through `DaskBuilder` / `DaskRunner` into a database, a worker killed mid-measurement is a
failed record while tuning goes on, and `msdb tune --cluster` tunes on the cluster."""

from __future__ import annotations

import os
import pathlib
import signal
import threading
import time
from typing import Any, Iterator

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
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, resources={"measure": 1},
                                  dashboard_address=":0") as local:
        yield local


@pytest.fixture
def client(cluster: Any) -> Iterator[Any]:
    with distributed.Client(cluster) as c:
        c.wait_for_workers(2, timeout=60)
        yield c


def _records(db: Any) -> list[Any]:
    return list(db.get_all_tuning_records())  # failed ones included


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


def test_separate_build_and_run_tasks(client: Any) -> None:
    """DaskBuilder's artifacts land in the tuner's folder and DaskRunner ships them back."""
    mod = zoo.build("GMM", 1, 16, 16, 16)
    with DaskBuilder(client) as builder, DaskRunner(client, number=2, min_repeat_ms=5, num_threads=1) as runner:
        built = builder.build([BuilderInput(mod, TARGET)] * 3)
        assert all(b.ok and pathlib.Path(b.artifact_path).parent == pathlib.Path(builder.artifact_dir)  # type: ignore[arg-type]
                   for b in built), built
        results = runner.run([RunnerInput(b.artifact_path) for b in built] + [RunnerInput(None)])
    assert [r.ok for r in results] == [True, True, True, False]
    assert all(0 < r.run_secs[0] < FAILED_RUN_SECS for r in results[:3])  # type: ignore[index]
    assert "build failed" in (results[3].error_msg or "")


def test_a_worker_killed_in_a_separate_run_task_fails_that_candidate(client: Any) -> None:
    mod = zoo.build("GMM", 1, 16, 16, 16)
    with DaskBuilder(client) as builder, DaskRunner(client, number=1, min_repeat_ms=1500, num_threads=1) as runner:
        built = builder.build([BuilderInput(mod, TARGET)] * 3)
        killer, killed = _kill_a_worker_mid(client, "msdb-run-")
        results = runner.run([RunnerInput(b.artifact_path) for b in built])
    killer.join(timeout=5)
    assert killed, "no measurement was seen in flight"
    assert sum(not r.ok for r in results) == 1, results
    assert any(f"worker {killed[0]} died while processing the candidate" in (r.error_msg or "") for r in results)
    client.wait_for_workers(2, timeout=60)  # the nanny brings the worker back for the next test


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
    client.wait_for_workers(2, timeout=60)  # the nanny brings the worker back for the next test


def test_a_candidate_past_its_timeout_is_a_failed_result(client: Any) -> None:
    mod = zoo.build("GMM", 1, 16, 16, 16)
    with DaskBuilder(client) as builder, DaskRunner(client, timeout_sec=0.5, number=1, min_repeat_ms=1500,
                                                     num_threads=1) as runner:
        built = builder.build([BuilderInput(mod, TARGET)])
        started = time.monotonic()
        results = runner.run([RunnerInput(built[0].artifact_path)])
    assert time.monotonic() - started < 1.4  # the tuner does not wait for the candidate
    assert not results[0].ok and "timeout after 0.5s" in (results[0].error_msg or "")


def test_a_cluster_without_measuring_workers_is_refused() -> None:
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                  dashboard_address=":0") as plain, distributed.Client(plain) as c:
        with pytest.raises(DaskClusterError, match="--resources measure=1"):
            DaskRunner(c)


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


def test_cli_cluster_and_workers_are_one_line(tmp_path: pathlib.Path) -> None:
    result = CliRunner().invoke(cli, ["tune", str(tmp_path / "t.sqlite"), "--zoo", "GMM", "--workers", "2",
                                      "--cluster", "tcp://127.0.0.1:1"], prog_name="msdb")
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert "with --cluster the cluster's workers build" in result.output
