"""The Dask builder and runner through the interfaces the local ones have (docs/architecture.md,
"Measurement"): `Builder.create("dask")` / `Runner.create("dask")`, `build`, `run` -> futures,
`as_completed`, and `build_and_run`, which builds and measures in one task per candidate when the
builder is a `DaskBuilder` on the runner's client (no artifact here) and builds, then runs, with
any other builder. A real `LocalCluster` of one worker process; no mocks."""

from __future__ import annotations

import os
from typing import Any, Iterator

import distributed  # in the `test` extra: these tests run in CI, never skip
import pytest

from msdb.database.memory import MemoryDatabase
from msdb.ir import zoo
from msdb.tuner.measure.builder import Builder, BuilderInput, LocalBuilder
from msdb.tuner.measure.dask import DaskBuilder, DaskRunner
from msdb.tuner.measure.runner import Runner, RunnerFuture, RunnerInput
from msdb.tuner.tune import tune_tir
from tests.tuner.test_measure_plugins import Watcher

TARGET = "llvm -num-cores=1"
GMM = zoo.build("GMM", 1, 16, 16, 16)


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, resources={"measure": 1},
                                  dashboard_address=":0") as cluster, distributed.Client(cluster) as c:
        c.wait_for_workers(1, timeout=180)
        yield c


def test_dask_kinds_build_and_run_through_the_interfaces(client: Any) -> None:
    with Builder.create("dask", client) as builder, \
            Runner.create("dask", client, number=1, min_repeat_ms=0, num_threads=1) as runner:
        assert isinstance(builder, DaskBuilder) and isinstance(runner, DaskRunner)
        built = builder.build([BuilderInput(GMM, TARGET)] * 2)
        assert all(b.ok for b in built), built
        futures = runner.run([RunnerInput(b.artifact_path) for b in built] + [RunnerInput(None)])
        assert all(isinstance(f, RunnerFuture) for f in futures)
        arrived = dict(runner.as_completed(futures))
    assert sorted(arrived) == [0, 1, 2]
    assert arrived[0].ok and arrived[1].ok and not arrived[2].ok
    assert all(f.done() for f in futures)


def test_a_dask_pair_builds_and_runs_in_one_task(client: Any) -> None:
    with DaskBuilder(client) as builder, DaskRunner(client, number=1, min_repeat_ms=0, num_threads=1) as runner:
        built, futures = runner.build_and_run(builder, [BuilderInput(GMM, TARGET)] * 2, [None, None])
        results = [r for _, r in sorted(runner.as_completed(futures))]
        assert os.listdir(builder.artifact_dir) == []  # nothing came back to build here
    assert [r.ok for r in results] == [True, True]
    assert all(b.artifact_path is None and b.error_msg is None for b in built)


def test_a_local_builder_with_the_dask_runner_builds_then_runs(client: Any, tmp_path: Any) -> None:
    with LocalBuilder(max_workers=1, artifact_dir=str(tmp_path)) as builder, \
            DaskRunner(client, number=1, min_repeat_ms=0, num_threads=1) as runner:
        built, futures = runner.build_and_run(builder, [BuilderInput(GMM, TARGET)], [None])
        (result,) = [f.result() for f in futures]
    assert built[0].ok and str(built[0].artifact_path).startswith(str(tmp_path))
    assert result.ok


def test_tuning_on_the_cluster_tells_the_callbacks(client: Any) -> None:
    from msdb.tuner.measure.callback import MeasureCallback

    db = MemoryDatabase()
    watcher = Watcher()
    with DaskBuilder(client) as builder, DaskRunner(client, number=1, min_repeat_ms=0, num_threads=1) as runner:
        result = tune_tir(GMM, TARGET, db, 4, 2, builder=builder, runner=runner, seed=0, strategy="replay-trace",
                          cost_model="random", measure_callbacks=[*MeasureCallback.create("default"), watcher])
    assert result.tasks[0].trials == 4 and len(db.get_all_tuning_records()) == 4
    assert watcher.rounds == [(0, 2, 2, 2), (0, 2, 2, 2)] and len(watcher.ones) == 4
