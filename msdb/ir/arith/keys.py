"""Structural identity of expressions inside one function: `expr_equal` and the hashable
`expr_key` that agrees with it; and `shape_key`, the same up to a renaming of the variables
(what a memo shared by many candidates of one design space keys on).

Variables and buffers compare by identity, everything else by structure, floats by their exact
IEEE-754 bits (as the module hash). See docs/architecture.md, "Integer arithmetic".
"""

from __future__ import annotations

import struct
from typing import Any, Callable, Hashable

from msdb.ir import expr as E

__all__ = ["expr_equal", "expr_key", "node_kind", "shape_key"]

_pack_double = struct.Struct("<d").pack

_KINDS: tuple[type, ...] = (
    E.Add, E.Sub, E.Mul, E.Div, E.Mod, E.FloorDiv, E.FloorMod, E.Min, E.Max,
    E.EQ, E.NE, E.LT, E.LE, E.GT, E.GE, E.And, E.Or,
    E.Var, E.IntImm, E.FloatImm, E.StringImm, E.BinaryOp, E.Not, E.Select, E.Cast, E.Call, E.BufferLoad,
)
_KNOWN = frozenset(_KINDS)
_KIND_OF: dict[type, type] = {cls: cls for cls in _KINDS}


def node_kind(cls: type) -> type:
    """The node class `cls` stands for: itself if known, else its nearest known base (an
    unknown direct `BinaryOp` subclass stays its own kind, matching the hash walk)."""
    try:
        return _KIND_OF[cls]
    except KeyError:
        pass
    result = cls
    for klass in cls.__mro__[1:]:
        if klass is E.BinaryOp:
            break
        if klass in _KNOWN:
            result = klass
            break
    _KIND_OF[cls] = result
    return result


# ---------------------------------------------------------------------------------------------
# Equality
# ---------------------------------------------------------------------------------------------


def expr_equal(a: E.PrimExpr, b: E.PrimExpr) -> bool:
    """True when `a` and `b` are the same expression tree over the same variables and buffers."""
    if a is b:
        return True
    ta, tb = type(a), type(b)
    compare = _EQUAL.get(ta) if ta is tb else None  # the common case: the same known node class
    if compare is None:
        kind = node_kind(ta)
        if kind is not node_kind(tb):
            return False
        compare = _EQUAL.get(kind)
        if compare is None:
            if not issubclass(kind, E.BinaryOp):
                raise TypeError(f"expr_equal cannot compare expression node {ta.__name__}")
            compare = _EQUAL[E.BinaryOp]
    return a.dtype == b.dtype and compare(a, b)


def _all_equal(xs: tuple[E.PrimExpr, ...], ys: tuple[E.PrimExpr, ...]) -> bool:
    return len(xs) == len(ys) and all(expr_equal(x, y) for x, y in zip(xs, ys))


def _never(a: Any, b: Any) -> bool:
    return False  # distinct Var objects are different variables


def _int_imm(a: E.IntImm, b: E.IntImm) -> bool:
    return int(a.value) == int(b.value)


def _float_imm(a: E.FloatImm, b: E.FloatImm) -> bool:
    return _pack_double(float(a.value)) == _pack_double(float(b.value))


def _string_imm(a: E.StringImm, b: E.StringImm) -> bool:
    return a.value == b.value


def _binary(a: E.BinaryOp, b: E.BinaryOp) -> bool:
    return expr_equal(a.a, b.a) and expr_equal(a.b, b.b)


def _not(a: E.Not, b: E.Not) -> bool:
    return expr_equal(a.a, b.a)


def _select(a: E.Select, b: E.Select) -> bool:
    return (expr_equal(a.condition, b.condition) and expr_equal(a.true_value, b.true_value)
            and expr_equal(a.false_value, b.false_value))


def _cast(a: E.Cast, b: E.Cast) -> bool:
    return expr_equal(a.value, b.value)


def _call(a: E.Call, b: E.Call) -> bool:
    return a.op == b.op and _all_equal(a.args, b.args)


