"""Expression and statement semantics of the CPU code generator, checked against msdb's
interpreter: integer division flavours, casts and wrap-around, select / lazy if_then_else,
min/max, math intrinsics, float16 storage, bool buffers, lets, and the same expressions inside
vectorized loops."""

from __future__ import annotations

import numpy as np
import pytest

from msdb.records.target import Target
from msdb.ir import expr as E
from msdb.ir import from_script
from msdb.ir import stmt as S
from msdb.tuner import CodegenError, build
from tests.tuner._util import check_against_interpreter, one_buffer_module, random_arrays

INT_SCRIPT = '''
from tvm.script import tir as T
@T.prim_func
def main(A: T.Buffer((64,), "int32"), B: T.Buffer((64,), "int32"), O: T.Buffer((64, 10), "int32")):
    for i in range(64):
        with T.block("b"):
            vi = T.axis.spatial(64, i)
            O[vi, 0] = T.floordiv(A[vi], B[vi])
            O[vi, 1] = T.floormod(A[vi], B[vi])
            O[vi, 2] = T.truncdiv(A[vi], B[vi])
            O[vi, 3] = T.truncmod(A[vi], B[vi])
            O[vi, 4] = T.max(A[vi], B[vi]) * 100 + T.min(A[vi], B[vi])
            O[vi, 5] = T.Select(A[vi] < 0, A[vi] * 3, B[vi] - 7)
            O[vi, 6] = T.Cast("int32", T.Cast("int8", A[vi] * 11))
            O[vi, 7] = T.if_then_else(vi > 0, A[vi - 1], 5)
            O[vi, 8] = T.floordiv(A[vi], 4) + T.floormod(A[vi], 4) * 1000 + T.floordiv(A[vi], -3) * 7
            O[vi, 9] = T.Cast("int32", (A[vi] > B[vi]) and (A[vi] != 3) or (B[vi] <= -5))
'''

FLOAT_SCRIPT = '''
from tvm.script import tir as T
@T.prim_func
def main(A: T.Buffer((64,), "int32"), F: T.Buffer((64,), "float32"), H: T.Buffer((64,), "float16"),
         D: T.Buffer((64,), "float64"), G: T.Buffer((64, 10), "float32")):
    for i in range(64):
        with T.block("b"):
            vi = T.axis.spatial(64, i)
            G[vi, 0] = T.exp(F[vi]) + T.sqrt(F[vi]) * T.log(F[vi] + T.float32(1))
            G[vi, 1] = T.fabs(F[vi] - T.float32(0.5)) + T.floor(F[vi] * T.float32(3.3)) + T.ceil(F[vi])
            G[vi, 2] = T.tanh(F[vi]) + T.sigmoid(F[vi])
            G[vi, 3] = T.Cast("float32", A[vi]) / T.float32(3)
            G[vi, 4] = T.max(F[vi], T.float32(0.3)) - T.min(F[vi], T.float32(0.6))
            G[vi, 5] = T.pow(F[vi], T.float32(2.5)) + T.erf(F[vi])
            G[vi, 6] = T.Cast("float32", H[vi] * H[vi] + T.float16(1))
            G[vi, 7] = T.floordiv(F[vi] * T.float32(10) - T.float32(5), T.float32(3)) + T.floormod(F[vi] * T.float32(10) - T.float32(5), T.float32(3))
            G[vi, 8] = T.Cast("float32", D[vi] * T.float64(1.5) + T.Cast("float64", F[vi]))
            G[vi, 9] = T.Cast("float32", T.Cast("int32", F[vi] * T.float32(20) - T.float32(10)))
'''


def _int_inputs(mod):
    arrays = random_arrays(mod, seed=3)
    rng = np.random.default_rng(4)
    b = rng.integers(1, 9, size=64).astype("int32") * rng.choice([-1, 1], size=64).astype("int32")
    arrays[1][...] = b  # no division by zero, both signs
    return arrays


def test_integer_semantics_match_the_interpreter(isa_target: Target) -> None:
    mod = from_script(INT_SCRIPT)
    check_against_interpreter(mod, arrays=_int_inputs(mod), rtol=0, atol=0, target=isa_target)


def test_float_and_math_semantics_match_the_interpreter(isa_target: Target) -> None:
    mod = from_script(FLOAT_SCRIPT)
    arrays = random_arrays(mod, seed=5)
    check_against_interpreter(mod, arrays=arrays, rtol=1e-4, atol=1e-4, target=isa_target)


