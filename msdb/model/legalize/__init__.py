"""Legalization: each Relax-level op becomes `msdb.ir.te` tensors that lower to exactly the
TensorIR TVM 0.27's LegalizeOps produces for it (docs/architecture.md, "Legalization").

`legalize_op(op, inputs, attrs, constants=...)` builds the op's te graph on any te tensors
(placeholders or other ops' outputs, so a fused group is built by chaining calls);
`op_pattern(op, attrs)` is TVM's AnnotateTIROpPattern result for the op's legalized PrimFunc,
which FuseOps groups by, and `tir_op_pattern(func)` is that analysis itself.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

# Importing the op families registers their legalizers.
from msdb.model.legalize import (  # noqa: F401
    batch_norm, conv, elemwise, index, manipulate, matmul, nchwc, norm, pool, reduce, shape, softmax, winograd,
)
from msdb.model.graph import ModelError
from msdb.model.legalize.pattern import tir_op_pattern
from msdb.model.legalize.registry import Legalized, Operand, known_ops, rule
from msdb.model.ops import OpPattern

__all__ = ["legalize_op", "op_pattern", "tir_op_pattern", "known_ops", "Operand", "Legalized"]


def legalize_op(op: str, inputs: Sequence[Operand], attrs: Mapping[str, Any] | None = None, *,
                constants: Mapping[str, np.ndarray] | None = None) -> Legalized:
    """The te tensor(s) TVM's legalization of `op` computes from `inputs`.

    `constants` maps placeholder names to their values; only 0-d ones matter (a binary op
    folds them in as immediates, as TVM does). `nn.batch_norm` returns three tensors, every
    other op one. An unknown op or bad attributes raise `ModelError` naming the op."""
    found = rule(op)
    low, high = found.arity
    if not low <= len(inputs) <= high:
        want = str(low) if low == high else f"{low} or more"
        raise ModelError(f"{op}: takes {want} inputs, got {len(inputs)}")
    return found.build(inputs, dict(attrs or {}), constants or {})


def op_pattern(op: str, attrs: Mapping[str, Any] | None = None) -> OpPattern:
    """TVM's op pattern (fusion class) of `op`'s legalized PrimFunc, for the usual shapes;
    ModelError for an unknown op. One case depends on shapes: a binary op where neither
    operand has the output's shape ((3,1) + (1,4)) is BROADCAST, not ELEMWISE; for the exact
    answer lower the op and ask `tir_op_pattern(func)`, as TVM does."""
    return rule(op).op_pattern(dict(attrs or {}))
