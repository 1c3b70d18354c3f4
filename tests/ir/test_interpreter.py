"""The reference interpreter runs TensorIR exactly: each construct and semantic corner on
hand-built IR, a differential check of integer arithmetic against a plain Python evaluator, and
every zoo workload against an independent numpy implementation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from msdb.errors import MsdbError
from msdb.ir import expr as E
from msdb.ir import stmt as S
from msdb.ir.function import IRModule, PrimFunc
from msdb.ir.functor import substitute
from msdb.ir.interpreter import entry as interpreter_entry
from msdb.ir.interpreter import InterpreterError, compile_func, interpret

# ---------------------------------------------------------------------------------------------
# Builders for hand-written IR
# ---------------------------------------------------------------------------------------------

TRUE = E.IntImm("bool", 1)


def c(value: int, dtype: str = "int32") -> E.IntImm:
    return E.IntImm(dtype, value)


def f32(value: float) -> E.FloatImm:
    return E.FloatImm("float32", value)


def buf(name: str, shape: tuple, dtype: str = "float32", scope: str = "global") -> E.Buffer:
    return E.Buffer(name, tuple(c(s) if isinstance(s, int) else s for s in shape), dtype, scope)


def loop(var: E.Var, extent: int, body: S.Stmt, kind: S.ForKind = S.ForKind.SERIAL, start: int = 0) -> S.For:
    binding = None
    if kind == S.ForKind.THREAD_BINDING:
        binding = S.IterVar(E.Range(c(0), c(extent)), E.Var("threadIdx.x"), S.IterType.THREAD_INDEX, "threadIdx.x")
    return S.For(var, c(start), c(extent), kind, body, binding)


def nest(loops: list[tuple[E.Var, int]], body: S.Stmt) -> S.Stmt:
    for var, extent in reversed(loops):
        body = loop(var, extent, body)
    return body


def iv(var: E.Var, extent: int, kind: str = "S", start: int = 0) -> S.IterVar:
    types = {"S": S.IterType.DATA_PAR, "R": S.IterType.COMM_REDUCE, "O": S.IterType.OPAQUE}
    return S.IterVar(E.Range(c(start), c(extent)), var, types[kind])


def realize(name: str, iters: list[S.IterVar], values: list, body: S.Stmt, *, init: S.Stmt | None = None,
            predicate: E.PrimExpr = TRUE, allocs: tuple = (), matches: tuple = ()) -> S.BlockRealize:
    block = S.Block(tuple(iters), (), (), name, body, init, allocs, matches)
    return S.BlockRealize(tuple(E.convert(v) for v in values), predicate, block)


def func(params: list[E.Buffer], body: S.Stmt, allocs: tuple = (), scalars: tuple = ()) -> PrimFunc:
    handles = [E.Var(b.name, "handle") for b in params]
    root = S.BlockRealize((), TRUE, S.Block((), (), (), "root", body, None, allocs))
    return PrimFunc(tuple(handles) + tuple(scalars), dict(zip(handles, params)), root)


def store(buffer: E.Buffer, value, *indices) -> S.BufferStore:
    return S.BufferStore(buffer, E.convert(value, buffer.dtype), tuple(E.convert(i) for i in indices))


def elementwise(out_dtype: str, n: int, value_fn, in_dtypes: tuple[str, ...] = (), start: int = 0) -> PrimFunc:
    """out[i] = value_fn(v, *inputs) for i in [0, n); `v` is the block var bound to i + start."""
    ins = [buf(f"X{k}", (n,), dt) for k, dt in enumerate(in_dtypes)]
    out = buf("Y", (n,), out_dtype)
    i, v = E.Var("i"), E.Var("v")
    body = realize("Y", [iv(v, n, start=start)], [i + start], store(out, value_fn(v, *ins), v - start))
    return func(ins + [out], loop(i, n, body))


def matmul_func(n: int, m: int, k: int, dtype: str = "float32") -> PrimFunc:
    A, B, C = buf("A", (n, k), dtype), buf("B", (k, m), dtype), buf("C", (n, m), dtype)
    i, j, r = E.Var("i"), E.Var("j"), E.Var("k")
    vi, vj, vk = E.Var("vi"), E.Var("vj"), E.Var("vk")
    body = realize(
        "C", [iv(vi, n), iv(vj, m), iv(vk, k, "R")], [i, j, r],
        store(C, C[vi, vj] + A[vi, vk] * B[vk, vj], vi, vj),
        init=store(C, E.make_const(0, dtype), vi, vj),
    )
    return func([A, B, C], nest([(i, n), (j, m), (r, k)], body))


RNG_SEED = 20240611


def rand(shape: tuple, dtype: str = "float32", seed: int = RNG_SEED) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dtype.startswith("float"):
        return rng.standard_normal(shape).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, size=shape, endpoint=True, dtype=dtype)


# ---------------------------------------------------------------------------------------------
# Statements and blocks
# ---------------------------------------------------------------------------------------------


def test_matmul_matches_numpy_and_accumulates_in_float32():
    a, b = rand((8, 6)), rand((6, 5), seed=2)
    out = np.full((8, 5), 123.0, np.float32)  # garbage the init must overwrite
    interpret(matmul_func(8, 5, 6), a, b, out)
    # Sequential float32 accumulation, exactly what the loop nest computes.
    expected = np.zeros((8, 5), np.float32)
    for kk in range(6):
        expected = expected + a[:, kk : kk + 1] * b[kk : kk + 1, :]
    np.testing.assert_array_equal(out, expected)


def test_module_and_function_are_both_accepted_and_return_none():
    f = matmul_func(2, 2, 2)
    a, b = np.eye(2, dtype=np.float32), rand((2, 2))
    out = np.zeros((2, 2), np.float32)
    assert interpret(IRModule.from_func(f), a, b, out) is None
    np.testing.assert_array_equal(out, b)


def test_init_runs_when_every_split_reduction_var_is_at_its_minimum():
    # k (extent 12) split into k0 * 4 + k1 and placed outermost: the init must fire exactly once
    # per output, at k0 == 0 and k1 == 0, even though the spatial loop sits in between.
    A, C = buf("A", (3, 12)), buf("C", (3,))
    i, k0, k1, vi, vk = E.Var("i"), E.Var("k0"), E.Var("k1"), E.Var("vi"), E.Var("vk")
    body = realize("C", [iv(vi, 3), iv(vk, 12, "R")], [i, k0 * 4 + k1],
                   store(C, C[vi] + A[vi, vk], vi), init=store(C, f32(0.0), vi))
    f = func([A, C], nest([(k0, 3), (i, 3), (k1, 4)], body))
    a = rand((3, 12))
    out = np.full(3, 7.0, np.float32)
    interpret(f, a, out)
    expected = np.zeros(3, np.float32)
    for kk in range(12):
        expected = expected + a[:, kk]
    np.testing.assert_array_equal(out, expected)


def test_init_uses_the_domain_minimum_of_each_reduction_var():
    # Two reduction vars; the second has domain [2, 5): init fires when vr == 0 and vs == 2.
    A, C = buf("A", (4, 5)), buf("C", (1,))
    r, s, vr, vs, vo = E.Var("r"), E.Var("s"), E.Var("vr"), E.Var("vs"), E.Var("vo")
    body = realize("C", [iv(vo, 1), iv(vr, 4, "R"), iv(vs, 3, "R", start=2)], [c(0), r, s + 2],
                   store(C, C[vo] + A[vr, vs], vo), init=store(C, f32(100.0), vo))
    f = func([A, C], nest([(r, 4), (s, 3)], body))
    a = np.arange(20, dtype=np.float32).reshape(4, 5)
    out = np.zeros(1, np.float32)
    interpret(f, a, out)
    assert out[0] == 100.0 + a[:, 2:].sum()


def test_init_without_reduction_vars_runs_every_time():
    C = buf("C", (4,))
    i, vi = E.Var("i"), E.Var("vi")
    body = realize("C", [iv(vi, 4)], [i], store(C, C[vi] + f32(1.0), vi), init=store(C, f32(10.0), vi))
    out = np.zeros(4, np.float32)
    interpret(func([C], loop(i, 4, body)), out)
    np.testing.assert_array_equal(out, np.full(4, 11.0, np.float32))


def test_false_predicate_skips_the_block():
    # 10 elements through a 3 x 4 split: the predicate drops the last two iterations, whose
    # indices would be out of bounds.
    A, B = buf("A", (10,)), buf("B", (10,))
    i0, i1, v = E.Var("i0"), E.Var("i1"), E.Var("v")
    body = realize("B", [iv(v, 10)], [i0 * 4 + i1], store(B, A[v] * f32(2.0), v), predicate=(i0 * 4 + i1) < 10)
    a = rand((10,))
    out = np.zeros(10, np.float32)
    interpret(func([A, B], nest([(i0, 3), (i1, 4)], body)), a, out)
    np.testing.assert_array_equal(out, a * np.float32(2.0))


@pytest.mark.parametrize("kind", list(S.ForKind))
def test_every_loop_kind_iterates_over_its_extent(kind):
    B = buf("B", (6,), "int32")
    i, v = E.Var("i"), E.Var("v")
    body = realize("B", [iv(v, 6)], [i], store(B, B[v] + v * 10 + 1, v))
    out = np.zeros(6, np.int32)
    interpret(func([B], loop(i, 6, body, kind)), out)
    np.testing.assert_array_equal(out, np.arange(6, dtype=np.int32) * 10 + 1)


def test_loop_with_nonzero_minimum():
    B = buf("B", (8,), "int32")
    i = E.Var("i")
    body = realize("B", [], [], store(B, i * 3, i))
    out = np.full(8, -1, np.int32)
    interpret(func([B], loop(i, 5, body, start=2)), out)
    np.testing.assert_array_equal(out, [-1, -1, 6, 9, 12, 15, 18, -1])


def test_alloc_buffer_is_fresh_and_zeroed_on_every_block_execution():
    # Each execution of "outer" accumulates into its local scratch; if the scratch survived
    # between executions the sums would grow.
    A, B = buf("A", (4, 3)), buf("B", (4,))
    scratch = buf("acc", (1,), scope="local")
    i, k, vi, vk = E.Var("i"), E.Var("k"), E.Var("vi"), E.Var("vk")
    inner = realize("acc", [iv(vk, 3, "R")], [k], store(scratch, scratch[0] + A[vi, vk], 0))
    body = S.SeqStmt((loop(k, 3, inner), store(B, scratch[0], vi)))
    outer = realize("outer", [iv(vi, 4)], [i], body, allocs=(scratch,))
    a = rand((4, 3))
    out = np.zeros(4, np.float32)
    interpret(func([A, B], loop(i, 4, outer)), a, out)
    np.testing.assert_allclose(out, a.sum(axis=1), rtol=1e-6)


def test_root_alloc_buffers_with_shared_and_local_scopes_behave_as_arrays():
    A, B = buf("A", (8,)), buf("B", (8,))
    shared, local = buf("A_shared", (8,), scope="shared"), buf("B_local", (8,), scope="local")
    i, v = E.Var("i"), E.Var("v")
    body = S.SeqStmt((
        loop(i, 8, realize("copy_in", [iv(v, 8)], [i], store(shared, A[v], v))),
        loop(i, 8, realize("compute", [iv(v, 8)], [i], store(local, shared[v] + f32(1.0), v))),
        loop(i, 8, realize("copy_out", [iv(v, 8)], [i], store(B, local[v], v))),
    ))
    a = rand((8,))
    out = np.zeros(8, np.float32)
    interpret(func([A, B], body, allocs=(shared, local)), a, out)
    np.testing.assert_array_equal(out, a + np.float32(1.0))


def test_match_buffer_is_a_view_that_writes_through():
    # Block "tile" matches a 2x2 sub-region of C (starting at (2*vi, 1)) and writes into it.
    C = buf("C", (4, 4))
    tile = buf("tile", (2, 2))
    i, x, y, vi = E.Var("i"), E.Var("x"), E.Var("y"), E.Var("vi")
    region = S.BufferRegion(C, (E.Range(vi * 2, c(2)), E.Range(c(1), c(2))))
    inner = realize("fill", [], [], store(tile, E.Cast("float32", vi * 10 + x * 2 + y), x, y))
    body = realize("tile", [iv(vi, 2)], [i], nest([(x, 2), (y, 2)], inner),
                   matches=(S.MatchBufferRegion(tile, region),))
    out = np.zeros((4, 4), np.float32)
    interpret(func([C], loop(i, 2, body)), out)
    expected = np.zeros((4, 4), np.float32)
    for vi_ in range(2):
        for x_ in range(2):
            for y_ in range(2):
                expected[2 * vi_ + x_, 1 + y_] = vi_ * 10 + x_ * 2 + y_
    np.testing.assert_array_equal(out, expected)


def test_match_buffer_with_symbolic_shape_binds_the_extent():
    C = buf("C", (3, 5), "int32")
    n = E.Var("n")
    row = E.Buffer("row", (n,), "int32")
    i, j, vi = E.Var("i"), E.Var("j"), E.Var("vi")
    region = S.BufferRegion(C, (E.Range(vi, c(1)), E.Range(c(0), c(5))))
    inner = realize("fill", [], [], store(row, j + n * 100, j))
    body = realize("row", [iv(vi, 3)], [i], S.For(j, c(0), n, S.ForKind.SERIAL, inner),
                   matches=(S.MatchBufferRegion(row, region),))
    out = np.zeros((3, 5), np.int32)
    interpret(func([C], loop(i, 3, body)), out)
    np.testing.assert_array_equal(out, np.tile(np.arange(5, dtype=np.int32) + 500, (3, 1)))


def test_if_then_else_let_evaluate_and_seq_statements():
    B = buf("B", (6,), "int32")
    i, t = E.Var("i"), E.Var("t")
    then = store(B, t, i)
    other = S.SeqStmt((S.Evaluate(c(0)), store(B, -t, i)))
    body = S.LetStmt(t, i * i, S.IfThenElse(E.FloorMod(i, c(2)).equal(0), then, other))
    out = np.zeros(6, np.int32)
    interpret(func([B], loop(i, 6, realize("B", [], [], body))), out)
    np.testing.assert_array_equal(out, [0, -1, 4, -9, 16, -25])


def test_if_without_else_leaves_values():
    B = buf("B", (4,), "int32")
    i = E.Var("i")
    body = S.IfThenElse(i < 2, store(B, c(5), i))
    out = np.full(4, 9, np.int32)
    interpret(func([B], loop(i, 4, realize("B", [], [], body))), out)
    np.testing.assert_array_equal(out, [5, 5, 9, 9])


def test_symbolic_buffer_shapes_bind_from_the_arguments():
    n = E.Var("n")
    A, B = E.Buffer("A", (n,), "float32"), E.Buffer("B", (n,), "float32")
    i, v = E.Var("i"), E.Var("v")
    body = realize("B", [S.IterVar(E.Range(c(0), n), v, S.IterType.DATA_PAR)], [i], store(B, A[v] + f32(1.0), v))
    f = func([A, B], S.For(i, c(0), n, S.ForKind.SERIAL, body))
    for size in (1, 5, 9):
        a = rand((size,))
        out = np.zeros(size, np.float32)
        interpret(f, a, out)
        np.testing.assert_array_equal(out, a + np.float32(1.0))
    with pytest.raises(InterpreterError, match=r"'B'.*shape \(4,\).*expected \(5,\)"):
        interpret(f, rand((5,)), np.zeros(4, np.float32))


def test_scalar_parameter():
    B = buf("B", (3,), "int32")
    alpha = E.Var("alpha", "int32")
    i = E.Var("i")
    f = func([B], loop(i, 3, realize("B", [], [], store(B, i * alpha, i))), scalars=(alpha,))
    out = np.zeros(3, np.int32)
    interpret(f, out, 7)
    np.testing.assert_array_equal(out, [0, 7, 14])
    with pytest.raises(InterpreterError, match="alpha"):
        interpret(f, out, "seven")


def test_deep_loop_nests_and_deep_expressions_compile():
    # 30 nested loops exceed CPython's 20 nested blocks; a 400-term sum exceeds its parser depth.
    B = buf("B", (1,), "int32")
    loops = [(E.Var(f"l{d}"), 1 if d % 3 else 2) for d in range(30)]
    total = c(0)
    for d, (var, _) in enumerate(loops):
        total = total + var * (d + 1)
    deep = c(0)
    for d in range(400):
        deep = deep + c(d % 7)
    body = realize("B", [], [], store(B, B[0] + total + deep, 0))
    out = np.zeros(1, np.int32)
    interpret(func([B], nest(loops, body)), out)
    # Every loop with extent 2 contributes its (d + 1) once per combination of the others.
    twos = [d for d in range(30) if d % 3 == 0]
    runs = 2 ** len(twos)
    per_run_avg = sum((d + 1) for d in twos) / 2
    expected = runs * per_run_avg + runs * sum(d % 7 for d in range(400))
    assert out[0] == expected


def test_zero_dimensional_buffer_and_awkward_variable_names():
    # A scalar (0-d) output summed over 64 elements; variable names that are Python keywords,
    # builtins or look like the generated code's own names must not clash.
    A, S0 = buf("A", (64,)), buf("S", ())
    names = ["for", "np", "_k", "_t1", "None", "lambda"]
    i, vi = E.Var(names[0]), E.Var(names[1])
    body = realize("S", [iv(vi, 64, "R")], [i], store(S0, S0[()] + A[vi] * f32(2.0)), init=store(S0, f32(0.0)))
    let = E.Var(names[2])
    f = func([A, S0], S.LetStmt(let, c(3), loop(i, 64, body)))
    a = rand((64,))
    out = run_both(f, a, np.zeros((), np.float32), expect_vector=False)[1]
    expected = np.float32(0)
    for x in a:
        expected = expected + x * np.float32(2)
    assert out[()] == expected


def test_compiled_function_is_reusable_and_exposes_source():
    compiled = compile_func(matmul_func(3, 3, 3))
    assert "def _kernel" in compiled.source
    for seed in (1, 2):
        a, b = rand((3, 3), seed=seed), rand((3, 3), seed=seed + 10)
        out = np.zeros((3, 3), np.float32)
        compiled(a, b, out)
        np.testing.assert_allclose(out, a @ b, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------------


def test_out_of_bounds_load_names_buffer_indices_and_block():
    A, B = buf("A", (4,)), buf("B", (4,))
    i, v = E.Var("i"), E.Var("v")
    f = func([A, B], loop(i, 4, realize("shift", [iv(v, 4)], [i], store(B, A[v + 1], v))))
    with pytest.raises(InterpreterError, match=r"load of buffer 'A' at index \(4,\).*shape \(4,\).*block 'shift'"):
        interpret(f, rand((4,)), np.zeros(4, np.float32))


def test_negative_index_is_out_of_bounds_not_wrapped():
    A, B = buf("A", (4,)), buf("B", (4,))
    i, v = E.Var("i"), E.Var("v")
    f = func([A, B], loop(i, 4, realize("prev", [iv(v, 4)], [i], store(B, A[v - 1], v))))
    with pytest.raises(InterpreterError, match=r"buffer 'A' at index \(-1,\).*block 'prev'"):
        interpret(f, rand((4,)), np.zeros(4, np.float32))


def test_out_of_bounds_store_is_reported():
    B = buf("B", (2, 3))
    i, j, vi, vj = E.Var("i"), E.Var("j"), E.Var("vi"), E.Var("vj")
    body = realize("bad", [iv(vi, 2), iv(vj, 4)], [i, j], store(B, f32(1.0), vi, vj))
    f = func([B], nest([(i, 2), (j, 4)], body))
    with pytest.raises(InterpreterError, match=r"store of buffer 'B' at index \(0, 3\).*block 'bad'"):
        interpret(f, np.zeros((2, 3), np.float32))


def test_if_then_else_is_lazy_but_select_evaluates_both_arms():
    A, B = buf("A", (4,)), buf("B", (4,))
    i, v = E.Var("i"), E.Var("v")

    def build(make):
        return func([A, B], loop(i, 4, realize("B", [iv(v, 4)], [i], store(B, make(v >= 1, A[v - 1], f32(0.0)), v))))

    a = rand((4,))
    out = np.zeros(4, np.float32)
    interpret(build(lambda cnd, t, e: E.Call("float32", "if_then_else", (cnd, t, e))), a, out)
    np.testing.assert_array_equal(out, np.concatenate([[0.0], a[:3]]).astype(np.float32))
    with pytest.raises(InterpreterError, match="index \\(-1,\\)"):
        interpret(build(E.Select), a, out)


def test_argument_count_mismatch():
    with pytest.raises(InterpreterError, match=r"expected 3 arguments \(A, B, C\), got 2"):
        interpret(matmul_func(2, 2, 2), np.zeros((2, 2), np.float32), np.zeros((2, 2), np.float32))


@pytest.mark.parametrize(
    "args, pattern",
    [
        ((np.zeros((2, 3), np.float64), np.zeros((3, 2), np.float32), np.zeros((2, 2), np.float32)),
         r"argument 0 \('A'\).*dtype float64, expected float32"),
        ((np.zeros((2, 3), np.float32), np.zeros((2, 3), np.float32), np.zeros((2, 2), np.float32)),
         r"argument 1 \('B'\).*shape \(2, 3\), expected \(3, 2\)"),
        ((np.zeros((2, 3), np.float32), np.zeros((3, 2), np.float32), np.zeros(4, np.float32)),
         r"argument 2 \('C'\).*shape \(4,\), expected 2 dimensions"),
        (([[0.0] * 3] * 2, np.zeros((3, 2), np.float32), np.zeros((2, 2), np.float32)),
         r"argument 0 \('A'\).*must be a numpy array, got list"),
    ],
)
def test_argument_mismatch_names_the_parameter(args, pattern):
    with pytest.raises(InterpreterError, match=pattern):
        interpret(matmul_func(2, 2, 3), *args)


def test_read_only_output_is_rejected_but_read_only_input_is_fine():
    a, b = rand((2, 2)), rand((2, 2))
    a.flags.writeable = False
    out = np.zeros((2, 2), np.float32)
    interpret(matmul_func(2, 2, 2), a, b, out)
    out.flags.writeable = False
    with pytest.raises(InterpreterError, match=r"argument 2 \('C'\).*read-only"):
        interpret(matmul_func(2, 2, 2), a, b, out)


def test_interpreter_error_is_an_msdb_error_and_bad_target_type_is_rejected():
    assert issubclass(InterpreterError, MsdbError)
    with pytest.raises(InterpreterError, match="IRModule or PrimFunc"):
        interpret("not a function")


def test_unknown_op_is_named():
    f = elementwise("float32", 2, lambda v, x: E.Call("float32", "frobnicate", (x[v],)), ("float32",))
    with pytest.raises(InterpreterError, match="'frobnicate'"):
        interpret(f, rand((2,)), np.zeros(2, np.float32))


def test_unbound_variable_and_undeclared_buffer_are_reported():
    ghost = E.Var("ghost")
    f = elementwise("int32", 2, lambda v: v + ghost)
    with pytest.raises(InterpreterError, match="'ghost'"):
        interpret(f, np.zeros(2, np.int32))
    hidden = buf("hidden", (2,))
    f = elementwise("float32", 2, lambda v: hidden[v])
    with pytest.raises(InterpreterError, match="'hidden'"):
        interpret(f, np.zeros(2, np.float32))


def test_integer_division_by_zero_raises():
    f = elementwise("int32", 3, lambda v, x: E.FloorDiv(c(10), x[v]), ("int32",))
    with pytest.raises(InterpreterError, match="division by zero"):
        interpret(f, np.array([1, 0, 2], np.int32), np.zeros(3, np.int32))


# ---------------------------------------------------------------------------------------------
# Expression semantics
# ---------------------------------------------------------------------------------------------


def test_int8_arithmetic_wraps():
    f = elementwise("int8", 4, lambda v, x, y: x[v] + y[v] * c(3, "int8"), ("int8", "int8"))
    x = np.array([100, -128, 127, 5], np.int8)
    y = np.array([10, -1, 1, -50], np.int8)
    out = np.zeros(4, np.int8)
    interpret(f, x, y, out)
    expected = [((int(a) + int(b) * 3 + 128) % 256) - 128 for a, b in zip(x, y)]
    np.testing.assert_array_equal(out, np.array(expected, np.int8))


def test_int32_overflow_wraps_and_uint8_wraps_modulo():
    f = elementwise("int32", 2, lambda v, x: x[v] * c(65536) + c(2**31 - 1), ("int32",))
    out = np.zeros(2, np.int32)
    interpret(f, np.array([1, 32768], np.int32), out)
    # 65536 + (2**31 - 1) wraps; 32768 * 65536 = 2**31 wraps to -2**31, plus 2**31 - 1 gives -1.
    np.testing.assert_array_equal(out, [-2147418113, -1])
    g = elementwise("uint8", 2, lambda v, x: x[v] - c(3, "uint8"), ("uint8",))
    out8 = np.zeros(2, np.uint8)
    interpret(g, np.array([1, 200], np.uint8), out8)
    np.testing.assert_array_equal(out8, [254, 197])


def test_integer_division_family_on_negatives():
    # v runs over [-7, 7]; divisors 3 and -3.
    results = {}
    for name, node in [("floordiv", E.FloorDiv), ("floormod", E.FloorMod), ("div", E.Div), ("mod", E.Mod)]:
        for d in (3, -3):
            f = elementwise("int32", 15, lambda v, node=node, d=d: node(v, c(d)), start=-7)
            out = np.zeros(15, np.int32)
            interpret(f, out)
            results[(name, d)] = out.tolist()
    values = range(-7, 8)
    for d in (3, -3):
        assert results[("floordiv", d)] == [a // d for a in values]
        assert results[("floormod", d)] == [a % d for a in values]
        assert results[("div", d)] == [int(a / d) for a in values]
        assert results[("mod", d)] == [int(math.fmod(a, d)) for a in values]


def test_min_max_comparisons_and_logic():
    def value(v, x, y):
        both = (x[v] < y[v]) & (v > 0)
        either = (x[v].equal(y[v])) | E.Not(v.not_equal(3))
        return E.Cast("int32", both) * 1000 + E.Cast("int32", either) * 100 + E.Max(x[v], y[v]) * 10 + E.Min(x[v], y[v])

    f = elementwise("int32", 5, value, ("int32", "int32"))
    x = np.array([1, 2, 5, 4, 0], np.int32)
    y = np.array([3, 2, 1, 9, 0], np.int32)
    out = np.zeros(5, np.int32)
    interpret(f, x, y, out)
    expected = [
        int(a < b and v > 0) * 1000 + int(a == b or v == 3) * 100 + max(a, b) * 10 + min(a, b)
        for v, (a, b) in enumerate(zip(x.tolist(), y.tolist()))
    ]
    np.testing.assert_array_equal(out, expected)


def test_casts_truncate_and_round_trip_through_float16():
    f = elementwise("int32", 4, lambda v, x: E.Cast("int32", x[v]), ("float32",))
    out = np.zeros(4, np.int32)
    interpret(f, np.array([2.7, -2.7, 0.5, -0.5], np.float32), out)
    np.testing.assert_array_equal(out, [2, -2, 0, 0])

    g = elementwise("float16", 3, lambda v, x: E.Cast("float16", x[v] * f32(3.0)), ("float32",))
    out16 = np.zeros(3, np.float16)
    x = np.array([0.1, 1000.3, -7.77], np.float32)
    interpret(g, x, out16)
    np.testing.assert_array_equal(out16, (x * np.float32(3)).astype(np.float16))

    h = elementwise("float32", 3, lambda v, x: E.Cast("float32", x[v]) / f32(2.0), ("int8",))
    outf = np.zeros(3, np.float32)
    interpret(h, np.array([-128, 3, 127], np.int8), outf)
    np.testing.assert_array_equal(outf, [-64.0, 1.5, 63.5])

    k = elementwise("int8", 2, lambda v, x: E.Cast("int8", x[v]), ("int32",))
    out8 = np.zeros(2, np.int8)
    interpret(k, np.array([300, -129], np.int32), out8)
    np.testing.assert_array_equal(out8, [44, 127])


def test_float16_arithmetic_is_stored_as_float16():
    f = elementwise("float16", 3, lambda v, x, y: x[v] * y[v] + x[v], ("float16", "float16"))
    x = np.array([1.001, 3.3, -0.2], np.float16)
    y = np.array([1000.0, 0.1, 7.0], np.float16)
    out = np.zeros(3, np.float16)
    interpret(f, x, y, out)
    np.testing.assert_array_equal(out, x * y + x)


UNARY_CASES = [
    ("exp", np.exp), ("exp2", np.exp2), ("log", np.log), ("log2", np.log2), ("log10", np.log10),
    ("sqrt", np.sqrt), ("rsqrt", lambda a: np.float32(1) / np.sqrt(a)), ("sin", np.sin), ("cos", np.cos),
    ("tanh", np.tanh), ("sigmoid", lambda a: np.float32(1) / (np.float32(1) + np.exp(-a))),
    ("fabs", np.abs), ("floor", np.floor), ("ceil", np.ceil), ("round", np.rint), ("trunc", np.trunc),
    ("erf", lambda a: np.array([math.erf(float(t)) for t in a], np.float32)),
]


@pytest.mark.parametrize("op, reference", UNARY_CASES, ids=[name for name, _ in UNARY_CASES])
def test_unary_math_calls_are_computed_in_float32(op, reference):
    x = np.array([0.25, 1.5, 2.5, 3.75, 10.0], np.float32)  # 2.5 checks round-half-to-even
    f = elementwise("float32", 5, lambda v, a: E.Call("float32", op, (a[v],)), ("float32",))
    out = np.zeros(5, np.float32)
    interpret(f, x, out)
    np.testing.assert_allclose(out, reference(x).astype(np.float32), rtol=1e-6)


def test_binary_math_calls_and_extreme_values():
    x = np.array([2.0, -7.5, 9.0], np.float32)
    y = np.array([3.0, 2.0, 0.5], np.float32)
    for op, reference in [("pow", np.power), ("fmod", np.fmod)]:
        f = elementwise("float32", 3, lambda v, a, b, op=op: E.Call("float32", op, (a[v], b[v])), ("float32", "float32"))
        out = np.zeros(3, np.float32)
        interpret(f, x, y, out)
        np.testing.assert_allclose(out, reference(x, y), rtol=1e-6)
    for dtype in ("float32", "int8", "float16"):
        for op, expected in [("max_value", "max"), ("min_value", "min")]:
            f = elementwise(dtype, 1, lambda v, op=op, dtype=dtype: E.Call(dtype, op, ()))
            out = np.zeros(1, dtype)
            interpret(f, out)
            info = np.finfo(dtype) if dtype.startswith("float") else np.iinfo(dtype)
            assert out[0] == getattr(info, expected)


def test_isnan_and_float_floordiv():
    f = elementwise("int32", 3, lambda v, x: E.Cast("int32", E.Call("bool", "isnan", (x[v],))), ("float32",))
    out = np.zeros(3, np.int32)
    interpret(f, np.array([np.nan, 1.0, np.inf], np.float32), out)
    np.testing.assert_array_equal(out, [1, 0, 0])
    g = elementwise("float32", 2, lambda v, x: E.FloorDiv(x[v], f32(2.0)) + E.FloorMod(x[v], f32(2.0)) * f32(100.0), ("float32",))
    outf = np.zeros(2, np.float32)
    interpret(g, np.array([-3.0, 5.0], np.float32), outf)
    np.testing.assert_array_equal(outf, [-2.0 + 100.0, 2.0 + 100.0])


def test_float32_sum_rounds_like_float32_not_float64():
    # 2**24 + 1 is not representable in float32: a float64 accumulator would give a different sum.
    f = elementwise("float32", 1, lambda v, x: x[v] + f32(1.0) + f32(1.0), ("float32",))
    out = np.zeros(1, np.float32)
    interpret(f, np.array([2.0**24], np.float32), out)
    assert out[0] == np.float32(2.0**24)


# ---------------------------------------------------------------------------------------------
# Differential check: integer expressions against a plain Python evaluator
# ---------------------------------------------------------------------------------------------


def _wrap(value: int, dtype: str) -> int:
    width = int(dtype[3:])
    return ((value + (1 << (width - 1))) % (1 << width)) - (1 << (width - 1))


def _reference(e: E.PrimExpr, env: dict) -> int:
    if isinstance(e, E.IntImm):
        return e.value
    if isinstance(e, E.Var):
        return env[e]
    if isinstance(e, E.Cast):
        return _wrap(_reference(e.value, env), e.dtype)
    if isinstance(e, (E.Min, E.Max)):
        a, b = _reference(e.a, env), _reference(e.b, env)
        return min(a, b) if isinstance(e, E.Min) else max(a, b)
    a, b = _reference(e.a, env), _reference(e.b, env)
    if isinstance(e, E.Add):
        r = a + b
    elif isinstance(e, E.Sub):
        r = a - b
    elif isinstance(e, E.Mul):
        r = a * b
    elif isinstance(e, E.FloorDiv):
        r = a // b
    elif isinstance(e, E.FloorMod):
        r = a % b
    elif isinstance(e, E.Div):
        r = (abs(a) // abs(b)) * (1 if (a < 0) == (b < 0) else -1)
    elif isinstance(e, E.Mod):
        q = (abs(a) // abs(b)) * (1 if (a < 0) == (b < 0) else -1)
        r = a - b * q
    else:  # pragma: no cover
        raise AssertionError(type(e))
    return _wrap(r, e.dtype)


@st.composite
def int_exprs(draw, leaves, dtype, depth=0):
    if depth >= 4 or draw(st.integers(0, 3)) == 0:
        if draw(st.booleans()):
            return draw(st.sampled_from(leaves))
        bound = 2 ** (int(dtype[3:]) - 1)
        return c(draw(st.integers(-bound, bound - 1)), dtype)
    kind = draw(st.sampled_from(["Add", "Sub", "Mul", "FloorDiv", "FloorMod", "Div", "Mod", "Min", "Max", "Cast"]))
    if kind == "Cast":
        other = "int8" if dtype == "int32" else "int32"
        inner = draw(int_exprs([E.Cast(other, x) for x in leaves], other, depth + 1))
        return E.Cast(dtype, inner)
    a = draw(int_exprs(leaves, dtype, depth + 1))
    b = draw(int_exprs(leaves, dtype, depth + 1))
    if kind in ("FloorDiv", "FloorMod", "Div", "Mod"):
        # Keep the divisor away from zero: wrap it into [1, 7] or [-7, -1].
        sign = draw(st.sampled_from([1, -1]))
        b = E.FloorMod(b, c(7, dtype)) + c(1, dtype)
        if sign < 0:
            b = c(0, dtype) - b
    return getattr(E, kind)(a, b)


@pytest.mark.slow
@settings(max_examples=80, deadline=None, derandomize=True)
@given(data=st.data(), dtype=st.sampled_from(["int8", "int32"]))
def test_integer_expressions_match_python_reference(data, dtype):
    i, j = E.Var("i", dtype), E.Var("j", dtype)
    expr = data.draw(int_exprs([i, j, i * c(3, dtype) - j], dtype))
    ni, nj = 5, 4
    out = buf("out", (ni, nj), dtype)
    body = realize("out", [], [], S.BufferStore(out, expr, (E.Cast("int32", i), E.Cast("int32", j))))
    f = func([out], S.For(i, c(0, dtype), c(ni, dtype), S.ForKind.SERIAL,
                          S.For(j, c(0, dtype), c(nj, dtype), S.ForKind.SERIAL, body)))
    result = np.zeros((ni, nj), dtype)
    interpret(f, result)
    expected = [[_reference(expr, {i: a, j: b}) for b in range(nj)] for a in range(ni)]
    np.testing.assert_array_equal(result, np.array(expected, dtype))


# ---------------------------------------------------------------------------------------------
# Vectorized loop nests agree bit for bit with the element-by-element path
# ---------------------------------------------------------------------------------------------


def vector_runs(compiled) -> dict[str, list[bool]]:
    """Record what each vectorized nest of `compiled` returned (False: it fell back to scalar)."""
    namespace = compiled._kernel.__globals__
    log: dict[str, list[bool]] = {}
    for name in [n for n in namespace if n.startswith("_vec_")]:
        original = namespace[name]

        def wrapper(*args, _original=original, _name=name):
            result = _original(*args)
            log.setdefault(_name, []).append(result)
            return result

        namespace[name] = wrapper
    return log


def run_both(f, *arrays, expect_vector: bool | None = True):
    """Run `f` element by element and vectorized on copies of `arrays`; outputs must be
    identical. `expect_vector`: True if some nest must run vectorized, False if none may."""
    scalar = [a.copy() for a in arrays]
    interpret(f, *scalar, vectorize=False)
    compiled = compile_func(f)
    log = vector_runs(compiled)
    vector = [a.copy() for a in arrays]
    try:
        compiled(*vector)
    finally:
        interpreter_entry._cache.clear()  # the wrappers must not leak into other tests
    for s, v in zip(scalar, vector):
        assert s.dtype == v.dtype
        np.testing.assert_array_equal(v, s)
    took_vector = any(any(runs) for runs in log.values())
    if expect_vector is not None:
        assert took_vector == expect_vector, (log, compiled.source)
    return vector


def test_vectorized_matmul_is_bit_identical():
    a, b = rand((16, 24)), rand((24, 12), seed=3)
    out = run_both(matmul_func(16, 12, 24), a, b, np.zeros((16, 12), np.float32))[2]
    np.testing.assert_allclose(out, a @ b, rtol=1e-5, atol=1e-5)


def test_vectorized_split_reduction_with_predicate_and_init_in_the_middle():
    # k (extent 30) split 4 x 8 with a predicate; a spatial loop between the two k loops.
    A, C = buf("A", (64, 30)), buf("C", (64,))
    i, k0, k1, vi, vk = E.Var("i"), E.Var("k0"), E.Var("k1"), E.Var("vi"), E.Var("vk")
    body = realize("C", [iv(vi, 64), iv(vk, 30, "R")], [i, k0 * 8 + k1],
                   store(C, C[vi] + A[vi, vk] * f32(0.5), vi), init=store(C, f32(1.0), vi),
                   predicate=(k0 * 8 + k1) < 30)
    f = func([A, C], nest([(k0, 4), (i, 64), (k1, 8)], body))
    out = run_both(f, rand((64, 30)), np.full(64, 9.0, np.float32))[1]
    assert np.isfinite(out).all()


def test_vectorized_padding_evaluates_guarded_loads_only_where_taken():
    # P[h, w] = A[h - 2, w - 1] inside the image, else 0 (TE's pad); loads outside would be OOB.
    A, P = buf("A", (8, 10)), buf("P", (12, 12))
    h, w, vh, vw = E.Var("h"), E.Var("w"), E.Var("vh"), E.Var("vw")
    inside = (c(2) <= vh) & (vh < 10) & (c(1) <= vw) & (vw < 11)
    value = E.Call("float32", "if_then_else", (inside, A[vh - 2, vw - 1], f32(0.0)))
    f = func([A, P], nest([(h, 12), (w, 12)], realize("P", [iv(vh, 12), iv(vw, 12)], [h, w], store(P, value, vh, vw))))
    a = rand((8, 10))
    out = run_both(f, a, np.zeros((12, 12), np.float32))[1]
    np.testing.assert_array_equal(out, np.pad(a, ((2, 2), (1, 1))))


def test_vectorized_and_or_short_circuit_guarded_loads():
    A, B = buf("A", (64,), "int32"), buf("B", (64,), "int32")
    i, v = E.Var("i"), E.Var("v")
    cond = ((v >= 1) & (A[v - 1] > 0)) | ((v < 63) & (A[v + 1] < -5))
    f = func([A, B], loop(i, 64, realize("B", [iv(v, 64)], [i], store(B, E.Cast("int32", cond), v))))
    a = rand((64,), "int8").astype(np.int32)
    out = run_both(f, a, np.zeros(64, np.int32))[1]
    expected = [int((k >= 1 and a[k - 1] > 0) or (k < 63 and a[k + 1] < -5)) for k in range(64)]
    np.testing.assert_array_equal(out, expected)


def test_vectorized_uniform_condition_picks_one_arm_per_step():
    # The condition depends only on the reduction loop; arms vary over the lanes.
    A, C = buf("A", (64, 4)), buf("C", (64,))
    i, k, vi, vk = E.Var("i"), E.Var("k"), E.Var("vi"), E.Var("vk")
    term = E.Call("float32", "if_then_else", (vk < 2, A[vi, vk], A[vi, vk] * f32(-3.0)))
    body = realize("C", [iv(vi, 64), iv(vk, 4, "R")], [i, k], store(C, C[vi] + term, vi), init=store(C, f32(0.0), vi))
    run_both(func([A, C], nest([(i, 64), (k, 4)], body)), rand((64, 4)), np.zeros(64, np.float32))


def test_vectorized_integer_semantics():
    cases = [
        ("int8", lambda v, x, y: x[v] * y[v] + c(100, "int8"), ("int8", "int8")),
        ("int32", lambda v, x, y: E.FloorDiv(x[v], c(7)) * 1000 + E.FloorMod(x[v], c(-5)) * 10 + E.Div(y[v], c(3)) + E.Mod(y[v], c(-4)), ("int32", "int32")),
        ("int32", lambda v, x, y: E.Max(x[v], y[v]) - E.Min(x[v] * c(65536), y[v]), ("int32", "int32")),
        ("uint8", lambda v, x, y: x[v] - y[v], ("uint8", "uint8")),
        ("int64", lambda v, x, y: x[v] * y[v] * c(3, "int64"), ("int64", "int64")),
        ("bool", lambda v, x, y: (x[v] > c(0)) & E.Not(y[v].equal(c(3))), ("int32", "int32")),
    ]
    for out_dtype, fn_, ins in cases:
        f = elementwise(out_dtype, 64, fn_, ins)
        args = [rand((64,), dt, seed=k) % 7 if out_dtype == "bool" else rand((64,), dt, seed=k) for k, dt in enumerate(ins)]
        run_both(f, *args, np.zeros(64, out_dtype))


def test_vectorized_index_arithmetic_on_negative_lanes():
    for node in (E.FloorDiv, E.FloorMod, E.Div, E.Mod):
        f = elementwise("int32", 64, lambda v, node=node: node(v * 3 - c(7), c(-5)) + v, start=-32)
        run_both(f, np.zeros(64, np.int32))


def test_vectorized_casts_and_math_calls():
    x = np.concatenate([np.linspace(-40, 40, 60), [np.nan, np.inf, -np.inf, 3e9]]).astype(np.float32)
    f = elementwise("int32", 64, lambda v, a: E.Cast("int32", a[v]), ("float32",))
    run_both(f, x, np.zeros(64, np.int32))
    g = elementwise("int8", 64, lambda v, a: E.Cast("int8", a[v]), ("float32",))
    run_both(g, x, np.zeros(64, np.int8))
    pos = np.abs(x[:60]).astype(np.float32) + np.float32(0.5)
    pos = np.concatenate([pos, pos[:4]])
    for op, _ in UNARY_CASES:
        h = elementwise("float32", 64, lambda v, a, op=op: E.Call("float32", op, (a[v],)) + a[v], ("float32",))
        run_both(h, pos, np.zeros(64, np.float32))
    for op in ("pow", "fmod"):
        h = elementwise("float32", 64, lambda v, a, op=op: E.Call("float32", op, (a[v], f32(1.5))), ("float32",))
        run_both(h, pos, np.zeros(64, np.float32))
    k = elementwise("float16", 64, lambda v, a: E.Cast("float16", a[v]) * E.Cast("float16", f32(0.1)), ("float32",))
    run_both(k, pos, np.zeros(64, np.float16))
    m = elementwise("float32", 64, lambda v, a: E.Select(a[v] > f32(3.0), E.Cast("float32", v), E.Call("float32", "sqrt", (a[v],))), ("float32",))
    run_both(m, pos, np.zeros(64, np.float32))


def test_vectorized_out_of_bounds_is_still_reported():
    A, B = buf("A", (64,)), buf("B", (64,))
    i, v = E.Var("i"), E.Var("v")
    f = func([A, B], loop(i, 64, realize("shift", [iv(v, 64)], [i], store(B, A[v + 1], v))))
    with pytest.raises(InterpreterError, match=r"load of buffer 'A' at index \(64,\).*block 'shift'"):
        interpret(f, rand((64,)), np.zeros(64, np.float32))


def test_colliding_lanes_fall_back_to_sequential_order():
    # Every lane writes B[v // 8]: the last write of each group wins, as in sequential order.
    A, B = buf("A", (64,)), buf("B", (8,))
    i, v = E.Var("i"), E.Var("v")
    f = func([A, B], loop(i, 64, realize("B", [iv(v, 64)], [i], store(B, A[v], E.FloorDiv(v, c(8))))))
    a = rand((64,))
    out = run_both(f, a, np.zeros(8, np.float32), expect_vector=False)[1]
    np.testing.assert_array_equal(out, a[7::8])


def test_loop_carried_dependence_is_not_vectorized():
    # A running sum reads the previous element of the buffer it writes.
    B = buf("B", (64,), "int32")
    i, v = E.Var("i"), E.Var("v")
    value = E.Call("int32", "if_then_else", (v > 0, B[E.Max(v - 1, c(0))] + v, c(0)))
    f = func([B], loop(i, 64, realize("B", [iv(v, 64)], [i], store(B, value, v))))
    out = run_both(f, np.zeros(64, np.int32), expect_vector=False)[0]
    np.testing.assert_array_equal(out, np.cumsum(np.arange(64)))


def test_aliased_arguments_keep_sequential_semantics():
    # B[v] = A[v - 1] with A and B the same array: sequential order smears A[0] everywhere.
    A, B = buf("A", (64,)), buf("B", (64,))
    i, v = E.Var("i"), E.Var("v")
    value = E.Call("float32", "if_then_else", (v > 0, A[E.Max(v - 1, c(0))], A[v]))
    f = func([A, B], loop(i, 64, realize("B", [iv(v, 64)], [i], store(B, value, v))))
    x = rand((64,))
    interpret(f, x, x)
    np.testing.assert_array_equal(x, np.full(64, x[0]))
    y = rand((64,))
    z = np.zeros(64, np.float32)
    run_both(f, y, z)


@pytest.mark.slow
@settings(max_examples=40, deadline=None, derandomize=True)
@given(data=st.data(), dtype=st.sampled_from(["int8", "int32"]))
def test_vectorized_integer_expressions_match_python_reference(data, dtype):
    i, j = E.Var("i", dtype), E.Var("j", dtype)
    expr = data.draw(int_exprs([i, j, i * c(3, dtype) - j], dtype))
    ni, nj = 8, 8
    out = buf("out", (ni, nj), dtype)
    vi, vj = E.Var("vi", dtype), E.Var("vj", dtype)
    iters = [S.IterVar(E.Range(c(0, dtype), c(n, dtype)), v, S.IterType.DATA_PAR) for v, n in ((vi, ni), (vj, nj))]
    body = S.BlockRealize((i, j), TRUE, S.Block(tuple(iters), (), (), "out",
                          S.BufferStore(out, substitute(expr, {i: vi, j: vj}), (E.Cast("int32", vi), E.Cast("int32", vj)))))
    f = func([out], S.For(i, c(0, dtype), c(ni, dtype), S.ForKind.SERIAL,
                          S.For(j, c(0, dtype), c(nj, dtype), S.ForKind.SERIAL, body)))
    result = run_both(f, np.zeros((ni, nj), dtype), expect_vector=None)[0]
    expected = [[_reference(expr, {i: a, j: b}) for b in range(nj)] for a in range(ni)]
    np.testing.assert_array_equal(result, np.array(expected, dtype))




# ---------------------------------------------------------------------------------------------
# Every zoo workload agrees with an independent numpy implementation (reduced shapes)
# ---------------------------------------------------------------------------------------------
#
# The references compute in float64 from the mathematical definitions (not from the zoo's TE),
# so they check the zoo and the interpreter together.


def conv_nd(x, w, stride, padding, dilation=1, groups=1):
    """Channels-last convolution: x (N, *S, CI), w (*K, CI // groups, CO)."""
    x = x.astype(np.float64)
    w = w.astype(np.float64)
    nd = x.ndim - 2
    kernel = w.shape[:nd]
    ci, co = x.shape[-1], w.shape[-1]
    cig, cog = ci // groups, co // groups
    xp = np.pad(x, [(0, 0)] + [(padding, padding)] * nd + [(0, 0)])
    out_sizes = [(xp.shape[1 + d] - dilation * (kernel[d] - 1) - 1) // stride + 1 for d in range(nd)]
    out = np.zeros((x.shape[0], *out_sizes, co))
    for offsets in np.ndindex(*kernel):
        window = tuple(
            slice(offsets[d] * dilation, offsets[d] * dilation + stride * (out_sizes[d] - 1) + 1, stride)
            for d in range(nd)
        )
        patch = xp[(slice(None),) + window + (slice(None),)]  # (N, *O, CI)
        patch = patch.reshape(*patch.shape[:-1], groups, cig)
        weight = w[offsets].reshape(cig, groups, cog)  # (CI/g, CO) with CO = g * cog
        out += np.einsum("...gc,cgd->...gd", patch, weight).reshape(*patch.shape[:-2], co)
    return out


def depthwise_ref(x, w, stride, padding, dilation=1):
    x = x.astype(np.float64)
    n, h, wd, ch = x.shape
    k = w.shape[1]
    xp = np.pad(x, [(0, 0), (padding, padding), (padding, padding), (0, 0)])
    oh = (h + 2 * padding - dilation * (k - 1) - 1) // stride + 1
    ow = (wd + 2 * padding - dilation * (k - 1) - 1) // stride + 1
    out = np.zeros((n, oh, ow, ch))
    for rh in range(k):
        for rw in range(k):
            patch = xp[:, rh * dilation : rh * dilation + stride * (oh - 1) + 1 : stride,
                       rw * dilation : rw * dilation + stride * (ow - 1) + 1 : stride, :]
            out += patch * w[0, rh, rw, :].astype(np.float64)
    return out


def capsule_ref(x, w, stride, padding):
    """x (N, H, W, I, K, CI), w (k, k, K, J, CI, CO) -> (N, OH, OW, I, J, CO)."""
    x = x.astype(np.float64)
    k = w.shape[0]
    xp = np.pad(x, [(0, 0), (padding, padding), (padding, padding), (0, 0), (0, 0), (0, 0)])
    oh = (x.shape[1] + 2 * padding - k) // stride + 1
    ow = (x.shape[2] + 2 * padding - k) // stride + 1
    out = 0
    for rh in range(k):
        for rw in range(k):
            patch = xp[:, rh : rh + stride * (oh - 1) + 1 : stride, rw : rw + stride * (ow - 1) + 1 : stride]
            out = out + np.einsum("nhwikc,kjco->nhwijo", patch, w[rh, rw].astype(np.float64))
    return out


def conv_transpose_ref(x, w, stride, padding):
    """Transposed convolution as a scatter: out[h*s + kh - p] += x[h] * w[kh]."""
    n, h, wd, ci = x.shape
    k, co = w.shape[0], w.shape[3]
    full_h, full_w = (h - 1) * stride + k, (wd - 1) * stride + k
    full = np.zeros((n, full_h, full_w, co))
    for kh in range(k):
        for kw in range(k):
            contrib = np.einsum("nhwc,cd->nhwd", x.astype(np.float64), w[kh, kw].astype(np.float64))
            full[:, kh : kh + stride * (h - 1) + 1 : stride, kw : kw + stride * (wd - 1) + 1 : stride] += contrib
    return full[:, padding : full_h - padding, padding : full_w - padding]


def softmax_ref(a):
    a = a.astype(np.float64)
    e = np.exp(a - a.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def mm(a, b):
    return a.astype(np.float64) @ b.astype(np.float64)


def relu(x):
    return np.maximum(x, 0)


# name, reduced parameters for zoo.build, reference from the input arrays (in parameter order)
ZOO_CASES = [
    ("C1D", (1, 12, 4, 6, 3, 2, 1), lambda x, w: conv_nd(x, w, 2, 1)),
    ("C2D", (1, 9, 9, 4, 6, 3, 2, 1), lambda x, w: conv_nd(x, w, 2, 1)),
    ("C3D", (1, 5, 6, 6, 3, 4, 3, 2, 1), lambda x, w: conv_nd(x, w, 2, 1)),
    ("CAP", (1, 6, 6, 3, 4, 3, 2, 1), lambda x, w: capsule_ref(x, w, 2, 1)),
    ("DEP", (1, 9, 9, 6, 3, 2, 1), lambda x, w: depthwise_ref(x, w, 2, 1)),
    ("DIL", (1, 9, 9, 4, 5, 3, 1, 2, 2), lambda x, w: conv_nd(x, w, 1, 2, dilation=2)),
    ("GMM", (2, 6, 5, 7), lambda x, y: np.einsum("bnk,bkm->bnm", x.astype(np.float64), y.astype(np.float64))),
    ("GRP", (1, 8, 8, 8, 12, 3, 2, 1, 1, 4), lambda x, w: conv_nd(x, w, 2, 1, groups=4)),
    ("T2D", (1, 4, 4, 3, 5, 4, 2, 1), lambda x, w: conv_transpose_ref(x, w, 2, 1)),
    ("CBR", (1, 8, 8, 3, 6, 3, 2, 1),
     lambda x, w, bias, offset, scale: relu((conv_nd(x, w, 2, 1) + bias) * scale + offset)),
    ("TBG", (2, 6, 3, 4), lambda q, v: np.einsum("bihd,bjhd->bhij", q.astype(np.float64), v.astype(np.float64))),
    ("NRM", (2, 6, 7), lambda a: np.sqrt((a.astype(np.float64) ** 2).sum(axis=(1, 2)))),
    ("SFM", (6, 9), softmax_ref),
    ("dense", (5, 6, 7), lambda x, w: mm(x, w.T)),
    ("linear", (3, 4, 5), lambda x, w, b: mm(x, w.T) + b),
    ("matmul", (5, 6, 7), mm),
    ("matmul_relu", (5, 6, 7), lambda a, b: relu(mm(a, b))),
    ("matmul_bias", (5, 6, 7), lambda a, b, bias: mm(a, b) + bias),
    ("matmul_bias_relu", (5, 6, 7), lambda a, b, bias: relu(mm(a, b) + bias)),
    ("linear0", (1, 6, 20), lambda x, w, b: mm(x, w.T) + b),
    ("relu0", (1, 8), relu),
    ("linear1", (1, 10, 6), lambda x, w, b: mm(x, w.T) + b),
    # Larger shapes: these run through the vectorized nests.
    ("matmul", (64, 64, 64), mm),
    ("C2D", (1, 16, 16, 8, 16, 3, 1, 1), lambda x, w: conv_nd(x, w, 1, 1)),
    ("SFM", (32, 48), softmax_ref),
]


def zoo_arguments(func, seed):
    """Random inputs for every parameter but the last (the output, pre-filled with NaN so an
    unwritten element shows)."""
    buffers = func.buffers
    arrays = []
    for k, b in enumerate(buffers):
        shape = tuple(int(d.value) for d in b.shape)
        if k == len(buffers) - 1:
            arrays.append(np.full(shape, np.nan, b.dtype))
        else:
            arrays.append(rand(shape, b.dtype, seed=seed + k))
    return arrays


def test_zoo_cases_cover_every_workload():
    from msdb.ir import zoo

    assert {name for name, _, _ in ZOO_CASES} == set(zoo.names())


@pytest.mark.parametrize("name, params, reference", ZOO_CASES, ids=[f"{n}-{'x'.join(map(str, p))}" for n, p, _ in ZOO_CASES])
def test_zoo_workload_matches_numpy(name, params, reference):
    from msdb.ir import zoo

    func = zoo.build(name, *params).main
    arrays = zoo_arguments(func, seed=len(name))
    interpret(func, *arrays)
    expected = reference(*arrays[:-1])
    assert arrays[-1].shape == expected.shape
    np.testing.assert_allclose(arrays[-1], expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name, params", [(n, p) for n, p, _ in ZOO_CASES[:22]], ids=[n for n, _, _ in ZOO_CASES[:22]])
def test_zoo_workload_vectorized_equals_scalar(name, params):
    from msdb.ir import zoo

    func = zoo.build(name, *params).main
    run_both(func, *zoo_arguments(func, seed=7), expect_vector=None)
