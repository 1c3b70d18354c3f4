"""`MutateComputeLocation` (docs/architecture.md, "Tuner"): TVM's mutator that moves a block
to another of its legal compute locations.

Which locations are legal depends on the schedule at the moment the location was sampled, so
the trace is replayed on the task's module, and at every `SampleComputeLocation` the legal
locations are collected (msdb's `compute_location_candidates`, TVM's
`CollectComputeLocation`) minus the one the trace chose. One such instruction is picked
uniformly, then one of its other locations."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

from msdb.errors import ScheduleError
from msdb.schedule.prim_sampling import compute_location_candidates
from msdb.schedule.sampling import sample_int
from msdb.schedule.schedule import Schedule
from msdb.tuner.space.mutators.base import Mutator

if TYPE_CHECKING:
    from msdb.ir.function import IRModule
    from msdb.schedule.instruction import Instruction
    from msdb.schedule.trace import Trace

__all__ = ["MutateComputeLocation", "task_module"]


def task_module(mutator: Mutator) -> IRModule:
    """The module of the task the mutator was given (mutators that replay need it)."""
    context = mutator.context
    if context is None or context.mod is None:
        raise ValueError(f"{type(mutator).__name__} replays traces on the task's module: initialize it with a "
                         f"TuneContext that has mod (TuneContext(mod=..., space_generator=...))")
    return context.mod


class MutateComputeLocation(Mutator):
    """Change one sampled compute location to another legal one (TVM's
    `MutateComputeLocation`)."""

    def apply(self, trace: Trace, rng: random.Random) -> Trace | None:
        candidates = self._candidates(trace, rng)
        if not candidates:
            return None
        inst, locations = candidates[sample_int(rng, 0, len(candidates))]
        location = locations[sample_int(rng, 0, len(locations))]
        return trace.with_decision(inst, location, remove_postproc=True)

    def _candidates(self, trace: Trace, rng: random.Random) -> list[tuple[Instruction, list[int]]]:
        """Each SampleComputeLocation with at least one legal location other than its own."""
        sch = Schedule(task_module(self), seed=rng.randrange(1, 2**31))
        found: list[tuple[Instruction, list[int]]] = []

        def collect(inst: Instruction, inputs: list[Any], attrs: tuple[Any, ...], decision: Any) -> Any:
            if inst.kind == "SampleComputeLocation":
                block_name = sch.get(inputs[0]).name_hint
                indices, _ = compute_location_candidates(sch.state, sch.func_name, block_name)
                others = [i for i in indices if i != decision]
                if others:
                    found.append((inst, others))
            return decision

        try:
            trace.apply_to_schedule(sch, remove_postproc=True, decision_provider=collect)
        except ScheduleError:
            return []  # the trace no longer replays on this module: nothing to mutate
        return found
