"""Sampling: perfect tiles, categorical choices and compute locations, seeded and replayable."""

from __future__ import annotations

import random
from collections import Counter
from math import prod

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from msdb.errors import ScheduleError
from msdb.schedule import ExprRV, LoopRV, Schedule
from msdb.schedule import sampling

from tests.schedule._loop_workloads import BATCH_MATMUL, CHAIN, MATMUL, assert_same_results, load


# ---- the algorithms -----------------------------------------------------------------------


def test_factorize_divisors_and_counts() -> None:
    assert sampling.factorize(1) == ()
    assert sampling.factorize(360) == ((2, 3), (3, 2), (5, 1))
    assert sampling.factorize(2**31 - 1) == ((2**31 - 1, 1),)
    assert sampling.divisors(12) == [1, 2, 3, 4, 6, 12]
    # ordered factorizations of 12 into 2 factors: the 6 divisor pairs
    assert sampling.count_tilings(12, 2) == 6
    assert sampling.count_tilings(8, 3) == 10  # compositions of 3 into 3 parts
    assert sampling.count_tilings(1, 4) == 1


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.integers(1, 4096), st.integers(1, 6), st.integers(-1, 64), st.integers(0, 2**31))
def test_sampled_tiles_multiply_to_the_extent(extent: int, n: int, max_innermost: int, seed: int) -> None:
    tile = sampling.sample_perfect_tile(random.Random(seed), extent, n, max_innermost)
    assert len(tile) == n
    assert prod(tile) == extent
    assert all(t >= 1 for t in tile)
    if n > 1 and max_innermost >= 1:
        assert tile[-1] <= max_innermost


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.integers(1, 4096), st.lists(st.integers(1, 64), min_size=1, max_size=6))
def test_repaired_decisions_multiply_to_the_extent(extent: int, decision: list[int]) -> None:
    fixed = sampling.repair_perfect_tile(extent, decision)
    assert len(fixed) == len(decision)
    assert prod(fixed) == extent
    if prod(decision) == extent:
        assert fixed == decision


def test_repair_follows_tvm() -> None:
    # from the innermost factor out: one that no longer divides what is left takes all of it
    # (TVM's "trivial default solution (1, ..., 1, L)"); the outermost takes the rest
    assert sampling.repair_perfect_tile(128, [2, 1, 1, 64]) == [2, 1, 1, 64]
    assert sampling.repair_perfect_tile(96, [2, 1, 1, 64]) == [1, 1, 1, 96]
    assert sampling.repair_perfect_tile(96, [1, 3, 2, 16]) == [1, 3, 2, 16]
    assert sampling.repair_perfect_tile(64, [1, 3, 2, 16]) == [1, 2, 2, 16]


def test_perfect_tile_is_uniform_over_factorizations() -> None:
    rng = random.Random(1234)
    counts = Counter(tuple(sampling.sample_perfect_tile(rng, 12, 2, 16)) for _ in range(6000))
    assert set(counts) == {(12, 1), (6, 2), (4, 3), (3, 4), (2, 6), (1, 12)}
    assert all(800 < c < 1200 for c in counts.values()), counts
    # with an innermost limit the remaining factorizations stay equally likely
    counts = Counter(tuple(sampling.sample_perfect_tile(rng, 12, 2, 3)) for _ in range(3000))
    assert set(counts) == {(12, 1), (6, 2), (4, 3)}
    assert all(800 < c < 1200 for c in counts.values()), counts


def test_categorical_is_weighted() -> None:
    rng = random.Random(99)
    counts = Counter(sampling.sample_categorical(rng, [0.1, 0.0, 0.9]) for _ in range(5000))
    assert counts[1] == 0
    assert 350 < counts[0] < 650 and 4350 < counts[2] < 4650
    with pytest.raises(ValueError):
        sampling.sample_categorical(rng, [0.0, 0.0])


# ---- schedule-level sampling --------------------------------------------------------------


def test_sample_perfect_tile_records_its_decision() -> None:
    sch = Schedule(load(BATCH_MATMUL), seed=5)
    _, i, j, k = sch.get_loops(sch.get_block("Z"))
    rvs = sch.sample_perfect_tile(k, n=4, max_innermost_factor=2)
    assert len(rvs) == 4 and all(isinstance(v, ExprRV) for v in rvs)
    values = [sch.get(v) for v in rvs]
    assert prod(values) == 12 and values[-1] <= 2
    inst = sch.trace.insts[-1]
    assert (inst.kind, inst.inputs, inst.attrs, inst.outputs) == ("SamplePerfectTile", (k,), (4, 2), tuple(rvs))
    assert sch.trace.decisions[inst] == values


