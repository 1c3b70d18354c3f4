"""The sampling primitives as functions over the schedule state: a perfect tile of a loop, a
categorical choice, a compute location of a block.

Each takes the decision to replay (None: draw one) and a callable giving the random number
generator, called only when a draw is needed (the schedule saves the generator's state then,
to rewind it if the primitive fails). The distributions are `msdb.schedule.sampling`'s.
"""

from __future__ import annotations

import logging
import random
from typing import Callable, Hashable, Sequence

from msdb.errors import ScheduleError
from msdb.ir import expr as E
from msdb.ir import stmt as S
from msdb.schedule import analysis as A
from msdb.schedule import prim_compute_at, prim_inline, sampling
from msdb.schedule.rv import INLINE_MARK, ROOT_MARK, LoopTarget
from msdb.schedule.state import ScheduleState

__all__ = ["sample_perfect_tile", "sample_categorical", "compute_location_candidates", "sample_compute_location"]

logger = logging.getLogger(__name__)

Rng = Callable[[], random.Random]


def sample_perfect_tile(state: ScheduleState, func_name: str, loop_var: E.Var, n: int, max_innermost_factor: int,
                        decision: Sequence[int] | None, rng: Rng) -> list[int]:
    """`n` tile sizes whose product is the loop's extent (see `Schedule.sample_perfect_tile`)."""
    target = state.loop(func_name, loop_var)
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ScheduleError(f"sample_perfect_tile: n must be a positive int, got {n!r}")
    extent = E.const_int(target.extent)
    if extent is None:
        return [-1] + [1] * (n - 1)
    if decision is not None:
        values = list(decision)
        if len(values) != n or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in values):
            raise ScheduleError(
                f"sample_perfect_tile: decision {values} for loop {target.loop_var.name!r} must be "
                f"{n} positive integers")
        result = sampling.repair_perfect_tile(extent, values)
        if result != values:
            logger.debug("perfect tile decision %s for extent %d repaired to %s", values, extent, result)
        return result
    if extent < 1:
        raise ScheduleError(f"sample_perfect_tile: loop {target.loop_var.name!r} has extent {extent}")
    return sampling.sample_perfect_tile(rng(), extent, n, max_innermost_factor)


def sample_categorical(candidates: Sequence[int], probs: Sequence[float], decision: int | None, rng: Rng) -> int:
    """The index of the chosen candidate (see `Schedule.sample_categorical`)."""
    if len(candidates) != len(probs) or not candidates:
        raise ScheduleError(f"sample_categorical: {len(candidates)} candidates but {len(probs)} probabilities")
    if decision is not None:
        if isinstance(decision, bool) or not isinstance(decision, int) or not 0 <= decision < len(candidates):
            raise ScheduleError(
                f"sample_categorical: decision {decision!r} is not an index into {len(candidates)} candidates")
        return decision
    try:
        return sampling.sample_categorical(rng(), list(probs))
    except ValueError as exc:
        raise ScheduleError(f"sample_categorical: {exc}") from None


def sample_compute_location(state: ScheduleState, func_name: str, block_name: str, decision: int | None,
                            rng: Rng) -> tuple[int, LoopTarget]:
    """(decision, what the sampled LoopRV stands for): -2 inline, -1 root, i the i-th loop
    around the block's first consumer. A given decision is kept if it is still a candidate,
    else the nearest candidate before it.

    A given decision needs no list of every candidate: the loops at or before it are tried
    nearest first and the first that takes the block answers (root when none does). Trying a
    location is a compute-at on a copy of the state, the bulk of a trace's replay, so a replay
    usually tries one location where drawing anew tries them all; the answer is the one the full
    list gives (docs/architecture.md, "Features and cost model")."""
    if decision is None:
        indices, targets, tries = _location_tries(state, func_name, block_name)
        pick = sampling.sample_int(rng(), 0, len(indices))
        tried, target = tries[pick], targets[pick]
        if isinstance(tried, ScheduleState):
            state.remember_tried(inline_move(func_name, block_name), tried)
        elif isinstance(tried, prim_compute_at.PlannedMove) and isinstance(target, E.Var):
            _tried(state, compute_at_move(func_name, block_name, target, True, -1), tried.apply)
        return indices[pick], target
    if isinstance(decision, bool) or not isinstance(decision, int):
        raise ScheduleError(f"sample_compute_location: decision {decision!r} is not an int")
    if decision == -2 and _tried(state, inline_move(func_name, block_name),
                                 lambda s: prim_inline.compute_inline(s, func_name, block_name)):
        return -2, INLINE_MARK
    if decision < 0:
        return -1, ROOT_MARK
    for i, var in reversed([(i, var) for i, var in _eligible_loops(state, func_name, block_name) if i <= decision]):
        if _tried_compute_at(state, func_name, block_name, var):
            return i, var
    return -1, ROOT_MARK


def inline_move(func_name: str, block_name: str) -> Hashable:
    """How `ScheduleState.remember_tried` names inlining the block."""
    return ("compute_inline", func_name, block_name)


