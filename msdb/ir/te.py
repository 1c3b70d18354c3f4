"""A TE-style builder: describe tensors with `placeholder`/`compute`, lower them with
`create_prim_func` into the same blocks TVM's `te.create_prim_func` produces.

Why it exists: the standard benchmark workloads (DESIGN.md section 1, `msdb.ir.zoo`) are defined
in TVM with TE, and a workload must be *structurally identical* to TVM's for records to be
shared by structural hash. So the lowering follows TVM's rules:

- one block per compute op, in post-DFS order from the arguments (inputs of an op in the order
  its body first reads them);
- each block sits in a perfect loop nest over its spatial axes then its reduce axes; loop vars
  are named after the axes and block iter vars `v_<axis>`, bound one to one ("S"/"R");
- a reduction stores `combiner(out[idx], source)` and has an init storing the reducer's
  identity (0 for sum, the dtype's lowest value for max, its highest for min);
- the stored value (the reduction source, or the whole data-parallel body) is simplified the
  way TVM's `arith.Analyzer.Simplify` does for these expressions (constant folding, `>=`/`>`
  turned into `<=`/`<`, integer sums in canonical order) -- see `simplify`;
- intermediates go to the root block's `alloc_buffers`; parameters are the given tensors in
  order; buffers are named after the tensors, duplicates renamed `name_1`, `name_2`, ... the
  way TVM's printer shows them; block names are made unique the same way.

Function attrs are msdb's canonical `{"global_symbol": "main", "tir.noalias": True}` (TVM 0.27
writes `tirx.noalias` and `s_tir` too; the hashing layer ignores all of these).
"""

from __future__ import annotations

import builtins
import inspect
import logging
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from msdb.errors import MsdbError
from msdb.ir import expr as E
from msdb.ir import stmt as S
from msdb.ir.dtype import bits, is_float, is_int, is_uint
from msdb.ir.function import PrimFunc
from msdb.ir.functor import IRMutator
from msdb.ir.regions import infer_access_regions

logger = logging.getLogger(__name__)

__all__ = [
    "TEError", "Tensor", "TEIterVar", "Reduce", "placeholder", "compute", "reduce_axis", "var",
    "sum", "max", "min", "create_prim_func", "simplify", "const", "max_value", "min_value",
    "if_then_else", "all", "any", "exp", "exp2", "log", "log2", "sqrt", "rsqrt", "tanh",
    "sigmoid", "erf", "fabs", "floor", "ceil", "round", "power", "floordiv", "floormod",
    "indexdiv", "indexmod", "truncdiv", "truncmod", "pad", "relu", "softmax",
]


class TEError(MsdbError, ValueError):
    """A TE description msdb cannot lower (wrong arity, nested reduction, missing argument)."""


# =============================================================================================
# Axes, reductions, tensors
# =============================================================================================


class TEIterVar(E.Var):
    """An axis of a compute (spatial) or a `reduce_axis` (reduction). It *is* a `Var`, so it can
    be used in index arithmetic directly (`x[i * 2 + k]`), and also answers TVM's `.var` and
    `.dom`. It never survives lowering: `create_prim_func` replaces it by loop and block vars."""

    __slots__ = ("dom", "iter_type")

    def __init__(self, name: str, dom: E.Range, iter_type: S.IterType) -> None:
        dtype = _index_dtype(dom)
        super().__init__(name, dtype)
        object.__setattr__(self, "dom", dom)
        object.__setattr__(self, "iter_type", iter_type)

    @property
    def var(self) -> TEIterVar:
        return self

    def __repr__(self) -> str:
        kind = "reduce" if self.iter_type == S.IterType.COMM_REDUCE else "spatial"
        return f"TEIterVar({self.name!r}, {kind})"


def _index_dtype(dom: E.Range) -> str:
    """TVM's rule: the wider of the domain's min and extent integer types."""
    width = builtins.max(bits(dom.min.dtype), bits(dom.extent.dtype))
    return f"int{width}"


@dataclass(frozen=True, eq=False, slots=True)
class Reduce(E.PrimExpr):
    """A commutative reduction (`sum`/`max`/`min`) of `source` over `axis`. Only valid as the
    whole body of a `compute`."""

    combiner: str = "sum"
    source: E.PrimExpr = field(default=None)  # type: ignore[assignment]
    axis: tuple[TEIterVar, ...] = ()

    def _misuse(self, *_: Any) -> E.PrimExpr:
        raise TEError(
            f"a {self.combiner} reduction must be the whole body of te.compute; "
            "compute it into its own tensor and use that tensor instead"
        )

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _misuse  # type: ignore[assignment]
    __truediv__ = __rtruediv__ = __floordiv__ = __mod__ = _misuse  # type: ignore[assignment]


class _Operation:
    """Common part of placeholder and compute ops (what produces a tensor)."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name


class PlaceholderOp(_Operation):
    """An input tensor: it has no body and must be an argument of the function."""

    __slots__ = ()


class ComputeOp(_Operation):
    """`out[axis] = body` (or a reduction of it) over the op's spatial axes."""

    __slots__ = ("tag", "attrs", "axis", "reduce_axis", "body", "inputs")

    def __init__(self, name: str, tag: str, attrs: dict[str, Any], axis: tuple[TEIterVar, ...],
                 body: E.PrimExpr) -> None:
        super().__init__(name)
        self.tag = tag
        self.attrs = dict(attrs)
        self.axis = axis
        self.reduce_axis: tuple[TEIterVar, ...] = body.axis if isinstance(body, Reduce) else ()
        self.body = body
        self.inputs = _input_tensors(body)


class Tensor:
    """The output of a placeholder or compute. Index it (`A[i, j]`, `A[i][j]`, `A(i, j)`) to read
    an element inside another compute's body."""

    __slots__ = ("op", "shape", "dtype", "_stage")

    def __init__(self, op: _Operation, shape: tuple[E.PrimExpr, ...], dtype: str) -> None:
        self.op = op
        self.shape = shape
        self.dtype = dtype
        # A stand-in buffer for reads in TE bodies; `create_prim_func` swaps in the real one.
        self._stage = E.Buffer(op.name, shape, dtype)

    @property
    def name(self) -> str:
        return self.op.name

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __call__(self, *indices: E.ExprLike) -> E.PrimExpr:
        return self[tuple(indices)]

    def __getitem__(self, indices: Any) -> Any:
        if not isinstance(indices, tuple):
            indices = (indices,)
        return _TensorSlice(self, ())[indices]

    def __repr__(self) -> str:
        dims = ", ".join(str(E.const_int(d)) if E.const_int(d) is not None else "?" for d in self.shape)
        return f"Tensor({self.name!r}, ({dims}), {self.dtype!r})"


