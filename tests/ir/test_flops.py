"""FLOP estimates: TVM's `estimate_tir_flops` numbers, pinned for every zoo workload and for
hand-written functions exercising each counting rule (all values measured with TVM 0.27)."""

from __future__ import annotations

import pytest

from msdb.ir import estimate_flops, expr as E, from_script, stmt as S, zoo
from msdb.ir.flops import estimate_flops as estimate_flops_direct

# tvm.s_tir.analysis.estimate_tir_flops(IRModule({"main": te.create_prim_func(...)})) per index
TVM_FLOPS = {
    "C1D": [6291456, 4194304, 41943040, 50331648],
    "C2D": [236027904, 25690112, 231211008, 231211008],
    "C3D": [13217562624, 411041792, 11098128384, 11098128384],
    "CAP": [75497472, 75497472, 9437184, 18874368],
    "DEP": [7225344, 3612672, 451584, 903168],
    "DIL": [223552896, 25690112, 169869312, 117964800],
    "GMM": [4194304, 16777216, 268435456, 2147483648],
    "GRP": [28901376, 6422528, 57802752, 57802752],
    "T2D": [268435456, 268435456, 268435456, 25165824],
    "CBR": [239239168, 116006912, 13045760, 231311360],
    "TBG": [25165824, 33554432, 12582912, 50331648],
    "NRM": [131072, 524288, 2097152, 8388608],
    "SFM": [262144, 1048576, 4194304, 16777216],
    "dense": [200704, 4194304, 268435456, 2147483648],
    "linear": [200832, 401664, 2570, 5130],
    "matmul": [4194304, 33554432, 268435456, 2147483648],
    "matmul_relu": [4210688, 33619968, 268697600, 2148532224],
    "matmul_bias": [4210688, 33619968, 268697600, 2148532224],
    "matmul_bias_relu": [4227072, 33685504, 268959744, 2149580800],
    "linear0": [200832, 401664],
    "relu0": [128, 256],
    "linear1": [2570, 5130],
}


@pytest.mark.parametrize("name", zoo.names())
def test_zoo_flops_are_tvms(name):
    assert [estimate_flops(zoo.workload(name, i)) for i in range(len(zoo.configs(name)))] == TVM_FLOPS[name]


def test_gmm_is_two_flops_per_multiply_add():
    assert estimate_flops(zoo.workload("GMM")) == 2 * 128**3
    assert estimate_flops(zoo.build("GMM", 2, 3, 4, 5)) == 2 * 2 * 3 * 4 * 5


HEADER = "from tvm.script import tirx as T\n\n"

# Select (condition + larger arm), if/else statement (larger branch), int arithmetic inside a
# cast, a let binding, and an Evaluate (not counted): TVM counts 608.
MIXED = HEADER + """\
@T.prim_func
def f1(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16,), "float32"), n: T.int32):
    for i in range(16):
        for j in range(16):
            B[i] = T.Select(A[i, j] > T.float32(0), A[i, j] * T.float32(2) + T.float32(1), T.exp(A[i, j]))
        if i < 8:
            B[i] = B[i] + T.float32(1)
        else:
            B[i] = B[i] * B[i] - T.float32(1)
        B[i] = T.Cast("float32", i * 2 + 1)
        x: T.float32 = A[i, 0] + A[i, 1]
        B[i] = x * x
        T.evaluate(A[i, 0] + T.float32(1))
"""

# A loop bounded by min(16, 60 - i * 16) counts 16 per i; an unknown int32 extent counts
# 2**31 - 1, an unknown int64 extent 1: TVM counts 2147483712.
EXTENTS = HEADER + """\
@T.prim_func
def f2(A: T.Buffer((64,), "float32"), n: T.int32, m: T.int64):
    for i in range(4):
        for j in range(T.min(16, 60 - i * 16)):
            A[i * 16 + j] = A[i * 16 + j] + T.float32(1)
    for k in range(n):
        A[0] = A[0] + T.float32(1)
    for k in range(m):
        A[1] = A[1] + T.float32(1)
"""

