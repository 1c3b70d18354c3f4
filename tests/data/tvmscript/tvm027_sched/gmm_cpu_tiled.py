# from tvm.script import ir as I
# from tvm.script import tirx as T
# from tvm.tirx.layout import Axis

@I.ir_module
class Module:
    @T.prim_func(s_tir=True)
    def main(X: T.Buffer((1, 128, 128), "float32"), Y: T.Buffer((1, 128, 128), "float32"), Z: T.Buffer((1, 128, 128), "float32")):
        T.func_attr({"tirx.noalias": True})
        # with T.sblock("root"):
        Z_global = T.sblock_alloc_buffer((1, 128, 128))
        for b_i_0_fused in T.parallel(4, annotations={"pragma_auto_unroll_max_step": 64}):
            for j_0 in range(3):
                for i_1_init in range(32):
                    for j_1_init in T.vectorized(43):
                        with T.sblock("Z_init"):
                            v_b = T.axis.spatial(1, 0)
                            v_i = T.axis.spatial(128, b_i_0_fused * 32 + i_1_init)
                            v_j = T.axis.spatial(128, j_0 * 43 + j_1_init)
                            T.where(j_0 * 43 + j_1_init < 128)
                            T.reads()
                            T.writes(Z_global[v_b, v_i, v_j])
                            T.sblock_attr({"meta_schedule.tiling_structure": "SSRSRS"})
                            Z_global[v_b, v_i, v_j] = T.float32(0.0)
                for k_0, i_1 in T.grid(16, 32):
                    for k_1 in T.unroll(8):
                        for j_1 in T.vectorized(43):
                            with T.sblock("Z_update"):
                                v_b = T.axis.spatial(1, 0)
                                v_i = T.axis.spatial(128, b_i_0_fused * 32 + i_1)
                                v_j = T.axis.spatial(128, j_0 * 43 + j_1)
                                v_k = T.axis.reduce(128, k_0 * 8 + k_1)
                                T.where(j_0 * 43 + j_1 < 128)
                                T.reads(Z_global[v_b, v_i, v_j], X[v_b, v_i, v_k], Y[v_b, v_k, v_j])
                                T.writes(Z_global[v_b, v_i, v_j])
                                T.sblock_attr({"meta_schedule.tiling_structure": "SSRSRS"})
                                Z_global[v_b, v_i, v_j] = Z_global[v_b, v_i, v_j] + X[v_b, v_i, v_k] * Y[v_b, v_k, v_j]
                for ax0, ax1 in T.grid(32, 43):
                    with T.sblock("Z_global"):
                        v0 = T.axis.spatial(1, 0)
                        v1 = T.axis.spatial(128, b_i_0_fused * 32 + ax0)
                        v2 = T.axis.spatial(128, j_0 * 43 + ax1)
                        T.where(j_0 * 43 + ax1 < 128)
                        T.reads(Z_global[v0, v1, v2])
                        T.writes(Z[v0, v1, v2])
                        Z[v0, v1, v2] = Z_global[v0, v1, v2]
