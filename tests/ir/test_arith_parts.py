"""The parts of `msdb.ir.arith` other than the simplifier: expression keys, intervals, affine
forms, dtype limits and constant folding, each checked against the copies it replaced
(`tests/ir/arith_oracles.py`) where those were right, and against brute force."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from msdb.ir import expr as E
from msdb.ir.arith import (Affine, Atom, ExprBounds, affine_form, as_affine, expr_equal, expr_key, numeric_range,
                           split_linear, stride_of)
from msdb.ir.arith import interval as iv
from msdb.ir.arith.fold import fold_binary, fold_cast
from msdb.ir.arith.keys import shape_key
from msdb.ir.functor import substitute
from msdb.ir.arith.limits import cast_preserves_value, fits, int_range, value_limit, wrap
from tests.ir.arith_helpers import c, evaluate, index_exprs
from tests.ir.arith_oracles import old_as_affine, old_codegen_affine, old_numeric_range, old_structural_key

h, k, r, x = (E.Var(n) for n in "hkrx")
VARS = (h, k, r, x)
BOUNDS = {h: (0, 15), k: (0, 7), r: (-3, 4)}
SETTINGS = settings(max_examples=200, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])


def _points(seed: int, bounds: dict[E.Var, tuple[int, int]]) -> list[dict[E.Var, int]]:
    rng = random.Random(seed)
    return [{v: rng.randint(*bounds.get(v, (-40, 40))) for v in VARS} for _ in range(16)]


def _value(expr: E.PrimExpr, env: dict[E.Var, int]) -> int | None:
    try:
        return evaluate(expr, env)
    except ZeroDivisionError:
        return None


# ---- keys ----------------------------------------------------------------------------------------


def _renamed(expr: E.PrimExpr) -> tuple[E.PrimExpr, dict[E.Var, E.Var]]:
    """`expr` over fresh variables of the same names and dtypes."""
    fresh = {v: E.Var(v.name, v.dtype) for v in VARS}
    return substitute(expr, fresh), fresh


@SETTINGS
@given(index_exprs(VARS), index_exprs(VARS))
def test_shape_key_is_the_structure_up_to_renaming(a, b) -> None:
    renamed, fresh = _renamed(a)
    seen_a: list[E.Var] = []
    seen_renamed: list[E.Var] = []
    key = shape_key(a, seen_a)
    assert key is not None and key == shape_key(renamed, seen_renamed)
    assert [fresh[v] for v in seen_a] == seen_renamed and len(set(map(id, seen_a))) == len(seen_a)
    # equal keys: the same expression once the variables are matched up in order
    seen_b: list[E.Var] = []
    if shape_key(b, seen_b) == key:
        assert expr_equal(substitute(b, dict(zip(seen_b, seen_a))), a)


def test_shape_key_tells_apart_what_simplifies_differently() -> None:
    twin = E.Var("h")  # another variable of h's name
    keys = [shape_key(e, []) for e in (E.Add(h, k), E.Add(h, twin), E.Add(h, h), E.Add(k, h), E.Add(h, c(1)),
                                       E.Add(h, c(2)), E.Sub(h, k), E.Add(E.Var("h", "int64"), k))]
    assert len(set(keys)) == len(keys)
    assert shape_key(E.Add(h, twin), []) != shape_key(E.Add(h, h), [])
    assert shape_key(E.Select(E.LT(h, k), h, k), []) is None  # only integer arithmetic is keyed




@pytest.mark.slow
@SETTINGS
@given(index_exprs(VARS), index_exprs(VARS))
def test_expr_key_agrees_with_expr_equal_and_with_the_old_key_on_integers(a, b) -> None:
    assert expr_key(a) == expr_key(_rebuilt(a))
    assert (expr_key(a) == expr_key(b)) == expr_equal(a, b)
    assert (expr_key(a) == expr_key(b)) == (old_structural_key(a) == old_structural_key(b))


def _rebuilt(e: E.PrimExpr) -> E.PrimExpr:
    if isinstance(e, E.BinaryOp):
        return type(e)(_rebuilt(e.a), _rebuilt(e.b), e.dtype)
    if isinstance(e, E.IntImm):
        return E.IntImm(e.dtype, e.value)
    return e


def test_floats_are_keyed_by_their_bits() -> None:
    # the old simplifier key compared floats by value: 0.0 and -0.0 merged, a NaN never matched
    # itself; the module hash and structural_equal_expr compare bits, and so does the one key
    zero, minus_zero = E.FloatImm("float32", 0.0), E.FloatImm("float32", -0.0)
    nan_a, nan_b = E.FloatImm("float32", math.nan), E.FloatImm("float32", math.nan)
    assert old_structural_key(zero) == old_structural_key(minus_zero)
    assert expr_key(zero) != expr_key(minus_zero) and not expr_equal(zero, minus_zero)
    assert expr_key(nan_a) == expr_key(nan_b) and expr_equal(nan_a, nan_b)


# ---- intervals -----------------------------------------------------------------------------------


@pytest.mark.slow
@SETTINGS
@given(index_exprs(VARS), st.integers(0, 10**6))
def test_bounds_contain_every_value(expr, seed) -> None:
    lo, hi = ExprBounds(BOUNDS, leaves_by_dtype=False).of(expr)
    for env in _points(seed, BOUNDS):
        value = _value(expr, env)
        if value is not None:
            assert lo <= value <= hi


@pytest.mark.slow
@SETTINGS
@given(index_exprs(VARS, divisors=(1, 2, 3, 4, 8)))
def test_numeric_range_is_at_least_as_tight_as_the_schedules_old_one(expr) -> None:
    old, new = old_numeric_range(expr, BOUNDS), numeric_range(expr, BOUNDS)
    if old is not None:
        assert new is not None and old[0] <= new[0] <= new[1] <= old[1]


@pytest.mark.parametrize("a, b", [((-7, 9), (2, 5)), ((-7, 9), (-5, -2)), ((-7, 9), (-2, 3)), ((0, 30), (4, 4)),
                                  ((-30, -1), (7, 7)), ((5, 6), (4, 4))])
def test_division_bounds_hold_for_every_pair(a, b) -> None:
    values = [(p, q) for p in range(a[0], a[1] + 1) for q in range(b[0], b[1] + 1) if q != 0]
    checks = [(iv.floordiv, lambda p, q: p // q), (iv.floormod, lambda p, q: p % q),
              (iv.truncdiv_bound, lambda p, q: int(p / q)), (iv.truncmod_bound, lambda p, q: int(math.fmod(p, q)))]
    for bound, op in checks:
        lo, hi = bound(a, b)
        assert all(lo <= op(p, q) <= hi for p, q in values), bound.__name__


def test_unbounded_ends_stay_unbounded() -> None:
    assert iv.add((0, iv.POS_INF), (3, 3)) == (3, iv.POS_INF)
    assert iv.floordiv((iv.NEG_INF, 5), (2, 2)) == (iv.NEG_INF, 2)
    assert iv.mul((-1, iv.POS_INF), (2, 2)) == (-2, iv.POS_INF)
    assert iv.dtype_bound("int64") == iv.EVERYTHING and iv.dtype_bound("uint64") == (0, iv.POS_INF)
    assert iv.dtype_bound("int32") == (-(2**31), 2**31 - 1)


# ---- affine forms --------------------------------------------------------------------------------


@st.composite
def affine_candidates(draw: st.DrawFn) -> E.PrimExpr:
    """Index expressions, some with int32 -> int64 casts."""
    expr = draw(index_exprs(VARS, divisors=(1, 2, 4, -3)))
    if draw(st.booleans()):
        expr = E.Cast("int64", expr)
        expr = expr + E.IntImm("int64", draw(st.integers(-5, 5)))
    return expr


@pytest.mark.slow
@SETTINGS
@given(affine_candidates(), st.integers(0, 10**6))
def test_affine_form_is_exact(expr, seed) -> None:
    form = affine_form(expr)
    for env in _points(seed, {}):
        value = _value(expr, env)
        if value is not None:
            assert _value(form.render(expr.dtype), env) == value


@pytest.mark.slow
@SETTINGS
@given(affine_candidates())
def test_as_affine_agrees_with_the_schedules_old_reader(expr) -> None:
    old, new = old_as_affine(expr), as_affine(expr)
    assert (old is None) == (new is None)
    if old is not None and new is not None:
        assert new.terms == old[0] and new.const == old[1]


@pytest.mark.slow
@SETTINGS
@given(affine_candidates())
def test_affine_form_agrees_with_the_code_generators_old_reader(expr) -> None:
    old_terms, old_const = old_codegen_affine(expr)
    form = affine_form(expr)
    assert form.const == old_const
    assert {expr_key(atom): coef for coef, atom in old_terms.values()} == \
        {expr_key(t.expr if isinstance(t, Atom) else t): coef for t, coef in form.terms.items()}


@pytest.mark.slow
@SETTINGS
@given(affine_candidates(), st.sampled_from(VARS))
def test_stride_of_matches_a_unit_step(expr, var) -> None:
    stride = stride_of(expr, var)
    if stride is None:
        return
    env = {v: 3 for v in VARS}
    before = _value(expr, env)
    env[var] += 1
    after = _value(expr, env)
    if before is not None and after is not None:
        assert after - before == stride


@pytest.mark.slow
@SETTINGS
@given(index_exprs(VARS, divisors=(1, 2, 4)), st.integers(0, 10**6))
def test_split_linear_takes_affine_forms_coefficients_and_keeps_the_rest(expr, seed) -> None:
    variables = {h: None, k: None}
    split = split_linear(expr, variables)
    if split is None:
        return
    coefs, rest = split
    form = affine_form(expr)
    assert {v: n for v, n in coefs.items() if n} == {v: form.coef(v) for v in variables if form.coef(v)}
    for env in _points(seed, {}):
        value = _value(expr, env)
        rest_value = 0 if rest is None else _value(rest, env)
        if value is not None and rest_value is not None:
            assert value == rest_value + sum(n * env[v] for v, n in coefs.items())


def test_affine_arithmetic_and_rendering() -> None:
    a = Affine({h: 4, k: -1}, 3)
    assert (a - a).is_const() and (a - a).const == 0
    assert a.scale(2).terms == {h: 8, k: -2}
    assert a.substitute_points({k: 2}).terms == {h: 4} and a.substitute_points({k: 2}).const == 1
    assert a.numeric(BOUNDS) == (3 - 7, 3 + 60)


# ---- dtype limits and folding --------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"])
def test_integer_ranges_and_wraparound_are_numpys(dtype: str) -> None:
    info = np.iinfo(dtype)
    assert int_range(dtype) == (int(info.min), int(info.max))
    assert value_limit(dtype, upper=True) == int(info.max) and value_limit(dtype, upper=False) == int(info.min)
    for value in (0, 1, -1, int(info.max) + 1, int(info.min) - 1, 3 * int(info.max) + 7):
        assert wrap(value, dtype) == int(np.array(value % (1 << 64), dtype=np.uint64).astype(dtype))
        assert fits(value, dtype) == (int(info.min) <= value <= int(info.max))


def test_float_limits_and_bool() -> None:
    assert value_limit("float16", upper=True) == 65504.0
    assert value_limit("float32", upper=False) == -float(np.finfo(np.float32).max)
    assert value_limit("bfloat16", upper=True) == float(np.finfo(np.float32).max)  # TVM's choice
    assert int_range("bool") == (0, 1) and wrap(5, "bool") == 1
    assert cast_preserves_value("int32", "int64") and cast_preserves_value("uint8", "int16")
    assert not cast_preserves_value("int64", "int32") and not cast_preserves_value("int8", "uint32")


@pytest.mark.parametrize("cls, a, b, expected", [
    (E.Add, 100, 100, -56), (E.FloorDiv, -7, 2, -4), (E.FloorMod, -7, 2, 1), (E.Div, -7, 2, -3), (E.Mod, -7, 2, -1),
    (E.Min, 3, -2, -2), (E.Mul, 16, 16, 0),
])
def test_integer_constants_fold_with_tvms_semantics(cls, a, b, expected) -> None:
    folded = fold_binary(cls, E.IntImm("int8", a), E.IntImm("int8", b))
    assert isinstance(folded, E.IntImm) and folded.value == expected and folded.dtype == "int8"


def test_what_folding_leaves_alone() -> None:
    xf = E.Var("xf", "float32")
    assert fold_binary(E.FloorDiv, c(4), c(0)) is None  # division by zero: TVM reports it at run time
    assert fold_binary(E.FloorMod, E.FloatImm("float32", 5.5), E.FloatImm("float32", 2.0)) is None
    assert fold_binary(E.Mul, xf, E.FloatImm("float32", 1.0)) is xf
    assert fold_cast("int32", E.FloatImm("float32", math.nan)) is None
    assert fold_cast("int8", E.FloatImm("float32", -3.9)).value == -3  # type: ignore[union-attr]
