"""Loop primitives: split, fuse, reorder, parallel/vectorize/unroll/bind, annotate.

Each transformation is checked three ways: the loop structure and bindings it prints (TVM's
output for the same calls where noted), the recorded instruction, and the meaning of the
function (interpreted before and after on the same inputs)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from msdb.errors import ScheduleError
from msdb.hashing import structural_equal
from msdb.ir import stmt as S
from msdb.schedule import ExprRV, LoopRV, Schedule

from tests.schedule._loop_workloads import (
    BATCH_MATMUL, BRANCHY, CHAIN, MATMUL, MATMUL_K10, MLC_MM, assert_same_results, binding_lines, load,
    loop_lines,
)


def assert_rejected(sch: Schedule, action, *fragments: str) -> None:
    """`action` raises ScheduleError mentioning every fragment, records nothing, and leaves the
    module identical."""
    before_mod = sch.mod
    before_insts = len(sch.trace.insts)
    with pytest.raises(ScheduleError) as info:
        action()
    for fragment in fragments:
        assert fragment in str(info.value), str(info.value)
    assert sch.mod is before_mod
    assert structural_equal(sch.mod, before_mod)
    assert len(sch.trace.insts) == before_insts


# ---- split --------------------------------------------------------------------------------


def test_mlc_course_split_and_reorder() -> None:
    sch = Schedule(load(MLC_MM))
    block_c = sch.get_block("C", func_name="main")
    i, j, k = sch.get_loops(block_c)
    j0, j1 = sch.split(j, factors=[None, 4])
    sch.reorder(i, j0, k, j1)
    assert loop_lines(sch.mod) == ["for i, j_0, k, j_1 in T.grid(128, 32, 128, 4):"]
    assert "vj = T.axis.spatial(128, j_0 * 4 + j_1)" in binding_lines(sch.mod)
    kinds = [inst.kind for inst in sch.trace.insts]
    assert kinds == ["GetSBlock", "GetLoops", "Split", "Reorder"]
    split = sch.trace.insts[2]
    assert split.inputs == (j, None, 4)
    assert split.attrs == (True, False)
    assert split.outputs == (j0, j1)


def test_split_divisible_matches_tvm_and_keeps_meaning() -> None:
    mod = load(MATMUL)
    sch = Schedule(mod)
    i, j, k = sch.get_loops(sch.get_block("C"))
    loops = sch.split(i, [2, None, 4])
    assert len(loops) == 3 and all(isinstance(lp, LoopRV) for lp in loops)
    assert [sch.get(lp).loop_var.name for lp in loops] == ["i_0", "i_1", "i_2"]
    assert [sch.get(lp).extent.value for lp in loops] == [2, 2, 4]
    assert "vi = T.axis.spatial(16, i_0 * 8 + i_1 * 4 + i_2)" in binding_lines(sch.mod)
    assert not any(line.startswith("T.where") for line in binding_lines(sch.mod))
    # untouched loops keep their identity
    assert sch.get(j).loop_var.name == "j" and sch.get(k).loop_var.name == "k"
    assert_same_results(mod, sch.mod)


def test_split_non_divisible_adds_tvm_predicate() -> None:
    mod = load(MATMUL_K10)
    sch = Schedule(mod)
    _, _, k = sch.get_loops(sch.get_block("C"))
    k0, k1, k2 = sch.split(k, [2, 2, 3])
    lines = binding_lines(sch.mod)
    assert "vk = T.axis.reduce(10, k_0 * 6 + k_1 * 3 + k_2)" in lines
    # TVM 0.27 prints exactly this predicate for the same split
    assert "T.where((k_0 * 2 + k_1) * 3 + k_2 < 10)" in lines
    assert_same_results(mod, sch.mod)
    # a second imperfect split combines predicates with `and`, as TVM does
    sch.split(k1, [3, 1])
    where = [line for line in binding_lines(sch.mod) if line.startswith("T.where")]
    assert where == ["T.where((k_0 * 2 + (k_1_0 + k_1_1)) * 3 + k_2 < 10 and k_1_0 + k_1_1 < 2)"]
    assert_same_results(mod, sch.mod)


def test_split_with_inferred_factor_rounds_up_and_guards() -> None:
    mod = load(MATMUL_K10)
    sch = Schedule(mod)
    _, _, k = sch.get_loops(sch.get_block("C"))
    k0, k1 = sch.split(k, [None, 4])
    assert sch.get(k0).extent.value == 3 and sch.get(k1).extent.value == 4
    assert "T.where(k_0 * 4 + k_1 < 10)" in binding_lines(sch.mod)
    assert_same_results(mod, sch.mod)


def test_split_disable_predication_drops_the_guard() -> None:
    sch = Schedule(load(MATMUL_K10))
    _, _, k = sch.get_loops(sch.get_block("C"))
    sch.split(k, [None, 4], disable_predication=True)
    assert not any(line.startswith("T.where") for line in binding_lines(sch.mod))
    assert sch.trace.insts[-1].attrs == (True, True)


def test_split_with_sampled_factors() -> None:
    mod = load(BATCH_MATMUL)
    sch = Schedule(mod, seed=7)
    _, i, _, k = sch.get_loops(sch.get_block("Z"))
    factors = sch.sample_perfect_tile(k, n=3, max_innermost_factor=4)
    assert all(isinstance(v, ExprRV) for v in factors)
    loops = sch.split(k, factors)
    assert [sch.get(lp).extent.value for lp in loops] == [sch.get(v) for v in factors]
    assert sch.trace.insts[-1].inputs[1:] == tuple(factors)
    assert_same_results(mod, sch.mod)


def test_split_preserve_unit_iters() -> None:
    sch = Schedule(load(MATMUL))
    i, j, _ = sch.get_loops(sch.get_block("C"))
    sch.split(i, [1, 16, 1], preserve_unit_iters=True)
    assert "vi = T.axis.spatial(16, i_0 * 16 + i_1 + i_2)" in binding_lines(sch.mod)
    sch.split(j, [1, 16, 1], preserve_unit_iters=False)
    # TVM drops the unit iterators everywhere under the split loop's scope
    assert 'vi, vj, vk = T.axis.remap("SSR", [i_1, j_1, k])' in binding_lines(sch.mod)


def test_split_rejections_leave_schedule_unchanged_and_usable() -> None:
    sch = Schedule(load(MATMUL))
    i, j, k = sch.get_loops(sch.get_block("C"))
    assert_rejected(sch, lambda: sch.split(j, [3, 4]), "split", "'j'", "[3, 4]", "12", "16")
    assert_rejected(sch, lambda: sch.split(j, [None, None]), "only one factor", "'j'")
    assert_rejected(sch, lambda: sch.split(j, [0, 16]), "not positive", "'j'")
    assert_rejected(sch, lambda: sch.split(j, [-1, 4]), "not positive")
    sch.annotate(j, "pragma_x", 1)
    assert_rejected(sch, lambda: sch.split(j, [4, 4]), "annotations", "'j'")
    sch.unannotate(j, "pragma_x")
    # still usable afterwards
    j0, j1 = sch.split(j, [4, 4])
    assert sch.get(j0).loop_var.name == "j_0"


# ---- fuse ---------------------------------------------------------------------------------


def test_fuse_matches_tvm_and_keeps_meaning() -> None:
    mod = load(MATMUL)
    sch = Schedule(mod)
    i, j, k = sch.get_loops(sch.get_block("C"))
    fused = sch.fuse(i, j)
    loop = sch.get(fused)
    assert loop.loop_var.name == "i_j_fused" and loop.extent.value == 256
    assert 'vi = T.axis.spatial(16, i_j_fused // 16)' in binding_lines(sch.mod)
    assert 'vj = T.axis.spatial(16, i_j_fused % 16)' in binding_lines(sch.mod)
    inst = sch.trace.insts[-1]
    assert (inst.kind, inst.inputs, inst.attrs, inst.outputs) == ("Fuse", (i, j), (True,), (fused,))
    assert_same_results(mod, sch.mod)


def test_fuse_after_split_restores_the_original_binding() -> None:
    mod = load(MATMUL)
    sch = Schedule(mod)
    i, _, _ = sch.get_loops(sch.get_block("C"))
    parts = sch.split(i, [2, 2, 4])
    fused = sch.fuse(*parts)
    assert sch.get(fused).loop_var.name == "i_0_i_1_i_2_fused"
    # TVM: vi = T.axis.spatial(16, i_0_i_1_i_2_fused)
    assert 'vi, vj, vk = T.axis.remap("SSR", [i_0_i_1_i_2_fused, j, k])' in binding_lines(sch.mod)
    assert_same_results(mod, sch.mod)


def test_split_after_fuse_keeps_meaning() -> None:
    mod = load(BATCH_MATMUL)
    sch = Schedule(mod)
    b, i, j, k = sch.get_loops(sch.get_block("Z"))
    fused = sch.fuse(b, i, j)
    outer, inner = sch.split(fused, [None, 5])  # 128 = 26 * 5 - 2: imperfect
    assert sch.get(outer).extent.value == 26
    assert any(line.startswith("T.where") for line in binding_lines(sch.mod))
    assert_same_results(mod, sch.mod)
    sch.reorder(inner, k)
    assert_same_results(mod, sch.mod)


def test_fuse_single_loop_and_unit_loops() -> None:
    mod = load(MATMUL)
    sch = Schedule(mod)
    i, j, _ = sch.get_loops(sch.get_block("C"))
    i0, i1 = sch.split(i, [1, 16])
    single = sch.fuse(i0)
    assert sch.get(single).loop_var.name == "i_0_fused"
    assert_same_results(mod, sch.mod)


def test_fuse_rejections() -> None:
    sch = Schedule(load(CHAIN))
    ib, jb = sch.get_loops(sch.get_block("B"))
    ic, jc = sch.get_loops(sch.get_block("C"))
    assert_rejected(sch, lambda: sch.fuse(ib, jc), "fuse", "'i'", "'j'")
    assert_rejected(sch, lambda: sch.fuse(jb, ib), "fuse")
    sch2 = Schedule(load(BRANCHY))
    i, j = sch2.get_loops(sch2.get_block("C_init"))
    assert_rejected(sch2, lambda: sch2.fuse(i, j), "fuse", "only statement", "'i'")
    assert_rejected(sch2, lambda: sch2.fuse(j, j), "more than once")


# ---- reorder ------------------------------------------------------------------------------


def test_reorder_keeps_meaning_and_loop_identity() -> None:
    mod = load(BATCH_MATMUL)
    sch = Schedule(mod)
    b, i, j, k = sch.get_loops(sch.get_block("Z"))
    sch.reorder(k, i, b)
    assert loop_lines(sch.mod) == ["for k, i, j, b in T.grid(12, 8, 8, 2):"]
    assert [sch.get(lp).loop_var.name for lp in (b, i, j, k)] == ["b", "i", "j", "k"]
    assert_same_results(mod, sch.mod)
    inst = sch.trace.insts[-1]
    assert (inst.kind, inst.inputs, inst.attrs, inst.outputs) == ("Reorder", (k, i, b), (), ())


def test_reorder_of_fourteen_tiled_loops() -> None:
    mod = load(BATCH_MATMUL)
    sch = Schedule(mod)
    b, i, j, k = sch.get_loops(sch.get_block("Z"))
    bs = sch.split(b, [1, 2, 1, 1])
    is_ = sch.split(i, [2, 1, 2, 2])
    js = sch.split(j, [1, 4, 2, 1])
    ks = sch.split(k, [3, 4])
    order = [bs[0], is_[0], js[0], bs[1], is_[1], js[1], ks[0], bs[2], is_[2], js[2], ks[1], bs[3], is_[3], js[3]]
    sch.reorder(*order)
    loops = sch.get_loops(sch.get_block("Z"))
    assert [sch.get(lp).loop_var for lp in loops] == [sch.get(lp).loop_var for lp in order]
    assert_same_results(mod, sch.mod)


def test_reorder_rejections() -> None:
    sch = Schedule(load(CHAIN))
    ib, jb = sch.get_loops(sch.get_block("B"))
    ic, _ = sch.get_loops(sch.get_block("C"))
    assert_rejected(sch, lambda: sch.reorder(jb, ic), "reorder", "not in one nest", "'j'", "'i'")
    assert_rejected(sch, lambda: sch.reorder(jb, jb), "more than once")
    sch2 = Schedule(load(BRANCHY))
    i, j = sch2.get_loops(sch2.get_block("C_init"))
    assert_rejected(sch2, lambda: sch2.reorder(j, i), "reorder", "'i'", "other statements")
    # the schedule is still usable
    sch.reorder(jb, ib)
    assert loop_lines(sch.mod)[0] == "for j, i in T.grid(12, 16):"


def test_reorder_refuses_to_run_an_init_after_updates() -> None:
    """A fused spatial-reduction loop, split: swapping its two parts would visit each point's
    reduction mid-way first, and the init would overwrite partial sums (TVM accepts this and
    computes wrong results). Keeping their order, or moving other loops around them, is fine;
    so is any order of pure reduction loops."""
    from msdb.ir import zoo

    mod = zoo.build("matmul_relu", 6, 5, 7)
    sch = Schedule(mod)
    i, j, k = sch.get_loops(sch.get_block("C"))
    f0, f1 = sch.split(sch.fuse(j, k), [None, 2])
    assert_rejected(sch, lambda: sch.reorder(f1, i), "reorder", "'j_k_fused_0', 'j_k_fused_1'",
                    "both spatial and reduction", "block 'C'", "init after some of its updates")
    assert_rejected(sch, lambda: sch.reorder(f1, f0), "init after some of its updates")
    sch.reorder(f0, i)  # the fused loop's parts keep their order
    assert_same_results(mod, sch.mod)

    sch2 = Schedule(mod)
    i, j, k = sch2.get_loops(sch2.get_block("C"))
    k0, k1 = sch2.split(k, [None, 3])
    sch2.reorder(k1, k0, i)  # pure reduction loops: each starts at its minimum
    assert_same_results(mod, sch2.mod)


# ---- loop kinds ---------------------------------------------------------------------------


def test_parallel_vectorize_unroll() -> None:
    mod = load(MATMUL)
    sch = Schedule(mod)
    i, j, k = sch.get_loops(sch.get_block("C"))
    j0, j1 = sch.split(j, [None, 4])
    sch.reorder(i, j0, k, j1)
    sch.parallel(i)
    sch.vectorize(j1)
    sch.unroll(k)
    kinds = {sch.get(lp).loop_var.name: sch.get(lp).kind for lp in (i, j0, k, j1)}
    assert kinds == {"i": S.ForKind.PARALLEL, "j_0": S.ForKind.SERIAL, "k": S.ForKind.UNROLLED,
                     "j_1": S.ForKind.VECTORIZED}
    assert [inst.kind for inst in sch.trace.insts[-3:]] == ["Parallel", "Vectorize", "Unroll"]
    assert sch.trace.insts[-1].inputs == (k,) and sch.trace.insts[-1].attrs == ()
    assert_same_results(mod, sch.mod)


def test_two_block_chain_transformations_keep_meaning() -> None:
    mod = load(CHAIN)
    sch = Schedule(mod)
    block_b, block_c = sch.get_block("B"), sch.get_block("C")
    ib, jb = sch.get_loops(block_b)
    jb0, jb1 = sch.split(jb, [None, 5])  # 12 = 3 * 5 - 3: guarded
    sch.reorder(jb0, ib)
    sch.parallel(jb0)
    ic, jc = sch.get_loops(block_c)
    fused = sch.fuse(ic, jc)
    outer, inner = sch.split(fused, [None, 8])
    sch.vectorize(inner)
    sch.parallel(outer)
    assert loop_lines(sch.mod) == [
        "for j_0 in T.parallel(3):", "for i, j_1 in T.grid(16, 5):",
        "for i_j_fused_0 in T.parallel(24):", "for i_j_fused_1 in T.vectorized(8):",
    ]
    assert_same_results(mod, sch.mod)


def test_vectorize_or_parallelize_a_reduction_loop_is_rejected() -> None:
    sch = Schedule(load(MATMUL))
    i, j, k = sch.get_loops(sch.get_block("C"))
    assert_rejected(sch, lambda: sch.vectorize(k), "cannot vectorize a loop bound to a reduction iter var of block C")
    assert_rejected(sch, lambda: sch.parallel(k), "cannot parallelize", "block C")
    k0, k1 = sch.split(k, [4, 4])
    assert_rejected(sch, lambda: sch.vectorize(k1), "reduction iter var of block C")
    sch.vectorize(j)  # a spatial loop is fine


def test_parallel_requires_compact_dataflow() -> None:
    sch = Schedule(load(BRANCHY))
    i, _ = sch.get_loops(sch.get_block("C_init"))
    assert_rejected(sch, lambda: sch.parallel(i), "parallel", "'i'", "compact dataflow")


def test_bind_thread_axes() -> None:
    mod = load(MATMUL)
    sch = Schedule(mod)
    i, j, k = sch.get_loops(sch.get_block("C"))
    sch.bind(i, "blockIdx.x")
    sch.bind(k, "threadIdx.x")  # cross-thread reduction is allowed on threadIdx
    loop = sch.get(i)
    assert loop.kind == S.ForKind.THREAD_BINDING and loop.thread_binding.thread_tag == "blockIdx.x"
    assert "for i in T.thread_binding(16, thread=\"blockIdx.x\"):" in loop_lines(sch.mod)
    assert sch.trace.insts[-1].attrs == ("threadIdx.x",)
    assert_same_results(mod, sch.mod)
    sch2 = Schedule(load(MATMUL))
    _, _, k2 = sch2.get_loops(sch2.get_block("C"))
    assert_rejected(sch2, lambda: sch2.bind(k2, "blockIdx.y"), "bind", "reduction iter var of block C")
    assert_rejected(sch2, lambda: sch2.bind(k2, "warp.x"), "unknown thread axis")


# ---- annotations --------------------------------------------------------------------------


def test_annotate_and_unannotate_blocks_and_loops() -> None:
    sch = Schedule(load(MATMUL), seed=3)
    block = sch.get_block("C")
    root = sch.get_block("root")
    i, _, _ = sch.get_loops(block)
    sch.annotate(block, "meta_schedule.tiling_structure", "SSRSRS")
    sch.annotate(root, "meta_schedule.parallel", 16)
    sch.annotate(i, "pragma_auto_unroll_max_step", 512)
    sch.annotate(i, "ratio", 0.5)
    v = sch.sample_categorical([0, 16, 64, 512], [0.25, 0.25, 0.25, 0.25], decision=3)
    sch.annotate(root, "meta_schedule.unroll_explicit", v)
    assert dict(sch.get(block).annotations) == {"meta_schedule.tiling_structure": "SSRSRS"}
    assert dict(sch.get(root).annotations) == {"meta_schedule.parallel": 16, "meta_schedule.unroll_explicit": 512}
    assert dict(sch.get(i).annotations) == {"pragma_auto_unroll_max_step": 512, "ratio": 0.5}
    inst = sch.trace.insts[-1]
    assert (inst.kind, inst.inputs, inst.attrs) == ("Annotate", (root, v), ("meta_schedule.unroll_explicit",))
    sch.unannotate(root, "meta_schedule.parallel")
    sch.unannotate(i, "ratio")
    assert dict(sch.get(root).annotations) == {"meta_schedule.unroll_explicit": 512}
    assert dict(sch.get(i).annotations) == {"pragma_auto_unroll_max_step": 512}
    assert sch.trace.insts[-1].kind == "Unannotate" and sch.trace.insts[-1].attrs == ("ratio",)
    assert_rejected(sch, lambda: sch.unannotate(i, "ratio"), "unannotate", "loop 'i'", "'ratio'")
    assert_rejected(sch, lambda: sch.unannotate(block, "nope"), "block 'C'", "'nope'")


# ---- random programs of loop primitives keep the meaning ----------------------------------


@st.composite
def loop_programs(draw: st.DrawFn) -> list[tuple]:
    steps = []
    for _ in range(draw(st.integers(2, 8))):
        op = draw(st.sampled_from(["split", "split", "fuse", "reorder", "parallel", "vectorize", "unroll"]))
        block = draw(st.sampled_from(["Z", "B", "C"]))
        pos = draw(st.integers(0, 7))
        if op == "split":
            factors = draw(st.lists(st.one_of(st.none(), st.integers(1, 5)), min_size=2, max_size=3))
            steps.append((op, block, pos, factors))
        elif op == "fuse":
            steps.append((op, block, pos, draw(st.integers(1, 3))))
        elif op == "reorder":
            steps.append((op, block, pos, draw(st.permutations(range(3)))))
        else:
            steps.append((op, block, pos, None))
    return steps


def _apply_program(sch: Schedule, steps: list[tuple]) -> int:
    applied = 0
    names = {"Z", "B", "C"} & set(sch.state.index("main").blocks)
    for op, block_name, pos, arg in steps:
        if block_name not in names:
            continue
        loops = sch.get_loops(sch.get_block(block_name))
        if not loops:
            continue
        first = pos % len(loops)
        before = sch.mod
        try:
            if op == "split":
                sch.split(loops[first], arg)
            elif op == "fuse":
                sch.fuse(*loops[first:first + arg])
            elif op == "reorder":
                chosen = loops[first:first + 3]
                sch.reorder(*[chosen[i] for i in arg if i < len(chosen)])
            else:
                getattr(sch, op)(loops[first])
            applied += 1
        except ScheduleError:
            assert sch.mod is before
    return applied


@pytest.mark.slow
@settings(max_examples=40, deadline=None, derandomize=True)
@given(loop_programs(), st.sampled_from(["batch", "chain", "k10"]))
def test_random_loop_programs_keep_the_meaning(steps: list[tuple], which: str) -> None:
    mod = load({"batch": BATCH_MATMUL, "chain": CHAIN, "k10": MATMUL_K10.replace('"C"', '"Z"')}[which])
    sch = Schedule(mod, seed=0)
    _apply_program(sch, steps)
    assert_same_results(mod, sch.mod)
