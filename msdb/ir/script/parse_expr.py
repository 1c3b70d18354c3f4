"""Expressions of the TVMScript parser: Python literals, operators and `T.*` calls evaluated
to IR with TVM's typing and folding (`ops`), element accesses `A[i, j]`, and attribute values
(docs/architecture.md, "TVMScript parser")."""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass
from typing import Any, Callable

from msdb.ir import expr as E
from msdb.ir.dtype import default_int_dtype, is_float, is_int, is_integer_like, is_uint, is_valid
from msdb.ir.script import ops
from msdb.ir.script.ops import BINARY_MATH, HANDLE_BUILTINS, UNARY_MATH, UNARY_PRED
from msdb.ir.script.parse_scope import ALLOC_FUNCS, BLOCK_ATTR_FUNCS, BLOCK_FUNCS, DTYPE_NAMES, ScopedParser, dotted



_FOLDING_FUNCS: dict[str, type] = {
    "max": E.Max, "min": E.Min, "floordiv": E.FloorDiv, "floormod": E.FloorMod,
    "truncdiv": E.Div, "truncmod": E.Mod, "indexdiv": E.FloorDiv, "indexmod": E.FloorMod,
}
_RAW_CTORS: dict[str, type] = {
    "Add": E.Add, "Sub": E.Sub, "Mul": E.Mul, "Div": E.Div, "Mod": E.Mod,
    "FloorDiv": E.FloorDiv, "FloorMod": E.FloorMod, "Min": E.Min, "Max": E.Max,
    "EQ": E.EQ, "NE": E.NE, "LT": E.LT, "LE": E.LE, "GT": E.GT, "GE": E.GE,
    "And": E.And, "Or": E.Or,
}
_CMP_OPS: dict[type, type] = {
    ast.Eq: E.EQ, ast.NotEq: E.NE, ast.Lt: E.LT, ast.LtE: E.LE, ast.Gt: E.GT, ast.GtE: E.GE,
}
ARITH_OPS: dict[type, type] = {
    ast.Add: E.Add, ast.Sub: E.Sub, ast.Mult: E.Mul, ast.Div: E.Div,
    ast.FloorDiv: E.FloorDiv, ast.Mod: E.FloorMod,
}
_BIT_OPS: dict[type, str] = {
    ast.BitAnd: "bitwise_and", ast.BitOr: "bitwise_or", ast.BitXor: "bitwise_xor",
    ast.LShift: "shift_left", ast.RShift: "shift_right",
}


@dataclass(frozen=True)
class VarDecl:
    """`T.int32()` with no argument: declares a (size) variable of this dtype."""

    dtype: str


@dataclass(frozen=True)
class DType:
    """`T.float32` used as a value (an annotation or a dtype argument)."""

    dtype: str


