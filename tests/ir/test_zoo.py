"""The workload zoo: TVM's te_workload names, shapes and structure, msdb's extra workloads and
the example MLPs. Structure is checked against real TVM 0.27 output: its printed scripts, its
serialized workload payloads and (for msdb's extras, which TVM does not ship) TVM's print of
`te.create_prim_func` on the same TE definitions, pinned below."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from msdb.errors import MsdbError
from msdb.hashing import structural_equal, structural_hash
from msdb.interop.tvm.payload import decode_workload
from msdb.ir import expr as E
from msdb.ir import from_script, interpret, stmt as S, zoo
from msdb.ir.function import IRModule

DATA = Path(__file__).resolve().parents[1] / "data"

TVM_NAMES = ["C1D", "C2D", "C3D", "CAP", "DEP", "DIL", "GMM", "GRP", "T2D", "CBR", "TBG", "NRM", "SFM"]
EXTRA_NAMES = ["dense", "linear", "matmul", "matmul_relu", "matmul_bias", "matmul_bias_relu",
               "linear0", "relu0", "linear1"]

# TVM's te_workload.CONFIGS (0.27), in TVM's order.
TVM_CONFIGS = {
    "C1D": [(1, 256, 64, 128, 3, 2, 1), (1, 128, 128, 256, 1, 2, 0), (1, 64, 256, 256, 5, 1, 2), (1, 32, 512, 512, 3, 1, 1)],
    "C2D": [(1, 224, 224, 3, 64, 7, 2, 3), (1, 56, 56, 64, 64, 1, 1, 0), (1, 14, 14, 256, 256, 3, 1, 1), (1, 7, 7, 512, 512, 3, 1, 1)],
    "C3D": [(1, 16, 224, 224, 3, 64, 7, 2, 3), (1, 16, 56, 56, 64, 64, 1, 1, 0), (1, 16, 14, 14, 256, 256, 3, 1, 1),
            (1, 16, 7, 7, 512, 512, 3, 1, 1)],
    "GMM": [(1, 128, 128, 128), (1, 512, 32, 512), (1, 512, 512, 512), (1, 1024, 1024, 1024)],
    "GRP": [(1, 56, 56, 64, 128, 3, 2, 1, 1, 4), (1, 56, 56, 64, 64, 1, 1, 0, 1, 4), (1, 14, 14, 256, 256, 3, 1, 1, 1, 4),
            (1, 7, 7, 512, 512, 3, 1, 1, 1, 4)],
    "DIL": [(1, 224, 224, 3, 64, 7, 2, 3, 2), (1, 56, 56, 64, 64, 1, 1, 0, 2), (1, 14, 14, 256, 256, 3, 1, 1, 2),
            (1, 7, 7, 512, 512, 3, 1, 1, 2)],
    "DEP": [(1, 112, 112, 32, 3, 1, 1), (1, 112, 112, 64, 3, 2, 1), (1, 14, 14, 512, 3, 2, 1), (1, 7, 7, 1024, 3, 1, 1)],
    "T2D": [(1, 4, 4, 512, 256, 4, 2, 1), (1, 8, 8, 256, 128, 4, 2, 1), (1, 16, 16, 128, 64, 4, 2, 1), (1, 32, 32, 64, 3, 4, 2, 1)],
    "CAP": [(1, 16, 16, 32, 32, 3, 2, 1), (1, 8, 8, 32, 32, 3, 1, 1), (1, 16, 16, 8, 16, 3, 2, 1), (1, 8, 8, 16, 16, 3, 1, 1)],
    "NRM": [(1, 256, 256), (1, 512, 512), (1, 1024, 1024), (1, 4096, 1024)],
    "SFM": [(256, 256), (512, 512), (1024, 1024), (2048, 2048)],
    "CBR": [(1, 224, 224, 3, 64, 7, 2, 3), (1, 56, 56, 64, 128, 3, 2, 1), (1, 28, 28, 128, 256, 1, 2, 0), (1, 7, 7, 512, 512, 3, 1, 1)],
    "TBG": [(1, 128, 12, 64), (1, 128, 16, 64), (1, 64, 12, 128), (1, 128, 12, 128)],
}

# Parameter names and shapes of TVM's create_prim_func output for every TVM name and index.
# (DEP's two inputs are both called "placeholder" in TVM; msdb names the second
# "placeholder_1", as TVM's printer shows it.)
TVM_PARAMS = {
    "C1D": (('inputs', 'weight', 'conv1d_nlc'), [
        ((1, 256, 64), (3, 64, 128), (1, 128, 128)),
        ((1, 128, 128), (1, 128, 256), (1, 64, 256)),
        ((1, 64, 256), (5, 256, 256), (1, 64, 256)),
        ((1, 32, 512), (3, 512, 512), (1, 32, 512)),
    ]),
    "C2D": (('inputs', 'weight', 'conv2d_nhwc'), [
        ((1, 224, 224, 3), (7, 7, 3, 64), (1, 112, 112, 64)),
        ((1, 56, 56, 64), (1, 1, 64, 64), (1, 56, 56, 64)),
        ((1, 14, 14, 256), (3, 3, 256, 256), (1, 14, 14, 256)),
        ((1, 7, 7, 512), (3, 3, 512, 512), (1, 7, 7, 512)),
    ]),
    "C3D": (('inputs', 'weight', 'conv3d_ndhwc'), [
        ((1, 16, 224, 224, 3), (7, 7, 7, 3, 64), (1, 8, 112, 112, 64)),
        ((1, 16, 56, 56, 64), (1, 1, 1, 64, 64), (1, 16, 56, 56, 64)),
        ((1, 16, 14, 14, 256), (3, 3, 3, 256, 256), (1, 16, 14, 14, 256)),
        ((1, 16, 7, 7, 512), (3, 3, 3, 512, 512), (1, 16, 7, 7, 512)),
    ]),
    "CAP": (('inputs', 'weight', 'conv2d_capsule_nhwijc'), [
        ((1, 16, 16, 4, 4, 32), (3, 3, 4, 4, 32, 32), (1, 8, 8, 4, 4, 32)),
        ((1, 8, 8, 4, 4, 32), (3, 3, 4, 4, 32, 32), (1, 8, 8, 4, 4, 32)),
        ((1, 16, 16, 4, 4, 8), (3, 3, 4, 4, 8, 16), (1, 8, 8, 4, 4, 16)),
        ((1, 8, 8, 4, 4, 16), (3, 3, 4, 4, 16, 16), (1, 8, 8, 4, 4, 16)),
    ]),
    "DEP": (('placeholder', 'placeholder', 'depth_conv2d_nhwc'), [
        ((1, 112, 112, 32), (1, 3, 3, 32), (1, 112, 112, 32)),
        ((1, 112, 112, 64), (1, 3, 3, 64), (1, 56, 56, 64)),
        ((1, 14, 14, 512), (1, 3, 3, 512), (1, 7, 7, 512)),
        ((1, 7, 7, 1024), (1, 3, 3, 1024), (1, 7, 7, 1024)),
    ]),
    "DIL": (('inputs', 'weight', 'conv2d_nhwc'), [
        ((1, 224, 224, 3), (7, 7, 3, 64), (1, 109, 109, 64)),
        ((1, 56, 56, 64), (1, 1, 64, 64), (1, 56, 56, 64)),
        ((1, 14, 14, 256), (3, 3, 256, 256), (1, 12, 12, 256)),
        ((1, 7, 7, 512), (3, 3, 512, 512), (1, 5, 5, 512)),
    ]),
    "GMM": (('X', 'Y', 'Z'), [
        ((1, 128, 128), (1, 128, 128), (1, 128, 128)),
        ((1, 512, 512), (1, 512, 32), (1, 512, 32)),
        ((1, 512, 512), (1, 512, 512), (1, 512, 512)),
        ((1, 1024, 1024), (1, 1024, 1024), (1, 1024, 1024)),
    ]),
    "GRP": (('inputs', 'weight', 'conv2d_nhwc'), [
        ((1, 56, 56, 64), (3, 3, 16, 128), (1, 28, 28, 128)),
        ((1, 56, 56, 64), (1, 1, 16, 64), (1, 56, 56, 64)),
        ((1, 14, 14, 256), (3, 3, 64, 256), (1, 14, 14, 256)),
        ((1, 7, 7, 512), (3, 3, 128, 512), (1, 7, 7, 512)),
    ]),
    "T2D": (('inputs', 'weight', 'conv2d_transpose_nhwc'), [
        ((1, 4, 4, 512), (4, 4, 512, 256), (1, 8, 8, 256)),
        ((1, 8, 8, 256), (4, 4, 256, 128), (1, 16, 16, 128)),
        ((1, 16, 16, 128), (4, 4, 128, 64), (1, 32, 32, 64)),
        ((1, 32, 32, 64), (4, 4, 64, 3), (1, 64, 64, 3)),
    ]),
    "CBR": (('data', 'kernel', 'bias', 'bn_offset', 'bn_scale', 'compute'), [
        ((1, 224, 224, 3), (7, 7, 3, 64), (64,), (64,), (64,), (1, 112, 112, 64)),
        ((1, 56, 56, 64), (3, 3, 64, 128), (128,), (128,), (128,), (1, 28, 28, 128)),
        ((1, 28, 28, 128), (1, 1, 128, 256), (256,), (256,), (256,), (1, 14, 14, 256)),
        ((1, 7, 7, 512), (3, 3, 512, 512), (512,), (512,), (512,), (1, 7, 7, 512)),
    ]),
    "TBG": (('query', 'value', 'C'), [
        ((1, 128, 12, 64), (1, 128, 12, 64), (1, 12, 128, 128)),
        ((1, 128, 16, 64), (1, 128, 16, 64), (1, 16, 128, 128)),
        ((1, 64, 12, 128), (1, 64, 12, 128), (1, 12, 64, 64)),
        ((1, 128, 12, 128), (1, 128, 12, 128), (1, 12, 128, 128)),
    ]),
    "NRM": (('A', 'D'), [
        ((1, 256, 256), (1,)),
        ((1, 512, 512), (1,)),
        ((1, 1024, 1024), (1,)),
        ((1, 4096, 1024), (1,)),
    ]),
    "SFM": (('A', 'T_softmax_norm'), [
        ((256, 256), (256, 256)),
        ((512, 512), (512, 512)),
        ((1024, 1024), (1024, 1024)),
        ((2048, 2048), (2048, 2048)),
    ]),
}

# Block names (in order) and root allocations of TVM's output at index 0.
TVM_BLOCKS = {
    "C1D": (("PadInput", "conv1d_nlc"), ("PadInput",)),
    "C2D": (("PadInput", "conv2d_nhwc"), ("PadInput",)),
    "C3D": (("PadInput", "conv3d_ndhwc"), ("PadInput",)),
    "CAP": (("PadInput", "conv2d_capsule_nhwijc"), ("PadInput",)),
    "DEP": (("PadInput", "depth_conv2d_nhwc"), ("PadInput",)),
    "DIL": (("PadInput", "conv2d_nhwc"), ("PadInput",)),
    "GMM": (("Z",), ()),
    "GRP": (("PadInput", "conv2d_nhwc"), ("PadInput",)),
    "T2D": (("PadInput", "conv2d_transpose_nhwc"), ("PadInput",)),
    "CBR": (("PaddedInput", "Conv2dOutput", "bias_add", "bn_mul", "bn_add", "compute"),
            ("PaddedInput", "Conv2dOutput", "bias_add", "bn_mul", "bn_add")),
    "TBG": (("query_T", "value_T", "C"), ("query_T", "value_T")),
    "NRM": (("C", "D"), ("C",)),
    "SFM": (("T_softmax_maxelem", "T_softmax_exp", "T_softmax_expsum", "T_softmax_norm"),
            ("T_softmax_maxelem", "T_softmax_exp", "T_softmax_expsum")),
    "dense": (("Y",), ()),
    "linear": (("Y", "Z"), ("Y",)),
    "matmul": (("C",), ()),
    "matmul_relu": (("C", "compute"), ("C",)),
    "matmul_bias": (("C", "bias_add"), ("C",)),
    "matmul_bias_relu": (("C", "bias_add", "compute"), ("C", "bias_add")),
    "linear0": (("Y", "Z"), ("Y",)),
    "relu0": (("Y",), ()),
    "linear1": (("Y", "Z"), ("Y",)),
}

# TVM 0.27's `te.create_prim_func(...).script()` for msdb's extra workloads at index 0, built in
# TVM from the same TE definitions (`linear0` is `linear` at index 0).
TVM_EXTRA_SCRIPTS = {
    "dense": """\
