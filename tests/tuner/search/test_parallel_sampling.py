"""Random samples of a GPU design space (most fail VerifyGPUCode) tried in forked workers are
the samples the serial loop finds, in the same order, with the same failure counts: the parent
draws every try's space and seed first and replays the survivors itself."""

from __future__ import annotations

import json
import os
import signal

import pytest

from msdb.ir import te
from msdb.ir.zoo import matmul
from msdb.records import Target
from msdb.tuner.search import parallel_sampling
from msdb.tuner.search.evolutionary import EvolutionarySearch
from msdb.tuner.tune import make_context


def _strategy(size: int, target: str, population: int) -> EvolutionarySearch:
    """An evolutionary search over msdb's default design space of a size^3 matmul, started."""
    a, b, c = matmul(size, size, size)
    search = EvolutionarySearch(population_size=population, init_min_unmeasured=4)
    context = make_context(te.create_prim_func([a, b, c]), Target(target), "post-order-apply", search, 7, "matmul", 1)
    assert context.space_generator is not None
    search.pre_tuning(8, 8, context.space_generator.generate_design_space(context.mod))
    return search


def _die(chunk: list[tuple[int, int]]) -> list[str | None]:
    """A sampling worker killed by a signal before it answers."""
    os.kill(os.getpid(), signal.SIGKILL)
    return []


def _sample(workers: int, monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], dict[str, int]]:
    monkeypatch.setattr(parallel_sampling, "available_workers", lambda: workers)
    search = _strategy(512, "cuda -arch=sm_90", 96)
    search._mostly_failing = True  # as after a first round in which most samples failed
    found = search._sample_round(96)
    return [json.dumps(sch.trace.as_json()) for sch in found], dict(search.failures)


@pytest.mark.slow
def test_forked_workers_find_the_samples_of_the_serial_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    serial, serial_failures = _sample(1, monkeypatch)
    forked, forked_failures = _sample(3, monkeypatch)
    assert serial == forked
    assert serial_failures == forked_failures
    assert serial_failures.get("VerifyGPUCode", 0) > 0  # the GPU space really drops samples here
    assert 0 < len(serial) < 96


@pytest.mark.slow
def test_a_search_whose_samples_survive_stays_in_one_process(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("sampling forked workers although most samples survive")

    monkeypatch.setattr(parallel_sampling, "survivors", refuse)
    search = _strategy(16, "llvm -num-cores=1", 64)
    assert len(search._sample_init_population(64)) >= 32


@pytest.mark.slow
def test_a_worker_that_dies_leaves_the_samples_to_the_parent(monkeypatch: pytest.MonkeyPatch) -> None:
    """A forked worker killed mid-round (out of memory, a signal) breaks the pool: the round is
    sampled in the tuning process instead, with the serial loop's samples."""
    serial, _ = _sample(1, monkeypatch)
    monkeypatch.setattr(parallel_sampling, "_try_chunk", _die)
    after_crash, failures = _sample(2, monkeypatch)
    assert after_crash == serial
    assert failures.get("VerifyGPUCode", 0) > 0
