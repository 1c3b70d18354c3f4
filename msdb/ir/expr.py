"""Scalar expressions of the workload IR (docs/architecture.md, "Workload IR").

The node set mirrors TVM's TensorIR `PrimExpr` family one to one so that TVM workloads and the
loop nests TVM's schedules produce map onto it without loss. Nodes are frozen and compare by
identity (like TVM's object references): a `Var` is the same variable only if it is the same
object, which is what loop and block bindings need. Structural comparison lives in
`msdb.hashing`.

Python operators build nodes (`i * 4 + j`), with Python ints and floats converted to immediates
of the other operand's dtype. `==` is *not* overloaded (nodes are dictionary keys); use
`a.equal(b)` to build an `EQ` node.
"""

from __future__ import annotations

import pickle
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, Union

from msdb.ir.dtype import default_float_dtype, default_int_dtype, is_float, is_int, is_uint
from msdb.ir.slot_init import fast_init, slot_setter

ExprLike = Union["PrimExpr", int, float, bool]


@dataclass(frozen=True, eq=False, slots=True)
class PrimExpr:
    """Base of every scalar expression; `dtype` is a TVM dtype string ("int32", "float32", "bool")."""

    dtype: str

    # ---- arithmetic sugar (used by the TE builder, the parser and the schedule) ----
    def __add__(self, other: ExprLike) -> PrimExpr:
        return Add(*_binary_operands(self, other))

    def __radd__(self, other: ExprLike) -> PrimExpr:
        return Add(*_binary_operands(other, self))

    def __sub__(self, other: ExprLike) -> PrimExpr:
        return Sub(*_binary_operands(self, other))

    def __rsub__(self, other: ExprLike) -> PrimExpr:
        return Sub(*_binary_operands(other, self))

    def __mul__(self, other: ExprLike) -> PrimExpr:
        return Mul(*_binary_operands(self, other))

    def __rmul__(self, other: ExprLike) -> PrimExpr:
        return Mul(*_binary_operands(other, self))

    def __truediv__(self, other: ExprLike) -> PrimExpr:
        return Div(*_binary_operands(self, other))

    def __rtruediv__(self, other: ExprLike) -> PrimExpr:
        return Div(*_binary_operands(other, self))

    def __floordiv__(self, other: ExprLike) -> PrimExpr:
        return FloorDiv(*_binary_operands(self, other))

    def __rfloordiv__(self, other: ExprLike) -> PrimExpr:
        return FloorDiv(*_binary_operands(other, self))

    def __mod__(self, other: ExprLike) -> PrimExpr:
        return FloorMod(*_binary_operands(self, other))

    def __rmod__(self, other: ExprLike) -> PrimExpr:
        return FloorMod(*_binary_operands(other, self))

    def __neg__(self) -> PrimExpr:
        # TVM's Python `-x` builds `x * -1`; matching it keeps TE bodies structurally equal to TVM's.
        return Mul(self, make_const(-1, self.dtype))

    def __lt__(self, other: ExprLike) -> PrimExpr:
        return LT(*_binary_operands(self, other))

    def __le__(self, other: ExprLike) -> PrimExpr:
        return LE(*_binary_operands(self, other))

    def __gt__(self, other: ExprLike) -> PrimExpr:
        return GT(*_binary_operands(self, other))

    def __ge__(self, other: ExprLike) -> PrimExpr:
        return GE(*_binary_operands(self, other))

    def __and__(self, other: ExprLike) -> PrimExpr:
        return And(*_binary_operands(self, other))

    def __or__(self, other: ExprLike) -> PrimExpr:
        return Or(*_binary_operands(self, other))

    def __invert__(self) -> PrimExpr:
        return Not(self)

    def __bool__(self) -> bool:
        raise TypeError(
            "an IR expression has no truth value; build a condition node (e.g. `a < b`) "
            "instead of using it in a Python `if`"
        )

    def equal(self, other: ExprLike) -> PrimExpr:
        """Build an `EQ` node (`==` keeps Python identity semantics)."""
        return EQ(*_binary_operands(self, other))

    def not_equal(self, other: ExprLike) -> PrimExpr:
        """Build an `NE` node."""
        return NE(*_binary_operands(self, other))

    def astype(self, dtype: str) -> PrimExpr:
        """Cast to `dtype`; a no-op when the dtype already matches."""
        return self if dtype == self.dtype else Cast(dtype, self)


