"""How TVMScript turns Python operators and `T.` helpers into IR nodes.

TVM's parser does not build a node for every operator it sees: arithmetic goes through TVM's
`tvm::add`/`mul`/... which first promote mismatched operand types (`BinaryOpMatchTypes`) and
then fold constants and identities (`TryConstFold`: `x * 1 -> x`, `x + 0 -> x`, `2 * 3 -> 6`),
while comparisons, `and`/`or`/`not` and the capitalised constructors (`T.Add`, `T.Cast`,
`T.Select`) build the node as written. The parser needs those rules to produce the same IR as
TVM, and the printer needs them to know when operator sugar would not read back as the same
node (then it prints the constructor form, as TVM's printer does). Both import this module, so
the two sides cannot drift apart.
"""

from __future__ import annotations

from typing import Union

from msdb.ir import expr as E
from msdb.ir.arith.fold import FOLDING_ARITH, fold_binary, fold_cast
from msdb.ir.arith.limits import fits, is_integer, value_limit
from msdb.ir.dtype import bits, default_int_dtype, is_float

__all__ = [
    "HANDLE_BUILTINS",
    "FOLDING_ARITH", "literal", "operands", "cast", "match_types", "fold", "arith", "raw", "negate",
    "sugar_reads_back", "max_value", "min_value", "UNARY_MATH", "UNARY_PRED", "BINARY_MATH",
]

#: The `T.` math calls on one operand, the predicates on one, and the math calls on two: what
#: the parser reads as `Call`s and the printer writes back in the same spelling.
UNARY_MATH = frozenset(
    ["exp", "exp2", "exp10", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "sin", "cos",
     "tan", "sinh", "cosh", "tanh", "asin", "acos", "atan", "asinh", "acosh", "atanh",
     "sigmoid", "erf", "floor", "ceil", "round", "trunc", "nearbyint", "fabs"]
)
UNARY_PRED = frozenset(["isnan", "isinf", "isfinite"])
BINARY_MATH = frozenset(["pow", "fmod", "atan2", "hypot", "copysign", "nextafter", "ldexp"])
#: TVM's warp-level matrix builtins (the wmma tensor intrinsics' calls) and the pointer they take:
#: `T.<name>(*args)`, a handle result, string arguments ("row_major") as string immediates.
HANDLE_BUILTINS = frozenset(["tvm_load_matrix_sync", "tvm_store_matrix_sync", "tvm_mma_sync", "tvm_fill_fragment",
                             "tvm_access_ptr"])

Scalar = Union[int, float, bool]
Operand = Union[E.PrimExpr, int, float, bool]


def literal(value: Scalar, other: E.PrimExpr | None = None) -> E.PrimExpr:
    """A Python literal as an immediate, typed after the other operand where TVM does so:
    ints take an integer/float partner's dtype, floats a float partner's dtype, bools stay bool;
    with no partner ints are int32 (int64 when they need it) and floats float32."""
    if isinstance(value, bool):
        return E.IntImm("bool", int(value))
    if isinstance(value, int):
        if other is not None and other.dtype != "bool" and (
            is_float(other.dtype) or (is_integer(other.dtype) and fits(value, other.dtype))
        ):
            return E.make_const(value, other.dtype)
        # A literal too wide for its partner stays int64; type matching then widens the partner.
        return E.IntImm(default_int_dtype(value), value)
    if isinstance(value, float):
        if other is not None and is_float(other.dtype):
            return E.FloatImm(other.dtype, value)
        return E.FloatImm("float32", value)
    raise TypeError(f"cannot use {value!r} as an expression")


def operands(a: Operand, b: Operand) -> tuple[E.PrimExpr, E.PrimExpr]:
    """Convert Python literals against the other operand (the `_auto_broadcast` rule)."""
    if not isinstance(a, E.PrimExpr):
        a = literal(a, b if isinstance(b, E.PrimExpr) else None)
    if not isinstance(b, E.PrimExpr):
        b = literal(b, a)
    return a, b


def cast(dtype: str, value: E.PrimExpr) -> E.PrimExpr:
    """TVM's folding `cast`: same dtype is a no-op, constants convert, anything else is a Cast."""
    folded = fold_cast(dtype, value)
    return folded if folded is not None else E.Cast(dtype, value)


def match_types(a: E.PrimExpr, b: E.PrimExpr) -> tuple[E.PrimExpr, E.PrimExpr]:
    """TVM's `BinaryOpMatchTypes`: int meets float -> float; narrower int widens; bool (a 1-bit
    unsigned in TVM) widens to the integer partner."""
    ta, tb = a.dtype, b.dtype
    if ta == tb:
        return a, b
    fa, fb = is_float(ta), is_float(tb)
    if fb and not fa:
        return cast(tb, a), b
    if fa and not fb:
        return a, cast(ta, b)
    if bits(ta) < bits(tb):
        return cast(tb, a), b
    if bits(ta) > bits(tb):
        return a, cast(ta, b)
    if fa and fb:
        return a, b  # e.g. float16 vs bfloat16: left to the node
    unsigned = "uint" + str(bits(ta))
    return cast(unsigned, a), cast(unsigned, b)


def fold(cls: type, a: E.PrimExpr, b: E.PrimExpr) -> E.PrimExpr | None:
    """What TVM's `TryConstFold` makes of `cls(a, b)` (operands already type-matched), or None
    when it builds the node unchanged (`msdb.ir.arith.fold`)."""
    return fold_binary(cls, a, b)


def arith(cls: type, a: Operand, b: Operand) -> E.PrimExpr:
    """Operator-form arithmetic (`+ - * / // %`, `T.max`, `T.floordiv`, ...): convert literals,
    match types, fold."""
    x, y = match_types(*operands(a, b))
    folded = fold(cls, x, y)
    return folded if folded is not None else cls(x, y)


def raw(cls: type, a: Operand, b: Operand) -> E.PrimExpr:
    """Constructor-form node (`T.Add(a, b)`, comparisons, `and`/`or`): literals converted,
    nothing else touched."""
    x, y = operands(a, b)
    return cls(x, y)


def negate(value: E.PrimExpr) -> E.PrimExpr:
    """`-x` on an expression is `x * -1` in TVM (folded for constants)."""
    return arith(E.Mul, value, E.make_const(-1, value.dtype))


def sugar_reads_back(node: E.BinaryOp) -> bool:
    """True when printing `node` with its operator/function sugar parses back to the same node
    (same operand dtypes and no folding); otherwise the printer uses the constructor form."""
    if node.a.dtype != node.b.dtype:
        return False
    if isinstance(node, FOLDING_ARITH):
        return node.dtype == node.a.dtype and fold(type(node), node.a, node.b) is None
    return True


def max_value(dtype: str) -> E.PrimExpr:
    """`T.max_value(dtype)`: a constant in TVM, not a call."""
    return E.make_const(value_limit(dtype, upper=True), dtype)


def min_value(dtype: str) -> E.PrimExpr:
    """`T.min_value(dtype)`: a constant in TVM, not a call."""
    return E.make_const(value_limit(dtype, upper=False), dtype)