class _TensorSlice:
    """A partly indexed tensor, so that TVM's chained `x[b][i][k]` works."""

    __slots__ = ("tensor", "indices")

    def __init__(self, tensor: Tensor, indices: tuple[E.PrimExpr, ...]) -> None:
        self.tensor = tensor
        self.indices = indices

    def __getitem__(self, more: Any) -> Any:
        if not isinstance(more, tuple):
            more = (more,)
        indices = self.indices + tuple(_as_index(i) for i in more)
        if len(indices) > self.tensor.ndim:
            raise TEError(f"tensor {self.tensor.name!r} has {self.tensor.ndim} dimensions, indexed with {len(indices)}")
        if len(indices) < self.tensor.ndim:
            return _TensorSlice(self.tensor, indices)
        return ProducerLoad(self.tensor, indices)


def _as_index(value: Any) -> E.PrimExpr:
    if isinstance(value, E.PrimExpr):
        if not (is_int(value.dtype) or is_uint(value.dtype)):
            raise TEError(f"tensor index must be an integer expression, got dtype {value.dtype!r}")
        return value
    if isinstance(value, bool) or not isinstance(value, int):
        raise TEError(f"tensor index must be an int or an integer expression, got {value!r}")
    return E.convert(value)


class ProducerLoad(E.BufferLoad):
    """A read of a TE tensor (TVM's ProducerLoad): a BufferLoad of the tensor's stand-in buffer
    that remembers the tensor, so that the op graph can be recovered from the bodies."""

    __slots__ = ("tensor",)

    def __init__(self, tensor: Tensor, indices: tuple[E.PrimExpr, ...]) -> None:
        super().__init__(tensor._stage, indices)
        object.__setattr__(self, "tensor", tensor)


def _input_tensors(body: E.PrimExpr) -> list[Tensor]:
    """Tensors read by a body in TVM's order: post-order (a load inside another load's index
    comes first), each tensor once."""
    found: list[Tensor] = []

    def walk(node: E.PrimExpr) -> None:
        if isinstance(node, Reduce):
            walk(node.source)
            return
        if isinstance(node, E.BufferLoad):
            for index in node.indices:
                walk(index)
            if isinstance(node, ProducerLoad) and not builtins.any(t is node.tensor for t in found):
                found.append(node.tensor)
            return
        for child in _expr_children(node):
            walk(child)

    walk(body)
    return found


def _expr_children(node: E.PrimExpr) -> tuple[E.PrimExpr, ...]:
    if isinstance(node, E.BinaryOp):
        return (node.a, node.b)
    if isinstance(node, E.Not):
        return (node.a,)
    if isinstance(node, E.Select):
        return (node.condition, node.true_value, node.false_value)
    if isinstance(node, E.Cast):
        return (node.value,)
    if isinstance(node, E.Call):
        return node.args
    if isinstance(node, E.BufferLoad):
        return node.indices
    return ()


# =============================================================================================
# Building
# =============================================================================================


def _shape(shape: Any) -> tuple[E.PrimExpr, ...]:
    if isinstance(shape, (int, E.PrimExpr)):
        shape = (shape,)
    dims = []
    for dim in shape:
        if isinstance(dim, bool) or not isinstance(dim, (int, E.PrimExpr)):
            raise TEError(f"shape entries must be ints or integer expressions, got {dim!r}")
        dim = E.convert(dim)
        if not (is_int(dim.dtype) or is_uint(dim.dtype)):
            raise TEError(f"shape entries must be integers, got dtype {dim.dtype!r}")
        if E.const_int(dim) is not None and E.const_int(dim) < 0:
            raise TEError(f"shape entries must be non-negative, got {E.const_int(dim)}")
        dims.append(dim)
    return tuple(dims)


def placeholder(shape: Any, dtype: str = "float32", name: str = "placeholder") -> Tensor:
    """An input tensor of `shape` and `dtype` (a function argument once lowered)."""
    return Tensor(PlaceholderOp(name), _shape(shape), dtype)


def var(name: str = "tindex", dtype: str = "int32") -> E.Var:
    """A scalar variable (e.g. a symbolic shape)."""
    return E.Var(name, dtype)


def reduce_axis(dom: Any, name: str = "rv") -> TEIterVar:
    """A reduction axis over `dom`: an extent, or a `(lo, hi)` pair as in TVM (extent hi - lo)."""
    if isinstance(dom, E.Range):
        rng = dom
    elif isinstance(dom, (tuple, list)):
        if len(dom) != 2:
            raise TEError(f"reduce_axis domain must be (lo, hi) or an extent, got {dom!r}")
        lo, hi = E.convert(dom[0]), E.convert(dom[1])
        if lo.dtype != hi.dtype:  # an int literal takes the other bound's (wider) integer type
            wide = lo.dtype if bits(lo.dtype) >= bits(hi.dtype) else hi.dtype
            lo = E.make_const(lo.value, wide) if isinstance(lo, E.IntImm) else lo
            hi = E.make_const(hi.value, wide) if isinstance(hi, E.IntImm) else hi
        rng = E.Range(lo, simplify(hi - lo))
    else:
        extent = E.convert(dom)
        rng = E.Range(E.make_const(0, extent.dtype), extent)
    return TEIterVar(name, rng, S.IterType.COMM_REDUCE)


def _arg_names(fcompute: Callable[..., Any], ndim: int) -> list[str]:
    """TVM's naming of compute axes: the lambda's parameter names; `*args` (or no parameters)
    gives i0, i1, ... for the remaining dimensions."""
    spec = inspect.getfullargspec(fcompute)
    if spec.varkw is not None or spec.defaults or spec.kwonlyargs:
        raise TEError("compute function must take plain positional parameters (one per dimension)")
    names = list(spec.args)
    if inspect.ismethod(fcompute):
        names = names[1:]
    if spec.varargs is not None or not names:
        names += [f"i{i}" for i in range(ndim - len(names))]
    if len(names) != ndim:
        raise TEError(f"compute function takes {len(names)} index arguments, the shape has {ndim} dimensions")
    return names


def compute(shape: Any, fcompute: Callable[..., Any], name: str = "compute", tag: str = "",
            attrs: dict[str, Any] | None = None) -> Tensor:
    """A tensor of `shape` whose element at `idx` is `fcompute(*idx)` (an expression, or a
    `sum`/`max`/`min` reduction of one)."""
    dims = _shape(shape)
    names = _arg_names(fcompute, len(dims))
    axes = tuple(
        TEIterVar(n, E.Range(E.make_const(0, d.dtype), d), S.IterType.DATA_PAR) for n, d in zip(names, dims)
    )
    body = fcompute(*axes)
    if isinstance(body, (list, tuple)):
        if len(body) != 1:
            raise TEError("compute with several outputs is not supported; write one compute per output")
        body = body[0]
    if isinstance(body, _TensorSlice):
        raise TEError(f"tensor {body.tensor.name!r} is indexed with too few indices")
    body = E.convert(body)
    _check_no_nested_reduce(body, top=True)
    return Tensor(ComputeOp(name, tag, dict(attrs or {}), axes, body), dims, body.dtype)


