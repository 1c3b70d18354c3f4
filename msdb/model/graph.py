"""The model graph: an ordered list of calls to PrimFuncs over named tensors (docs/architecture.md,
"Models").

Why so little: a model is what TVM's Relax `main` becomes after legalization and fusion (a
dataflow block of `R.call_tir(func, args, out_sinfo)`), and that is all compile and task
extraction need: which PrimFuncs, called how often, on which tensors. Frontends (ONNX, Relax-style
TVMScript) build a `Model`; `extract_tasks` and `msdb.tuner.compile` read it.

Calling convention (TVM's destination-passing style of `call_tir`): a call's PrimFunc takes its
`args` buffers first, then one buffer per entry of `outputs`, in order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from msdb.errors import MsdbError
from msdb.ir.expr import const_int
from msdb.ir.function import PrimFunc

__all__ = ["ModelError", "TensorInfo", "Call", "Model", "MAX_TENSOR_ELEMENTS", "oversized"]


#: The most elements one tensor of a model may have: 2^31 (8 GiB of float32, beyond any model msdb
#: compiles or tunes on one machine). Frontends check every tensor's shape as they read it, before
#: anything is allocated for it (an initializer's array, a weight, a buffer): a larger shape is a
#: mistake or a forged file, and would otherwise end far from its cause, in NumPy's MemoryError or
#: a task whose every measurement fails (docs/architecture.md, "Models").
MAX_TENSOR_ELEMENTS = 2 ** 31


class ModelError(MsdbError, ValueError):
    """A model that msdb cannot read or that is inconsistent; the message names the file, node and op."""


def oversized(shape: Iterable[int]) -> str | None:
    """Why a tensor of `shape` is refused (its shape and element count against
    `MAX_TENSOR_ELEMENTS`), or None when it is within the bound."""
    dims = [int(d) for d in shape]
    count = math.prod(dims)  # a Python int: no overflow, whatever the file claims
    if count <= MAX_TENSOR_ELEMENTS:
        return None
    return (f"shape {dims} has {count} elements, more than msdb's bound of 2^31 per tensor "
            "(msdb.model.graph.MAX_TENSOR_ELEMENTS)")


@dataclass(frozen=True)
class TensorInfo:
    """A named tensor of static shape: a model input, a parameter, or a call's output."""

    name: str
    shape: tuple[int, ...]
    dtype: str = "float32"


@dataclass(frozen=True)
class Call:
    """One `call_tir`: `function` (a key of `Model.functions`) on `args`, writing `outputs`.

    `args` name model inputs, parameters or earlier calls' outputs; `outputs` are fresh names.
    `node` is where the call came from (the ONNX node name(s) or the script line), for messages.
    """

    function: str
    args: tuple[str, ...]
    outputs: tuple[str, ...]
    node: str = ""


@dataclass
class Model:
    """An ordered graph of calls to PrimFuncs with named inputs, parameters (weights) and outputs.

    - `functions`: global name -> PrimFunc, named as TVM names them (`fused_conv2d_add_relu`,
      `conv2d1`, `max_pool2d`, ...); several calls may share one function.
    - `values`: every tensor the calls read or write (inputs, params, intermediates) by name.
    - `params`: the weights as NumPy arrays (each also in `values`).
    """

    name: str
    inputs: tuple[TensorInfo, ...]
    outputs: tuple[str, ...]
    functions: dict[str, PrimFunc]
    calls: list[Call]
    values: dict[str, TensorInfo]
    params: dict[str, Any] = field(default_factory=dict)
    source: str = ""

    def call_counts(self) -> Mapping[str, int]:
        """How many calls each function has (TVM's task weight before its anchor-block merge)."""
        counts: dict[str, int] = {name: 0 for name in self.functions}
        for call in self.calls:
            counts[call.function] += 1
        return counts

    def check(self) -> None:
        """Raise ModelError unless every call reads defined tensors, writes fresh ones, names a known
        function whose buffers match the tensors' shapes and dtypes, every output is produced, and
        no tensor exceeds `MAX_TENSOR_ELEMENTS`."""
        defined = {info.name for info in self.inputs} | set(self.params)
        for name in defined:
            if name not in self.values:
                raise ModelError(f"{self.source or self.name}: tensor {name!r} has no shape")
        for info in self.values.values():
            problem = oversized(info.shape)
            if problem is not None:  # frontends refuse it earlier; this covers models built in Python
                raise ModelError(f"{self.source or self.name}: tensor {info.name!r}: {problem}")
        for call in self.calls:
            where = f"{self.source or self.name}: {call.node or call.function}"
            func = self.functions.get(call.function)
            if func is None:
                raise ModelError(f"{where}: calls unknown function {call.function!r}")
            for arg in call.args:
                if arg not in defined:
                    raise ModelError(f"{where}: reads {arg!r} before it is defined")
            for out in call.outputs:
                if out in defined:
                    raise ModelError(f"{where}: writes {out!r} twice")
                if out not in self.values:
                    raise ModelError(f"{where}: output {out!r} has no shape")
            names = call.args + call.outputs
            buffers = func.buffers
            if len(buffers) != len(names):
                raise ModelError(f"{where}: {call.function} takes {len(buffers)} buffers, the call passes {len(names)}")
            for name, buf in zip(names, buffers):
                info = self.values[name]
                dims = [const_int(d) for d in buf.shape]
                shape = tuple(-1 if d is None else d for d in dims)  # -1: a symbolic dimension
                if shape != info.shape or str(buf.dtype) != info.dtype:
                    raise ModelError(f"{where}: {name!r} is {info.dtype}{list(info.shape)}, "
                                     f"{call.function} expects {buf.dtype}{list(shape)}")
            defined.update(call.outputs)
        for out in self.outputs:
            if out not in defined:
                raise ModelError(f"{self.source or self.name}: output {out!r} is never computed")
