"""`structural_equal_expr`: structure compared, variables and buffers by identity."""

from __future__ import annotations

import pytest

from msdb.hashing import structural_equal_expr
from msdb.ir import expr as E
from msdb.ir.regions import infer_access_regions
from msdb.ir import stmt as S

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