_set_dtype = slot_setter(PrimExpr, "dtype")


# ---------------------------------------------------------------------------------------------
# Leaves
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False, slots=True)
class Var(PrimExpr):
    """A variable: loop variable, block iter var, function parameter (dtype "handle") or size var."""

    name: str = "v"

    def __init__(self, name: str, dtype: str = "int32") -> None:
        _set_dtype(self, dtype)
        _set_var_name(self, name)

    def __repr__(self) -> str:
        return f"Var({self.name!r}, {self.dtype!r})"


_set_var_name = slot_setter(Var, "name")


@fast_init
@dataclass(frozen=True, eq=False, slots=True)
class IntImm(PrimExpr):
    """An integer (or bool) constant."""

    value: int = 0

    def __repr__(self) -> str:
        return f"IntImm({self.dtype!r}, {self.value})"


@fast_init
@dataclass(frozen=True, eq=False, slots=True)
class FloatImm(PrimExpr):
    """A floating-point constant."""

    value: float = 0.0

    def __repr__(self) -> str:
        return f"FloatImm({self.dtype!r}, {self.value!r})"


@fast_init
@dataclass(frozen=True, eq=False, slots=True)
class StringImm(PrimExpr):
    """A string constant (only as a call argument or annotation value)."""

    value: str = ""


# ---------------------------------------------------------------------------------------------
# Operators
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False, slots=True)
class BinaryOp(PrimExpr):
    """Two-operand node; `dtype` is the result type (bool for comparisons and logic)."""

    a: PrimExpr = field(default=None)  # type: ignore[assignment]
    b: PrimExpr = field(default=None)  # type: ignore[assignment]

    def __init__(self, a: PrimExpr, b: PrimExpr, dtype: str | None = None) -> None:
        _set_dtype(self, dtype or type(self).result_dtype(a, b))
        _set_binary_a(self, a)
        _set_binary_b(self, b)

    @staticmethod
    def result_dtype(a: PrimExpr, b: PrimExpr) -> str:
        return a.dtype


_set_binary_a = slot_setter(BinaryOp, "a")
_set_binary_b = slot_setter(BinaryOp, "b")


class Add(BinaryOp):
    """a + b"""

    __slots__ = ()


class Sub(BinaryOp):
    """a - b"""

    __slots__ = ()


class Mul(BinaryOp):
    """a * b"""

    __slots__ = ()


class Div(BinaryOp):
    """a / b: true division for floats, truncating division for ints (TVM's `tir.Div`)."""

    __slots__ = ()


class Mod(BinaryOp):
    """a % b with truncation semantics (TVM's `tir.Mod`; rare in scripts, which print floormod as %)."""

    __slots__ = ()


class FloorDiv(BinaryOp):
    """floor(a / b): Python `//` semantics (TVMScript prints it as `//`)."""

    __slots__ = ()


class FloorMod(BinaryOp):
    """a - floor(a / b) * b: Python `%` semantics (TVMScript prints it as `%`)."""

    __slots__ = ()


class Min(BinaryOp):
    """min(a, b)"""

    __slots__ = ()


class Max(BinaryOp):
    """max(a, b)"""

    __slots__ = ()


class CmpOp(BinaryOp):
    """A comparison: result dtype bool."""

    __slots__ = ()

    @staticmethod
    def result_dtype(a: PrimExpr, b: PrimExpr) -> str:
        return "bool"


