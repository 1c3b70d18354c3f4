"""`MutateUnroll` (docs/architecture.md, "Tuner"): TVM's mutator that changes the sampled
unroll step of a root block.

The ParallelizeVectorizeUnroll rule annotates the root block with
`meta_schedule.unroll_explicit` (or `_implicit`) set to the value of a categorical sample; this
mutator picks one such annotation and redraws its sample among the other candidates, by their
probabilities."""

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

__all__ = ["MutateUnroll", "RedrawCategorical"]

UNROLL_KEYS = ("meta_schedule.unroll_explicit", "meta_schedule.unroll_implicit")


def _unroll_samples(trace: Trace) -> list[Instruction]:
    """For each unroll annotation, in trace order, the categorical sample that gives its
    value. TVM requires the value to be such a sample (and fails otherwise); an annotation with
    a literal value has nothing to mutate and is skipped."""
    samples: dict[ExprRV, Instruction] = {}
    out = []
    for inst in trace.insts:
        if inst.kind == "SampleCategorical" and inst.outputs:
            samples[inst.outputs[0]] = inst
        elif inst.kind == "Annotate" and inst.attrs and inst.attrs[0] in UNROLL_KEYS and len(inst.inputs) == 2:
            sample = samples.get(inst.inputs[1])
            if sample is not None:
                out.append(sample)
    return out


class RedrawCategorical(Mutator):
    """Redraw one categorical sample among those `candidates(trace)` names, to another of its
    choices: the shape of TVM's MutateUnroll and MutateThreadBinding, which differ only in which
    samples they may touch."""

    def candidates(self, trace: Trace) -> list[Instruction]:
        raise NotImplementedError

    def apply(self, trace: Trace, rng: random.Random) -> Trace | None:
        candidates = self.candidates(trace)
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


class MutateUnroll(RedrawCategorical):
    """Redraw the categorical sample behind one unroll annotation (TVM's `MutateUnroll`)."""

    def candidates(self, trace: Trace) -> list[Instruction]:
        return _unroll_samples(trace)