def test_sample_perfect_tile_uses_and_repairs_a_given_decision() -> None:
    sch = Schedule(load(BATCH_MATMUL), seed=5)
    _, i, j, k = sch.get_loops(sch.get_block("Z"))
    rvs = sch.sample_perfect_tile(k, n=3, decision=[2, 3, 2])
    assert [sch.get(v) for v in rvs] == [2, 3, 2]
    rvs = sch.sample_perfect_tile(k, n=3, decision=[1, 5, 4])  # 5 does not divide 12 / 4
    assert [sch.get(v) for v in rvs] == [1, 3, 4]
    assert sch.trace.decisions[sch.trace.insts[-1]] == [1, 3, 4]
    before = sch.mod
    with pytest.raises(ScheduleError, match="decision"):
        sch.sample_perfect_tile(k, n=3, decision=[2, 6])
    with pytest.raises(ScheduleError, match="decision"):
        sch.sample_perfect_tile(k, n=2, decision=[0, 12])
    assert sch.mod is before


def test_same_seed_same_decisions() -> None:
    def decisions(seed: int) -> list:
        sch = Schedule(load(BATCH_MATMUL), seed=seed)
        b, i, j, k = sch.get_loops(sch.get_block("Z"))
        for loop in (i, j, k):
            sch.split(loop, sch.sample_perfect_tile(loop, n=3, max_innermost_factor=4))
        sch.sample_categorical([0, 16, 64, 512], [0.25, 0.25, 0.25, 0.25])
        return [sch.trace.decisions[inst] for inst in sch.trace.insts if inst in sch.trace.decisions]

    assert decisions(42) == decisions(42)
    runs = {str(decisions(seed)) for seed in range(8)}
    assert len(runs) > 1  # the seed matters


def test_copy_forks_the_random_state() -> None:
    sch = Schedule(load(BATCH_MATMUL), seed=11)
    _, _, _, k = sch.get_loops(sch.get_block("Z"))
    clone = sch.copy()
    a = [sch.get(v) for v in sch.sample_perfect_tile(k, n=3)]
    b = [clone.get(v) for v in clone.sample_perfect_tile(k, n=3)]
    assert a == b  # same state, same draw
    assert len(clone.trace.insts) == len(sch.trace.insts)


def test_sample_categorical() -> None:
    sch = Schedule(load(MATMUL), seed=1)
    v = sch.sample_categorical([0, 16, 64, 512], [0.25, 0.25, 0.25, 0.25], decision=2)
    assert sch.get(v) == 64
    inst = sch.trace.insts[-1]
    assert (inst.kind, inst.inputs, inst.attrs) == ("SampleCategorical", (), ([0, 16, 64, 512], [0.25, 0.25, 0.25, 0.25]))
    assert sch.trace.decisions[inst] == 2
    seen = {sch.get(sch.sample_categorical([1, 2, 3], [0.0, 1.0, 1.0])) for _ in range(40)}
    assert seen == {2, 3}
    with pytest.raises(ScheduleError, match="decision"):
        sch.sample_categorical([1, 2], [0.5, 0.5], decision=2)
    with pytest.raises(ScheduleError, match="probabilities"):
        sch.sample_categorical([1, 2], [0.5])


def _has_block_primitives() -> bool:
    return hasattr(Schedule, "compute_at") and hasattr(Schedule, "compute_inline")


