"""`structural_equal_expr`: structure compared, variables and buffers by identity."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from msdb.hashing import structural_equal, structural_equal_expr, structural_hash
from msdb.ir import expr as E
from msdb.ir import stmt as S
from msdb.ir.function import IRModule, PrimFunc
from msdb.ir.regions import infer_access_regions

i, j = E.Var("i"), E.Var("j")
A = E.Buffer("A", (E.IntImm("int32", 8),))


@pytest.mark.parametrize(
    "make",
    [
        lambda: i * 4 + j,
        lambda: E.FloorDiv(i, 3) % 2,
        lambda: E.Select(i < j, i, j),
        lambda: E.Not(i.equal(j)),
        lambda: E.Cast("int64", i),
        lambda: E.Call("float32", "exp", (A[i],)),
        lambda: E.FloatImm("float32", 0.5),
        lambda: E.StringImm("handle", "x"),
        lambda: E.Min(i, j) - E.Max(i, 1),
    ],
)
def test_rebuilt_expressions_are_equal(make) -> None:
    a, b = make(), make()
    assert a is not b
    assert structural_equal_expr(a, b)


@pytest.mark.parametrize(
    "a, b",
    [
        (i + 1, j + 1),                                    # different variable
        (i + 1, E.Var("i") + 1),                            # same name, different variable
        (i + 1, i - 1),                                     # different operator
        (i + 1, 1 + i),                                     # operand order counts
        (E.IntImm("int32", 1), E.IntImm("int64", 1)),       # dtype
        (E.FloatImm("float32", 0.0), E.FloatImm("float32", -0.0)),
        (E.Call("float32", "exp", (A[i],)), E.Call("float32", "log", (A[i],))),
        (E.Call("float32", "f", (i,)), E.Call("float32", "f", (i, i))),
        (A[i], E.Buffer("A", (E.IntImm("int32", 8),))[i]),  # buffers by identity
        (E.Cast("int64", i), E.Cast("int64", j)),
        (E.StringImm("handle", "x"), E.StringImm("handle", "y")),
    ],
)
def test_different_expressions_are_not_equal(a, b) -> None:
    assert not structural_equal_expr(a, b)
    assert not structural_equal_expr(b, a)


def test_nan_constants_with_the_same_bits_are_equal() -> None:
    assert structural_equal_expr(E.FloatImm("float32", float("nan")), E.FloatImm("float32", float("nan")))


def test_region_inference_merges_equal_accesses() -> None:
    # regions.py relies on structural_equal_expr to collapse repeated accesses into one range.
    out = E.Buffer("B", (E.IntImm("int32", 8),))
    body = S.BufferStore(out, A[i * 2 + 1] + A[i * 2 + 1], (i,))
    reads, writes = infer_access_regions(body)
    assert len(reads) == 1 and len(reads[0].region) == 1
    assert structural_equal_expr(reads[0].region[0].min, i * 2 + 1)


# ---- differential check against the module hash ----------------------------------------------


_BINARY = [E.Add, E.Sub, E.Mul, E.FloorDiv, E.FloorMod, E.Min, E.Max]
_CMP = [E.LT, E.LE, E.EQ]

recipes = st.recursive(
    st.one_of(st.sampled_from(["i", "j"]), st.integers(-3, 3).map(lambda v: ("const", v))),
    lambda inner: st.one_of(
        st.tuples(st.sampled_from(range(len(_BINARY))), inner, inner).map(lambda t: ("bin",) + t),
        st.tuples(st.sampled_from(range(len(_CMP))), inner, inner, inner, inner).map(lambda t: ("sel",) + t),
        inner.map(lambda r: ("cast", r)),
    ),
    max_leaves=8,
)


def build(recipe) -> E.PrimExpr:
    """A fresh expression tree for `recipe` over the shared vars i and j."""
    if recipe == "i":
        return i
    if recipe == "j":
        return j
    tag = recipe[0]
    if tag == "const":
        return E.IntImm("int32", recipe[1])
    if tag == "bin":
        return _BINARY[recipe[1]](build(recipe[2]), build(recipe[3]))
    if tag == "sel":
        return E.Select(_CMP[recipe[1]](build(recipe[2]), build(recipe[3])), build(recipe[4]), build(recipe[5]))
    return E.Cast("int32", E.Cast("int64", build(recipe[1])))


def as_module(expr: E.PrimExpr) -> IRModule:
    out = E.Buffer("Out", (E.IntImm("int32", 1),), "int32")
    handle = E.Var("out", "handle")
    body = S.LetStmt(i, E.IntImm("int32", 1), S.LetStmt(j, E.IntImm("int32", 2), S.BufferStore(out, expr, (E.IntImm("int32", 0),))))
    return IRModule.from_func(PrimFunc((handle,), {handle: out}, body, {}))


@settings(max_examples=150, deadline=None, derandomize=True)
@given(recipes, recipes)
def test_expr_equality_agrees_with_the_module_walk(r1, r2) -> None:
    a, b = build(r1), build(r2)
    assert structural_equal_expr(a, build(r1))
    same = structural_equal_expr(a, b)
    assert same == (r1 == r2)
    assert same == structural_equal(as_module(a), as_module(b))
    assert same == (structural_hash(as_module(a)) == structural_hash(as_module(b)))


def test_subclasses_compare_as_the_node_they_extend() -> None:
    class MyLoad(E.BufferLoad):
        __slots__ = ()

    class MyAdd(E.Add):
        __slots__ = ()

    class Other(E.BinaryOp):
        __slots__ = ()

    assert structural_equal_expr(MyLoad(A, (i,)), A[i])
    assert structural_equal_expr(MyAdd(i, j), i + j)
    assert not structural_equal_expr(Other(i, j), i + j)
    assert structural_equal(as_module(MyAdd(i, j)), as_module(i + j))
    assert not structural_equal(as_module(Other(i, j)), as_module(i + j))
