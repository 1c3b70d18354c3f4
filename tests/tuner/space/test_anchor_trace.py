"""Applying anchor-block traces (TVM's ScheduleUsingAnchorTrace): traces sampled from msdb's own
CPU design space on one fusion of an operator schedule another fusion of it, the result
computes what the unscheduled function computes, and every rule of TVM's procedure (inlining
the blocks the trace does not name, the last-block rule, the unscheduled-block check) shows."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from msdb.hashing import structural_equal
from msdb.ir import interpret
from msdb.ir import stmt as S
from msdb.ir.function import IRModule, PrimFunc
from msdb.records.target import Target
from msdb.schedule import Schedule
from msdb.schedule.trace import Trace
from msdb.tuner.space.anchor_trace import AnchorTraceError, schedule_using_anchor_trace
from msdb.tuner.context import TuneContext
from msdb.tuner.search.replay import apply_trace
from msdb.tuner.space.generators import PostOrderApply
from tests.workloads import conv_func, matmul_func

CPU = Target("llvm -num-cores=1")

#: (workload the trace is tuned on, workload it is applied to), small shapes.
CASES: dict[str, tuple[Any, Any]] = {
    # TVM's own check: fused_conv2d1_add1_relu1 -> fused_conv2d1_add1_add2_relu1
    "conv_bias_relu->conv_bias_residual_relu": (lambda: conv_func(1, 4, 8, 8, 3, 1, 1, epilogue="bu"),
                                                lambda: conv_func(1, 4, 8, 8, 3, 1, 1, epilogue="bru")),
    "conv->conv_bias_relu": (lambda: conv_func(1, 4, 8, 8, 3, 1, 1),
                             lambda: conv_func(1, 4, 8, 8, 3, 1, 1, epilogue="bu")),
    "matmul->matmul_add": (lambda: matmul_func(4, 16, 8), lambda: matmul_func(4, 16, 8, bias=True)),
}


def sampled_schedules(func: PrimFunc, seed: int) -> list[Schedule]:
    """Every design space of `func` (TVM's CPU rules) sampled with `seed` and post-processed:
    what a tuning record of `func` would hold (design spaces simplified first, as the search
    strategies do, so lookups whose results go unused are not in the trace)."""
    generator = PostOrderApply()
    context = TuneContext(mod=IRModule.from_func(func), target=CPU, space_generator=generator, rand_state=seed)
    result = []
    for space in context.generate_design_space():
        sch = apply_trace(IRModule.from_func(func), space.trace.simplified(remove_postproc=True), generator.postprocs,
                          seed)
        assert sch is not None, "a design space of msdb's own failed its post-processors"
        result.append(sch)
    return result


def assert_computes_the_same(func: PrimFunc, scheduled: IRModule, seed: int = 0) -> None:
    from msdb.tuner import build

    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(tuple(int(d.value) for d in b.shape)).astype(b.dtype) for b in func.buffers]
    expected = [a.copy() for a in arrays]
    interpret(IRModule.from_func(func), *expected)
    actual = [a.copy() for a in arrays]
    build(scheduled)(*actual)
    np.testing.assert_allclose(actual[-1], expected[-1], rtol=1e-4, atol=1e-5)


def block_names(mod: IRModule) -> list[str]:
    names: list[str] = []
    from msdb.ir.functor import post_order_visit

    post_order_visit(mod.main.body, lambda n: names.append(n.name_hint) if type(n) is S.Block else None)
    return names


def loops_of(mod: IRModule, block: str) -> list[S.For]:
    sch = Schedule(mod)
    return [sch.get(rv) for rv in sch.get_loops(sch.get_block(block))]


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("seed", [0, 1])
def test_a_sampled_trace_schedules_the_other_fusion_and_keeps_its_numbers(case: str, seed: int) -> None:
    tuned, query = (make() for make in CASES[case])
    for tuned_sch in sampled_schedules(tuned, seed):
        sch = Schedule(query)
        schedule_using_anchor_trace(sch, tuned_sch.trace, CPU)
        assert_computes_the_same(query, sch.mod, seed)
        # The result is a trace of its own: replaying it on the query gives the same module.
        again = Schedule(query)
        sch.trace.apply_to_schedule(again)
        assert structural_equal(again.mod, sch.mod)


def test_tvms_case_inlines_the_second_add_and_keeps_the_tuned_structure() -> None:
    tuned, query = (make() for make in CASES["conv_bias_relu->conv_bias_residual_relu"])
    tuned_sch = sampled_schedules(tuned, 0)[0]
    sch = Schedule(query)
    schedule_using_anchor_trace(sch, tuned_sch.trace, CPU)
    names = block_names(sch.mod)
    # TVM's result: conv2d_nchw_init, pad_temp, conv2d_nchw_update, compute (T_add, T_add_1 inlined)
    assert sorted(names) == sorted(block_names(tuned_sch.mod))
    assert "T_add" not in names and "T_add_1" not in names
    assert sch.trace.insts[0].kind == "GetSBlock" and sch.trace.insts[0].attrs[0] == "T_add_1"
    assert sch.trace.insts[1].kind == "ComputeInline"
    # Tiling and post-processing went through: the conv's loops match the tuned ones.
    assert [(lp.extent.value, lp.kind) for lp in loops_of(sch.mod, "conv2d_nchw_update")] == \
        [(lp.extent.value, lp.kind) for lp in loops_of(tuned_sch.mod, "conv2d_nchw_update")]


def test_the_block_the_trace_does_not_know_is_fused_and_made_parallel() -> None:
    tuned, query = (make() for make in CASES["conv->conv_bias_relu"])
    # The variant without a write cache (with one, relu would be reverse-inlined into it).
    (tuned_sch,) = [s for s in sampled_schedules(tuned, 0) if all(i.kind != "CacheWrite" for i in s.trace.insts)]
    sch = Schedule(query)
    schedule_using_anchor_trace(sch, tuned_sch.trace, CPU)
    kinds = [inst.kind for inst in sch.trace.insts]
    assert kinds[-3:] == ["GetLoops", "Fuse", "Parallel"]
    (loop,) = loops_of(sch.mod, "compute")
    assert loop.kind == S.ForKind.PARALLEL and loop.extent.value == 8 * 8 * 8
    assert "T_add" not in block_names(sch.mod)  # inlined by AutoInline first


def test_the_last_block_is_reverse_inlined_into_a_write_cache() -> None:
    tuned, query = (make() for make in CASES["matmul->matmul_add"])
    cached = [s for s in sampled_schedules(tuned, 0) if any(i.kind == "CacheWrite" for i in s.trace.insts)]
    assert cached
    for tuned_sch in cached:
        sch = Schedule(query)
        schedule_using_anchor_trace(sch, tuned_sch.trace, CPU)
        assert sch.trace.insts[-1].kind == "ReverseComputeInline"
        assert "T_add" not in block_names(sch.mod)
        assert_computes_the_same(query, sch.mod)


def test_more_than_one_unscheduled_block_is_one_clear_error() -> None:
    query = conv_func(1, 4, 8, 8, 3, 1, 1, epilogue="bu")
    probe = Schedule(query)
    probe.get_block("root")
    sch = Schedule(query)
    with pytest.raises(AnchorTraceError, match=r"left 3 blocks unscheduled \(pad_temp, conv2d_nchw, compute\)"):
        schedule_using_anchor_trace(sch, probe.trace, CPU)


def test_a_trace_whose_child_blocks_the_function_lacks_is_one_clear_error() -> None:
    tuned = conv_func(1, 4, 8, 8, 3, 1, 1, epilogue="bu")
    query = conv_func(1, 4, 8, 8, 3, 1, 1)
    tuned_sch = sampled_schedules(tuned, 0)[0]
    with pytest.raises(AnchorTraceError, match=r"\(GetChildBlocks\): the function has 2 child blocks there, the trace "
                                               r"expects at least 3"):
        schedule_using_anchor_trace(Schedule(query), tuned_sch.trace, CPU)


def _cache_write_then_inline_trace() -> list[Any]:
    """A matmul trace that caches the matmul's writes, then inlines T_add."""
    source = Schedule(matmul_func(4, 16, 8))
    matmul = source.get_block("matmul")
    source.cache_write(matmul, 0, "global")
    source.parallel(source.get_loops(matmul)[0])
    insts, decisions = source.trace.as_json()
    insts += [["GetSBlock", [], ["T_add", "main"], ["b99"]], ["ComputeInline", ["b99"], [], []]]
    return [insts, decisions]


#: Traces written for one rule each of TVM's procedure: name -> (query, trace JSON). The TVM
#: test applies them with TVM too.
HAND_WRITTEN: dict[str, tuple[Any, Any]] = {
    # A block the query lacks, and everything done to it: skipped.
    "foreign": (lambda: conv_func(1, 4, 8, 8, 3, 1, 1, epilogue="bu"), lambda: [[
        ["GetSBlock", [], ["ghost", "main"], ["b0"]],
        ["GetLoops", ["b0"], [], ["l1", "l2"]],
        ["Fuse", ["l1", "l2"], [1], ["l3"]],
        ["Parallel", ["l3"], [], []],
        ["GetSBlock", [], ["compute", "main"], ["b4"]],
        ["GetLoops", ["b4"], [], ["l5", "l6", "l7", "l8"]],
        ["Fuse", ["l5", "l6", "l7", "l8"], [1], ["l9"]],
        ["Vectorize", ["l9"], [], []],
        ["GetSBlock", [], ["pad_temp", "main"], ["b10"]],
        ["ComputeInline", ["b10"], [], []],
        ["GetSBlock", [], ["conv2d_nchw", "main"], ["b11"]],
        ["GetLoops", ["b11"], [], ["l12", "l13", "l14", "l15", "l16", "l17", "l18"]],
        ["Parallel", ["l13"], [], []]], []]),
    # The query's T_add is an output block: reverse-inlined into the (spatial) cache copy.
    "inline_output_reverse": (lambda: matmul_func(4, 16, 8, bias=True), _cache_write_then_inline_trace),
    # T_add's only producer is the matmul reduction: neither inline applies, the ComputeInline
    # is skipped and T_add, left unscheduled, gets the last-block rule.
    "inline_output_skipped": (lambda: matmul_func(4, 16, 8, bias=True), lambda: [[
        ["GetSBlock", [], ["matmul", "main"], ["b0"]],
        ["GetSBlock", [], ["T_add", "main"], ["b1"]],
        ["ComputeInline", ["b1"], [], []],
        ["GetLoops", ["b0"], [], ["l2", "l3", "l4"]],
        ["Parallel", ["l2"], [], []]], []]),
    # T_add has one producer (the conv, a reduction): it cannot be reverse-inlined, but it can
    # be inlined into relu.
    "reverse_inline_impossible": (lambda: conv_func(1, 4, 8, 8, 3, 1, 1, epilogue="bu"), lambda: [[
        ["GetSBlock", [], ["T_add", "main"], ["b0"]],
        ["ReverseComputeInline", ["b0"], [], []],
        ["GetSBlock", [], ["conv2d_nchw", "main"], ["b1"]],
        ["GetSBlock", [], ["pad_temp", "main"], ["b2"]],
        ["ComputeInline", ["b2"], [], []],
        ["GetLoops", ["b1"], [], ["l3", "l4", "l5", "l6", "l7", "l8", "l9"]],
        ["Parallel", ["l4"], [], []]], []]),
}


def apply_hand_written(name: str) -> tuple[PrimFunc, Schedule]:
    make_query, make_trace = HAND_WRITTEN[name]
    query = make_query()
    sch = Schedule(query)
    schedule_using_anchor_trace(sch, Trace.from_json(make_trace()), CPU)
    assert_computes_the_same(query, sch.mod)
    return query, sch


def test_foreign_instructions_are_skipped_with_everything_that_depends_on_them() -> None:
    _, sch = apply_hand_written("foreign")
    kinds = [inst.kind for inst in sch.trace.insts]
    assert "ghost" not in str(sch.trace.as_json())
    assert kinds.count("Fuse") == 1 and "Vectorize" in kinds and kinds.count("Parallel") == 1


def test_a_compute_inline_of_an_output_block_turns_into_a_reverse_inline_when_it_can() -> None:
    _, sch = apply_hand_written("inline_output_reverse")
    kinds = [inst.kind for inst in sch.trace.insts]
    assert "T_add" not in block_names(sch.mod)
    assert kinds[-1] == "ReverseComputeInline" and "ComputeInline" not in kinds


def test_a_compute_inline_of_an_output_block_that_cannot_be_reverse_inlined_is_skipped() -> None:
    _, sch = apply_hand_written("inline_output_skipped")
    kinds = [inst.kind for inst in sch.trace.insts]
    assert "ComputeInline" not in kinds and "ReverseComputeInline" not in kinds
    assert kinds[-3:] == ["GetLoops", "Fuse", "Parallel"]
    (loop,) = loops_of(sch.mod, "T_add")
    assert loop.kind == S.ForKind.PARALLEL and loop.extent.value == 4 * 16


def test_an_impossible_reverse_compute_inline_becomes_a_compute_inline() -> None:
    _, sch = apply_hand_written("reverse_inline_impossible")
    kinds = [inst.kind for inst in sch.trace.insts]
    assert "ReverseComputeInline" not in kinds and kinds.count("ComputeInline") == 2
    assert sorted(block_names(sch.mod)) == ["compute", "conv2d_nchw", "root"]


def test_on_a_gpu_target_the_last_block_is_bound_to_threads() -> None:
    make_query, make_trace = HAND_WRITTEN["inline_output_skipped"]
    sch = Schedule(make_query())
    schedule_using_anchor_trace(sch, Trace.from_json(make_trace()), Target({"kind": "cuda", "arch": "sm_90"}))
    tags = [lp.thread_binding.thread_tag for lp in loops_of(sch.mod, "T_add") if lp.thread_binding is not None]
    assert tags == ["blockIdx.x", "threadIdx.x"]


def test_a_target_without_msdbs_rules_is_one_clear_error() -> None:
    query = matmul_func(4, 16, 8, bias=True)
    sch = Schedule(query)
    with pytest.raises(AnchorTraceError, match="default schedule rules of target kind 'c', which msdb does not have"):
        schedule_using_anchor_trace(sch, Schedule(query).trace, "c")
    assert len(sch.trace) == 0  # refused before touching the schedule
