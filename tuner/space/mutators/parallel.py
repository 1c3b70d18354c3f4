"""`MutateParallel` (docs/architecture.md, "Tuner"): TVM's mutator that changes the parallel
extent a root block is annotated with.

The post-processor fuses, for each child block of the root, the outer spatial loops until their
product passes `meta_schedule.parallel`; many values give the same fusion. So this mutator
replays the trace on the task's module, lists for each child block the products of its outer
constant spatial loops (TVM's `AnalyzeParallel`), turns every product within
`num_cores * max_jobs_per_core` into a plan (how many loops each block fuses), drops the plan of
the current value and rewrites the annotation to the value of another plan, drawn uniformly.
Unlike the other mutators it changes an instruction's input, not a decision, so it rebuilds
the instruction list itself (post-processing dropped), as TVM does."""

from __future__ import annotations

import bisect
import dataclasses
import random
from typing import TYPE_CHECKING, Sequence

from msdb.errors import ScheduleError
from msdb.ir import expr as E
from msdb.ir import stmt as S
from msdb.ir.functor import free_vars
from msdb.schedule.analysis import child_block_realizes, loops_above
from msdb.schedule.sampling import sample_int
from msdb.schedule.schedule import Schedule
from msdb.schedule.trace import Trace
from msdb.tuner.space.mutators.base import Mutator, ReplayedStates
from msdb.tuner.space.mutators.compute_location import task_module

if TYPE_CHECKING:
    from msdb.schedule.instruction import Instruction
    from msdb.schedule.state import ScheduleState

__all__ = ["MutateParallel", "parallel_prefix_products", "num_fused_loops"]

PARALLEL = "meta_schedule.parallel"


def parallel_prefix_products(state: ScheduleState, func_name: str, block_name: str, limit: int) -> list[list[int]]:
    """For each child block of the scope block `block_name` that has outer constant spatial
    loops: the running products of their extents, outermost first, stopping at the first that
    reaches `limit` (TVM's `AnalyzeParallel`). A loop is spatial when no child block of the
    scope binds a non-spatial iter var to an expression using it."""
    realizes = child_block_realizes(state.block(func_name, block_name).body)
    non_spatial: set[E.Var] = set()
    for realize in realizes:
        for iv, value in zip(realize.block.iter_vars, realize.iter_values):
            if iv.iter_type != S.IterType.DATA_PAR:
                non_spatial |= free_vars(value)
    results: list[list[int]] = []
    for realize in realizes:
        extents: list[int] = []
        for loop in loops_above(state, func_name, realize):
            if not isinstance(loop.extent, E.IntImm) or loop.loop_var in non_spatial:
                break
            extents.append(loop.extent.value)
        if not extents:
            continue
        products: list[int] = []
        product = 1
        for extent in extents:
            product *= extent
            products.append(product)
            if product >= limit:
                break
        results.append(products)
    return results


def num_fused_loops(products: Sequence[Sequence[int]], limit: int) -> tuple[int, ...]:
    """How many outer loops of each block a parallel extent of `limit` fuses (TVM's
    `GetNumFusedLoops`): the loops whose running product stays within it, plus the one that
    passes it, if any."""
    plan = []
    for prods in products:
        i = bisect.bisect_right(prods, limit)
        if i > 0 and prods[i - 1] == limit:
            i -= 1
        if i != len(prods):
            i += 1
        plan.append(i)
    return tuple(plan)


class MutateParallel(Mutator):
    """Rewrite one `meta_schedule.parallel` annotation to a value that fuses a different number
    of loops (TVM's `MutateParallel`); `max_jobs_per_core` times the target's cores bounds the
    extents considered."""

    def __init__(self, max_jobs_per_core: int = 16) -> None:
        self.max_jobs_per_core = max_jobs_per_core

    def __repr__(self) -> str:
        return f"MutateParallel(max_jobs_per_core={self.max_jobs_per_core})"

    @property
    def max_parallel_extent(self) -> int:
        """`num-cores` of the task's target (else its threads) times `max_jobs_per_core`."""
        if self.context is None:
            raise ValueError("MutateParallel needs a TuneContext (its target's num-cores bounds the parallel extent)")
        return self.context.num_cores() * self.max_jobs_per_core

    reads_replays = True

    def apply(self, trace: Trace, rng: random.Random, replayed: ReplayedStates | None = None) -> Trace | None:
        """With `replayed`, the schedule the trace's replay left is the search's copy of it
        (when kept) instead of a replay."""
        normalized = trace.normalized()  # a GetBlock of an older TVM names the block as GetSBlock does
        found = _pick_annotation(normalized, rng)
        if found is None:
            return None
        annotate, block_name, func_name = found
        current = annotate.inputs[1]
        max_extent = self.max_parallel_extent
        seed = rng.randrange(1, 2**31)  # drawn either way: the search's draws stay the same
        replayed_to_end = replayed(len(trace.replayed_insts)) if replayed is not None and normalized is trace else None
        try:
            if replayed_to_end is None:
                replayed_to_end = Schedule(task_module(self), seed=seed)
                normalized.apply_to_schedule(replayed_to_end, remove_postproc=True)
            products = parallel_prefix_products(replayed_to_end.state, func_name, block_name, max_extent)
        except ScheduleError:
            return None  # the trace no longer replays on this module: nothing to mutate
        plans: dict[tuple[int, ...], int] = {}
        seen: set[int] = set()
        for prods in products:
            for limit in prods:
                if limit <= max_extent and limit not in seen:
                    seen.add(limit)
                    plans[num_fused_loops(products, limit)] = limit
        if isinstance(current, int):  # TVM requires a literal value here
            plans.pop(num_fused_loops(products, current), None)
        if not plans:
            return None
        ordered = sorted(plans)  # TVM keeps the plans in a std::map: lexicographic order
        limit = plans[ordered[sample_int(rng, 0, len(ordered))]]
        return _with_annotation_value(normalized, annotate, limit)


def _pick_annotation(trace: Trace, rng: random.Random) -> tuple[Instruction, str, str] | None:
    """A `meta_schedule.parallel` annotation drawn uniformly, with the name and function of the
    block it annotates (read off the GetSBlock that defined its BlockRV)."""
    getters: dict[object, Instruction] = {}
    annotations: list[Instruction] = []
    for inst in trace.insts:
        if inst.kind == "Annotate" and inst.attrs and inst.attrs[0] == PARALLEL and len(inst.inputs) == 2:
            annotations.append(inst)
        if inst.kind == "GetSBlock" and inst.outputs:
            getters[inst.outputs[0]] = inst
    if not annotations:
        return None
    annotate = annotations[sample_int(rng, 0, len(annotations))]
    getter = getters.get(annotate.inputs[0])
    if getter is None:
        return None  # the root block was not named by get_block: TVM fails here too
    return annotate, str(getter.attrs[0]), str(getter.attrs[1])


def _with_annotation_value(trace: Trace, annotate: Instruction, value: int) -> Trace:
    """The trace up to post-processing with `annotate`'s value replaced by `value`."""
    insts = [dataclasses.replace(inst, inputs=(inst.inputs[0], value)) if inst is annotate else inst
             for inst in trace.replayed_insts]
    decisions = trace.decisions
    return Trace(insts, {inst: decisions[inst] for inst in insts if inst in decisions})
