"""An operator graph to a `Model`: legalize every op, fuse the groups into PrimFuncs, name them as
TVM 0.27 does.

Names, fused functions and patterns copy TVM's LegalizeOps, FuseOps and FuseTIR, so the functions
(and their hashes) are TVM's. See docs/architecture.md, "Legalization" and "Models".
"""

from __future__ import annotations

import logging
import re
from typing import Any, Literal

import numpy as np

from msdb.ir import expr as E
from msdb.ir import te
from msdb.ir.function import PrimFunc
from msdb.model.fuse import Partition, fold_batch_norm, fuse_tvm, pack_convs
from msdb.model.graph import Call, Model, ModelError, TensorInfo
from msdb.model.nchwc import block_channels
from msdb.model.ops import FUSE_MODES, OpGraph, OpNode, OpPattern

logger = logging.getLogger(__name__)

__all__ = ["lower", "FUNC_NAMES", "FUSE_MODES"]


#: TVM's PrimFunc name hint per Relax op (the `primfunc_name_hint` of LegalizeOps, else the TOPI
#: function's `__name__`; `isnan` and `where` only appear folded and never collide)
FUNC_NAMES: dict[str, str] = {
    "nn.conv2d": "conv2d", "nn.conv2d_packed": "conv2d_packed", "nn.conv2d_winograd": "conv2d_winograd",
    "nn.conv2d_nchwc": "conv2d_nchwc", "nn.depthwise_conv2d_nchwc": "depthwise_conv2d_nchwc",
    "nn.to_nchwc": "to_nchwc", "nn.from_nchwc": "from_nchwc",
    "nn.batch_norm": "batch_norm", "nn.relu": "relu", "add": "add", "subtract": "subtract", "multiply": "multiply", "divide": "divide", "maximum": "maximum",
    "minimum": "minimum", "nn.max_pool2d": "max_pool2d", "nn.avg_pool2d": "avg_pool2d", "mean": "mean",
    "sum": "sum", "reshape": "reshape", "flatten": "reshape", "permute_dims": "transpose",
    "concat": "concatenate", "matmul": "matmul", "nn.softmax": "softmax", "clip": "clip", "sqrt": "tir_sqrt", "tanh": "tir_tanh", "astype": "cast",
    "isnan": "tir_isnan", "where": "where",
}


def lower(graph: OpGraph, fuse: Literal["tvm", "fold", "packed", "winograd", "nchwc"] | str = "tvm") -> Model:
    """The `Model` of `graph` with TVM's legalization and the given fusion: "tvm" (the "zero"
    pipeline's FuseOps), "fold" (batch-norm folded into the convs, conv epilogues fused),
    "packed" (fold, with the convs' weights packed in output-channel blocks: `pack_convs`),
    "winograd" (packed, with 3x3 stride-1 convs computed by Winograd's F(m, 3)) or "nchwc"
    (fold, with the activations between convs in blocks of 16 channels, and their 3x3 stride-1
    convs by Winograd's F(m, 3) where the tiles fit: `msdb.model.nchwc.block_channels`)."""
    if fuse not in FUSE_MODES:
        raise ModelError(f"fuse={fuse!r} is not a fusion mode; use one of {', '.join(FUSE_MODES)}")
    source = fold_batch_norm(graph) if fuse != "tvm" else graph
    if fuse in ("packed", "winograd"):
        source = pack_convs(source, winograd=fuse == "winograd")
    elif fuse == "nchwc":
        source = block_channels(source)
    lowering = _Lowering(source)
    # AnnotateTIROpPattern: each op's class is TVM's analysis of its legalized PrimFunc
    part = fuse_tvm(source, pattern_of=lowering.pattern)
    return lowering.run(part)


# =============================================================================================
# Names (TVM's NameSupply without underscores) and structural deduplication
# =============================================================================================