def _check_no_nested_reduce(node: E.PrimExpr, top: bool) -> None:
    if isinstance(node, Reduce):
        if not top:
            raise TEError(f"a {node.combiner} reduction must be the whole body of te.compute, not part of an expression")
        _check_no_nested_reduce(node.source, top=False)
        return
    for child in _expr_children(node):
        _check_no_nested_reduce(child, top=False)


def _reducer(kind: str, binary: Callable[[E.PrimExpr, E.PrimExpr], E.PrimExpr]) -> Callable[..., E.PrimExpr]:
    def reduce(expr: E.ExprLike, axis: Any = None, where: Any = None, init: Any = None) -> E.PrimExpr:
        if where is not None or init is not None:
            raise TEError(f"te.{kind}: `where` and `init` are not supported")
        if axis is None:
            raise TEError(f"te.{kind} needs `axis=` (a reduce_axis or a list of them), or two operands")
        is_reduce_axis = isinstance(axis, TEIterVar) and axis.iter_type == S.IterType.COMM_REDUCE
        if is_reduce_axis or isinstance(axis, (list, tuple)):
            axes = tuple(axis) if isinstance(axis, (list, tuple)) else (axis,)
            if not axes or not builtins.all(
                isinstance(a, TEIterVar) and a.iter_type == S.IterType.COMM_REDUCE for a in axes
            ):
                raise TEError(f"te.{kind}: axis must be axes made by te.reduce_axis, got {axis!r}")
            source = E.convert(expr)
            return Reduce(source.dtype, kind, source, axes)
        a, b = E._binary_operands(expr, axis)
        return binary(a, b)

    reduce.__name__ = kind
    reduce.__doc__ = (
        f"`{kind}(expr, axis=k)` reduces over reduce axes; `{kind}(a, b)` is the elementwise "
        f"{kind} (TVM's comm_reducer convention)."
    )
    return reduce


sum = _reducer("sum", lambda a, b: E.Add(a, b))  # noqa: A001 - TVM's name
max = _reducer("max", lambda a, b: E.Max(a, b))  # noqa: A001
min = _reducer("min", lambda a, b: E.Min(a, b))  # noqa: A001


def const(value: int | float | bool, dtype: str | None = None) -> E.PrimExpr:
    """An immediate (`tvm.tirx.const`): ints default to int32, floats to float32."""
    if dtype is None:
        return E.convert(value)
    return E.make_const(value, dtype)


def max_value(dtype: str) -> E.PrimExpr:
    """The largest value of `dtype` as an immediate (TVM folds `max_value` to a constant)."""
    if is_float(dtype):
        return E.FloatImm(dtype, _FLOAT_MAX[bits(dtype)])
    if dtype == "bool":
        return E.IntImm("bool", 1)
    if is_uint(dtype):
        return E.IntImm(dtype, (1 << bits(dtype)) - 1)
    return E.IntImm(dtype, (1 << (bits(dtype) - 1)) - 1)


def min_value(dtype: str) -> E.PrimExpr:
    """The lowest value of `dtype` as an immediate (the identity of a max reduction)."""
    if is_float(dtype):
        return E.FloatImm(dtype, -_FLOAT_MAX[bits(dtype)])
    if dtype == "bool" or is_uint(dtype):
        return E.make_const(0, dtype)
    return E.IntImm(dtype, -(1 << (bits(dtype) - 1)))


# Largest finite values, as TVM writes them (float32: FLT_MAX widened to double).
_FLOAT_MAX = {16: 65504.0, 32: 3.4028234663852886e38, 64: 1.7976931348623157e308}


def if_then_else(cond: E.ExprLike, true_value: E.ExprLike, false_value: E.ExprLike) -> E.PrimExpr:
    """`cond ? t : f` evaluating only the taken branch (`T.if_then_else`)."""
    cond = E.convert(cond)
    if cond.dtype != "bool":
        raise TEError(f"if_then_else condition must be bool, got {cond.dtype!r}")
    t, f = E._binary_operands(true_value, false_value)
    if t.dtype != f.dtype:
        raise TEError(f"if_then_else branches have different dtypes {t.dtype!r} and {f.dtype!r}")
    return E.Call(t.dtype, "if_then_else", (cond, t, f))


def all(*conds: E.ExprLike) -> E.PrimExpr:  # noqa: A001 - TVM's name
    """Logical and of the conditions, left to right (`((a and b) and c)`, as TVM builds it)."""
    if not conds:
        raise TEError("te.all needs at least one condition")
    result = E.convert(conds[0])
    for cond in conds[1:]:
        result = E.And(result, E.convert(cond))
    return result


def any(*conds: E.ExprLike) -> E.PrimExpr:  # noqa: A001 - TVM's name
    """Logical or of the conditions, left to right."""
    if not conds:
        raise TEError("te.any needs at least one condition")
    result = E.convert(conds[0])
    for cond in conds[1:]:
        result = E.Or(result, E.convert(cond))
    return result


def _math(op: str) -> Callable[[E.ExprLike], E.PrimExpr]:
    def call(x: E.ExprLike) -> E.PrimExpr:
        x = E.convert(x)
        return E.Call(x.dtype, op, (x,))

    call.__name__ = op
    call.__doc__ = f"`T.{op}(x)`: a math intrinsic call of the argument's dtype."
    return call


exp = _math("exp")
exp2 = _math("exp2")
log = _math("log")
log2 = _math("log2")
sqrt = _math("sqrt")
rsqrt = _math("rsqrt")
tanh = _math("tanh")
sigmoid = _math("sigmoid")
erf = _math("erf")
fabs = _math("fabs")
floor = _math("floor")
ceil = _math("ceil")
round = _math("round")  # noqa: A001 - TVM's name


def power(x: E.ExprLike, y: E.ExprLike) -> E.PrimExpr:
    """`T.pow(x, y)`."""
    a, b = E._binary_operands(x, y)
    return E.Call(a.dtype, "pow", (a, b))


def floordiv(a: E.ExprLike, b: E.ExprLike) -> E.PrimExpr:
    """Python-style floor division (`//` in TVMScript)."""
    return E.FloorDiv(*E._binary_operands(a, b))


def floormod(a: E.ExprLike, b: E.ExprLike) -> E.PrimExpr:
    """Python-style modulo (`%` in TVMScript)."""
    return E.FloorMod(*E._binary_operands(a, b))


