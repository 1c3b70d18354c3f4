# A vector add over 1000 elements split by 128 (8 x 128 = 1024 iterations), guarded with
# T.where, as TVM prints a split that does not divide the extent.
from tvm.script import tir as T


@T.prim_func
def main(A: T.Buffer((1000,), "float32"), B: T.Buffer((1000,), "float32"), C: T.Buffer((1000,), "float32")):
    T.func_attr({"global_symbol": "main", "tir.noalias": True})
    for i_0 in T.parallel(8):
        for i_1 in T.vectorized(128):
            with T.block("C"):
                vi = T.axis.spatial(1000, i_0 * 128 + i_1)
                T.where(i_0 * 128 + i_1 < 1000)
                T.reads(A[vi], B[vi])
                T.writes(C[vi])
                C[vi] = A[vi] + B[vi]