def test_floor_division_has_python_semantics(isa_target: Target) -> None:
    mod = from_script(INT_SCRIPT)
    arrays = _int_inputs(mod)
    a, b, out = arrays
    build(mod, isa_target)(a, b, out)
    assert (out[:, 0] == a // b).all()
    assert (out[:, 1] == a % b).all()
    assert (out[:, 2] == np.trunc(a / b).astype("int32")).all()
    assert (out[:, 3] == np.fmod(a, b)).all()


VECTOR_SCRIPT = '''
from tvm.script import tir as T
@T.prim_func
def main(F: T.Buffer((4, 32), "float32"), A: T.Buffer((4, 32), "int32"), G: T.Buffer((4, 32), "float32"),
         O: T.Buffer((4, 32), "int32")):
    for i in range(4):
        for j in T.vectorized(32):
            with T.block("b"):
                vi, vj = T.axis.remap("SS", [i, j])
                G[vi, vj] = T.exp(F[vi, vj]) * T.max(F[vi, vj], T.float32(0.25)) + T.Select(vj < 7, F[vi, 31 - vj], T.float32(2)) + T.if_then_else(vi > 0, F[vi - 1, vj], T.float32(0))
                O[vi, vj] = T.floordiv(A[vi, vj], 3) + T.floormod(vj * 5, 7) + T.Cast("int32", F[vi, vj] > T.float32(0.5))
'''


def test_vectorized_loop_with_mixed_accesses_matches_the_interpreter(isa_target: Target) -> None:
    mod = from_script(VECTOR_SCRIPT)
    check_against_interpreter(mod, arrays=random_arrays(mod, seed=7), rtol=1e-5, atol=1e-6, target=isa_target)


DTYPE_SCRIPT = '''
from tvm.script import tir as T
@T.prim_func
def main(A: T.Buffer((40,), "int8"), B: T.Buffer((40,), "uint8"), C: T.Buffer((40,), "int64"),
         M: T.Buffer((40,), "bool"), O: T.Buffer((40, 5), "int64"), P: T.Buffer((40,), "bool"), Q: T.Buffer((40,), "int8")):
    for i in T.vectorized(40):
        with T.block("b"):
            vi = T.axis.spatial(40, i)
            O[vi, 0] = T.Cast("int64", A[vi]) * C[vi]
            O[vi, 1] = T.Cast("int64", B[vi]) + T.Cast("int64", T.Cast("int8", B[vi]))
            O[vi, 2] = T.Select(M[vi], C[vi], T.int64(-9))
            O[vi, 3] = T.floordiv(C[vi], T.int64(5))
            O[vi, 4] = T.Cast("int64", T.Cast("uint8", A[vi]) // T.uint8(3))
            P[vi] = M[vi] and (A[vi] > T.int8(0))
            Q[vi] = A[vi] * T.int8(9) + T.int8(100)
'''


def test_small_and_wide_integer_dtypes_and_bool_buffers(isa_target: Target) -> None:
    mod = from_script(DTYPE_SCRIPT)
    check_against_interpreter(mod, arrays=random_arrays(mod, seed=11), rtol=0, atol=0, target=isa_target)


def test_let_statements_and_serial_loops_with_offsets(isa_target: Target) -> None:
    def body(A: E.Buffer, i: E.Var) -> S.Stmt:
        x = E.Var("x", "float32")
        k = E.Var("k", "int64")
        inner = S.For(k, E.IntImm("int64", 2), E.IntImm("int64", 3), S.ForKind.SERIAL,
                      S.BufferStore(A, E.Add(E.BufferLoad(A, (i,)), E.Mul(x, E.Cast("float32", k))), (i,)))
        return S.For(i, E.IntImm("int64", 1), E.IntImm("int64", 15), S.ForKind.SERIAL,
                     S.LetStmt(x, E.Add(E.BufferLoad(A, (E.Sub(i, E.IntImm("int64", 1)),)), E.FloatImm("float32", 1.0)), inner))

    mod = one_buffer_module(16, body)
    check_against_interpreter(mod, arrays=random_arrays(mod, seed=2), target=isa_target)


def test_unsupported_dtype_is_a_clear_error() -> None:
    mod = one_buffer_module(4, lambda A, i: S.For(i, E.IntImm("int64", 0), E.IntImm("int64", 4), S.ForKind.SERIAL,
                                                  S.BufferStore(A, E.FloatImm("bfloat16", 1.0), (i,))), dtype="bfloat16")
    with pytest.raises(CodegenError, match="bfloat16"):
        build(mod)


def test_wrong_arguments_are_rejected_before_the_call() -> None:
    mod = from_script(INT_SCRIPT)
    kernel = build(mod)
    a, b, out = _int_inputs(mod)
    with pytest.raises(CodegenError, match="takes 3 arrays"):
        kernel(a, b)
    with pytest.raises(CodegenError, match="dtype"):
        kernel(a.astype("float32"), b, out)
    with pytest.raises(CodegenError, match="shape"):
        kernel(a[:10], b, out)
    with pytest.raises(CodegenError, match="contiguous"):
        kernel(a, b, np.asfortranarray(out))
    with pytest.raises(CodegenError, match="shape"):  # a bound call is checked when it is bound
        kernel.bind(a[:10], b, out)


def test_a_bound_kernel_computes_what_a_called_one_computes_on_the_same_arrays() -> None:
    """`Kernel.bind` (a compiled model's steps): the arrays checked once, every later call on
    their current contents."""
    mod = from_script(INT_SCRIPT)
    kernel = build(mod)
    a, b, out = _int_inputs(mod)
    expected = out.copy()
    kernel(a, b, expected)
    bound = kernel.bind(a, b, out)
    bound()
    np.testing.assert_array_equal(out, expected)
    a += 1
    kernel(a, b, expected)
    bound()
    np.testing.assert_array_equal(out, expected)


SELECT_BY_UNROLLED_INDEX = '''
from tvm.script import tir as T
@T.prim_func
def main(A: T.Buffer((16, 3), "float32"), O: T.Buffer((16, 4), "float32")):
    for i in range(16):
        for k in T.unroll(4):
            with T.block("b"):
                vi, vk = T.axis.remap("SS", [i, k])
                O[vi, vk] = T.Select(vk < 2, T.Select(vk < 1, A[vi, 0] + A[vi, 1], A[vi, 1] - A[vi, 2]),
                                     T.Select(vk < 3, A[vi, 0] * T.float32(2), A[vi, 2]))
'''


def test_a_select_on_an_unrolled_index_emits_only_the_taken_case(isa_target: Target) -> None:
    """Cases chosen by Selects on a loop index: once the loop is unrolled, each copy emits its
    one case and no `select` instruction (as `if_then_else` does), and the result is the
    interpreter's."""
    from msdb.tuner.codegen import emit_llvm_ir

    mod = from_script(SELECT_BY_UNROLLED_INDEX)
    check_against_interpreter(mod, rtol=0, atol=0, target=isa_target)
    text, _, _ = emit_llvm_ir(mod)
    assert " select " not in text
    assert text.count("fsub") == 1 and text.count("fmul") == 1


def _two_functions(first: str, second: str, n: int) -> str:
    """TVMScript applying `first` and `second` to F's elements into columns 0 and 1 of G
    (scalar code) and of V (8-lane vectors)."""
    return f'''
from tvm.script import tir as T
@T.prim_func
def main(F: T.Buffer(({n},), "float32"), G: T.Buffer(({n}, 2), "float32"), V: T.Buffer(({n}, 2), "float32")):
    for i in range({n}):
        with T.block("scalar"):
            vi = T.axis.spatial({n}, i)
            G[vi, 0] = T.{first}(F[vi])
            G[vi, 1] = T.{second}(F[vi])
    for o in range({n // 8}):
        for j in T.vectorized(8):
            with T.block("vector"):
                vi = T.axis.spatial({n}, o * 8 + j)
                V[vi, 0] = T.{first}(F[vi])
                V[vi, 1] = T.{second}(F[vi])
'''


def test_erf_and_tanh_are_inline_and_as_accurate_as_a_few_float32_ulps(isa_target: Target) -> None:
    """float32 erf and tanh are emitted as arithmetic (`msdb.tuner.codegen.rational`, so that
    GELU epilogues vectorize): on a dense grid over both saturations, scalar and vector code
    agree with double precision within 5e-7 (absolute and relative); signed zero, +-inf and
    NaN come out as libm's."""
    import math

    grid = np.concatenate([np.linspace(-12, 12, 200_000, dtype="float32"),
                           np.float32([0.0, -0.0, 1e-30, -1e-20, 1e-6, np.inf, -np.inf, np.nan])])
    grid = np.concatenate([grid, np.zeros((-len(grid)) % 8, "float32")])
    n = len(grid)
    mod = from_script(_two_functions("erf", "tanh", n))
    kernel = build(mod, isa_target)
    assert kernel.llvm_ir and "erff" not in kernel.llvm_ir and "tanhf" not in kernel.llvm_ir
    scalar, vector = np.zeros((n, 2), "float32"), np.zeros((n, 2), "float32")
    kernel(grid, scalar, vector)
    for column, f in enumerate((math.erf, math.tanh)):
        finite = np.isfinite(grid)
        expected = np.array([f(float(x)) for x in grid[finite]])
        for got in (scalar[finite, column], vector[finite, column]):
            assert (np.abs(got.astype("float64") - expected) <= 5e-7 * np.abs(expected)).all()
            assert (np.abs(got) <= 1).all()
        for out in (scalar, vector):
            assert out[grid == np.inf, column].tolist() == [1.0]
            assert out[grid == -np.inf, column].tolist() == [-1.0]
            assert np.isnan(out[np.isnan(grid), column]).all()
            assert np.signbit(out[np.flatnonzero(np.signbit(grid) & (grid == 0)), column]).all()


def test_exp_is_inline_and_within_one_float32_ulp(isa_target: Target) -> None:
    """float32 exp (and sigmoid's) is emitted as arithmetic (`msdb.tuner.codegen.rational.EXP`, so
    that softmax vectorizes, not a libm call per lane): over the whole float32 range, scalar and
    vector code are within one unit in the last place of the correctly rounded result where it
    is normal, within the smallest denormal below, 0 and inf where exp underflows and overflows
    (as numpy's), 1 at +-0, and NaN for NaN; sigmoid within 3e-7."""
    grid = np.concatenate([np.linspace(-110, 90, 400_000, dtype="float32"),
                           np.linspace(-1, 1, 10_001, dtype="float32"),
                           np.float32([0.0, -0.0, 1e-30, -1e-20, 88.72, 88.73, -87.34, -103.9, -104.5,
                                        np.inf, -np.inf, np.nan])])
    grid = np.concatenate([grid, np.zeros((-len(grid)) % 8, "float32")])
    n = len(grid)
    kernel = build(from_script(_two_functions("exp", "sigmoid", n)), isa_target)
    assert kernel.llvm_ir and "expf" not in kernel.llvm_ir and "llvm.exp" not in kernel.llvm_ir
    scalar, vector = np.zeros((n, 2), "float32"), np.zeros((n, 2), "float32")
    kernel(grid, scalar, vector)
    finite = np.isfinite(grid)
    with np.errstate(over="ignore"):
        expected = np.exp(grid.astype("float64"))
        rounded = expected.astype("float32").astype("float64")
        sigmoid = 1 / (1 + np.exp(-grid.astype("float64")))
    normal = finite & (rounded >= np.finfo("float32").tiny) & np.isfinite(rounded)
    tiny = finite & (rounded < np.finfo("float32").tiny)
    for out in (scalar, vector):
        got = out[:, 0].astype("float64")
        assert (np.abs(got[normal] - expected[normal]) <= 2.0 ** -23 * expected[normal]).all()
        assert (np.abs(got[tiny] - expected[tiny]) <= 2.0 ** -149).all()
        assert np.array_equal(np.isinf(got[finite]), np.isinf(rounded[finite]))
        assert got[grid == np.inf].tolist() == [np.inf] and got[grid == -np.inf].tolist() == [0.0]
        assert (got[grid == 0] == 1).all() and np.isnan(got[np.isnan(grid)]).all()
        sig = out[:, 1].astype("float64")
        # below -88.7, exp(-x) overflows float32 and 1 / (1 + inf) is 0, as with libm's exp
        assert (np.abs(sig[finite] - sigmoid[finite]) <= 3e-7 * sigmoid[finite] + np.finfo("float32").tiny).all()


POWER_SCRIPT = '''
from tvm.script import tir as T
@T.prim_func
def main(F: T.Buffer((64,), "float32"), G: T.Buffer((64, 5), "float32")):
    for o in range(8):
        for j in T.vectorized(8):
            with T.block("b"):
                vi = T.axis.spatial(64, o * 8 + j)
                G[vi, 0] = T.pow(F[vi], T.float32(2.0))
                G[vi, 1] = T.pow(F[vi], T.float32(3.0))
                G[vi, 2] = T.pow(F[vi], T.float32(4.0))
                G[vi, 3] = T.pow(F[vi], T.float32(1.0))
                G[vi, 4] = T.pow(T.fabs(F[vi]), T.float32(2.5))
'''


def test_small_integer_powers_are_products(isa_target: Target) -> None:
    """pow(x, 1 to 4) is emitted as multiplications (GPT-2's GELU cubes its input), within an
    ulp or two of numpy's power; other exponents stay llvm.pow."""
    kernel = build(from_script(POWER_SCRIPT), isa_target)
    assert kernel.llvm_ir.count("llvm.pow") >= 1  # the 2.5 only
    x = np.random.default_rng(0).standard_normal(64).astype("float32") * 3
    out = np.zeros((64, 5), "float32")
    kernel(x, out)
    for column, n in enumerate((2, 3, 4, 1)):
        np.testing.assert_allclose(out[:, column], x.astype("float64") ** n, rtol=3e-7)
    np.testing.assert_allclose(out[:, 4], np.abs(x.astype("float64")) ** 2.5, rtol=1e-6)
    emitted_pows = build(from_script(POWER_SCRIPT.replace("G[vi, 4] = T.pow(T.fabs(F[vi]), T.float32(2.5))",
                                                          "G[vi, 4] = F[vi]")), isa_target).llvm_ir
    assert "llvm.pow" not in emitted_pows