# A reduction block: the init and the predicate are not counted; FloorDiv/FloorMod in int32
# count: TVM counts 1536.
BLOCK = HEADER + """\
@T.prim_func(s_tir=True)
def f3(A: T.Buffer((16, 16), "int32"), B: T.Buffer((16,), "float16")):
    for i, j in T.grid(16, 16):
        with T.sblock("b"):
            vi, vj = T.axis.remap("SR", [i, j])
            T.where(i < 15)
            with T.init():
                B[vi] = T.float16(1) + T.float16(2)
            B[vi] = B[vi] + T.Cast("float16", A[vi, vj] // 3 + A[vi, vj] % 5) * T.max(B[vi], T.float16(0))
"""

# if_then_else counts the sum of its arguments (conditions 0); Select/if maximize per dtype:
# TVM counts 64.
BRANCHES = HEADER + """\
@T.prim_func
def f4(B: T.Buffer((16,), "float16"), C: T.Buffer((16,), "float32")):
    for i in T.vectorized(8):
        B[i] = T.if_then_else(i < 4 and not (i == 2), B[i] / T.float16(3), B[i] - T.float16(1))
    for i in range(16):
        if i < 4:
            C[i] = T.Select(i < 2, T.float32(1) + C[i], T.Cast("float32", B[i] + B[i]) * T.float32(2))
        else:
            C[i] = T.Cast("float32", B[i] * B[i] * B[i])
"""

# A tiled matmul: bindings and loop structure do not change the count: TVM counts 4194304.
TILED = HEADER + """\
@T.prim_func(s_tir=True)
def f5(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128, 128), "float32"), C: T.Buffer((128, 128), "float32")):
    for i0, j0 in T.grid(8, 8):
        for k0, i1, j1, k1 in T.grid(32, 16, 16, 4):
            with T.sblock("C"):
                vi = T.axis.spatial(128, i0 * 16 + i1)
                vj = T.axis.spatial(128, j0 * 16 + j1)
                vk = T.axis.reduce(128, k0 * 4 + k1)
                with T.init():
                    C[vi, vj] = T.float32(0)
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
"""


@pytest.mark.parametrize("text,expected", [
    (MIXED, 608), (EXTENTS, 2147483712), (BLOCK, 1536), (BRANCHES, 64), (TILED, 4194304),
], ids=["mixed", "extents", "block", "branches", "tiled"])
def test_counting_rules_match_tvm(text, expected):
    assert estimate_flops(from_script(text)) == expected


def test_accepts_functions_statements_and_cached_counts():
    mod = zoo.workload("matmul")
    func = mod.main
    assert estimate_flops(func) == estimate_flops(mod) == 2 * 128**3
    assert estimate_flops(func.body) == 2 * 128**3
    assert estimate_flops_direct is estimate_flops
    cached = mod.with_function("main", func.with_attrs(estimated_flops=12345))
    assert estimate_flops(cached) == 12345
    two = mod.with_function("other", zoo.workload("relu0").main)
    assert estimate_flops(two) == 2 * 128**3 + 128


def test_store_indices_and_loads_do_not_count():
    i = E.Var("i")
    a = E.Buffer("A", (E.IntImm("int32", 8),))
    store = S.BufferStore(a, E.BufferLoad(a, (i * 2 + 1,)), (i * 3 + 1,))
    loop = S.For(i, E.IntImm("int32", 0), E.IntImm("int32", 4), S.ForKind.SERIAL, store)
    assert estimate_flops(loop) == 0
    assert estimate_flops(S.For(i, E.IntImm("int32", 0), E.IntImm("int32", 0), S.ForKind.SERIAL,
                                S.BufferStore(a, E.BufferLoad(a, (i,)) + 1.0, (i,)))) == 0


def test_rejects_other_inputs():
    with pytest.raises(TypeError, match="IRModule, PrimFunc or Stmt"):
        estimate_flops("C2D")
