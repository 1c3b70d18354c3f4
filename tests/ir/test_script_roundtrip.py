"""print -> parse is the identity: for every shipped script, every zoo workload, hand-built IR
that stresses names, roots, folding-sensitive nodes and attrs, and random expressions.

Two checks each time: `structural_equal(m, parse(print(m)))` (names and block regions are not
part of the structural hash) and `print(parse(print(m))) == print(m)` (which does show names and
regions)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from msdb.hashing import structural_equal
from msdb.ir import expr as E
from msdb.ir import stmt as S
from msdb.ir import from_script, to_script
from msdb.ir.function import IRModule, PrimFunc

DATA = Path(__file__).resolve().parent.parent / "data" / "tvmscript"
ALL_FILES = sorted(DATA.glob("*/*.py"))
TVM_PRINTED = sorted(DATA.glob("tvm027/*.py")) + sorted(DATA.glob("tvm027_sched/*.py")) + sorted(DATA.glob("fixtures/*.py"))


def test_the_script_corpus_is_there() -> None:
    # the parametrized tests below are skipped, not failed, over an empty list
    assert {p.parent.name for p in TVM_PRINTED} == {"tvm027", "tvm027_sched", "fixtures"}
    assert len(ALL_FILES) > len(TVM_PRINTED)

TRUE = E.IntImm("bool", 1)


def i32(v: int) -> E.IntImm:
    return E.IntImm("int32", v)


def f32(v: float) -> E.FloatImm:
    return E.FloatImm("float32", float(v))


def roundtrip(mod: IRModule | PrimFunc) -> IRModule:
    """Assert both round-trip properties and return the re-parsed module."""
    text = to_script(mod)
    again = from_script(text)
    original = mod if isinstance(mod, IRModule) else IRModule({"main": mod})
    assert structural_equal(original, again), text
    assert to_script(again if isinstance(mod, IRModule) else again.main) == text
    return again


def root(body: S.Stmt, allocs: tuple[E.Buffer, ...] = (), **kw) -> S.BlockRealize:
    return S.BlockRealize((), TRUE, S.Block((), (), (), "root", body, None, allocs, **kw))


def func_of(body: S.Stmt, *buffers: E.Buffer, allocs: tuple[E.Buffer, ...] = (), attrs=None) -> PrimFunc:
    params = tuple(E.Var(b.name, "handle") for b in buffers)
    return PrimFunc(params, dict(zip(params, buffers)), root(body, allocs), attrs or {"global_symbol": "main"})


def buf(name: str, *shape: int, dtype: str = "float32") -> E.Buffer:
    return E.Buffer(name, tuple(i32(d) for d in shape), dtype)


def one_block(value_fn, out_dtype: str = "float32", name: str = "B") -> PrimFunc:
    """for i in range(16): with block: vi = spatial(16, i); O[vi] = value_fn(vi, A)"""
    a = buf("A", 16)
    o = buf("O", 16, dtype=out_dtype)
    i = E.Var("i")
    vi = E.Var("vi")
    value = value_fn(vi, a)
    store = S.BufferStore(o, value, (vi,))
    block = S.Block(
        (S.IterVar(E.Range(i32(0), i32(16)), vi, S.IterType.DATA_PAR),),
        (S.BufferRegion(a, (E.Range(i32(0), i32(16)),)),),
        (S.BufferRegion(o, (E.Range(vi, i32(1)),)),),
        name, store,
    )
    loop = S.For(i, i32(0), i32(16), S.ForKind.SERIAL, S.BlockRealize((i,), TRUE, block))
    return func_of(loop, a, o)


# -------------------------------------------------------------------------------------------
# shipped scripts and zoo


@pytest.mark.slow
@pytest.mark.parametrize("path", ALL_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_data_files_roundtrip(path: Path) -> None:
    roundtrip(from_script(path.read_text(), str(path)))


def _normalize_tvm(text: str) -> str:
    # TVM prints float immediates in full decimal; we print Python's shortest repr. The
    # `Axis` import comment is printed by 0.27 for its layout sugar, which we do not need.
    text = text.replace("# from tvm.tirx.layout import Axis\n", "")
    return re.sub(r"T\.float32\((-?[0-9.e+]+)\)", lambda m: f"T.float32({float(m.group(1))!r})", text)


@pytest.mark.parametrize("path", TVM_PRINTED, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_prints_what_tvm_prints(path: Path) -> None:
    text = path.read_text()
    assert to_script(from_script(text)) == _normalize_tvm(text)


def test_zoo_workloads_roundtrip() -> None:
    from msdb.ir import zoo

    names = zoo.names()
    assert "C2D" in names
    for name in names:
        roundtrip(zoo.workload(name))


# -------------------------------------------------------------------------------------------
# names


def test_duplicate_names_are_disambiguated() -> None:
    a = buf("A", 8)
    a2 = buf("A", 8)  # another buffer with the same name (an allocation)
    t = buf("T", 8)  # clashes with the TVMScript namespace
    i1, i2, vi = E.Var("i"), E.Var("i"), E.Var("i")
    store = S.BufferStore(a2, E.BufferLoad(a, (vi,)) + E.BufferLoad(t, (vi,)), (vi,))
    block = S.Block((S.IterVar(E.Range(i32(0), i32(8)), vi, S.IterType.DATA_PAR),), (), (), "b", store)
    inner = S.For(i2, i32(0), i32(8), S.ForKind.SERIAL, S.BlockRealize((i2,), TRUE, block))
    outer = S.For(i1, i32(0), i32(8), S.ForKind.SERIAL, S.seq(inner, S.Evaluate(i1)))
    func = func_of(outer, a, t, allocs=(a2,))
    text = to_script(func)
    assert "T_1: T.Buffer((8,)" in text and "A_1 = T.sblock_alloc_buffer((8,))" in text
    assert "for i_1 in range(8):" in text and "i_2 = T.axis.spatial(8, i_1)" in text
    again = roundtrip(func).main
    # the re-parsed store still reads A and T and writes the allocation
    store2 = again.body.block.body.body.seq[0].body.block.body
    assert store2.buffer is again.body.block.alloc_buffers[0]
    assert store2.value.a.buffer is again.buffers[0] and store2.value.b.buffer is again.buffers[1]


def test_sibling_scopes_reuse_names() -> None:
    a = buf("A", 4)
    loops = [S.For(E.Var("i"), i32(0), i32(4), S.ForKind.SERIAL, S.Evaluate(i32(0))) for _ in range(2)]
    loops = [S.For(lp.loop_var, lp.min, lp.extent, lp.kind, S.Evaluate(lp.loop_var)) for lp in loops]
    text = to_script(func_of(S.seq(*loops), a))
    assert text.count("for i in range(4):") == 2
    roundtrip(func_of(S.seq(*loops), a))


def test_unprintable_names_are_sanitized() -> None:
    a = E.Buffer("A.shared", (i32(4),), "float32")
    v = E.Var("")
    f = func_of(S.For(v, i32(0), i32(4), S.ForKind.SERIAL, S.BufferStore(a, f32(0), (v,))), a)
    text = to_script(f)
    assert "A_shared: T.Buffer" in text and "for v in range(4):" in text
    roundtrip(f)


# -------------------------------------------------------------------------------------------
# roots, lets, functions


def test_annotated_root_prints_explicitly() -> None:
    a = buf("A", 4)
    body = S.For(E.Var("i"), i32(0), i32(4), S.ForKind.SERIAL, S.Evaluate(i32(0)))
    params = (E.Var("A", "handle"),)
    f = PrimFunc(params, {params[0]: a}, root(body, annotations={"meta_schedule.parallel": 16}), {"global_symbol": "main"})
    text = to_script(f)
    assert 'with T.sblock("root"):' in text and "T.sblock_attr({\"meta_schedule.parallel\": 16})" in text
    roundtrip(f)


def test_root_that_would_be_misread_prints_explicitly() -> None:
    # No allocations and a lone block without block vars: elided, the block would become the root.
    a = buf("A", 4)
    inner = S.BlockRealize((), TRUE, S.Block((), (), (S.BufferRegion(a, (E.Range(i32(0), i32(1)),)),), "only", S.BufferStore(a, f32(1), (i32(0),))))
    f = func_of(inner, a)
    text = to_script(f)
    assert 'with T.sblock("root"):' in text and "# with" not in text
    roundtrip(f)


def test_root_with_other_name_and_predicate() -> None:
    a = buf("A", 4)
    body = S.BufferStore(a, f32(1), (i32(0),))
    block = S.Block((), (), (), "top", body)
    params = (E.Var("A", "handle"),)
    f = PrimFunc(params, {params[0]: a}, S.BlockRealize((), E.IntImm("bool", 0), block), {})
    text = to_script(f)
    assert 'with T.sblock("top"):' in text and "T.where(False)" in text and "private=True" in text
    roundtrip(f)


def test_let_statements() -> None:
    a = buf("A", 4)
    x, y = E.Var("x", "float32"), E.Var("x", "int32")
    last = S.LetStmt(x, f32(2), S.BufferStore(a, x, (i32(0),)))
    middle = S.LetStmt(y, i32(3), S.Evaluate(y))
    f = func_of(S.seq(middle, S.Evaluate(i32(1)), last), a)
    text = to_script(f)
    assert "with T.LetStmt(3) as x:" in text and "x: T.float32 = T.float32(2.0)" in text
    roundtrip(f)


def test_if_else_and_evaluate() -> None:
    a = buf("A", 4)
    i = E.Var("i")
    inner_if = S.IfThenElse(E.LT(i, i32(2)), S.BufferStore(a, f32(1), (i,)), S.Evaluate(i32(0)))
    stmt = S.IfThenElse(E.LT(i, i32(1)), S.BufferStore(a, f32(0), (i,)), inner_if)
    f = func_of(S.For(i, i32(0), i32(4), S.ForKind.SERIAL, stmt), a)
    assert "elif i < 2:" in to_script(f)
    roundtrip(f)


def test_function_printing_forms() -> None:
    f = one_block(lambda vi, a: E.BufferLoad(a, (vi,)))
    text = to_script(f)
    assert text.startswith("# from tvm.script import tirx as T\n\n@T.prim_func\ndef main(")
    named = f.with_attrs(global_symbol="foo", s_tir=True)
    text = to_script(named)
    assert "@T.prim_func(s_tir=True)\ndef foo(" in text and "func_attr" not in text
    assert dict(from_script(text).main.attrs) == {"global_symbol": "foo", "s_tir": True}
    mod = IRModule({"first": named, "second": PrimFunc(f.params, f.buffer_map, f.body, {})}, {"k": 1})
    text = to_script(mod)
    assert "I.module_attrs({\"k\": 1})" in text and "T.func_attr({\"global_symbol\": \"foo\"})" in text
    assert "@T.prim_func(private=True)\n    def second(" in text
    roundtrip(mod)


def test_attr_values_keep_their_kind() -> None:
    attrs = {
        "global_symbol": "main", "tir.noalias": E.IntImm("bool", 1), "py_bool": True, "py_int": 16,
        "imm": i32(16), "imm64": E.IntImm("int64", 3), "float": 0.5, "fimm": f32(0.5), "str": "a\"b",
        "list": [1, "x", [True]], "tuple": (1,), "dict": {"k": None},
    }
    f = func_of(S.Evaluate(i32(0)), buf("A", 4), attrs=attrs)
    again = roundtrip(f).main.attrs
    assert again["py_bool"] is True and again["py_int"] == 16 and isinstance(again["imm"], E.IntImm)
    assert isinstance(again["tir.noalias"], E.IntImm) and again["tir.noalias"].dtype == "bool"
    assert again["imm64"].dtype == "int64" and isinstance(again["fimm"], E.FloatImm) and again["float"] == 0.5
    assert again["list"] == [1, "x", [True]] and again["tuple"] == (1,) and again["dict"] == {"k": None}
    assert again["str"] == 'a"b'


def test_buffer_options_roundtrip() -> None:
    n = E.Var("n")
    sym = E.Buffer("S", (n, i32(4)), "float32")
    strided = E.Buffer("B", (i32(8),), "float16", "shared", (i32(2),), i32(3), 16, 4, ())
    wide = E.Buffer("W", (E.IntImm("int64", 4),), "int8")
    f = func_of(S.Evaluate(i32(0)), sym, strided, wide)
    text = to_script(f)
    assert "def main(S_handle: T.handle, B: T.Buffer(" in text and "n = T.int32()" in text
    assert 'S = T.match_buffer(S_handle, (n, 4), "float32")' in text
    assert 'strides=(2,), elem_offset=3, scope="shared", align=16, offset_factor=4' in text
    assert "T.Buffer((T.int64(4),), \"int8\")" in text
    roundtrip(f)


def test_block_level_buffers_roundtrip() -> None:
    text = """
