"""Mutators: each changes exactly one thing of a trace the way TVM 0.27's does (one decision, or
for MutateParallel one annotation value), keeps tilings perfect, drops post-processing, gives a
trace that replays on the workload, gives None when there is nothing to change, and is
deterministic for a seeded generator. Checked on the traces TVM tuned in the fixtures and on
traces built with the schedule's own primitives."""

from __future__ import annotations

import random
from functools import lru_cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from msdb.database import JSONDatabase
from msdb.ir import te, zoo
from msdb.ir.function import IRModule
from msdb.records.target import Target
from msdb.schedule import Schedule
from msdb.schedule.prim_sampling import compute_location_candidates
from msdb.schedule.trace import Trace
from msdb.tuner.context import TuneContext
from msdb.kinds import UnknownKind
from msdb.tuner.space.mutators import (MutateComputeLocation, MutateParallel, MutateTileSize, MutateUnroll, Mutator,
                                       create)
from msdb.tuner.space.mutators.parallel import num_fused_loops, parallel_prefix_products
from msdb.tuner.space.mutators.tile_size import mutate_tiles, redraw_other

FIXTURES = Path(__file__).resolve().parents[2] / "data" / "fixtures" / "tvm-0.27"
TEAMS = ["team_a", "team_b", "team_c"]
CPU = Target("llvm -num-cores=1")


@lru_cache(maxsize=None)
def fixture_records(team: str) -> tuple[Any, ...]:
    return tuple(JSONDatabase(work_dir=FIXTURES / team, allow_missing=False).get_all_tuning_records())


def ready(mutator: Mutator, mod: IRModule, target: Target = CPU) -> Mutator:
    mutator._initialize_with_tune_context(TuneContext(mod=mod, target=target, rand_state=0))
    return mutator


def changed_decisions(before: Trace, after: Trace) -> list[tuple[int, Any, Any]]:
    """(instruction index, old, new) of every decision that differs; the instructions of both
    traces (post-processing dropped from `before`) must be the same."""
    insts_before, decisions_before = before.as_json(remove_postproc=True)
    insts_after, decisions_after = after.as_json()
    assert insts_after == insts_before
    old = {i: d for i, d in decisions_before}
    new = {i: d for i, d in decisions_after}
    assert old.keys() == new.keys()
    return [(i, old[i], new[i]) for i in sorted(old) if old[i] != new[i]]


def replays(mod: IRModule, trace: Trace) -> Schedule:
    sch = Schedule(mod, seed=0)
    trace.apply_to_schedule(sch)
    return sch


def two_stage() -> IRModule:
    """B = A * 2; C = B + 1 over 16 x 16: B can go inline, at the root, or under C's loops."""
    a = te.placeholder((16, 16), name="A")
    b = te.compute((16, 16), lambda i, j: a[i, j] * 2.0, name="B")
    c = te.compute((16, 16), lambda i, j: b[i, j] + 1.0, name="C")
    return IRModule.from_func(te.create_prim_func([a, c]))


# ---------------------------------------------------------------- the factory


def test_create_llvm_gives_tvms_cpu_mutators_and_probabilities() -> None:
    mutators = Mutator.create("llvm")
    assert [(type(m), p) for m, p in mutators.items()] == [(MutateTileSize, 0.9), (MutateComputeLocation, 0.05),
                                                           (MutateUnroll, 0.03), (MutateParallel, 0.02)]
    parallel = next(m for m in mutators if isinstance(m, MutateParallel))
    assert parallel.max_jobs_per_core == 16 and repr(parallel) == "MutateParallel(max_jobs_per_core=16)"
    assert [type(m) for m in create()] == [type(m) for m in mutators]
    with pytest.raises(UnknownKind):
        Mutator.create("hexagon")


# ---------------------------------------------------------------- on TVM's traces


@pytest.mark.slow
@pytest.mark.parametrize("team", TEAMS)
def test_tile_size_mutations_of_tvms_traces(team: str) -> None:
    for n, record in enumerate(fixture_records(team)[::4]):
        trace = record.trace
        new = MutateTileSize().apply(trace, random.Random(n))
        if new is None:
            continue
        assert not any(inst.kind == "EnterPostproc" for inst in new.insts)
        [(index, old, tiles)] = changed_decisions(trace, new)
        inst = new.insts[index]
        assert inst.kind == "SamplePerfectTile"
        assert _product(tiles) == _product(old) and len(tiles) == len(old)
        assert sum(a != b for a, b in zip(old, tiles)) == 2
        assert tiles[-1] <= inst.attrs[1]
        replays(record.workload.mod, new)


@pytest.mark.parametrize("team", TEAMS)
def test_unroll_mutations_of_tvms_traces(team: str) -> None:
    for n, record in enumerate(fixture_records(team)[::8]):
        new = MutateUnroll().apply(record.trace, random.Random(n))
        assert new is not None
        [(index, old, choice)] = changed_decisions(record.trace, new)
        assert new.insts[index].kind == "SampleCategorical" and old != choice and 0 <= choice < 4
        replays(record.workload.mod, new)


