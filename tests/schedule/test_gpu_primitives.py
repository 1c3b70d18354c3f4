"""The primitives and rules TVM's CUDA traces need, each against what TVM 0.27 prints for the
same calls (the expected modules below are TVM's output, parsed by msdb): compute_at relaxes a
shared-memory buffer over the thread loops of a block, split keeps a fused loop's iterator
whole under floordiv/floormod, set_scope moves an intermediate buffer to another scope. The
full CUDA design spaces and candidates are in tests/tuner/cuda."""

from __future__ import annotations

from typing import Any

import pytest

from msdb.errors import ScheduleError
from msdb.hashing import structural_equal
from msdb.ir import from_script, interpret, to_script
from msdb.schedule import Schedule, Trace
from msdb.schedule.thread_scope import relaxes_under_thread, storage_rank

MATMUL = '''
@T.prim_func(s_tir=True)
def main(A: T.Buffer((64, 64), "float32"), B: T.Buffer((64, 64), "float32"), C: T.Buffer((64, 64), "float32")):
    for i, j, k in T.grid(64, 64, 64):
        with T.sblock("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
'''

#: TVM 0.27's print after `_tile_and_cache` (tvm.s_tir.Schedule, same calls).
TVM_TILED = '''
@T.prim_func(s_tir=True)
def main(A: T.Buffer((64, 64), "float32"), B: T.Buffer((64, 64), "float32"), C: T.Buffer((64, 64), "float32")):
    A_shared = T.sblock_alloc_buffer((64, 64), scope="shared")
    B_local = T.sblock_alloc_buffer((64, 64), scope="local")
    for i_0_j_0_fused in T.thread_binding(4, thread="blockIdx.x"):
        for i_1_j_1_fused in T.thread_binding(16, thread="threadIdx.x"):
            for k_0 in range(8):
                for ax0, ax1 in T.grid(32, 8):
                    with T.sblock("A_shared"):
                        v0 = T.axis.spatial(64, i_0_j_0_fused // 2 * 32 + ax0)
                        v1 = T.axis.spatial(64, k_0 * 8 + ax1)
                        T.reads(A[v0, v1])
                        T.writes(A_shared[v0, v1])
                        A_shared[v0, v1] = A[v0, v1]
                for ax0, ax1 in T.grid(8, 8):
                    with T.sblock("B_local"):
                        v0 = T.axis.spatial(64, k_0 * 8 + ax0)
                        v1 = T.axis.spatial(64, i_0_j_0_fused % 2 * 32 + i_1_j_1_fused % 4 * 8 + ax1)
                        T.reads(B[v0, v1])
                        T.writes(B_local[v0, v1])
                        B_local[v0, v1] = B[v0, v1]
                for k_1, i_2, j_2 in T.grid(8, 8, 8):
                    with T.sblock("C"):
                        vi = T.axis.spatial(64, i_0_j_0_fused // 2 * 32 + i_1_j_1_fused // 4 * 8 + i_2)
                        vj = T.axis.spatial(64, i_0_j_0_fused % 2 * 32 + i_1_j_1_fused % 4 * 8 + j_2)
                        vk = T.axis.reduce(64, k_0 * 8 + k_1)
                        T.reads(A_shared[vi, vk], B_local[vk, vj])
                        T.writes(C[vi, vj])
                        with T.init():
                            C[vi, vj] = T.float32(0.0)
                        C[vi, vj] = C[vi, vj] + A_shared[vi, vk] * B_local[vk, vj]
'''


def _tile_and_cache(sch: Schedule) -> Schedule:
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    i0, i1, i2 = sch.split(i, [2, 4, 8])
    j0, j1, j2 = sch.split(j, [2, 4, 8])
    k0, k1 = sch.split(k, [8, 8])
    sch.reorder(i0, j0, i1, j1, k0, k1, i2, j2)
    sch.bind(sch.fuse(i0, j0), "blockIdx.x")
    sch.bind(sch.fuse(i1, j1), "threadIdx.x")
    a_shared = sch.cache_read(c, 0, "shared")
    sch.compute_at(a_shared, k0, True)
    b_local = sch.cache_read(c, 1, "local")
    sch.compute_at(b_local, k0, True)
    return sch


