# from tvm.script import ir as I
# from tvm.script import tirx as T
# from tvm.tirx.layout import Axis

@I.ir_module
class Module:
    @T.prim_func(s_tir=True)
    def main(query: T.Buffer((1, 128, 12, 64), "float32"), value: T.Buffer((1, 128, 12, 64), "float32"), C: T.Buffer((1, 12, 128, 128), "float32")):
        T.func_attr({"tirx.noalias": True})
        # with T.sblock("root"):
        query_T = T.sblock_alloc_buffer((1, 12, 128, 64))
        value_T = T.sblock_alloc_buffer((1, 12, 64, 128))
        for b, h, l, d in T.grid(1, 12, 128, 64):
            with T.sblock("query_T"):
                v_b, v_h, v_l, v_d = T.axis.remap("SSSS", [b, h, l, d])
                T.reads(query[v_b, v_l, v_h, v_d])
                T.writes(query_T[v_b, v_h, v_l, v_d])
                query_T[v_b, v_h, v_l, v_d] = query[v_b, v_l, v_h, v_d]
        for b, h, d, l in T.grid(1, 12, 64, 128):
            with T.sblock("value_T"):
                v_b, v_h, v_d, v_l = T.axis.remap("SSSS", [b, h, d, l])
                T.reads(value[v_b, v_l, v_h, v_d])
                T.writes(value_T[v_b, v_h, v_d, v_l])
                value_T[v_b, v_h, v_d, v_l] = value[v_b, v_l, v_h, v_d]
        for b, h, i, j, k in T.grid(1, 12, 128, 128, 64):
            with T.sblock("C"):
                v_b, v_h, v_i, v_j, v_k = T.axis.remap("SSSSR", [b, h, i, j, k])
                T.reads(query_T[v_b, v_h, v_i, v_k], value_T[v_b, v_h, v_k, v_j])
                T.writes(C[v_b, v_h, v_i, v_j])
                with T.init():
                    C[v_b, v_h, v_i, v_j] = T.float32(0.0)
                C[v_b, v_h, v_i, v_j] = C[v_b, v_h, v_i, v_j] + query_T[v_b, v_h, v_i, v_k] * value_T[v_b, v_h, v_k, v_j]