# from tvm.script import tirx as T
# from tvm.tirx.layout import Axis

@T.prim_func(s_tir=True)
def main(X: T.Buffer((1, 784), "float32"), W: T.Buffer((128, 784), "float32"), Y: T.Buffer((1, 128), "float32")):
    T.func_attr({"tirx.noalias": True})
    # with T.sblock("root"):
    for i, j, k in T.grid(1, 128, 784):
        with T.sblock("Y"):
            v_i, v_j, v_k = T.axis.remap("SSR", [i, j, k])
            T.reads(X[v_i, v_k], W[v_j, v_k])
            T.writes(Y[v_i, v_j])
            with T.init():
                Y[v_i, v_j] = T.float32(0.0)
            Y[v_i, v_j] = Y[v_i, v_j] + X[v_i, v_k] * W[v_j, v_k]
""",
    "linear": """\
# from tvm.script import tirx as T
# from tvm.tirx.layout import Axis

@T.prim_func(s_tir=True)
def main(X: T.Buffer((1, 784), "float32"), W: T.Buffer((128, 784), "float32"), B: T.Buffer((128,), "float32"), Z: T.Buffer((1, 128), "float32")):
    T.func_attr({"tirx.noalias": True})
    # with T.sblock("root"):
    Y = T.sblock_alloc_buffer((1, 128))
    for i, j, k in T.grid(1, 128, 784):
        with T.sblock("Y"):
            v_i, v_j, v_k = T.axis.remap("SSR", [i, j, k])
            T.reads(X[v_i, v_k], W[v_j, v_k])
            T.writes(Y[v_i, v_j])
            with T.init():
                Y[v_i, v_j] = T.float32(0.0)
            Y[v_i, v_j] = Y[v_i, v_j] + X[v_i, v_k] * W[v_j, v_k]
    for i, j in T.grid(1, 128):
        with T.sblock("Z"):
            v_i, v_j = T.axis.remap("SS", [i, j])
            T.reads(Y[v_i, v_j], B[v_j])
            T.writes(Z[v_i, v_j])
            Z[v_i, v_j] = Y[v_i, v_j] + B[v_j]