@pytest.mark.slow
@pytest.mark.parametrize("team", TEAMS)
def test_compute_location_mutations_of_tvms_traces(team: str) -> None:
    mutated = 0
    for n, record in enumerate(fixture_records(team)[::4]):
        mod = record.workload.mod
        new = ready(MutateComputeLocation(), mod).apply(record.trace, random.Random(n))
        if not any(inst.kind == "SampleComputeLocation" for inst in record.trace.insts):
            assert new is None
            continue
        if new is None:
            continue
        [(index, old, location)] = changed_decisions(record.trace, new)
        assert new.insts[index].kind == "SampleComputeLocation" and old != location
        replays(mod, new)
        mutated += 1
    if team == "team_b":  # C2D's padding stage has compute locations to choose from
        assert mutated > 0


@pytest.mark.parametrize("team", TEAMS)
def test_parallel_mutations_of_tvms_traces(team: str) -> None:
    for n, record in enumerate(fixture_records(team)[::8]):
        trace, mod = record.trace, record.workload.mod
        mutator = ready(MutateParallel(max_jobs_per_core=16), mod, record.target)
        new = mutator.apply(trace, random.Random(n))
        assert new is not None
        before, decisions_before = trace.as_json(remove_postproc=True)
        after, decisions_after = new.as_json()
        assert decisions_after == decisions_before
        differ = [i for i, (a, b) in enumerate(zip(before, after)) if a != b]
        assert len(before) == len(after) and len(differ) == 1
        [i] = differ
        assert after[i][0] == "Annotate" and after[i][2] == ["meta_schedule.parallel"]
        old_value, new_value = before[i][1][1], after[i][1][1]
        assert isinstance(new_value, int) and 1 <= new_value <= 16  # one core x 16 jobs
        sch = replays(mod, Trace(trace.insts[:trace.insts.index(next(x for x in trace.insts
                                                                         if x.kind == "EnterPostproc"))],
                                 trace.decisions))
        products = parallel_prefix_products(sch.state, "main", "root", 16)
        assert num_fused_loops(products, new_value) != num_fused_loops(products, old_value)
        replays(mod, new)


# ---------------------------------------------------------------- on traces built here


def tiled_matmul(seed: int = 0) -> tuple[IRModule, Trace]:
    mod = zoo.build("matmul", 64, 64, 64)
    sch = Schedule(mod, seed=seed)
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    sch.split(i, sch.sample_perfect_tile(i, n=4, max_innermost_factor=8))
    sch.split(j, sch.sample_perfect_tile(j, n=2, max_innermost_factor=16))
    sch.split(k, sch.sample_perfect_tile(k, n=3, max_innermost_factor=4))
    root = sch.get_block("root")
    sch.annotate(root, "meta_schedule.parallel", 16)
    sch.annotate(root, "meta_schedule.unroll_explicit",
                 sch.sample_categorical([0, 16, 64, 512], [0.25, 0.25, 0.25, 0.25]))
    return mod, sch.trace


def test_tile_size_keeps_tilings_perfect_and_within_the_innermost_bound() -> None:
    mod, trace = tiled_matmul()
    for seed in range(40):
        new = MutateTileSize().apply(trace, random.Random(seed))
        assert new is not None
        [(index, old, tiles)] = changed_decisions(trace, new)
        assert _product(tiles) == _product(old) == 64
        assert tiles[-1] <= new.insts[index].attrs[1]
        replays(mod, new)


def test_mutators_are_deterministic_for_a_seed() -> None:
    mod, trace = tiled_matmul()
    for mutator in (MutateTileSize(), MutateUnroll(), ready(MutateParallel(), mod)):
        first = mutator.apply(trace, random.Random(7))
        second = mutator.apply(trace, random.Random(7))
        assert first is not None and second is not None
        assert first.as_json() == second.as_json(), type(mutator).__name__
    outcomes = {str(t.as_json()) for s in range(20) if (t := MutateTileSize().apply(trace, random.Random(s)))}
    assert len(outcomes) > 1  # and different seeds do differ


def test_compute_location_moves_a_block_to_another_legal_place() -> None:
    mod = two_stage()
    sch = Schedule(mod, seed=0)
    block = sch.get_block("B")
    indices, _ = compute_location_candidates(sch.state, "main", "B")
    assert indices == [-2, -1, 0, 1]
    sch.compute_at(block, sch.sample_compute_location(block, decision=0), preserve_unit_loops=True)
    trace = sch.trace
    mutator = ready(MutateComputeLocation(), mod)
    seen = set()
    for seed in range(30):
        new = mutator.apply(trace, random.Random(seed))
        assert new is not None
        [(_, old, location)] = changed_decisions(trace, new)
        assert old == 0 and location in (-2, -1, 1)
        seen.add(location)
        replays(mod, new)
    assert seen == {-2, -1, 1}
    assert mutator.apply(trace, random.Random(3)).as_json() == mutator.apply(trace, random.Random(3)).as_json()  # type: ignore[union-attr]


