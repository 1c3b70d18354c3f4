"""The IR visitor and mutator's dispatch: one method table per visitor class, shared by its
instances (docs/architecture.md, "Workload IR")."""

from __future__ import annotations

import pytest

from msdb.ir import expr as E
from msdb.ir.functor import IRMutator, IRVisitor


class _CountVars(IRVisitor):
    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []

    def visit_Var(self, node: E.Var) -> None:
        self.names.append(node.name)


class _CountVarsAndConstants(_CountVars):
    def visit_IntImm(self, node: E.IntImm) -> None:
        self.names.append(str(node.value))


class _Doubler(IRMutator):
    def visit_IntImm(self, node: E.IntImm) -> E.PrimExpr:
        return E.IntImm(node.dtype, node.value * 2)


def test_each_visitor_class_dispatches_to_its_own_methods() -> None:
    i, j = E.Var("i"), E.Var("j")
    expr = E.Add(E.Mul(i, E.IntImm("int32", 4)), E.FloorDiv(j, E.IntImm("int32", 2)))
    for _ in range(2):  # the second round uses the tables the first one filled
        base, derived = _CountVars(), _CountVarsAndConstants()
        base.visit(expr)
        derived.visit(expr)
        assert base.names == ["i", "j"]
        assert derived.names == ["i", "4", "j", "2"]
    doubled = _Doubler().visit(expr)
    assert isinstance(doubled, E.Add) and doubled.a.b.value == 8 and doubled.b.b.value == 4  # type: ignore[attr-defined]
    assert doubled.a.a is i and doubled.b.a is j  # type: ignore[attr-defined]
    assert IRMutator().visit(expr) is expr  # the base class's table is its own


def test_a_node_no_method_handles_is_one_error_naming_it() -> None:
    class Stray:
        pass

    with pytest.raises(TypeError, match="_CountVars cannot handle IR node Stray"):
        _CountVars().visit(Stray())
