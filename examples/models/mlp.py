"""The MLC course's two-layer MLP (784-128-10, fashion-MNIST) as a Relax-style TVMScript model.

What TVM users write: an `@I.ir_module` with the TensorIR of each layer and a Relax `main` that
calls them with `R.call_tir` inside `R.dataflow()`. msdb reads it without TVM
(`msdb.model.load("examples/models/mlp.py")`, docs/architecture.md, "Models"): the parameters of
`main` found in `mlp.npz` beside this file are the weights, the others (`x`) the inputs.
Make the weights with `python examples/models/make_mlp_weights.py`, then tune the model's three
tasks: `msdb tune msdb.sqlite examples/models/mlp.py --trials 64`.

The three PrimFuncs are the zoo's `linear0`, `relu0` and `linear1` (index 0), so records tuned
with `msdb tune DB --zoo linear0` apply to this model and back.
"""

from tvm.script import ir as I
from tvm.script import relax as R
from tvm.script import tirx as T


@I.ir_module
class MLP:
    @T.prim_func(s_tir=True)
    def linear0(X: T.Buffer((1, 784), "float32"), W: T.Buffer((128, 784), "float32"),
                B: T.Buffer((128,), "float32"), Z: T.Buffer((1, 128), "float32")):
        T.func_attr({"tir.noalias": True})
        Y = T.alloc_buffer((1, 128))
        for i, j, k in T.grid(1, 128, 784):
            with T.sblock("Y"):
                v_i, v_j, v_k = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    Y[v_i, v_j] = T.float32(0.0)
                Y[v_i, v_j] = Y[v_i, v_j] + X[v_i, v_k] * W[v_j, v_k]
        for i, j in T.grid(1, 128):
            with T.sblock("Z"):
                v_i, v_j = T.axis.remap("SS", [i, j])
                Z[v_i, v_j] = Y[v_i, v_j] + B[v_j]

    @T.prim_func(s_tir=True)
    def relu0(X: T.Buffer((1, 128), "float32"), Y: T.Buffer((1, 128), "float32")):
        T.func_attr({"tir.noalias": True})
        for i, j in T.grid(1, 128):
            with T.sblock("Y"):
                v_i, v_j = T.axis.remap("SS", [i, j])
                Y[v_i, v_j] = T.max(X[v_i, v_j], T.float32(0.0))

    @T.prim_func(s_tir=True)
    def linear1(X: T.Buffer((1, 128), "float32"), W: T.Buffer((10, 128), "float32"),
                B: T.Buffer((10,), "float32"), Z: T.Buffer((1, 10), "float32")):
        T.func_attr({"tir.noalias": True})
        Y = T.alloc_buffer((1, 10))
        for i, j, k in T.grid(1, 10, 128):
            with T.sblock("Y"):
                v_i, v_j, v_k = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    Y[v_i, v_j] = T.float32(0.0)
                Y[v_i, v_j] = Y[v_i, v_j] + X[v_i, v_k] * W[v_j, v_k]
        for i, j in T.grid(1, 10):
            with T.sblock("Z"):
                v_i, v_j = T.axis.remap("SS", [i, j])
                Z[v_i, v_j] = Y[v_i, v_j] + B[v_j]

    @R.function
    def main(x: R.Tensor((1, 784), "float32"), w0: R.Tensor((128, 784), "float32"), b0: R.Tensor((128,), "float32"),
             w1: R.Tensor((10, 128), "float32"), b1: R.Tensor((10,), "float32")) -> R.Tensor((1, 10), "float32"):
        cls = MLP
        with R.dataflow():
            lv0 = R.call_tir(cls.linear0, (x, w0, b0), R.Tensor((1, 128), dtype="float32"))
            lv1 = R.call_tir(cls.relu0, (lv0,), R.Tensor((1, 128), dtype="float32"))
            out = R.call_tir(cls.linear1, (lv1, w1, b1), R.Tensor((1, 10), dtype="float32"))
            R.output(out)
        return out
