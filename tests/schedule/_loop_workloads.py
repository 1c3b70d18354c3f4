"""Small workloads and helpers shared by the loop/sampling/core schedule tests.

Inputs are small integers stored as floats, so every sum is exact whatever order a schedule
runs it in, and outputs before and after a transformation can be compared for equality.
"""

from __future__ import annotations

import numpy as np

import msdb.ir as ir
from msdb.ir.function import IRModule
from msdb.ir.dtype import to_numpy
from msdb.ir.expr import const_int

MATMUL = """
@T.prim_func
def main(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16, 16), "float32"), C: T.Buffer((16, 16), "float32")):
    for i, j, k in T.grid(16, 16, 16):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
"""

# k extent 10: splits by 4 are not perfect
MATMUL_K10 = """
@T.prim_func
def main(A: T.Buffer((16, 10), "float32"), B: T.Buffer((10, 16), "float32"), C: T.Buffer((16, 16), "float32")):
    for i, j, k in T.grid(16, 16, 10):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
"""

BATCH_MATMUL = """
@T.prim_func
def main(X: T.Buffer((2, 8, 12), "float32"), Y: T.Buffer((2, 12, 8), "float32"), Z: T.Buffer((2, 8, 8), "float32")):
    for b, i, j, k in T.grid(2, 8, 8, 12):
        with T.block("Z"):
            v_b, v_i, v_j, v_k = T.axis.remap("SSSR", [b, i, j, k])
            with T.init():
                Z[v_b, v_i, v_j] = T.float32(0)
            Z[v_b, v_i, v_j] = Z[v_b, v_i, v_j] + X[v_b, v_i, v_k] * Y[v_b, v_k, v_j]
"""

CHAIN = """
@T.prim_func
def main(A: T.Buffer((16, 12), "float32"), C: T.Buffer((16, 12), "float32")):
    B = T.alloc_buffer((16, 12))
    for i, j in T.grid(16, 12):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)
    for i, j in T.grid(16, 12):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj] + T.float32(1)
"""

# one loop holding two loops (not a chain), and two blocks writing the same buffer under i
BRANCHY = """
@T.prim_func
def main(A: T.Buffer((8, 8), "float32"), C: T.Buffer((8,), "float32")):
    for i in range(8):
        for j in range(8):
            with T.block("C_init"):
                vi = T.axis.spatial(8, i)
                vj = T.axis.spatial(8, j)
                T.where(j < 1)
                C[vi] = T.float32(0)
        for k in range(8):
            with T.block("C"):
                vi, vk = T.axis.remap("SR", [i, k])
                C[vi] = C[vi] + A[vi, vk]
"""

# the MLC course's matmul (mlc.ai, "TensorIR: Tensor Program Abstraction Case Study")
MLC_MM = """
@T.prim_func
def main(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128, 128), "float32"), C: T.Buffer((128, 128), "float32")):
    T.func_attr({"global_symbol": "main", "tir.noalias": True})
    for i, j, k in T.grid(128, 128, 128):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
"""


def gmm(batch: int, n: int, m: int, k: int) -> str:
    """TVM te_workload's GMM (batch matmul NKKM) as TVM prints it."""
    return f"""
@T.prim_func
def main(X: T.Buffer(({batch}, {n}, {k}), "float32"), Y: T.Buffer(({batch}, {k}, {m}), "float32"), Z: T.Buffer(({batch}, {n}, {m}), "float32")):
    T.func_attr({{"tirx.noalias": True}})
    for b, i, j, k in T.grid({batch}, {n}, {m}, {k}):
        with T.block("Z"):
            v_b, v_i, v_j, v_k = T.axis.remap("SSSR", [b, i, j, k])
            T.reads(X[v_b, v_i, v_k], Y[v_b, v_k, v_j])
            T.writes(Z[v_b, v_i, v_j])
            with T.init():
                Z[v_b, v_i, v_j] = T.float32(0.0)
            Z[v_b, v_i, v_j] = Z[v_b, v_i, v_j] + X[v_b, v_i, v_k] * Y[v_b, v_k, v_j]
"""


def load(script: str) -> IRModule:
    return ir.from_script(script)


def run(mod: IRModule, seed: int = 0) -> list[np.ndarray]:
    """Run the entry function on seeded small-integer inputs (outputs start at a sentinel so
    unwritten elements show); return every argument array afterwards."""
    rng = np.random.default_rng(seed)
    arrays = []
    for buf in mod.main.buffers:
        shape = tuple(const_int(s) for s in buf.shape)
        arrays.append(rng.integers(-3, 4, size=shape).astype(to_numpy(buf.dtype)))
    ir.interpret(mod, *arrays)
    return arrays


def assert_same_results(before: IRModule, after: IRModule) -> None:
    for a, b in zip(run(before), run(after)):
        np.testing.assert_array_equal(a, b)


def script_of(mod: IRModule) -> str:
    return ir.to_script(mod)


def loop_lines(mod: IRModule) -> list[str]:
    """The `for` lines of the printed script, stripped (the loop structure at a glance)."""
    return [line.strip() for line in ir.to_script(mod).splitlines() if line.strip().startswith("for ")]


def binding_lines(mod: IRModule) -> list[str]:
    """The iter var bindings and `T.where` lines of the printed script, stripped."""
    lines = []
    for line in ir.to_script(mod).splitlines():
        s = line.strip()
        if s.startswith("T.where") or " = T.axis." in s:
            lines.append(s)
    return lines
