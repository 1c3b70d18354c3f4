"""TVM's five per-store feature groups from the stores a walk found (`store_walk`), one row per
written buffer (TVM's `per_store_feature.cc`): 57 + 18 x 5 + 10 + 4 + 3 values, counts and sizes
through `slog(x) = log2(|x| + 1)`. What each group holds: see docs/architecture.md, "Features and
cost model".
"""

from __future__ import annotations

import math

from msdb.ir import expr as E
from msdb.ir.stmt import ForKind
from msdb.tuner.features.store_walk import (
    FLOAT_OPS, NO_REUSE, Access, Allocation, FunctionStores, Loop, StoreSite, storage_bytes,
)

__all__ = ["GROUP1", "GROUP2_PER_BUFFER", "GROUP4", "GROUP5", "feature_length", "feature_names", "function_rows"]

GROUP1 = 57
GROUP2_PER_BUFFER = 18
GROUP4 = 4
GROUP5 = 3

_ARITH_NAMES = ["float_mad", "float_add_sub", "float_mul", "float_div_mod", "float_cmp", "float_math_func",
                "float_other_func", "int_mad", "int_add_sub", "int_mul", "int_div_mod", "int_cmp", "int_math_func",
                "int_other_func", "bool_op", "select_op"]
_POS_NAMES = ["none", "inner_spatial", "middle_spatial", "outer_spatial", "inner_reduce", "middle_reduce",
              "outer_reduce", "mixed"]
_BUFFER_NAMES = ["acc_read", "acc_write", "acc_read_write", "bytes", "unique_bytes", "lines", "unique_lines",
                 "reuse_loop_multiple_read", "reuse_serial_multiple_read_write", "reuse_none", "reuse_dis_iter",
                 "reuse_dis_bytes", "reuse_ct", "bytes_d_reuse_ct", "unique_bytes_d_reuse_ct", "lines_d_reuse_ct",
                 "unique_lines_d_reuse_ct", "stride"]
_THREAD_TAGS = ("blockIdx.x", "blockIdx.y", "blockIdx.z", "threadIdx.x", "threadIdx.y", "threadIdx.z")


def feature_length(buffers_per_store: int = 5, curve_samples: int = 10) -> int:
    """Features per row: 164 with TVM's defaults."""
    return GROUP1 + GROUP2_PER_BUFFER * buffers_per_store + curve_samples + GROUP4 + GROUP5


def feature_names(buffers_per_store: int = 5, curve_samples: int = 10) -> list[str]:
    """The name of each column of a row, in order (for reading rows and in tests)."""
    names = list(_ARITH_NAMES)
    for kind in ("vec", "unroll", "parallel"):
        names += [f"{kind}_num", f"{kind}_prod", f"{kind}_len"] + [f"{kind}_pos_{p}" for p in _POS_NAMES]
    names += ["is_gpu", "blockIdx_x_len", "blockIdx_y_len", "blockIdx_z_len", "threadIdx_x_len", "threadIdx_y_len",
              "threadIdx_z_len", "vthread_len"]
    for b in range(buffers_per_store):
        names += [f"B{b}.{name}" for name in _BUFFER_NAMES]
    names += [f"arith_intensity_curve_{i}" for i in range(curve_samples)]
    names += ["alloc_size", "alloc_prod", "alloc_outer_prod", "alloc_inner_prod"]
    names += ["outer_prod", "num_loops", "auto_unroll_max_step"]
    return names


def slog(x: float) -> float:
    """log2(|x| + 1): TVM's squashing of counts and sizes."""
    return math.log2(abs(x) + 1.0)