indexdiv = floordiv
indexmod = floormod


def truncdiv(a: E.ExprLike, b: E.ExprLike) -> E.PrimExpr:
    """C-style truncating integer division (`T.Div`)."""
    return E.Div(*E._binary_operands(a, b))


def truncmod(a: E.ExprLike, b: E.ExprLike) -> E.PrimExpr:
    """C-style remainder (`T.truncmod`)."""
    return E.Mod(*E._binary_operands(a, b))


# =============================================================================================
# topi-like helpers used by the zoo
# =============================================================================================


def pad(data: Tensor, pad_before: Sequence[int], pad_after: Sequence[int] | None = None,
        pad_value: float | E.PrimExpr = 0.0, name: str = "PadInput") -> Tensor:
    """Zero-pad (or `pad_value`-pad) `data`, as `topi.nn.pad`: one compute whose element is
    `if_then_else(lo <= i and i < hi and ..., data[i - lo, ...], pad_value)` over the padded
    dimensions only; a pad of all zeros still makes a copy stage."""
    ndim = data.ndim
    pad_after = list(pad_after) if pad_after else list(pad_before)
    if len(pad_before) != ndim or len(pad_after) != ndim:
        raise TEError(f"pad: need {ndim} pad widths for tensor {data.name!r}, got {len(pad_before)} and {len(pad_after)}")
    out_shape = tuple(simplify(data.shape[i] + pad_before[i] + pad_after[i]) for i in range(ndim))
    value = pad_value if isinstance(pad_value, E.PrimExpr) else E.make_const(pad_value, data.dtype)

    def body(*indices: E.PrimExpr) -> E.PrimExpr:
        conds: list[E.PrimExpr] = []
        index: list[E.PrimExpr] = []
        for i in range(ndim):
            if pad_before[i] == 0 and pad_after[i] == 0:
                index.append(indices[i])
                continue
            index.append(indices[i] - pad_before[i])
            conds.append(indices[i] >= pad_before[i])
            conds.append(indices[i] < data.shape[i] + pad_before[i])
        if conds:
            return if_then_else(all(*conds), data[tuple(index)], value)
        return data[tuple(index)]

    return compute(out_shape, body, name=name)


def relu(x: Tensor) -> Tensor:
    """`max(x, 0)` elementwise, as `topi.nn.relu` (a compute named "compute", axes i0, i1, ...)."""
    return compute(x.shape, lambda *i: max(x(*i), E.make_const(0, x.dtype)))


def softmax(x: Tensor, axis: int = -1) -> Tensor:
    """Softmax along `axis` in topi's four stages: T_softmax_maxelem, T_softmax_exp,
    T_softmax_expsum, T_softmax_norm (the last annotated {"axis": axis})."""
    shape = x.shape
    if axis < 0:
        axis += len(shape)
    if not 0 <= axis < len(shape):
        raise TEError(f"softmax: axis {axis} out of range for a {len(shape)}-d tensor")
    k1 = reduce_axis((0, shape[axis]), name="k")
    k2 = reduce_axis((0, shape[axis]), name="k")

    def with_reduce(indices: tuple[E.PrimExpr, ...], k: E.PrimExpr) -> tuple[E.PrimExpr, ...]:
        return indices[:axis] + (k,) + indices[axis:]

    def without_axis(indices: tuple[E.PrimExpr, ...]) -> tuple[E.PrimExpr, ...]:
        return tuple(v for i, v in enumerate(indices) if i != axis)

    reduced = tuple(d for i, d in enumerate(shape) if i != axis)
    maxelem = compute(reduced, lambda *i: max(x[with_reduce(i, k1)], axis=k1), name="T_softmax_maxelem")
    expo = compute(shape, lambda *i: exp(x[i] - maxelem[without_axis(i)]), name="T_softmax_exp")
    expsum = compute(reduced, lambda *i: sum(expo[with_reduce(i, k2)], axis=k2), name="T_softmax_expsum")
    return compute(shape, lambda *i: expo[i] / expsum[without_axis(i)], name="T_softmax_norm",
                   attrs={"axis": axis})


# =============================================================================================
# Lowering
# =============================================================================================


class _NameSupply:
    """`name`, then `name_1`, `name_2`, ... (TVM's fresh-name scheme)."""

    def __init__(self) -> None:
        self.used: set[str] = set()

    def fresh(self, name: str) -> str:
        candidate, n = name, 0
        while candidate in self.used:
            n += 1
            candidate = f"{name}_{n}"
        self.used.add(candidate)
        return candidate


def _post_dfs(outputs: Sequence[Tensor]) -> list[Tensor]:
    """Tensors in TVM's PostDFSOrder from the argument ops: inputs before their readers."""
    order: list[Tensor] = []
    seen: set[int] = set()
    # Iterative DFS keeps deep graphs (long elementwise chains) off Python's recursion limit.
    for root in outputs:
        stack: list[tuple[Tensor, int]] = [(root, 0)]
        while stack:
            tensor, next_input = stack.pop()
            if id(tensor.op) in seen and next_input == 0:
                continue
            inputs = tensor.op.inputs if isinstance(tensor.op, ComputeOp) else []
            if next_input < len(inputs):
                stack.append((tensor, next_input + 1))
                child = inputs[next_input]
                if id(child.op) not in seen:
                    stack.append((child, 0))
                continue
            if id(tensor.op) not in seen:
                seen.add(id(tensor.op))
                order.append(tensor)
    return order


class _Lower(IRMutator):
    """TE body -> block body: tensor reads become reads of the function's buffers and axes
    become block iter vars."""

    def __init__(self, buffers: dict[int, E.Buffer], vmap: dict[E.Var, E.PrimExpr]) -> None:
        super().__init__()
        self.buffers = buffers
        self.vmap = vmap

    def visit_Var(self, node: E.Var) -> E.PrimExpr:
        return self.vmap.get(node, node)

    def visit_BufferLoad(self, node: E.BufferLoad) -> E.PrimExpr:
        indices = tuple(self.visit(i) for i in node.indices)
        if isinstance(node, ProducerLoad):
            return E.BufferLoad(self.buffers[id(node.tensor.op)], indices)
        return E.BufferLoad(node.buffer, indices)

    def visit_Reduce(self, node: Reduce) -> E.PrimExpr:  # pragma: no cover - guarded by compute()
        raise TEError("a reduction can only be the whole body of a compute")


