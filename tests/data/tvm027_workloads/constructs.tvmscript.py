# from tvm.script import ir as I
# from tvm.script import tirx as T
# from tvm.tirx.layout import Axis

@I.ir_module
class Module:
    @T.prim_func(s_tir=True)
    def main(A: T.Buffer((16, 16), "int8"), B: T.Buffer((16,), "float32"), C: T.Buffer((16, 16), "int32")):
        T.func_attr({"layout_free_buffers": [1], "tirx.noalias": True})
        # with T.sblock("root"):
        S = T.sblock_alloc_buffer((16,), scope="local")
        for i in T.thread_binding(16, thread="threadIdx.x"):
            for j in T.serial(16, annotations={"pragma_auto_unroll_max_step": 16}):
                with T.sblock("S"):
                    vi, vj = T.axis.remap("SR", [i, j])
                    T.where(i < 15 or j >= 1)
                    T.reads(A[vi, vj])
                    T.writes(S[vi])
                    T.sblock_attr({"k": 3, "meta_schedule.tiling_structure": "SSRSRS"})
                    with T.init():
                        S[vi] = T.float32(0.0)
                    S[vi] = S[vi] + T.Select(not vj != 3, T.Cast("float32", A[vi, vj]) * T.float32(0.5), T.min(T.float32(1.0), T.max(T.float32(-1.0), T.exp(T.Cast("float32", A[vi, vj] % T.int8(3))))))
        for i in T.vectorized(16):
            with T.sblock("B"):
                vi = T.axis.spatial(16, i)
                T.reads(S[vi])
                T.writes(B[vi])
                B[vi] = T.if_then_else(vi > 2 and vi <= 14, T.sqrt(T.fabs(S[vi])), T.float32(0.0))
        for i, j in T.grid(16, 16):
            with T.sblock("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                T.reads(A[vi, vj])
                T.writes(C[vi, vj])
                C[vi, vj] = T.Cast("int32", A[vi, vj]) * (vi // 4 - vj % 4 + T.Div(vi, 3) - T.truncmod(vj, 5))