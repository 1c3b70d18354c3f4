# An int8 conv2d (NHWC, 3x3, no padding) accumulating into int32 through T.Cast, as the
# quantized-model tutorials write it.
from tvm.script import tir as T


@T.prim_func
def main(data: T.Buffer((1, 16, 16, 32), "int8"),
         kernel: T.Buffer((3, 3, 32, 64), "int8"),
         out: T.Buffer((1, 14, 14, 64), "int32")):
    T.func_attr({"global_symbol": "main", "tir.noalias": True})
    for n, h, w, co, rh, rw, rc in T.grid(1, 14, 14, 64, 3, 3, 32):
        with T.block("conv2d_int8"):
            vn, vh, vw, vco, vrh, vrw, vrc = T.axis.remap("SSSSRRR", [n, h, w, co, rh, rw, rc])
            T.reads(data[vn, vh + vrh, vw + vrw, vrc], kernel[vrh, vrw, vrc, vco])
            T.writes(out[vn, vh, vw, vco])
            with T.init():
                out[vn, vh, vw, vco] = 0
            out[vn, vh, vw, vco] = out[vn, vh, vw, vco] + T.Cast("int32", data[vn, vh + vrh, vw + vrw, vrc]) * T.Cast("int32", kernel[vrh, vrw, vrc, vco])
