"""Mutants replayed from their parent's copy (`prefix_replay`) give what a replay from the
start gives: the same module, the same trace and decisions, for every CPU mutator, and the
evolutionary search measures the same candidates with it as without it."""

from __future__ import annotations

import random

import pytest

from msdb.database import MemoryDatabase
from msdb.hashing import structural_equal
from msdb.ir import zoo
from msdb.records import Target
from msdb.schedule import Schedule
from msdb.schedule.trace import Trace, TraceError
from msdb.tuner.cost_model import XGBModel
from msdb.tuner.search.evolutionary import EvolutionarySearch
from msdb.tuner.search.prefix_replay import PrefixReplays
from msdb.tuner.search.replay import apply_trace
from msdb.tuner.tune import make_context, tune_tir

from ._fakes import FakeBuilder, FakeRunner

CPU = Target("llvm -num-cores=1")
C2D = zoo.build("C2D", 1, 6, 6, 4, 8, 3, 1, 1)


def _candidates(count: int):
    """A context of the default CPU space, its post-processors, and `count` replayed random
    samples (kept with their copies in a PrefixReplays)."""
    context = make_context(C2D, CPU, "post-order-apply", "evolutionary", 3, "c2d", 1)
    spaces = context.generate_design_space()
    postprocs = list(context.space_generator.postprocs)
    prefixes = PrefixReplays()
    found = []
    seed = 0
    while len(found) < count:
        seed += 1
        sch = apply_trace(context.mod, Trace(spaces[seed % len(spaces)].trace.insts), postprocs, seed, prefixes=prefixes)
        if sch is not None:
            found.append(sch)
    return context, postprocs, prefixes, found


def test_every_mutator_resumed_from_the_parent_gives_the_replay_from_the_start() -> None:
    context, postprocs, prefixes, parents = _candidates(6)
    mutators = list(context.space_generator.mutator_probs)
    assert {type(m).__name__ for m in mutators} == {"MutateTileSize", "MutateComputeLocation", "MutateUnroll",
                                                     "MutateParallel"}
    rng = random.Random(7)
    compared = 0
    for mutator in mutators:
        for parent in parents:
            mutant = mutator.apply(parent.trace, rng)
            if mutant is None:
                continue
            before = prefixes.resumed
            resumed = apply_trace(context.mod, mutant, postprocs, 11, prefixes=prefixes, parent=parent)
            fresh = apply_trace(context.mod, mutant, postprocs, 11)
            assert (resumed is None) == (fresh is None), type(mutator).__name__
            if fresh is None:
                continue
            assert resumed is not None
            assert prefixes.resumed == before + 1, f"{type(mutator).__name__} did not resume from the parent"
            assert structural_equal(resumed.mod, fresh.mod)
            assert resumed.trace.as_json() == fresh.trace.as_json()
            compared += 1
    assert compared >= 12
    assert prefixes.skipped_instructions > 0


def test_a_mutant_of_a_resumed_mutant_resumes_too() -> None:
    context, postprocs, prefixes, (parent,) = _candidates(1)
    tile = next(m for m in context.space_generator.mutator_probs if type(m).__name__ == "MutateTileSize")
    rng = random.Random(3)
    generation = parent
    for _ in range(3):
        mutant = tile.apply(generation.trace, rng)
        assert mutant is not None
        child = apply_trace(context.mod, mutant, postprocs, 5, prefixes=prefixes, parent=generation)
        fresh = apply_trace(context.mod, mutant, postprocs, 5)
        assert child is not None and fresh is not None
        assert structural_equal(child.mod, fresh.mod) and child.trace.as_json() == fresh.trace.as_json()
        generation = child
    assert prefixes.resumed == 3


def test_copies_are_kept_only_for_the_generation_alive() -> None:
    context, postprocs, prefixes, parents = _candidates(2)
    tile = next(m for m in context.space_generator.mutator_probs if type(m).__name__ == "MutateTileSize")
    prefixes.keep_only(parents[1:])
    mutant = tile.apply(parents[0].trace, random.Random(1))
    assert mutant is not None
    assert apply_trace(context.mod, mutant, postprocs, 5, prefixes=prefixes, parent=parents[0]) is not None
    assert prefixes.resumed == 0  # the dropped parent's mutant replayed from the start


def test_a_replay_cannot_resume_outside_the_trace() -> None:
    context, _, _, (parent,) = _candidates(1)
    trace = parent.trace.simplified(remove_postproc=True)
    with pytest.raises(TraceError, match="cannot resume a replay at instruction"):
        trace.apply_to_schedule(Schedule(context.mod), remove_postproc=True, start=len(trace.insts) + 1)
    with pytest.raises(TraceError, match="cannot resume a replay at instruction"):
        trace.apply_to_schedule(Schedule(context.mod), remove_postproc=True, start=-1)


@pytest.mark.slow
def test_the_search_measures_the_same_candidates_resuming_mutants_or_not() -> None:
    def run(resume: bool) -> list[str]:
        db = MemoryDatabase()
        search = EvolutionarySearch(population_size=24, init_min_unmeasured=8, genetic_num_iters=3,
                                    replay_from_parent=resume)
        tune_tir(C2D, CPU, db, 12, 4, strategy=search, cost_model=XGBModel(seed=0, num_warmup_samples=0), seed=2,
                 builder=FakeBuilder(), runner=FakeRunner(), check_best=False)  # type: ignore[arg-type]
        if resume:
            assert search._prefixes is not None and search._prefixes.resumed > 0
        return [str(r.trace.as_json()) for r in db.get_all_tuning_records()]

    assert run(True) == run(False)


