# from tvm.script import ir as I
# from tvm.script import tirx as T
# from tvm.tirx.layout import Axis

@I.ir_module
class Module:
    @T.prim_func(s_tir=True)
    def main(inputs: T.Buffer((1, 224, 224, 3), "float32"), weight: T.Buffer((7, 7, 3, 64), "float32"), conv2d_nhwc: T.Buffer((1, 112, 112, 64), "float32")):
        T.func_attr({"tirx.noalias": True})
        # with T.sblock("root"):
        for n, rh, w_co_fused, h, rw, rc in T.grid(1, 7, 7168, 112, 7, 3):
            with T.sblock("conv2d_nhwc"):
                v_n, v_h = T.axis.remap("SS", [n, h])
                v_w = T.axis.spatial(112, w_co_fused // 64)
                v_co = T.axis.spatial(64, w_co_fused % 64)
                v_rh, v_rw, v_rc = T.axis.remap("RRR", [rh, rw, rc])
                T.reads(inputs[v_n, v_h * 2 + v_rh - 3, v_w * 2 + v_rw - 3, v_co // 64 * 3 + v_rc], weight[v_rh, v_rw, v_rc, v_co])
                T.writes(conv2d_nhwc[v_n, v_h, v_w, v_co])
                with T.init():
                    conv2d_nhwc[v_n, v_h, v_w, v_co] = T.float32(0.0)
                conv2d_nhwc[v_n, v_h, v_w, v_co] = conv2d_nhwc[v_n, v_h, v_w, v_co] + T.if_then_else(3 <= v_h * 2 + v_rh and v_h * 2 + v_rh < 227 and 3 <= v_w * 2 + v_rw and v_w * 2 + v_rw < 227, inputs[v_n, v_h * 2 + v_rh - 3, v_w * 2 + v_rw - 3, v_co // 64 * 3 + v_rc], T.float32(0.0)) * weight[v_rh, v_rw, v_rc, v_co]
