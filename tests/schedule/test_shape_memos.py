"""What the schedule remembers by shape across candidates (docs/architecture.md, "Features and
cost model"): a split or fuse binding simplified for one candidate is the same simplification,
with its own variables, for another; a binding whose variables the analyzer knows differently,
or knows only through other variables, is simplified again; and the covered-points check
answers the same for a renamed nest."""

from __future__ import annotations

from msdb.ir import expr as E
from msdb.ir.arith import Analyzer
from msdb.ir.arith.keys import expr_equal
from msdb.schedule import _block_arith, iter_order
from msdb.schedule.iter_order import iter_map_order, simplified_binding


def _binding(names: tuple[str, str, str]) -> tuple[E.PrimExpr, list[E.Var]]:
    f, a, b = (E.Var(n) for n in names)
    # what fuse leaves before simplification: (f // 4 % 2) * 28 + a * 14 + b
    c = lambda v: E.IntImm("int32", v)  # noqa: E731
    return E.Add(E.Add(E.Mul(E.FloorMod(E.FloorDiv(f, c(4)), c(2)), c(28)), E.Mul(a, c(14))), b), [f, a, b]


def _analyzer(variables: list[E.Var], extents: tuple[int, ...]) -> Analyzer:
    analyzer = Analyzer(order="binding")
    for var, extent in zip(variables, extents):
        analyzer.bind(var, E.Range(E.IntImm("int32", 0), E.IntImm("int32", extent)))
    return analyzer


def test_a_binding_of_the_same_shape_is_the_remembered_simplification_with_its_own_variables() -> None:
    iter_order._BINDINGS_BY_SHAPE.clear()
    first, first_vars = _binding(("f", "a", "b"))
    got_first = simplified_binding(first, _analyzer(first_vars, (8, 2, 14)))
    assert len(iter_order._BINDINGS_BY_SHAPE) == 1
    second, second_vars = _binding(("f", "a", "b"))  # a new candidate: new Var objects, same names
    analyzer = _analyzer(second_vars, (8, 2, 14))
    got_second = simplified_binding(second, analyzer)
    assert len(iter_order._BINDINGS_BY_SHAPE) == 1  # remembered, not simplified again
    assert expr_equal(got_second, iter_map_order(analyzer.simplify(second), analyzer))
    used = set()
    _collect(got_second, used)
    assert used and used <= {id(v) for v in second_vars}  # none of the first candidate's variables
    assert not expr_equal(got_first, got_second)  # they are different variables


def test_other_ranges_or_a_variable_bound_to_others_are_simplified_again() -> None:
    iter_order._BINDINGS_BY_SHAPE.clear()
    binding, variables = _binding(("f", "a", "b"))
    simplified_binding(binding, _analyzer(variables, (8, 2, 14)))
    other, other_vars = _binding(("f", "a", "b"))
    analyzer = _analyzer(other_vars, (8, 2, 7))
    got = simplified_binding(other, analyzer)
    assert len(iter_order._BINDINGS_BY_SHAPE) == 2
    assert expr_equal(got, iter_map_order(analyzer.simplify(other), analyzer))
    bound, bound_vars = _binding(("f", "a", "b"))
    analyzer = _analyzer(bound_vars, (8, 2, 14))
    analyzer.bind(bound_vars[1], E.Var("x"))  # a == x: what it simplifies to depends on x
    assert analyzer.knowledge(bound_vars[1]) is None
    got = simplified_binding(bound, analyzer)
    assert len(iter_order._BINDINGS_BY_SHAPE) == 2
    assert expr_equal(got, iter_map_order(analyzer.simplify(bound), analyzer))


def test_covered_points_answers_a_renamed_nest_alike() -> None:
    _block_arith._COVERED_BY_SHAPE.clear()
    for names in (("i", "j"), ("i", "j"), ("p", "q")):
        i, j = E.Var(names[0]), E.Var(names[1])
        loops = [(i, (0, 3)), (j, (0, 7))]
        c = lambda v: E.IntImm("int32", v)  # noqa: E731
        bindings = [E.FloorDiv(E.Add(E.Mul(i, c(8)), j), c(2))]
        pred = E.LT(E.Add(E.Mul(i, c(8)), j), c(30), "bool")
        assert _block_arith.covered_points(loops, bindings, pred) == 15
    assert len(_block_arith._COVERED_BY_SHAPE) == 2  # one per variable naming


def _collect(expr: E.PrimExpr, out: set[int]) -> None:
    if isinstance(expr, E.Var):
        out.add(id(expr))
    for child in (getattr(expr, "a", None), getattr(expr, "b", None)):
        if isinstance(child, E.PrimExpr):
            _collect(child, out)