class ExprParser(ScopedParser):
    """Evaluates expression nodes; the buffer and statement layers build on it."""

    # ------------------------------------------------------------------ attribute values
    def attr_dict(self, node: ast.expr) -> dict[str, Any]:
        value = self.value(node)
        return self._annotation_map(value, node)

    def _annotation_map(self, value: Any, node: ast.AST) -> dict[str, Any]:
        if not isinstance(value, dict):
            self.err(node, "expected a dict literal with string keys")
        for key in value:
            if not isinstance(key, str):
                self.err(node, f"attribute keys must be strings, got {key!r}")
        for key, item in value.items():
            self._check_attr_value(item, node, key)
        return value

    def _check_attr_value(self, item: Any, node: ast.AST, key: str) -> None:
        if isinstance(item, (bool, int, float, str, E.PrimExpr)) or item is None:
            return
        if isinstance(item, (list, tuple)):
            for x in item:
                self._check_attr_value(x, node, key)
            return
        if isinstance(item, dict):
            self._annotation_map(item, node)
            return
        self.err(node, f"unsupported value for attribute {key!r}: {describe(item)}")

    def keywords(self, call: ast.Call) -> dict[str, tuple[Any, ast.expr]]:
        out: dict[str, tuple[Any, ast.expr]] = {}
        for kw in call.keywords:
            if kw.arg is None:
                self.err(kw, "**kwargs are not supported")
            out[kw.arg] = (self.value(kw.value), kw.value)
        return out

    # ------------------------------------------------------------------ expressions
    def expr(self, node: ast.expr) -> E.PrimExpr:
        """An expression as an IR node (Python literals become immediates)."""
        value = self.value(node)
        if isinstance(value, E.PrimExpr):
            return value
        if isinstance(value, (bool, int, float)):
            return ops.literal(value)
        if isinstance(value, str):
            return E.StringImm("handle", value)
        self.err(node, f"expected an expression, got {describe(value)}")

    def _int_value(self, node: ast.expr, what: str) -> E.PrimExpr | int:
        value = self.value(node)
        if isinstance(value, bool) or not isinstance(value, (int, E.PrimExpr)) or (
            isinstance(value, E.PrimExpr) and not (is_int(value.dtype) or is_uint(value.dtype))
        ):
            self.err(node, f"{what} must be an integer expression, got {describe(value)}")
        return value

    def _int_expr(self, node: ast.expr, what: str) -> E.PrimExpr:
        value = self._int_value(node, what)
        return E.IntImm(default_int_dtype(value), value) if isinstance(value, int) else value

    def _range_of(self, start_node: ast.expr, stop_node: ast.expr, what: str) -> tuple[E.PrimExpr, E.PrimExpr]:
        """(min, extent) of `start:stop`. The printer writes `m:m + e` for a symbolic start;
        reading `e` back directly keeps the extent exactly as it was."""
        start = self._int_value(start_node, what)
        if (
            isinstance(stop_node, ast.BinOp)
            and isinstance(stop_node.op, ast.Add)
            and ast.dump(stop_node.left) == ast.dump(start_node)
        ):
            ext = self._int_value(stop_node.right, what)
        else:
            stop = self._int_value(stop_node, what)
            if isinstance(stop, int) and isinstance(start, int):
                ext = stop - start
            else:
                ext = ops.arith(E.Sub, stop, start)
        lo, ext_e = ops.operands(start, ext)
        lo, ext_e = ops.match_types(lo, ext_e)
        return lo, ext_e

    def value(self, node: ast.expr) -> Any:
        """Evaluate a node to a Python value, an IR expression, a Buffer or a marker."""
        method = self._dispatch.get(type(node))
        if method is None:
            self.err(node, f"unsupported expression ({type(node).__name__})")
        return method(self, node)

    def _v_constant(self, node: ast.Constant) -> Any:
        if isinstance(node.value, (bool, int, float, str)) or node.value is None:
            return node.value
        self.err(node, f"unsupported constant {node.value!r}")

    def _v_name(self, node: ast.Name) -> Any:
        return self.lookup(node.id, node)

    def _v_tuple(self, node: ast.Tuple) -> tuple:
        return tuple(self.value(e) for e in node.elts)

    def _v_list(self, node: ast.List) -> list:
        return [self.value(e) for e in node.elts]

    def _v_dict(self, node: ast.Dict) -> dict:
        out = {}
        for k, v in zip(node.keys, node.values):
            if k is None:
                self.err(v, "dict unpacking is not supported")
            out[self.value(k)] = self.value(v)
        return out

    def _v_attribute(self, node: ast.Attribute) -> Any:
        field = self._buffer_field(node)
        if field is not None:
            return field
        name = self.t_func(node)
        if name is not None:
            if name in DTYPE_NAMES or name == "handle":
                return DType(name)
            self.err(node, f"T.{name} cannot be used as a value")
        self.err(node, f"unsupported attribute access '{dotted(node) or node.attr}'")

    def _buffer_field(self, node: ast.Attribute) -> E.Var | E.PrimExpr | None:
        """`C.data` and `C.elem_offset` of a buffer (None when `node` is not a buffer's)."""
        if not isinstance(node.value, ast.Name) or node.attr not in ("data", "elem_offset"):
            return None
        buffer = self.lookup(node.value.id, node.value)
        if not isinstance(buffer, E.Buffer):
            return None
        value = buffer.data if node.attr == "data" else buffer.elem_offset
        if value is None:
            self.err(node, f"buffer {buffer.name} has no {node.attr} variable (declare it with strides or an "
                           "offset_factor, as a tensor intrinsic's buffer)")
        return value

    def _v_subscript(self, node: ast.Subscript) -> Any:
        base = node.value
        if isinstance(base, ast.Attribute) and base.attr == "strides" and isinstance(base.value, ast.Name):
            buffer = self.lookup(base.value.id, base.value)
            if isinstance(buffer, E.Buffer):
                index = self.value(node.slice)
                if not isinstance(index, int) or not 0 <= index < len(buffer.strides):
                    self.err(node, f"buffer {buffer.name} has {len(buffer.strides)} strides; index them with a "
                                   "literal integer")
                return buffer.strides[index]
        if isinstance(base, ast.Name):
            value = self.lookup(base.id, base)
            if isinstance(value, E.Buffer):
                return E.BufferLoad(value, self._indices(node, value))
        self.err(node, "only buffers can be indexed")

    def _v_unaryop(self, node: ast.UnaryOp) -> Any:
        operand = self.value(node.operand)
        if isinstance(node.op, ast.Not):
            if isinstance(operand, bool):
                return not operand
            if isinstance(operand, E.PrimExpr):
                if operand.dtype != "bool":
                    self.err(node, f"'not' needs a boolean operand, got dtype {operand.dtype}")
                return E.Not(operand)
        elif isinstance(node.op, ast.USub):
            if isinstance(operand, (int, float)) and not isinstance(operand, bool):
                return -operand
            if isinstance(operand, E.PrimExpr):
                return ops.negate(operand)
        elif isinstance(node.op, ast.UAdd):
            if isinstance(operand, (int, float, E.PrimExpr)) and not isinstance(operand, bool):
                return operand
        elif isinstance(node.op, ast.Invert):
            if isinstance(operand, E.PrimExpr) and is_integer_like(operand.dtype):
                return E.Call(operand.dtype, "bitwise_not", (operand,))
        self.err(node, f"unsupported operand for unary {type(node.op).__name__}: {describe(operand)}")

    def _v_binop(self, node: ast.BinOp) -> Any:
        a = self.value(node.left)
        b = self.value(node.right)
        op = type(node.op)
        if op in ARITH_OPS:
            return self._binop(ARITH_OPS[op], a, b, node)
        if op in _BIT_OPS:
            if _is_py_num(a) and _is_py_num(b) and isinstance(a, int) and isinstance(b, int):
                return _py_bitop(op, a, b)
            x, y = self._operands(a, b, node)
            if not (is_integer_like(x.dtype) and is_integer_like(y.dtype)):
                self.err(node, "bitwise operators need integer operands")
            x, y = ops.match_types(x, y)
            return E.Call(x.dtype, _BIT_OPS[op], (x, y))
        if op is ast.Pow:
            self.err(node, "the ** operator is not supported; use T.pow(a, b)")
        self.err(node, f"unsupported operator {op.__name__}")

    def _operands(self, a: Any, b: Any, node: ast.AST) -> tuple[E.PrimExpr, E.PrimExpr]:
        for v in (a, b):
            if not (isinstance(v, E.PrimExpr) or _is_py_num(v)):
                self.err(node, f"unsupported operand {describe(v)}")
        try:
            return ops.operands(a, b)
        except (TypeError, ValueError) as exc:
            self.err(node, str(exc))

    def _binop(self, cls: type, a: Any, b: Any, node: ast.AST) -> Any:
        if _is_py_num(a) and _is_py_num(b):
            return _py_arith(cls, a, b, node, self)
        x, y = self._operands(a, b, node)
        if cls is E.Div and not is_float(x.dtype) and not is_float(y.dtype):
            self.err(node, "integer division with / is ambiguous; use // (floordiv), T.truncdiv, % (floormod) or T.truncmod")
        try:
            return ops.arith(cls, x, y)
        except (TypeError, ValueError) as exc:
            self.err(node, str(exc))

    def _v_boolop(self, node: ast.BoolOp) -> Any:
        values = [self.value(v) for v in node.values]
        cls = E.And if isinstance(node.op, ast.And) else E.Or
        if all(isinstance(v, bool) for v in values):
            return all(values) if cls is E.And else any(values)
        acc = None
        for v, vnode in zip(values, node.values):
            if isinstance(v, bool):
                v = E.IntImm("bool", int(v))
            if not isinstance(v, E.PrimExpr) or v.dtype != "bool":
                self.err(vnode, f"'{'and' if cls is E.And else 'or'}' needs boolean operands, got {describe(v)}")
            acc = v if acc is None else cls(acc, v)
        return acc

    def _v_compare(self, node: ast.Compare) -> Any:
        left = self.value(node.left)
        result = None
        for op, right_node in zip(node.ops, node.comparators):
            right = self.value(right_node)
            cls = _CMP_OPS.get(type(op))
            if cls is None:
                self.err(node, f"unsupported comparison {type(op).__name__}")
            if _is_py_num(left) and _is_py_num(right):
                part: Any = _py_compare(cls, left, right)
            else:
                x, y = self._operands(left, right, node)
                if x.dtype != y.dtype:
                    self.err(node, f"cannot compare {x.dtype} with {y.dtype}; cast one side with T.Cast")
                part = cls(x, y)
            if result is None:
                result = part
            elif isinstance(result, bool) and isinstance(part, bool):
                result = result and part
            else:
                r = E.IntImm("bool", int(result)) if isinstance(result, bool) else result
                p = E.IntImm("bool", int(part)) if isinstance(part, bool) else part
                result = E.And(r, p)
            left = right
        return result

    def _v_call(self, node: ast.Call) -> Any:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "astype" and self.t_func(func) is None:
            base = self.expr(func.value)
            if len(node.args) != 1 or node.keywords:
                self.err(node, "astype takes one dtype")
            return ops.cast(self._dtype_of(self.value(node.args[0]), node.args[0]), base)
        name = self.t_func(func)
        if name is None:
            fname = dotted(func) or "this function"
            self.err(func, f"unknown function {fname}; only T.* functions can be called")
        handler = _T_CALLS.get(name)
        if handler is None:
            if name in UNARY_MATH or name in UNARY_PRED:
                return self._math1(name, node)
            if name in BINARY_MATH:
                return self._math2(name, node)
            if name in DTYPE_NAMES:
                return self._dtype_ctor(name, node)
            if name in _FOLDING_FUNCS:
                a, b = self._args(node, 2, f"T.{name}")
                return self._binop_fn(_FOLDING_FUNCS[name], a, b, node)
            if name in _RAW_CTORS:
                a, b = self._args(node, 2, f"T.{name}")
                return ops.raw(_RAW_CTORS[name], *self._operands(a, b, node))
            if name in _STATEMENT_ONLY:
                self.err(node, f"T.{name} is a statement, not an expression")
            self.err(func, f"unknown TVMScript function T.{name}")
        return handler(self, node)

    def _binop_fn(self, cls: type, a: Any, b: Any, node: ast.AST) -> E.PrimExpr:
        if _is_py_num(a) and _is_py_num(b):
            a = ops.literal(a)
        x, y = self._operands(a, b, node)
        return ops.arith(cls, x, y)

    def _args(self, node: ast.Call, n: int, what: str) -> list[Any]:
        if len(node.args) != n or node.keywords:
            self.err(node, f"{what} takes {n} argument(s), got {len(node.args) + len(node.keywords)}")
        return [self.value(a) for a in node.args]

    def _args_dtype(self, node: ast.Call, n: int, what: str) -> tuple[list[Any], str | None]:
        """Arguments of an intrinsic call that TVM <= 0.8 printed with a `dtype=` keyword."""
        keywords = [kw for kw in node.keywords if kw.arg != "dtype"]
        if len(node.args) != n or keywords:
            self.err(node, f"{what} takes {n} argument(s), got {len(node.args) + len(keywords)}")
        dtype = None
        for kw in node.keywords:
            dtype = self._dtype_of(self.value(kw.value), kw.value)
        return [self.value(a) for a in node.args], dtype

    def _as_expr(self, value: Any, node: ast.AST) -> E.PrimExpr:
        if isinstance(value, E.PrimExpr):
            return value
        if _is_py_num(value):
            return ops.literal(value)
        self.err(node, f"expected an expression, got {describe(value)}")

    def _math1(self, name: str, node: ast.Call) -> E.PrimExpr:
        (x,), dtype = self._args_dtype(node, 1, f"T.{name}")
        x = self._as_expr(x, node.args[0])
        return E.Call(dtype or ("bool" if name in UNARY_PRED else x.dtype), name, (x,))

    def _math2(self, name: str, node: ast.Call) -> E.PrimExpr:
        (a, b), dtype = self._args_dtype(node, 2, f"T.{name}")
        x, y = ops.match_types(*self._operands(a, b, node))
        return E.Call(dtype or x.dtype, name, (x, y))

    def _dtype_ctor(self, dtype: str, node: ast.Call) -> Any:
        if not node.args:
            for kw in node.keywords:
                if kw.arg != "is_size_var":
                    self.err(kw, f"unexpected keyword {kw.arg!r} for T.{dtype}()")
            return VarDecl(dtype)
        (value,) = self._args(node, 1, f"T.{dtype}")
        if isinstance(value, str) and is_float(dtype):
            try:
                value = float(value)
            except ValueError:
                self.err(node.args[0], f"T.{dtype} cannot convert {value!r}")
        if isinstance(value, E.PrimExpr):
            return ops.cast(dtype, value)
        if isinstance(value, bool):
            return E.make_const(value, dtype)
        if isinstance(value, int):
            return E.make_const(value, dtype)
        if isinstance(value, float):
            if not is_float(dtype):
                if dtype != "bool" and value.is_integer():
                    return E.make_const(int(value), dtype)
                self.err(node.args[0], f"T.{dtype} expects an integer, got {value!r}")
            return E.FloatImm(dtype, value)
        self.err(node.args[0], f"T.{dtype} cannot convert {describe(value)}")

    def _dtype_of(self, value: Any, node: ast.AST) -> str:
        if isinstance(value, DType):
            return value.dtype
        if not isinstance(value, str):
            self.err(node, f"expected a dtype string such as \"float32\", got {describe(value)}")
        if not is_valid(value) or value == "handle":
            self.err(node, f"unknown dtype {value!r}")
        return value

    # ------------------------------------------------------------------ element accesses
    def _subscript_items(self, node: ast.Subscript) -> list[ast.expr]:
        sl = node.slice
        if isinstance(sl, ast.Tuple):
            return list(sl.elts)
        return [sl]

    def _indices(self, node: ast.Subscript, buffer: E.Buffer) -> tuple[E.PrimExpr, ...]:
        items = self._subscript_items(node)
        if len(items) == 1 and isinstance(items[0], ast.Tuple) and not items[0].elts:
            items = []  # A[()] on a 0-d buffer
        if isinstance(node.slice, ast.Tuple) and not node.slice.elts:
            items = []
        if len(items) != len(buffer.shape):
            self.err(node, f"buffer {buffer.name} has {len(buffer.shape)} dimension(s) but is indexed with {len(items)}")
        out = []
        for item in items:
            if isinstance(item, ast.Slice):
                self.err(item, f"slices are only allowed in T.reads/T.writes/T.match_buffer regions, not in an access of {buffer.name}")
            out.append(self._index(item))
        return tuple(out)

    def _index(self, node: ast.expr) -> E.PrimExpr:
        value = self.value(node)
        if isinstance(value, bool) or not isinstance(value, (int, E.PrimExpr)):
            self.err(node, f"a buffer index must be an integer expression, got {describe(value)}")
        if isinstance(value, int):
            return E.IntImm(default_int_dtype(value), value)
        if not is_integer_like(value.dtype):
            self.err(node, f"a buffer index must be an integer expression, got dtype {value.dtype}")
        return value

    _dispatch: dict[type, Callable[..., Any]] = {}