@pytest.mark.skipif(not _has_block_primitives(), reason="needs compute_at/compute_inline")
def test_sample_compute_location_candidates_and_decisions() -> None:
    mod = load(CHAIN)
    seen = set()
    for seed in range(30):
        sch = Schedule(mod, seed=seed)
        loc = sch.sample_compute_location(sch.get_block("B"))
        assert isinstance(loc, LoopRV)
        seen.add(sch.trace.decisions[sch.trace.insts[-1]])
    # inline, root, and both loops of the consumer C
    assert seen == {-2, -1, 0, 1}
    sch = Schedule(mod, seed=0)
    block_b = sch.get_block("B")
    loc = sch.sample_compute_location(block_b, decision=1)
    assert sch.trace.decisions[sch.trace.insts[-1]] == 1
    target = sch.get(loc)
    assert target.loop_var.name == "j"
    sch.compute_at(block_b, loc)
    assert_same_results(mod, sch.mod)
    # "root" is a no-op location for compute_at; a stale decision falls back to a candidate
    sch = Schedule(mod, seed=0)
    block_b = sch.get_block("B")
    loc = sch.sample_compute_location(block_b, decision=-1)
    assert sch.get(loc) == "root"
    sch.compute_at(block_b, loc)
    assert sch.get(block_b).name_hint == "B"
    assert sch.trace.decisions[sch.trace.insts[-2]] == -1
    sch = Schedule(mod, seed=0)
    sch.sample_compute_location(sch.get_block("B"), decision=7)
    assert sch.trace.decisions[sch.trace.insts[-1]] == 1
    # the block with no consumer can only stay where it is
    sch = Schedule(mod, seed=0)
    sch.sample_compute_location(sch.get_block("C"))
    assert sch.trace.decisions[sch.trace.insts[-1]] == -1


def _decided_reference(state: object, block: str, decision: int) -> int:
    """The decision the full candidate list gives: kept if a candidate, else the nearest below."""
    from msdb.schedule.prim_sampling import compute_location_candidates

    indices, _ = compute_location_candidates(state, "main", block)  # type: ignore[arg-type]
    return max((i for i in indices if i <= decision), default=-1)


def test_a_decided_compute_location_equals_the_full_candidate_list() -> None:
    """Replay tries one location (nearest first) instead of listing every candidate; for every
    decision, on every block of a conv and a conv-bn-relu (as built and with the last block's
    loops tiled), the answer is the full list's."""
    from msdb.ir import zoo
    from msdb.schedule.prim_sampling import sample_compute_location

    schedules = [Schedule(zoo.build("C2D", 1, 8, 8, 4, 8, 3, 1, 1), seed=0)]
    for tiled in (False, True):
        sch = Schedule(zoo.build("CBR", 1, 8, 8, 4, 8, 3, 1, 1), seed=0)
        if tiled:
            last = sch.get_child_blocks(sch.get_block("root"))[-1]
            sch.split(sch.get_loops(last)[1], [None, 2])
            sch.split(sch.get_loops(last)[3], [None, 2])
        schedules.append(sch)
    answers = Counter()
    for sch in schedules:
        for block in [sch.get(b).name_hint for b in sch.get_child_blocks(sch.get_block("root"))]:
            for decision in range(-3, 9):
                got, _ = sample_compute_location(sch.state, "main", block, decision, lambda: random.Random(0))
                assert got == _decided_reference(sch.state, block, decision), (block, decision)
                answers[got] += 1
    assert answers[-2] and answers[-1] and sum(n for d, n in answers.items() if d >= 0) > 20  # every kind of answer


def test_a_compute_at_check_answers_as_the_move_and_changes_nothing() -> None:
    """`compute_at(check_only=True)` (TVM's CanComputeAt, what drawing a compute location
    tries at every loop) raises exactly when the move raises, with the same message, and leaves
    the state's module as it was."""
    from msdb.ir import zoo
    from msdb.schedule import prim_compute_at

    sch = Schedule(zoo.build("C2D", 1, 14, 14, 16, 16, 3, 1, 1))
    conv = sch.get_block("conv2d_nhwc")
    loops = sch.get_loops(conv)
    sch.split(loops[1], [None, 7])
    outcomes = []
    for block in ("PadInput", "conv2d_nhwc"):
        for rv in sch.get_loops(sch.get_block("conv2d_nhwc")):
            var = sch.get(rv).loop_var
            before = sch.state.mod
            answers = []
            for check_only in (True, False):
                state = sch.state.copy()
                try:
                    prim_compute_at.compute_at(state, "main", block, var, preserve_unit_loops=True, index=-1,
                                               reverse=False, check_only=check_only)
                    answers.append(("ok", state.mod is before))
                except ScheduleError as exc:
                    answers.append((str(exc), state.mod is before))
            assert answers[0][1] is True and answers[0][0] == answers[1][0]
            outcomes.append(answers[0][0] == "ok")
            assert sch.state.mod is before
    assert True in outcomes and False in outcomes  # both answers were checked


