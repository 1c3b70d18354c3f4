"""Hand-written GPU schedules of standard workloads (`msdb.ir.zoo`), examples of what the CUDA
code generator builds: thread bindings, shared and local caches, vector accesses, `__dp4a`.
The CUDA tests build them without a GPU; `bench/gpu_check.py` runs them on one and checks them
against numpy (docs/architecture.md, "CUDA").

    from msdb.tuner.codegen.cuda import build_cuda
    from msdb.tuner.codegen.cuda.examples import matmul
    built = build_cuda(matmul(1024), "cuda -arch=sm_90")
"""

from __future__ import annotations

from msdb.ir import zoo
from msdb.ir.function import IRModule
from msdb.schedule.anchor_replay import block_names
from msdb.schedule.schedule import Schedule

__all__ = ["matmul", "softmax", "conv2d", "dense_int8"]


def matmul(n: int = 1024, tile: int = 128, threads: int = 16, k_tile: int = 8, vector: int = 4) -> IRModule:
    """C = A @ B (n^3 fp32): a `tile`^2 block tile per blockIdx (x, y), `threads`^2 threads each
    computing a (tile/threads)^2 register tile (cache_write "local", written back with
    `vector`-wide stores), A and B tiles of `k_tile` columns/rows staged in shared memory per k
    step by all threads cooperatively with `vector`-wide loads, each k step's A column and B row
    of the thread read into registers (B's with vector loads), the inner loops unrolled. (The init
    stays in the k loop: decomposing it out costs 23 registers here, over the 128 that let two
    blocks share an SM.)"""
    sch = Schedule(zoo.build("matmul", n, n, n))
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    per = tile // threads
    by, ty, yi = sch.split(i, [None, threads, per])
    bx, tx, xi = sch.split(j, [None, threads, per])
    ko, ki = sch.split(k, [None, k_tile])
    sch.reorder(by, bx, ko, ty, tx, ki, yi, xi)
    sch.bind(by, "blockIdx.y")
    sch.bind(bx, "blockIdx.x")
    sch.bind(ty, "threadIdx.y")
    sch.bind(tx, "threadIdx.x")
    local = sch.cache_write(c, 0, "local")
    sch.reverse_compute_at(local, bx)
    a0, a1 = sch.get_loops(local)[-2:]
    t0, _ = sch.split(a0, [threads, None])
    t1, _, v1 = sch.split(a1, [threads, None, vector])
    sch.reorder(t0, t1)
    sch.bind(t0, "threadIdx.y")
    sch.bind(t1, "threadIdx.x")
    sch.vectorize(v1)
    for index in (0, 1):
        shared = sch.cache_read(c, index, "shared")
        sch.compute_at(shared, ko)
        fused = sch.fuse(*sch.get_loops(shared)[-2:])
        _, f_y, f_x, f_v = sch.split(fused, [None, threads, threads, vector])
        sch.bind(f_y, "threadIdx.y")
        sch.bind(f_x, "threadIdx.x")
        sch.vectorize(f_v)
    for index in (0, 1):
        registers = sch.cache_read(c, index, "local")
        sch.compute_at(registers, ki)
        if index == 1:
            _, lanes = sch.split(sch.get_loops(registers)[-1], [None, vector])
            sch.vectorize(lanes)
    sch.unroll(ki)
    sch.unroll(yi)
    sch.unroll(xi)
    return sch.mod


def softmax(m: int = 256, n: int = 1024, threads: int = 128) -> IRModule:
    """Row softmax: one block per row; exp computed by `threads` threads over the columns into
    shared memory; max and sum reduced serially per thread in registers ("local"); the
    normalization spread over the threads again."""
    sch = Schedule(zoo.build("SFM", m, n))
    norm = sch.get_block("T_softmax_norm")
    row, col = sch.get_loops(norm)
    _, t = sch.split(col, [None, threads])
    sch.bind(row, "blockIdx.x")
    sch.bind(t, "threadIdx.x")
    for name in ("T_softmax_expsum", "T_softmax_exp", "T_softmax_maxelem"):
        sch.compute_at(sch.get_block(name), row)
    exp = sch.get_block("T_softmax_exp")
    _, te = sch.split(sch.get_loops(exp)[-1], [None, threads])
    sch.bind(te, "threadIdx.x")
    sch.set_scope(exp, 0, "shared")
    sch.set_scope(sch.get_block("T_softmax_maxelem"), 0, "local")
    sch.set_scope(sch.get_block("T_softmax_expsum"), 0, "local")
    return sch.mod


def conv2d(n: int = 1, h: int = 56, w: int = 56, ci: int = 64, co: int = 64, kernel: int = 3, stride: int = 1,
           pad: int = 1) -> IRModule:
    """ResNet-style NHWC conv2d: padding inlined (if_then_else), output rows over blockIdx.x,
    output channels in groups of 16 over blockIdx.y, columns over threadIdx.x and each group's
    channels over threadIdx.y with 4 per thread in a register tile (cache_write "local"),
    reductions serial."""
    sch = Schedule(zoo.build("C2D", n, h, w, ci, co, kernel, stride, pad))
    sch.compute_inline(sch.get_block("PadInput"))
    conv = sch.get_block("conv2d_nhwc")
    nn, hh, ww, cc, rh, rw, rc = sch.get_loops(conv)
    by, ty, cv = sch.split(cc, [None, 4, 4])
    sch.reorder(nn, hh, by, ww, ty, rh, rw, rc, cv)
    sch.bind(hh, "blockIdx.x")
    sch.bind(by, "blockIdx.y")
    sch.bind(ww, "threadIdx.x")
    sch.bind(ty, "threadIdx.y")
    local = sch.cache_write(conv, 0, "local")
    sch.reverse_compute_at(local, ty)
    return sch.mod


def dense_int8(n: int = 256, m: int = 256, k: int = 256) -> IRModule:
    """int8 x int8 -> int32 dense (B is [m, k]): 16x16 threads per block, one output each, the
    k loop in steps of 4 whose inner loop is one `__dp4a`."""
    sch = Schedule(zoo.build("dense", n, m, k, "int8", "int32"))
    (name,) = [b for b in block_names(sch) if b != "root"]
    d = sch.get_block(name)
    i, j, kk = sch.get_loops(d)
    bi, ti = sch.split(i, [None, 16])
    bj, tj = sch.split(j, [None, 16])
    ko, k4 = sch.split(kk, [None, 4])
    sch.reorder(bi, bj, ti, tj, ko, k4)
    sch.bind(bi, "blockIdx.y")
    sch.bind(bj, "blockIdx.x")
    sch.bind(ti, "threadIdx.y")
    sch.bind(tj, "threadIdx.x")
    local = sch.cache_write(d, 0, "local")
    sch.reverse_compute_at(local, tj)
    sch.decompose_reduction(d, ko)
    sch.unroll(k4)
    return sch.mod
