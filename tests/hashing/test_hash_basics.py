"""What counts and what does not in the structural hash, mode handling and normalization."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

from msdb.errors import MsdbError
from msdb.hashing import MODES, UnknownModuleEquality, canonical_mode, structural_equal, structural_hash, token_stream
from msdb.ir import expr as E
from msdb.ir import stmt as S
from msdb.ir.function import IRModule, PrimFunc

from . import ir_samples
from .ir_samples import TRUE, buffer, compute, f32, func
from .mutations import with_attrs


def _replace_blocks(stmt: S.Stmt, fn) -> S.Stmt:
    """Apply `fn` to every non-root block (small structural helper for these tests)."""
    from msdb.ir.functor import IRMutator

    class M(IRMutator):
        def visit_Block(self, node: S.Block) -> S.Stmt:
            new = super().visit_Block(node)
            return fn(new) if new.iter_vars else new

    return M().visit(stmt)


def _map_body(mod: IRModule, fn) -> IRModule:
    f = mod.main
    return IRModule.from_func(f.with_body(fn(f.body)))


def test_hash_is_16_lowercase_hex_for_every_mode() -> None:
    mod = ir_samples.matmul()
    for mode in MODES + ("ignore-ndarray",):
        assert re.fullmatch(r"[0-9a-f]{16}", structural_hash(mod, mode))


def test_unknown_mode_names_the_valid_ones() -> None:
    with pytest.raises(ValueError) as info:
        structural_hash(ir_samples.matmul(), "anchor")
    message = str(info.value)
    for mode in MODES + ("ignore-ndarray",):
        assert repr(mode) in message
    with pytest.raises(ValueError):
        structural_equal(ir_samples.matmul(), ir_samples.matmul(), "bogus")


def test_an_unknown_mode_is_a_named_msdb_error_naming_the_valid_modes() -> None:
    for bad in ("anchor", None, ["structural"]):
        with pytest.raises(UnknownModuleEquality) as info:
            canonical_mode(bad)  # type: ignore[arg-type]
        assert isinstance(info.value, MsdbError) and isinstance(info.value, ValueError)
        message = str(info.value)
        assert repr(bad) in message and "\n" not in message
        for mode in MODES + ("ignore-ndarray",):
            assert repr(mode) in message


def test_ignore_ndarray_is_an_alias_of_ignore_tensor() -> None:
    mod = ir_samples.softmax()
    assert canonical_mode("ignore-ndarray") == "ignore-tensor"
    assert structural_hash(mod, "ignore-ndarray") == structural_hash(mod, "ignore-tensor")


def test_non_module_input_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="IRModule or a PrimFunc"):
        structural_hash("not a module")  # type: ignore[arg-type]


def test_builds_of_the_same_workload_are_equal_but_not_identical() -> None:
    a, b = ir_samples.conv2d_nhwc(), ir_samples.conv2d_nhwc()
    assert a.main.body is not b.main.body
    for mode in MODES:
        assert structural_hash(a, mode) == structural_hash(b, mode)
        assert structural_equal(a, b, mode)


def test_primfunc_and_single_function_module_under_any_name_hash_alike() -> None:
    f = ir_samples.matmul().main
    expected = structural_hash(IRModule.from_func(f))
    assert structural_hash(f) == expected
    assert structural_hash(IRModule({"default_function": f})) == expected
    assert structural_equal(f, IRModule({"x": f}))


@pytest.mark.parametrize(
    "attrs",
    [
        {"global_symbol": "another_name"},
        {"tir.noalias": False},
        {"tirx.noalias": True},
        {"s_tir": True},
        {"global_symbol": "f", "tirx.noalias": True, "s_tir": True},
    ],
)
def test_naming_and_noalias_attrs_do_not_count(attrs: dict) -> None:
    mod = ir_samples.matmul()
    assert structural_hash(with_attrs(mod, **attrs)) == structural_hash(mod)
    bare = IRModule.from_func(PrimFunc(mod.main.params, mod.main.buffer_map, mod.main.body, {}))
    assert structural_hash(bare) == structural_hash(mod)


def test_other_function_attrs_count_and_their_order_does_not() -> None:
    mod = ir_samples.matmul()
    one = with_attrs(mod, layout_free_buffers=[1], **{"tir.is_scheduled": True})
    two = IRModule.from_func(
        PrimFunc(mod.main.params, mod.main.buffer_map, mod.main.body,
                 {"tir.is_scheduled": True, "layout_free_buffers": [1]})
    )
    assert structural_hash(one) != structural_hash(mod)
    assert structural_hash(one) == structural_hash(two)
    assert structural_hash(with_attrs(mod, layout_free_buffers=[0])) != structural_hash(with_attrs(mod, layout_free_buffers=[1]))


def test_attr_value_types_are_kept_apart() -> None:
    mod = ir_samples.matmul()
    values = [1, True, 1.0, "1", [1], [1, 1], {"a": 1}, E.IntImm("int32", 1), E.IntImm("int64", 1), None]
    hashes = {structural_hash(with_attrs(mod, k=v)) for v in values}
    assert len(hashes) == len(values)
    # A list and a tuple are the same TVM Array.
    assert structural_hash(with_attrs(mod, k=[1])) == structural_hash(with_attrs(mod, k=(1,)))


def test_multi_function_modules_count_names_but_not_order() -> None:
    f, g = ir_samples.matmul().main, ir_samples.elementwise_relu().main
    ab = IRModule({"mm": f, "relu": g})
    ba = IRModule({"relu": g, "mm": f})
    renamed = IRModule({"mm": f, "relu2": g})
    assert structural_hash(ab) == structural_hash(ba)
    assert structural_equal(ab, ba)
    assert structural_hash(ab) != structural_hash(renamed)
    assert structural_hash(ab) != structural_hash(IRModule({"mm": f}))


def test_module_attrs_count() -> None:
    mod = ir_samples.matmul()
    assert structural_hash(IRModule(mod.functions, {"system_lib_prefix": "x"})) != structural_hash(mod)


def test_reads_and_writes_do_not_count() -> None:
    mod = ir_samples.matmul_fused(bias=True)
    stripped = _map_body(mod, lambda body: _replace_blocks(body, lambda b: dataclasses.replace(b, reads=(), writes=())))
    assert structural_hash(stripped) == structural_hash(mod)
    assert structural_equal(stripped, mod)


def test_statement_order_counts() -> None:
    mod = ir_samples.softmax()
    root = mod.main.body.block
    swapped_seq = S.SeqStmt((root.body.seq[1], root.body.seq[0]) + root.body.seq[2:])
    swapped = IRModule.from_func(mod.main.with_body(S.BlockRealize((), TRUE, dataclasses.replace(root, body=swapped_seq))))
    assert structural_hash(swapped) != structural_hash(mod)


def test_alloc_buffer_order_and_param_order_count() -> None:
    mod = ir_samples.softmax()
    root = mod.main.body.block
    reordered = dataclasses.replace(root, alloc_buffers=tuple(reversed(root.alloc_buffers)))
    changed = IRModule.from_func(mod.main.with_body(S.BlockRealize((), TRUE, reordered)))
    assert structural_hash(changed) != structural_hash(mod)
    f = ir_samples.matmul().main
    swapped = PrimFunc((f.params[1], f.params[0], f.params[2]), f.buffer_map, f.body, f.attrs)
    assert structural_hash(swapped) != structural_hash(f)


def test_variable_identity_pattern_counts() -> None:
    # C[i, j] = A[i, j] vs C[i, j] = A[j, i] vs C[i, j] = A[i, i]: same names, different bindings.
    a, c = buffer("A", (8, 8)), buffer("C", (8, 8))
    mods = [
        IRModule.from_func(func([a, c], [compute("c", c, [(8, "S"), (8, "S")], fn)]))
        for fn in (lambda i, j: a[i, j], lambda i, j: a[j, i], lambda i, j: a[i, i])
    ]
    assert len({structural_hash(m) for m in mods}) == 3


def test_free_variables_are_numbered_at_first_use() -> None:
    n, m = E.Var("n"), E.Var("m")
    a = E.Buffer("A", (n,), "float32")
    b = E.Buffer("B", (n,), "float32")

    def build(x: E.Var, y: E.Var) -> IRModule:
        store = S.BufferStore(b, a[x] + E.Cast("float32", y), (x,))
        return IRModule.from_func(func([a, b], [store]))

    p, q = E.Var("p"), E.Var("q")
    assert structural_hash(build(p, q)) == structural_hash(build(E.Var("r"), E.Var("s")))
    assert structural_equal(build(p, q), build(E.Var("r"), E.Var("s")))
    assert structural_hash(build(p, q)) != structural_hash(build(p, p))
    assert structural_hash(build(n, m)) != structural_hash(build(p, q))  # n is the shape var
    assert structural_hash(build(m, n)) != structural_hash(build(p, q))


def test_constants_hash_exact_bits_and_dtype() -> None:
    def with_const(value: E.PrimExpr) -> IRModule:
        a = buffer("A", (4,), value.dtype)
        return IRModule.from_func(func([a], [S.BufferStore(a, value, (E.IntImm("int32", 0),))]))

    consts = [f32(0.0), f32(-0.0), E.FloatImm("float64", 0.0), f32(0.1), f32(float("nan")),
              E.FloatImm("float32", float("inf")), E.IntImm("int32", 0), E.IntImm("int64", 0), E.IntImm("int32", 1)]
    assert len({structural_hash(with_const(c)) for c in consts}) == len(consts)
    assert structural_hash(with_const(f32(0.1))) == structural_hash(with_const(f32(0.1)))
    assert structural_equal(with_const(f32(float("nan"))), with_const(f32(float("nan"))))


def test_every_expression_node_type_counts() -> None:
    x, y = E.Var("x"), E.Var("y", "float32")
    cond = x < 3
    exprs = [
        E.Add(y, y), E.Sub(y, y), E.Mul(y, y), E.Div(y, y), E.Min(y, y), E.Max(y, y),
        E.Cast("float32", E.Mod(x, x)), E.Cast("float32", E.FloorDiv(x, x)), E.Cast("float32", E.FloorMod(x, x)),
        E.Select(cond, y, y), E.Select(E.Not(cond), y, y), E.Select(E.EQ(x, x), y, y), E.Select(E.NE(x, x), y, y),
        E.Select(E.LE(x, x), y, y), E.Select(E.GT(x, x), y, y), E.Select(E.GE(x, x), y, y),
        E.Select(E.And(cond, cond), y, y), E.Select(E.Or(cond, cond), y, y),
        E.Call("float32", "exp", (y,)), E.Call("float32", "sqrt", (y,)), E.Call("float32", "if_then_else", (cond, y, y)),
        E.Call("float32", "tvm_call", (E.StringImm("handle", "a"), y)),
        E.Call("float32", "tvm_call", (E.StringImm("handle", "b"), y)),
    ]
    a = buffer("A", (4,))

    def module(e: E.PrimExpr) -> IRModule:
        stmt = S.LetStmt(x, E.IntImm("int32", 1), S.LetStmt(y, f32(2), S.BufferStore(a, e, (x,))))
        return IRModule.from_func(func([a], [stmt]))

    assert len({structural_hash(module(e)) for e in exprs}) == len(exprs)


def test_every_statement_kind_is_walked() -> None:
    a = buffer("A", (4,))
    i = E.Var("i")
    zero = E.IntImm("int32", 0)
    store = S.BufferStore(a, f32(1), (zero,))
    stmts = [
        store,
        S.Evaluate(E.Call("int32", "tvm_noop", ())),
        S.IfThenElse(i < 2, store),
        S.IfThenElse(i < 2, store, store),
        S.LetStmt(i, zero, store),
        S.For(i, zero, E.IntImm("int32", 4), S.ForKind.SERIAL, store),
        S.For(i, zero, E.IntImm("int32", 4), S.ForKind.UNROLLED, store),
        S.For(i, zero, E.IntImm("int32", 4), S.ForKind.THREAD_BINDING, store,
              S.IterVar(E.Range(zero, E.IntImm("int32", 4)), i, S.IterType.THREAD_INDEX, "threadIdx.x")),
        S.For(i, zero, E.IntImm("int32", 4), S.ForKind.THREAD_BINDING, store,
              S.IterVar(E.Range(zero, E.IntImm("int32", 4)), i, S.IterType.THREAD_INDEX, "blockIdx.x")),
        S.For(i, zero, E.IntImm("int32", 4), S.ForKind.SERIAL, store, annotations={"pragma_auto_unroll_max_step": 16}),
        S.seq(store, store),
    ]
    assert len({structural_hash(IRModule.from_func(func([a], [s]))) for s in stmts}) == len(stmts)


def test_block_fields_count() -> None:
    mod = ir_samples.matmul()
    base = structural_hash(mod)
    local = buffer("L", (4,))
    src = mod.main.buffers[0]
    match = S.MatchBufferRegion(buffer("M", (1, 1)), S.BufferRegion(src, (E.Range.from_extent(1), E.Range.from_extent(1))))
    changes = [
        lambda b: dataclasses.replace(b, annotations={"k": 1}),
        lambda b: dataclasses.replace(b, annotations={"k": 2}),
        lambda b: dataclasses.replace(b, alloc_buffers=(local,)),
        lambda b: dataclasses.replace(b, alloc_buffers=(dataclasses.replace(local, scope="shared"),)),
        lambda b: dataclasses.replace(b, match_buffers=(match,)),
        lambda b: dataclasses.replace(b, init=None),
        lambda b: dataclasses.replace(b, iter_vars=tuple(dataclasses.replace(iv, thread_tag="t") for iv in b.iter_vars)),
    ]
    hashes = {structural_hash(_map_body(mod, lambda body, fn=fn: _replace_blocks(body, fn))) for fn in changes}
    assert base not in hashes and len(hashes) == len(changes)


def test_block_annotation_order_does_not_count() -> None:
    mod = ir_samples.matmul()
    one = _map_body(mod, lambda body: _replace_blocks(body, lambda b: dataclasses.replace(b, annotations={"a": 1, "b": "x"})))
    two = _map_body(mod, lambda body: _replace_blocks(body, lambda b: dataclasses.replace(b, annotations={"b": "x", "a": 1})))
    assert structural_hash(one) == structural_hash(two)


def test_predicate_counts() -> None:
    mod = ir_samples.matmul()

    from msdb.ir.functor import IRMutator

    class M(IRMutator):
        def visit_BlockRealize(self, node: S.BlockRealize) -> S.Stmt:
            new = super().visit_BlockRealize(node)
            if new.iter_values:
                return S.BlockRealize(new.iter_values, new.iter_values[0] < 100, new.block)
            return new

    assert structural_hash(_map_body(mod, M().visit)) != structural_hash(mod)


def _with_annotation(value) -> IRModule:
    mod = ir_samples.matmul()
    return _map_body(mod, lambda body: _replace_blocks(body, lambda b: dataclasses.replace(b, annotations={"const": value})))


def test_ignore_tensor_compares_constant_tensors_by_dtype_and_shape() -> None:
    x = _with_annotation(np.arange(6, dtype="float32").reshape(2, 3))
    y = _with_annotation(np.ones((2, 3), dtype="float32"))
    z = _with_annotation(np.ones((3, 2), dtype="float32"))
    w = _with_annotation(np.ones((2, 3), dtype="float64"))
    assert structural_hash(x) != structural_hash(y)
    assert not structural_equal(x, y)
    assert structural_hash(x, "ignore-tensor") == structural_hash(y, "ignore-tensor")
    assert structural_equal(x, y, "ignore-tensor")
    assert structural_hash(x, "ignore-tensor") != structural_hash(z, "ignore-tensor")
    assert structural_hash(x, "ignore-tensor") != structural_hash(w, "ignore-tensor")
    assert structural_hash(x, "anchor-block") == structural_hash(y, "anchor-block")


def test_without_tensors_structural_and_ignore_tensor_agree() -> None:
    for make in ir_samples.SAMPLES.values():
        mod = make()
        assert structural_hash(mod) == structural_hash(mod, "ignore-tensor")


def test_unsupported_annotation_value_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="annotation value"):
        structural_hash(_with_annotation(object()))


def test_token_stream_is_what_is_compared() -> None:
    a, b = ir_samples.matmul(), ir_samples.matmul(64)
    assert token_stream(a) == token_stream(ir_samples.matmul())
    assert token_stream(a) != token_stream(b)
    assert all(isinstance(t, str) for t in token_stream(a))


def test_a_loop_var_reused_by_sibling_loops_hashes_like_two_variables() -> None:
    a = buffer("A", (4,))
    zero, four = E.IntImm("int32", 0), E.IntImm("int32", 4)

    def nest(var: E.Var) -> S.Stmt:
        return S.For(var, zero, four, S.ForKind.SERIAL, S.BufferStore(a, f32(1), (var,)))

    i, j = E.Var("i"), E.Var("j")
    shared = IRModule.from_func(func([a], [nest(i), nest(i)]))
    distinct = IRModule.from_func(func([a], [nest(i), nest(j)]))
    assert structural_hash(shared) == structural_hash(distinct)
    assert structural_equal(shared, distinct)


def test_a_use_after_the_loop_is_a_free_variable() -> None:
    a = buffer("A", (4,))
    zero, four = E.IntImm("int32", 0), E.IntImm("int32", 4)
    i, k = E.Var("i"), E.Var("k")
    loop = S.For(i, zero, four, S.ForKind.SERIAL, S.BufferStore(a, f32(1), (i,)))
    after_same = IRModule.from_func(func([a], [loop, S.BufferStore(a, f32(2), (i,))]))
    after_other = IRModule.from_func(func([a], [loop, S.BufferStore(a, f32(2), (k,))]))
    inside = S.For(i, zero, four, S.ForKind.SERIAL, S.seq(S.BufferStore(a, f32(1), (i,)), S.BufferStore(a, f32(2), (i,))))
    assert structural_hash(after_same) == structural_hash(after_other)
    assert structural_hash(after_same) != structural_hash(IRModule.from_func(func([a], [inside])))
