"""Builders, runners and measure callbacks as TVM's interfaces (docs/architecture.md,
"Measurement"): a user's own Builder, Runner and MeasureCallback plug into a real search
(`tune_tir`, `tune_tasks`) without touching the tuner's internals; `create(kind)` names the
known kinds; the default callback list is TVM's."""

from __future__ import annotations

import hashlib
from typing import Any, Sequence

import pytest

from msdb.database.memory import MemoryDatabase
from msdb.ir import zoo
from msdb.kinds import UnknownKind
from msdb.tuner.measure.builder import Builder, BuilderInput, BuilderResult, LocalBuilder
from msdb.tuner.measure.callback import AddToDatabase, MeasureCallback, RemoveBuildArtifact, UpdateCostModel
from msdb.tuner.measure.runner import (LocalRunner, ReadyRunnerFuture, Runner, RunnerFuture, RunnerInput,
                                       RunnerResult)
from msdb.tuner.tune import make_context, tune_tasks, tune_tir, tuning_target

TARGET = "llvm -num-cores=1"
GMM = zoo.build("GMM", 1, 16, 16, 16)


class NamingBuilder(Builder):
    """Builds nothing: the 'artifact' names the module (its text's digest)."""

    def __init__(self) -> None:
        self.inputs: list[BuilderInput] = []
        self.closed = False

    def build(self, build_inputs: Sequence[BuilderInput]) -> list[BuilderResult]:
        self.inputs.extend(build_inputs)
        return [BuilderResult(f"sim-{_digest(str(item.mod))}", None) for item in build_inputs]

    def close(self) -> None:
        self.closed = True


class Simulator(Runner):
    """A simulator: a fixed time per candidate, from its artifact's name (microseconds 1..100)."""

    def __init__(self) -> None:
        self.inputs: list[RunnerInput] = []

    def run(self, runner_inputs: Sequence[RunnerInput]) -> list[RunnerFuture]:
        self.inputs.extend(runner_inputs)
        return [ReadyRunnerFuture(RunnerResult([simulated(item.artifact_path)], None)) for item in runner_inputs]


def simulated(artifact: str | None) -> float:
    return (1 + int(_digest(str(artifact)), 16) % 100) * 1e-6


def _digest(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=4).hexdigest()


class Watcher(MeasureCallback):
    """Records what it is told: each result as it ends, then each round."""

    def __init__(self) -> None:
        self.ones: list[tuple[int, int, float]] = []
        self.rounds: list[tuple[int, int, int, int]] = []

    def apply_one(self, task_scheduler: Any, task_id: int, index: int, candidate: Any, builder_result: BuilderResult,
                  runner_result: RunnerResult) -> None:
        assert runner_result.run_secs is not None
        self.ones.append((task_id, index, runner_result.run_secs[0]))

    def apply(self, task_scheduler: Any, task_id: int, measure_candidates: Sequence[Any],
              builder_results: Sequence[BuilderResult], runner_results: Sequence[RunnerResult]) -> None:
        assert task_scheduler.tasks[task_id].ctx.mod is not None
        self.rounds.append((task_id, len(measure_candidates), len(builder_results), len(runner_results)))


class StopAfterFirstRound(MeasureCallback):
    """An early stop: the task ends after its first round."""

    def apply(self, task_scheduler: Any, task_id: int, measure_candidates: Sequence[Any],
              builder_results: Sequence[BuilderResult], runner_results: Sequence[RunnerResult]) -> None:
        task_scheduler.terminate_task(task_id)


def test_a_users_builder_runner_and_callback_in_a_real_search() -> None:
    db = MemoryDatabase()
    builder, runner, watcher = NamingBuilder(), Simulator(), Watcher()
    result = tune_tir(GMM, TARGET, db, 6, 3, cost_model="random", seed=0, builder=builder, runner=runner,
                      measure_callbacks=[*MeasureCallback.create("default"), watcher], check_best=False)
    records = db.get_all_tuning_records()
    assert result.tasks[0].trials == 6 and len(records) == 6
    assert len(builder.inputs) == 6 and len(runner.inputs) == 6
    assert [r.artifact_path for r in runner.inputs] == [f"sim-{_digest(str(i.mod))}" for i in builder.inputs]
    # the records hold the simulator's times, and the search's best is the simulator's best
    assert sorted(r.run_secs[0] for r in records) == sorted(simulated(r.artifact_path) for r in runner.inputs)
    assert result.tasks[0].run_best_us == pytest.approx(min(simulated(r.artifact_path) for r in runner.inputs) * 1e6)
    # each result as it ended, then the round: 2 rounds of 3
    assert watcher.rounds == [(0, 3, 3, 3), (0, 3, 3, 3)]
    assert [(t, i) for t, i, _ in watcher.ones] == [(0, 0), (0, 1), (0, 2)] * 2
    assert not builder.closed  # the caller's builder is the caller's to close


