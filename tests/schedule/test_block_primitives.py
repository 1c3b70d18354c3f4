"""Block primitives one at a time: what each one builds (names, placement, loops, recorded
instruction), that the scheduled module computes what the original computes (the reference
interpreter on small shapes), and that each illegal use raises ScheduleError naming the block
and the rule while leaving the schedule exactly as it was. Chains and the comparison with real
TVM output are in test_chains.py."""

from __future__ import annotations

import numpy as np
import pytest

from msdb.errors import ScheduleError
from msdb.hashing import structural_equal
from msdb.ir import IRModule, interpret, te
from msdb.ir import stmt as S
from msdb.schedule import BlockRV, Schedule
from msdb.schedule.rv import INLINE_MARK, ROOT_MARK

# ---------------------------------------------------------------- workloads and helpers


def matmul(n: int = 16) -> IRModule:
    a = te.placeholder((n, n), name="A")
    b = te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), name="k")
    c = te.compute((n, n), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    return IRModule.from_func(te.create_prim_func([a, b, c]))


def matmul_relu(n: int = 16) -> IRModule:
    a = te.placeholder((n, n), name="A")
    b = te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), name="k")
    c = te.compute((n, n), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    d = te.compute((n, n), lambda i, j: te.max(c[i, j], te.const(0.0, "float32")), name="D")
    return IRModule.from_func(te.create_prim_func([a, b, d]))


def matmul_max(n: int = 8) -> IRModule:
    a = te.placeholder((n, n), name="A")
    k = te.reduce_axis((0, n), name="k")
    c = te.compute((n,), lambda i: te.max(a[i, k], axis=k), name="C")
    return IRModule.from_func(te.create_prim_func([a, c]))


def batch_matmul(batch: int = 2, n: int = 8) -> IRModule:
    x = te.placeholder((batch, n, n), name="X")
    y = te.placeholder((batch, n, n), name="Y")
    k = te.reduce_axis((0, n), name="k")
    z = te.compute((batch, n, n), lambda bb, i, j: te.sum(x[bb, i, k] * y[bb, k, j], axis=k), name="Z")
    return IRModule.from_func(te.create_prim_func([x, y, z]))


def elementwise(n: int = 12) -> IRModule:
    """B = A * 2; C = B^T + 1 (two spatial blocks)."""
    a = te.placeholder((n, n), name="A")
    b = te.compute((n, n), lambda i, j: a[i, j] * te.const(2.0, "float32"), name="B")
    c = te.compute((n, n), lambda i, j: b[j, i] + te.const(1.0, "float32"), name="C")
    return IRModule.from_func(te.create_prim_func([a, c]))


def shared_input(n: int = 8) -> IRModule:
    """B = A * 2; C = A + B: two blocks read A."""
    a = te.placeholder((n,), name="A")
    b = te.compute((n,), lambda i: a[i] * te.const(2.0, "float32"), name="B")
    c = te.compute((n,), lambda i: a[i] + b[i], name="C")
    return IRModule.from_func(te.create_prim_func([a, c]))


def two_consumers(n: int = 8) -> IRModule:
    """B = A * 2; C = B + 1; D = C + B: B has two consumers."""
    a = te.placeholder((n,), name="A")
    b = te.compute((n,), lambda i: a[i] * te.const(2.0, "float32"), name="B")
    c = te.compute((n,), lambda i: b[i] + te.const(1.0, "float32"), name="C")
    d = te.compute((n,), lambda i: c[i] + b[i], name="D")
    return IRModule.from_func(te.create_prim_func([a, d]))


WINDOW_SCRIPT = """
@T.prim_func
def main(A: T.Buffer((10,), "float32"), C: T.Buffer((9,), "float32")):
    B = T.alloc_buffer((10,))
    for i in range(10):
        with T.block("B"):
            v_i = T.axis.spatial(10, i)
            T.reads(A[v_i])
            T.writes(B[v_i])
            B[v_i] = A[v_i] + T.float32(1.0)
    for i in range(9):
        with T.block("C"):
            v_i = T.axis.spatial(9, i)
            T.reads(B[v_i:v_i + 2])
            T.writes(C[v_i])
            C[v_i] = B[v_i] + B[v_i + 1]
"""


def window() -> IRModule:
    """B = A + 1; C[i] = B[i] + B[i + 1]: a consumer reading a window of its producer (written
    as TVMScript so the read region is TVM's `B[v_i:v_i + 2]`)."""
    from msdb.ir import from_script

    return from_script(WINDOW_SCRIPT)


def small_conv() -> IRModule:
    from msdb.ir import zoo

    return zoo.build("C2D", 1, 6, 6, 2, 3, 3, 2, 1)


def run(mod: IRModule, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    arrays = [(rng.random(tuple(int(d.value) for d in buf.shape)) - 0.5).astype(buf.dtype) for buf in mod.main.buffers]
    interpret(mod, *arrays)
    return arrays


def assert_same_results(before: IRModule, after: IRModule) -> None:
    for seed in (0, 3):
        for expected, got in zip(run(before, seed), run(after, seed)):
            np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def block_names(mod: IRModule) -> list[str]:
    names: list[str] = []

    def walk(stmt: S.Stmt) -> None:
        if isinstance(stmt, S.SeqStmt):
            for s in stmt.seq:
                walk(s)
        elif isinstance(stmt, S.For):
            walk(stmt.body)
        elif isinstance(stmt, S.BlockRealize):
            names.append(stmt.block.name_hint)
            walk(stmt.block.body)

    walk(mod.main.body)
    return names


def root_allocs(mod: IRModule) -> list[tuple[str, str]]:
    return [(b.name, b.scope) for b in mod.main.body.block.alloc_buffers]


def extents(sch: Schedule, block: BlockRV) -> list[int]:
    return [int(sch.get(loop).extent.value) for loop in sch.get_loops(block)]


def assert_unchanged_after_error(sch: Schedule, action, *needles: str) -> None:
    """`action(sch)` raises ScheduleError mentioning every needle; module, trace and symbol
    table are left as they were."""
    mod, n_insts = sch.mod, len(sch.trace.insts)
    with pytest.raises(ScheduleError) as info:
        action(sch)
    message = str(info.value)
    for needle in needles:
        assert needle in message, message
    assert sch.mod is mod
    assert len(sch.trace.insts) == n_insts


# ---------------------------------------------------------------- cache_read / cache_write


def test_cache_read_of_inputs_stages_them_first_and_redirects_the_consumer() -> None:
    mod = matmul()
    sch = Schedule(mod)
    c = sch.get_block("C")
    a_shared = sch.cache_read(c, 0, "shared")
    b_global = sch.cache_read(c, read_buffer_index=1, storage_scope="global")
    inst = sch.trace.insts[-1]
    assert (inst.kind, inst.inputs, inst.attrs, inst.outputs) == ("CacheRead", (c, []), (1, "global"), (b_global,))
    assert sch.get(a_shared).name_hint == "A_shared"
    assert sch.get(b_global).name_hint == "B_global"
    assert block_names(sch.mod) == ["root", "B_global", "A_shared", "C"]
    assert root_allocs(sch.mod) == [("A_shared", "shared"), ("B_global", "global")]
    assert [r.buffer.name for r in sch.get(c).reads] == ["A_shared", "B_global"]
    assert extents(sch, a_shared) == [16, 16]
    assert_same_results(mod, sch.mod)


def test_cache_read_of_an_intermediate_goes_right_after_its_producer() -> None:
    mod = matmul_relu()
    sch = Schedule(mod)
    d = sch.get_block("D")
    cache = sch.cache_read(d, 0, "local")
    assert block_names(sch.mod) == ["root", "C", "C_local", "D"]
    assert [r.buffer.name for r in sch.get(d).reads] == ["C_local"]
    assert [r.buffer.name for r in sch.get(cache).reads] == ["C"]
    assert_same_results(mod, sch.mod)


def test_cache_read_for_chosen_consumers_only_and_unique_names() -> None:
    mod = shared_input()
    sch = Schedule(mod)
    b, c = sch.get_block("B"), sch.get_block("C")
    first = sch.cache_read(b, 0, "shared", consumer_blocks=[b])
    assert [r.buffer.name for r in sch.get(b).reads] == ["A_shared"]
    assert "A" in [r.buffer.name for r in sch.get(c).reads]
    second = sch.cache_read(c, 0, "shared", consumer_blocks=[c])
    # msdb keeps block names unique where TVM would create a second "A_shared"
    assert (sch.get(first).name_hint, sch.get(second).name_hint) == ("A_shared", "A_shared_1")
    assert sch.trace.insts[-1].inputs == (c, [c])
    assert_same_results(mod, sch.mod)


def test_cache_write_keeps_the_block_name_and_returns_the_copy_block() -> None:
    mod = matmul_relu()
    sch = Schedule(mod)
    c = sch.get_block("C")
    cache = sch.cache_write(c, 0, "global")
    assert sch.get(c).name_hint == "C"
    assert sch.get(cache).name_hint == "C_global"
    assert [w.buffer.name for w in sch.get(c).writes] == ["C_global"]
    copy = sch.get(cache)
    assert [(r.buffer.name, w.buffer.name) for r, w in zip(copy.reads, copy.writes)] == [("C_global", "C")]
    assert block_names(sch.mod) == ["root", "C", "C_global", "D"]
    assert root_allocs(sch.mod) == [("C", "global"), ("C_global", "global")]
    inst = sch.trace.insts[-1]
    assert (inst.kind, inst.inputs, inst.attrs, inst.outputs) == ("CacheWrite", (c, []), (0, "global"), (cache,))
    assert_same_results(mod, sch.mod)


def test_cache_write_of_an_output_with_tiles_then_reverse_compute_at() -> None:
    mod = batch_matmul()
    sch = Schedule(mod)
    z = sch.get_block("Z")
    b, i, j, k = sch.get_loops(z)
    i0, i1 = sch.split(i, [2, 4])
    j0, j1 = sch.split(j, [4, 2])
    sch.reorder(b, i0, j0, k, i1, j1)
    cache = sch.cache_write(z, 0, "global")
    sch.reverse_compute_at(cache, j0)
    # one (4 x 2) tile of Z per iteration of (b, i0, j0); the unit batch dimension is dropped
    assert extents(sch, cache) == [2, 2, 4, 4, 2]
    assert_same_results(mod, sch.mod)


def test_cache_errors_name_the_index_and_leave_the_schedule_alone() -> None:
    sch = Schedule(matmul())
    c = sch.get_block("C")
    assert_unchanged_after_error(sch, lambda s: s.cache_read(c, 2, "shared"), "read_buffer_index 2", "'C'")
    assert_unchanged_after_error(sch, lambda s: s.cache_write(c, 1, "global"), "write_buffer_index 1", "'C'")
    assert_unchanged_after_error(sch, lambda s: s.cache_read(c, -1, "shared"), "out of range")


# ---------------------------------------------------------------- compute_at / reverse_compute_at


def test_compute_at_moves_the_producer_under_the_consumer_tile() -> None:
    mod = elementwise()
    sch = Schedule(mod)
    b, c = sch.get_block("B"), sch.get_block("C")
    i, j = sch.get_loops(c)
    i0, i1 = sch.split(i, [3, 4])
    sch.compute_at(b, i0)
    inst = sch.trace.insts[-1]
    assert (inst.kind, inst.inputs, inst.attrs, inst.outputs) == ("ComputeAt", (b, i0), (False, -1), ())
    # C reads B transposed: a 12 x 4 block of B per iteration of i0
    assert extents(sch, b) == [3, 12, 4]
    assert [sch.get(loop).loop_var.name for loop in sch.get_loops(b)] == ["i_0", "ax0", "ax1"]
    assert sch.get(sch.get_loops(c)[0]) is sch.get(i0)
    assert_same_results(mod, sch.mod)


def test_compute_at_keeps_or_drops_unit_loops() -> None:
    for preserve, expected in ((False, [3, 4, 12]), (True, [3, 4, 12, 1])):
        sch = Schedule(elementwise())
        b, c = sch.get_block("B"), sch.get_block("C")
        i, j = sch.get_loops(c)
        i0, i1 = sch.split(i, [3, 4])
        sch.compute_at(b, i1, preserve_unit_loops=preserve)
        assert extents(sch, b) == expected
        assert_same_results(elementwise(), sch.mod)


def test_compute_at_a_window_with_a_predicate_at_the_edge() -> None:
    mod = window()
    sch = Schedule(mod)
    c = sch.get_block("C")
    (i,) = sch.get_loops(c)
    i0, i1 = sch.split(i, [None, 4])  # 9 = 3 x 4 with a predicate
    sch.compute_at(sch.get_block("B"), i0)
    b_realize = sch.mod.main.body.block.body.body.seq[0].body
    assert isinstance(b_realize, S.BlockRealize) and b_realize.block.name_hint == "B"
    assert extents(sch, sch.get_block("B")) == [3, 5]
    assert not (hasattr(b_realize.predicate, "value") and b_realize.predicate.value == 1)
    assert_same_results(mod, sch.mod)


def test_compute_at_of_a_reduction_block_into_its_consumer() -> None:
    mod = matmul_relu(8)
    sch = Schedule(mod)
    c, d = sch.get_block("C"), sch.get_block("D")
    i, j = sch.get_loops(d)
    sch.compute_at(c, i)
    assert extents(sch, c) == [8, 8, 8]
    assert_same_results(mod, sch.mod)


def test_conv_padding_compute_at_and_old_loops_are_gone() -> None:
    mod = small_conv()
    sch = Schedule(mod)
    conv, pad = sch.get_block("conv2d_nhwc"), sch.get_block("PadInput")
    pad_loops = sch.get_loops(pad)
    n, h, w, co, rh, rw, rc = sch.get_loops(conv)
    sch.compute_at(pad, h, preserve_unit_loops=True)
    # one output row needs 3 padded rows (3x3 kernel, stride 2), 7 of the 8 padded columns
    assert extents(sch, pad) == [1, 3, 1, 3, 7, 2]
    with pytest.raises(ScheduleError, match="no longer exists"):
        sch.get(pad_loops[1])
    assert_same_results(mod, sch.mod)


def test_reverse_compute_at_moves_the_consumer_under_the_producer_tile() -> None:
    mod = elementwise()
    sch = Schedule(mod)
    b, c = sch.get_block("B"), sch.get_block("C")
    i, j = sch.get_loops(b)
    i0, i1 = sch.split(i, [3, 4])
    sch.reverse_compute_at(c, i0, preserve_unit_loops=True)
    inst = sch.trace.insts[-1]
    assert (inst.kind, inst.attrs) == ("ReverseComputeAt", (True, -1))
    assert extents(sch, c) == [3, 12, 4]
    assert_same_results(mod, sch.mod)


def blocked_then_unpacked() -> IRModule:
    """A producer in a blocked layout ([C/4, W, 4]) read back in the plain one ([C, W]) with
    `c // 4` and `c % 4`, as a packed conv's epilogue reads it."""
    a = te.placeholder((12, 5), name="A")
    packed = te.compute((3, 5, 4), lambda o, x, lane: a[o * 4 + lane, x] * te.const(2.0, "float32"), name="P")
    out = te.compute((12, 5), lambda c, x: packed[te.floordiv(c, 4), x, te.floormod(c, 4)] + te.const(1.0, "float32"),
                     name="U")
    return IRModule.from_func(te.create_prim_func([a, out]))


def test_reverse_compute_at_inverts_a_read_of_whole_blocks() -> None:
    mod = blocked_then_unpacked()
    sch = Schedule(mod)
    p, u = sch.get_block("P"), sch.get_block("U")
    o, x, lane = sch.get_loops(p)
    sch.reverse_compute_at(u, o, preserve_unit_loops=True)
    assert extents(sch, u) == [3, 4, 5]  # the 4 channels of block o, every column
    assert_same_results(mod, sch.mod)
    sch2 = Schedule(mod)
    sch2.reverse_compute_at(sch2.get_block("U"), sch2.get_loops(sch2.get_block("P"))[1])
    assert extents(sch2, sch2.get_block("U")) == [3, 5, 4]  # one column of block o: its 4 channels
    assert_same_results(mod, sch2.mod)


def test_reverse_compute_at_refuses_a_read_of_part_of_several_blocks() -> None:
    """Half of each block's lanes in a tile of two blocks: the consumer's channels are not one
    range (TVM's answer for part of one block is in test_chains.py)."""
    sch = Schedule(blocked_then_unpacked())
    p, u = sch.get_block("P"), sch.get_block("U")
    o, x, lane = sch.get_loops(p)
    o0, o1 = sch.split(o, [None, 3])
    lane0, lane1 = sch.split(lane, [2, 2])
    sch.reorder(lane0, o1)
    assert_unchanged_after_error(sch, lambda s: s.reverse_compute_at(u, lane0), "'U'", "'P'", "several")


def test_compute_at_errors() -> None:
    sch = Schedule(matmul_relu(8))
    c, d = sch.get_block("C"), sch.get_block("D")
    ci, cj, ck = sch.get_loops(c)
    di, dj = sch.get_loops(d)
    assert_unchanged_after_error(sch, lambda s: s.compute_at(c, ci), "'C'", "encloses the block")
    assert_unchanged_after_error(sch, lambda s: s.compute_at(d, ci), "'D'", "output buffer")
    assert_unchanged_after_error(sch, lambda s: s.compute_at(c, di, index=3), "index 3")
    # a consumer of B outside the loop: moving B would break a dependency
    sch2 = Schedule(window())
    b, c2 = sch2.get_block("B"), sch2.get_block("C")
    sch2.cache_read(c2, 0, "global")
    (ci2,) = sch2.get_loops(c2)
    (bi2,) = sch2.get_loops(b)
    assert_unchanged_after_error(sch2, lambda s: s.compute_at(b, ci2), "break a dependency", "'B_global'")
    assert_unchanged_after_error(sch2, lambda s: s.reverse_compute_at(c2, bi2), "break a dependency")


def test_compute_at_with_sampled_root_and_inline_locations() -> None:
    mod = elementwise()
    sch = Schedule(mod)
    b = sch.get_block("B")
    root = sch.sample_compute_location(b, decision=-1)
    assert sch.get(root) == ROOT_MARK
    before = sch.mod
    sch.compute_at(b, root)
    assert sch.mod is before and sch.trace.insts[-1].kind == "ComputeAt"
    inline = sch.sample_compute_location(b, decision=-2)
    assert sch.get(inline) == INLINE_MARK
    sch.compute_at(b, inline)
    assert block_names(sch.mod) == ["root", "C"]
    assert_same_results(mod, sch.mod)


# ---------------------------------------------------------------- inlining


def test_compute_inline_substitutes_the_producer_and_drops_its_buffer() -> None:
    mod = elementwise()
    sch = Schedule(mod)
    b = sch.get_block("B")
    sch.compute_inline(b)
    assert sch.trace.insts[-1].kind == "ComputeInline"
    assert block_names(sch.mod) == ["root", "C"]
    assert root_allocs(sch.mod) == []
    assert [r.buffer.name for r in sch.get(sch.get_block("C")).reads] == ["A"]
    assert_same_results(mod, sch.mod)


def test_compute_inline_of_conv_padding() -> None:
    mod = small_conv()
    sch = Schedule(mod)
    sch.compute_inline(sch.get_block("PadInput"))
    conv = sch.get(sch.get_block("conv2d_nhwc"))
    assert sorted(r.buffer.name for r in conv.reads) == ["inputs", "weight"]
    assert_same_results(mod, sch.mod)


def test_compute_inline_errors() -> None:
    sch = Schedule(matmul_relu(8))
    c = sch.get_block("C")
    assert_unchanged_after_error(sch, lambda s: s.compute_inline(c), "cannot inline block C: it has a reduction / init")
    sch2 = Schedule(elementwise())
    c2 = sch2.get_block("C")
    assert_unchanged_after_error(sch2, lambda s: s.compute_inline(c2), "output buffer")


def test_reverse_compute_inline_writes_the_consumer_value_from_the_producer() -> None:
    mod = elementwise()
    sch = Schedule(mod)
    sch.reverse_compute_inline(sch.get_block("C"))
    assert sch.trace.insts[-1].kind == "ReverseComputeInline"
    assert block_names(sch.mod) == ["root", "B"]
    assert [w.buffer.name for w in sch.get(sch.get_block("B")).writes] == ["C"]
    assert_same_results(mod, sch.mod)


def test_reverse_compute_inline_after_cache_write() -> None:
    mod = matmul_relu(8)
    sch = Schedule(mod)
    cache = sch.cache_write(sch.get_block("C"), 0, "global")
    sch.reverse_compute_inline(sch.get_block("D"))
    assert block_names(sch.mod) == ["root", "C", "C_global"]
    assert [w.buffer.name for w in sch.get(cache).writes] == ["D"]
    assert_same_results(mod, sch.mod)


def test_reverse_compute_inline_errors() -> None:
    sch = Schedule(matmul_relu(8))
    d = sch.get_block("D")
    assert_unchanged_after_error(sch, lambda s: s.reverse_compute_inline(d), "'D'", "'C'", "complete")
    sch2 = Schedule(window())
    c2 = sch2.get_block("C")
    assert_unchanged_after_error(sch2, lambda s: s.reverse_compute_inline(c2), "different indices")
    sch3 = Schedule(two_consumers())
    c3 = sch3.get_block("C")
    assert_unchanged_after_error(sch3, lambda s: s.reverse_compute_inline(c3), "'B'", "other consumers", "'D'")


def test_reverse_compute_inline_of_a_consumer_reading_other_inputs() -> None:
    mod = shared_input()
    sch = Schedule(mod)
    sch.reverse_compute_inline(sch.get_block("C"))
    assert block_names(sch.mod) == ["root", "B"]
    assert_same_results(mod, sch.mod)


# ---------------------------------------------------------------- reductions


def test_decompose_reduction_splits_init_and_update() -> None:
    mod = matmul()
    sch = Schedule(mod)
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    j0, j1 = sch.split(j, [4, 4])
    sch.reorder(i, j0, k, j1)
    init = sch.decompose_reduction(c, k)
    inst = sch.trace.insts[-1]
    assert (inst.kind, inst.inputs, inst.outputs) == ("DecomposeReduction", (c, k), (init,))
    assert sch.get(init).name_hint == "C_init"
    assert sch.get(c).name_hint == "C_update"  # TVM 0.27 renames the update block
    assert sch.get(c).init is None
    assert [r.buffer.name for r in sch.get(c).reads] == ["C", "A", "B"]
    assert [sch.get(loop).loop_var.name for loop in sch.get_loops(init)] == ["i", "j_0", "j_1_init"]
    assert_same_results(mod, sch.mod)


def test_decompose_reduction_errors() -> None:
    sch = Schedule(matmul_relu(8))
    c, d = sch.get_block("C"), sch.get_block("D")
    di, dj = sch.get_loops(d)
    ci, cj, ck = sch.get_loops(c)
    assert_unchanged_after_error(sch, lambda s: s.decompose_reduction(c, di), "not above the block")
    assert_unchanged_after_error(sch, lambda s: s.decompose_reduction(d, di), "not a reduction block")
    sch.reorder(ci, ck, cj)
    assert_unchanged_after_error(sch, lambda s: s.decompose_reduction(c, cj), "above every loop", "'k'")


@pytest.mark.parametrize("factor_axis", [0, 1, 2, -1])
def test_rfactor_sum(factor_axis: int) -> None:
    mod = matmul(8)
    sch = Schedule(mod)
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    k0, k1 = sch.split(k, [2, 4])
    rf = sch.rfactor(k1, factor_axis)
    inst = sch.trace.insts[-1]
    assert (inst.kind, inst.inputs, inst.attrs, inst.outputs) == ("RFactor", (k1,), (factor_axis,), (rf,))
    assert sch.get(rf).name_hint == "C_rf"
    assert sch.get(c).name_hint == "C"
    rf_buf = sch.get(rf).writes[0].buffer
    shape = [int(d.value) for d in rf_buf.shape]
    assert shape == [8, 8][:factor_axis % 3] + [4] + [8, 8][factor_axis % 3:]
    assert extents(sch, c) == [8, 8, 4]
    assert_same_results(mod, sch.mod)


def test_rfactor_max_then_parallel_partial_loop() -> None:
    mod = matmul_max(8)
    sch = Schedule(mod)
    c = sch.get_block("C")
    i, k = sch.get_loops(c)
    k0, k1 = sch.split(k, [4, 2])
    rf = sch.rfactor(k0, 0)
    sch.decompose_reduction(rf, sch.get_loops(rf)[0])
    assert_same_results(mod, sch.mod)


def test_rfactor_errors() -> None:
    sch = Schedule(matmul_relu(8))
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    assert_unchanged_after_error(sch, lambda s: s.rfactor(i, 0), "not a reduction loop")
    assert_unchanged_after_error(sch, lambda s: s.rfactor(k, 3), "factor_axis 3")
    sch2 = Schedule(elementwise())
    (bi, bj) = sch2.get_loops(sch2.get_block("B"))
    assert_unchanged_after_error(sch2, lambda s: s.rfactor(bi, 0), "reduction block")


# ---------------------------------------------------------------- storage_align


def test_storage_align_records_tvm_annotation() -> None:
    sch = Schedule(matmul())
    c = sch.get_block("C")
    cache = sch.cache_read(c, 0, "shared")
    sch.storage_align(cache, 0, 0, 16, 1)
    sch.storage_align(cache, 0, 1, 8, 2)
    sch.storage_align(cache, 0, 0, 32, 3)  # same (buffer, axis): replaces
    sch.storage_align(cache, 0, -1, 4, 0)  # negative axis counts from the end
    assert sch.get(cache).annotations["buffer_dim_align"] == [[0, 0, 32, 3], [0, 1, 4, 0]]
    inst = sch.trace.insts[-1]
    # the trace keeps the axis as given, as TVM's does (its tensor-core traces record -2)
    assert (inst.kind, inst.inputs, inst.attrs) == ("StorageAlign", (cache,), (0, -1, 4, 0))
    assert_unchanged_after_error(sch, lambda s: s.storage_align(cache, 1, 0, 16, 1), "buffer_index 1")
    assert_unchanged_after_error(sch, lambda s: s.storage_align(cache, 0, 2, 16, 1), "axis 2")
    assert_unchanged_after_error(sch, lambda s: s.storage_align(cache, 0, 0, 0, 0), "factor")


# ---------------------------------------------------------------- traces


def test_recorded_block_primitives_replay_to_the_same_module() -> None:
    mod = matmul_relu(16)
    sch = Schedule(mod)
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    i0, i1 = sch.split(i, [4, 4])
    j0, j1 = sch.split(j, [2, 8])
    k0, k1 = sch.split(k, [4, 4])
    sch.reorder(i0, j0, k0, i1, j1, k1)
    a = sch.cache_read(c, 0, "global")
    sch.compute_at(a, k0)
    cw = sch.cache_write(c, 0, "global")
    sch.reverse_compute_at(cw, j0)
    sch.reverse_compute_inline(sch.get_block("D"))
    sch.storage_align(a, 0, 0, 8, 1)
    sch.decompose_reduction(c, k0)
    assert_same_results(mod, sch.mod)
    replayed = Schedule(mod)
    sch.trace.apply_to_schedule(replayed, remove_postproc=False)
    assert structural_equal(replayed.mod, sch.mod)
    assert str(replayed.trace) == str(sch.trace)