class EQ(CmpOp):
    """a == b"""

    __slots__ = ()


class NE(CmpOp):
    """a != b"""

    __slots__ = ()


class LT(CmpOp):
    """a < b"""

    __slots__ = ()


class LE(CmpOp):
    """a <= b"""

    __slots__ = ()


class GT(CmpOp):
    """a > b"""

    __slots__ = ()


class GE(CmpOp):
    """a >= b"""

    __slots__ = ()


class And(CmpOp):
    """a and b (logical)"""

    __slots__ = ()


class Or(CmpOp):
    """a or b (logical)"""

    __slots__ = ()


@dataclass(frozen=True, eq=False, slots=True)
class Not(PrimExpr):
    """not a"""

    a: PrimExpr = field(default=None)  # type: ignore[assignment]

    def __init__(self, a: PrimExpr) -> None:
        _set_dtype(self, "bool")
        _set_not_a(self, a)


_set_not_a = slot_setter(Not, "a")


@dataclass(frozen=True, eq=False, slots=True)
class Select(PrimExpr):
    """`T.Select(cond, t, f)`: both arms are evaluated (unlike `if_then_else`)."""

    condition: PrimExpr = field(default=None)  # type: ignore[assignment]
    true_value: PrimExpr = field(default=None)  # type: ignore[assignment]
    false_value: PrimExpr = field(default=None)  # type: ignore[assignment]

    def __init__(self, condition: PrimExpr, true_value: PrimExpr, false_value: PrimExpr) -> None:
        _set_dtype(self, true_value.dtype)
        _set_select_condition(self, condition)
        _set_select_true(self, true_value)
        _set_select_false(self, false_value)


_set_select_condition = slot_setter(Select, "condition")
_set_select_true = slot_setter(Select, "true_value")
_set_select_false = slot_setter(Select, "false_value")


@fast_init
@dataclass(frozen=True, eq=False, slots=True)
class Cast(PrimExpr):
    """Convert `value` to `dtype` (`T.Cast(dtype, v)` / `v.astype(dtype)`)."""

    value: PrimExpr = field(default=None)  # type: ignore[assignment]


@fast_init
@dataclass(frozen=True, eq=False, slots=True)
class Call(PrimExpr):
    """A call of a named intrinsic: `op` is TVM's op name without the "tir." prefix
    ("exp", "sqrt", "if_then_else", "fabs", "tanh", "pow", ...)."""

    op: str = ""
    args: tuple[PrimExpr, ...] = ()


@dataclass(frozen=True, eq=False, slots=True)
class BufferLoad(PrimExpr):
    """`buffer[indices]`; dtype is the buffer's element dtype."""

    buffer: "Buffer" = field(default=None)  # type: ignore[assignment]
    indices: tuple[PrimExpr, ...] = ()

    def __init__(self, buffer: "Buffer", indices: tuple[PrimExpr, ...] | list[PrimExpr]) -> None:
        _set_dtype(self, buffer.dtype)
        _set_load_buffer(self, buffer)
        _set_load_indices(self, tuple(indices))


_set_load_buffer = slot_setter(BufferLoad, "buffer")
_set_load_indices = slot_setter(BufferLoad, "indices")


