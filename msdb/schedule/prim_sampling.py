"""The sampling primitives as functions over the schedule state: a perfect tile of a loop, a
categorical choice, a compute location of a block.

Each takes the decision to replay (None: draw one) and a callable giving the random number
generator, called only when a draw is needed (the schedule saves the generator's state then,
to rewind it if the primitive fails). The distributions are `msdb.schedule.sampling`'s.
"""

from __future__ import annotations

import bisect
import logging
import random
from typing import Callable, Sequence

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
    else the nearest candidate before it."""
    indices, targets = compute_location_candidates(state, func_name, block_name)
    if decision is None:
        pick = sampling.sample_int(rng(), 0, len(indices))
        return indices[pick], targets[pick]
    if isinstance(decision, bool) or not isinstance(decision, int):
        raise ScheduleError(f"sample_compute_location: decision {decision!r} is not an int")
    pos = bisect.bisect_left(indices, decision)
    if pos < len(indices) and indices[pos] == decision:
        return decision, targets[pos]
    if pos > 0:
        return indices[pos - 1], targets[pos - 1]
    return -1, ROOT_MARK


def _succeeds(action: Callable[[ScheduleState], object], state: ScheduleState) -> bool:
    """Whether a primitive would succeed (TVM's CanComputeAt / CanComputeInline), tried on a
    copy of the state."""
    try:
        action(state.copy())
        return True
    except ScheduleError:
        return False


def compute_location_candidates(state: ScheduleState, func_name: str, block_name: str
                                ) -> tuple[list[int], list[LoopTarget]]:
    """TVM's CollectComputeLocation: (indices, targets), indices increasing."""
    indices: list[int] = []
    targets: list[LoopTarget] = []
    if _succeeds(lambda s: prim_inline.compute_inline(s, func_name, block_name), state):
        indices.append(-2)
        targets.append(INLINE_MARK)
    indices.append(-1)
    targets.append(ROOT_MARK)
    block = state.block(func_name, block_name)
    consumers = A.scope_of(state, func_name, block).consumers(block)
    if not consumers:
        return indices, targets
    boundary: object | None
    if len(consumers) == 1:
        boundary = A.sref_parent(state, func_name, consumers[0])
    else:
        chains: list[list[object]] = [[b, *(a for a in state.ancestors(func_name, b) if isinstance(a, (S.For, S.Block)))]
                                      for b in consumers]
        others = [{id(x) for x in c} for c in chains[1:]]
        boundary = next((x for x in chains[0] if all(id(x) in o for o in others)), None)
    if not isinstance(boundary, S.For):
        return indices, targets
    loops = A.loops_above(state, func_name, state.realize(func_name, consumers[0].name_hint))
    pos = next((i for i, loop in enumerate(loops) if loop is boundary), None)
    if pos is None:
        return indices, targets
    n_candidate = pos + 1
    iter_types = [A.loop_iter_type(loops[i]) for i in range(n_candidate)]
    last_datapar = max((i for i, t in enumerate(iter_types) if t == S.IterType.DATA_PAR), default=-1)
    visited_reduce = False
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
        var = loops[i].loop_var

        def attempt(s: ScheduleState, var: E.Var = var) -> None:
            prim_compute_at.compute_at(s, func_name, block_name, var, preserve_unit_loops=True, index=-1,
                                       reverse=False)

        if _succeeds(attempt, state):
            indices.append(i)
            targets.append(var)
    return indices, targets