def test_compute_at_relaxes_a_shared_buffer_over_the_threads_of_the_block() -> None:
    """A_shared is filled for the whole thread block (32 rows: every threadIdx's share);
    B_local, private to a thread, only for that thread's 8 columns."""
    sch = _tile_and_cache(Schedule(from_script(MATMUL)))
    assert structural_equal(sch.mod, from_script(TVM_TILED))


def test_storage_and_thread_ranks_are_tvms() -> None:
    assert [storage_rank(s) for s in ("global", "", "shared", "shared.dyn", "warp", "local")] == [0, 0, 1, 1, 2, 3]
    assert relaxes_under_thread("shared", "threadIdx.y") and relaxes_under_thread("shared", "vthread.x")
    assert not relaxes_under_thread("shared", "blockIdx.x") and not relaxes_under_thread("local", "threadIdx.x")
    assert not relaxes_under_thread("global", "threadIdx.x")
    assert relaxes_under_thread("warp", "threadIdx.x") and not relaxes_under_thread("warp", "threadIdx.y")


COPY = '''
@T.prim_func(s_tir=True)
def main(A: T.Buffer((64, 128), "float32"), B: T.Buffer((64, 128), "float32")):
    for i, j in T.grid(64, 128):
        with T.sblock("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj]
'''


@pytest.mark.parametrize("factors, vi, vj", [
    # TVM 0.27's bindings after fuse(i, j) and split(fused, factors)
    ([None, 32], "(i_j_fused_0 * 32 + i_j_fused_1) // 128", "(i_j_fused_0 * 32 + i_j_fused_1) % 128"),
    ([16, 512], "(i_j_fused_0 * 512 + i_j_fused_1) // 128", "(i_j_fused_0 * 512 + i_j_fused_1) % 128"),
    ([None, 32, 4], "(i_j_fused_0 * 128 + i_j_fused_1 * 4 + i_j_fused_2) // 128",
     "(i_j_fused_0 * 128 + i_j_fused_1 * 4 + i_j_fused_2) % 128"),
])
def test_split_of_a_fused_loop_keeps_its_iterator_whole(factors: list[Any], vi: str, vj: str) -> None:
    sch = Schedule(from_script(COPY))
    i, j = sch.get_loops(sch.get_block("B"))
    sch.split(sch.fuse(i, j), factors)
    text = to_script(sch.mod)
    assert f"vi = T.axis.spatial(64, {vi})" in text and f"vj = T.axis.spatial(128, {vj})" in text


TWO_STAGE = '''
@T.prim_func(s_tir=True)
def main(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    B = T.sblock_alloc_buffer((16,))
    for i in range(16):
        with T.sblock("B"):
            vi = T.axis.spatial(16, i)
            B[vi] = A[vi] * T.float32(2)
    for i in range(16):
        with T.sblock("C"):
            vi = T.axis.spatial(16, i)
            C[vi] = B[vi] + T.float32(1)
'''


def test_set_scope_moves_an_intermediate_buffer_everywhere_it_is_used() -> None:
    sch = Schedule(from_script(TWO_STAGE))
    b = sch.get_block("B")
    sch.set_scope(b, 0, "shared")
    assert structural_equal(sch.mod, from_script(TWO_STAGE.replace("T.sblock_alloc_buffer((16,))",
                                                                   'T.sblock_alloc_buffer((16,), scope="shared")')))
    assert sch.get(sch.get_block("C")).reads[0].buffer.scope == "shared"
    assert str(sch.trace).splitlines()[1] == 'sch.set_scope(block=b0, buffer_index=0, storage_scope="shared")'
    assert sch.trace.as_json()[0][1] == ["SetScope", ["b0"], [0, "shared"], []]
    # the trace replays to the same module
    again = Schedule(from_script(TWO_STAGE))
    Trace.from_json(sch.trace.as_json()).apply_to_schedule(again, remove_postproc=False)
    assert structural_equal(again.mod, sch.mod)


