"""`MutateThreadBinding` (TVM's mutator, in `Mutator::DefaultCUDA`; docs/architecture.md,
"Tuner"): changes how many threads a block runs, by redrawing the categorical sample whose
value split a loop into (blocks, threads) — the split `[None, v]` whose inner loop is bound to
threadIdx.x (what AutoBind and CrossThreadReduction write). One bind is picked uniformly (a
sample feeding several binds is that much likelier), its sample redrawn among the other
candidates by their probabilities."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from msdb.schedule.rv import ExprRV
from msdb.schedule.sampling import sample_int
from msdb.tuner.space.mutators.base import Mutator
from msdb.tuner.space.mutators.tile_size import redraw_other

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


class MutateThreadBinding(Mutator):
    """Redraw the thread count of one sampled threadIdx.x split (TVM's
    `MutateThreadBinding`)."""

    def apply(self, trace: Trace, rng: random.Random) -> Trace | None:
        candidates = _thread_samples(trace)
        if not candidates:
            return None
        inst = candidates[sample_int(rng, 0, len(candidates))]
        decision = trace.get_decision(inst)
        if decision is None:
            return None
        new_decision = redraw_other(inst.attrs[1], int(decision), rng)
        if new_decision is None:
            return None
        return trace.with_decision(inst, new_decision, remove_postproc=True)
