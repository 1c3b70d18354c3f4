"""Re-fitting a record's trace to a relative workload: the same operator at other shapes, batch
size or index dtype.

`refit_trace(trace, mod)` replays the trace on the new workload and re-fits its sampling
decisions as they replay (`refit_tile` for tile sizes). It sits below the database because a view
(`TransferDatabase`) calls it; what only the tuner has (post-processors, its anchor-trace
procedure) comes in as the optional callables `postprocess` and `anchor`. A trace that does not
fit is data: `RefitResult.failure`. See docs/architecture.md, "Re-fitting a trace to a relative".
"""

from __future__ import annotations

import logging
import math
import random
from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Protocol, Sequence

from msdb.errors import MsdbError
from msdb.ir import expr as E
from msdb.ir.function import IRModule, PrimFunc
from msdb.schedule import prim_sampling
from msdb.schedule.anchor_replay import (AnchorTraceError, block_names, check_unscheduled, is_root, replay_anchor_trace,
                                         rvs_in, traced_block_names)
from msdb.schedule.instruction import Instruction
from msdb.schedule.instructions import kind_for
from msdb.schedule.rv import RV
from msdb.schedule.schedule import Schedule
from msdb.schedule.trace import DecisionProvider, Trace, TraceError

__all__ = ["refit_trace", "refit_tile", "RefitResult", "RefitFailure", "DecisionChange", "AnchorProcedure",
           "Postprocess"]

logger = logging.getLogger(__name__)

#: Re-runs post-processing on a schedule that has entered it; False rejects the schedule.
Postprocess = Callable[[Schedule], bool]


class AnchorProcedure(Protocol):
    """TVM's whole anchor-trace procedure, bound to a target (the tuner's
    `schedule_using_anchor_trace`): schedules `sch` with `trace`, asking `decision_provider`
    for each decision; raises `ScheduleError` when the trace does not fit."""

    def __call__(self, sch: Schedule, trace: Trace, *, decision_provider: DecisionProvider | None = None) -> None:
        ...


@dataclass(frozen=True)
class DecisionChange:
    """One sampling decision as recorded and as re-fitted to the new workload."""

    index: int  #: the sampling instruction's index in the given trace
    kind: str
    recorded: Any
    refitted: Any

    def __str__(self) -> str:
        return f"instruction {self.index} ({self.kind}) decision {self.recorded!r} -> {self.refitted!r}"


@dataclass(frozen=True)
class RefitFailure:
    """Why a trace does not fit the workload: the instruction that failed (None when no one
    instruction is to blame, e.g. a post-processor's refusal), the decisions feeding it, and
    the reason."""

    index: int | None
    kind: str | None
    reason: str
    decisions: tuple[DecisionChange, ...] = ()

    def __str__(self) -> str:
        where = f"instruction {self.index} ({self.kind})" if self.index is not None else "post-processing"
        fed = "".join(f"; {change}" for change in self.decisions)
        return f"{where}: {self.reason}{fed}"


@dataclass(frozen=True)
class RefitResult:
    """What `refit_trace` gives: the re-fitted schedule (its `trace` carries the new decisions)
    or the failure, and how the re-fit went."""

    schedule: Schedule | None
    failure: RefitFailure | None = None
    #: Every sampling decision the re-fit changed, in trace order.
    changes: tuple[DecisionChange, ...] = ()
    #: "replay" (the trace's blocks are the workload's) or "anchor" (the anchor-trace procedure).
    route: Literal["replay", "anchor"] = "replay"
    #: "rerun" (`postprocess` ran), "replayed" (the recorded post-processing replayed) or "none"
    #: (the trace has none and no `postprocess` was given).
    postproc: Literal["rerun", "replayed", "none"] = "none"
    #: A block of the workload the trace left as it was (the generic anchor route only).
    unscheduled: tuple[str, ...] = field(default=())

    @property
    def ok(self) -> bool:
        return self.schedule is not None

    @property
    def mod(self) -> IRModule:
        """The re-fitted module; raises `MsdbError` with the reason when the re-fit failed."""
        return self._schedule().mod

    @property
    def trace(self) -> Trace:
        """The re-fitted trace (what the new workload's record would store)."""
        return self._schedule().trace

    def _schedule(self) -> Schedule:
        if self.schedule is None:
            raise MsdbError(f"the trace does not fit the workload: {self.failure}")
        return self.schedule