""",
    "matmul": """\
# from tvm.script import tirx as T
# from tvm.tirx.layout import Axis

@T.prim_func(s_tir=True)
def main(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128, 128), "float32"), C: T.Buffer((128, 128), "float32")):
    T.func_attr({"tirx.noalias": True})
    # with T.sblock("root"):
    for i, j, k in T.grid(128, 128, 128):
        with T.sblock("C"):
            v_i, v_j, v_k = T.axis.remap("SSR", [i, j, k])
            T.reads(A[v_i, v_k], B[v_k, v_j])
            T.writes(C[v_i, v_j])
            with T.init():
                C[v_i, v_j] = T.float32(0.0)
            C[v_i, v_j] = C[v_i, v_j] + A[v_i, v_k] * B[v_k, v_j]
""",
    "matmul_relu": """\
# from tvm.script import tirx as T
# from tvm.tirx.layout import Axis

@T.prim_func(s_tir=True)
def main(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128, 128), "float32"), compute: T.Buffer((128, 128), "float32")):
    T.func_attr({"tirx.noalias": True})
    # with T.sblock("root"):
    C = T.sblock_alloc_buffer((128, 128))
    for i, j, k in T.grid(128, 128, 128):
        with T.sblock("C"):
            v_i, v_j, v_k = T.axis.remap("SSR", [i, j, k])
            T.reads(A[v_i, v_k], B[v_k, v_j])
            T.writes(C[v_i, v_j])
            with T.init():
                C[v_i, v_j] = T.float32(0.0)
            C[v_i, v_j] = C[v_i, v_j] + A[v_i, v_k] * B[v_k, v_j]
    for i0, i1 in T.grid(128, 128):
        with T.sblock("compute"):
            v_i0, v_i1 = T.axis.remap("SS", [i0, i1])
            T.reads(C[v_i0, v_i1])
            T.writes(compute[v_i0, v_i1])
            compute[v_i0, v_i1] = T.max(C[v_i0, v_i1], T.float32(0.0))
