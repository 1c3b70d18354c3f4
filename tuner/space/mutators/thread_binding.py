"""`MutateThreadBinding` (TVM's mutator, in `Mutator::DefaultCUDA`; docs/architecture.md,
"Tuner"): changes how many threads a block runs, by redrawing the categorical sample whose
value split a loop into (blocks, threads) — the split `[None, v]` whose inner loop is bound to
threadIdx.x (what AutoBind and CrossThreadReduction write). One bind is picked uniformly (a
sample feeding several binds is that much likelier), its sample redrawn among the other
candidates by their probabilities."""

from __future__ import annotations

from typing import TYPE_CHECKING

from msdb.schedule.rv import ExprRV
from msdb.tuner.space.mutators.unroll import RedrawCategorical

if TYPE_CHECKING:
    from msdb.schedule.instruction import Instruction
    from msdb.schedule.trace import Trace

__all__ = ["MutateThreadBinding"]


def _thread_samples(trace: Trace) -> list[Instruction]:
    """For each threadIdx.x bind of a loop made by a `[None, sample]` split, in trace order,
    the sampling instruction behind it (TVM's FindCandidates)."""
    samples: dict[ExprRV, Instruction] = {}
    split_inner: dict[object, Instruction] = {}
    out = []
    for inst in trace.insts:
        if inst.kind == "SampleCategorical" and inst.outputs:
            samples[inst.outputs[0]] = inst
        elif inst.kind == "Split" and len(inst.inputs) == 3 and inst.inputs[1] is None \
                and isinstance(inst.inputs[2], ExprRV) and inst.inputs[2] in samples:
            split_inner[inst.outputs[1]] = samples[inst.inputs[2]]
        elif inst.kind == "Bind" and inst.attrs[0] == "threadIdx.x" and inst.inputs[0] in split_inner:
            out.append(split_inner[inst.inputs[0]])
    return out


class MutateThreadBinding(RedrawCategorical):
    """Redraw the thread count of one sampled threadIdx.x split (TVM's
    `MutateThreadBinding`)."""

    def candidates(self, trace: Trace) -> list[Instruction]:
        return _thread_samples(trace)
