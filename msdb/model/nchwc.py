"""msdb's `nchwc` mode: a CNN's activations kept in blocks of 16 channels (NCHW16c) from one conv
to the next (docs/architecture.md, "Models"), as onnxruntime's NCHWc transformer and TVM's
AlterOpLayout do for x86.

`block_channels(graph)` runs after `fold_batch_norm`. Walking the ops in order, it gives each
conv with constant weights (groups 1, or depthwise) an NCHW16c output (`nn.conv2d_nchwc`,
`nn.depthwise_conv2d_nchwc`: `msdb.model.legalize.nchwc`; a 3x3 stride-1 conv of blocked data
whose output splits into whole Winograd tiles (or, as at 7 x 7, into F(2, 3) tiles that compute
few extra outputs), float32, `nn.conv2d_winograd` of NCHW16c data:
`msdb.model.legalize.winograd`, 2-3x faster than the direct one on ResNet-50's, see
docs/architecture.md, "Models"), and keeps a blocked tensor blocked
through the ops that work per channel: the binary elementwise ops against another blocked tensor
of the same shape or a per-channel or scalar constant, relu, clip, max and average pooling, and
the mean over H and W (global average pooling). Any other reader gets the NCHW tensor back under
its own name (`nn.from_nchwc`, once per tensor), as do the graph's outputs, so the rest of the
graph is unchanged. A conv's data is blocked when it already is; the first conv of a region
reads NCHW data (a model's stem, 3 channels, would be mostly padding in blocks), and a
depthwise conv of NCHW data gets an `nn.to_nchwc` before it.

Channel counts that are not a multiple of 16 are padded: the padding channels of weights and
per-channel constants are 0 (1 for a divisor), so the padding lanes of every blocked tensor
stay finite, and the next conv's zero weights for them keep them out of every real channel; a
division by a blocked tensor (padding lanes 0) is done in NCHW.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from msdb.model.fuse import fold_constants, fresh_name
from msdb.model.ops import OpGraph, OpNode

__all__ = ["block_channels"]

#: Binary ops kept blocked, with the value a per-channel constant's padding channels take (the
#: one that keeps a padding lane finite).
_BINARY_PAD: dict[str, float] = {"add": 0.0, "subtract": 0.0, "multiply": 0.0, "maximum": 0.0, "minimum": 0.0,
                                 "divide": 1.0}

#: Unary ops kept blocked: each maps a finite lane to a finite lane.
_UNARY = ("nn.relu", "clip")

_POOLS = ("nn.max_pool2d", "nn.avg_pool2d")


def block_channels(graph: OpGraph) -> OpGraph:
    """`graph` with its convs' activations in NCHW16c (see the module docstring). Constant
    subgraphs (a conv bias's reshape) are folded first, so that the bias is a constant the pass
    can block."""
    folded, _ = fold_constants(graph)
    return _Blocker(folded).run()


class _Blocker:
    def __init__(self, graph: OpGraph) -> None:
        self.graph = graph
        self.nodes: list[OpNode] = []
        self.shapes = dict(graph.shapes)
        self.dtypes = dict(graph.dtypes)
        self.constants: dict[str, Any] = dict(graph.constants)  # every name here is in `shapes` too
        #: NCHW tensor name -> its NCHW16c tensor's name
        self.blocked: dict[str, str] = {}
        #: NCHW tensor names that exist as NCHW tensors (graph inputs, constants, ops' outputs)
        self.plain: set[str] = set(graph.inputs) | set(graph.constants)

    def run(self) -> OpGraph:
        for node in self.graph.nodes:
            if not self._rewrite(node):
                self._emit(dataclasses.replace(node, inputs=tuple(self._as_plain(i, node) for i in node.inputs)))
                self.plain.update(node.outputs)
        for name in self.graph.outputs:
            self._as_plain(name, None)
        used = {i for n in self.nodes for i in n.inputs} | set(self.graph.outputs)
        return dataclasses.replace(self.graph, nodes=self.nodes, shapes=self.shapes, dtypes=self.dtypes,
                                   constants={k: v for k, v in self.constants.items() if k in used})

    # ------------------------------------------------------------------------------ helpers

    def _emit(self, node: OpNode) -> None:
        self.nodes.append(node)

    def _constant(self, hint: str, array: np.ndarray) -> str:
        name = fresh_name(self.shapes, hint)
        self.constants[name] = array
        self.shapes[name], self.dtypes[name] = tuple(array.shape), str(array.dtype)
        return name

    def _new_blocked(self, plain_name: str, shape: tuple[int, ...]) -> str:
        """The name of `plain_name`'s NCHW16c tensor of `shape`, recorded."""
        name = fresh_name(self.shapes, f"{plain_name}.nchw16c")
        self.shapes[name], self.dtypes[name] = shape, self.dtypes[plain_name]
        self.blocked[plain_name] = name
        return name

    def _as_plain(self, name: str, node: OpNode | None) -> str:
        """`name` as an NCHW tensor: a blocked one is unblocked once, under its own name."""
        if name in self.plain or name not in self.blocked:
            return name
        channels = self.shapes[name][1]
        where = node.node if node is not None else "the graph's outputs"
        self._emit(OpNode("nn.from_nchwc", (self.blocked[name],), (name,), {"channels": channels}, where))
        self.plain.add(name)
        return name

    def _as_blocked(self, name: str, node: OpNode) -> str:
        """`name` as an NCHW16c tensor, through `nn.to_nchwc` when it is not one yet."""
        from msdb.model.legalize.nchwc import PACK_BLOCK, blocks_of

        if name in self.blocked:
            return self.blocked[name]
        n, c, h, w = self.shapes[name]
        out = self._new_blocked(name, (n, blocks_of(c), h, w, PACK_BLOCK))
        self._emit(OpNode("nn.to_nchwc", (name,), (out,), {}, node.node))
        return out

    def _blocked_output(self, node: OpNode, op: str, inputs: tuple[str, ...], attrs: dict[str, Any]) -> bool:
        """Emit `op` writing the NCHW16c form of `node`'s single output."""
        from msdb.model.legalize.nchwc import PACK_BLOCK, blocks_of

        (out,) = node.outputs
        n, c, h, w = self.shapes[out]
        self._emit(OpNode(op, inputs, (self._new_blocked(out, (n, blocks_of(c), h, w, PACK_BLOCK)),), attrs,
                          node.node))
        return True

    # ------------------------------------------------------------------------------ the ops

    def _rewrite(self, node: OpNode) -> bool:
        """Emit `node` in NCHW16c form and return True, or return False to keep it as it is."""
        if len(node.outputs) != 1 or len(self.shapes.get(node.outputs[0], ())) != 4:
            return False
        if node.op == "nn.conv2d":
            return self._conv(node)
        if node.op in _BINARY_PAD:
            return self._binary(node)
        if node.op in _UNARY or node.op in _POOLS:
            return self._per_channel(node)
        if node.op == "mean":
            return self._mean(node)
        return False

    def _conv(self, node: OpNode) -> bool:
        from msdb.model.fuse import conv_winograd_tile
        from msdb.model.legalize.conv import CONV_LAYOUTS, pack_weight
        from msdb.model.legalize.nchwc import (pack_blocked_weight, pack_depthwise_weight, pad_channels,
                                               pad_weight_channels)
        from msdb.model.legalize.winograd import winograd_weight

        data, weight_name = node.inputs if len(node.inputs) == 2 else (None, None)
        weight = self.constants.get(weight_name) if weight_name is not None else None
        if (data is None or weight is None or np.ndim(weight) != 4 or len(self.shapes[data]) != 4
                or (node.attrs.get("out_dtype") or self.dtypes[data]) != self.dtypes[data]
                or any(node.attrs.get(key, want) != want for key, want in CONV_LAYOUTS.items())):
            return False
        weight = np.asarray(weight)
        groups = int(node.attrs.get("groups", 1))
        channels = self.shapes[data][1]
        attrs = {k: v for k, v in node.attrs.items() if k not in CONV_LAYOUTS and k not in ("groups", "out_dtype")}
        if groups == 1:
            tile = (conv_winograd_tile(node, self.shapes, weight.shape, self.dtypes[data], partial=True)
                    if data in self.blocked else None)  # a region's first conv reads NCHW data: direct
            if tile is not None:
                name = self._constant(f"{weight_name}.winograd", winograd_weight(pad_weight_channels(weight), tile))
                return self._blocked_output(node, "nn.conv2d_winograd", (self.blocked[data], name), attrs)
            if data in self.blocked:
                packed, source = pack_blocked_weight(weight), self.blocked[data]
            else:
                packed, source = pack_weight(pad_channels(weight, 0)), data
            name = self._constant(f"{weight_name}.nchw16c", packed)
            return self._blocked_output(node, "nn.conv2d_nchwc", (source, name), attrs)
        if groups == channels == weight.shape[0] and weight.shape[1] == 1:
            source = self._as_blocked(data, node)
            name = self._constant(f"{weight_name}.nchw16c", pack_depthwise_weight(weight))
            return self._blocked_output(node, "nn.depthwise_conv2d_nchwc", (source, name), attrs)
        return False

    def _binary(self, node: OpNode) -> bool:
        (out,) = node.outputs
        out_shape = self.shapes[out]
        operands: list[str] = []
        any_blocked = False
        for position, name in enumerate(node.inputs):
            if node.op == "divide" and position == 1 and name in self.blocked:
                return False  # a blocked divisor's padding lanes are 0: 0 / 0 would leak NaN
            if name in self.blocked and self.shapes[name] == out_shape:
                operands.append(self.blocked[name])
                any_blocked = True
                continue
            value = self.constants.get(name)
            pad = _BINARY_PAD[node.op]
            if value is None or (node.op == "divide" and position == 0):
                return False
            blocked = _blocked_constant(np.asarray(value), out_shape, pad)
            if blocked is None:
                return False
            operands.append(name if blocked.ndim == 0 else self._constant(f"{name}.nchw16c", blocked))
        if not any_blocked:
            return False
        return self._blocked_output(node, node.op, tuple(operands), dict(node.attrs))

    def _per_channel(self, node: OpNode) -> bool:
        from msdb.model.legalize.nchwc import PACK_BLOCK

        data = node.inputs[0]
        if data not in self.blocked or any(i in self.blocked for i in node.inputs[1:]):
            return False
        attrs = dict(node.attrs)
        if node.op in _POOLS:
            if any(attrs.get(key, "NCHW") != "NCHW" for key in ("layout", "out_layout")):
                return False
            attrs["layout"] = attrs["out_layout"] = f"NCHW{PACK_BLOCK}c"
        return self._blocked_output(node, node.op, (self.blocked[data], *node.inputs[1:]), attrs)

    def _mean(self, node: OpNode) -> bool:
        axes = node.attrs.get("axis")
        if (node.inputs[0] not in self.blocked or axes is None or not node.attrs.get("keepdims", False)
                or sorted(int(a) % 4 for a in axes) != [2, 3]):
            return False
        return self._blocked_output(node, "mean", (self.blocked[node.inputs[0]],), {"axis": (2, 3), "keepdims": True})


def _blocked_constant(value: np.ndarray, shape: tuple[int, ...], pad: float) -> np.ndarray | None:
    """A constant operand of a blocked op of NCHW `shape`: a scalar or 0-d array as it is; one
    that broadcasts as [1, C or 1, 1, 1] as [1, C/16, 1, 1, 16] (padded with `pad`) or
    [1, 1, 1, 1, 1]; None for anything else (it would vary over H or W, or broadcast the
    blocked operand)."""
    from msdb.model.legalize.nchwc import PACK_BLOCK, blocks_of, pad_channels

    if value.ndim == 0:
        return value
    if value.ndim > 4:
        return None
    full = value.reshape((1,) * (4 - value.ndim) + value.shape)
    if full.shape[0] != 1 or full.shape[2:] != (1, 1) or full.shape[1] not in (1, shape[1]):
        return None
    if full.shape[1] == 1:
        return full.reshape(1, 1, 1, 1, 1)
    padded = pad_channels(full.reshape(shape[1]), 0, pad)
    return np.ascontiguousarray(padded.reshape(1, blocks_of(shape[1]), 1, 1, PACK_BLOCK))
