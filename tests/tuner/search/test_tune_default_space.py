"""Tuning with msdb's default design space (TVM's CPU rules, post-processors and mutators):
real builds and runs of GMM and a conv2d with a few trials, every committed record replayed,
built and checked against the reference interpreter; and, with the deterministic fake runner,
the same seed gives the same candidates."""

from __future__ import annotations

import pytest

from msdb.database import MemoryDatabase
from msdb.ir import zoo
from msdb.records import Target
from msdb.tuner.cost_model import XGBModel
from msdb.tuner.search.evolutionary import EvolutionarySearch
from msdb.tuner.tune import check_record, tune_tir

from ._fakes import FakeBuilder, FakeRunner

CPU = Target("llvm -num-cores=1")
SMALL = {
    "gmm": zoo.build("GMM", 1, 16, 16, 16),
    "c2d": zoo.build("C2D", 1, 6, 6, 4, 8, 3, 1, 1),
}


def small_evolutionary() -> EvolutionarySearch:
    return EvolutionarySearch(population_size=12, init_min_unmeasured=6, genetic_num_iters=2)


def ranking_model() -> XGBModel:
    """XGBoost without warm-up: it ranks from the second round, so the search evolves (and
    mutates) then; with the default warm-up it would sample at random for 100 trials."""
    return XGBModel(seed=0, num_warmup_samples=0)


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["replay-trace", "evolutionary"])
@pytest.mark.parametrize("name", sorted(SMALL))
def test_every_record_of_a_real_tuning_run_replays_builds_and_computes(name: str, strategy: str) -> None:
    db = MemoryDatabase()
    search = small_evolutionary() if strategy == "evolutionary" else strategy
    model = ranking_model() if strategy == "evolutionary" else "random"
    result = tune_tir(SMALL[name], CPU, db, 6, 3, strategy=search, cost_model=model, seed=1, task_name=name)
    (task,) = result.tasks
    records = db.get_all_tuning_records()
    assert task.trials == len(records) == 6
    assert task.best is not None and task.best.is_valid
    for record in records:
        assert record.is_valid, f"{name}: a default-space candidate failed: {record.run_secs}"
        assert check_record(record) is None
    assert len({str(r.trace.as_json()) for r in records}) == 6  # never the same candidate twice


@pytest.mark.slow
def test_the_same_seed_gives_the_same_candidates_with_the_default_space() -> None:
    def run(seed: int) -> list[str]:
        db = MemoryDatabase()
        tune_tir(SMALL["c2d"], CPU, db, 8, 4, strategy=small_evolutionary(), cost_model=ranking_model(), seed=seed,
                 builder=FakeBuilder(), runner=FakeRunner(), check_best=False)  # type: ignore[arg-type]
        return [str(r.trace.as_json()) for r in db.get_all_tuning_records()]

    first = run(5)
    assert len(first) == 8
    assert run(5) == first
    assert run(6) != first


@pytest.mark.slow
def test_tuning_pretrains_the_cost_model_on_the_databases_records_of_other_workloads() -> None:
    from pathlib import Path

    from msdb.database import JSONDatabase
    team_a = Path(__file__).resolve().parents[2] / "data" / "fixtures" / "tvm-0.27" / "team_a"
    db = MemoryDatabase()
    for record in JSONDatabase(work_dir=team_a, allow_missing=False).get_all_tuning_records():
        db.commit_workload(record.workload.mod)
        db.commit_tuning_record(record)
    model = XGBModel(seed=0)
    tune_tir(SMALL["gmm"], CPU, db, 4, 4, strategy=small_evolutionary(), cost_model=model, seed=0,
             builder=FakeBuilder(), runner=FakeRunner(), check_best=False)  # type: ignore[arg-type]
    assert model.booster is not None  # trained before the first round: the 2 workloads' best 64 records
    assert 100 <= model.data_size - 4 <= 2 * 64  # (a failed measurement is not among the best)
    untouched = XGBModel(seed=0)
    tune_tir(SMALL["gmm"], CPU, db, 4, 4, strategy=small_evolutionary(), cost_model=untouched, seed=0,
             builder=FakeBuilder(), runner=FakeRunner(), check_best=False, pretrain=False)  # type: ignore[arg-type]
    assert untouched.data_size == 4  # only its own measurements