ExprParser._dispatch = {
    ast.Constant: ExprParser._v_constant,
    ast.Name: ExprParser._v_name,
    ast.Tuple: ExprParser._v_tuple,
    ast.List: ExprParser._v_list,
    ast.Dict: ExprParser._v_dict,
    ast.Attribute: ExprParser._v_attribute,
    ast.Subscript: ExprParser._v_subscript,
    ast.UnaryOp: ExprParser._v_unaryop,
    ast.BinOp: ExprParser._v_binop,
    ast.BoolOp: ExprParser._v_boolop,
    ast.Compare: ExprParser._v_compare,
    ast.Call: ExprParser._v_call,
}


# ---------------------------------------------------------------------------- T.* handlers
def _t_cast_ctor(p: ExprParser, node: ast.Call) -> E.PrimExpr:
    dtype_v, value = p._args(node, 2, "T.Cast")
    dtype = p._dtype_of(dtype_v, node.args[0])
    return E.Cast(dtype, p._as_expr(value, node.args[1]))


def _t_cast(p: ExprParser, node: ast.Call) -> E.PrimExpr:
    value, dtype_v = p._args(node, 2, "T.cast")
    return ops.cast(p._dtype_of(dtype_v, node.args[1]), p._as_expr(value, node.args[0]))


