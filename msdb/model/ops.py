"""The operator graph a frontend produces before legalization (docs/architecture.md, "Models").

Why a second graph: fusion decides which operators become one PrimFunc, and it needs the
operators (with TVM's Relax op names and attributes) before they are TensorIR. The ONNX frontend
emits `OpNode`s named as TVM 0.27's Relax ONNX frontend emits Relax ops (`nn.conv2d`, `add`,
`nn.batch_norm`, ...; docs/architecture.md, "Legalization"); `msdb.model.legalize` turns
each op into `msdb.ir.te` tensors exactly as TVM's LegalizeOps does, and `msdb.model.fuse`
groups them as FuseOps does.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

__all__ = ["OpPattern", "OpNode", "OpGraph", "FUSE_MODES"]


#: The fusion modes `msdb.model.lower.lower` knows (docs/architecture.md, "Models"): TVM's
#: "zero" pipeline, then msdb's own: "fold", "packed" and "winograd" each one step beyond the
#: last, and "nchwc" ("fold" with every activation between convs in channel blocks, and their
#: 3x3 stride-1 convs by Winograd's F(m, 3) where the tiles fit).
FUSE_MODES = ("tvm", "fold", "packed", "winograd", "nchwc")


class OpPattern(enum.IntEnum):
    """TVM's OpPatternKind (include/tvm/relax/op_attr_types.h), the fusion classes."""

    ELEMWISE = 0
    BROADCAST = 1
    INJECTIVE = 2
    COMM_REDUCE = 3
    OUT_EWISE_FUSABLE = 4
    TUPLE = 7
    OPAQUE = 8


@dataclass(frozen=True)
class OpNode:
    """One Relax-level operator: `op` (TVM's name, e.g. "nn.conv2d") reading `inputs` (tensor
    names: graph inputs, parameters, constants or earlier nodes' outputs) with `attrs`, writing
    `outputs`. `node` names the source node (ONNX node name and op type) for error messages."""

    op: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attrs: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)
    node: str = ""


@dataclass
class OpGraph:
    """Operators in topological order, with the static shape and dtype of every tensor.

    `constants` are NumPy arrays (weights and folded constants) by tensor name; `inputs` and
    `outputs` name the graph's runtime inputs and results."""

    name: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    nodes: list[OpNode]
    shapes: dict[str, tuple[int, ...]]
    dtypes: dict[str, str]
    constants: dict[str, Any] = field(default_factory=dict)
    source: str = ""