def test_a_users_mutator_and_postproc_plug_into_the_evolutionary_search() -> None:
    from msdb.schedule import Schedule
    from msdb.schedule.trace import Trace
    from msdb.tuner.space.generators import PostOrderApply
    from msdb.tuner.space.mutators import Mutator
    from msdb.tuner.space.postprocs import Postproc

    class SwapFirstTile(Mutator):
        """Reverse the first sampled tile of the trace (a legal perfect tile again)."""

        calls = 0

        def apply(self, trace: Trace, rng: object) -> Trace | None:
            SwapFirstTile.calls += 1
            tiles = [i for i in trace.insts if i.kind == "SamplePerfectTile"]
            if not tiles:
                return None
            return trace.with_decision(tiles[0], list(reversed(trace.get_decision(tiles[0]))), remove_postproc=True)

    class CountingPostproc(Postproc):
        seen = 0

        def apply(self, sch: Schedule) -> bool:
            CountingPostproc.seen += 1
            return True

    space = PostOrderApply(postprocs=[*Postproc.create("llvm"), CountingPostproc()], mutator_probs={SwapFirstTile(): 1.0})
    db = MemoryDatabase()
    tune_tir(SMALL["gmm"], CPU, db, 8, 4, space=space, strategy=small_evolutionary(), cost_model=ranking_model(), seed=3,
             builder=FakeBuilder(), runner=FakeRunner(), check_best=False)  # type: ignore[arg-type]
    assert len(db.get_all_tuning_records()) == 8
    assert SwapFirstTile.calls > 0 and CountingPostproc.seen > 0


@pytest.mark.slow
def test_the_first_round_measures_the_default_schedule_so_tuning_never_loses_to_compile() -> None:
    """The evolutionary search measures msdb's default schedule (what `msdb compile` gives a
    function without a record) in its first round, once per database: its record is real, it
    computes the workload's numbers, the best record is at most its time, and a second session
    on the same database does not measure it again."""
    from msdb.tuner.space.default_schedule import default_schedule
    from msdb.tuner.search.replay import module_key

    db = MemoryDatabase()
    baseline = module_key(default_schedule(SMALL["c2d"], CPU).mod)

    def keys_of(records: list) -> list[str]:
        from msdb.database.base import replay

        return [module_key(replay(r).mod) for r in records]

    result = tune_tir(SMALL["c2d"], CPU, db, 4, 4, strategy=small_evolutionary(), cost_model="random", seed=2)
    records = db.get_all_tuning_records()
    assert len(records) == 4 and keys_of(records).count(baseline) == 1
    measured = records[keys_of(records).index(baseline)]
    assert measured.is_valid and check_record(measured) is None
    (task,) = result.tasks
    assert task.best is not None and task.best.mean_run_secs <= measured.mean_run_secs

    tune_tir(SMALL["c2d"], CPU, db, 4, 4, strategy=small_evolutionary(), cost_model="random", seed=3)
    again = db.get_all_tuning_records()
    assert len(again) == 8 and keys_of(again).count(baseline) == 1


def test_the_default_schedule_candidate_can_be_switched_off() -> None:
    from msdb.tuner.space.default_schedule import default_schedule
    from msdb.tuner.search.replay import module_key
    from msdb.database.base import replay

    db = MemoryDatabase()
    baseline = module_key(default_schedule(SMALL["gmm"], CPU).mod)
    search = EvolutionarySearch(population_size=12, init_min_unmeasured=6, genetic_num_iters=2,
                                measure_default_schedule=False)
    tune_tir(SMALL["gmm"], CPU, db, 4, 4, strategy=search, cost_model="random", seed=2,
             builder=FakeBuilder(), runner=FakeRunner(), check_best=False)  # type: ignore[arg-type]
    assert baseline not in [module_key(replay(r).mod) for r in db.get_all_tuning_records()]


