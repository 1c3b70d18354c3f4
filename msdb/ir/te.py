"""A TE-style builder: describe tensors with `placeholder`/`compute`, lower them with
`create_prim_func` into the same blocks TVM's `te.create_prim_func` produces, so a workload built
here is structurally TVM's and shares its records. The lowering rules: see docs/architecture.md,
"TE builder and zoo".
"""

from __future__ import annotations

import builtins
import inspect
import logging
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

from msdb.errors import MsdbError
from msdb.ir import expr as E
from msdb.ir import stmt as S
from msdb.ir.arith import simplify
from msdb.ir.arith.limits import value_limit
from msdb.ir.dtype import bits, is_int, is_uint
from msdb.ir.function import PrimFunc
from msdb.ir.functor import IRMutator
from msdb.ir.regions import infer_access_regions

logger = logging.getLogger(__name__)

__all__ = [
    "TEError", "Tensor", "TEIterVar", "Reduce", "placeholder", "compute", "reduce_axis", "var",
    "sum", "max", "min", "create_prim_func", "create_fused_prim_func", "simplify", "const",
    "max_value", "min_value", "NameSupply",
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
    dom: E.Range
    iter_type: S.IterType

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

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _misuse
    __truediv__ = __rtruediv__ = __floordiv__ = __mod__ = _misuse


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
    tensor: Tensor

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
        value = E.const_int(dim)
        if value is not None and value < 0:
            raise TEError(f"shape entries must be non-negative, got {value}")
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


def _arg_names(fcompute: Callable[..., Any], ndim: int, varargs_names: Sequence[str] | None = None) -> list[str]:
    """TVM's naming of compute axes: the lambda's parameter names; `*args` (or no parameters)
    gives `varargs_names` if given, else i0, i1, ... for the remaining dimensions."""
    spec = inspect.getfullargspec(fcompute)
    if spec.varkw is not None or spec.defaults or spec.kwonlyargs:
        raise TEError("compute function must take plain positional parameters (one per dimension)")
    names = list(spec.args)
    if inspect.ismethod(fcompute):
        names = names[1:]
    if spec.varargs is not None or not names:
        missing = ndim - len(names)
        if varargs_names is not None:
            if len(varargs_names) != missing:
                raise TEError(f"compute: {len(varargs_names)} varargs_names for {missing} dimensions")
            names += list(varargs_names)
        else:
            names += [f"i{i}" for i in range(missing)]
    if len(names) != ndim:
        raise TEError(f"compute function takes {len(names)} index arguments, the shape has {ndim} dimensions")
    return names


def compute(shape: Any, fcompute: Callable[..., Any], name: str = "compute", tag: str = "",
            attrs: dict[str, Any] | None = None, varargs_names: Sequence[str] | None = None) -> Tensor:
    """A tensor of `shape` whose element at `idx` is `fcompute(*idx)` (an expression, or a
    `sum`/`max`/`min` reduction of one). `varargs_names` names the axes a `*args` lambda
    receives, as TVM's `te.compute` does (topi's C++ computes name them ax0, ax1, ...)."""
    dims = _shape(shape)
    names = _arg_names(fcompute, len(dims), varargs_names)
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
    return E.make_const(value_limit(dtype, upper=True), dtype)


def min_value(dtype: str) -> E.PrimExpr:
    """The lowest value of `dtype` as an immediate (the identity of a max reduction)."""
    return E.make_const(value_limit(dtype, upper=False), dtype)


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


class NameSupply:
    """`name`, then `name_1`, `name_2`, ... (TVM's fresh-name scheme), avoiding `used` (names
    taken already, e.g. a model file's own tensor names)."""

    def __init__(self, used: Iterable[str] = ()) -> None:
        self.used: set[str] = set(used)

    def fresh(self, name: str) -> str:
        candidate, n = name, 0
        while candidate in self.used:
            n += 1
            candidate = f"{name}_{n}"
        self.used.add(candidate)
        return candidate


def _post_dfs(outputs: Sequence[Tensor], stop: set[int] | None = None) -> list[Tensor]:
    """Tensors in TVM's PostDFSOrder from the argument ops: inputs before their readers.
    Ops whose id is in `stop` are neither visited nor listed (the fused lowering's boundary)."""
    order: list[Tensor] = []
    seen: set[int] = set(stop or ())
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

    buffer_names = NameSupply()
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

    block_names = NameSupply()
    root_allocs: list[E.Buffer] = []
    stmts: list[S.Stmt] = []
    for t in order:
        if not isinstance(t.op, ComputeOp):
            continue
        if id(t.op) not in buffers:
            buffers[id(t.op)] = E.Buffer(buffer_names.fresh(t.name), t.shape, t.dtype)
            root_allocs.append(buffers[id(t.op)])
        stmts.append(_lower_compute(t, buffers, block_names))

    params: list[E.Var] = []
    buffer_map: dict[E.Var, E.Buffer] = {}
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


def create_fused_prim_func(params: Sequence[Tensor], stages: Sequence[Sequence[Tensor]]) -> PrimFunc:
    """Lower a chain of ops as TVM's FuseTIR builds a fused function from their legalized
    PrimFuncs (docs/architecture.md, "Legalization").

    `stages` are the ops' outputs in call order (one list per op; `nn.batch_norm` has three);
    `params` are the fused function's parameters (inputs, then the outputs it returns). Each
    stage contributes the blocks its own `create_prim_func` would make, in that order, from
    its outputs down to placeholders or earlier stages' outputs, even blocks nothing reads
    (TVM keeps an op's unused outputs). Block names are made unique per stage as
    `create_prim_func` does (`T_add_1`), then across the function as FuseTIR's deduplicator
    does (strip trailing digits, append the next free number: `T_add1`, `compute1`). A stage
    output becomes a buffer named `<name>_intermediate` (an allocation, or the parameter when
    the function returns it)."""
    params = list(params)
    if not params or not stages:
        raise TEError("create_fused_prim_func needs parameters and at least one stage")
    for t in params + [t for stage in stages for t in stage]:
        if not isinstance(t, Tensor):
            raise TEError(f"create_fused_prim_func takes te tensors, got {type(t).__name__}")
    param_ops = {id(t.op) for t in params}
    stage_outputs: list[Tensor] = [t for stage in stages for t in stage]
    output_ops = {id(t.op) for t in stage_outputs}
    for t in params:
        if isinstance(t.op, ComputeOp) and id(t.op) not in output_ops:
            raise TEError(f"parameter {t.name!r} is computed but is not a stage output")

    buffer_names = NameSupply()
    buffers: dict[int, E.Buffer] = {}
    for t in params:
        if id(t.op) in buffers:
            raise TEError(f"tensor {t.name!r} is passed to create_fused_prim_func twice")
        name = t.name + "_intermediate" if isinstance(t.op, ComputeOp) else t.name
        buffers[id(t.op)] = E.Buffer(buffer_names.fresh(name), t.shape, t.dtype)

    fuse_names = _FuseTIRNames()
    root_allocs: list[E.Buffer] = []
    stmts: list[S.Stmt] = []
    done: set[int] = set()
    for stage in stages:
        order = _post_dfs(stage, stop=done)
        block_names = NameSupply()
        outputs_here = {id(t.op) for t in stage}
        for t in order:
            if isinstance(t.op, PlaceholderOp):
                if id(t.op) not in param_ops:
                    raise TEError(f"placeholder {t.name!r} is read by the computation but is not a parameter")
                continue
            if id(t.op) in output_ops and id(t.op) not in outputs_here:
                raise TEError(f"tensor {t.name!r} is read before the stage that computes it")
            if id(t.op) not in buffers and id(t.op) not in outputs_here:
                buffers[id(t.op)] = E.Buffer(buffer_names.fresh(t.name), t.shape, t.dtype)
                root_allocs.append(buffers[id(t.op)])
        for t in stage:  # the stage's outputs follow its internal allocations, as in FuseTIR
            if id(t.op) not in buffers:
                buffers[id(t.op)] = E.Buffer(_intermediate_name(t.name, root_allocs, buffer_names), t.shape, t.dtype)
                root_allocs.append(buffers[id(t.op)])
        for t in order:
            if isinstance(t.op, ComputeOp):
                stmts.append(_lower_compute(t, buffers, block_names, fuse_names.unique))
        done |= {id(t.op) for t in order}

    func_params: list[E.Var] = []
    buffer_map: dict[E.Var, E.Buffer] = {}
    for t in params:
        buf = buffers[id(t.op)]
        param = E.Var(buf.name, "handle")
        func_params.append(param)
        buffer_map[param] = buf
    root = S.Block((), (), (), "root", S.seq(*stmts), None, tuple(root_allocs))
    body = S.BlockRealize((), E.IntImm("bool", 1), root)
    return PrimFunc(tuple(func_params), buffer_map, body, {"global_symbol": "main", "tir.noalias": True})


def _intermediate_name(name: str, allocs: Sequence[E.Buffer], supply: NameSupply) -> str:
    """FuseTIR's `<name>_intermediate`, extended by `_1`, `_2` while an allocation has it."""
    taken = {b.name for b in allocs}
    candidate, n = name + "_intermediate", 0
    while candidate in taken:
        n += 1
        candidate = f"{candidate}_{n}"
    return supply.fresh(candidate)


class _FuseTIRNames:
    """FuseTIR's block-name deduplicator: a taken name loses its trailing digits and gets the
    next free number (`T_add` -> `T_add1`, `T_add_1` -> `T_add_2`)."""

    def __init__(self) -> None:
        self.used: set[str] = set()

    def unique(self, name: str) -> str:
        if name not in self.used:
            self.used.add(name)
            return name
        base = name.rstrip("0123456789")
        counter = int(name[len(base):]) + 1 if len(base) < len(name) else 1
        while f"{base}{counter}" in self.used:
            counter += 1
        self.used.add(f"{base}{counter}")
        return f"{base}{counter}"


def _lower_compute(tensor: Tensor, buffers: dict[int, E.Buffer], block_names: NameSupply,
                   rename: Callable[[str], str] | None = None) -> S.Stmt:
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
    name = block_names.fresh(op.name)
    block = S.Block(tuple(iter_vars), reads, writes, rename(name) if rename else name, body, init,
                    annotations=annotations)
    stmt: S.Stmt = S.BlockRealize(tuple(loop_vars), E.IntImm("bool", 1), block)
    for loop_var, iv in reversed(list(zip(loop_vars, iter_vars))):
        assert iv.dom is not None  # built with a domain above
        stmt = S.For(loop_var, iv.dom.min, iv.dom.extent, S.ForKind.SERIAL, stmt)
    return stmt


def _annotation_value(value: Any, buffers: dict[int, E.Buffer]) -> Any:
    if isinstance(value, Tensor):
        raise TEError("tensor-valued compute attrs are not supported")
    if isinstance(value, (list, tuple)):
        return tuple(_annotation_value(v, buffers) for v in value)
    return value
