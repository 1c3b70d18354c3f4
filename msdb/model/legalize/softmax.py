"""`nn.softmax` as topi.nn.softmax (python/tvm/topi/nn/softmax.py): T_softmax_maxelem,
T_softmax_exp, T_softmax_expsum, T_softmax_norm (annotated with the axis). msdb's
`te.softmax` already builds exactly that (docs/architecture.md, "Legalization")."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from msdb.ir import te
from msdb.model.graph import ModelError
from msdb.model.legalize.common import attr_int, expect_tensor
from msdb.model.legalize.registry import Legalized, Operand, register
from msdb.model.ops import OpPattern

__all__: list[str] = []


@register("nn.softmax", OpPattern.OUT_EWISE_FUSABLE, (1, 1))
def softmax(inputs: Sequence[Operand], attrs: Mapping[str, Any], constants: Mapping[str, np.ndarray]) -> Legalized:
    """`nn.softmax(x)`, attr `axis` (int, default -1)."""
    x = expect_tensor(inputs[0], "nn.softmax", 0)
    axis = attr_int(attrs, "axis", -1, "nn.softmax")
    if not -x.ndim <= axis < x.ndim:
        raise ModelError(f"nn.softmax: axis {axis} out of range for a {x.ndim}-d input")
    return te.softmax(x, axis % x.ndim)