def refit_tile(decision: Sequence[int], extent: int) -> list[int]:
    """Re-fit perfect-tile factors (outermost first) to a loop of `extent`.

    The rule: walk the factors from the innermost to the second outermost, keeping of each the
    largest divisor of what is left of the extent that is not larger than the factor (the whole
    factor when it divides); then the outermost factor takes the quotient that remains. Inner
    factors shape the vector and cache tiles the record was tuned for, so they are kept as far
    as the new extent allows, a factor that no longer divides shrinks only as far as it must
    (a 7-wide tile of a 7x7 image becomes 5-wide on a 5x5 one, not 1-wide), and what no longer
    fits moves outward, to the outermost loop. The result always multiplies to `extent`, no
    factor grows except the outermost (so a `max_innermost_factor` still holds), and a decision
    that already fits is kept as is.

    Why not `gcd(factor, left)`: that keeps only the part of a factor that divides, and a
    resolution change (7 -> 5, 14 -> 10) has none, so a tuned register or cache tile over the
    image collapsed to 1 and the whole image moved to the outermost loop (ResNet-18's 512-channel
    3x3 conv at 160x160 re-fitted from 224x224 that way ran 5.6x slower than its default
    schedule; docs/benchmarks.md, "Records that travel").

    Examples (`decision` of the old extent -> new extent):
        [7, 2, 4, 2] (112) -> 56: [7, 1, 4, 2] (2 and 4 divide; of 7 left, 1 is the largest
            divisor not above 2; 7 remains)
        [7, 4, 2, 2] (112) -> 224: [14, 4, 2, 2]
        [1, 1, 1, 64] (64) -> 32: [1, 1, 1, 32]
        [1, 14, 4, 2] (112) -> 8: [1, 1, 4, 2]
        [1, 1, 7, 1] (7) -> 5: [1, 1, 5, 1]
        [1, 7] (7) -> 3: [1, 3]

    TVM's repair of a replayed decision that does not divide (`sampling.repair_perfect_tile`)
    differs: it gives the first factor that does not divide all that is left, so [7, 2, 4, 2]
    re-fitted to 56 becomes [1, 7, 4, 2] there.
    """
    if extent < 1:
        raise ValueError(f"cannot re-fit a tile to extent {extent}")
    result = [int(v) for v in decision]
    if not result:
        raise ValueError("cannot re-fit an empty tile decision")
    left = extent
    for i in range(len(result) - 1, 0, -1):
        kept = _largest_divisor_at_most(left, result[i])
        result[i] = kept
        left //= kept
    result[0] = left
    return result