def test_a_default_schedule_that_breaks_does_not_end_the_tuning(monkeypatch: pytest.MonkeyPatch,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    """The baseline is an extra: should the default schedule raise on some workload (a bug), the
    search logs it and measures its design space's candidates as before."""
    from msdb.tuner.space import default_schedule as module

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("a bug in the default schedule")

    monkeypatch.setattr(module, "default_schedule", broken)
    db = MemoryDatabase()
    result = tune_tir(SMALL["gmm"], CPU, db, 4, 4, strategy=small_evolutionary(), cost_model="random", seed=2,
                      builder=FakeBuilder(), runner=FakeRunner(), check_best=False)  # type: ignore[arg-type]
    assert result.tasks[0].trials == len(db.get_all_tuning_records()) == 4
    assert "the default schedule failed; tuning goes on without it" in caplog.text


@pytest.mark.slow
def test_a_task_nobody_tuned_starts_from_its_relatives_records() -> None:
    """The warm start from relatives: a C2D at another resolution and batch size, with no record of its
    own, measures its relatives' best records re-fitted to it in its first round (real builds
    and runs: each such record computes the workload's numbers); switched off with
    `transfer_neighbours=0`; a second session, which finds the workload's own records, transfers
    nothing more."""
    from msdb.database.base import replay
    from msdb.database.transfer import TransferDatabase
    from msdb.tuner.compile.transfer import postprocessor
    from msdb.tuner.search.replay import module_key

    db = MemoryDatabase()
    tune_tir(SMALL["c2d"], CPU, db, 4, 4, strategy=small_evolutionary(), cost_model="random", seed=2)
    relative = zoo.build("C2D", 2, 8, 8, 4, 8, 3, 1, 1)
    transferred = TransferDatabase(db, postprocess=postprocessor(CPU)).answer(relative, CPU)
    assert transferred.schedules, transferred.reason
    wanted = {module_key(sch.mod) for sch in transferred.schedules}

    def searched(neighbours: int) -> MemoryDatabase:
        copy = MemoryDatabase()
        for record in db.get_all_tuning_records():
            copy.commit_workload(record.workload.mod)
            copy.commit_tuning_record(record)
        search = EvolutionarySearch(population_size=12, init_min_unmeasured=6, genetic_num_iters=2,
                                    measure_default_schedule=False, transfer_neighbours=neighbours)
        tune_tir(relative, CPU, copy, 4, 4, strategy=search, cost_model="random", seed=3, task_name="relative")
        return copy

    warm = searched(3)
    mine = [r for r in warm.get_all_tuning_records() if module_key(r.workload.mod) == module_key(relative)]
    keys = {module_key(replay(r).mod) for r in mine}
    assert wanted <= keys
    for record in mine:
        if module_key(replay(record).mod) in wanted:
            assert record.is_valid and check_record(record) is None
    cold = searched(0)
    cold_keys = {module_key(replay(r).mod) for r in cold.get_all_tuning_records()
                 if module_key(r.workload.mod) == module_key(relative)}
    assert not wanted <= cold_keys
    again = EvolutionarySearch(population_size=12, init_min_unmeasured=6, genetic_num_iters=2,
                               measure_default_schedule=False)
    tune_tir(relative, CPU, warm, 4, 4, strategy=again, cost_model="random", seed=4, task_name="relative")
    assert len([r for r in warm.get_all_tuning_records() if module_key(r.workload.mod) == module_key(relative)]) == 8
    assert TransferDatabase(warm).answer(relative, CPU).reason == "the workload has records of its own"


def test_transfer_neighbours_must_be_a_count() -> None:
    with pytest.raises(ValueError, match="transfer_neighbours"):
        EvolutionarySearch(transfer_neighbours=-1)


@pytest.mark.slow
def test_a_winograd_conv_of_blocked_data_tunes_with_the_channels_innermost_in_its_transform() -> None:
    """`fuse="nchwc"`'s Winograd conv (NCHW16c data, 72 channels: five blocks, the last one
    padded) in the default design space: the custom rule for `data_pack`
    (`tuner/space/rules/winograd.py`) keeps the input channels, contiguous in NCHW16c,
    innermost, one block of 16 at a time (all 80 at once would be one 80-lane
    vector per window value); every record computes the conv."""
    from msdb.ir.function import IRModule
    from msdb.ir.functor import uses_var
    from msdb.schedule import Schedule
    from tests.workloads import conv_func

    func = conv_func(1, 72, 8, 16, 3, 1, 1, epilogue="bu", winograd=4, blocked=True)
    db = MemoryDatabase()
    tune_tir(func, CPU, db, 4, 4, strategy="replay-trace", cost_model="random", seed=2, task_name="winograd_nchwc")
    records = db.get_all_tuning_records()
    assert len(records) == 4
    for record in records:
        assert record.is_valid and check_record(record) is None
        sch = Schedule(IRModule.from_func(func))
        record.trace.apply_to_schedule(sch, remove_postproc=True)
        realize = sch.state.realize(sch.func_name, "data_pack")
        loop = sch.get(sch.get_loops(sch.get_block("data_pack"))[-1])
        innermost = loop.loop_var
        assert loop.extent.value == 16  # one block of channels
        assert realize.block.iter_vars[-1].var.name == "v_cc"
        assert uses_var(realize.iter_values[-1], {innermost})  # the channel's binding
        assert not any(uses_var(value, {innermost}) for value in realize.iter_values[:-1])