@pytest.mark.slow
def test_a_list_without_add_to_database_commits_nothing() -> None:
    """As in TVM, a list of one's own replaces the default: without AddToDatabase no record."""
    db = MemoryDatabase()
    watcher = Watcher()
    result = tune_tir(GMM, TARGET, db, 4, 2, cost_model="random", seed=0, builder=NamingBuilder(),
                      runner=Simulator(), measure_callbacks=[watcher], check_best=False)
    assert result.tasks[0].trials == 4 and len(watcher.ones) == 4
    assert db.get_all_tuning_records() == []


@pytest.mark.slow
def test_an_early_stop_callback_ends_the_task() -> None:
    db = MemoryDatabase()
    target = tuning_target(TARGET, 1)
    contexts = [make_context(GMM, target, "post-order-apply", "evolutionary", 0, name, 1) for name in ("a", "b")]
    result = tune_tasks(contexts, [1.0, 1.0], db, 12, 2, cost_model="random", seed=0, builder=NamingBuilder(),
                        runner=Simulator(), task_scheduler="round-robin",
                        measure_callbacks=[*MeasureCallback.create(), StopAfterFirstRound()], check_best=False)
    assert [t.trials for t in result.tasks] == [2, 2]  # one round each, then stopped
    assert len(db.get_all_tuning_records()) == 4


def test_the_default_list_is_tvms() -> None:
    assert [type(c) for c in MeasureCallback.create("default")] == [AddToDatabase, RemoveBuildArtifact,
                                                                    UpdateCostModel]


@pytest.mark.parametrize("factory, what, known", [(Builder.create, "builder", "local, dask"),
                                                   (Runner.create, "runner", "local, dask, cuda"),
                                                   (MeasureCallback.create, "measure callback list", "default")])
def test_an_unknown_kind_is_one_error_naming_the_known_ones(factory: Any, what: str, known: str) -> None:
    with pytest.raises(UnknownKind) as caught:
        factory("nope")
    assert str(caught.value) == f"unknown {what} 'nope'; known: {known}"


def test_local_kinds_and_their_futures(tmp_path: Any) -> None:
    """"local" makes the local builder and runner; a future measures when asked for, in order."""
    with Builder.create("local", max_workers=1, artifact_dir=str(tmp_path)) as builder, \
            Runner.create("local", number=1, min_repeat_ms=0) as runner:
        assert isinstance(builder, LocalBuilder) and isinstance(runner, LocalRunner)
        built = builder.build([BuilderInput(GMM, TARGET)])
        futures = runner.run([RunnerInput(built[0].artifact_path), RunnerInput(None)])
        assert not futures[0].done() and not futures[1].done()
        missing = futures[1].result()  # measures the first on the way
        assert futures[0].done() and futures[0].result().ok
        assert not missing.ok and "no artifact" in (missing.error_msg or "")


def test_a_failed_build_reaches_the_runner_as_a_failed_result() -> None:
    class HalfBuilder(NamingBuilder):
        def build(self, build_inputs: Sequence[BuilderInput]) -> list[BuilderResult]:
            done = super().build(build_inputs)
            return [r if i % 2 == 0 else BuilderResult(None, "no compiler today") for i, r in enumerate(done)]

    runner = Simulator()
    built, futures = runner.build_and_run(HalfBuilder(), [BuilderInput(GMM, TARGET)] * 4, [None] * 4)
    results = [f.result() for f in futures]
    assert [r.ok for r in results] == [True, False, True, False]
    assert results[1].error_msg == "build failed: no compiler today"
    assert len(runner.inputs) == 2 and [b.artifact_path is None for b in built] == [False, True, False, True]