@T.prim_func
def main(A: T.Buffer((128,), "float32"), B: T.Buffer((128,), "float32")):
    for i in range(32):
        with T.block("B"):
            vi = T.axis.spatial(32, i)
            S = T.alloc_buffer((4,), "float32", scope="local")
            Asub = T.match_buffer(A[vi * 4:vi * 4 + 4], (4,))
            for k in range(4):
                S[k] = Asub[k]
            for k in T.vectorized(4):
                B[vi * 4 + k] = S[k]
"""
    roundtrip(from_script(text))


# -------------------------------------------------------------------------------------------
# loops and block vars


def test_loop_forms_roundtrip() -> None:
    n = E.Var("n")
    a = buf("A", 4)
    body = S.Evaluate(i32(0))
    tb = S.IterVar(None, E.Var("iter"), S.IterType.THREAD_INDEX, "threadIdx.x")  # type: ignore[arg-type]
    nest = S.For(E.Var("t"), i32(1), i32(4), S.ForKind.THREAD_BINDING, body, tb)
    nest = S.For(E.Var("s"), n, i32(4), S.ForKind.SERIAL, nest, annotations={"pragma": 1})
    nest = S.For(E.Var("r"), i32(2), n, S.ForKind.PARALLEL, nest)
    nest = S.For(E.Var("u", "int64"), E.IntImm("int64", 0), E.IntImm("int64", 3), S.ForKind.UNROLLED, nest)
    j = E.Var("j")
    nest = S.For(j, i32(0), i32(4), S.ForKind.SERIAL, S.For(E.Var("k"), i32(0), j + 1, S.ForKind.SERIAL, nest))
    params = (E.Var("A", "handle"), n)
    f = PrimFunc(params, {params[0]: a}, root(nest), {"global_symbol": "main"})
    text = to_script(f)
    assert "for j in range(4):" in text and "for k in range(j + 1):" in text  # grid stops at a dependent extent
    assert "T.parallel(2, 2 + n)" in text and "T.serial(n, n + 4, annotations=" in text
    assert 'T.thread_binding(1, 5, thread="threadIdx.x")' in text and "T.unroll(T.int64(3))" in text
    roundtrip(f)


def test_block_var_forms_roundtrip() -> None:
    a = buf("A", 64)
    i, j = E.Var("i"), E.Var("j")
    v = [E.Var(f"v{k}") for k in range(6)]
    n64 = E.Var("w", "int64")
    ivs = (
        S.IterVar(E.Range(i32(0), i32(8)), v[0], S.IterType.DATA_PAR),      # remap with v1
        S.IterVar(E.Range(i32(0), i32(8)), v[1], S.IterType.COMM_REDUCE),
        S.IterVar(E.Range(i32(0), i32(64)), v[2], S.IterType.DATA_PAR),     # expression binding
        S.IterVar(E.Range(i32(2), i32(3)), v[3], S.IterType.OPAQUE),        # non-zero min
        S.IterVar(E.Range(i32(0), i32(1)), v[4], S.IterType.ORDERED),
        S.IterVar(E.Range(E.IntImm("int64", 0), E.IntImm("int64", 1)), n64, S.IterType.DATA_PAR),
    )
    values = (i, j, i * 8 + j, i32(2), i32(0), E.IntImm("int32", 0))
    block = S.Block(ivs, (), (), "b", S.BufferStore(a, f32(0), (v[2],)))
    realize = S.BlockRealize(values, E.LT(i, i32(7)), block)
    nest = S.For(i, i32(0), i32(8), S.ForKind.SERIAL, S.For(j, i32(0), i32(8), S.ForKind.SERIAL, realize))
    f = func_of(nest, a)
    text = to_script(f)
    assert 'v0, v1 = T.axis.remap("SR", [i, j])' in text
    assert "v3 = T.axis.opaque((2, 5), 2)" in text and "v4 = T.axis.scan(1, 0)" in text
    assert "w = T.axis.spatial(T.int64(1), T.int32(0))" in text
    roundtrip(f)


# -------------------------------------------------------------------------------------------
# expressions that operator sugar would not reproduce


@pytest.mark.parametrize(
    "make, printed",
    [
        (lambda vi, a: E.Add(E.BufferLoad(a, (vi,)), f32(0)), "T.Add(A[vi], T.float32(0.0))"),
        (lambda vi, a: E.Mul(E.BufferLoad(a, (vi,)), f32(1)), "T.Mul(A[vi], T.float32(1.0))"),
        (lambda vi, a: E.Add(f32(1), f32(2)), "T.Add(T.float32(1.0), T.float32(2.0))"),
        (lambda vi, a: E.Cast("float32", E.Add(i32(1), i32(2))), "T.Cast(\"float32\", T.Add(1, 2))"),
        (lambda vi, a: E.Cast("float32", E.Sub(i32(0), vi)), "T.Cast(\"float32\", 0 - vi)"),
        (lambda vi, a: E.Cast("float32", E.Mul(vi, i32(-1))), "T.Cast(\"float32\", vi * -1)"),
        (lambda vi, a: E.Cast("float32", E.FloorDiv(vi, i32(1))), "T.Cast(\"float32\", T.FloorDiv(vi, 1))"),
        (lambda vi, a: E.Cast("float32", E.FloorMod(vi, i32(1))), "T.Cast(\"float32\", T.FloorMod(vi, 1))"),
        (lambda vi, a: E.Cast("float32", E.Mod(vi, i32(3))), "T.Cast(\"float32\", T.truncmod(vi, 3))"),
        (lambda vi, a: E.Cast("float32", E.Mod(vi, i32(1))), "T.Cast(\"float32\", T.Mod(vi, 1))"),
        (lambda vi, a: E.Cast("float32", E.Div(vi, i32(3))), "T.Cast(\"float32\", T.Div(vi, 3))"),
        (lambda vi, a: E.Cast("float32", E.Max(i32(1), i32(2))), "T.Cast(\"float32\", T.Max(1, 2))"),
        (lambda vi, a: E.Cast("float32", E.Min(vi, i32(2))), "T.Cast(\"float32\", T.min(vi, 2))"),
        (lambda vi, a: E.Select(E.And(E.LT(vi, i32(3)), TRUE), f32(1), f32(2)), "T.Select(vi < 3 and True, "),
        (lambda vi, a: E.Select(E.And(TRUE, E.IntImm("bool", 0)), f32(1), f32(2)), "T.Select(T.And(True, False), "),
        (lambda vi, a: E.Select(E.LT(i32(1), i32(2)), f32(1), f32(2)), "T.Select(T.LT(1, 2), "),
        (lambda vi, a: E.Select(E.Not(TRUE), f32(1), f32(2)), "T.Select(T.Not(T.bool(True)), "),
        (lambda vi, a: E.Select(E.Not(E.And(E.LT(vi, i32(1)), E.GT(vi, i32(0)))), f32(1), f32(2)), "T.Select(not (vi < 1 and vi > 0), "),
        (lambda vi, a: E.Select(E.Or(E.And(E.LT(vi, i32(1)), TRUE), E.EQ(E.LT(vi, i32(2)), TRUE)), f32(1), f32(2)), "vi < 1 and True or (vi < 2) == True"),
        (lambda vi, a: E.Select(E.And(E.LT(vi, i32(1)), E.Or(TRUE, E.GT(vi, i32(2)))), f32(1), f32(2)), "vi < 1 and (True or vi > 2)"),
        (lambda vi, a: E.Call("float32", "if_then_else", (TRUE, f32(1), f32(2))), "T.call_intrin(\"float32\", \"tir.if_then_else\", True, "),
        (lambda vi, a: E.Call("float32", "my_op", (E.IntImm("int64", 1), f32(2))), "T.call_intrin(\"float32\", \"tir.my_op\", T.int64(1), T.float32(2.0))"),
        (lambda vi, a: E.Call("float32", "exp", (E.BufferLoad(a, (vi,)),)), "T.exp(A[vi])"),
        (lambda vi, a: E.Call("float32", "pow", (E.BufferLoad(a, (vi,)), f32(2))), "T.pow(A[vi], T.float32(2.0))"),
        (lambda vi, a: E.Cast("float32", E.Call("int32", "bitwise_and", (vi, i32(3)))), "vi & 3"),
        (lambda vi, a: E.Cast("float32", E.Call("int32", "shift_left", (i32(1), i32(3)))), "T.call_intrin(\"int32\", \"tir.shift_left\", 1, 3)"),
        (lambda vi, a: E.Cast("float32", E.Add(E.Cast("int64", vi), E.IntImm("int32", 1))), "T.Add(T.Cast(\"int64\", vi), T.int32(1))"),
        (lambda vi, a: E.Sub(f32(0), E.Sub(E.BufferLoad(a, (vi,)), f32(1))), "T.float32(0.0) - (A[vi] - T.float32(1.0))"),
        (lambda vi, a: E.Mul(E.Add(E.BufferLoad(a, (vi,)), f32(1)), E.Div(f32(3), E.BufferLoad(a, (vi,)))), "(A[vi] + T.float32(1.0)) * (T.float32(3.0) / A[vi])"),
        (lambda vi, a: E.FloatImm("float32", float("-inf")), "T.float32(\"-inf\")"),
        (lambda vi, a: E.FloatImm("float32", float("nan")), "T.float32(\"nan\")"),
    ],
)
def test_expression_spelling_roundtrips(make, printed: str) -> None:
    f = one_block(make)
    assert printed in to_script(f)
    roundtrip(f)


def test_folding_sensitive_nodes_survive() -> None:
    f = one_block(lambda vi, a: E.Add(E.BufferLoad(a, (vi,)), f32(0)))
    value = roundtrip(f).main.body.block.body.body.block.body.value
    assert isinstance(value, E.Add) and isinstance(value.b, E.FloatImm)


# -------------------------------------------------------------------------------------------
# random expressions


def _int_exprs():
    leaves = st.one_of(
        st.just("vi"),
        st.integers(-3, 3).map(lambda v: i32(v)),
    )

    def extend(children):
        binary = st.sampled_from([E.Add, E.Sub, E.Mul, E.FloorDiv, E.FloorMod, E.Min, E.Max, E.Div, E.Mod])
        return st.one_of(
            st.tuples(binary, children, children).map(lambda t: ("bin", t)),
            st.tuples(children, children, children).map(lambda t: ("sel", t)),
        )

    return st.recursive(leaves, extend, max_leaves=8)


@st.composite
def expr_trees(draw):
    """A float32 expression mixing int arithmetic (cast), comparisons, logic and calls."""
    int_tree = draw(_int_exprs())
    cmp_cls = draw(st.sampled_from([E.LT, E.LE, E.GT, E.GE, E.EQ, E.NE]))
    logic = draw(st.sampled_from(["and", "or", "not", "none"]))
    other_int = draw(_int_exprs())
    fvalue = draw(st.sampled_from([0.0, 1.0, -2.5, 1e-5]))
    shape = draw(st.sampled_from(["select", "ite", "add", "exp", "max"]))
    return int_tree, cmp_cls, logic, other_int, fvalue, shape


def _build_int(tree, vi):
    if tree == "vi":
        return vi
    if isinstance(tree, E.IntImm):
        return tree
    kind, parts = tree
    if kind == "bin":
        cls, a, b = parts
        return cls(_build_int(a, vi), _build_int(b, vi))
    a, b, c = parts
    return E.Select(E.LT(_build_int(a, vi), i32(0)), _build_int(b, vi), _build_int(c, vi))


def _build(sample, vi, a):
    int_tree, cmp_cls, logic, other_int, fvalue, shape = sample
    x = _build_int(int_tree, vi)
    y = _build_int(other_int, vi)
    cond = cmp_cls(x, y)
    if logic == "and":
        cond = E.And(cond, E.LT(vi, i32(3)))
    elif logic == "or":
        cond = E.Or(E.GE(vi, y), cond)
    elif logic == "not":
        cond = E.Not(cond)
    load = E.BufferLoad(a, (vi,))
    fx = E.Cast("float32", x)
    if shape == "select":
        return E.Select(cond, fx, E.FloatImm("float32", fvalue))
    if shape == "ite":
        return E.Call("float32", "if_then_else", (cond, load, E.FloatImm("float32", fvalue)))
    if shape == "add":
        return E.Add(E.Mul(load, E.FloatImm("float32", fvalue)), fx)
    if shape == "exp":
        return E.Call("float32", "exp", (E.Sub(fx, load),))
    return E.Max(load, E.Cast("float32", E.Select(cond, x, y)))


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(expr_trees())
def test_random_expressions_roundtrip(sample) -> None:
    roundtrip(one_block(lambda vi, a: _build(sample, vi, a)))
