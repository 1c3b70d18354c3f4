"""GPU schedules made to probe the code generator's checks (VerifyGPUCode's thread, vthread,
vector-byte and shared-memory limits); the schedules of standard workloads are
`msdb.tuner.codegen.cuda.examples`."""

from __future__ import annotations

from msdb.ir.function import IRModule
from msdb.schedule.schedule import Schedule


def elementwise(n: int, threads: int, vector: int = 1, vthread: int = 1, vthread_axis: str = "vthread.x") -> IRModule:
    """relu over n x n elements with the flattened loop split into [blocks, vthread, threads,
    vector]: for the VerifyGPUCode refusals (threads, vthreads, vector bytes)."""
    from msdb.ir import te

    a = te.placeholder((n, n), "float32", "A")
    b = te.compute((n, n), lambda i, j: te.max(a[i, j], te.const(0.0, "float32")), name="B")
    sch = Schedule(te.create_prim_func([a, b]))
    i, j = sch.get_loops(sch.get_block("B"))
    fused = sch.fuse(i, j)
    blocks, vt, t, v = sch.split(fused, [None, vthread, threads, vector])
    sch.bind(blocks, "blockIdx.x")
    sch.bind(vt, vthread_axis)
    sch.bind(t, "threadIdx.x")
    if vector > 1:
        sch.vectorize(v)
    return sch.mod


def shared_tile(n: int = 128) -> IRModule:
    """A copy through an n x n fp32 shared tile per block (n=128: 64 KiB, over the 48 KiB limit)."""
    from msdb.ir import te

    a = te.placeholder((n, n), "float32", "A")
    b = te.compute((n, n), lambda i, j: a[i, j] * te.const(2.0, "float32"), name="B")
    sch = Schedule(te.create_prim_func([a, b]))
    blk = sch.get_block("B")
    i, j = sch.get_loops(blk)
    bi, ii = sch.split(i, [1, None])
    sch.bind(bi, "blockIdx.x")
    t, _ = sch.split(ii, [32, None])
    sch.bind(t, "threadIdx.x")
    shared = sch.cache_read(blk, 0, "shared")
    sch.compute_at(shared, bi)
    f = sch.fuse(*sch.get_loops(shared)[-2:])
    _, ft = sch.split(f, [None, 32])
    sch.bind(ft, "threadIdx.x")
    return sch.mod