class _Functions:
    """Global functions by name, deduplicated structurally within a name hint."""

    def __init__(self) -> None:
        self.taken: dict[str, int] = {}
        self.by_hint: dict[str, list[tuple[str, str, PrimFunc]]] = {}  # hint -> [(hash, name, func)]
        self.functions: dict[str, PrimFunc] = {}

    def fresh(self, hint: str) -> str:
        """TVM's NameSupply::FreshName(hint, add_prefix=False, add_underscore=False)."""
        hint = hint.replace(".", "_")
        if hint not in self.taken:
            self.taken[hint] = 0
            return hint
        while True:
            self.taken[hint] += 1
            candidate = f"{hint}{self.taken[hint]}"
            if candidate not in self.taken:
                self.taken[candidate] = 0
                return candidate

    def add(self, hint: str, func: PrimFunc, keep: bool = True) -> str:
        """The name of `func`: an existing structurally equal function of the same hint, else a
        fresh name. `keep` False names the function without keeping it (a folded op)."""
        from msdb.hashing import structural_equal, structural_hash

        key = structural_hash(func)
        for known_key, name, known in self.by_hint.get(hint, []):
            if known_key == key and structural_equal(known, func):
                if keep and name not in self.functions:
                    self.functions[name] = known
                return name
        name = self.fresh(hint)
        self.by_hint.setdefault(hint, []).append((key, name, func))
        if keep:
            self.functions[name] = func
        return name


# =============================================================================================
# The lowering
# =============================================================================================


class _OpFunc:
    """One op's legalized PrimFunc: `params` are the op inputs it takes as buffers (in order;
    a 0-d initializer folded in as an immediate is not one), `outputs` the op outputs."""

    def __init__(self, func: PrimFunc, params: list[str], outputs: list[str]) -> None:
        self.func = func
        self.params = params
        self.outputs = outputs