def test_set_scope_to_the_scope_a_buffer_has_changes_nothing_but_is_recorded() -> None:
    sch = Schedule(from_script(TWO_STAGE))
    before = sch.mod
    sch.set_scope(sch.get_block("C"), 0, "global")  # C is a parameter, already global: TVM returns early
    assert sch.mod is before and [i.kind for i in sch.trace.insts] == ["GetSBlock", "SetScope"]


@pytest.mark.parametrize("block, index, scope, message", [
    ("B", 1, "shared", r"set_scope: block 'B': buffer_index 1 is out of range; the block writes 1 buffer\(s\)"),
    ("B", 0, "sharde", r"set_scope: block 'B': storage scope 'sharde' is not valid"),
    ("C", 0, "local", r"set_scope: block 'C': buffer 'C' is not allocated by a block \(it is a function parameter"),
])
def test_set_scope_errors_name_the_block_and_leave_the_schedule_as_it_was(block: str, index: int, scope: str,
                                                                          message: str) -> None:
    sch = Schedule(from_script(TWO_STAGE))
    rv = sch.get_block(block)
    before, trace_before = sch.mod, str(sch.trace)
    with pytest.raises(ScheduleError, match=message):
        sch.set_scope(rv, index, scope)
    assert sch.mod is before and str(sch.trace) == trace_before


# ---------------------------------------------------------------- blockize and tensorize

DENSE_I8 = '''
@T.prim_func(s_tir=True)
def main(X: T.Buffer((8, 16), "int8"), W: T.Buffer((8, 16), "int8"), compute: T.Buffer((8, 8), "int32")):
    for i, j, k in T.grid(8, 8, 16):
        with T.sblock("compute"):
            v_i, v_j, v_k = T.axis.remap("SSR", [i, j, k])
            with T.init():
                compute[v_i, v_j] = 0
            compute[v_i, v_j] = compute[v_i, v_j] + T.Cast("int32", X[v_i, v_k]) * T.Cast("int32", W[v_j, v_k])
'''

#: TVM 0.27's print after `_blockize_k` (tvm.s_tir.Schedule, same calls).
TVM_BLOCKIZED = '''
@T.prim_func(s_tir=True)
def main(X: T.Buffer((8, 16), "int8"), W: T.Buffer((8, 16), "int8"), compute: T.Buffer((8, 8), "int32")):
    for i, j, k_0 in T.grid(8, 8, 4):
        with T.sblock("compute_o"):
            v_i_o, v_j_o, v_k_o = T.axis.remap("SSR", [i, j, k_0])
            T.reads(X[v_i_o, v_k_o * 4:v_k_o * 4 + 4], W[v_j_o, v_k_o * 4:v_k_o * 4 + 4])
            T.writes(compute[v_i_o, v_j_o])
            with T.init():
                with T.sblock("compute_init"):
                    T.reads()
                    T.writes(compute[v_i_o, v_j_o])
                    compute[v_i_o, v_j_o] = 0
            for k_1 in range(4):
                with T.sblock("compute"):
                    v_k_i = T.axis.reduce(4, k_1)
                    T.reads(compute[v_i_o, v_j_o], X[v_i_o, v_k_o * 4 + v_k_i], W[v_j_o, v_k_o * 4 + v_k_i])
                    T.writes(compute[v_i_o, v_j_o])
                    compute[v_i_o, v_j_o] = compute[v_i_o, v_j_o] + T.Cast("int32", X[v_i_o, v_k_o * 4 + v_k_i]) * T.Cast("int32", W[v_j_o, v_k_o * 4 + v_k_i])
'''


def _blockize_k(sch: Schedule) -> Any:
    _, _, k = sch.get_loops(sch.get_block("compute"))
    _, k_1 = sch.split(k, [None, 4])
    return sch.blockize(k_1)


