"""One step of a trace: an instruction kind with its inputs, attributes and outputs.

The layouts follow TVM's `InstructionKind`s exactly (reference/tvm-metaschedule.md section 1),
so a recorded instruction serializes to the JSON TVM writes: e.g. Split has inputs
`[loop, *factors]` (each factor an ExprRV, an int or None), attrs `[preserve_unit_iters,
disable_predication]`, outputs the new loops.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, eq=False)
class Instruction:
    """`kind` is TVM's instruction name ("Split", "GetSBlock", ...). `inputs` hold RVs, None,
    ints, floats, strings or (nested) lists of them; `attrs` hold plain values; `outputs`
    hold the RVs the instruction defines. Identity equality: a trace's decisions are keyed by
    the instruction object."""

    kind: str
    inputs: tuple[Any, ...]
    attrs: tuple[Any, ...]
    outputs: tuple[Any, ...]