def _largest_divisor_at_most(n: int, bound: int) -> int:
    """The largest divisor of `n` (>= 1) that is at most `bound` (1 when `bound` < 1)."""
    if bound >= n:
        return n
    best = 1
    for small in range(1, math.isqrt(n) + 1):
        if n % small == 0:
            if small <= bound:
                best = max(best, small)
            if n // small <= bound:
                best = max(best, n // small)
    return best


def refit_trace(trace: Trace, mod: IRModule | PrimFunc, *, func_name: str | None = None,
                postprocess: Postprocess | None = None, anchor: AnchorProcedure | None = None,
                seed: int = 0) -> RefitResult:
    """Replay `trace` (a record's, tuned on a relative of `mod`) on `mod` with its decisions
    re-fitted to `mod`'s extents, and post-process the result (module docstring: the
    decision rules, the route, post-processing, failures).

    `func_name`: the function to schedule (default: "main", or the only one). Deterministic:
    the same trace and workload give the same schedule and trace. Never raises for a trace
    that does not fit: the result's `failure` says why.
    """
    sch = Schedule(mod, seed=seed)
    if func_name is not None:
        sch.work_on(func_name)
    positions = {id(inst): index for index, inst in enumerate(trace.insts)}
    body = _before_postproc(trace) if postprocess is not None else trace
    refitter = _Refitter(sch, positions)
    route: Literal["replay", "anchor"] = "replay" if _same_blocks(sch, body) else "anchor"
    unscheduled: list[str] = []
    try:
        if route == "replay":
            body.apply_to_schedule(sch, decision_provider=refitter)
        elif anchor is not None:
            anchor(sch, body, decision_provider=refitter)
        else:
            unscheduled = replay_anchor_trace(sch, body, decision_provider=refitter)
            check_unscheduled(unscheduled)
    except MsdbError as exc:
        return RefitResult(None, refitter.failure(trace, exc), tuple(refitter.changes), route)
    postproc: Literal["rerun", "replayed", "none"] = "none"
    if postprocess is not None:
        postproc = "rerun"
        sch.enter_postproc()
        try:
            ok = postprocess(sch)
        except MsdbError as exc:
            return RefitResult(None, RefitFailure(None, None, f"post-processing failed: {exc}"),
                               tuple(refitter.changes), route, postproc)
        if not ok:
            return RefitResult(None, RefitFailure(None, None, "a post-processor rejected the re-fitted schedule"),
                               tuple(refitter.changes), route, postproc)
    elif any(kind_for(inst).postproc for inst in body.insts):
        postproc = "replayed"
    for change in refitter.changes:
        logger.debug("re-fit: %s", change)
    return RefitResult(sch, None, tuple(refitter.changes), route, postproc, tuple(unscheduled))


# -------------------------------------------------------------------------------- helpers


def _before_postproc(trace: Trace) -> Trace:
    """The trace's instructions before `EnterPostproc`, with their decisions (the same
    Instruction objects, so indices into the given trace stay known)."""
    insts: list[Instruction] = []
    for inst in trace.insts:
        if kind_for(inst).postproc:
            break
        insts.append(inst)
    return Trace(insts, {inst: trace.get_decision(inst) for inst in insts if trace.get_decision(inst) is not None})


def _same_blocks(sch: Schedule, trace: Trace) -> bool:
    """Whether the trace schedules the function's blocks: it looks every one of them up by
    name (root aside), and before post-processing looks up no other (post-processing may look
    up a block the trace created, such as a cache stage). Then it replays as is; else it needs
    the anchor-trace procedure."""
    names = block_names(sch)
    present = {name for name in names if not is_root(sch, name)}
    return present <= traced_block_names(trace) and traced_block_names(_before_postproc(trace)) <= set(names)


def _no_rng() -> random.Random:
    raise AssertionError("a replayed decision never draws")  # the decision is always given here


class _Refitter:
    """The decision provider of one re-fit: re-fits each sampling decision as it replays
    (module docstring), remembers what it gave, and which instruction it saw last (the one a
    replay error is about)."""

    def __init__(self, sch: Schedule, positions: dict[int, int]) -> None:
        self.sch = sch
        self.positions = positions
        self.changes: list[DecisionChange] = []
        self.given: dict[int, DecisionChange] = {}  # id(instruction) -> its decision, recorded and given
        self.last: Instruction | None = None

    def __call__(self, inst: Instruction, inputs: list[Any], attrs: tuple[Any, ...], decision: Any) -> Any:
        self.last = inst
        if decision is None:
            return None
        name = kind_for(inst).name
        new = decision
        if name == "SamplePerfectTile":
            extent = E.const_int(self.sch.get(inputs[0]).extent)
            if extent is not None and extent >= 1:
                new = refit_tile(decision, extent)
        elif name == "SampleComputeLocation":
            block = self.sch.get(inputs[0])
            new, _ = prim_sampling.sample_compute_location(self.sch.state, self.sch.func_name, block.name_hint,
                                                           decision, _no_rng)
        change = DecisionChange(self.positions.get(id(inst), -1), inst.kind, decision, new)
        self.given[id(inst)] = change
        if new != decision:
            self.changes.append(change)
        return new

    def failure(self, trace: Trace, exc: MsdbError) -> RefitFailure:
        """The failure `exc` stands for: the instruction it names (an anchor or trace error
        carries its index; otherwise the last one replayed) and the decisions feeding it."""
        index = getattr(exc, "index", None) if isinstance(exc, (AnchorTraceError, TraceError)) else None
        if index is None and self.last is not None:
            index = self.positions.get(id(self.last))
        # The replay wraps the primitive's error in one naming the instruction, which the
        # failure names on its own.
        reason = str(exc.__cause__) if isinstance(exc.__cause__, MsdbError) else str(exc)
        if index is None or not 0 <= index < len(trace.insts):
            return RefitFailure(None, None, str(exc))
        inst = trace.insts[index]
        return RefitFailure(index, inst.kind, reason, self._feeding(trace, inst))

    def _feeding(self, trace: Trace, inst: Instruction) -> tuple[DecisionChange, ...]:
        """The decisions of the sampling instructions whose outputs `inst` reads (or its own)."""
        sampled_by: dict[RV, Instruction] = {}
        for other in trace.insts:
            if other is inst:
                break
            if kind_for(other).is_sampling:
                sampled_by.update((out, other) for out in other.outputs if out is not None)
        sources = [inst] if kind_for(inst).is_sampling else []
        for rv in rvs_in(inst.inputs):
            if rv in sampled_by and sampled_by[rv] not in sources:
                sources.append(sampled_by[rv])
        found = []
        for source in sources:
            change = self.given.get(id(source))
            if change is None and trace.get_decision(source) is not None:
                recorded = trace.get_decision(source)
                change = DecisionChange(self.positions[id(source)], source.kind, recorded, recorded)
            if change is not None:
                found.append(change)
        return tuple(found)

