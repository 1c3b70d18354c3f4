# from tvm.script import ir as I
# from tvm.script import tirx as T
# from tvm.tirx.layout import Axis

@I.ir_module
class Module:
    @T.prim_func(s_tir=True)
    def main(X: T.Buffer((1, 128, 128), "float32"), Y: T.Buffer((1, 128, 128), "float32"), Z: T.Buffer((1, 128, 128), "float32")):
        T.func_attr({"tirx.noalias": True})
        # with T.sblock("root"):
        X_shared = T.sblock_alloc_buffer((1, 128, 128), scope="shared")
        for b in range(1):
            for i_j_fused_0 in T.thread_binding(128, thread="blockIdx.x"):
                for i_j_fused_1 in T.thread_binding(128, thread="threadIdx.x"):
                    for k in range(128):
                        with T.sblock("X_shared"):
                            v0 = T.axis.spatial(1, 0)
                            v1, v2 = T.axis.remap("SS", [i_j_fused_0, k])
                            T.reads(X[v0, v1, v2])
                            T.writes(X_shared[v0, v1, v2])
                            X_shared[v0, v1, v2] = X[v0, v1, v2]
                        with T.sblock("Z"):
                            v_b = T.axis.spatial(1, b)
                            v_i = T.axis.spatial(128, (i_j_fused_0 * 128 + i_j_fused_1) // 128)
                            v_j = T.axis.spatial(128, (i_j_fused_0 * 128 + i_j_fused_1) % 128)
                            v_k = T.axis.reduce(128, k)
                            T.reads(X_shared[v_b, v_i, v_k], Y[v_b, v_k, v_j])
                            T.writes(Z[v_b, v_i, v_j])
                            with T.init():
                                Z[v_b, v_i, v_j] = T.float32(0.0)
                            Z[v_b, v_i, v_j] = Z[v_b, v_i, v_j] + X_shared[v_b, v_i, v_k] * Y[v_b, v_k, v_j]
