"""Schedules exercising the block primitives, shared by the reference generator (run under real
TVM 0.27, see generate.py) and msdb's tests (tests/schedule/test_chains.py).

Each scenario is `(workload, schedule_fn)`; `schedule_fn(sch)` only uses the Python API that
TVM's `tvm.s_tir.Schedule` and `msdb.schedule.Schedule` share, so the same code produces TVM's
module (stored as reference) and msdb's (compared structurally). Scenarios whose name starts
with `err_` are expected to fail in both.
"""

# ---- compute_at / reverse_compute_at on an elementwise chain (B = A*2, C = B^T + 1, 12x12) ----


def ew_compute_at_nondivisible(sch):
    c = sch.get_sblock("C")
    i, j = sch.get_loops(c)
    i0, i1 = sch.split(i, [None, 5])
    j0, j1 = sch.split(j, [None, 5])
    sch.reorder(i0, j0, i1, j1)
    sch.compute_at(sch.get_sblock("B"), j0)


def ew_compute_at_drop_unit_loops(sch):
    c = sch.get_sblock("C")
    i, j = sch.get_loops(c)
    i0, i1 = sch.split(i, [3, 4])
    sch.compute_at(sch.get_sblock("B"), i1, preserve_unit_loops=False)


def ew_compute_at_keep_unit_loops(sch):
    c = sch.get_sblock("C")
    i, j = sch.get_loops(c)
    i0, i1 = sch.split(i, [3, 4])
    sch.compute_at(sch.get_sblock("B"), i1, preserve_unit_loops=True)


def ew_reverse_compute_at_nondivisible(sch):
    b = sch.get_sblock("B")
    i, j = sch.get_loops(b)
    i0, i1 = sch.split(i, [None, 5])
    sch.reverse_compute_at(sch.get_sblock("C"), i0)


def ew_compute_inline(sch):
    sch.compute_inline(sch.get_sblock("B"))


def ew_reverse_compute_inline(sch):
    sch.reverse_compute_inline(sch.get_sblock("C"))


# ---- a three-block chain (B = A+1, C = B*3, D[i] = C[i] + C[i+1] + C[i+2]) ----


def chain_compute_at_twice(sch):
    d = sch.get_sblock("D")
    (i,) = sch.get_loops(d)
    i0, i1 = sch.split(i, [None, 3])
    sch.compute_at(sch.get_sblock("C"), i0)
    sch.compute_at(sch.get_sblock("B"), i0)


def chain_compute_at_index(sch):
    d = sch.get_sblock("D")
    (i,) = sch.get_loops(d)
    i0, i1 = sch.split(i, [None, 3])
    sch.compute_at(sch.get_sblock("C"), i0)
    sch.compute_at(sch.get_sblock("B"), i0, index=0)


def chain_inline_both(sch):
    sch.compute_inline(sch.get_sblock("B"))
    sch.compute_inline(sch.get_sblock("C"))


def chain_reverse_inline(sch):
    sch.reverse_compute_inline(sch.get_sblock("C"))


# ---- matmul (16^3) and matmul + relu ----


def mm_cache_read_compute_at(sch):
    c = sch.get_sblock("C")
    i, j, k = sch.get_loops(c)
    i0, i1 = sch.split(i, [4, 4])
    j0, j1 = sch.split(j, [2, 8])
    k0, k1 = sch.split(k, [4, 4])
    sch.reorder(i0, j0, k0, i1, j1, k1)
    a = sch.cache_read(c, 0, "shared")
    sch.compute_at(a, k0)
    b = sch.cache_read(c, 1, "local")
    sch.compute_at(b, k0)
    sch.decompose_reduction(c, k0)


def mm_rfactor_outer(sch):
    c = sch.get_sblock("C")
    i, j, k = sch.get_loops(c)
    k0, k1 = sch.split(k, [None, 4])
    sch.rfactor(k0, 2)


def mm_rfactor_inner_negative_axis(sch):
    c = sch.get_sblock("C")
    sch.annotate(c, "note", 1)
    i, j, k = sch.get_loops(c)
    sch.parallel(i)
    k0, k1 = sch.split(k, [3, 6])
    sch.rfactor(k1, -1)


def mm_decompose_with_predicate(sch):
    c = sch.get_sblock("C")
    i, j, k = sch.get_loops(c)
    i0, i1 = sch.split(i, [None, 5])
    k0, k1 = sch.split(k, [None, 5])
    sch.reorder(i0, k0, i1, j, k1)
    sch.decompose_reduction(c, k0)


