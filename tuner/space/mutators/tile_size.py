"""`MutateTileSize` (docs/architecture.md, "Tuner"): TVM's mutator that moves a factor from one
tile of a sampled perfect tiling to another.

The product of the tiles is the loop's extent, so a mutation must keep it: a divisor `d > 1` of
one tile `x` is taken out of it and multiplied into another tile `y`. The innermost tile is
bounded by the instruction's `max_innermost_factor`; when `y` is the innermost tile, only the
divisors that keep it within the bound qualify (TVM's rule, including that a bound of -1 lets
nothing move into the innermost tile). Also mutated, as in TVM, are the categorical choices that
feed a `meta_schedule.cooperative_fetch` annotation (GPU schedules only): one of the other
candidates is drawn by its probability.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any, Sequence

from msdb.schedule.rv import ExprRV
from msdb.schedule.sampling import divisors, sample_categorical, sample_int
from msdb.tuner.space.mutators.base import Mutator

if TYPE_CHECKING:
    from msdb.schedule.instruction import Instruction
    from msdb.schedule.trace import Trace

__all__ = ["MutateTileSize", "mutate_tiles", "redraw_other"]

COOPERATIVE_FETCH = "meta_schedule.cooperative_fetch"


def _tile_candidates(trace: Trace) -> list[tuple[Instruction, list[int]]]:
    """The perfect-tile samples that have something to move: at least two tiles and a product
    of at least 2 (a dynamic loop's [-1, 1, ...] never qualifies)."""
    out = []
    for inst in trace.insts:
        if inst.kind != "SamplePerfectTile":
            continue
        tiles = [int(t) for t in trace.get_decision(inst) or ()]
        product = 1
        for t in tiles:
            product *= t
        if len(tiles) >= 2 and product >= 2:
            out.append((inst, tiles))
    return out


def _fetch_candidates(trace: Trace) -> list[tuple[Instruction, int]]:
    """The categorical samples whose value is a cooperative-fetch annotation, with more than
    one candidate."""
    annotated = {inst.inputs[1] for inst in trace.insts
                 if inst.kind == "Annotate" and inst.attrs and inst.attrs[0] == COOPERATIVE_FETCH
                 and len(inst.inputs) == 2 and isinstance(inst.inputs[1], ExprRV)}
    out = []
    for inst in trace.insts:
        if inst.kind == "SampleCategorical" and inst.outputs and inst.outputs[0] in annotated:
            decision = trace.get_decision(inst)
            if len(inst.attrs[1]) > 1 and decision is not None:
                out.append((inst, int(decision)))
    return out


def mutate_tiles(tiles: Sequence[int], max_innermost_factor: int, rng: random.Random) -> list[int] | None:
    """TVM's `MutateSampleTileSize` on one decision: the new tiles, or None when the only move
    would be into an innermost tile that cannot grow (two tiles only; with more, another pair
    is drawn)."""
    tiles = list(tiles)
    n = len(tiles)
    while True:
        x = sample_int(rng, 0, n)
        if tiles[x] <= 1:
            continue
        y = sample_int(rng, 0, n - 1)
        if y >= x:
            y += 1
        factors = divisors(tiles[x])
        if y != n - 1:
            factor = factors[sample_int(rng, 1, len(factors))]
        else:
            top = len(factors) - 1
            while top >= 1 and factors[top] * tiles[y] > max_innermost_factor:
                top -= 1
            if top == 0:
                if n <= 2:
                    return None
                continue
            factor = factors[sample_int(rng, 1, top + 1)]
        tiles[x] //= factor
        tiles[y] *= factor
        return tiles


def redraw_other(probs: Sequence[float], decision: int, rng: random.Random) -> int | None:
    """Another index than `decision`, drawn by the remaining probabilities (TVM's
    `MutateSampleVectorize` / `MutateUnroll` draw); None when no other index has weight."""
    others = [float(p) for i, p in enumerate(probs) if i != decision]
    if not others or sum(others) <= 0:
        return None  # TVM draws from an empty or all-zero distribution here; msdb gives up
    result = sample_categorical(rng, others)
    return result + 1 if result >= decision else result


class MutateTileSize(Mutator):
    """Move a divisor between two tiles of one sampled perfect tiling (TVM's
    `MutateTileSize`)."""

    def apply(self, trace: Trace, rng: random.Random) -> Trace | None:
        tiles = _tile_candidates(trace)
        fetches = _fetch_candidates(trace)
        if not tiles and not fetches:
            return None
        pick = sample_int(rng, 0, len(tiles) + len(fetches))
        new_decision: Any
        if pick < len(tiles):
            inst, decision = tiles[pick]
            new_decision = mutate_tiles(decision, int(inst.attrs[1]), rng)
        else:
            inst, index = fetches[pick - len(tiles)]
            new_decision = redraw_other(inst.attrs[1], index, rng)
        if new_decision is None:
            return None
        return trace.with_decision(inst, new_decision, remove_postproc=True)