def function_rows(stores: FunctionStores, params: tuple[E.Buffer, ...], *, is_gpu: bool, cache_line_bytes: int,
                  buffers_per_store: int, curve_samples: int) -> list[list[float]]:
    """One row per written buffer, in the order of each buffer's first computed store; the
    last store of a buffer gives its row (TVM overwrites the row at every store)."""
    last: dict[E.Buffer, StoreSite] = {}
    for site in stores.sites:
        last[site.buffer] = site  # dict order: first store; value: last store
    allocations = dict(stores.allocations)
    for buf in params:
        allocations.setdefault(buf, Allocation(tuple(E.const_int(d) or 1 for d in buf.shape), 1))
    rows = []
    for buffer, site in last.items():
        row = _group1(site, is_gpu)
        row += _group2(site, allocations, cache_line_bytes, buffers_per_store)
        row += _group3(site, curve_samples)
        row += _group4(buffer, site, allocations.get(buffer))
        row += _group5(site)
        rows.append(row)
    return rows


# ---------------------------------------------------------------------------------------------
# Group 1: arithmetic and loop kinds
# ---------------------------------------------------------------------------------------------


def _for_kind(loops: list[Loop]) -> list[float]:
    if not loops:
        return [0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    prod = 1
    for loop in loops:
        prod *= loop.extent
    return [slog(len(loops)), slog(prod), slog(loops[-1].extent), 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0]


def _group1(site: StoreSite, is_gpu: bool) -> list[float]:
    row = [slog(c) for c in site.ops]
    loops = site.loops
    for kind in (ForKind.VECTORIZED, ForKind.UNROLLED, ForKind.PARALLEL):
        row += _for_kind([loop for loop in loops if loop.kind == kind])
    row.append(1.0 if is_gpu else 0.0)
    for tag in _THREAD_TAGS:
        row.append(slog(_first_extent(loops, tag) if is_gpu else 1))
    row.append(slog(_first_extent(loops, "vthread") if is_gpu else 1))
    return row


def _first_extent(loops: tuple[Loop, ...], tag: str) -> int:
    for loop in loops:
        if loop.kind == ForKind.THREAD_BINDING and loop.thread_tag.startswith(tag):
            return loop.extent
    return 1


# ---------------------------------------------------------------------------------------------
# Group 2: buffer accesses
# ---------------------------------------------------------------------------------------------


def _group2(site: StoreSite, allocations: dict[E.Buffer, Allocation], cache_line_bytes: int,
            buffers_per_store: int) -> list[float]:
    subs = [_buffer_feature(site, access, allocations, cache_line_bytes) for access in site.accesses]
    subs.sort(key=lambda f: (-f[0], -f[1], f[2]))
    row: list[float] = []
    for _, _, _, values in subs[:buffers_per_store]:
        row += values
    row += [0.0] * (GROUP2_PER_BUFFER * (buffers_per_store - min(len(subs), buffers_per_store)))
    return row


def _buffer_feature(site: StoreSite, access: Access, allocations: dict[E.Buffer, Allocation],
                    cache_line_bytes: int) -> tuple[float, float, str, list[float]]:
    """(lines, bytes, name, the 18 values): TVM's SetStride, SetFeature and export."""
    buffer = access.buffer
    loops = site.loops
    n = len(loops)
    dtype_bytes = storage_bytes(buffer.dtype)
    allocation = allocations.get(buffer)
    shape = allocation.shape if allocation is not None else tuple(E.const_int(d) or 1 for d in buffer.shape)
    ndim = len(shape)
    strides = [1] * ndim
    for d in range(ndim - 2, -1, -1):
        strides[d] = strides[d + 1] * shape[d + 1]
    continuous = 1
    for d in range(ndim - 1, -1, -1):
        if access.shape0[d] == shape[d]:
            continuous = shape[d] * dtype_bytes
            break
    # The innermost loop whose variable moves the access, and its smallest stride.
    min_stride = 0
    i = n - 1
    while i >= 0:
        min_stride = _var_stride(access, strides, i)
        if min_stride:
            break
        i -= 1
    innermost_stride = min_stride if i == n - 1 else 0
    prod_non_strided = 1
    for j in range(i + 1, n):
        prod_non_strided *= loops[j].extent
    nbytes = float(dtype_bytes * site.prod)
    if n == 0:
        unique_bytes = lines = unique_lines = 1.0
    else:
        unique_bytes = float(access.numel[0] * dtype_bytes)
        lines = max(1.0, site.prod / prod_non_strided * min(1.0, min_stride * dtype_bytes / cache_line_bytes))
        unique_lines = max(1.0, unique_bytes / min(cache_line_bytes, continuous))
    reuse_ct = access.reuse_ct
    proxy = reuse_ct if reuse_ct > 0 else 0.5
    values = [
        1.0 if access.kind == 0 else 0.0, 1.0 if access.kind == 1 else 0.0, 1.0 if access.kind == 2 else 0.0,
        slog(nbytes), slog(unique_bytes), slog(lines), slog(unique_lines),
        1.0 if access.reuse_type == 0 else 0.0, 1.0 if access.reuse_type == 1 else 0.0,
        1.0 if access.reuse_type == NO_REUSE else 0.0,
        slog(access.reuse_dis_iter), slog(access.reuse_dis_bytes), slog(reuse_ct),
        slog(nbytes / proxy), slog(unique_bytes / proxy), slog(lines / proxy), slog(unique_lines / proxy),
        slog(innermost_stride),
    ]
    return lines, nbytes, buffer.name, values


def _var_stride(access: Access, strides: list[int], position: int) -> int:
    """TVM's GetVarStride: over the index tuples, the smallest |coefficient| x buffer stride of
    the rightmost dimension the loop moves (0 if it moves none)."""
    best = 0
    for tup in access.indices:
        for d in range(len(tup) - 1, -1, -1):
            coef = tup[d].coef(position)
            if coef:
                stride = abs(coef) * strides[d]
                best = stride if not best else min(best, stride)
                break
    return best


# ---------------------------------------------------------------------------------------------
# Groups 3, 4, 5
# ---------------------------------------------------------------------------------------------


def _group3(site: StoreSite, samples: int) -> list[float]:
    loops = site.loops
    n = len(loops)
    flops = float(sum(site.ops[k] for k in FLOAT_OPS))
    if flops <= 0 or n == 0:
        return [0.0] * samples
    per_iteration = flops / site.prod
    compute: list[float] = []
    memory: list[float] = []
    for i in range(n - 1, -1, -1):
        per_iteration *= loops[i].extent
        compute.append(per_iteration)
        memory.append(float(site.touched_bytes[i]))
    total = compute[-1]
    curve = []
    p = 0
    for k in range(samples):
        target = (k + 1) / samples * total
        while p < n and compute[p] < target - 1e-4:
            p += 1
        p = min(p, n - 1)
        if p == 0:
            curve.append(slog(compute[0] / memory[0]) if memory[0] else 0.0)
        else:
            base = compute[p - 1] / memory[p - 1] if memory[p - 1] else 0.0
            here = compute[p] / memory[p] if memory[p] else 0.0
            slope = (here - base) / (compute[p] - compute[p - 1]) if compute[p] != compute[p - 1] else 0.0
            curve.append(slog(base + slope * (target - compute[p - 1])))
    return curve


def _group4(buffer: E.Buffer, site: StoreSite, allocation: Allocation | None) -> list[float]:
    if allocation is None:
        size = prod = 0
        outer = 1
    else:
        numel = 1
        for d in allocation.shape:
            numel *= d
        size = numel * storage_bytes(buffer.dtype)
        outer = allocation.outer_prod
        prod = numel * outer
    return [slog(size), slog(prod), slog(outer), slog(site.prod / outer)]


def _group5(site: StoreSite) -> list[float]:
    unroll = 0
    for loop in site.loops:
        if loop.auto_unroll:
            unroll = loop.auto_unroll
    return [slog(site.prod), slog(len(site.loops)), slog(unroll)]