def mm_storage_align(sch):
    c = sch.get_sblock("C")
    a = sch.cache_read(c, 0, "shared")
    sch.storage_align(a, 0, 1, 8, 2)
    sch.storage_align(a, 0, 1, 16, 3)
    sch.storage_align(a, 0, 0, 4, 1)


def mmrelu_tiled(sch):
    c = sch.get_sblock("C")
    i, j, k = sch.get_loops(c)
    i0, i1, i2, i3 = sch.split(i, [2, 1, 2, 4])
    j0, j1, j2, j3 = sch.split(j, [1, 4, 2, 2])
    k0, k1 = sch.split(k, [2, 8])
    sch.reorder(i0, j0, i1, j1, k0, i2, j2, k1, i3, j3)
    cw = sch.cache_write(c, 0, "global")
    sch.reverse_compute_at(cw, j0, preserve_unit_loops=True)
    sch.reverse_compute_at(sch.get_sblock("D"), j0, preserve_unit_loops=True)
    fused = sch.fuse(i0, j0)
    sch.parallel(fused)
    sch.decompose_reduction(c, k0)


def mmrelu_cache_write_then_reverse_inline(sch):
    c = sch.get_sblock("C")
    sch.cache_write(c, 0, "global")
    sch.reverse_compute_inline(sch.get_sblock("D"))


def mmrelu_cache_read_intermediate(sch):
    sch.cache_read(sch.get_sblock("D"), 0, "global")


def mmrelu_cache_write_for_consumer(sch):
    c = sch.get_sblock("C")
    d = sch.get_sblock("D")
    sch.cache_write(c, 0, "local", [d])


# ---- batch matmul (2x8x8x8): MetaSchedule's CPU multi-level tiling ----


def bmm_multi_level_tiling(sch):
    z = sch.get_sblock("Z")
    b, i, j, k = sch.get_loops(z)
    i0, i1, i2, i3 = sch.split(i, [1, 2, 2, 2])
    j0, j1, j2, j3 = sch.split(j, [2, 2, 1, 2])
    k0, k1 = sch.split(k, [2, 4])
    sch.reorder(b, i0, j0, i1, j1, k0, i2, j2, k1, i3, j3)
    cw = sch.cache_write(z, 0, "global")
    sch.reverse_compute_at(cw, j1, preserve_unit_loops=True)
    fused = sch.fuse(b, i0, j0, i1)
    sch.parallel(fused)
    inner = sch.fuse(sch.get_loops(z)[-1])
    sch.vectorize(inner)
    sch.decompose_reduction(z, k0)


# ---- conv2d NHWC with a padding block (1x8x8x3, 4 filters 3x3, stride 2, pad 1) ----


def conv_pad_compute_at_tile(sch):
    conv = sch.get_sblock("conv2d_nhwc")
    n, h, w, co, rh, rw, rc = sch.get_loops(conv)
    h0, h1 = sch.split(h, [2, 2])
    w0, w1 = sch.split(w, [2, 2])
    sch.reorder(n, h0, w0, co, rh, rw, rc, h1, w1)
    sch.compute_at(sch.get_sblock("PadInput"), w0, preserve_unit_loops=True)


def conv_pad_compute_at_reduction_loop(sch):
    conv = sch.get_sblock("conv2d_nhwc")
    n, h, w, co, rh, rw, rc = sch.get_loops(conv)
    h0, h1 = sch.split(h, [2, 2])
    w0, w1 = sch.split(w, [2, 2])
    sch.reorder(n, h0, w0, co, rh, rw, rc, h1, w1)
    sch.compute_at(sch.get_sblock("PadInput"), rw, preserve_unit_loops=True)