def _bool_arg(p: ExprParser, value: Any, node: ast.AST, what: str) -> E.PrimExpr:
    if isinstance(value, bool):
        return E.IntImm("bool", int(value))
    if not isinstance(value, E.PrimExpr) or value.dtype != "bool":
        p.err(node, f"{what} needs a boolean condition, got {describe(value)}")
    return value


def _t_if_then_else(p: ExprParser, node: ast.Call) -> E.PrimExpr:
    (cond, a, b), dtype = p._args_dtype(node, 3, "T.if_then_else")
    cond = _bool_arg(p, cond, node.args[0], "T.if_then_else")
    x, y = ops.match_types(*p._operands(a, b, node))
    if isinstance(cond, E.IntImm):
        return x if cond.value else y
    return E.Call(dtype or x.dtype, "if_then_else", (cond, x, y))


def _t_select(p: ExprParser, node: ast.Call) -> E.PrimExpr:
    cond, a, b = p._args(node, 3, "T.Select")
    cond = _bool_arg(p, cond, node.args[0], "T.Select")
    x, y = p._operands(a, b, node)
    return E.Select(cond, x, y)


def _t_not(p: ExprParser, node: ast.Call) -> E.PrimExpr:
    (a,) = p._args(node, 1, "T.Not")
    return E.Not(_bool_arg(p, a, node.args[0], "T.Not"))