# ---------------------------------------------------------------------------------------------
# Buffers and ranges (expressions refer to them; statements declare them)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False, slots=True)
class Buffer:
    """A multi-dimensional array: a function argument, an intermediate (`alloc_buffers`) or a
    cache (`scope` "global", "shared", "local", ...). Identity equality, like `Var`."""

    name: str
    shape: tuple[PrimExpr, ...]
    dtype: str = "float32"
    scope: str = "global"
    strides: tuple[PrimExpr, ...] = ()
    elem_offset: PrimExpr | None = None
    data_alignment: int = 64
    offset_factor: int = 1
    axis_separators: tuple[int, ...] = ()
    #: The data pointer as a variable (`C.data`), for buffers that tensor intrinsics pass to
    #: hardware calls (`T.tvm_fill_fragment(C.data, ...)`); None for the rest.
    data: Var | None = None

    def __setstate__(self, state: list[Any]) -> None:
        """Unpickling (`msdb.ir.codec`): a blob written before a field existed (`data`, stop 35)
        gives the fields it has; the newer ones take their defaults."""
        for f in fields(self):
            if f.name in _BUFFER_FIELD_INDEX and _BUFFER_FIELD_INDEX[f.name] < len(state):
                value = state[_BUFFER_FIELD_INDEX[f.name]]
            elif f.default is not MISSING:
                value = f.default
            else:
                raise pickle.UnpicklingError(f"buffer state lacks field {f.name!r}")
            object.__setattr__(self, f.name, value)

    def __getitem__(self, indices: ExprLike | tuple[ExprLike, ...]) -> BufferLoad:
        if not isinstance(indices, tuple):
            indices = (indices,)
        return BufferLoad(self, tuple(convert(i) for i in indices))

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __repr__(self) -> str:
        return f"Buffer({self.name!r}, {self.dtype!r}, ndim={len(self.shape)}, scope={self.scope!r})"


_BUFFER_FIELD_INDEX = {f.name: i for i, f in enumerate(fields(Buffer))}


@fast_init
@dataclass(frozen=True, eq=False, slots=True)
class Range:
    """[min, min + extent)"""

    min: PrimExpr
    extent: PrimExpr

    @staticmethod
    def from_extent(extent: ExprLike, dtype: str = "int32") -> Range:
        ext = convert(extent, dtype)
        return Range(make_const(0, ext.dtype), ext)


# ---------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------


def make_const(value: int | float | bool, dtype: str) -> PrimExpr:
    """An immediate of `dtype` (bool and ints give IntImm, floats give FloatImm)."""
    if is_float(dtype):
        return FloatImm(dtype, float(value))
    if dtype == "bool":
        return IntImm("bool", int(bool(value)))
    if is_int(dtype) or is_uint(dtype):
        return IntImm(dtype, int(value))
    raise ValueError(f"cannot make a constant of dtype {dtype!r}")


def convert(value: ExprLike, dtype: str | None = None) -> PrimExpr:
    """Turn a Python scalar into an immediate (int -> int32, float -> float32, bool -> bool)."""
    if isinstance(value, PrimExpr):
        return value
    if isinstance(value, bool):
        return IntImm("bool", int(value))
    if isinstance(value, int):
        return IntImm(dtype or default_int_dtype(value), value)
    if isinstance(value, float):
        return FloatImm(dtype or default_float_dtype(), value)
    raise TypeError(f"cannot convert {value!r} ({type(value).__name__}) to an IR expression")


def _binary_operands(a: ExprLike, b: ExprLike) -> tuple[PrimExpr, PrimExpr]:
    """Convert Python scalars to the dtype of the other operand (TVM's implicit promotion for
    literals); two expressions of different dtypes are left for the caller to cast."""
    if isinstance(a, PrimExpr) and not isinstance(b, PrimExpr):
        return a, convert(b, _literal_dtype(a.dtype, b))
    if isinstance(b, PrimExpr) and not isinstance(a, PrimExpr):
        return convert(a, _literal_dtype(b.dtype, a)), b
    return convert(a), convert(b)


def _literal_dtype(other_dtype: str, literal: int | float | bool) -> str | None:
    if isinstance(literal, float) and not is_float(other_dtype):
        return None
    if other_dtype == "bool" and not isinstance(literal, bool):
        return None
    return other_dtype


def const_value(expr: PrimExpr) -> int | float | None:
    """The Python value of an immediate, else None."""
    if isinstance(expr, (IntImm, FloatImm)):
        return expr.value
    return None


def const_int(expr: PrimExpr) -> int | None:
    """The value of an integer immediate, else None."""
    return expr.value if isinstance(expr, IntImm) else None