def conv_ms_chain(sch):
    """MetaSchedule's CPU flow: SSRSRS tiling, write cache at level 2, padding at a tile loop,
    then the post-processing (fuse + parallel, vectorize, decompose_reduction)."""
    conv = sch.get_sblock("conv2d_nhwc")
    n, h, w, co, rh, rw, rc = sch.get_loops(conv)
    n0, n1, n2, n3 = sch.split(n, [1, 1, 1, 1])
    h0, h1, h2, h3 = sch.split(h, [2, 1, 2, 1])
    w0, w1, w2, w3 = sch.split(w, [1, 2, 1, 2])
    c0, c1, c2, c3 = sch.split(co, [1, 2, 1, 2])
    rh0, rh1 = sch.split(rh, [3, 1])
    rw0, rw1 = sch.split(rw, [1, 3])
    rc0, rc1 = sch.split(rc, [3, 1])
    sch.reorder(n0, h0, w0, c0, n1, h1, w1, c1, rh0, rw0, rc0, n2, h2, w2, c2, rh1, rw1, rc1, n3, h3, w3, c3)
    cw = sch.cache_write(conv, 0, "global")
    sch.reverse_compute_at(cw, c1, preserve_unit_loops=True)
    sch.compute_at(sch.get_sblock("PadInput"), w0, preserve_unit_loops=True)
    loops = sch.get_loops(conv)
    fused = sch.fuse(loops[0], loops[1], loops[2])
    sch.parallel(fused)
    inner = sch.fuse(sch.get_loops(conv)[-1])
    sch.vectorize(inner)
    sch.decompose_reduction(conv, sch.get_loops(conv)[6])


def mmrelu_compute_at_reduction_producer(sch):
    d = sch.get_sblock("D")
    i, j = sch.get_loops(d)
    sch.compute_at(sch.get_sblock("C"), j)


def chain_cache_read_for_one_consumer(sch):
    d = sch.get_sblock("D")
    sch.cache_read(d, 0, "local", [d])
    (i,) = sch.get_loops(d)
    i0, i1 = sch.split(i, [2, 4])
    sch.compute_at(sch.get_sblock("C_local"), i0)


def err_reverse_compute_at_window_access(sch):
    c = sch.get_sblock("C")
    (i,) = sch.get_loops(c)
    i0, i1 = sch.split(i, [5, 2])
    sch.reverse_compute_at(sch.get_sblock("D"), i0, index=-2)


def mmrelu_caches_inside_a_shared_loop(sch):
    c = sch.get_sblock("C")
    d = sch.get_sblock("D")
    i, j, k = sch.get_loops(c)
    i0, i1 = sch.split(i, [4, 4])
    sch.reorder(i0, j, k, i1)
    sch.reverse_compute_at(d, i0)
    sch.cache_write(c, 0, "global")
    sch.cache_read(d, 0, "local")


# ---- illegal uses ----


def err_decompose_below_reduction_loop(sch):
    c = sch.get_sblock("C")
    i, j, k = sch.get_loops(c)
    k0, k1 = sch.split(k, [4, 4])
    sch.reorder(i, k0, j, k1)
    sch.decompose_reduction(c, j)


def err_inline_reduction(sch):
    sch.compute_inline(sch.get_sblock("C"))


def err_compute_at_consumer_outside(sch):
    d = sch.get_sblock("D")
    (i,) = sch.get_loops(d)
    sch.compute_at(sch.get_sblock("B"), i)


def err_reverse_compute_at_producer_outside(sch):
    b = sch.get_sblock("B")
    (i,) = sch.get_loops(b)
    sch.reverse_compute_at(sch.get_sblock("D"), i)


def err_compute_at_own_loop(sch):
    b = sch.get_sblock("B")
    i, j = sch.get_loops(b)
    sch.compute_at(b, i)


def err_decompose_loop_not_above(sch):
    d = sch.get_sblock("D")
    i, j = sch.get_loops(d)
    sch.decompose_reduction(sch.get_sblock("C"), i)


def err_cache_read_bad_index(sch):
    sch.cache_read(sch.get_sblock("C"), 5, "shared")


def err_cache_write_bad_index(sch):
    sch.cache_write(sch.get_sblock("C"), 1, "global")


def err_reverse_inline_into_reduction(sch):
    sch.reverse_compute_inline(sch.get_sblock("D"))


def err_rfactor_spatial_loop(sch):
    c = sch.get_sblock("C")
    i, j, k = sch.get_loops(c)
    sch.rfactor(i, 0)


def err_compute_at_output_block(sch):
    c = sch.get_sblock("C")
    i, j, k = sch.get_loops(c)
    sch.compute_at(sch.get_sblock("D"), i)


# ---- a blocked producer P[C/4, W, 4] read back as U[c, x] = P[c // 4, x, c % 4] (a packed conv's
# unpack, msdb.model.legalize.conv.conv2d_packed) ----


def blocked_reverse_compute_at_block_loop(sch):
    o, x, lane = sch.get_loops(sch.get_sblock("P"))
    sch.reverse_compute_at(sch.get_sblock("U"), o, preserve_unit_loops=True)


