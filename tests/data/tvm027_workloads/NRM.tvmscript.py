# from tvm.script import ir as I
# from tvm.script import tirx as T
# from tvm.tirx.layout import Axis

@I.ir_module
class Module:
    @T.prim_func(s_tir=True)
    def main(A: T.Buffer((1, 256, 256), "float32"), D: T.Buffer((1,), "float32")):
        T.func_attr({"tirx.noalias": True})
        # with T.sblock("root"):
        C = T.sblock_alloc_buffer((1,))
        for b, i, j in T.grid(1, 256, 256):
            with T.sblock("C"):
                v_b, v_i, v_j = T.axis.remap("SRR", [b, i, j])
                T.reads(A[v_b, v_i, v_j])
                T.writes(C[v_b])
                with T.init():
                    C[v_b] = T.float32(0.0)
                C[v_b] = C[v_b] + A[v_b, v_i, v_j] * A[v_b, v_i, v_j]
        for b in range(1):
            with T.sblock("D"):
                v_b = T.axis.spatial(1, b)
                T.reads(C[v_b])
                T.writes(D[v_b])
                D[v_b] = T.sqrt(C[v_b])