def create_prim_func(tensors: Sequence[Tensor]) -> PrimFunc:
    """Lower a TE graph to a PrimFunc exactly as TVM's `te.create_prim_func(tensors)`:
    `tensors` are the function's parameters in order (inputs and outputs); every placeholder the
    graph reads must be among them."""
    tensors = list(tensors)
    if not tensors:
        raise TEError("create_prim_func needs at least one tensor")
    for t in tensors:
        if not isinstance(t, Tensor):
            raise TEError(f"create_prim_func takes te tensors, got {type(t).__name__}")
    arg_ops = {id(t.op) for t in tensors}
    order = _post_dfs(tensors)

    buffer_names = _NameSupply()
    buffers: dict[int, E.Buffer] = {}
    # Parameters are named first, in order, so duplicates read `name_1` as TVM's printer shows.
    for t in tensors:
        if id(t.op) not in buffers:
            buffers[id(t.op)] = E.Buffer(buffer_names.fresh(t.name), t.shape, t.dtype)
    for t in order:
        if isinstance(t.op, PlaceholderOp) and id(t.op) not in arg_ops:
            raise TEError(
                f"placeholder {t.name!r} is read by the computation but is not an argument; "
                "pass it to create_prim_func"
            )

    block_names = _NameSupply()
    root_allocs: list[E.Buffer] = []
    stmts: list[S.Stmt] = []
    for t in order:
        if not isinstance(t.op, ComputeOp):
            continue
        if id(t.op) not in buffers:
            buffers[id(t.op)] = E.Buffer(buffer_names.fresh(t.name), t.shape, t.dtype)
            root_allocs.append(buffers[id(t.op)])
        stmts.append(_lower_compute(t, buffers, block_names))

    params = []
    buffer_map = {}
    for t in tensors:
        buf = buffers[id(t.op)]
        if builtins.any(buf is buffer_map[p] for p in params):
            raise TEError(f"tensor {t.name!r} is passed to create_prim_func twice")
        param = E.Var(buf.name, "handle")
        params.append(param)
        buffer_map[param] = buf
    root = S.Block((), (), (), "root", S.seq(*stmts), None, tuple(root_allocs))
    body = S.BlockRealize((), E.IntImm("bool", 1), root)
    return PrimFunc(tuple(params), buffer_map, body, {"global_symbol": "main", "tir.noalias": True})


def _lower_compute(tensor: Tensor, buffers: dict[int, E.Buffer], block_names: _NameSupply) -> S.Stmt:
    op = tensor.op
    assert isinstance(op, ComputeOp)
    out = buffers[id(op)]
    loop_vars: list[E.Var] = []
    iter_vars: list[S.IterVar] = []
    vmap: dict[E.Var, E.PrimExpr] = {}
    store_indices: list[E.PrimExpr] = []
    for axis in op.axis + op.reduce_axis:
        dtype = _index_dtype(axis.dom)
        loop_var = E.Var(axis.name, dtype)
        block_var = E.Var("v_" + axis.name, dtype)
        dom = E.Range(simplify(_Lower(buffers, vmap).visit(axis.dom.min)),
                      simplify(_Lower(buffers, vmap).visit(axis.dom.extent)))
        loop_vars.append(loop_var)
        iter_vars.append(S.IterVar(dom, block_var, axis.iter_type))
        vmap[axis] = block_var
        if axis.iter_type != S.IterType.COMM_REDUCE:
            store_indices.append(block_var)
    lower = _Lower(buffers, vmap)
    indices = tuple(store_indices)
    init: S.Stmt | None = None
    if isinstance(op.body, Reduce):
        reduce = op.body
        lhs = E.BufferLoad(out, indices)
        rhs = simplify(lower.visit(reduce.source))
        if rhs.dtype != out.dtype:
            raise TEError(f"compute {op.name!r}: reduction of {rhs.dtype} into a {out.dtype} tensor")
        combined = {"sum": E.Add, "max": E.Max, "min": E.Min}[reduce.combiner](lhs, rhs)
        identity = {"sum": E.make_const(0, out.dtype), "max": min_value(out.dtype),
                    "min": max_value(out.dtype)}[reduce.combiner]
        body: S.Stmt = S.BufferStore(out, combined, indices)
        init = S.BufferStore(out, identity, indices)
    else:
        body = S.BufferStore(out, simplify(lower.visit(op.body)), indices)
    reads, writes = infer_access_regions(body, init, ())
    annotations = {k: _annotation_value(v, buffers) for k, v in op.attrs.items()}
    block = S.Block(tuple(iter_vars), reads, writes, block_names.fresh(op.name), body, init,
                    annotations=annotations)
    stmt: S.Stmt = S.BlockRealize(tuple(loop_vars), E.IntImm("bool", 1), block)
    for loop_var, iv in reversed(list(zip(loop_vars, iter_vars))):
        stmt = S.For(loop_var, iv.dom.min, iv.dom.extent, S.ForKind.SERIAL, stmt)
    return stmt


def _annotation_value(value: Any, buffers: dict[int, E.Buffer]) -> Any:
    if isinstance(value, Tensor):
        raise TEError("tensor-valued compute attrs are not supported")
    if isinstance(value, (list, tuple)):
        return tuple(_annotation_value(v, buffers) for v in value)
    return value


# =============================================================================================
# Simplification (what TVM's Analyzer.Simplify does to TE bodies, without variable bounds)
# =============================================================================================
#
# Integer expressions are brought to TVM's canonical form: a sum of terms
# `scale * ((index % upper) // lower)` plus a constant, like terms merged, terms stably sorted by
# scale, then lower factor, then upper factor (all descending), and printed back as positive
# terms, the constant if positive, then the negative terms subtracted and the constant if
# negative. Floor division and modulo by positive constants split off divisible terms
# (`(h*4 + r) // 4` -> `r // 4 + h`) and nest (`c // 4 % 8` -> `c % 32 // 4`). Comparisons are
# turned into `<`/`<=`/`==`/`!=`; against a constant the constant moves to one side and a common
# factor is divided out, and comparisons decided by the range of floormod terms fold to a
# constant. Float arithmetic gets only constant folding and the x+0 / x*1 identities, like TVM.
#
# Scope: this reproduces TVM on the zoo, on the expressions topi-style operators write (conv,
# pool, pad, dilation, reshape, transpose, slicing index arithmetic; padding and stride-phase
# conditions) and on the pinned cases in tests/ir/test_te.py. TVM's rewrite simplifier has many
# more rules; on unusual integer expressions (negative divisors, mixed-sign comparisons with
# variables on both sides, bound-driven rewrites such as `(r * 3) % 2` -> `r % 2`) the result can
# differ from TVM's in form (never in value). Note also that Python `-x` on msdb nodes builds
# `0 - x` while TVM's builds `x * -1`; write `x * -1` where the exact form matters.


_INF = None  # upper factor of an unbounded term


@dataclass(frozen=True, slots=True)
class _Term:
    index: E.PrimExpr
    key: tuple
    lower: int
    upper: int | None
    scale: int


