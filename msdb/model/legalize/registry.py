"""The table of legalizers: Relax op name -> (te builder, fusion pattern) (docs/architecture.md,
"Legalization").

Why a table: the ONNX frontend and fusion look ops up by TVM's Relax names (`nn.conv2d`,
`add`, ...), and each op family lives in its own module that registers itself here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from msdb.ir import te
from msdb.model.graph import ModelError
from msdb.model.ops import OpPattern

__all__ = ["Operand", "Legalized", "Legalizer", "OpRule", "register", "rule", "known_ops"]

#: An op input: a tensor, or a Python/NumPy scalar (an attribute TVM passes to topi directly,
#: such as Clip's opset-6 `min`).
Operand = te.Tensor | float | int
Legalized = te.Tensor | tuple[te.Tensor, ...]
Legalizer = Callable[[Sequence[Operand], Mapping[str, Any], Mapping[str, np.ndarray]], Legalized]
PatternRule = OpPattern | Callable[[Mapping[str, Any]], OpPattern]


@dataclass(frozen=True)
class OpRule:
    """How one Relax op legalizes and which fusion class (TVM's AnnotateTIROpPattern of the
    legalized PrimFunc) it falls in."""

    op: str
    build: Legalizer
    pattern: PatternRule
    arity: tuple[int, int]  # min, max number of inputs

    def op_pattern(self, attrs: Mapping[str, Any]) -> OpPattern:
        if isinstance(self.pattern, OpPattern):
            return self.pattern
        return self.pattern(attrs)


_RULES: dict[str, OpRule] = {}


def register(op: str, pattern: PatternRule, arity: tuple[int, int]) -> Callable[[Legalizer], Legalizer]:
    """Register a legalizer: `@register("add", OpPattern.ELEMWISE, (2, 2))` (min and max inputs)."""

    def wrap(build: Legalizer) -> Legalizer:
        if op in _RULES:
            raise RuntimeError(f"legalizer for {op!r} registered twice")
        _RULES[op] = OpRule(op, build, pattern, arity)
        return build

    return wrap


def rule(op: str) -> OpRule:
    """The rule for `op`, or a ModelError naming it and the ops msdb knows."""
    found = _RULES.get(op)
    if found is None:
        raise ModelError(f"op {op!r} has no legalization in msdb (known: {', '.join(sorted(_RULES))})")
    return found


def known_ops() -> tuple[str, ...]:
    return tuple(sorted(_RULES))