def _t_limit(upper: bool) -> Callable[[ExprParser, ast.Call], E.PrimExpr]:
    def handler(p: ExprParser, node: ast.Call) -> E.PrimExpr:
        (dtype_v,) = p._args(node, 1, "T.max_value" if upper else "T.min_value")
        dtype = p._dtype_of(dtype_v, node.args[0])
        return ops.max_value(dtype) if upper else ops.min_value(dtype)

    return handler


def _t_infinity(p: ExprParser, node: ast.Call) -> E.PrimExpr:
    (dtype_v,) = p._args(node, 1, "T.infinity")
    dtype = p._dtype_of(dtype_v, node.args[0])
    if not is_float(dtype):
        p.err(node.args[0], "T.infinity needs a float dtype")
    return E.FloatImm(dtype, math.inf)


def _t_abs(p: ExprParser, node: ast.Call) -> E.PrimExpr:
    (x,) = p._args(node, 1, "T.abs")
    x = p._as_expr(x, node.args[0])
    if is_float(x.dtype):
        return E.Call(x.dtype, "fabs", (x,))
    if is_uint(x.dtype):
        return x
    if isinstance(x, E.IntImm):
        return E.IntImm(x.dtype, abs(x.value))
    zero = E.make_const(0, x.dtype)
    return E.Select(E.GE(x, zero), x, E.Sub(zero, x))


