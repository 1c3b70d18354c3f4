"""Re-fitting a record's trace to a relative workload (msdb.schedule.refit; docs/architecture.md,
"Re-fitting a trace to a relative"): TVM 0.27 records of the fixture teams re-fitted to the same
operators at other resolutions, batch sizes and index dtypes compute what the workload computes,
through msdb's interpreter and through the built kernel; the re-fit is deterministic, and a
record that does not fit says which instruction and why."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from msdb.errors import MsdbError
from msdb.hashing import structural_equal
from msdb.ir import expr as E
from msdb.ir import interpret, zoo
from msdb.ir.function import IRModule
from msdb.records.target import Target
from msdb.schedule import Schedule, Trace
from msdb.schedule.refit import RefitResult, refit_tile, refit_trace
from tests.tuner._util import fixture_records, mean_run_secs, random_arrays

#: Runs on any AVX2 host (tests/isa.py's level 3).
TARGET = Target({"kind": "llvm", "mcpu": "x86-64-v3", "num-cores": 1})


def _int64(*params: Any) -> tuple[Any, ...]:
    return tuple(E.make_const(p, "int64") for p in params)


#: label -> (fixture team, workload index, zoo name, the relative's parameters). The fixture
#: workloads are zoo workloads at TVM's first config (checked below).
RELATIVES: dict[str, tuple[str, int, str, tuple[Any, ...]]] = {
    "C2D 224->16, 64->8 channels": ("b", 1, "C2D", (1, 16, 16, 3, 8, 7, 2, 3)),
    "GMM batch 1->2, 128->16x8x12": ("a", 0, "GMM", (2, 16, 8, 12)),
    "GMM int32->int64 index": ("a", 0, "GMM", _int64(1, 16, 16, 16)),
    "C1D 256->16": ("c", 0, "C1D", (1, 16, 8, 16, 3, 2, 1)),
    "DEP 112->12": ("c", 1, "DEP", (1, 12, 12, 8, 3, 1, 1)),
}

_FIXTURE_NAMES = {("b", 1): "C2D", ("a", 0): "GMM", ("c", 0): "C1D", ("c", 1): "DEP"}


@functools.lru_cache(maxsize=None)
def _best_trace(team: str, index: int) -> Trace:
    """The best valid record's trace of one fixture workload."""
    _, records = fixture_records(team)
    valid = [r for r in records if r[0] == index and r[1][1] and min(r[1][1]) < 1e9]
    return Trace.from_json(min(valid, key=mean_run_secs)[1][0])


def _llvm_postprocs(sch: Schedule) -> bool:
    """The tuner's CPU post-processors, what a tuner-side caller passes as `postprocess`."""
    from msdb.tuner.space.postprocs.base import Postproc

    return all(postproc.apply(sch) for postproc in Postproc.create("llvm"))


def _assert_computes_the_reference(reference: IRModule, result: RefitResult) -> None:
    """The re-fitted module, run by msdb's interpreter and built for TARGET, gives what the
    interpreter gives for the unscheduled workload."""
    from msdb.tuner import build

    arrays = random_arrays(reference, seed=1)
    expected = [a.copy() for a in arrays]
    interpret(reference, *expected)
    interpreted = [a.copy() for a in arrays]
    interpret(result.mod, *interpreted)
    built = [a.copy() for a in arrays]
    build(result.mod, TARGET)(*built)
    for buf, want, got_i, got_b in zip(reference.main.buffers, expected, interpreted, built):
        np.testing.assert_allclose(got_i, want, rtol=1e-4, atol=1e-5, err_msg=f"interpreter, buffer {buf.name}")
        np.testing.assert_allclose(got_b, want, rtol=1e-4, atol=1e-5, err_msg=f"kernel, buffer {buf.name}")


# ------------------------------------------------------------------------------ the tile rule