def test_features_of_resumed_mutants_do_not_depend_on_what_was_remembered() -> None:
    """Resumed mutants share nodes with their parents, and the features, bindings and checks
    remembered by identity or shape are reused across candidates: computed again with every
    cache empty, each candidate's features are the same."""
    import numpy as np

    from msdb.schedule import _block_arith, iter_order
    from msdb.tuner.features import store_walk
    from msdb.tuner.features.per_store import PerStoreFeature

    context, postprocs, prefixes, family = _candidates(3)
    mutators = list(context.space_generator.mutator_probs)
    rng = random.Random(5)
    for _ in range(2):
        children = []
        for parent in family:
            mutant = rng.choice(mutators).apply(parent.trace, rng)
            child = None if mutant is None else apply_trace(context.mod, mutant, postprocs, 9, prefixes=prefixes,
                                                             parent=parent)
            if child is not None:
                children.append(child)
        family += children
    assert prefixes.resumed >= 3
    warm = [PerStoreFeature().extract_mod(sch.mod) for sch in family]
    caches = (store_walk._INFO_CACHE, store_walk._LOAD_FORMS, store_walk._DECIDED_INFO, store_walk._VALUE_VARS,
              store_walk._FORMS_BY_INDICES,
              iter_order._BINDINGS_BY_SHAPE, _block_arith._COVERED_BY_SHAPE)
    for sch, remembered in zip(family, warm):
        for cache in caches:
            cache.clear()
        assert np.array_equal(PerStoreFeature().extract_mod(sch.mod), remembered)


def test_copies_do_not_pile_up_while_the_model_cannot_rank(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a model that ranks, rounds measure mutants of what was measured and never
    evolve a population: each round still drops the copies of candidates no one will mutate."""
    from msdb.ir import zoo
    from msdb.tuner.cost_model.random_model import RandomModel

    held: list[int] = []
    search = EvolutionarySearch(population_size=16, init_min_unmeasured=8)
    generate = EvolutionarySearch.generate_measure_candidates

    def counted(self: EvolutionarySearch):  # type: ignore[no-untyped-def]
        picks = generate(self)
        assert self._prefixes is not None
        held.append(len(self._prefixes._copies))
        return picks

    monkeypatch.setattr(EvolutionarySearch, "generate_measure_candidates", counted)
    tune_tir(zoo.build("GMM", 1, 32, 32, 32), CPU, MemoryDatabase(), 48, 8, strategy=search,
             cost_model=RandomModel(seed=0), seed=3, builder=FakeBuilder(),  # type: ignore[arg-type]
             runner=FakeRunner(), check_best=False)  # type: ignore[arg-type]
    assert len(held) == 6
    assert max(held) <= 2 * min(held[1:]) + 16, held  # bounded by a round's work, not growing with rounds


def test_mutators_that_analyze_the_parent_read_its_copies_and_mutate_as_a_replay_would() -> None:
    """MutateComputeLocation and MutateParallel read the copies kept of the parent's replay
    (before each SampleComputeLocation; after the last instruction) instead of replaying the
    trace: the same mutant and the same draws from the search's generator, for sampled parents
    and for resumed mutants; without a copy they replay. The copy after the last instruction is
    the module the trace's replay builds before post-processing."""
    context, postprocs, prefixes, family = _candidates(5)
    mutators = {type(m).__name__: m for m in context.space_generator.mutator_probs}
    rng = random.Random(4)
    for parent in list(family[:3]):
        mutant = mutators["MutateTileSize"].apply(parent.trace, rng)
        assert mutant is not None
        child = apply_trace(context.mod, mutant, postprocs, 3, prefixes=prefixes, parent=parent)
        assert child is not None
        family.append(child)
    assert prefixes.resumed == 3
    readers = [m for m in mutators.values() if getattr(m, "reads_replays", False)]
    assert sorted(type(m).__name__ for m in readers) == ["MutateComputeLocation", "MutateParallel"]
    mutated = 0
    for number, sch in enumerate(family):
        states = prefixes.states_of(sch)
        assert states is not None
        trace = sch.trace
        replayed_length = next(i for i, inst in enumerate(trace.insts) if inst.kind == "EnterPostproc")
        end = states(replayed_length)
        assert end is not None
        alone = Schedule(context.mod)
        trace.apply_to_schedule(alone, remove_postproc=True)
        assert structural_equal(end.mod, alone.mod)
        for mutator in readers:
            read: list[int] = []

            def counted(index: int):  # type: ignore[no-untyped-def]
                read.append(index)
                return states(index)

            draws = [random.Random(number) for _ in range(3)]
            from_copies = mutator.apply(trace, draws[0], replayed=counted)
            from_replay = mutator.apply(trace, draws[1])
            without_copies = mutator.apply(trace, draws[2], replayed=lambda index: None)
            assert read, type(mutator).__name__
            assert draws[0].getstate() == draws[1].getstate() == draws[2].getstate()
            outcomes = [None if t is None else t.as_json() for t in (from_copies, from_replay, without_copies)]
            assert outcomes[0] == outcomes[1] == outcomes[2], type(mutator).__name__
            mutated += outcomes[0] is not None
    assert mutated >= len(family)