""",
    "matmul_bias": """\
# from tvm.script import tirx as T
# from tvm.tirx.layout import Axis

@T.prim_func(s_tir=True)
def main(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128, 128), "float32"), bias: T.Buffer((128,), "float32"), bias_add: T.Buffer((128, 128), "float32")):
    T.func_attr({"tirx.noalias": True})
    # with T.sblock("root"):
    C = T.sblock_alloc_buffer((128, 128))
    for i, j, k in T.grid(128, 128, 128):
        with T.sblock("C"):
            v_i, v_j, v_k = T.axis.remap("SSR", [i, j, k])
            T.reads(A[v_i, v_k], B[v_k, v_j])
            T.writes(C[v_i, v_j])
            with T.init():
                C[v_i, v_j] = T.float32(0.0)
            C[v_i, v_j] = C[v_i, v_j] + A[v_i, v_k] * B[v_k, v_j]
    for i, j in T.grid(128, 128):
        with T.sblock("bias_add"):
            v_i, v_j = T.axis.remap("SS", [i, j])
            T.reads(C[v_i, v_j], bias[v_j])
            T.writes(bias_add[v_i, v_j])
            bias_add[v_i, v_j] = C[v_i, v_j] + bias[v_j]
""",
    "matmul_bias_relu": """\