def _load(a: E.BufferLoad, b: E.BufferLoad) -> bool:
    return a.buffer is b.buffer and _all_equal(a.indices, b.indices)


_EQUAL: dict[type, Callable[[Any, Any], bool]] = {
    **{cls: _binary for cls in _KINDS if issubclass(cls, E.BinaryOp)},
    E.Var: _never,
    E.IntImm: _int_imm,
    E.FloatImm: _float_imm,
    E.StringImm: _string_imm,
    E.Not: _not,
    E.Select: _select,
    E.Cast: _cast,
    E.Call: _call,
    E.BufferLoad: _load,
}


# ---------------------------------------------------------------------------------------------
# Keys
# ---------------------------------------------------------------------------------------------


def expr_key(e: E.PrimExpr) -> Hashable:
    """A hashable key with `expr_key(a) == expr_key(b)` exactly when `expr_equal(a, b)`; a
    variable is its own key. A node `expr_equal` does not know is keyed by identity."""
    if type(e) is E.Var:
        return e
    kind = node_kind(type(e))
    make = _KEY.get(kind)
    if make is None:
        if not issubclass(kind, E.BinaryOp):
            return ("obj", e)
        make = _KEY[E.BinaryOp]
    return make(e, kind)


def _var_key(e: E.Var, kind: type) -> Hashable:
    return e


def _int_key(e: E.IntImm, kind: type) -> Hashable:
    return ("i", e.dtype, int(e.value))


def _float_key(e: E.FloatImm, kind: type) -> Hashable:
    return ("f", e.dtype, _pack_double(float(e.value)))


def _string_key(e: E.StringImm, kind: type) -> Hashable:
    return ("s", e.dtype, e.value)


def _binary_key(e: E.BinaryOp, kind: type) -> Hashable:
    return (kind, e.dtype, expr_key(e.a), expr_key(e.b))


def _not_key(e: E.Not, kind: type) -> Hashable:
    return ("not", expr_key(e.a))


def _select_key(e: E.Select, kind: type) -> Hashable:
    return ("select", e.dtype, expr_key(e.condition), expr_key(e.true_value), expr_key(e.false_value))


def _cast_key(e: E.Cast, kind: type) -> Hashable:
    return ("cast", e.dtype, expr_key(e.value))


def _call_key(e: E.Call, kind: type) -> Hashable:
    return ("call", e.dtype, e.op, tuple(expr_key(a) for a in e.args))


def _load_key(e: E.BufferLoad, kind: type) -> Hashable:
    return ("load", e.dtype, e.buffer, tuple(expr_key(i) for i in e.indices))


_KEY: dict[type, Callable[[Any, type], Hashable]] = {
    **{cls: _binary_key for cls in _KINDS if issubclass(cls, E.BinaryOp)},
    E.Var: _var_key,
    E.IntImm: _int_key,
    E.FloatImm: _float_key,
    E.StringImm: _string_key,
    E.Not: _not_key,
    E.Select: _select_key,
    E.Cast: _cast_key,
    E.Call: _call_key,
    E.BufferLoad: _load_key,
}


def shape_key(expr: E.PrimExpr, variables: list[E.Var]) -> Hashable | None:
    """`expr`'s structure with each variable replaced by its name, dtype and place of first
    appearance (the variables are appended to `variables` in that order); None for a node other
    than variables, integer constants and two-operand arithmetic. Two expressions with equal
    keys are the same expression up to a renaming of variables of the same names and dtypes, so
    whatever depends only on structure (and on what is known of each variable, keyed beside it)
    is the same for both."""
    t = type(expr)
    if t is E.IntImm:
        return (expr.dtype, expr.value)  # type: ignore[attr-defined]
    if t is E.Var:
        assert isinstance(expr, E.Var)
        for i, known in enumerate(variables):
            if known is expr:
                return (i,)
        variables.append(expr)
        return (len(variables) - 1, expr.name, expr.dtype)
    if isinstance(expr, E.BinaryOp):
        a = shape_key(expr.a, variables)
        b = shape_key(expr.b, variables) if a is not None else None
        return None if b is None else (t, expr.dtype, a, b)
    return None
