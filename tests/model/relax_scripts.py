"""Relax-style model scripts shared by the model tests and their tvm-marked twin (TVM 0.27 parses
every one of them too): the example MLP, the MLC course's older spelling of the same model, and
a model whose functions merge differently under structural and anchor-block equality."""

from __future__ import annotations

import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
MLP = ROOT / "examples" / "models" / "mlp.py"

_LINEAR0 = '''
    @T.prim_func(private=True, s_tir=True)
    def linear0(X: T.Buffer((1, 784), "float32"), W: T.Buffer((128, 784), "float32"),
                B: T.Buffer((128,), "float32"), Z: T.Buffer((1, 128), "float32")):
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
'''

_DENSE = '''
    @T.prim_func(private=True, s_tir=True)
    def dense(X: T.Buffer((1, 784), "float32"), W: T.Buffer((128, 784), "float32"),
              Y: T.Buffer((1, 128), "float32")):
        for i, j, k in T.grid(1, 128, 784):
            with T.sblock("Y"):
                v_i, v_j, v_k = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    Y[v_i, v_j] = T.float32(0.0)
                Y[v_i, v_j] = Y[v_i, v_j] + X[v_i, v_k] * W[v_j, v_k]
'''


def _relu(name: str, private: bool = True) -> str:
    deco = "@T.prim_func(private=True, s_tir=True)" if private else "@T.prim_func(s_tir=True)"
    return f'''
    {deco}
    def {name}(X: T.Buffer((1, 128), "float32"), Y: T.Buffer((1, 128), "float32")):
        for i, j in T.grid(1, 128):
            with T.sblock("Y"):
                v_i, v_j = T.axis.remap("SS", [i, j])
                Y[v_i, v_j] = T.max(X[v_i, v_j], T.float32(0.0))
'''


_HEADER = '''from tvm.script import ir as I
from tvm.script import relax as R
from tvm.script import tirx as T


@I.ir_module
class {cls}:'''


def mixed_script(first: str = "linear0") -> str:
    """linear0 and dense share their anchor block (the 1x784x128 matmul) and differ in blocks
    (3 and 2, root included); relu0 is called twice and relu0_copy, the same function under
    another name, once. `first` says which of linear0 / dense is called first."""
    second = "dense" if first == "linear0" else "linear0"
    calls = {
        "linear0": 'R.call_tir(cls.linear0, (x, w0, b0), R.Tensor((1, 128), dtype="float32"))',
        "dense": 'R.call_tir(cls.dense, (x, w0), R.Tensor((1, 128), dtype="float32"))',
    }
    return (_HEADER.format(cls="Mixed") + _LINEAR0 + _DENSE + _relu("relu0") + _relu("relu0_copy") + f'''
    @R.function
    def main(x: R.Tensor((1, 784), "float32"), w0: R.Tensor((128, 784), "float32"),
             b0: R.Tensor((128,), "float32")) -> R.Tensor((1, 128), "float32"):
        cls = Mixed
        with R.dataflow():
            lv0 = {calls[first]}
            lv1 = R.call_tir(cls.relu0, (lv0,), R.Tensor((1, 128), dtype="float32"))
            lv2 = {calls[second]}
            lv3 = R.call_tir(cls.relu0_copy, (lv2,), R.Tensor((1, 128), dtype="float32"))
            lv4 = R.call_tir(cls.relu0, (lv3,), R.Tensor((1, 128), dtype="float32"))
            R.output(lv4)
        return lv4
''')


def named_twins_script() -> str:
    """Two public functions with the same body under two names (each gets its own
    global_symbol from TVM's parser)."""
    return (_HEADER.format(cls="Twins") + _relu("relu_a", private=False) + _relu("relu_b", private=False) + '''
    @R.function
    def main(x: R.Tensor((1, 128), "float32")) -> R.Tensor((1, 128), "float32"):
        cls = Twins
        with R.dataflow():
            lv0 = R.call_tir(cls.relu_a, (x,), R.Tensor((1, 128), dtype="float32"))
            lv1 = R.call_tir(cls.relu_b, (lv0,), R.Tensor((1, 128), dtype="float32"))
            R.output(lv1)
        return lv1
''')


#: The MLC course's 2022 spelling of examples/models/mlp.py: `@tvm.script.ir_module`, `T.block`,
#: explicit func attrs, bare function names and `R.call_tir(f, args, shape, dtype=...)`.
MLC_OLD_STYLE = '''import tvm
from tvm.script import relax as R
from tvm.script import tir as T


@tvm.script.ir_module
class MyModule:
    @T.prim_func
    def relu0(X: T.Buffer[(1, 128), "float32"], Y: T.Buffer[(1, 128), "float32"]):
        T.func_attr({"global_symbol": "relu0", "tir.noalias": True})
        for i, j in T.grid(1, 128):
            with T.block("Y"):
                vi, vj = T.axis.remap("SS", [i, j])
                Y[vi, vj] = T.max(X[vi, vj], T.float32(0))

    @T.prim_func
    def linear0(X: T.Buffer[(1, 784), "float32"], W: T.Buffer[(128, 784), "float32"],
                B: T.Buffer[(128,), "float32"], Z: T.Buffer[(1, 128), "float32"]):
        T.func_attr({"global_symbol": "linear0", "tir.noalias": True})
        Y = T.alloc_buffer((1, 128), "float32")
        for i, j, k in T.grid(1, 128, 784):
            with T.block("Y"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    Y[vi, vj] = T.float32(0)
                Y[vi, vj] = Y[vi, vj] + X[vi, vk] * W[vj, vk]
        for i, j in T.grid(1, 128):
            with T.block("Z"):
                vi, vj = T.axis.remap("SS", [i, j])
                Z[vi, vj] = Y[vi, vj] + B[vj]

    @T.prim_func
    def linear1(X: T.Buffer[(1, 128), "float32"], W: T.Buffer[(10, 128), "float32"],
                B: T.Buffer[(10,), "float32"], Z: T.Buffer[(1, 10), "float32"]):
        T.func_attr({"global_symbol": "linear1", "tir.noalias": True})
        Y = T.alloc_buffer((1, 10), "float32")
        for i, j, k in T.grid(1, 10, 128):
            with T.block("Y"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    Y[vi, vj] = T.float32(0)
                Y[vi, vj] = Y[vi, vj] + X[vi, vk] * W[vj, vk]
        for i, j in T.grid(1, 10):
            with T.block("Z"):
                vi, vj = T.axis.remap("SS", [i, j])
                Z[vi, vj] = Y[vi, vj] + B[vj]

    @R.function
    def main(x: R.Tensor((1, 784), "float32"),
             w0: R.Tensor((128, 784), "float32"),
             b0: R.Tensor((128,), "float32"),
             w1: R.Tensor((10, 128), "float32"),
             b1: R.Tensor((10,), "float32")):
        with R.dataflow():
            lv0 = R.call_tir(linear0, (x, w0, b0), (1, 128), dtype="float32")
            lv1 = R.call_tir(relu0, (lv0,), (1, 128), dtype="float32")
            out = R.call_tir(linear1, (lv1, w1, b1), (1, 10), dtype="float32")
            R.output(out)
        return out
'''
