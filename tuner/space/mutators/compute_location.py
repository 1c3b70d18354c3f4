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
from msdb.tuner.space.mutators.base import Mutator, ReplayedStates

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

    reads_replays = True

    def apply(self, trace: Trace, rng: random.Random, replayed: ReplayedStates | None = None) -> Trace | None:
        candidates = self._candidates(trace, rng, replayed)
        if not candidates:
            return None
        inst, locations = candidates[sample_int(rng, 0, len(candidates))]
        location = locations[sample_int(rng, 0, len(locations))]
        return trace.with_decision(inst, location, remove_postproc=True)

    def _candidates(self, trace: Trace, rng: random.Random, replayed: ReplayedStates | None
                    ) -> list[tuple[Instruction, list[int]]]:
        """Each SampleComputeLocation with at least one legal location other than its own:
        read off the search's copies of the trace's replay when it kept one before each, else
        found by replaying the trace."""
        seed = rng.randrange(1, 2**31)  # drawn either way: the search's draws stay the same
        if replayed is not None:
            try:
                from_copies = _candidates_from_copies(trace, replayed)
            except ScheduleError:
                return []  # as the replay below answers when collecting fails
            if from_copies is not None:
                return from_copies
        sch = Schedule(task_module(self), seed=seed)
        found: list[tuple[Instruction, list[int]]] = []

        def collect(inst: Instruction, inputs: list[Any], attrs: tuple[Any, ...], decision: Any) -> Any:
            if inst.kind == "SampleComputeLocation":
                found.extend(_other_locations(sch, inst, inputs[0], decision))
            return decision

        try:
            trace.apply_to_schedule(sch, remove_postproc=True, decision_provider=collect)
        except ScheduleError:
            return []  # the trace no longer replays on this module: nothing to mutate
        return found


def _other_locations(sch: Schedule, inst: Instruction, block: Any, decision: Any) -> list[tuple[Instruction, list[int]]]:
    """[(inst, its legal locations but `decision`)] for a SampleComputeLocation of `block`
    about to run on `sch`; [] when it has no other."""
    indices, _ = compute_location_candidates(sch.state, sch.func_name, sch.get(block).name_hint)
    others = [i for i in indices if i != decision]
    return [(inst, others)] if others else []


def _candidates_from_copies(trace: Trace, replayed: ReplayedStates) -> list[tuple[Instruction, list[int]]] | None:
    """`MutateComputeLocation._candidates` from the copies of the trace's replay; None when a
    copy is missing."""
    found: list[tuple[Instruction, list[int]]] = []
    for index, inst in enumerate(trace.replayed_insts):
        if inst.kind == "SampleComputeLocation":
            before = replayed(index)
            if before is None:
                return None
            found.extend(_other_locations(before, inst, inst.inputs[0], trace.get_decision(inst)))
    return found
