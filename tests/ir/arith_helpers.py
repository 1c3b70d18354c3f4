"""Shared by the integer-arithmetic tests: a compact printer, a reference evaluator and
hypothesis strategies for index expressions."""

from __future__ import annotations

from hypothesis import strategies as st

from msdb.ir import expr as E


def c(v: int) -> E.IntImm:
    return E.IntImm("int32", v)


def show(e: E.PrimExpr) -> str:
    """A compact infix rendering (TVMScript-like, fully parenthesized only where needed)."""
    ops = {E.Add: "+", E.Sub: "-", E.Mul: "*", E.FloorDiv: "//", E.FloorMod: "%", E.LT: "<", E.LE: "<=",
           E.EQ: "==", E.NE: "!=", E.And: "and", E.Or: "or"}
    prec = {E.Or: 1, E.And: 2, E.LT: 3, E.LE: 3, E.EQ: 3, E.NE: 3, E.Add: 4, E.Sub: 4, E.Mul: 5,
            E.FloorDiv: 5, E.FloorMod: 5}

    def go(n: E.PrimExpr, parent: int = 0, right: bool = False) -> str:
        if isinstance(n, E.Var):
            return n.name
        if isinstance(n, E.IntImm):
            return str(bool(n.value)) if n.dtype == "bool" else str(n.value)
        t = type(n)
        if t in ops:
            assert isinstance(n, E.BinaryOp)
            p = prec[t]
            s = f"{go(n.a, p)} {ops[t]} {go(n.b, p, True)}"
            return f"({s})" if p < parent or (right and p == parent) else s
        if isinstance(n, (E.Min, E.Max)):
            return f"T.{t.__name__.lower()}({go(n.a)}, {go(n.b)})"
        if isinstance(n, E.Not):
            return f"not {go(n.a, 6)}"
        return repr(n)

    return go(e)


def evaluate(e: E.PrimExpr, env: dict[E.Var, int]) -> int:
    """The value of an integer or boolean expression (Python's floor semantics for // and %)."""
    if isinstance(e, E.Var):
        return env[e]
    if isinstance(e, E.IntImm):
        return e.value
    if isinstance(e, E.Not):
        return int(not evaluate(e.a, env))
    if isinstance(e, E.Select):
        return evaluate(e.true_value if evaluate(e.condition, env) else e.false_value, env)
    if isinstance(e, E.Cast):
        return evaluate(e.value, env)
    assert isinstance(e, E.BinaryOp), e
    a, b = evaluate(e.a, env), evaluate(e.b, env)
    return {
        E.Add: lambda: a + b, E.Sub: lambda: a - b, E.Mul: lambda: a * b,
        E.FloorDiv: lambda: a // b, E.FloorMod: lambda: a % b,
        E.Min: lambda: min(a, b), E.Max: lambda: max(a, b),
        E.LT: lambda: int(a < b), E.LE: lambda: int(a <= b), E.GT: lambda: int(a > b),
        E.GE: lambda: int(a >= b), E.EQ: lambda: int(a == b), E.NE: lambda: int(a != b),
        E.And: lambda: int(bool(a) and bool(b)), E.Or: lambda: int(bool(a) or bool(b)),
    }[type(e)]()


@st.composite
def index_exprs(draw: st.DrawFn, variables: tuple[E.Var, ...], depth: int = 0,
                divisors: tuple[int, ...] = (1, 2, 3, 4, 6, 8, 16, -2, -3)) -> E.PrimExpr:
    """Integer expressions over `variables`: sums, constant multiples, floor division and modulo
    by constants (negative ones included), products, min and max."""
    if depth >= 4 or draw(st.integers(0, 3)) == 0:
        if draw(st.booleans()):
            return draw(st.sampled_from(variables))
        return c(draw(st.integers(-9, 40)))
    op = draw(st.sampled_from(["add", "sub", "mulc", "mul", "div", "mod", "min", "max"]))
    a = draw(index_exprs(variables, depth + 1, divisors))
    if op in ("div", "mod", "mulc"):
        k = c(draw(st.sampled_from(divisors)))
        return {"div": E.FloorDiv, "mod": E.FloorMod, "mulc": E.Mul}[op](a, k)
    b = draw(index_exprs(variables, depth + 1, divisors))
    return {"add": E.Add, "sub": E.Sub, "mul": E.Mul, "min": E.Min, "max": E.Max}[op](a, b)


@st.composite
def conditions(draw: st.DrawFn, variables: tuple[E.Var, ...]) -> E.PrimExpr:
    """Comparisons of index expressions, possibly combined and negated."""
    a, b = draw(index_exprs(variables, 1)), draw(index_exprs(variables, 1))
    cond: E.PrimExpr = draw(st.sampled_from([E.LT, E.LE, E.GT, E.GE, E.EQ, E.NE]))(a, b)
    if draw(st.booleans()):
        other = draw(st.sampled_from([E.LT, E.EQ]))(draw(index_exprs(variables, 2)), draw(index_exprs(variables, 2)))
        cond = draw(st.sampled_from([E.And, E.Or]))(cond, other)
    return E.Not(cond) if draw(st.booleans()) else cond