def _t_call_intrin(p: ExprParser, node: ast.Call, prefix_op: str | None = None) -> E.PrimExpr:
    if len(node.args) < 2 or node.keywords:
        p.err(node, "T.call_intrin(dtype, \"tir.op\", *args)")
    dtype = p._dtype_of(p.value(node.args[0]), node.args[0])
    op = p.value(node.args[1])
    if not isinstance(op, str):
        p.err(node.args[1], "the operator name must be a string")
    args = tuple(p.expr(a) for a in node.args[2:])
    if prefix_op is not None:
        return E.Call(dtype, prefix_op, (E.StringImm("handle", op),) + args)
    return E.Call(dtype, op[4:] if op.startswith("tir.") else op, args)


def _t_likely(p: ExprParser, node: ast.Call) -> E.PrimExpr:
    (x,) = p._args(node, 1, "T.likely")
    return E.Call("bool", "likely", (_bool_arg(p, x, node.args[0], "T.likely"),))


def _t_ceildiv(p: ExprParser, node: ast.Call) -> E.PrimExpr:
    a, b = p._args(node, 2, "T.ceildiv")
    x, y = ops.match_types(*p._operands(a, b, node))
    one = E.make_const(1, x.dtype)
    return ops.arith(E.FloorDiv, ops.arith(E.Sub, ops.arith(E.Add, x, y), one), y)