def test_a_decided_location_is_moved_to_once_and_the_move_is_the_primitives() -> None:
    """A decided location is tried with the move itself, and the compute-at (or inline) right
    after takes the state the try gave: the module is the one the primitive alone builds, on a
    conv and a conv-bn-relu, for every decision. A try is not taken once anything else changed
    the module in between."""
    from msdb.hashing import structural_equal
    from msdb.ir import zoo

    moved = 0
    for mod in (zoo.build("C2D", 1, 8, 8, 4, 8, 3, 1, 1), zoo.build("CBR", 1, 8, 8, 4, 8, 3, 1, 1)):
        first = Schedule(mod)
        blocks = [first.get(b).name_hint for b in first.get_child_blocks(first.get_block("root"))]
        for block in blocks[:-1]:
            for decision in range(-2, 8):
                sch = Schedule(mod, seed=0)
                rv = sch.get_block(block)
                loc = sch.sample_compute_location(rv, decision=decision)
                tried = sch.state._tried
                sch.compute_at(rv, loc, preserve_unit_loops=True)
                alone = Schedule(mod, seed=0)
                target = sch.get(loc)
                if isinstance(target, str):
                    if target == "inline":
                        alone.compute_inline(alone.get_block(block))
                else:
                    var_name = target.loop_var.name
                    consumer_loops = {alone.get(l).loop_var.name: l for b in alone.get_consumers(alone.get_block(block))
                                      for l in alone.get_loops(b)}
                    alone.compute_at(alone.get_block(block), consumer_loops[var_name], preserve_unit_loops=True)
                    assert tried is not None and sch.state.mod is tried[2].mod  # the try's module, taken
                    moved += 1
                assert structural_equal(sch.mod, alone.mod), (block, decision)
    assert moved > 5

    sch = Schedule(zoo.build("C2D", 1, 8, 8, 4, 8, 3, 1, 1), seed=0)
    pad = sch.get_block("PadInput")
    loc = sch.sample_compute_location(pad, decision=2)
    target = sch.get(loc)
    assert not isinstance(target, str)
    tried = sch.state._tried
    assert tried is not None
    sch.annotate(sch.get_block("conv2d_nhwc"), "pragma_note", 1)  # the module changes after the try
    sch.compute_at(pad, loc, preserve_unit_loops=True)
    assert sch.state.mod is not tried[2].mod
    assert sch.get(sch.get_block("conv2d_nhwc")).annotations["pragma_note"] == 1  # the try was not taken
    assert any(sch.get(l).loop_var is target.loop_var for l in sch.get_loops(pad))


def test_a_drawn_compute_location_hands_its_move_to_the_compute_at_that_follows() -> None:
    """Drawing a compute location plans every candidate (TVM's CanComputeAt); the drawn one's
    move (a loop's compute-at, or inlining) is made on a copy and kept, and the `ComputeAt`
    after it takes that very state instead of moving the block again: the module an explicit
    compute-at at that loop (or an inline) gives."""
    from msdb.hashing import structural_equal
    from msdb.ir import zoo
    from msdb.schedule.prim_sampling import compute_at_move, inline_move

    drawn = Counter()
    for seed in range(16):
        sch = Schedule(zoo.build("C2D", 1, 14, 14, 16, 16, 3, 1, 1), seed=seed)
        conv = sch.get_block("conv2d_nhwc")
        sch.split(sch.get_loops(conv)[1], [None, 7])
        pad = sch.get_block("PadInput")
        before = sch.mod
        location = sch.sample_compute_location(pad)
        decision = sch.trace.decisions[sch.trace.insts[-1]]
        drawn[decision] += 1
        if decision == -1:
            continue
        kept = sch.state._tried
        assert kept is not None
        move = inline_move("main", "PadInput") if decision == -2 else \
            compute_at_move("main", "PadInput", sch.get(location).loop_var, True, -1)
        assert kept[0] == move and kept[1] is before
        sch.compute_at(pad, location, preserve_unit_loops=True)
        assert sch.state.mod is kept[2].mod  # taken, not moved again
        explicit = Schedule(before)
        if decision == -2:
            explicit.compute_inline(explicit.get_block("PadInput"))
        else:
            explicit_loops = explicit.get_loops(explicit.get_block("conv2d_nhwc"))
            explicit.compute_at(explicit.get_block("PadInput"), explicit_loops[decision], preserve_unit_loops=True)
        assert structural_equal(sch.mod, explicit.mod)
    assert drawn[-2] and drawn[-1] and sum(n for d, n in drawn.items() if d >= 0)  # inline, root and loops drawn