@pytest.mark.parametrize(("decision", "extent", "expected"), [
    ([7, 2, 4, 2], 56, [7, 1, 4, 2]),
    ([7, 4, 2, 2], 224, [14, 4, 2, 2]),
    ([7, 2, 4, 2], 224, [14, 2, 4, 2]),
    ([1, 1, 1, 64], 32, [1, 1, 1, 32]),
    ([1, 14, 4, 2], 8, [1, 1, 4, 2]),
    ([1, 7], 3, [1, 3]),
    ([1, 1, 7, 1], 5, [1, 1, 5, 1]),
    ([1, 2, 7, 1], 5, [1, 1, 5, 1]),
    ([7, 1, 1, 2], 5, [5, 1, 1, 1]),
    ([1, 1, 7, 1], 10, [2, 1, 5, 1]),
    ([1, 1, 14, 1], 20, [2, 1, 10, 1]),
    ([8, 16], 128, [8, 16]),  # already fits: kept
    ([5], 12, [12]),
])
def test_refit_tile_keeps_inner_factors_that_divide_shrinks_the_others_and_moves_the_rest_outward(
        decision: list[int], extent: int, expected: list[int]) -> None:
    assert refit_tile(decision, extent) == expected


@given(st.lists(st.integers(1, 64), min_size=1, max_size=5), st.integers(1, 4096))
def test_refit_tile_multiplies_to_the_extent_and_never_grows_an_inner_factor(decision: list[int],
                                                                              extent: int) -> None:
    refit = refit_tile(decision, extent)
    assert len(refit) == len(decision)
    assert int(np.prod(refit)) == extent
    assert all(1 <= new <= old for new, old in zip(refit[1:], decision[1:]))
    if int(np.prod(decision)) == extent:
        assert refit == decision


# ------------------------------------------------------------------------------ real records


def test_the_fixture_workloads_are_the_zoo_workloads() -> None:
    for (team, index), name in _FIXTURE_NAMES.items():
        assert structural_equal(fixture_records(team)[0][index], zoo.workload(name))


@pytest.mark.slow
@pytest.mark.parametrize("label", RELATIVES)
def test_a_record_refitted_to_a_relative_computes_the_relatives_numbers(label: str) -> None:
    team, index, name, params = RELATIVES[label]
    relative = zoo.build(name, *params)
    result = refit_trace(_best_trace(team, index), relative, postprocess=_llvm_postprocs)
    assert result.ok, result.failure
    assert (result.route, result.postproc) == ("replay", "rerun")
    assert result.changes, "the relative's extents differ: some tile decision must change"
    _assert_computes_the_reference(relative, result)


@pytest.mark.parametrize("label", ["C2D 224->16, 64->8 channels", "GMM int32->int64 index"])
def test_refitting_is_deterministic(label: str) -> None:
    team, index, name, params = RELATIVES[label]
    trace = _best_trace(team, index)
    first = refit_trace(trace, zoo.build(name, *params), postprocess=_llvm_postprocs)
    second = refit_trace(trace, zoo.build(name, *params), postprocess=_llvm_postprocs)
    assert first.trace.as_json() == second.trace.as_json()
    assert first.changes == second.changes
    assert structural_equal(first.mod, second.mod)


def test_the_refitted_trace_carries_the_new_decisions_and_replays_as_a_plain_trace() -> None:
    team, index, name, params = RELATIVES["GMM batch 1->2, 128->16x8x12"]
    relative = zoo.build(name, *params)
    result = refit_trace(_best_trace(team, index), relative, postprocess=_llvm_postprocs)
    tiles = [d for inst, d in result.trace.decisions.items() if inst.kind == "SamplePerfectTile"]
    assert tiles == [[2, 1, 1, 1], [1, 1, 16, 1], [1, 1, 1, 8], [1, 12]]
    assert [str(c) for c in result.changes][:1] == [
        "instruction 4 (SamplePerfectTile) decision [1, 1, 1, 1] -> [2, 1, 1, 1]"]
    again = Schedule(relative)
    Trace.from_json(result.trace.as_json()).apply_to_schedule(again)
    assert structural_equal(again.mod, result.mod)


def test_without_postprocess_the_recorded_post_processing_replays() -> None:
    team, index, name, params = RELATIVES["GMM batch 1->2, 128->16x8x12"]
    relative = zoo.build(name, *params)
    result = refit_trace(_best_trace(team, index), relative)
    assert result.ok, result.failure
    assert result.postproc == "replayed"
    _assert_computes_the_reference(relative, result)


