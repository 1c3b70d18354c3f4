"""The generated code really is vector code (packed instructions in the assembly) and really
runs parallel loops on several threads (libgomp thread ids recorded by the kernel)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from msdb.ir import from_script, zoo
from msdb.tuner import build
from msdb.records.target import Target
from msdb.tuner.codegen import compile_module
from msdb.tuner.codegen.jit import spec_for, vector_register_bits
from msdb.tuner.space.register_tile import vector_lanes
from tests.tuner._util import check_against_interpreter, random_arrays
from tests.tuner.test_codegen_schedules import register_tiled_matmul

PACKED = re.compile(r"\bv(mul|add|fmadd\d*|sub|max|min)ps\s")


def register_name(target: Target) -> str:
    """The name of the target's full-width vector registers in AT&T assembly (%zmm, %ymm, %xmm)."""
    return {512: "%zmm", 256: "%ymm"}.get(vector_register_bits(spec_for(target)), "%xmm")


def _loop_body_instructions(asm: str) -> list[str]:
    return [line.strip() for line in asm.splitlines() if line.startswith("\t") and not line.startswith("\t.")]


VECTOR_SCRIPT = '''
from tvm.script import tir as T
@T.prim_func
def main(A: T.Buffer((64, 64), "float32"), B: T.Buffer((64, 64), "float32"), C: T.Buffer((64, 64), "float32")):
    for i in range(64):
        for j in T.vectorized(64):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = T.max(A[vi, vj] * B[vi, vj] + T.float32(1), T.float32(0))
'''


def test_vectorized_loop_emits_vector_ir_and_packed_instructions(isa_target: Target) -> None:
    """Packed arithmetic on the target's full-width registers (operands in registers or memory:
    with AVX2 LLVM folds a load into the FMA)."""
    compiled = compile_module(from_script(VECTOR_SCRIPT), isa_target)
    assert "<64 x float>" in compiled.llvm_ir  # explicit vector code, not left to LLVM's vectorizer
    body = _loop_body_instructions(compiled.assembly())
    packed = [line for line in body if PACKED.search(line)]
    assert packed, "no packed single-precision arithmetic in the kernel"
    assert all(register_name(isa_target) in line for line in packed)
    a, b, c = random_arrays(from_script(VECTOR_SCRIPT))
    build(from_script(VECTOR_SCRIPT), isa_target)(a, b, c)
    np.testing.assert_allclose(c, np.maximum(a * b + 1, 0), rtol=1e-6)


def test_register_tiled_matmul_is_an_fma_micro_kernel(isa_target: Target) -> None:
    sch = register_tiled_matmul(zoo.build("matmul", 64, 64, 64), rows=8, cols=32, parallel=False)
    body = _loop_body_instructions(compile_module(sch.mod, isa_target).assembly())
    fmas = [line for line in body if re.search(r"vfmadd\d+ps\s", line)]
    vectors = 32 // vector_lanes(isa_target)
    assert len(fmas) >= 8 * vectors * 4  # 8 rows x the 32 columns' vectors x 4 unrolled k steps at least
    assert all(register_name(isa_target) in line for line in fmas)


THREADS_SCRIPT = '''
from tvm.script import tir as T
@T.prim_func
def main(O: T.Buffer((64,), "int32")):
    for i in T.parallel(64):
        with T.block("b"):
            vi = T.axis.spatial(64, i)
            O[vi] = T.call_extern("int32", "omp_get_thread_num")
'''


def test_parallel_loop_runs_on_several_threads() -> None:
    kernel = build(from_script(THREADS_SCRIPT))
    kernel.num_threads = 2
    out = np.full(64, -1, dtype="int32")
    kernel(out)
    assert set(out.tolist()) == {0, 1}
    # static chunks, like TVM's parallel launch: the first half on thread 0
    assert (out[:32] == 0).all() and (out[32:] == 1).all()
    kernel.num_threads = 1
    kernel(out)
    assert set(out.tolist()) == {0}


def test_parallel_kernel_with_per_thread_buffers_is_correct(isa_target: Target) -> None:
    sch = register_tiled_matmul(zoo.build("matmul", 48, 64, 40), rows=4, cols=16, parallel=True)
    kernel = build(sch.mod, isa_target)
    kernel.num_threads = 2
    a, b, c = random_arrays(sch.mod, seed=3)
    kernel(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4)


def test_time_evaluator_follows_tvm_semantics() -> None:
    mod = from_script(VECTOR_SCRIPT)
    kernel = build(mod)
    arrays = random_arrays(mod, seed=1)
    result = kernel.time_evaluator(number=2, repeat=3, min_repeat_ms=1)(*arrays)
    assert len(result.results) == 3
    assert all(r > 0 for r in result.results)
    assert result.number >= 2  # grown until a repeat lasts min_repeat_ms
    assert result.min <= result.median <= result.max


ODD_SCRIPT = '''
from tvm.script import tir as T
@T.prim_func
def main(A: T.Buffer((2, {n}), "float32"), B: T.Buffer((2, {n}), "float32"), C: T.Buffer((2, {n}), "int32")):
    for i in range(2):
        for j in T.vectorized({n}):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj] * T.float32(2) + A[vi, {n} - 1 - vj] + T.if_then_else(vj > 0, A[vi, vj - 1], T.float32(0))
                C[vi, vj] = T.floordiv(vj * 7 - 20, vi + 1)
'''


@pytest.mark.parametrize("n", [3, 7, 16, 43, 100, 129])
def test_vectorized_loops_of_any_extent(n: int, isa_target: Target) -> None:
    """Power-of-two extents are one vector; others are padded with masked-off lanes (or run in
    16-lane chunks with a masked tail above 64 lanes)."""
    mod = from_script(ODD_SCRIPT.format(n=n))
    compiled = compile_module(mod, isa_target)
    assert "x float>" in compiled.llvm_ir
    check_against_interpreter(mod, seed=n, target=isa_target)


def test_lane_dependent_predicate_becomes_masked_vector_code(isa_target: Target) -> None:
    from msdb.schedule import Schedule

    mod = zoo.build("relu0", 1, 100)
    sch = Schedule(mod)
    i, j = sch.get_loops(sch.get_block("Y"))
    j0, j1 = sch.split(j, [None, 16])  # 7 x 16 = 112 > 100: predicated
    sch.vectorize(j1)
    compiled = compile_module(sch.mod, isa_target)
    # stored in pieces of one register (masked.py): 16 lanes with AVX-512, two 8-lane ones with AVX2
    assert f"llvm.masked.store.v{min(16, vector_lanes(isa_target))}f32" in compiled.llvm_ir
    check_against_interpreter(mod, sch.mod, seed=4, arrays=random_arrays(mod, seed=4, low=-1.0), target=isa_target)