class _Lowering:
    def __init__(self, source: OpGraph) -> None:
        self.source = source
        self.where = source.source or source.name
        self.functions = _Functions()
        self.op_funcs: dict[int, _OpFunc] = {}
        self.op_names: dict[int, str] = {}

    def run(self, part: Partition) -> Model:
        from msdb.model.legalize import known_ops

        graph = part.graph
        legal = set(known_ops())
        folded = {id(n) for n in part.folded}
        # LegalizeOps: every op, in binding order, names its function (folded ones included).
        for node in self.source.nodes:
            if node.op not in legal and id(node) in folded:
                continue  # e.g. isnan/where of a Clip bound: folded, never a function
            hint = FUNC_NAMES.get(node.op, node.op.split(".")[-1])
            self.op_names[id(node)] = self.functions.add(hint, self.op_func(node).func, keep=False)
        calls: list[Call] = []
        values: dict[str, TensorInfo] = {}
        for group, fused in zip(part.groups, part.fused):
            if fused or len(group) > 1:  # a lone multi-output op (split) is called as it is
                name, args, outputs = self.fuse(group, graph)
            else:
                node = group[0]
                op_func = self.op_func(node)
                name = self.op_names[id(node)]
                # AnnotateTIROpPattern's attribute stays on a function FuseOps leaves alone
                # (FuseTIR builds fused ones without it); it is part of the structural hash.
                self.functions.functions.setdefault(name, op_func.func.with_attrs(op_pattern=int(self.pattern(node))))
                args, outputs = op_func.params, op_func.outputs
            where = ", ".join(dict.fromkeys(n.node for n in group if n.node)) or name
            calls.append(Call(name, tuple(args), tuple(outputs), where))
            for t in (*args, *outputs):
                values[t] = TensorInfo(t, graph.shapes[t], graph.dtypes[t])
        inputs = tuple(TensorInfo(n, graph.shapes[n], graph.dtypes[n]) for n in graph.inputs)
        for info in inputs:
            values[info.name] = info
        params = {t: np.asarray(graph.constants[t]) for c in calls for t in c.args if t in graph.constants}
        for out in graph.outputs:
            if out in graph.constants or out in graph.inputs:
                raise ModelError(f"{self.where}: output {out!r} is a constant or an input, not computed by any op")
        ordered = {name: self.functions.functions[name] for name in dict.fromkeys(c.function for c in calls)}
        model = Model(graph.name, inputs, tuple(graph.outputs), ordered, calls, values, params, self.where)
        model.check()
        return model

    # ---- one op -----------------------------------------------------------------------------

    def pattern(self, node: OpNode) -> OpPattern:
        """TVM's AnnotateTIROpPattern of the op's legalized PrimFunc."""
        from msdb.model.legalize import tir_op_pattern

        return tir_op_pattern(self.op_func(node).func)

    def op_func(self, node: OpNode) -> _OpFunc:
        """The op's own PrimFunc, as LegalizeOps' `call_te` creates it (built once per op)."""
        found = self.op_funcs.get(id(node))
        if found is None:
            placeholders, outs, params = self.legalize(node, {})
            func = te.create_prim_func([placeholders[i] for i in params] + outs)
            found = self.op_funcs[id(node)] = _OpFunc(func, [node.inputs[i] for i in params], list(node.outputs))
        return found

    def legalize(self, node: OpNode, given: dict[str, te.Tensor]) -> tuple[list[te.Tensor], list[te.Tensor], list[int]]:
        """`legalize_op` on the op's inputs: a tensor from `given` (an earlier op of the group)
        or a placeholder; initializers are passed as constants. Returns the input tensors, the
        outputs, and the positions of the inputs the outputs read (the function's parameters)."""
        from msdb.model.legalize import legalize_op

        tensors: list[te.Tensor] = []
        constants: dict[str, np.ndarray] = {}
        names = te.NameSupply()
        for tensor in node.inputs:
            if tensor in given:
                tensors.append(given[tensor])
                continue
            ph = te.placeholder(_shape(self.source.shapes[tensor]), self.source.dtypes[tensor],
                                names.fresh(_identifier(tensor)))
            tensors.append(ph)
            if tensor in self.source.constants:
                constants[ph.name] = np.asarray(self.source.constants[tensor])
        try:
            result = legalize_op(node.op, tensors, node.attrs, constants=constants)
        except ModelError as err:
            raise ModelError(f"{self.where}: {node.node or node.op}: {err}") from None
        outs = list(result) if isinstance(result, tuple) else [result]
        if len(outs) != len(node.outputs):
            raise ModelError(f"{self.where}: {node.node}: {node.op} gives {len(outs)} outputs, the graph expects "
                             f"{len(node.outputs)}")
        reachable = _reads(outs)
        return tensors, outs, [i for i, t in enumerate(tensors) if id(t.op) in reachable]

    # ---- one group (FuseTIR) ---------------------------------------------------------------

    def fuse(self, group: list[OpNode], graph: OpGraph) -> tuple[str, list[str], list[str]]:
        """The group's function (`te.create_fused_prim_func`, FuseTIR's construction), its name,
        its arguments (external inputs in order of first use) and its outputs (graph outputs,
        then tensors other groups read, in the order they are read)."""
        produced = {out for node in group for out in node.outputs}
        members = {id(n) for n in group}
        outputs: list[str] = [t for node in group for t in node.outputs if t in graph.outputs]
        for node in graph.nodes:
            if id(node) not in members:
                outputs.extend(t for t in node.inputs if t in produced and t not in outputs)
        if not outputs:
            raise ModelError(f"{self.where}: {group[0].node}: a fused group computes nothing the model uses")
        tensors: dict[str, te.Tensor] = {}
        params: list[str] = []
        stages: list[list[te.Tensor]] = []
        for node in group:
            inputs, outs, used = self.legalize(node, tensors)
            for i in used:
                name = node.inputs[i]
                if name not in produced and name not in params:
                    params.append(name)
                    tensors[name] = inputs[i]
            tensors.update(zip(node.outputs, outs))
            stages.append(outs)
        fused = te.create_fused_prim_func([tensors[t] for t in params + outputs], stages)
        hint = "fused_" + "_".join(self.op_names[id(n)] for n in group)
        return self.functions.add(hint, fused), params, outputs


def _identifier(name: str) -> str:
    """A tensor name usable as a TVMScript buffer name (ONNX names hold dots and slashes)."""
    ident = re.sub(r"\W", "_", name)
    return ident if ident and not ident[0].isdigit() else f"t_{ident}"


def _shape(shape: tuple[int, ...]) -> tuple[E.PrimExpr, ...]:
    return tuple(E.make_const(int(d), "int64") for d in shape)


def _reads(outputs: list[te.Tensor]) -> set[int]:
    """ids of the placeholder ops the outputs read, transitively."""
    found: set[int] = set()
    seen: set[int] = set()
    stack: list[Any] = list(outputs)
    while stack:
        t = stack.pop()
        if id(t.op) in seen:
            continue
        seen.add(id(t.op))
        if isinstance(t.op, te.ComputeOp):
            stack.extend(t.op.inputs)
        else:
            found.add(id(t.op))
    return found