def test_a_record_that_does_not_fit_says_which_instruction_and_decision() -> None:
    """C2D's record computes the padding at the second loop around the conv (decision 1); on the
    small relative that loop has extent 1, so the compute location falls back to the root and
    the recorded post-processing, which fused the padding's loops there, no longer applies.
    Re-running the post-processors instead fits it (the test above)."""
    team, index, name, params = RELATIVES["C2D 224->16, 64->8 channels"]
    result = refit_trace(_best_trace(team, index), zoo.build(name, *params))
    assert not result.ok and result.schedule is None
    failure = result.failure
    assert failure is not None
    assert (failure.index, failure.kind) == (34, "GetLoops")
    assert failure.reason == ("replaying trace instruction 34 (GetLoops): the schedule produced 4 output(s), the "
                              "trace expects 6; is this the trace's workload?")
    assert "instruction 26 (SampleComputeLocation) decision 1 -> -1" in [str(c) for c in result.changes]
    with pytest.raises(MsdbError, match="instruction 34 \\(GetLoops\\)"):
        result.mod


def test_a_literal_split_that_no_longer_fits_names_its_instruction() -> None:
    sch = Schedule(zoo.build("GMM", 1, 16, 16, 16))
    loops = sch.get_loops(sch.get_block("Z"))
    i0, i1 = sch.split(loops[1], [4, 4])
    sch.vectorize(i1)
    result = refit_trace(sch.trace, zoo.build("GMM", 1, 32, 16, 16))  # 4 * 4 no longer covers 32
    assert result.failure is not None
    assert (result.failure.index, result.failure.kind) == (2, "Split")
    assert "32" in result.failure.reason, result.failure
    assert result.failure.decisions == ()


def test_a_split_fed_by_a_refitted_decision_names_the_decision() -> None:
    """A tile sampled on one loop also splits another (with a literal factor): re-fitted to the
    first loop's new extent, it no longer splits the second, and the failure names the decision."""
    sch = Schedule(zoo.build("GMM", 1, 16, 16, 16))
    loops = sch.get_loops(sch.get_block("Z"))
    v0, v1 = sch.sample_perfect_tile(loops[1], n=2, decision=[4, 4])
    sch.split(loops[1], [v0, v1])
    sch.split(loops[2], [v0, 4])
    result = refit_trace(sch.trace, zoo.build("GMM", 1, 6, 16, 16))
    assert result.failure is not None, result
    assert (result.failure.index, result.failure.kind) == (4, "Split")
    assert [str(c) for c in result.failure.decisions] == [
        "instruction 2 (SamplePerfectTile) decision [4, 4] -> [2, 3]"]
    assert str(result.failure) == ("instruction 4 (Split): split: factors [2, 4] of loop 'j' multiply to 8, less than "
                                   "its extent 16; the product must cover the extent (pass None for one factor to "
                                   "infer it); instruction 2 (SamplePerfectTile) decision [4, 4] -> [2, 3]")


# ------------------------------------------------------------------------------ another fusion


def test_another_fusion_goes_through_the_anchor_trace_procedure() -> None:
    """A record tuned on a matmul, re-fitted to a matmul + bias of other shapes: the trace does
    not name the bias block. msdb's generic part leaves it unscheduled; the tuner's whole
    procedure (passed as `anchor`) inlines it."""
    from msdb.tuner.space.anchor_trace import schedule_using_anchor_trace
    from tests.tuner.space.test_anchor_trace import sampled_schedules
    from tests.workloads import matmul_func

    tuned = sampled_schedules(matmul_func(4, 16, 8), seed=3)[0]
    relative = IRModule.from_func(matmul_func(8, 32, 4, bias=True))
    generic = refit_trace(tuned.trace, relative, postprocess=_llvm_postprocs)
    assert generic.ok, generic.failure
    assert (generic.route, generic.unscheduled) == ("anchor", ("T_add",))
    _assert_computes_the_reference(relative, generic)
    whole = refit_trace(tuned.trace, relative, postprocess=_llvm_postprocs,
                        anchor=functools.partial(schedule_using_anchor_trace, target=TARGET))
    assert whole.ok, whole.failure
    assert whole.unscheduled == ()
    _assert_computes_the_reference(relative, whole)