def test_blockize_divides_the_bindings_at_the_loop_as_tvm_does() -> None:
    sch = Schedule(from_script(DENSE_I8))
    outer = _blockize_k(sch)
    assert structural_equal(sch.mod, from_script(TVM_BLOCKIZED))
    assert sch.get(outer).name_hint == "compute_o" and sch.get(sch.get_block("compute")).name_hint == "compute"
    assert str(sch.trace).splitlines()[3] == "b6 = sch.blockize(target=l5, preserve_unit_iters=True)"


def test_blockize_keeps_what_the_function_computes() -> None:
    import numpy as np

    rng = np.random.default_rng(15)
    x = rng.integers(-128, 128, (8, 16), dtype=np.int8)
    w = rng.integers(-128, 128, (8, 16), dtype=np.int8)
    sch = Schedule(from_script(DENSE_I8))
    _blockize_k(sch)
    for mod in (from_script(DENSE_I8), sch.mod):
        out = np.zeros((8, 8), dtype=np.int32)
        interpret(mod, x, w, out)
        assert (out == x.astype(np.int32) @ w.astype(np.int32).T).all()


FUSED_LOOP = '''
@T.prim_func(s_tir=True)
def main(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    B = T.sblock_alloc_buffer((16,))
    for i in range(16):
        with T.sblock("B"):
            vi = T.axis.spatial(16, i)
            B[vi] = A[vi] * T.float32(2)
        with T.sblock("C"):
            vi = T.axis.spatial(16, i)
            C[vi] = B[vi] + T.float32(1)
'''


def test_blockize_refuses_a_loop_with_two_blocks_or_a_binding_it_cannot_divide() -> None:
    sch = Schedule(from_script(FUSED_LOOP))
    (i,) = sch.get_loops(sch.get_block("C"))
    before = sch.mod
    with pytest.raises(ScheduleError, match=r"blockize: loop 'i' must hold exactly one block, it holds 2 \(\['B', 'C'\]\)"):
        sch.blockize(i)
    assert sch.mod is before and len(sch.trace.insts) == 2
    sch = Schedule(from_script(DENSE_I8))
    _, _, k = sch.get_loops(sch.get_block("compute"))
    k_0, k_1 = sch.split(k, [4, 4])
    sch.reorder(k_1, k_0)  # from k_0 down, the binding's loops have scales 1 and 4: not one iterator
    with pytest.raises(ScheduleError, match=r"blockize: block 'compute' at loop 'k_0': .*contiguous"):
        sch.blockize(k_0)


def _decomposed_blockized(sch: Schedule, caches: bool = False) -> Any:
    """Blockize k by 4, optionally read X and W through shared memory and accumulate in local
    memory (the dp4a intrinsic's scopes), and decompose the reduction: the update block."""
    outer = _blockize_k(sch)
    if caches:
        sch.cache_read(outer, 0, "shared")
        sch.cache_read(outer, 1, "shared")
        sch.cache_write(outer, 0, "local")
    i, _, _ = sch.get_loops(outer)
    sch.decompose_reduction(outer, i)
    return sch.get_block("compute_o_update")


def test_tensorize_puts_the_dp4a_implementation_in_place_of_a_matching_block() -> None:
    sch = Schedule(from_script(DENSE_I8))
    update = _decomposed_blockized(sch, caches=True)
    sch.tensorize(update, "dp4a")
    text = to_script(sch.mod)
    # as TVM 0.27 prints it, but for its 4-lane loads `A[T.Ramp(0, 1, 4)]` (msdb.schedule.tensor_intrin)
    # and `offset_factor=1`, the default msdb's printer leaves out
    for line in ('A = T.match_buffer(X_shared[v_i_o, v_k_o * 4:v_k_o * 4 + 4], (4,), "int8", scope="shared", '
                 'align=4)',
                 'B = T.match_buffer(W_shared[v_j_o, v_k_o * 4:v_k_o * 4 + 4], (4,), "int8", scope="shared", '
                 'align=4)',
                 'C = T.match_buffer(compute_local[v_i_o, v_j_o], (1,), "int32", scope="local", align=4)',
                 'C[0] = C[0] + T.call_pure_extern("int32", "__dp4a", A[0], B[0], 0)'):
        assert line in text, line
    assert str(sch.trace).splitlines()[-1].startswith("sch.tensorize(block_or_loop=b")
    assert str(sch.trace).splitlines()[-1].endswith(', tensor_intrin="dp4a", preserve_unit_iters=True)')
    again = Schedule(from_script(DENSE_I8))
    Trace.from_json(sch.trace.as_json()).apply_to_schedule(again, remove_postproc=False)
    assert structural_equal(again.mod, sch.mod)