@dataclass(slots=True)
class _Sum:
    dtype: str
    terms: list[_Term]
    base: int

    def copy(self) -> _Sum:
        return _Sum(self.dtype, list(self.terms), self.base)


def _key(e: E.PrimExpr) -> tuple:
    """A structural key (variables and buffers by identity) for merging like terms."""
    if isinstance(e, E.Var):
        return ("var", id(e))
    if isinstance(e, E.IntImm):
        return ("int", e.dtype, e.value)
    if isinstance(e, E.FloatImm):
        return ("float", e.dtype, e.value)
    if isinstance(e, E.StringImm):
        return ("str", e.value)
    if isinstance(e, E.BufferLoad):
        return ("load", id(e.buffer)) + tuple(_key(i) for i in e.indices)
    if isinstance(e, E.Call):
        return ("call", e.op, e.dtype) + tuple(_key(a) for a in e.args)
    if isinstance(e, E.Cast):
        return ("cast", e.dtype, _key(e.value))
    return (type(e).__name__, e.dtype) + tuple(_key(c) for c in _expr_children(e))


def _is_intlike(dtype: str) -> bool:
    return is_int(dtype) or is_uint(dtype)


def _wrap(value: int, dtype: str) -> int:
    """Two's-complement wrap of an integer constant to the dtype's width."""
    width = bits(dtype)
    if is_uint(dtype):
        return value % (1 << width)
    value %= 1 << width
    return value - (1 << width) if value >= 1 << (width - 1) else value


def _const(e: E.PrimExpr) -> int | float | None:
    if isinstance(e, (E.IntImm, E.FloatImm)):
        return e.value
    return None


def simplify(expr: E.PrimExpr) -> E.PrimExpr:
    """Simplify `expr` the way TVM's `arith.Analyzer().simplify` does when it knows nothing
    about variable ranges (which is how `te.create_prim_func` calls it)."""
    return _simp(expr)


def _simp(e: E.PrimExpr) -> E.PrimExpr:
    if isinstance(e, (E.Var, E.IntImm, E.FloatImm, E.StringImm)):
        return e
    if isinstance(e, E.BufferLoad):
        indices = tuple(_simp(i) for i in e.indices)
        if builtins.all(a is b for a, b in zip(indices, e.indices)) and type(e) is E.BufferLoad:
            return e
        return E.BufferLoad(e.buffer, indices)
    if isinstance(e, E.CmpOp):
        return _simp_cmp(e)
    if isinstance(e, E.Not):
        return _simp_not(_simp(e.a))
    if isinstance(e, E.Cast):
        value = _simp(e.value)
        if value.dtype == e.dtype:
            return value
        c = _const(value)
        if c is not None:
            if is_float(e.dtype):
                return E.FloatImm(e.dtype, float(c))
            if _is_intlike(e.dtype):
                return E.IntImm(e.dtype, _wrap(int(c), e.dtype))
        return e if value is e.value else E.Cast(e.dtype, value)
    if isinstance(e, E.Select):
        cond = _simp(e.condition)
        t, f = _simp(e.true_value), _simp(e.false_value)
        if isinstance(cond, E.IntImm):
            return t if cond.value else f
        return E.Select(cond, t, f)
    if isinstance(e, E.Call):
        args = tuple(_simp(a) for a in e.args)
        if e.op == "if_then_else" and isinstance(args[0], E.IntImm):
            return args[1] if args[0].value else args[2]
        if builtins.all(a is b for a, b in zip(args, e.args)):
            return e
        return E.Call(e.dtype, e.op, args)
    if isinstance(e, E.BinaryOp):
        if _is_intlike(e.dtype) and isinstance(e, (E.Add, E.Sub, E.Mul, E.FloorDiv, E.FloorMod)):
            return _normalize(_to_sum(e), additive=isinstance(e, (E.Add, E.Sub)))
        a, b = _simp(e.a), _simp(e.b)
        return _fold_binary(type(e), a, b, e.dtype)
    return e


def _fold_binary(cls: type, a: E.PrimExpr, b: E.PrimExpr, dtype: str) -> E.PrimExpr:
    """TVM's construction-time folding (TryConstFold) for one binary node."""
    ca, cb = _const(a), _const(b)
    if ca is not None and cb is not None:
        value = _eval_binary(cls, ca, cb, dtype)
        if value is not None:
            return E.make_const(value, dtype) if not _is_intlike(dtype) else E.IntImm(dtype, _wrap(int(value), dtype))
    if cls is E.Add:
        if ca == 0:
            return b
        if cb == 0:
            return a
    elif cls is E.Sub:
        if cb == 0:
            return a
    elif cls is E.Mul:
        if ca == 1:
            return b
        if cb == 1:
            return a
        if ca == 0:
            return a
        if cb == 0:
            return b
    elif cls in (E.Div, E.FloorDiv):
        if cb == 1:
            return a
        if ca == 0 and cb not in (None, 0):
            return a
    elif cls in (E.Min, E.Max):
        if _key(a) == _key(b):
            return a
    return cls(a, b, dtype)


def _eval_binary(cls: type, a: int | float, b: int | float, dtype: str) -> int | float | None:
    """Fold `a op b` with TVM's semantics (truncating Div/Mod, flooring FloorDiv/FloorMod)."""
    integer = _is_intlike(dtype)
    if cls is E.Add:
        return a + b
    if cls is E.Sub:
        return a - b
    if cls is E.Mul:
        return a * b
    if cls is E.Min:
        return builtins.min(a, b)
    if cls is E.Max:
        return builtins.max(a, b)
    if b == 0:
        return None  # left for the runtime, as TVM does
    if cls is E.Div:
        if not integer:
            return a / b
        quotient = abs(int(a)) // abs(int(b))
        return quotient if (a >= 0) == (b >= 0) else -quotient
    if cls is E.Mod:
        if not integer:
            return math.fmod(a, b)
        remainder = abs(int(a)) % abs(int(b))
        return remainder if a >= 0 else -remainder
    if cls is E.FloorDiv:
        return int(a) // int(b) if integer else float(math.floor(a / b))
    if cls is E.FloorMod:
        return int(a) % int(b) if integer else a - math.floor(a / b) * b
    return None


# ---- canonical integer sums ----


def _atom(e: E.PrimExpr, dtype: str) -> _Sum:
    return _Sum(dtype, [_Term(e, _key(e), 1, _INF, 1)], 0)