# from tvm.script import tirx as T
# from tvm.tirx.layout import Axis

@T.prim_func(s_tir=True)
def main(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128, 128), "float32"), bias: T.Buffer((128,), "float32"), compute: T.Buffer((128, 128), "float32")):
    T.func_attr({"tirx.noalias": True})
    # with T.sblock("root"):
    C = T.sblock_alloc_buffer((128, 128))
    bias_add = T.sblock_alloc_buffer((128, 128))
    for i, j, k in T.grid(128, 128, 128):
        with T.sblock("C"):
            v_i, v_j, v_k = T.axis.remap("SSR", [i, j, k])
            T.reads(A[v_i, v_k], B[v_k, v_j])
            T.writes(C[v_i, v_j])
            with T.init():
                C[v_i, v_j] = T.float32(0.0)
            C[v_i, v_j] = C[v_i, v_j] + A[v_i, v_k] * B[v_k, v_j]
    for i, j in T.grid(128, 128):
        with T.sblock("bias_add"):
            v_i, v_j = T.axis.remap("SS", [i, j])
            T.reads(C[v_i, v_j], bias[v_j])
            T.writes(bias_add[v_i, v_j])
            bias_add[v_i, v_j] = C[v_i, v_j] + bias[v_j]
    for i0, i1 in T.grid(128, 128):
        with T.sblock("compute"):
            v_i0, v_i1 = T.axis.remap("SS", [i0, i1])
            T.reads(bias_add[v_i0, v_i1])
            T.writes(compute[v_i0, v_i1])
            compute[v_i0, v_i1] = T.max(bias_add[v_i0, v_i1], T.float32(0.0))
""",
    "relu0": """\
# from tvm.script import tirx as T
# from tvm.tirx.layout import Axis

@T.prim_func(s_tir=True)
def main(X: T.Buffer((1, 128), "float32"), Y: T.Buffer((1, 128), "float32")):
    T.func_attr({"tirx.noalias": True})
    # with T.sblock("root"):
    for i, j in T.grid(1, 128):
        with T.sblock("Y"):
            v_i, v_j = T.axis.remap("SS", [i, j])
            T.reads(X[v_i, v_j])
            T.writes(Y[v_i, v_j])
            Y[v_i, v_j] = T.max(X[v_i, v_j], T.float32(0.0))
""",
    "linear1": """\
# from tvm.script import tirx as T
# from tvm.tirx.layout import Axis

@T.prim_func(s_tir=True)
def main(X: T.Buffer((1, 128), "float32"), W: T.Buffer((10, 128), "float32"), B: T.Buffer((10,), "float32"), Z: T.Buffer((1, 10), "float32")):
    T.func_attr({"tirx.noalias": True})
    # with T.sblock("root"):
    Y = T.sblock_alloc_buffer((1, 10))
    for i, j, k in T.grid(1, 10, 128):
        with T.sblock("Y"):
            v_i, v_j, v_k = T.axis.remap("SSR", [i, j, k])
            T.reads(X[v_i, v_k], W[v_j, v_k])
            T.writes(Y[v_i, v_j])
            with T.init():
                Y[v_i, v_j] = T.float32(0.0)
            Y[v_i, v_j] = Y[v_i, v_j] + X[v_i, v_k] * W[v_j, v_k]
    for i, j in T.grid(1, 10):
        with T.sblock("Z"):
            v_i, v_j = T.axis.remap("SS", [i, j])
            T.reads(Y[v_i, v_j], B[v_j])
            T.writes(Z[v_i, v_j])
            Z[v_i, v_j] = Y[v_i, v_j] + B[v_j]
