"""ONNX models into msdb's operator graph, op for op as TVM 0.27's Relax ONNX frontend imports them
(`from_onnx`).

Fusion and TVM's function names depend on the exact Relax ops the importer emits, so this mirrors
TVM's importer rather than ONNX's semantics alone. Shapes are static (or given in
`input_shapes`); every problem is one `ModelError` line naming the file, the node and its op type.
The ops and the differences from TVM: see docs/architecture.md, "Models".
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np

from msdb.ir.te import NameSupply
from msdb.model.graph import ModelError, oversized
from msdb.model.ops import OpGraph, OpNode

__all__ = ["from_onnx", "SUPPORTED_OPS", "MIN_OPSET", "MAX_OPSET"]

#: default-domain opsets msdb reads (older opsets change Reshape, BatchNormalization and the
#: broadcasting rules of the binary ops)
MIN_OPSET = 7
MAX_OPSET = 23

#: element types msdb's ONNX tensors may have: float32 computes; int64/int32 are token ids,
#: masks and shapes; bool is a mask
DTYPES = ("float32", "int64", "int32", "bool")


def _onnx() -> Any:
    try:
        import onnx
    except ImportError:
        raise ModelError("reading ONNX models needs the onnx package: pip install 'msdb[onnx]'") from None
    return onnx


def from_onnx(model: Any, name: str | None = None, *,
              input_shapes: Mapping[str, tuple[int, ...]] | None = None) -> OpGraph:
    """The `OpGraph` of an ONNX model: `model` is a path or an `onnx.ModelProto`.
    `input_shapes` fixes the shapes of graph inputs whose dimensions are symbolic."""
    onnx = _onnx()
    if isinstance(model, (str, os.PathLike)):
        source = os.fspath(model)
        proto = _load(onnx, source)
    elif isinstance(model, onnx.ModelProto):
        proto = model
        source = name or model.graph.name or "<onnx model>"
    else:
        raise ModelError(f"from_onnx takes a path or an onnx.ModelProto, got {type(model).__name__}")
    graph_name = name or proto.graph.name or os.path.splitext(os.path.basename(source))[0]
    return _Importer(onnx, proto, source, graph_name, dict(input_shapes or {})).run()


def _load(onnx: Any, path: str) -> Any:
    if not os.path.exists(path):
        raise ModelError(f"{path}: no such file")
    import importlib

    # protobuf (onnx's dependency) raises DecodeError for a truncated or corrupt file
    decode_error: type[Exception] = importlib.import_module("google.protobuf.message").DecodeError
    try:
        return onnx.load(path)
    except decode_error as err:
        raise ModelError(f"{path}: not a readable ONNX model, the file is truncated or corrupt ({err})") from None
    except (OSError, ValueError) as err:
        raise ModelError(f"{path}: cannot read the ONNX model ({err})") from None


# =============================================================================================
# The importer
# =============================================================================================


@dataclass
class _Node:
    """The ONNX node being converted, for messages and attributes."""

    name: str
    op_type: str
    inputs: list[str]
    outputs: list[str]
    attrs: dict[str, Any] = field(default_factory=dict)


_Converter = Callable[["_Importer", _Node], None]
_CONVERTERS: dict[str, _Converter] = {}


def _converter(*op_types: str) -> Callable[[_Converter], _Converter]:
    def wrap(fn: _Converter) -> _Converter:
        for op_type in op_types:
            _CONVERTERS[op_type] = fn
        return fn
    return wrap


class _Importer:
    def __init__(self, onnx: Any, proto: Any, source: str, name: str,
                 input_shapes: dict[str, tuple[int, ...]]) -> None:
        self.onnx = onnx
        self.proto = proto
        self.source = source
        self.name = name
        self.input_shapes = input_shapes
        self.nodes: list[OpNode] = []
        self.shapes: dict[str, tuple[int, ...]] = {}
        self.dtypes: dict[str, str] = {}
        self.constants: dict[str, np.ndarray] = {}
        self.alias: dict[str, str] = {}  # Identity outputs -> their input tensor
        # Constants TVM holds as a ShapeExpr ("shape": Shape's output, Concat of shapes) or a
        # PrimValue ("prim": a dimension Gathered from a shape): some converters treat them
        # apart from constant tensors.
        self.kinds: dict[str, str] = {}
        # A node's result op, emitted when an op first reads it (TVM's BlockBuilder normalizes
        # a converter's result without binding it), or never when nothing does.
        self.pending: dict[str, OpNode] = {}
        self.names = NameSupply()
        self.opset = 0
        self.node: _Node | None = None

    # ---- errors and names ------------------------------------------------------------------

    def fail(self, message: str) -> ModelError:
        if self.node is not None:
            return ModelError(f"{self.source}: node {self.node.name!r} ({self.node.op_type}): {message}")
        return ModelError(f"{self.source}: {message}")

    def fresh(self, hint: str) -> str:
        """A tensor name no ONNX tensor and no earlier op uses."""
        return self.names.fresh(hint)

    # ---- tensors -----------------------------------------------------------------------------

    def tensor(self, name: str) -> str:
        name = self.alias.get(name, name)
        if name not in self.shapes:
            raise self.fail(f"reads tensor {name!r}, which no input, initializer or earlier node defines "
                            "(the file may be truncated)")
        return name

    def shape(self, name: str) -> tuple[int, ...]:
        return self.shapes[self.tensor(name)]

    def constant(self, name: str, what: str) -> np.ndarray:
        name = self.tensor(name)
        if name not in self.constants:
            raise self.fail(f"{what} ({name!r}) must be a constant (an initializer or Constant node); "
                            "computed values there are dynamic shapes, which msdb does not support")
        return self.constants[name]

    def add_constant(self, name: str, array: np.ndarray) -> str:
        self.shapes[name] = tuple(int(d) for d in array.shape)
        self.dtypes[name] = str(array.dtype)
        self.constants[name] = array
        self.names.used.add(name)
        return name

    def emit(self, op: str, inputs: list[str], shape: tuple[int, ...], dtype: str, attrs: dict[str, Any] | None = None,
             *, output: str | None = None, extra_outputs: tuple[tuple[str, tuple[int, ...]], ...] = (),
             eager: bool = False) -> str:
        """Append `op(inputs)` writing `output` (a fresh name when None) and return its name. An
        op writing a node's output waits until something reads it (`flush`), as in TVM's
        importer, unless `eager` (a converter that binds its result: a tuple) or it has several
        outputs."""
        assert self.node is not None
        out = output if output is not None else self.fresh(f"{self.node.name or self.node.op_type}.{op.split('.')[-1]}")
        self.names.used.add(out)
        if any(d <= 0 for d in shape):
            raise self.fail(f"output {out!r} would have shape {list(shape)}; check the attributes")
        self.check_size(shape, f"output {out!r}")
        self.shapes[out] = shape
        self.dtypes[out] = dtype
        outs = [out]
        for extra, extra_shape in extra_outputs:
            self.check_size(extra_shape, f"output {extra!r}")
            self.names.used.add(extra)
            self.shapes[extra] = extra_shape
            self.dtypes[extra] = dtype
            outs.append(extra)
        where = f"{self.node.name} ({self.node.op_type})" if self.node.name else self.node.op_type
        for name in inputs:
            self.flush(name)
        made = OpNode(op, tuple(inputs), tuple(outs), dict(attrs or {}), where)
        if output is not None and not extra_outputs and not eager:
            self.pending[out] = made
        else:
            self.nodes.append(made)
        return out

    def flush(self, name: str) -> None:
        """Bind the pending op that computes `name`, if any (its first reader is being emitted)."""
        made = self.pending.pop(name, None)
        if made is not None:
            self.nodes.append(made)

    # ---- the walk ------------------------------------------------------------------------------

    def run(self) -> OpGraph:
        proto, onnx = self.proto, self.onnx
        self.opset = self.check_opset()
        graph = proto.graph
        for t in graph.initializer:
            self.names.used.add(t.name)
        for info in graph.input:
            self.names.used.add(info.name)
        for node in graph.node:
            self.names.used.update(node.output)
        for t in graph.initializer:
            if not t.name.strip():
                raise self.fail("an initializer has no name")
            self.check_size(t.dims, f"initializer {t.name!r}")
            try:
                array = onnx.numpy_helper.to_array(t)
            except Exception as err:  # noqa: BLE001 - onnx raises several kinds for bad data
                raise self.fail(f"initializer {t.name!r} cannot be read ({err}); the file may be truncated") from None
            self.add_constant(t.name, np.asarray(array).reshape(tuple(t.dims)))
        inputs = []
        for info in graph.input:
            if info.name in self.constants:
                continue  # IR < 4 lists initializers among the inputs
            self.shapes[info.name], self.dtypes[info.name] = self.input_type(info)
            inputs.append(info.name)
        if not graph.output:
            raise self.fail("the graph has no outputs (the file may be truncated)")
        for i, node in enumerate(graph.node):
            self.node = _Node(node.name or f"{node.op_type}_{i}", node.op_type, list(node.input), list(node.output),
                              {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute})
            if node.domain not in ("", "ai.onnx"):
                raise self.fail(f"operator domain {node.domain!r} is not supported (only the default ONNX domain)")
            convert = _CONVERTERS.get(node.op_type)
            if convert is None:
                raise self.fail(f"unsupported operator; msdb reads {', '.join(sorted(_CONVERTERS))}")
            convert(self, self.node)
        self.node = None
        outputs = tuple(self.tensor(o.name) for o in graph.output)
        for out in outputs:
            self.flush(out)
        return OpGraph(self.name, tuple(inputs), outputs, self.nodes, self.shapes, self.dtypes,
                       self.constants, self.source)

    def check_opset(self) -> int:
        versions = [o.version for o in self.proto.opset_import if o.domain in ("", "ai.onnx")]
        version = versions[0] if versions else 1
        if not MIN_OPSET <= version <= MAX_OPSET:
            raise self.fail(f"opset {version} is not supported; msdb reads opsets {MIN_OPSET} to {MAX_OPSET} "
                            "(convert the model with onnx.version_converter)")
        return int(version)

    def input_type(self, info: Any) -> tuple[tuple[int, ...], str]:
        ttype = info.type.tensor_type
        if not info.type.HasField("tensor_type"):
            raise self.fail(f"graph input {info.name!r} is not a tensor")
        dtype = self.np_dtype(ttype.elem_type, f"graph input {info.name!r}")
        fixed = self.input_shapes.get(info.name)
        if fixed is not None:
            return self.check_size(fixed, f"graph input {info.name!r}"), dtype
        if not ttype.HasField("shape"):
            raise self.fail(f"graph input {info.name!r} has no shape; give it one in the model, or load it with "
                            f"msdb.model.load(path, input_shapes={{{info.name!r}: (...)}})")
        dims = []
        for axis, dim in enumerate(ttype.shape.dim):
            if dim.HasField("dim_value") and dim.dim_value > 0:
                dims.append(int(dim.dim_value))
            else:
                what = f"symbolic {dim.dim_param!r}" if dim.HasField("dim_param") else "unknown"
                raise self.fail(f"graph input {info.name!r} dimension {axis} is dynamic ({what}); msdb needs static "
                                f"shapes: make it a number in the model, or load it with "
                                f"msdb.model.load(path, input_shapes={{{info.name!r}: (...)}})")
        return self.check_size(dims, f"graph input {info.name!r}"), dtype

    def check_size(self, shape: Any, what: str) -> tuple[int, ...]:
        """`shape` as a tuple, once it is within `MAX_TENSOR_ELEMENTS` (checked before anything
        is allocated for the tensor)."""
        problem = oversized(shape)
        if problem is not None:
            raise self.fail(f"{what}: {problem}")
        return tuple(int(d) for d in shape)

    def np_dtype(self, elem_type: int, what: str) -> str:
        try:
            dtype = str(np.dtype(self.onnx.helper.tensor_dtype_to_np_dtype(elem_type)))
        except (KeyError, TypeError, ValueError):
            raise self.fail(f"{what} has an element type ({elem_type}) msdb does not support") from None
        if dtype not in DTYPES:
            raise self.fail(f"{what} is {dtype}; msdb's ONNX models compute in {', '.join(DTYPES)}")
        return dtype

    def _int64(self, value: int) -> str:
        """A 0-d int64 constant (TVM's `relax.const(value, "int64")`)."""
        return self.add_constant(self.fresh(f"{self.node.name if self.node else ''}.const"), np.array(value, "int64"))

    def reshape_to(self, x: str, shape: tuple[int, ...]) -> None:
        """reshape(x, shape) into the node's output; a constant is reshaped here (TVM: NumPy)."""
        target = self.single_output()
        if x in self.constants:
            self.add_constant(target, self.constants[x].reshape(shape))
            return
        self.emit("reshape", [x], shape, self.dtypes[x], {"shape": shape}, output=target)

    # ---- attribute helpers -----------------------------------------------------------------------

    def ints(self, key: str, default: list[int] | None, length: int | None = None) -> list[int]:
        assert self.node is not None
        value = self.node.attrs.get(key, default)
        if value is None:
            raise self.fail(f"attribute {key!r} is required")
        values = [int(v) for v in value]
        if length is not None and len(values) != length:
            raise self.fail(f"attribute {key!r} has {len(values)} values, expected {length} (only 2-D is supported)")
        return values

    def inp(self, index: int) -> str | None:
        """The node's `index`-th input tensor, None when absent (an optional input)."""
        assert self.node is not None
        if index >= len(self.node.inputs) or not self.node.inputs[index]:
            return None
        return self.tensor(self.node.inputs[index])

    def need(self, index: int) -> str:
        found = self.inp(index)
        if found is None:
            raise self.fail(f"input {index} is required")
        return found

    def single_output(self) -> str:
        assert self.node is not None
        outs = [o for o in self.node.outputs if o]
        if len(outs) != 1:
            raise self.fail(f"has {len(outs)} outputs; only the single-output form is supported")
        return outs[0]


# =============================================================================================
# Shape helpers
# =============================================================================================


def _broadcast(importer: _Importer, a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    try:
        return tuple(int(d) for d in np.broadcast_shapes(a, b))
    except ValueError:
        raise importer.fail(f"cannot broadcast shapes {list(a)} and {list(b)}") from None


def _window_out(size: int, kernel: int, stride: int, dilation: int, before: int, after: int, ceil: bool) -> int:
    """Relax's conv/pool output extent (ceil mode adds stride - 1 to the numerator, as TVM)."""
    numerator = size + before + after - ((kernel - 1) * dilation + 1)
    if ceil:
        numerator += stride - 1
    return numerator // stride + 1


def _resolve_shape(importer: _Importer, source: tuple[int, ...], target: list[int], allowzero: bool) -> tuple[int, ...]:
    size = math.prod(source)
    dims = [source[i] if d == 0 and not allowzero and i < len(source) else d for i, d in enumerate(target)]
    if dims.count(-1) > 1:
        raise importer.fail(f"shape {target} has more than one -1")
    known = math.prod(d for d in dims if d != -1)
    if -1 in dims:
        if known == 0 or size % known:
            raise importer.fail(f"cannot reshape {list(source)} to {target}")
        dims[dims.index(-1)] = size // known
    if math.prod(dims) != size or any(d < 0 for d in dims):
        raise importer.fail(f"cannot reshape {list(source)} to {target}")
    return tuple(dims)


# =============================================================================================
# Converters, one per ONNX op (TVM's converter names in the docstrings)
# =============================================================================================


@_converter("Conv")
def _conv(self: _Importer, node: _Node) -> None:
    """TVM `Conv._impl_v11`: nn.conv2d (NCHW, OIHW), bias as add(reshape(bias, [1,-1,1,1]))."""
    data, weight, bias = self.need(0), self.need(1), self.inp(2)
    ds, ws = self.shapes[data], self.shapes[weight]
    if len(ds) != 4 or len(ws) != 4:
        raise self.fail(f"only 2-D convolutions are supported (input {list(ds)}, weight {list(ws)})")
    auto_pad = node.attrs.get("auto_pad", b"NOTSET")
    auto_pad = auto_pad.decode() if isinstance(auto_pad, bytes) else str(auto_pad)
    strides = self.ints("strides", [1, 1], 2)
    dilations = self.ints("dilations", [1, 1], 2)
    pads = self.ints("pads", [0, 0, 0, 0], 4)
    if auto_pad == "VALID":
        pads = [0, 0, 0, 0]
    elif auto_pad != "NOTSET":
        raise self.fail(f"auto_pad {auto_pad!r} is not supported (TVM pads the input with a separate op); "
                        "export the model with explicit pads")
    groups = int(node.attrs.get("group", 1))
    if ds[1] % groups or ws[0] % groups or ws[1] * groups != ds[1]:
        raise self.fail(f"input channels {ds[1]}, weight {list(ws)} and group {groups} do not match")
    kernel = self.ints("kernel_shape", list(ws[2:]), 2)
    if tuple(kernel) != tuple(ws[2:]):
        raise self.fail(f"kernel_shape {kernel} differs from the weight's {list(ws[2:])}")
    out_hw = [_window_out(ds[2 + i], ws[2 + i], strides[i], dilations[i], pads[i], pads[i + 2], False) for i in range(2)]
    attrs = {"strides": tuple(strides), "padding": tuple(pads), "dilation": tuple(dilations), "groups": groups,
             "data_layout": "NCHW", "kernel_layout": "OIHW", "out_layout": "NCHW", "out_dtype": ""}
    out_shape = (ds[0], ws[0], out_hw[0], out_hw[1])
    target = self.single_output()
    if bias is None:
        self.emit("nn.conv2d", [data, weight], out_shape, self.dtypes[data], attrs, output=target)
        return
    if self.shapes[bias] != (ws[0],):
        raise self.fail(f"bias has shape {list(self.shapes[bias])}, expected [{ws[0]}]")
    conv = self.emit("nn.conv2d", [data, weight], out_shape, self.dtypes[data], attrs)
    reshaped = self.emit("reshape", [bias], (1, ws[0], 1, 1), self.dtypes[bias], {"shape": (1, ws[0], 1, 1)})
    self.emit("add", [conv, reshaped], out_shape, self.dtypes[data], output=target)


@_converter("BatchNormalization")
def _batch_norm(self: _Importer, node: _Node) -> None:
    """TVM `BatchNormalization._impl_v15`: nn.batch_norm(axis=1), output 0 (inference only)."""
    if node.attrs.get("training_mode", 0):
        raise self.fail("training_mode=1 is not supported (inference models only)")
    if len([o for o in node.outputs if o]) != 1:
        raise self.fail("only the inference form (one output) is supported")
    data = self.need(0)
    params = [self.need(i) for i in range(1, 5)]
    ds = self.shapes[data]
    if len(ds) < 2:
        raise self.fail(f"input has shape {list(ds)}, needs a channel axis")
    for p in params:
        if self.shapes[p] != (ds[1],):
            raise self.fail(f"parameter {p!r} has shape {list(self.shapes[p])}, expected [{ds[1]}]")
    attrs = {"axis": 1, "epsilon": float(node.attrs.get("epsilon", 1e-5)), "center": True, "scale": True,
             "momentum": float(node.attrs.get("momentum", 0.9)), "training": False}
    target = self.single_output()
    self.emit("nn.batch_norm", [data, *params], ds, self.dtypes[data], attrs, output=target,
              extra_outputs=((self.fresh(f"{target}.running_mean"), (ds[1],)),
                             (self.fresh(f"{target}.running_var"), (ds[1],))))


@_converter("Relu")
def _relu(self: _Importer, node: _Node) -> None:
    x = self.need(0)
    self.emit("nn.relu", [x], self.shapes[x], self.dtypes[x], output=self.single_output())


_NUMPY_BINARY: dict[str, tuple[str, Callable[[np.ndarray, np.ndarray], np.ndarray]]] = {
    "Add": ("add", np.add), "Sub": ("subtract", np.subtract), "Mul": ("multiply", np.multiply),
    "Div": ("divide", np.divide), "Pow": ("power", np.power),
}


def _int_divide(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """ONNX (and TVM's) integer Div: truncation toward zero."""
    quotient, remainder = np.divmod(x, y)
    return np.asarray(quotient + np.logical_and(np.signbit(x) != np.signbit(y), remainder != 0).astype(quotient.dtype))


@_converter(*_NUMPY_BINARY)
def _binary(self: _Importer, node: _Node) -> None:
    """TVM `BinaryBase`: NumPy when both inputs are constants (a PrimValue when one is a
    dimension read from a shape; integer Div truncates), else the Relax op (numpy
    broadcasting; opset < 7's `broadcast`/`axis` attributes are not supported)."""
    if "broadcast" in node.attrs or "axis" in node.attrs:
        raise self.fail("the legacy broadcast/axis attributes (opset < 7) are not supported")
    op, fn = _NUMPY_BINARY[node.op_type]
    a, b = self.need(0), self.need(1)
    target = self.single_output()
    if a in self.constants and b in self.constants:
        x, y = self.constants[a], self.constants[b]
        self.check_size(_broadcast(self, x.shape, y.shape), f"output {target!r}")
        integer = x.dtype.kind in "iu" and y.dtype.kind in "iu"
        if node.op_type == "Div" and integer:
            if np.any(y == 0):
                raise self.fail("integer division by zero")
            out = _int_divide(x, y)
        else:
            out = np.asarray(fn(x, y))
        if x.dtype == y.dtype and out.dtype != np.bool_:
            out = out.astype(x.dtype)
        self.add_constant(target, out)
        if "prim" in (self.kinds.get(a), self.kinds.get(b)):
            self.kinds[target] = "prim"
        return
    for name in (a, b):
        if self.kinds.get(name) == "shape":
            raise self.fail(f"input {name!r} is a shape (TVM's ShapeExpr); {node.op_type} cannot read it")
    if self.dtypes[a] != self.dtypes[b]:
        raise self.fail(f"inputs have dtypes {self.dtypes[a]} and {self.dtypes[b]}")
    self.emit(op, [a, b], _broadcast(self, self.shapes[a], self.shapes[b]), self.dtypes[a], output=target)


@_converter("Clip")
def _clip(self: _Importer, node: _Node) -> None:
    """TVM `Clip`: `maximum` then `minimum`. Opset >= 11: bounds from inputs, each NaN-sanitized
    (a folded `where(isnan(b), -inf|inf, b)`, so the functions read a 0-d buffer); a missing
    bound is skipped. Opset < 11: bounds from attributes (default -inf/inf), both always applied,
    as immediates."""
    x = self.need(0)
    target = self.single_output()
    dtype = self.dtypes[x]
    if self.opset < 11:
        lo = self.add_constant(self.fresh(f"{node.name}.min"), np.array(node.attrs.get("min", -np.inf), dtype=dtype))
        hi = self.add_constant(self.fresh(f"{node.name}.max"), np.array(node.attrs.get("max", np.inf), dtype=dtype))
        mid = self.emit("maximum", [x, lo], self.shapes[x], dtype)
        self.emit("minimum", [mid, hi], self.shapes[x], dtype, output=target)
        return
    result = x
    bounds = [(1, "maximum", -np.inf), (2, "minimum", np.inf)]
    present = [(i, op, fill) for i, op, fill in bounds if self.inp(i) is not None]
    if not present:
        self.alias[target] = x
        return
    for n, (i, op, fill) in enumerate(present):
        bound = self.need(i)
        if bound not in self.constants:
            raise self.fail(f"Clip bound {i} ({bound!r}) must be a constant")
        # TVM sanitizes each bound with where(isnan(b), -inf|inf, b): ops on constants that
        # constant folding evaluates after legalization, so the bound reaches maximum/minimum
        # as a tensor (a 0-d buffer parameter), never as an immediate.
        bs, bt = self.shapes[bound], self.dtypes[bound]
        nan = self.emit("isnan", [bound], bs, "bool")
        fill_value = self.add_constant(self.fresh(f"{node.name}.{'min' if i == 1 else 'max'}.fill"),
                                       np.array(fill, dtype=bt))
        clean = self.emit("where", [nan, fill_value, bound], bs, bt)
        shape = _broadcast(self, self.shapes[result], bs)
        result = self.emit(op, [result, clean], shape, dtype, output=target if n == len(present) - 1 else None)


@_converter("MaxPool", "AveragePool")
def _pool(self: _Importer, node: _Node) -> None:
    """TVM `Pool._impl_v1`: nn.max_pool2d / nn.avg_pool2d with ONNX pads as (top, left, bottom,
    right); SAME_* auto_pad computed statically as TVM does."""
    x = self.need(0)
    xs = self.shapes[x]
    if len(xs) != 4:
        raise self.fail(f"only 2-D pooling is supported (input {list(xs)})")
    if len([o for o in node.outputs if o]) != 1:
        raise self.fail("the Indices output is not supported")
    kernel = self.ints("kernel_shape", None, 2)
    strides = self.ints("strides", [1, 1], 2)
    dilations = self.ints("dilations", [1, 1], 2)
    pads = self.ints("pads", [0, 0, 0, 0], 4)
    ceil_mode = bool(node.attrs.get("ceil_mode", 0))
    auto_pad = node.attrs.get("auto_pad", b"NOTSET")
    auto_pad = auto_pad.decode() if isinstance(auto_pad, bytes) else str(auto_pad)
    avg = node.op_type == "AveragePool"
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        pairs = []
        for i in range(2):
            size, stride, k = xs[2 + i], strides[i], kernel[i]
            if avg:
                pad = max(k - stride, 0) if size % stride == 0 else max(k - size % stride, 0)
                before, after = pad // 2, pad - pad // 2
                pairs.append([after, before] if "LOWER" in auto_pad else [before, after])
            else:
                out = math.ceil(size / stride) if auto_pad == "SAME_UPPER" else math.floor(size / stride)
                pad = (out - 1) * stride + ((k - 1) * dilations[i] + 1) - size
                pairs.append([pad // 2, pad - pad // 2] if auto_pad == "SAME_UPPER" else [pad - pad // 2, pad // 2])
        pads = [pairs[0][0], pairs[1][0], pairs[0][1], pairs[1][1]]
    elif auto_pad not in ("NOTSET", "VALID"):
        raise self.fail(f"auto_pad {auto_pad!r} is invalid")
    out_hw = [_window_out(xs[2 + i], kernel[i], strides[i], dilations[i], pads[i], pads[i + 2], ceil_mode) for i in range(2)]
    attrs = {"pool_size": tuple(kernel), "strides": tuple(strides), "padding": tuple(pads), "dilation": tuple(dilations),
             "ceil_mode": ceil_mode, "count_include_pad": bool(node.attrs.get("count_include_pad", 0)),
             "layout": "NCHW", "out_layout": "NCHW"}
    self.emit("nn.avg_pool2d" if avg else "nn.max_pool2d", [x], (xs[0], xs[1], out_hw[0], out_hw[1]), self.dtypes[x],
              attrs, output=self.single_output())


@_converter("GlobalAveragePool")
def _global_average_pool(self: _Importer, node: _Node) -> None:
    """TVM: mean over the spatial axes with keepdims (not adaptive_avg_pool2d)."""
    x = self.need(0)
    xs = self.shapes[x]
    if len(xs) < 3:
        raise self.fail(f"input {list(xs)} has no spatial axes")
    axes = tuple(range(2, len(xs)))
    self.emit("mean", [x], xs[:2] + (1,) * len(axes), self.dtypes[x], {"axis": axes, "keepdims": True},
              output=self.single_output())


@_converter("Flatten")
def _flatten(self: _Importer, node: _Node) -> None:
    """TVM `Flatten._impl_v13`: reshape to (prod(shape[:axis]), -1)."""
    x = self.need(0)
    xs = self.shapes[x]
    axis = int(node.attrs.get("axis", 1))
    if axis < 0:
        axis += len(xs)
    if not 0 <= axis <= len(xs):
        raise self.fail(f"axis {node.attrs.get('axis')} is out of range for rank {len(xs)}")
    shape = (1, math.prod(xs)) if axis == 0 else (math.prod(xs[:axis]), math.prod(xs[axis:]))
    self.reshape_to(x, shape)


@_converter("Reshape")
def _reshape(self: _Importer, node: _Node) -> None:
    """TVM `Reshape._impl_v13`: the target shape must be a constant; 0 copies the input's
    dimension (unless allowzero), -1 is inferred; a constant input is reshaped here."""
    if self.opset < 5:  # pragma: no cover - MIN_OPSET excludes it
        raise self.fail("Reshape before opset 5 (shape as an attribute) is not supported")
    x = self.need(0)
    target = [int(v) for v in self.constant(self.need(1), "the target shape").reshape(-1)]
    if self.kinds.get(x) == "shape":
        if target != [-1]:
            raise self.fail("reshaping a shape (TVM's ShapeExpr) other than to [-1] is not supported")
        self.alias[self.single_output()] = x
        return
    allowzero = bool(node.attrs.get("allowzero", 0))
    if allowzero and 0 in target:
        raise self.fail("allowzero with a 0 in the shape is not supported")
    self.reshape_to(x, _resolve_shape(self, self.shapes[x], target, allowzero))


@_converter("Gemm")
def _gemm(self: _Importer, node: _Node) -> None:
    """TVM `Gemm._impl_v13`: multiply(A, alpha) when alpha != 1, permute_dims for transA/transB,
    matmul, then add(C) (C multiplied by beta when beta != 1)."""
    if "broadcast" in node.attrs:
        raise self.fail("the legacy broadcast attribute (opset < 7) is not supported")
    a, b, c = self.need(0), self.need(1), self.inp(2)
    dtype = self.dtypes[a]
    alpha = float(node.attrs.get("alpha", 1.0))
    beta = float(node.attrs.get("beta", 1.0))
    if len(self.shapes[a]) != 2 or len(self.shapes[b]) != 2:
        raise self.fail(f"A {list(self.shapes[a])} and B {list(self.shapes[b])} must be 2-D")
    target = self.single_output()
    if alpha != 1.0:
        scale = self.add_constant(self.fresh(f"{node.name}.alpha"), np.array(alpha, dtype=dtype))
        a = self.emit("multiply", [a, scale], self.shapes[a], dtype)
    if node.attrs.get("transA", 0):
        sa = self.shapes[a]
        a = self.emit("permute_dims", [a], (sa[1], sa[0]), dtype, {"axes": (1, 0)})
    if node.attrs.get("transB", 0):
        sb = self.shapes[b]
        b = self.emit("permute_dims", [b], (sb[1], sb[0]), dtype, {"axes": (1, 0)})
    (m, k), (k2, n) = self.shapes[a], self.shapes[b]
    if k != k2:
        raise self.fail(f"A {[m, k]} and B {[k2, n]} do not multiply")
    if c is None:
        self.emit("matmul", [a, b], (m, n), dtype, {"out_dtype": ""}, output=target)
        return
    y = self.emit("matmul", [a, b], (m, n), dtype, {"out_dtype": ""})
    if beta != 1.0:
        scale = self.add_constant(self.fresh(f"{node.name}.beta"), np.array(beta, dtype=dtype))
        c = self.emit("multiply", [c, scale], self.shapes[c], dtype)
    self.emit("add", [y, c], _broadcast(self, (m, n), self.shapes[c]), dtype, output=target)


@_converter("MatMul")
def _matmul(self: _Importer, node: _Node) -> None:
    """TVM `MatMul._impl_v13`: matmul with NumPy's rules (1-D operands, batch broadcasting)."""
    a, b = self.need(0), self.need(1)
    sa, sb = self.shapes[a], self.shapes[b]
    if not sa or not sb:
        raise self.fail("matmul of a scalar")
    la = (1,) + sa if len(sa) == 1 else sa
    lb = sb + (1,) if len(sb) == 1 else sb
    if la[-1] != lb[-2]:
        raise self.fail(f"shapes {list(sa)} and {list(sb)} do not multiply")
    batch = _broadcast(self, la[:-2], lb[:-2])
    out = batch + (la[-2],) * (len(sa) > 1) + (lb[-1],) * (len(sb) > 1)
    self.emit("matmul", [a, b], out, self.dtypes[a], {"out_dtype": ""}, output=self.single_output())


@_converter("Softmax")
def _softmax(self: _Importer, node: _Node) -> None:
    """TVM `Softmax`: opset >= 13 nn.softmax(axis, default -1); before, the input is viewed as
    2-D at `axis` (default 1): reshape, nn.softmax(axis=-1), reshape back."""
    x = self.need(0)
    xs = self.shapes[x]
    target = self.single_output()
    dtype = self.dtypes[x]
    if self.opset >= 13:
        axis = int(node.attrs.get("axis", -1))
        if not -len(xs) <= axis < len(xs):
            raise self.fail(f"axis {axis} is out of range for rank {len(xs)}")
        self.emit("nn.softmax", [x], xs, dtype, {"axis": axis}, output=target)
        return
    axis = int(node.attrs.get("axis", 1))
    if axis < 0:
        axis += len(xs)
    if not 0 <= axis < max(len(xs), 1):
        raise self.fail(f"axis {node.attrs.get('axis')} is out of range for rank {len(xs)}")
    flat = (math.prod(xs[:axis]), math.prod(xs[axis:]))
    y = self.emit("reshape", [x], flat, dtype, {"shape": flat})
    y = self.emit("nn.softmax", [y], flat, dtype, {"axis": -1})
    self.emit("reshape", [y], xs, dtype, {"shape": xs}, output=target)


@_converter("Concat")
def _concat(self: _Importer, node: _Node) -> None:
    """TVM `Concat._impl_v13`: concat of the inputs along `axis`."""
    inputs = [self.need(i) for i in range(len(node.inputs))]
    if "axis" not in node.attrs:
        raise self.fail("attribute 'axis' is required")
    axis = int(node.attrs["axis"])
    shapes = [self.shapes[i] for i in inputs]
    rank = len(shapes[0])
    real = axis + rank if axis < 0 else axis
    if not 0 <= real < rank or any(len(s) != rank for s in shapes):
        raise self.fail(f"cannot concatenate shapes {[list(s) for s in shapes]} on axis {axis}")
    for s in shapes[1:]:
        if any(s[d] != shapes[0][d] for d in range(rank) if d != real):
            raise self.fail(f"cannot concatenate shapes {[list(s) for s in shapes]} on axis {axis}")
    out = list(shapes[0])
    out[real] = sum(s[real] for s in shapes)
    target = self.single_output()
    if all(i in self.constants for i in inputs):
        self.add_constant(target, np.concatenate([self.constants[i] for i in inputs], axis=real))
        if all(self.kinds.get(i) == "shape" or (len(self.shapes[i]) == 1 and self.dtypes[i] == "int64")
               for i in inputs):
            self.kinds[target] = "shape"  # TVM: shape-like inputs concatenate to a ShapeExpr
        return
    self.emit("concat", inputs, tuple(out), self.dtypes[inputs[0]], {"axis": axis}, output=target)


@_converter("Identity")
def _identity(self: _Importer, node: _Node) -> None:
    self.alias[self.single_output()] = self.need(0)


@_converter("Constant")
def _constant(self: _Importer, node: _Node) -> None:
    """TVM `Constant._impl_v13`: only the `value` attribute (a tensor)."""
    if "value" not in node.attrs:
        raise self.fail(f"only the 'value' attribute is supported, got {sorted(node.attrs)}")
    self.check_size(getattr(node.attrs["value"], "dims", ()), f"value of {self.single_output()!r}")
    self.add_constant(self.single_output(), np.asarray(self.onnx.numpy_helper.to_array(node.attrs["value"])))


# ---- transformer ops (TVM's converters: the same constant folding at import, the same Relax ops)


def _axes(self: _Importer, axes: list[int], rank: int, what: str = "axis") -> list[int]:
    """`axes` made non-negative; each must lie in [-rank, rank)."""
    real = []
    for a in axes:
        if not -rank <= a < rank:
            raise self.fail(f"{what} {a} is out of range for rank {rank}")
        real.append(a + rank if a < 0 else a)
    return real


def _axes_input(self: _Importer, node: _Node, index: int, attr: str, since: int) -> list[int] | None:
    """The `axes` of Squeeze/Unsqueeze/ReduceMean: the attribute before opset `since`, the
    (constant) input from it on; None when absent."""
    if self.opset < since:
        value = node.attrs.get(attr)
        return None if value is None else [int(v) for v in value]
    if attr in node.attrs:
        raise self.fail(f"attribute {attr!r} is not allowed from opset {since} on (it is input {index})")
    found = self.inp(index)
    if found is None:
        return None
    return [int(v) for v in self.constant(found, f"input {index} ({attr})").reshape(-1)]


@_converter("Transpose")
def _transpose(self: _Importer, node: _Node) -> None:
    """TVM `Transpose`: NumPy on a constant, nothing on a 0-d tensor, else permute_dims
    (`perm` absent: the axes reversed)."""
    x = self.need(0)
    xs = self.shapes[x]
    target = self.single_output()
    perm = node.attrs.get("perm")
    axes = list(range(len(xs) - 1, -1, -1)) if perm is None else [int(a) for a in perm]
    if sorted(_axes(self, axes, len(xs), "perm axis")) != list(range(len(xs))):
        raise self.fail(f"perm {axes} is not a permutation of {len(xs)} axes")
    if not xs:
        self.alias[target] = x
        return
    if x in self.constants:
        self.add_constant(target, np.transpose(self.constants[x], axes))
        return
    self.emit("permute_dims", [x], tuple(xs[a] for a in axes), self.dtypes[x],
              {"axes": None if perm is None else tuple(axes)}, output=target)


@_converter("Shape")
def _shape(self: _Importer, node: _Node) -> None:
    """TVM `Shape`: the static shape as a ShapeExpr (opset 15's start/end slice it); of a
    shape, its length."""
    x = self.need(0)
    dims = [len(self.constants[x])] if self.kinds.get(x) == "shape" else list(self.shapes[x])
    if self.opset >= 15:
        start, end = node.attrs.get("start", 0), node.attrs.get("end")
        dims = dims[int(start):None if end is None else int(end)]
    target = self.single_output()
    self.add_constant(target, np.array(dims, dtype="int64"))
    self.kinds[target] = "shape"


def _shape_of(self: _Importer, data: str) -> str:
    """`shape_to_tensor(shape_of(data))`: an op of no inputs that constant folding evaluates
    (it names a function all the same, as in TVM)."""
    shape = self.shapes[data]
    return self.emit("shape_to_tensor", [], (len(shape),), "int64", {"shape": tuple(shape)})


@_converter("Gather")
def _gather(self: _Importer, node: _Node) -> None:
    """TVM `Gather`: NumPy when data and indices are constants; a 0-d index into a shape is a
    dimension (a PrimValue); else negative indices are wrapped at run time,
    `where(less(i, 0), add(i, take(shape_to_tensor(data), axis, mode="wrap")), i)`, and
    `take(data, that, axis)` gathers (an embedding: axis 0 of a constant table)."""
    data, indices = self.need(0), self.need(1)
    target = self.single_output()
    rank = len(self.shapes[data])
    axis = _axes(self, [int(node.attrs.get("axis", 0))], rank)[0]
    if self.dtypes[indices] not in ("int64", "int32"):
        raise self.fail(f"indices {indices!r} are {self.dtypes[indices]}, not integers")
    if data in self.constants and indices in self.constants:
        table, index = self.constants[data], self.constants[indices]
        if np.any(index < -table.shape[axis]) or np.any(index >= table.shape[axis]):
            raise self.fail(f"indices {index.reshape(-1).tolist()} are out of range for axis {axis} of "
                            f"{list(table.shape)}")
        self.add_constant(target, np.take(table, index, axis=axis))
        if self.kinds.get(data) == "shape" and index.ndim == 0:
            self.kinds[target] = "prim"
        return
    if self.kinds.get(data) == "shape":
        raise self.fail("gathering from a shape (TVM's ShapeExpr) with computed indices is not supported")
    if self.dtypes[indices] != "int64":
        raise self.fail(f"indices {indices!r} are {self.dtypes[indices]}; computed indices must be int64")
    ishape = self.shapes[indices]
    shape_tensor = _shape_of(self, data)
    negative = self.emit("less", [indices, self._int64(0)], ishape, "bool")
    zero = self._int64(axis)
    extent = self.emit("take", [shape_tensor, zero], (), "int64", {"axis": 0, "mode": "wrap"})
    wrapped = self.emit("add", [indices, extent], ishape, "int64")
    positive = self.emit("where", [negative, wrapped, indices], ishape, "int64")
    ds = self.shapes[data]
    self.emit("take", [data, positive], ds[:axis] + ishape + ds[axis + 1:], self.dtypes[data],
              {"axis": axis, "mode": "fast"}, output=target)


@_converter("Unsqueeze")
def _unsqueeze(self: _Importer, node: _Node) -> None:
    """TVM `Unsqueeze`: a dimension (PrimValue) with axes [0] becomes a shape; a constant is
    reshaped here; else one expand_dims per axis, in increasing order. Axes are the attribute
    before opset 13 and an input from 13 on."""
    x = self.need(0)
    axes = _axes_input(self, node, 1, "axes", 13)
    if axes is None:
        raise self.fail("axes are required")
    target = self.single_output()
    xs = self.shapes[x]
    if self.kinds.get(x) == "prim":
        if _axes(self, axes, 1) != [0]:
            raise self.fail("unsqueezing a dimension read from a shape supports axes [0] only")
        self.add_constant(target, self.constants[x].reshape(1))
        self.kinds[target] = "shape"
        return
    real = sorted(_axes(self, axes, len(xs) + len(axes)))
    if len(set(real)) != len(real):
        raise self.fail(f"axes {axes} repeat an axis")
    shape = list(xs)
    for a in real:
        shape.insert(a, 1)
    if x in self.constants:
        self.add_constant(target, self.constants[x].reshape(shape))
        return
    current, cur_shape = x, list(xs)
    for n, a in enumerate(real):
        cur_shape.insert(a, 1)
        last = n == len(real) - 1
        current = self.emit("expand_dims", [current], tuple(cur_shape), self.dtypes[x], {"axis": (a,)},
                            output=target if last else None)


@_converter("Squeeze")
def _squeeze(self: _Importer, node: _Node) -> None:
    """TVM `Squeeze`: NumPy on a constant; a one-element shape becomes a dimension; else
    squeeze (every size-1 axis when `axes` is absent; a listed axis must have size 1)."""
    x = self.need(0)
    axes = _axes_input(self, node, 1, "axes", 13)
    target = self.single_output()
    xs = self.shapes[x]
    if self.kinds.get(x) == "shape":
        if len(xs) == 1 and xs[0] == 1 and (axes is None or _axes(self, axes, 1) == [0]):
            self.add_constant(target, self.constants[x].reshape(()))
            self.kinds[target] = "prim"
            return
        raise self.fail("squeezing a shape (TVM's ShapeExpr) supports a one-element shape only")
    real = [d for d, n in enumerate(xs) if n == 1] if axes is None else _axes(self, axes, len(xs))
    for a in real:
        if xs[a] != 1:
            raise self.fail(f"axis {a} has size {xs[a]}; only axes of size 1 can be squeezed")
    shape = tuple(n for d, n in enumerate(xs) if d not in real)
    if x in self.constants:
        self.add_constant(target, self.constants[x].reshape(shape))
        return
    self.emit("squeeze", [x], shape, self.dtypes[x], {"axis": None if axes is None else tuple(axes)}, output=target)


_ONNX_DTYPES = {1: "float32", 6: "int32", 7: "int64", 9: "bool"}


@_converter("Cast")
def _cast(self: _Importer, node: _Node) -> None:
    """TVM `Cast`: NumPy on a constant (a shape included), else astype. A computed float tensor
    cast to an integer type (TVM sanitizes it with five more ops) is not supported."""
    if "to" not in node.attrs:
        raise self.fail("attribute 'to' is required")
    to = _ONNX_DTYPES.get(int(node.attrs["to"]))
    if to is None:
        raise self.fail(f"attribute 'to' = {node.attrs['to']} is not one of msdb's types ({', '.join(DTYPES)})")
    x = self.need(0)
    target = self.single_output()
    if x in self.constants:
        self.add_constant(target, self.constants[x].astype(to))
        if self.kinds.get(x) == "prim":
            self.kinds[target] = "prim"
        return
    if self.dtypes[x] == "float32" and to != "float32" and to != "bool":
        raise self.fail(f"attribute 'to' = {to}: casting a computed float tensor to an integer type is not supported")
    self.emit("astype", [x], self.shapes[x], to, {"dtype": to}, output=target)


@_converter("Where")
def _where(self: _Importer, node: _Node) -> None:
    """TVM `Where._impl_v16`: NumPy on constants, else where (numpy broadcasting)."""
    cond, x, y = self.need(0), self.need(1), self.need(2)
    target = self.single_output()
    if self.dtypes[cond] != "bool":
        raise self.fail(f"condition {cond!r} is {self.dtypes[cond]}, not bool")
    if self.dtypes[x] != self.dtypes[y]:
        raise self.fail(f"inputs have dtypes {self.dtypes[x]} and {self.dtypes[y]}")
    shape = _broadcast(self, _broadcast(self, self.shapes[cond], self.shapes[x]), self.shapes[y])
    if all(t in self.constants for t in (cond, x, y)):
        self.add_constant(target, np.where(self.constants[cond], self.constants[x], self.constants[y]))
        return
    if any(self.kinds.get(t) == "shape" for t in (cond, x, y)):
        raise self.fail("Where on shapes (TVM's ShapeExpr) is not supported")
    self.emit("where", [cond, x, y], shape, self.dtypes[x], output=target)


@_converter("Slice")
def _slice(self: _Importer, node: _Node) -> None:
    """TVM `Slice._impl_v13`: starts, ends, axes and steps must be constants; a shape is sliced
    here; else strided_slice (bounds clamped as Python slices)."""
    if self.opset < 10:
        raise self.fail("Slice before opset 10 (bounds as attributes) is not supported")
    x = self.need(0)
    xs = self.shapes[x]
    starts = [int(v) for v in self.constant(self.need(1), "input 1 (starts)").reshape(-1)]
    ends = [int(v) for v in self.constant(self.need(2), "input 2 (ends)").reshape(-1)]
    axes_in, steps_in = self.inp(3), self.inp(4)
    axes = list(range(len(starts))) if axes_in is None else [
        int(v) for v in self.constant(axes_in, "input 3 (axes)").reshape(-1)]
    steps = [1] * len(starts) if steps_in is None else [
        int(v) for v in self.constant(steps_in, "input 4 (steps)").reshape(-1)]
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise self.fail(f"starts {starts}, ends {ends}, axes {axes} and steps {steps} differ in length")
    if 0 in steps:
        raise self.fail("a step is 0")
    real = _axes(self, axes, len(xs))
    target = self.single_output()
    if self.kinds.get(x) == "shape":
        self.add_constant(target, self.constants[x][starts[0]:ends[0]:steps[0]].copy())
        return
    from msdb.model.legalize.index import slice_bounds

    shape = list(xs)
    for a, b, e, st in zip(real, starts, ends, steps):
        shape[a] = slice_bounds(xs[a], b, e, st)[1]
    attrs = {"axes": tuple(real), "begin": tuple(starts), "end": tuple(ends), "strides": tuple(steps),
             "assume_inbound": False}
    self.emit("strided_slice", [x], tuple(shape), self.dtypes[x], attrs, output=target)


@_converter("Split")
def _split(self: _Importer, node: _Node) -> None:
    """TVM `Split`: split at the constant `split` sizes (input from opset 13, attribute
    before), or in as many equal parts as the node has outputs; bound at once (a tuple)."""
    x = self.need(0)
    xs = self.shapes[x]
    axis = _axes(self, [int(node.attrs.get("axis", 0))], len(xs))[0]
    if self.opset >= 13:
        found = self.inp(1)
        sizes = None if found is None else [int(v) for v in self.constant(found, "input 1 (split)").reshape(-1)]
    else:
        sizes = [int(v) for v in node.attrs["split"]] if "split" in node.attrs else None
    outputs = list(node.outputs)
    if sizes is not None and len(sizes) > 1:
        if sum(sizes) != xs[axis] or len(sizes) != len(outputs) or min(sizes) <= 0:
            raise self.fail(f"split sizes {sizes} do not divide axis {axis} of {list(xs)} into {len(outputs)} outputs")
        points = list(np.cumsum(sizes[:-1]).tolist())
        attr: Any = tuple(int(p) for p in points)
        parts = sizes
    else:
        if xs[axis] % len(outputs):
            raise self.fail(f"axis {axis} of {list(xs)} does not split into {len(outputs)} equal parts")
        attr = len(outputs)
        parts = [xs[axis] // len(outputs)] * len(outputs)
    if any(not o for o in outputs):
        raise self.fail("an unnamed output is not supported")
    shapes = []
    for size in parts:
        shape = list(xs)
        shape[axis] = size
        shapes.append(tuple(shape))
    self.emit("split", [x], shapes[0], self.dtypes[x], {"indices_or_sections": attr, "axis": axis},
              output=outputs[0], extra_outputs=tuple(zip(outputs[1:], shapes[1:])))


@_converter("Expand")
def _expand(self: _Importer, node: _Node) -> None:
    """TVM `Expand`: broadcast_to the shape (ONNX's rules: right-aligned, a 1 or -1 keeps the
    input's dimension); from a shape (ShapeExpr) that changes nothing, nothing."""
    x, shape_in = self.need(0), self.need(1)
    xs = list(self.shapes[x])
    new = [int(v) for v in self.constant(shape_in, "input 1 (shape)").reshape(-1)]
    if len(new) > len(xs):
        xs = [1] * (len(new) - len(xs)) + xs
    else:
        new = [1] * (len(xs) - len(new)) + new
    for i, (d, n) in enumerate(zip(xs, new)):
        if n == -1 or (n == 1 and d != 1):
            new[i] = d
        elif d != 1 and d != n:
            raise self.fail(f"cannot expand {list(self.shapes[x])} to {new}")
        elif n < 1:
            raise self.fail(f"target dimension {n} is invalid")
    target = self.single_output()
    if self.kinds.get(shape_in) == "shape" and new == xs and len(new) == len(self.shapes[x]):
        self.alias[target] = x
        return
    self.emit("broadcast_to", [x], tuple(new), self.dtypes[x], {"shape": tuple(new)}, output=target)


@_converter("ConstantOfShape")
def _constant_of_shape(self: _Importer, node: _Node) -> None:
    """TVM `ConstantOfShape`: a constant when the shape has one dimension, else broadcast_to of
    the value (a folded op); the shape must be a constant."""
    shape = [int(v) for v in self.constant(self.need(0), "input 0 (shape)").reshape(-1)]
    value_attr = node.attrs.get("value")
    value = (np.asarray(self.onnx.numpy_helper.to_array(value_attr)) if value_attr is not None
             else np.array(0, "float32"))
    dtype = str(value.dtype)
    if dtype not in DTYPES:
        raise self.fail(f"value is {dtype}; msdb's tensors are {', '.join(DTYPES)}")
    target = self.single_output()
    self.check_size(shape, f"output {target!r}")
    if len(shape) == 1:
        self.add_constant(target, np.full(shape, value.reshape(-1)[0] if value.size else 0, dtype))
        return
    fill = self.add_constant(self.fresh(f"{node.name}.value"), value)
    self.emit("broadcast_to", [fill], tuple(shape), dtype, {"shape": tuple(shape)}, output=target)


@_converter("Range")
def _range(self: _Importer, node: _Node) -> None:
    """TVM `Range`: computed here when start, limit and delta are constants (a computed bound
    is a dynamic shape)."""
    start, limit, delta = (self.constant(self.need(i), f"input {i}") for i in range(3))
    if any(v.size != 1 for v in (start, limit, delta)):
        raise self.fail("start, limit and delta must be scalars")
    dtype = str(start.dtype)
    if dtype not in DTYPES or dtype == "bool":
        raise self.fail(f"Range of {dtype} is not supported")
    s0, l0, d0 = (v.reshape(()).item() for v in (start, limit, delta))
    if d0 == 0:
        raise self.fail("delta is 0")
    if dtype == "float32":
        count = max(int(np.ceil((np.float64(l0) - np.float64(s0)) / np.float64(d0))), 0)
        out = np.arange(count, dtype=dtype) * np.float32(d0) + np.float32(s0)
    else:
        out = np.arange(s0, l0, d0, dtype=dtype)
    target = self.single_output()
    self.check_size(out.shape, f"output {target!r}")
    self.add_constant(target, out.astype(dtype))


def _unary(op: str, relax_op: str) -> None:
    @_converter(op)
    def convert(self: _Importer, node: _Node) -> None:
        x = self.need(0)
        if self.dtypes[x] != "float32":
            raise self.fail(f"input {x!r} is {self.dtypes[x]}; {op} computes on float32")
        self.emit(relax_op, [x], self.shapes[x], self.dtypes[x], output=self.single_output())

    convert.__doc__ = f"TVM `{op}`: {relax_op} (no folding at import)."


_unary("Sqrt", "sqrt")
_unary("Erf", "erf")
_unary("Tanh", "tanh")


@_converter("ReduceMean")
def _reduce_mean(self: _Importer, node: _Node) -> None:
    """TVM `ReduceMean`: mean(axes, keepdims); axes are the attribute before opset 18 and an
    input from 18 on (none: every axis, or nothing with noop_with_empty_axes)."""
    x = self.need(0)
    xs = self.shapes[x]
    axes = _axes_input(self, node, 1, "axes", 18)
    keepdims = bool(node.attrs.get("keepdims", 1))
    target = self.single_output()
    if not axes:
        if node.attrs.get("noop_with_empty_axes", 0) and self.opset >= 18:
            self.alias[target] = x
            return
        axes = None
    real = list(range(len(xs))) if axes is None else sorted(set(_axes(self, axes, len(xs))))
    shape = tuple(1 if d in real else n for d, n in enumerate(xs) if keepdims or d not in real)
    self.emit("mean", [x], shape, self.dtypes[x], {"axis": None if axes is None else tuple(axes), "keepdims": keepdims},
              output=target)


@_converter("LayerNormalization")
def _layer_norm(self: _Importer, node: _Node) -> None:
    """TVM `LayerNormalization._impl_v17`: nn.layer_norm over `axis` and the axes after it
    (as many as the scale has), bound at once (TVM returns a tuple); a missing bias is zeros.
    Only the first output (the mean and inverse deviation outputs are not computed)."""
    if self.opset < 17:
        raise self.fail(f"LayerNormalization is an opset-17 op; the model's opset is {self.opset}")
    if len([o for o in node.outputs if o]) != 1:
        raise self.fail("only the first output (Y) is supported; Mean and InvStdDev are not computed")
    if int(node.attrs.get("stash_type", 1)) != 1:
        raise self.fail(f"attribute 'stash_type' = {node.attrs['stash_type']} is not supported (only 1, float32)")
    x, scale, bias = self.need(0), self.need(1), self.inp(2)
    xs, ss = self.shapes[x], self.shapes[scale]
    axis = _axes(self, [int(node.attrs.get("axis", -1))], len(xs))[0]
    if tuple(xs[axis:]) != tuple(ss):
        raise self.fail(f"scale has shape {list(ss)}, expected {list(xs[axis:])} (the input's axes from {axis} on)")
    if bias is None:
        bias = self.add_constant(self.fresh(f"{node.name}.bias"), np.zeros(ss, dtype=self.dtypes[scale]))
    elif self.shapes[bias] != ss:
        raise self.fail(f"bias has shape {list(self.shapes[bias])}, the scale {list(ss)}")
    raw = int(node.attrs.get("axis", -1))
    axes = tuple([raw] + list(range(raw + 1, raw + len(ss))))
    self.emit("nn.layer_norm", [x, scale, bias], xs, self.dtypes[x],
              {"axes": axes, "epsilon": float(node.attrs.get("epsilon", 1e-5))},
              output=self.single_output(), eager=True)


@_converter("Gelu")
def _gelu(self: _Importer, node: _Node) -> None:
    """TVM `Gelu._impl_v20` (ONNX opset 20): nn.gelu, or nn.gelu_tanh for approximate="tanh"."""
    if self.opset < 20:
        raise self.fail(f"Gelu is an opset-20 op; the model's opset is {self.opset}")
    approximate = node.attrs.get("approximate", b"none")
    approximate = approximate.decode() if isinstance(approximate, bytes) else str(approximate)
    if approximate not in ("none", "tanh"):
        raise self.fail(f"attribute 'approximate' = {approximate!r} is not 'none' or 'tanh'")
    x = self.need(0)
    self.emit("nn.gelu" if approximate == "none" else "nn.gelu_tanh", [x], self.shapes[x], self.dtypes[x],
              output=self.single_output())


SUPPORTED_OPS = tuple(sorted(_CONVERTERS))
