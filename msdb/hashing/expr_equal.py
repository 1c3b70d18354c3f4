"""Structural equality of two expressions whose free variables are the same objects.

Region inference (`msdb.ir.regions`) and the schedule compare index expressions of one function
with each other, where the variables are shared: `i + 1` built twice is the same expression,
`i + 1` and `j + 1` are not. So variables (and buffers) compare by identity and everything else
by structure, without the renumbering the module walk does. Floats compare by their exact bits,
like the hash.
"""

from __future__ import annotations

import struct
from typing import Callable

from msdb.ir import expr as E

_pack_double = struct.Struct("<d").pack


def structural_equal_expr(a: E.PrimExpr, b: E.PrimExpr) -> bool:
    """True when `a` and `b` are the same expression tree over the same variables."""
    if a is b:
        return True
    cls_a, cls_b = type(a), type(b)
    if cls_a is not cls_b:
        # A subclass (e.g. the TE builder's loads) is the node it extends, as in the hash walk.
        if _canonical(cls_a) is not _canonical(cls_b):
            return False
    if a.dtype != b.dtype:
        return False
    try:
        compare = _COMPARE[cls_a]
    except KeyError:
        compare = _resolve(cls_a)
    return compare(a, b)


def _exprs_equal(xs: tuple[E.PrimExpr, ...], ys: tuple[E.PrimExpr, ...]) -> bool:
    if len(xs) != len(ys):
        return False
    for x, y in zip(xs, ys):
        if not structural_equal_expr(x, y):
            return False
    return True


def _never(a: E.PrimExpr, b: E.PrimExpr) -> bool:
    return False  # distinct Var objects: different variables


def _int_imm(a: E.IntImm, b: E.IntImm) -> bool:
    return int(a.value) == int(b.value)


def _float_imm(a: E.FloatImm, b: E.FloatImm) -> bool:
    return _pack_double(float(a.value)) == _pack_double(float(b.value))


def _string_imm(a: E.StringImm, b: E.StringImm) -> bool:
    return a.value == b.value


def _binary(a: E.BinaryOp, b: E.BinaryOp) -> bool:
    return structural_equal_expr(a.a, b.a) and structural_equal_expr(a.b, b.b)


def _not(a: E.Not, b: E.Not) -> bool:
    return structural_equal_expr(a.a, b.a)


def _select(a: E.Select, b: E.Select) -> bool:
    return (
        structural_equal_expr(a.condition, b.condition)
        and structural_equal_expr(a.true_value, b.true_value)
        and structural_equal_expr(a.false_value, b.false_value)
    )


def _cast(a: E.Cast, b: E.Cast) -> bool:
    return structural_equal_expr(a.value, b.value)


def _call(a: E.Call, b: E.Call) -> bool:
    return a.op == b.op and _exprs_equal(a.args, b.args)


def _load(a: E.BufferLoad, b: E.BufferLoad) -> bool:
    return a.buffer is b.buffer and _exprs_equal(a.indices, b.indices)


_COMPARE: dict[type, Callable[[E.PrimExpr, E.PrimExpr], bool]] = {
    **{cls: _binary for cls in (E.Add, E.Sub, E.Mul, E.Div, E.Mod, E.FloorDiv, E.FloorMod, E.Min, E.Max,
                                E.EQ, E.NE, E.LT, E.LE, E.GT, E.GE, E.And, E.Or)},
    E.Var: _never,
    E.IntImm: _int_imm,
    E.FloatImm: _float_imm,
    E.StringImm: _string_imm,
    E.BinaryOp: _binary,
    E.Not: _not,
    E.Select: _select,
    E.Cast: _cast,
    E.Call: _call,
    E.BufferLoad: _load,
}


_KNOWN = frozenset(_COMPARE)
_CANONICAL: dict[type, type] = {cls: cls for cls in _KNOWN}


def _canonical(cls: type) -> type:
    """The node class `cls` stands for: itself if known, else its nearest known base (an unknown
    direct BinaryOp subclass is its own kind, matching the hash walk, which writes its name)."""
    try:
        return _CANONICAL[cls]
    except KeyError:
        pass
    result = cls
    for klass in cls.__mro__[1:]:
        if klass is E.BinaryOp:
            break
        if klass in _KNOWN:
            result = klass
            break
    _CANONICAL[cls] = result
    return result


def _resolve(cls: type) -> Callable[[E.PrimExpr, E.PrimExpr], bool]:
    for klass in cls.__mro__[1:]:
        compare = _COMPARE.get(klass)
        if compare is not None:
            _COMPARE[cls] = compare
            return compare
    raise TypeError(f"structural_equal_expr cannot compare expression node {cls.__name__}")
