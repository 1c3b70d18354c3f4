# Batch matmul 1x128x128x128 (TVM te_workload GMM's shape), hand-written with reads/writes.
from tvm.script import tir as T


@T.prim_func
def main(X: T.Buffer((1, 128, 128), "float32"), Y: T.Buffer((1, 128, 128), "float32"), Z: T.Buffer((1, 128, 128), "float32")):
    T.func_attr({"global_symbol": "main", "tir.noalias": True})
    for b, i, j, k in T.grid(1, 128, 128, 128):
        with T.block("Z"):
            vb, vi, vj, vk = T.axis.remap("SSSR", [b, i, j, k])
            T.reads(X[vb, vi, vk], Y[vb, vk, vj])
            T.writes(Z[vb, vi, vj])
            with T.init():
                Z[vb, vi, vj] = T.float32(0)
            Z[vb, vi, vj] = Z[vb, vi, vj] + X[vb, vi, vk] * Y[vb, vk, vj]