def compute_at_move(func_name: str, block_name: str, loop_var: E.Var, preserve_unit_loops: bool,
                    index: int) -> Hashable:
    """How `ScheduleState.remember_tried` names a compute-at of the block under the loop (the
    loop by identity: a `Var` compares into an expression)."""
    return ("compute_at", func_name, block_name, id(loop_var), preserve_unit_loops, index)


def _tried(state: ScheduleState, move: Hashable, action: Callable[[ScheduleState], object]) -> bool:
    """Whether `action` succeeds on a copy of the state; the copy it gave is remembered as
    `move` for the instruction that makes the move next (a sampled location's check is then
    the move itself)."""
    trial = state.copy()
    try:
        action(trial)
    except ScheduleError:
        return False
    state.remember_tried(move, trial)
    return True


def _tried_compute_at(state: ScheduleState, func_name: str, block_name: str, var: E.Var) -> bool:
    """Whether the block can be computed at the loop (TVM's CanComputeAt: every check of the
    move passes); the move itself is made on a copy and remembered for the `ComputeAt` that
    follows. Should making it fail after the checks passed, the answer is still yes and nothing
    is remembered: the `ComputeAt` then fails as it would have."""
    try:
        planned = prim_compute_at.plan_compute_at(state, func_name, block_name, var, preserve_unit_loops=True,
                                                  index=-1, reverse=False)
    except ScheduleError:
        return False
    _tried(state, compute_at_move(func_name, block_name, var, True, -1), planned.apply)
    return True


def compute_location_candidates(state: ScheduleState, func_name: str, block_name: str
                                ) -> tuple[list[int], list[LoopTarget]]:
    """TVM's CollectComputeLocation: (indices, targets), indices increasing."""
    indices, targets, _ = _location_tries(state, func_name, block_name)
    return indices, targets


def _location_tries(state: ScheduleState, func_name: str, block_name: str
                    ) -> tuple[list[int], list[LoopTarget], list[ScheduleState | prim_compute_at.PlannedMove | None]]:
    """`compute_location_candidates` and, per candidate, what trying it gave: the state with
    the block inlined (-2), None (root), the planned compute-at (a loop). TVM's CanComputeAt
    is the plan: it runs every check of the move and changes nothing."""
    indices: list[int] = []
    targets: list[LoopTarget] = []
    tries: list[ScheduleState | prim_compute_at.PlannedMove | None] = []
    inlined = state.copy()
    try:
        prim_inline.compute_inline(inlined, func_name, block_name)
        indices.append(-2)
        targets.append(INLINE_MARK)
        tries.append(inlined)
    except ScheduleError:
        pass
    indices.append(-1)
    targets.append(ROOT_MARK)
    tries.append(None)
    for i, var in _eligible_loops(state, func_name, block_name):
        try:
            planned = prim_compute_at.plan_compute_at(state, func_name, block_name, var, preserve_unit_loops=True,
                                                      index=-1, reverse=False)
        except ScheduleError:
            continue
        indices.append(i)
        targets.append(var)
        tries.append(planned)
    return indices, targets, tries


def _eligible_loops(state: ScheduleState, func_name: str, block_name: str) -> list[tuple[int, E.Var]]:
    """The loops around the block's first consumer that CollectComputeLocation tries, in order
    (index, loop variable): up to the consumers' common loop, skipping unit loops, stopping at a
    spatial loop after a reduction or a reduction after the last spatial loop. Whether the block
    can move there is not checked here."""
    block = state.block(func_name, block_name)
    consumers = A.scope_of(state, func_name, block).consumers(block)
    if not consumers:
        return []
    boundary: object | None
    if len(consumers) == 1:
        boundary = A.sref_parent(state, func_name, consumers[0])
    else:
        chains: list[list[object]] = [[b, *(a for a in state.ancestors(func_name, b) if isinstance(a, (S.For, S.Block)))]
                                      for b in consumers]
        others = [{id(x) for x in c} for c in chains[1:]]
        boundary = next((x for x in chains[0] if all(id(x) in o for o in others)), None)
    if not isinstance(boundary, S.For):
        return []
    loops = A.loops_above(state, func_name, state.realize(func_name, consumers[0].name_hint))
    pos = next((i for i, loop in enumerate(loops) if loop is boundary), None)
    if pos is None:
        return []
    n_candidate = pos + 1
    iter_types = A.loop_iter_types(loops[:n_candidate])
    last_datapar = max((i for i, t in enumerate(iter_types) if t == S.IterType.DATA_PAR), default=-1)
    visited_reduce = False
    out = []
    for i in range(n_candidate):
        if E.const_int(loops[i].extent) == 1:
            continue
        if iter_types[i] == S.IterType.DATA_PAR:
            if visited_reduce:
                break
        else:
            visited_reduce = True
            if i > last_datapar:
                break
        out.append((i, loops[i].loop_var))
    return out
