# from tvm.script import ir as I
# from tvm.script import tirx as T
# from tvm.tirx.layout import Axis

@I.ir_module
class Module:
    @T.prim_func(s_tir=True)
    def main(X: T.Buffer((1, 128, 128), "float32"), Y: T.Buffer((1, 128, 128), "float32"), Z: T.Buffer((1, 128, 128), "float32")):
        T.func_attr({"tirx.noalias": True})
        # with T.sblock("root"):
        Z_rf = T.sblock_alloc_buffer((4, 1, 128, 128))
        for b, i, j, k_0, k_1 in T.grid(1, 128, 128, 32, 4):
            with T.sblock("Z_rf"):
                vk_1, v_b, v_i, v_j, vk_0 = T.axis.remap("SSSSR", [k_1, b, i, j, k_0])
                T.reads(X[v_b, v_i, vk_0 * 4 + vk_1], Y[v_b, vk_0 * 4 + vk_1, v_j])
                T.writes(Z_rf[vk_1, v_b, v_i, v_j])
                with T.init():
                    Z_rf[vk_1, v_b, v_i, v_j] = T.float32(0.0)
                Z_rf[vk_1, v_b, v_i, v_j] = Z_rf[vk_1, v_b, v_i, v_j] + X[v_b, v_i, vk_0 * 4 + vk_1] * Y[v_b, vk_0 * 4 + vk_1, v_j]
        for b, i, j, k_1 in T.grid(1, 128, 128, 4):
            with T.sblock("Z"):
                vk_1, v_b, v_i, v_j = T.axis.remap("RSSS", [k_1, b, i, j])
                T.reads(Z_rf[vk_1, v_b, v_i, v_j])
                T.writes(Z[v_b, v_i, v_j])
                with T.init():
                    Z[v_b, v_i, v_j] = T.float32(0.0)
                Z[v_b, v_i, v_j] = Z[v_b, v_i, v_j] + Z_rf[vk_1, v_b, v_i, v_j]
