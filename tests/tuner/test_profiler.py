"""The tuning profiler (docs/architecture.md, "Profiling"): the tuner's phases and "other" add up
to the run's wall time (no phase counted twice), user code gets phases of its own, and `msdb
tune --profile` prints the table. No timing is asserted but that sum, a ratio within one run."""

from __future__ import annotations

import pytest

import time
from typing import Any

from click.testing import CliRunner

from msdb.cli.main import cli
from msdb.database.memory import MemoryDatabase
from msdb.ir import zoo
from msdb.tuner.measure.builder import LocalBuilder
from msdb.tuner.measure.runner import LocalRunner
from msdb.tuner.profiler import PHASES, Profiler
from msdb.tuner.tune import tune_tir

TARGET = "llvm -num-cores=1"


@pytest.mark.slow
def test_the_phases_add_up_to_the_wall_time() -> None:
    db = MemoryDatabase()
    with LocalBuilder(max_workers=1) as builder, LocalRunner(number=1, min_repeat_ms=0) as runner:
        started = time.perf_counter()
        with Profiler() as profiler:
            tune_tir(zoo.build("GMM", 1, 16, 16, 16), TARGET, db, 6, 3, cost_model="xgb", seed=0,
                     builder=builder, runner=runner)
            with Profiler.timeit("mine"):
                db.get_all_tuning_records()
        wall = time.perf_counter() - started
    stats = profiler.get()
    assert set(PHASES) | {"mine", "other", "Total"} == set(stats)
    for phase in PHASES:
        assert stats[phase] > 0, (phase, stats)  # every phase of a round happened and was seen
    assert stats["mine"] > 0
    assert stats["other"] >= 0  # nothing counted twice
    parts = sum(secs for name, secs in stats.items() if name != "Total")
    assert abs(parts - wall) <= 0.05 * wall, (parts, wall, stats)
    table = profiler.table()
    assert all(name in table for name in (*PHASES, "mine", "other", "Total"))


def test_nested_phases_count_their_own_time_only() -> None:
    with Profiler() as profiler:
        with Profiler.timeit("outer"):
            with Profiler.timeit("inner"):
                time.sleep(0.01)
    stats = profiler.get()
    assert stats["inner"] >= 0.01 and stats["outer"] < stats["inner"]
    assert abs(stats["outer"] + stats["inner"] + stats["other"] - stats["Total"]) < 1e-9


def test_timeit_without_a_profiler_does_nothing() -> None:
    assert Profiler.current() is None
    with Profiler.timeit("anything"):
        pass
    with Profiler() as outer:
        assert Profiler.current() is outer
    assert Profiler.current() is None


@pytest.mark.slow
def test_msdb_tune_profile_prints_the_table(tmp_path: Any) -> None:
    db = tmp_path / "t.sqlite"
    result = CliRunner().invoke(cli, ["tune", str(db), "--zoo", "GMM", "--target", TARGET, "--trials", "2",
                                      "--per-iter", "2", "--strategy", "replay-trace", "--cost-model", "random",
                                      "--seed", "0", "--profile"], prog_name="msdb")
    assert result.exit_code == 0, result.output
    table = result.output[result.output.index("Phase"):]
    assert all(name in table for name in (*PHASES, "other", "Total"))