def test_unroll_redraws_among_the_other_choices_by_probability() -> None:
    _, trace = tiled_matmul()
    index = next(i for i, inst in enumerate(trace.insts) if inst.kind == "SampleCategorical")
    current = trace.get_decision(trace.insts[index])
    counts = [0, 0, 0, 0]
    for seed in range(300):
        new = MutateUnroll().apply(trace, random.Random(seed))
        assert new is not None
        [(i, old, choice)] = changed_decisions(trace, new)
        assert i == index and old == current
        counts[choice] += 1
    assert counts[current] == 0 and all(c > 50 for n, c in enumerate(counts) if n != current)
    assert redraw_other([0.0, 1.0, 0.0], 1, random.Random(0)) is None  # no other choice has weight
    assert redraw_other([0.0, 1.0, 3.0], 1, random.Random(0)) == 2


def test_mutators_return_none_when_nothing_applies() -> None:
    mod = zoo.build("matmul", 16, 16, 16)
    sch = Schedule(mod, seed=0)
    block = sch.get_block("C")
    i, _, _ = sch.get_loops(block)
    sch.sample_perfect_tile(i, n=4, decision=[1, 1, 1, 16])
    sch.split(i, [None, 16])
    sch.annotate(block, "meta_schedule.unroll_explicit", 16)  # a literal, not a sample
    trace = sch.trace
    rng = random.Random(0)
    assert MutateUnroll().apply(trace, rng) is None
    assert ready(MutateComputeLocation(), mod).apply(trace, rng) is None
    assert ready(MutateParallel(), mod).apply(trace, rng) is None
    assert MutateTileSize().apply(Trace(), rng) is None
    single = Schedule(mod, seed=0)
    single.sample_perfect_tile(single.get_loops(single.get_block("C"))[0], n=1)
    assert MutateTileSize().apply(single.trace, rng) is None  # one tile: nothing to move
    # two tiles, all of the extent outside and an innermost bound of 1: nothing may move in
    assert mutate_tiles([16, 1], 1, rng) is None


def test_parallel_gives_up_when_every_extent_fuses_the_same_loops() -> None:
    a = te.placeholder((1, 4), name="A")
    b = te.compute((1, 4), lambda i, j: a[i, j] + 1.0, name="B")
    mod = IRModule.from_func(te.create_prim_func([a, b]))
    sch = Schedule(mod, seed=0)
    sch.annotate(sch.get_block("root"), "meta_schedule.parallel", 64)
    # extents 1 x 4: the products are [1, 4]; 1 fuses one loop, 4 fuses two: one other plan
    new = ready(MutateParallel(), mod).apply(sch.trace, random.Random(0))
    assert new is not None and new.insts[-1].inputs[1] == 1
    sch = Schedule(mod, seed=0)
    sch.annotate(sch.get_block("root"), "meta_schedule.parallel", 1)
    assert ready(MutateParallel(), mod).apply(sch.trace, random.Random(0)).insts[-1].inputs[1] == 4  # type: ignore[union-attr]
    c = te.compute((4,), lambda i: te.const(1.0), name="C")
    flat = IRModule.from_func(te.create_prim_func([c]))
    sch = Schedule(flat, seed=0)
    sch.annotate(sch.get_block("root"), "meta_schedule.parallel", 16)
    assert ready(MutateParallel(), flat).apply(sch.trace, random.Random(0)) is None  # only one plan


def test_parallel_plans_follow_tvms_rules() -> None:
    assert num_fused_loops([[1, 4, 64], [8]], 4) == (2, 1)
    assert num_fused_loops([[1, 4, 64], [8]], 5) == (3, 1)
    assert num_fused_loops([[1, 4, 64], [8]], 64) == (3, 1)
    assert num_fused_loops([[2, 8]], 1) == (1,)


def test_replaying_mutators_need_the_tasks_module() -> None:
    _, trace = tiled_matmul()
    with pytest.raises(ValueError, match="TuneContext"):
        MutateParallel().apply(trace, random.Random(0))
    with pytest.raises(ValueError, match="TuneContext"):
        MutateComputeLocation().apply(trace, random.Random(0))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from([1, 2, 3, 4, 6, 8, 16]), min_size=2, max_size=5),
       st.sampled_from([4, 16, 64]), st.integers(0, 2**31))
def test_mutate_tiles_preserves_the_product_and_the_innermost_bound(tiles: list[int], bound: int, seed: int) -> None:
    if tiles[-1] > bound or _product(tiles) < 2:
        return
    new = mutate_tiles(tiles, bound, random.Random(seed))
    if new is None:
        assert len(tiles) == 2
        return
    assert _product(new) == _product(tiles)
    assert new[-1] <= bound
    assert sum(a != b for a, b in zip(tiles, new)) == 2


def _product(values: list[int]) -> int:
    result = 1
    for v in values:
        result *= v
    return result