def blocked_reverse_compute_at_column_loop(sch):
    o, x, lane = sch.get_loops(sch.get_sblock("P"))
    sch.reverse_compute_at(sch.get_sblock("U"), x)


def blocked_reverse_compute_at_half_blocks(sch):
    o, x, lane = sch.get_loops(sch.get_sblock("P"))
    lane0, lane1 = sch.split(lane, [2, 2])
    sch.reorder(lane0, x)
    sch.reverse_compute_at(sch.get_sblock("U"), lane0)


SCENARIOS = {
    "blocked_reverse_compute_at_block_loop": ("blocked", blocked_reverse_compute_at_block_loop),
    "blocked_reverse_compute_at_column_loop": ("blocked", blocked_reverse_compute_at_column_loop),
    "blocked_reverse_compute_at_half_blocks": ("blocked", blocked_reverse_compute_at_half_blocks),
    "ew_compute_at_nondivisible": ("ew", ew_compute_at_nondivisible),
    "ew_compute_at_drop_unit_loops": ("ew", ew_compute_at_drop_unit_loops),
    "ew_compute_at_keep_unit_loops": ("ew", ew_compute_at_keep_unit_loops),
    "ew_reverse_compute_at_nondivisible": ("ew", ew_reverse_compute_at_nondivisible),
    "ew_compute_inline": ("ew", ew_compute_inline),
    "ew_reverse_compute_inline": ("ew", ew_reverse_compute_inline),
    "chain_compute_at_twice": ("chain", chain_compute_at_twice),
    "chain_compute_at_index": ("chain", chain_compute_at_index),
    "chain_inline_both": ("chain", chain_inline_both),
    "chain_reverse_inline": ("chain", chain_reverse_inline),
    "mm_cache_read_compute_at": ("mm", mm_cache_read_compute_at),
    "mm_rfactor_outer": ("mm", mm_rfactor_outer),
    "mm_rfactor_inner_negative_axis": ("mm", mm_rfactor_inner_negative_axis),
    "mm_decompose_with_predicate": ("mm", mm_decompose_with_predicate),
    "mm_storage_align": ("mm", mm_storage_align),
    "mmrelu_tiled": ("mmrelu", mmrelu_tiled),
    "mmrelu_cache_write_then_reverse_inline": ("mmrelu", mmrelu_cache_write_then_reverse_inline),
    "mmrelu_cache_read_intermediate": ("mmrelu", mmrelu_cache_read_intermediate),
    "mmrelu_cache_write_for_consumer": ("mmrelu", mmrelu_cache_write_for_consumer),
    "bmm_multi_level_tiling": ("bmm", bmm_multi_level_tiling),
    "conv_pad_compute_at_tile": ("conv", conv_pad_compute_at_tile),
    "conv_pad_compute_at_reduction_loop": ("conv", conv_pad_compute_at_reduction_loop),
    "conv_ms_chain": ("conv", conv_ms_chain),
    "mmrelu_compute_at_reduction_producer": ("mmrelu", mmrelu_compute_at_reduction_producer),
    "chain_cache_read_for_one_consumer": ("chain", chain_cache_read_for_one_consumer),
    "err_reverse_compute_at_window_access": ("chain", err_reverse_compute_at_window_access),
    "mmrelu_caches_inside_a_shared_loop": ("mmrelu", mmrelu_caches_inside_a_shared_loop),
    "err_decompose_below_reduction_loop": ("mm", err_decompose_below_reduction_loop),
    "err_inline_reduction": ("mm", err_inline_reduction),
    "err_compute_at_consumer_outside": ("chain", err_compute_at_consumer_outside),
    "err_reverse_compute_at_producer_outside": ("chain", err_reverse_compute_at_producer_outside),
    "err_compute_at_own_loop": ("ew", err_compute_at_own_loop),
    "err_decompose_loop_not_above": ("mmrelu", err_decompose_loop_not_above),
    "err_cache_read_bad_index": ("mm", err_cache_read_bad_index),
    "err_cache_write_bad_index": ("mm", err_cache_write_bad_index),
    "err_reverse_inline_into_reduction": ("mmrelu", err_reverse_inline_into_reduction),
    "err_rfactor_spatial_loop": ("mm", err_rfactor_spatial_loop),
    "err_compute_at_output_block": ("mmrelu", err_compute_at_output_block),
}
