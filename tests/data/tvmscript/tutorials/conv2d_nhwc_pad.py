# A 3x3 stride-1 conv2d in NHWC with a separate zero-padding block (the shape of TVM's
# te_workload C2D, smaller), written by hand.
from tvm.script import tir as T


@T.prim_func
def conv2d_nhwc(inputs: T.Buffer((1, 14, 14, 16), "float32"),
                weight: T.Buffer((3, 3, 16, 32), "float32"),
                conv: T.Buffer((1, 14, 14, 32), "float32")):
    T.func_attr({"global_symbol": "conv2d_nhwc", "tir.noalias": True})
    pad = T.alloc_buffer((1, 16, 16, 16), "float32")
    for n, h, w, c in T.grid(1, 16, 16, 16):
        with T.block("pad"):
            vn, vh, vw, vc = T.axis.remap("SSSS", [n, h, w, c])
            pad[vn, vh, vw, vc] = T.if_then_else(
                1 <= vh and vh < 15 and 1 <= vw and vw < 15,
                inputs[vn, vh - 1, vw - 1, vc],
                T.float32(0),
            )
    for n, h, w, co, rh, rw, rc in T.grid(1, 14, 14, 32, 3, 3, 16):
        with T.block("conv"):
            vn, vh, vw, vco, vrh, vrw, vrc = T.axis.remap("SSSSRRR", [n, h, w, co, rh, rw, rc])
            with T.init():
                conv[vn, vh, vw, vco] = T.float32(0)
            conv[vn, vh, vw, vco] = conv[vn, vh, vw, vco] + pad[vn, vh + vrh, vw + vrw, vrc] * weight[vrh, vrw, vrc, vco]