def _to_sum(e: E.PrimExpr) -> _Sum:
    """Canonical sum of an integer expression (children simplified on the way)."""
    dtype = e.dtype
    if isinstance(e, E.IntImm):
        return _Sum(dtype, [], e.value)
    if isinstance(e, E.Add):
        return _add(_to_sum(e.a), _to_sum(e.b), 1)
    if isinstance(e, E.Sub):
        return _add(_to_sum(e.a), _to_sum(e.b), -1)
    if isinstance(e, E.Mul):
        sa, sb = _to_sum(e.a), _to_sum(e.b)
        if not sb.terms:
            return _scale(sa, sb.base)
        if not sa.terms:
            return _scale(sb, sa.base)
        return _atom(E.Mul(_normalize(sa), _normalize(sb), dtype), dtype)
    if isinstance(e, (E.FloorDiv, E.FloorMod)):
        sa, sb = _to_sum(e.a), _to_sum(e.b)
        if not sb.terms and sb.base > 0:
            return _floordiv(sa, sb.base) if isinstance(e, E.FloorDiv) else _floormod(sa, sb.base)
        a, b = _normalize(sa), _normalize(sb)
        folded = _fold_binary(type(e), a, b, dtype)
        if isinstance(folded, E.IntImm):
            return _Sum(dtype, [], folded.value)
        return _atom(folded, dtype)
    simplified = _simp(e)
    if isinstance(simplified, E.IntImm):
        return _Sum(dtype, [], simplified.value)
    return _atom(simplified, dtype)


def _add(x: _Sum, y: _Sum, sign: int) -> _Sum:
    result = x.copy()
    for term in y.terms:
        _add_term(result, _Term(term.index, term.key, term.lower, term.upper, term.scale * sign))
    result.base = _wrap(result.base + sign * y.base, result.dtype)
    return result


def _add_term(acc: _Sum, term: _Term) -> None:
    for n, existing in enumerate(acc.terms):
        if existing.key == term.key and existing.lower == term.lower and existing.upper == term.upper:
            scale = existing.scale + term.scale
            if scale == 0:
                del acc.terms[n]
            else:
                acc.terms[n] = _Term(existing.index, existing.key, existing.lower, existing.upper, scale)
            return
    if term.scale != 0:
        acc.terms.append(term)


def _scale(x: _Sum, factor: int) -> _Sum:
    if factor == 0:
        return _Sum(x.dtype, [], 0)
    terms = [_Term(t.index, t.key, t.lower, t.upper, t.scale * factor) for t in x.terms]
    return _Sum(x.dtype, terms, _wrap(x.base * factor, x.dtype))


def _single(x: _Sum) -> _Term | None:
    """The one term of `x` (any positive scale), if `x` is exactly that."""
    if len(x.terms) == 1 and x.base == 0 and x.terms[0].scale > 0:
        return x.terms[0]
    return None


def _with(t: _Term, lower: int, upper: int | None, scale: int = 1) -> _Term:
    return _Term(t.index, t.key, lower, upper, scale)


def _term_max(t: _Term) -> int | None:
    """Largest value of the unscaled term `(index % upper) // lower`, when bounded."""
    return None if t.upper is _INF else (t.upper - 1) // t.lower