_T_CALLS: dict[str, Callable[[ExprParser, ast.Call], Any]] = {
    "Cast": _t_cast_ctor,
    "cast": _t_cast,
    "if_then_else": _t_if_then_else,
    "Select": _t_select,
    "Not": _t_not,
    "max_value": _t_limit(True),
    "min_value": _t_limit(False),
    "infinity": _t_infinity,
    "abs": _t_abs,
    "call_intrin": _t_call_intrin,
    "call_pure_intrin": _t_call_intrin,
    "call_extern": lambda p, n: _t_call_intrin(p, n, "call_extern"),
    "call_pure_extern": lambda p, n: _t_call_intrin(p, n, "call_pure_extern"),
    "likely": _t_likely,
    "ceildiv": _t_ceildiv,
    "type_annotation": lambda p, n: E.Call(p._dtype_of(p._args(n, 1, "T.type_annotation")[0], n.args[0]),
                                           "type_annotation", ()),
}
for _name in HANDLE_BUILTINS:
    _T_CALLS[_name] = (lambda op: lambda p, n: E.Call("handle", op, tuple(_handle_arg(p, a) for a in n.args)))(_name)


def _handle_arg(p: ExprParser, node: ast.expr) -> E.PrimExpr:
    value = p.value(node)
    if isinstance(value, str):
        return E.StringImm("handle", value)
    return p._as_expr(value, node)

_STATEMENT_ONLY = frozenset(
    ["evaluate", "reads", "writes", "where", "func_attr", "init", "grid", "serial", "parallel",
     "vectorized", "unroll", "thread_binding", "match_buffer", "prim_func", "Buffer", "LetStmt"]
) | BLOCK_FUNCS | ALLOC_FUNCS | BLOCK_ATTR_FUNCS


# ---------------------------------------------------------------------------- helpers
def _is_py_num(value: Any) -> bool:
    return isinstance(value, (bool, int, float)) and not isinstance(value, E.PrimExpr)


def _py_arith(cls: type, a: Any, b: Any, node: ast.AST, p: ExprParser) -> Any:
    try:
        if cls is E.Add:
            return a + b
        if cls is E.Sub:
            return a - b
        if cls is E.Mul:
            return a * b
        if cls is E.Div:
            return a / b
        if cls is E.FloorDiv:
            return a // b
        if cls is E.FloorMod:
            return a % b
    except ZeroDivisionError:
        p.err(node, "division by zero")
    p.err(node, "unsupported operator")  # pragma: no cover


def _py_bitop(op: type, a: int, b: int) -> int:
    ops: dict[type, Callable[[], int]] = {
        ast.BitAnd: lambda: a & b, ast.BitOr: lambda: a | b, ast.BitXor: lambda: a ^ b,
        ast.LShift: lambda: a << b, ast.RShift: lambda: a >> b,
    }
    return ops[op]()


def _py_compare(cls: type, a: Any, b: Any) -> bool:
    ops: dict[type, Callable[[], Any]] = {
        E.EQ: lambda: a == b, E.NE: lambda: a != b, E.LT: lambda: a < b,
        E.LE: lambda: a <= b, E.GT: lambda: a > b, E.GE: lambda: a >= b,
    }
    return bool(ops[cls]())


def describe(value: Any) -> str:
    if isinstance(value, E.Buffer):
        return f"buffer {value.name}"
    if isinstance(value, E.PrimExpr):
        return f"an expression of dtype {value.dtype}"
    if isinstance(value, VarDecl):
        return f"a variable declaration T.{value.dtype}()"
    if isinstance(value, DType):
        return f"the dtype T.{value.dtype}"
    if isinstance(value, str):
        return f"the string {value!r}"
    if value is None:
        return "None"
    if isinstance(value, (list, tuple)):
        return f"a {type(value).__name__}"
    return repr(value)