@pytest.mark.parametrize("intrin, message", [
    ("dp4b", r"tensor intrinsic 'dp4b' is not registered; registered: \['dp4a', "),
    ("dp4a_u8s8s32", r"tensorize: block 'compute_o_update' with 'dp4a_u8s8s32': the block does not compute what the "
                     r"intrinsic describes: buffer 'X' holds int8, the description's 'A' uint8"),
])
def test_tensorize_refuses_an_unknown_or_mismatching_intrinsic(intrin: str, message: str) -> None:
    sch = Schedule(from_script(DENSE_I8))
    update = _decomposed_blockized(sch)
    before = sch.mod
    with pytest.raises(ScheduleError, match=message):
        sch.tensorize(update, intrin)
    assert sch.mod is before


def test_tensorize_refuses_a_block_that_still_has_its_init() -> None:
    sch = Schedule(from_script(DENSE_I8))
    outer = _blockize_k(sch)
    with pytest.raises(ScheduleError, match=r"the block still has an init \(decompose the reduction first\)"):
        sch.tensorize(outer, "dp4a")


def test_binding_terms_print_in_tvms_iter_map_order() -> None:
    """A convolution halo: TVM 0.27's `arith.iter_map_simplify([blk % 2 * 28 + rx_0 + f % 28])`
    over blk in [0, 56), rx_0 in [0, 3), f in [0, 4480) gives `rx_0 + blk % 2 * 28 + f % 28`
    (the term no scale chain reaches goes first); a bijective sum keeps scale-descending order."""
    from msdb.ir import expr as E
    from msdb.ir.arith import Analyzer
    from msdb.schedule.iter_order import iter_map_order

    blk, rx, f = E.Var("blk", "int32"), E.Var("rx_0", "int32"), E.Var("f", "int32")
    analyzer = Analyzer({blk: 56, rx: 3, f: 4480})
    halo = analyzer.simplify(E.Add(E.Add(E.Mul(E.FloorMod(blk, E.IntImm("int32", 2)), E.IntImm("int32", 28)), rx),
                                   E.FloorMod(f, E.IntImm("int32", 28))))
    ordered = iter_map_order(halo, analyzer)
    assert isinstance(ordered, E.Add) and isinstance(ordered.a, E.Add) and ordered.a.a is rx
    bijective = analyzer.simplify(E.Add(E.Add(E.Mul(E.FloorMod(blk, E.IntImm("int32", 2)), E.IntImm("int32", 84)),
                                              E.Mul(rx, E.IntImm("int32", 28))), E.FloorMod(f, E.IntImm("int32", 28))))
    assert iter_map_order(bijective, analyzer) is bijective


def test_storage_align_takes_any_offset_but_only_an_allocated_buffer() -> None:
    """TVM's rules: the factor must be positive and the buffer an intermediate one; the offset
    is not checked (TVM's tensor-core rule aligns with offset 8 of factor 32, any value works)."""
    sch = Schedule(from_script(TWO_STAGE))
    sch.storage_align(sch.get_block("B"), 0, 0, 4, 9)
    assert sch.get(sch.get_block("B")).annotations["buffer_dim_align"] == [[0, 0, 4, 9]]
    before = sch.mod
    with pytest.raises(ScheduleError, match=r"storage_align: block 'C': buffer 'C' is not allocated by a block"):
        sch.storage_align(sch.get_block("C"), 0, 0, 4, 1)
    with pytest.raises(ScheduleError, match=r"storage_align: block 'B': factor must be positive, got 0"):
        sch.storage_align(sch.get_block("B"), 0, 0, 0, 1)
    assert sch.mod is before