def _floordiv(x: _Sum, c: int) -> _Sum:
    if c == 1:
        return x
    if not x.terms:
        return _Sum(x.dtype, [], x.base // c)
    term = _single(x)
    if term is not None and c % term.scale == 0:
        # (t * s) // c == t // (c / s); a bounded t smaller than the divisor gives 0.
        c //= term.scale
        top = _term_max(term)
        if top is not None and top < c:
            return _Sum(x.dtype, [], 0)
        if term.upper is _INF or term.upper % (term.lower * c) == 0:
            return _Sum(x.dtype, [_with(term, term.lower * c, term.upper)], 0)
    divisible = _Sum(x.dtype, [], 0)
    rest = _Sum(x.dtype, [], 0)
    for t in x.terms:
        (divisible if t.scale % c == 0 else rest).terms.append(t)
    if x.base % c == 0:
        divisible.base = x.base
    else:
        rest.base = x.base
    outer = _scale_down(divisible, c)
    if not rest.terms:
        outer.base += rest.base // c
        return outer
    if not divisible.terms and divisible.base == 0:
        index = _normalize(rest)
        return _Sum(x.dtype, [_Term(index, _key(index), c, _INF, 1)], 0)
    inner = _floordiv(rest, c)
    return _add(outer, inner, 1)


def _scale_down(x: _Sum, c: int) -> _Sum:
    terms = [_Term(t.index, t.key, t.lower, t.upper, t.scale // c) for t in x.terms]
    return _Sum(x.dtype, terms, x.base // c)


def _floormod(x: _Sum, c: int) -> _Sum:
    if c == 1:
        return _Sum(x.dtype, [], 0)
    rest = _Sum(x.dtype, [t for t in x.terms if t.scale % c != 0], x.base % c)
    if not rest.terms:
        return _Sum(x.dtype, [], rest.base)
    term = _single(rest)
    if term is not None and c % term.scale == 0:
        # (t * s) % c == (t % (c / s)) * s; a bounded t smaller than the modulus is unchanged.
        scale, c = term.scale, c // term.scale
        top = _term_max(term)
        if top is not None and top < c:
            return _Sum(x.dtype, [_with(term, term.lower, term.upper, scale)], 0)
        if term.upper is _INF:
            return _Sum(x.dtype, [_with(term, term.lower, term.lower * c, scale)], 0)
        if term.lower == 1 and term.upper % c == 0:
            return _Sum(x.dtype, [_with(term, 1, c, scale)], 0)
    index = _normalize(rest)
    return _Sum(x.dtype, [_Term(index, _key(index), 1, c, 1)], 0)


def _term_expr(t: _Term, scale: int, dtype: str) -> E.PrimExpr:
    result = t.index
    if t.upper is not _INF:
        result = E.FloorMod(result, E.IntImm(dtype, t.upper))
    if t.lower != 1:
        result = E.FloorDiv(result, E.IntImm(dtype, t.lower))
    if scale != 1:
        result = E.Mul(result, E.IntImm(dtype, scale))
    return result


def _sort_key(t: _Term) -> tuple[int, int, float]:
    return (-t.scale, -t.lower, -(math.inf if t.upper is _INF else t.upper))


def _normalize(x: _Sum, additive: bool = False) -> E.PrimExpr:
    """TVM's printing of a canonical sum back to an expression. `additive` says the expression
    was an add/subtract at the top: TVM then prints a lone negated term as `0 - x` (a lone
    scaled product stays `x * -c`)."""
    dtype = x.dtype
    terms = sorted(x.terms, key=_sort_key)
    if not terms:
        return E.IntImm(dtype, x.base)
    if len(terms) == 1 and x.base == 0 and not (additive and terms[0].scale == -1):
        return _term_expr(terms[0], terms[0].scale, dtype)
    result: E.PrimExpr | None = None
    for t in terms:
        if t.scale > 0:
            part = _term_expr(t, t.scale, dtype)
            result = part if result is None else E.Add(result, part)
    if x.base > 0:
        const_part = E.IntImm(dtype, x.base)
        result = const_part if result is None else E.Add(result, const_part)
    for t in terms:
        if t.scale < 0:
            part = _term_expr(t, -t.scale, dtype)
            result = E.Sub(E.IntImm(dtype, 0) if result is None else result, part)
    if x.base < 0:
        result = E.Sub(E.IntImm(dtype, 0) if result is None else result, E.IntImm(dtype, -x.base))
    assert result is not None
    return result


# ---- conditions ----


def _bool(value: bool) -> E.PrimExpr:
    return E.IntImm("bool", int(value))


def _simp_cmp(e: E.CmpOp) -> E.PrimExpr:
    cls = type(e)
    if cls in (E.And, E.Or):
        a, b = _simp(e.a), _simp(e.b)
        ca, cb = _const(a), _const(b)
        if cls is E.And:
            if ca is not None:
                return b if ca else a
            if cb is not None:
                return a if cb else b
        else:
            if ca is not None:
                return a if ca else b
            if cb is not None:
                return b if cb else a
        return cls(a, b)
    a, b = e.a, e.b
    if cls is E.GE:
        cls, a, b = E.LE, b, a
    elif cls is E.GT:
        cls, a, b = E.LT, b, a
    if _is_intlike(a.dtype) and _is_intlike(b.dtype) and a.dtype == b.dtype:
        return _int_cmp(cls, _to_sum(a), _to_sum(b), isinstance(a, (E.Add, E.Sub)), isinstance(b, (E.Add, E.Sub)))
    a, b = _simp(a), _simp(b)
    ca, cb = _const(a), _const(b)
    if ca is not None and cb is not None:
        return _bool(_compare(cls, ca, cb))
    return cls(a, b)


def _compare(cls: type, a: int | float, b: int | float) -> bool:
    return {E.LT: a < b, E.LE: a <= b, E.EQ: a == b, E.NE: a != b}[cls]


def _int_cmp(cls: type, sa: _Sum, sb: _Sum, add_a: bool = True, add_b: bool = True) -> E.PrimExpr:
    """An integer comparison in TVM's normal form: when one side is a constant and, with
    `diff = a - b = V + k`, all terms of V have one sign, the constant goes to one side and a
    common factor is
    divided out (`h + 1 <= 3` -> `h <= 2`, `h >= 3` -> `3 <= h`, `2h + 2r < 4` -> `h + r < 2`).
    Variables on both sides keep both sides (`h * 2 + 1 < r`)."""
    dtype = sa.dtype
    if not sa.terms and not sb.terms:
        return _bool(_compare(cls, sa.base, sb.base))
    diff = _add(sa, sb, -1)
    if not diff.terms:
        return _bool(_compare(cls, diff.base, 0))
    if sa.terms and sb.terms:
        return cls(_normalize(sa, additive=add_a), _normalize(sb, additive=add_b))
    signs = {t.scale > 0 for t in diff.terms}
    if len(signs) == 2:
        # One constant side: move the other side's constant over.
        var_side, const_value, var_left = (sa, sb.base, True) if sa.terms else (sb, sa.base, False)
        var_side = _Sum(dtype, list(var_side.terms), 0)
        const_value -= (sa.base if var_left else sb.base)
        expr, const_expr = _normalize(var_side, additive=add_a if var_left else add_b), E.IntImm(dtype, const_value)
        return cls(expr, const_expr) if var_left or cls in (E.EQ, E.NE) else cls(const_expr, expr)
    positive = signs == {True}
    # V + k  op  0, with V written with positive coefficients.
    terms = diff.terms if positive else [_with(t, t.lower, t.upper, -t.scale) for t in diff.terms]
    g = 0
    for t in terms:
        g = math.gcd(g, t.scale)
    bound = -diff.base if positive else diff.base  # V op bound (positive) / bound op V (negative)
    bounds = _interval(terms)
    if bounds is not None:
        decided = _decide(cls, positive, bounds, bound)
        if decided is not None:
            return _bool(decided)
    if g > 1:
        terms = [_with(t, t.lower, t.upper, t.scale // g) for t in terms]
        if cls in (E.EQ, E.NE):
            if bound % g:
                return _bool(cls is E.NE)
            bound //= g
        elif (cls is E.LT) == positive:  # V < b  or  b <= V: round up
            bound = -((-bound) // g)
        else:  # V <= b  or  b < V: round down
            bound //= g
    var_sum = _Sum(dtype, terms, 0)
    single = _single(var_sum)
    if single is not None and single.scale == 1 and single.lower > 1 and single.upper is _INF and cls is E.LT:
        # x // l < b  ->  x < b * l;  b < x // l  ->  (b + 1) * l - 1 < x
        inner = _normalize(_Sum(dtype, [_with(single, 1, _INF)], 0))
        if positive:
            return E.LT(inner, E.IntImm(dtype, bound * single.lower))
        return E.LT(E.IntImm(dtype, (bound + 1) * single.lower - 1), inner)
    expr, const_expr = _normalize(var_sum), E.IntImm(dtype, bound)
    if positive or cls in (E.EQ, E.NE):
        return cls(expr, const_expr)
    return cls(const_expr, expr)


def _interval(terms: list[_Term]) -> tuple[int, int] | None:
    """[lo, hi] of a sum of positively scaled bounded terms, or None if some term is unbounded."""
    hi = 0
    for t in terms:
        top = _term_max(t)
        if top is None:
            return None
        hi += top * t.scale
    return 0, hi


def _decide(cls: type, positive: bool, bounds: tuple[int, int], bound: int) -> bool | None:
    lo, hi = bounds
    if not positive:  # bound op V  is  -V op -bound
        lo, hi, bound = -hi, -lo, -bound
    if cls is E.LT:
        return True if hi < bound else False if lo >= bound else None
    if cls is E.LE:
        return True if hi <= bound else False if lo > bound else None
    if cls is E.EQ:
        return False if bound < lo or bound > hi else None
    if cls is E.NE:
        return True if bound < lo or bound > hi else None
    return None


def _simp_not(a: E.PrimExpr) -> E.PrimExpr:
    if isinstance(a, E.IntImm):
        return _bool(not a.value)
    if isinstance(a, E.LT):
        return E.LE(a.b, a.a)
    if isinstance(a, E.LE):
        return E.LT(a.b, a.a)
    if isinstance(a, E.EQ):
        return E.NE(a.a, a.b)
    if isinstance(a, E.NE):
        return E.EQ(a.a, a.b)
    if isinstance(a, E.Not):
        return a.a
    return E.Not(a)
