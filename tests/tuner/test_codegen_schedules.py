"""Hand schedules built with msdb's Schedule primitives (split, fuse, reorder, parallel,
vectorize, unroll, cache_read/cache_write with compute_at/reverse_compute_at,
decompose_reduction, compute_inline, reverse_compute_inline, rfactor, storage_align, annotate)
compile to kernels that compute what the unscheduled workload computes (msdb's interpreter
is the reference), and TVM-scheduled scripts compile too."""

from __future__ import annotations

import pytest

from msdb.records.target import Target
from msdb.ir import from_script, zoo
from msdb.schedule import Schedule
from msdb.tuner.codegen.lower import Allocate, format_lowered, lower_module
from tests.tuner._util import TVMSCRIPT, check_against_interpreter, random_arrays


def register_tiled_matmul(mod, rows: int = 4, cols: int = 16, k_unroll: int = 4, parallel: bool = True,
                          pack: bool = True) -> Schedule:
    """The CPU matmul schedule of bench/bench_codegen.py: a rows x cols accumulator tile in a
    "local" cache (registers), B packed per column panel, k unrolled, vector columns."""
    sch = Schedule(mod)
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    i0, i1 = sch.split(i, [None, rows])
    j0, j1 = sch.split(j, [None, cols])
    k0, k1 = sch.split(k, [None, k_unroll])
    sch.reorder(j0, i0, k0, k1, i1, j1)
    local = sch.cache_write(c, 0, "local")
    sch.reverse_compute_at(local, i0)
    if pack:
        packed = sch.cache_read(c, 1, "global")
        sch.compute_at(packed, j0)
        sch.vectorize(sch.get_loops(packed)[-1])
    sch.vectorize(j1)
    sch.unroll(i1)
    sch.unroll(k1)
    sch.vectorize(sch.get_loops(local)[-1])
    if parallel:
        sch.parallel(j0)
    sch.decompose_reduction(c, k0)
    return sch


def test_register_tiled_matmul_schedule(isa_target: Target) -> None:
    mod = zoo.build("matmul", 40, 48, 36)
    sch = register_tiled_matmul(mod)
    check_against_interpreter(mod, sch.mod, seed=1, target=isa_target)


def test_register_tile_becomes_a_compact_local_allocation() -> None:
    mod = zoo.build("matmul", 64, 64, 64)
    lowered = lower_module(register_tiled_matmul(mod, rows=8, cols=32).mod)
    allocs = {}

    def walk(s):
        if isinstance(s, Allocate):
            allocs[s.buffer.name] = tuple(int(d.value) for d in s.buffer.shape)
        for child in getattr(s, "seq", ()) or ():
            walk(child)
        body = getattr(s, "body", None)
        if body is not None and not isinstance(body, (list, tuple)):
            walk(body)
        for arm in (getattr(s, "then_case", None), getattr(s, "else_case", None)):
            if arm is not None:
                walk(arm)

    walk(lowered.body)
    assert allocs == {"C_local": (8, 32), "B_global": (64, 32)}, format_lowered(lowered)


def test_non_dividing_split_gives_predicated_vector_and_parallel_loops(isa_target: Target) -> None:
    mod = zoo.build("relu0", 3, 100)
    sch = Schedule(mod)
    blk = sch.get_block("Y")
    i, j = sch.get_loops(blk)
    fused = sch.fuse(i, j)
    outer, inner = sch.split(fused, [None, 16])
    sch.parallel(outer)
    sch.vectorize(inner)
    check_against_interpreter(mod, sch.mod, seed=2, arrays=random_arrays(mod, seed=2, low=-1.0), target=isa_target)


def test_tvm_style_predicate_script(isa_target: Target) -> None:
    mod = from_script((TVMSCRIPT / "tutorials" / "where_predicate.py").read_text())
    check_against_interpreter(mod, seed=3, target=isa_target)


def test_inline_and_reverse_inline_with_fused_parallel_loops(isa_target: Target) -> None:
    mod = zoo.build("matmul_bias_relu", 16, 24, 20)
    sch = Schedule(mod)
    sch.reverse_compute_inline(sch.get_block("compute"))  # relu into bias_add (a complete block)
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    sch.parallel(sch.fuse(i, j))
    add = sch.get_block("bias_add")
    ai, aj = sch.get_loops(add)
    sch.vectorize(aj)
    check_against_interpreter(mod, sch.mod, seed=4, arrays=random_arrays(mod, seed=4, low=-1.0), target=isa_target)