""",
}


def block_names(mod: IRModule) -> list[str]:
    names: list[str] = []

    def walk(s: S.Stmt) -> None:
        if isinstance(s, S.SeqStmt):
            for x in s.seq:
                walk(x)
        elif isinstance(s, S.For):
            walk(s.body)
        elif isinstance(s, S.BlockRealize):
            names.append(s.block.name_hint)
            walk(s.block.body)

    walk(mod.main.body)
    return names[1:]


def param_shapes(mod: IRModule) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(E.const_int(d) for d in b.shape) for b in mod.main.buffers)


def test_names_are_tvms_then_msdbs():
    assert zoo.names() == TVM_NAMES + EXTRA_NAMES


@pytest.mark.parametrize("name", TVM_NAMES)
def test_configs_are_tvms(name):
    assert zoo.configs(name) == TVM_CONFIGS[name]


@pytest.mark.parametrize("name", TVM_NAMES)
def test_every_index_has_tvms_parameters(name):
    param_names, shapes = TVM_PARAMS[name]
    for index, expected in enumerate(shapes):
        mod = zoo.workload(name, index)
        assert set(mod.functions) == {"main"}
        assert param_shapes(mod) == expected
        names = [b.name for b in mod.main.buffers]
        assert names == [n if not (name == "DEP" and i == 1) else "placeholder_1" for i, n in enumerate(param_names)]
        assert [p.name for p in mod.main.params] == names
        assert all(b.dtype == "float32" and all(d.dtype == "int32" for d in b.shape) for b in mod.main.buffers)


@pytest.mark.parametrize("name", TVM_NAMES + EXTRA_NAMES)
def test_block_order_and_allocations_are_tvms(name):
    mod = zoo.workload(name)
    blocks, allocs = TVM_BLOCKS[name]
    assert tuple(block_names(mod)) == blocks
    assert tuple(b.name for b in mod.main.root_block.alloc_buffers) == allocs


@pytest.mark.parametrize("name", TVM_NAMES)
def test_structurally_equal_to_tvms_printed_script(name):
    theirs = from_script((DATA / "tvmscript" / "tvm027" / f"{name}.py").read_text())
    mine = zoo.workload(name)
    assert structural_equal(theirs, mine)
    assert structural_hash(theirs) == structural_hash(mine)


@pytest.mark.parametrize("name", list(TVM_EXTRA_SCRIPTS))
def test_extras_structurally_equal_to_tvms_output_for_the_same_te(name):
    assert structural_equal(from_script(TVM_EXTRA_SCRIPTS[name]), zoo.workload(name))


def test_linear0_is_the_workload_tvm_tuned_in_the_fixture():
    # team_a's second workload is TVM's own serialization of the MLC course's linear0
    lines = (DATA / "fixtures" / "tvm-0.27" / "team_a" / "database_workload.json").read_text().splitlines()
    payloads = {json.loads(line)[0]: json.loads(line)[1] for line in lines}
    assert structural_equal(decode_workload(payloads["12552862349517236333"]), zoo.workload("linear0"))
    assert structural_equal(decode_workload(payloads["7523732197612418965"]), zoo.workload("GMM"))


def test_structurally_equal_to_tvms_serialized_workloads():
    names = json.loads((DATA / "tvm027_workloads" / "zoo_index0_names.json").read_text())
    lines = (DATA / "tvm027_workloads" / "zoo_index0_database_workload.json").read_text().splitlines()
    assert sorted(names) == sorted(TVM_NAMES)
    for name, line in zip(names, lines):
        assert structural_equal(decode_workload(json.loads(line)[1]), zoo.workload(name)), name


def test_other_indices_differ_from_index_0():
    for name in TVM_NAMES:
        hashes = {structural_hash(zoo.workload(name, i)) for i in range(4)}
        assert len(hashes) == 4, name


def test_build_takes_custom_shapes():
    mod = zoo.build("GMM", 2, 8, 4, 16)
    assert param_shapes(mod) == ((2, 8, 16), (2, 16, 4), (2, 8, 4))
    assert structural_equal(zoo.build(*(("C2D",) + zoo.configs("C2D")[0])), zoo.workload("C2D"))
    f16 = zoo.build("matmul", 4, 4, 4, "float16", "float32")
    assert [b.dtype for b in f16.main.buffers] == ["float16", "float16", "float32"]
    assert [len(t.shape) for t in zoo.tensors("linear", 1, 10, 128)] == [2, 2, 1, 2]


def test_models_list_the_mlp_layers():
    models = zoo.models()
    assert list(models) == ["mlp_784_128_10", "mlp_784_256_10"]
    for model, hidden in (("mlp_784_128_10", 128), ("mlp_784_256_10", 256)):
        tasks = models[model]
        assert [(n, w) for n, _, w in tasks] == [("linear0", 1), ("relu0", 1), ("linear1", 1)]
        shapes = [param_shapes(mod) for _, mod, _ in tasks]
        assert shapes == [
            ((1, 784), (hidden, 784), (hidden,), (1, hidden)),
            ((1, hidden), (1, hidden)),
            ((1, hidden), (10, hidden), (10,), (1, 10)),
        ]
    assert structural_equal(models["mlp_784_128_10"][0][1], zoo.workload("linear", 0))
    assert structural_equal(models["mlp_784_256_10"][2][1], zoo.workload("linear", 3))


def test_unknown_names_indices_and_parameters_are_user_errors():
    with pytest.raises(zoo.UnknownWorkloadError, match="no zoo workload named 'gmm'.*GMM"):
        zoo.workload("gmm")
    with pytest.raises(zoo.UnknownWorkloadError, match="GMM has configs 0..3, asked for index 4"):
        zoo.workload("GMM", 4)
    with pytest.raises(zoo.UnknownWorkloadError, match="bad parameters"):
        zoo.build("GMM", 1, 2)
    with pytest.raises(MsdbError):
        zoo.configs("nope")


def test_small_shapes_compute_the_right_numbers():
    rng = np.random.default_rng(3)
    # conv2d with stride, padding, dilation and groups against a direct numpy loop
    n, h, w, ci, co, k, s, p, d, g = 1, 7, 6, 4, 6, 3, 2, 1, 2, 2
    mod = zoo.build("GRP", n, h, w, ci, co, k, s, p, d, g)
    x = rng.standard_normal((n, h, w, ci)).astype("float32")
    wt = rng.standard_normal((k, k, ci // g, co)).astype("float32")
    oh, ow = (h + 2 * p - d * (k - 1) - 1) // s + 1, (w + 2 * p - d * (k - 1) - 1) // s + 1
    out = np.zeros((n, oh, ow, co), "float32")
    interpret(mod, x, wt, out)
    xp = np.pad(x, ((0, 0), (p, p), (p, p), (0, 0)))
    ref = np.zeros_like(out)
    for y in range(oh):
        for z in range(ow):
            for c in range(co):
                grp = c // (co // g)
                patch = xp[0, y * s:y * s + d * (k - 1) + 1:d, z * s:z * s + d * (k - 1) + 1:d,
                           grp * (ci // g):(grp + 1) * (ci // g)]
                ref[0, y, z, c] = (patch * wt[:, :, :, c]).sum()
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5)
    # linear: Z = X W^T + B
    x = rng.standard_normal((2, 5)).astype("float32")
    wt = rng.standard_normal((3, 5)).astype("float32")
    b = rng.standard_normal(3).astype("float32")
    z = np.zeros((2, 3), "float32")
    interpret(zoo.build("linear", 2, 3, 5), x, wt, b, z)
    np.testing.assert_allclose(z, x @ wt.T + b, rtol=1e-5)
    # relu0
    y = np.zeros((1, 4), "float32")
    x = np.array([[-1.0, 0.5, -0.0, 2.0]], "float32")
    interpret(zoo.build("relu0", 1, 4), x, y)
    np.testing.assert_array_equal(y, np.maximum(x, 0))