def test_compute_inline_of_an_elementwise_producer(isa_target: Target) -> None:
    mod = zoo.build("matmul_bias_relu", 16, 24, 20)
    sch = Schedule(mod)
    sch.compute_inline(sch.get_block("bias_add"))
    i, j = sch.get_loops(sch.get_block("compute"))
    sch.parallel(i)
    sch.vectorize(j)
    check_against_interpreter(mod, sch.mod, seed=4, arrays=random_arrays(mod, seed=4, low=-1.0), target=isa_target)


def test_tiled_gmm_with_global_write_cache_like_metaschedule(isa_target: Target) -> None:
    """SSRSRS tiling, a "global" write cache at the second spatial level, parallel outer
    loops, a vectorized inner loop, auto-unroll pragma and decompose_reduction: the shape of
    TVM's CPU traces."""
    mod = zoo.build("GMM", 1, 32, 32, 32)
    sch = Schedule(mod)
    z = sch.get_block("Z")
    b, i, j, k = sch.get_loops(z)
    i0, i1, i2, i3 = sch.split(i, [2, 2, 4, 2])
    j0, j1, j2, j3 = sch.split(j, [1, 2, 2, 8])
    k0, k1 = sch.split(k, [8, 4])
    sch.reorder(b, i0, j0, i1, j1, k0, i2, j2, k1, i3, j3)
    cw = sch.cache_write(z, 0, "global")
    sch.reverse_compute_at(cw, j1, preserve_unit_loops=True)
    sch.parallel(sch.fuse(b, i0, j0))
    sch.vectorize(j3)
    sch.annotate(i1, "pragma_auto_unroll_max_step", 64)
    sch.annotate(i1, "pragma_unroll_explicit", 1)
    sch.vectorize(sch.get_loops(cw)[-1])
    sch.decompose_reduction(z, k0)
    check_against_interpreter(mod, sch.mod, seed=5, target=isa_target)


def test_padding_computed_at_an_output_tile(isa_target: Target) -> None:
    mod = zoo.build("C2D", 1, 12, 12, 4, 8, 3, 1, 1)
    sch = Schedule(mod)
    conv = sch.get_block("conv2d_nhwc")
    pad = sch.get_block("PadInput")
    n, h, w, co, rh, rw, rc = sch.get_loops(conv)
    h0, h1 = sch.split(h, [None, 4])
    sch.reorder(n, h0, w, h1, co, rh, rw, rc)
    sch.compute_at(pad, h0)
    sch.vectorize(sch.get_loops(pad)[-1])
    sch.parallel(h0)
    check_against_interpreter(mod, sch.mod, seed=6, target=isa_target)


def test_rfactor_reduction(isa_target: Target) -> None:
    mod = zoo.build("NRM", 2, 16, 32)
    sch = Schedule(mod)
    c = sch.get_block("C")
    b, i, j = sch.get_loops(c)
    j0, j1 = sch.split(j, [None, 8])
    sch.rfactor(j1, 0)
    check_against_interpreter(mod, sch.mod, seed=7, rtol=1e-4, target=isa_target)


def _allocations(mod) -> dict[str, tuple[list[int], int]]:  # type: ignore[no-untyped-def]
    """name -> (strides, elements) of every allocation of the lowered main function."""
    from msdb.tuner.codegen.analysis import allocation_elements, buffer_strides, walk
    from msdb.tuner.codegen.lower import Allocate, lower_func

    found: list[Allocate] = []
    walk(lower_func(mod.main).body, lambda n: found.append(n) if isinstance(n, Allocate) else None)
    return {a.buffer.name: (list(buffer_strides(a.buffer)), allocation_elements(a.buffer)) for a in found}


def test_storage_align_on_a_cache(isa_target: Target) -> None:
    mod = zoo.build("matmul", 16, 16, 16)
    sch = Schedule(mod)
    c = sch.get_block("C")
    cache = sch.cache_read(c, 0, "shared")
    assert _allocations(sch.mod)["A_shared"] == ([16, 1], 256)
    sch.storage_align(cache, 0, 0, 16, 4)
    # TVM's rule: the row stride 16 is padded to 20 (20 % 16 == 4), so rows start in different banks
    assert _allocations(sch.mod)["A_shared"] == ([20, 1], 15 * 20 + 16)
    check_against_interpreter(mod, sch.mod, seed=8, target=isa_target)


def test_storage_align_on_two_axes_of_a_3d_cache(isa_target: Target) -> None:
    mod = zoo.build("GMM", 2, 12, 10, 8)  # X: (2, 12, 8)
    sch = Schedule(mod)
    cache = sch.cache_read(sch.get_block("Z"), 0, "global")
    sch.storage_align(cache, 0, 2, 4, 3)  # innermost stride 1 -> 3 (3 % 4 == 3)
    sch.storage_align(cache, 0, 1, 8, 1)  # row stride 3 * 8 = 24 -> 25 (25 % 8 == 1)
    strides = [25 * 12, 25, 3]
    assert _allocations(sch.mod)["X_global"] == (strides, 1 + 1 * 300 + 11 * 25 + 7 * 3)
    check_against_interpreter(mod, sch.mod, seed=11, target=isa_target)


def test_softmax_with_parallel_rows_and_vectorized_columns(isa_target: Target) -> None:
    mod = zoo.build("SFM", 8, 32)
    sch = Schedule(mod)
    for name in ("T_softmax_maxelem", "T_softmax_exp", "T_softmax_expsum", "T_softmax_norm"):
        sch.parallel(sch.get_loops(sch.get_block(name))[0])
    for name in ("T_softmax_exp", "T_softmax_norm"):
        sch.vectorize(sch.get_loops(sch.get_block(name))[-1])
    check_against_interpreter(mod, sch.mod, seed=9, rtol=1e-5, target=isa_target)


@pytest.mark.parametrize("name", [
    pytest.param("c2d_inlined", marks=pytest.mark.slow), "gmm_cpu_tiled", "gmm_rfactor",
    pytest.param("gmm_gpu_bound", marks=pytest.mark.slow), "sfm_root_annotated"])
def test_tvm_scheduled_scripts(name: str, isa_target: Target) -> None:
    """TVM 0.27's own schedules (printed scripts) compile (thread-bound loops run as serial
    loops on the CPU). Reference: numpy for the batch matmuls, else the interpreter running the
    same script."""
    import numpy as np

    from msdb.tuner import build

    mod = from_script((TVMSCRIPT / "tvm027_sched" / f"{name}.py").read_text())
    if name.startswith("gmm"):
        x, y, z = random_arrays(mod, seed=10)
        build(mod, isa_target)(x, y, z)
        np.testing.assert_allclose(z, np.einsum("bik,bkj->bij", x, y), rtol=1e-4)
    else:
        check_against_interpreter(mod, seed=10, target=isa_target)


def test_auto_unroll_pragma_unrolls_small_inner_loops_like_tvm(isa_target: Target) -> None:
    """TVM's UnrollLoop rule under pragma_auto_unroll_max_step: loops whose subtree runs at
    most max_step statements (a vectorized loop counts as one) are unrolled; the loop with a
    kept loop below it is not."""
    from msdb.ir import stmt as S

    mod = zoo.build("GMM", 1, 16, 16, 16)
    sch = Schedule(mod)
    z = sch.get_block("Z")
    b, i, j, k = sch.get_loops(z)
    i0, i1 = sch.split(i, [None, 4])
    j0, j1 = sch.split(j, [None, 8])
    sch.reorder(b, i0, j0, k, i1, j1)
    sch.vectorize(j1)
    sch.annotate(b, "pragma_auto_unroll_max_step", 16)
    sch.annotate(b, "pragma_unroll_explicit", 1)
    lowered = lower_module(sch.mod)
    kinds = {}

    def walk(s):
        if isinstance(s, S.For):
            kinds[s.loop_var.name] = s.kind
        for child in (getattr(s, "seq", None) or ()):
            walk(child)
        for name in ("body", "then_case", "else_case"):
            child = getattr(s, name, None)
            if isinstance(child, S.Stmt):
                walk(child)

    walk(lowered.body)
    assert kinds["i_1"] == S.ForKind.UNROLLED  # 4 x one vector statement <= 16
    assert kinds["j_1"] == S.ForKind.VECTORIZED
    assert kinds["k"] == S.ForKind.SERIAL  # 16 x 4 > 16
    check_against_interpreter(mod, sch.mod, seed=11, target=isa_target)


def test_large_intermediates_go_to_the_heap(isa_target: Target) -> None:
    from msdb.tuner import build
    from msdb.tuner.codegen.emit import EmitOptions

    mod = zoo.build("matmul_bias", 8, 12, 16)
    kernel = build(mod, isa_target, options=EmitOptions(stack_budget=0))
    assert "@\"aligned_alloc\"" in kernel.llvm_ir and "@\"free\"" in kernel.llvm_ir
    arrays = random_arrays(mod, seed=12)
    a, b, bias, out = arrays
    kernel(*arrays)
    import numpy as np

    np.testing.assert_allclose(out, a @ b + bias, rtol=1e-4)
