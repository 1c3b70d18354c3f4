"""`RewriteParallelVectorizeUnroll` (docs/architecture.md, "Tuner"): TVM's post-processor that
turns the root-block hints of the ParallelizeVectorizeUnroll rule into loops.

The rule only annotates the root block (`meta_schedule.parallel`: the most parallel jobs,
`meta_schedule.vectorize`: the longest vector, `meta_schedule.unroll_explicit` or
`meta_schedule.unroll_implicit`: the unroll step); the decision of which loops those become
waits until here, after every other instruction has shaped the loop nests. For each function
whose root block carries such hints, the post-processor removes them and, for each child block
of the root that has loops, fuses leading loops into one parallel loop and trailing loops into
one vectorized loop (`loop_plan` says how many), then puts the unroll pragmas on the outermost
loop of a block that is not purely spatial.

Everything goes through the public `Schedule` primitives, in TVM's order, so the trace records
the instructions TVM records and TVM can replay it. A primitive that refuses (`ScheduleError`)
rejects the candidate, as in TVM.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping

from msdb.errors import ScheduleError
from msdb.ir import expr as E
from msdb.ir import stmt as S
from msdb.tuner.space.analysis import is_spatial
from msdb.tuner.space.postprocs.base import Postproc
from msdb.tuner.space.postprocs.loop_plan import NONE, plan_loops

if TYPE_CHECKING:
    from msdb.schedule.rv import BlockRV, LoopRV
    from msdb.schedule.schedule import Schedule

__all__ = ["RewriteParallelVectorizeUnroll", "RootHints", "parse_hints"]

logger = logging.getLogger(__name__)

PARALLEL = "meta_schedule.parallel"
VECTORIZE = "meta_schedule.vectorize"
UNROLL_EXPLICIT = "meta_schedule.unroll_explicit"
UNROLL_IMPLICIT = "meta_schedule.unroll_implicit"
#: The loop pragmas the unroll hint becomes (TVM's `tir.attr` names).
PRAGMA_AUTO_UNROLL_MAX_STEP = "pragma_auto_unroll_max_step"
PRAGMA_UNROLL_EXPLICIT = "pragma_unroll_explicit"


@dataclass(frozen=True)
class RootHints:
    """The hints read off a root block; `NONE` (-1) where absent or not an integer."""

    max_parallel_extent: int = NONE
    max_vectorize_extent: int = NONE
    unroll_explicit: int = NONE
    unroll_implicit: int = NONE


def _int_value(value: Any) -> int | None:
    """An annotation value TVM reads as an IntImm (an int, a bool or an IntImm here)."""
    if isinstance(value, int):
        return int(value)
    if isinstance(value, E.IntImm):
        return value.value
    return None


def parse_hints(annotations: Mapping[str, Any]) -> RootHints | None:
    """The root block's hints, or None when it carries none of the four keys (TVM's
    `ParseAnnotation`)."""
    keys = {PARALLEL: "max_parallel_extent", VECTORIZE: "max_vectorize_extent", UNROLL_EXPLICIT: "unroll_explicit",
            UNROLL_IMPLICIT: "unroll_implicit"}
    found = False
    values: dict[str, int] = {}
    for key, value in annotations.items():
        field = keys.get(key)
        if field is None:
            continue
        found = True
        number = _int_value(value)
        if number is not None:
            values[field] = number
    return RootHints(**values) if found else None


class RewriteParallelVectorizeUnroll(Postproc):
    """Parallelize, vectorize and unroll the loops of every child block of an annotated root
    block (TVM's `RewriteParallelVectorizeUnroll`)."""

    def apply(self, sch: Schedule) -> bool:
        while True:
            found = self._take_annotated_root(sch)
            if found is None:
                return True
            root, hints = found
            if hints is None:
                return False
            for block in sch.get_child_blocks(root):
                if not self._rewrite_block(sch, block, hints):
                    return False

    @staticmethod
    def _take_annotated_root(sch: Schedule) -> tuple[BlockRV, RootHints | None] | None:
        """The first root block (functions in module order) with hints, its hints removed from
        it (TVM's `FindAnnotatedRootBlock`); None when no root has any. The hints are None
        when none of the present keys has an integer value: TVM would find that root again
        forever, msdb rejects the candidate instead."""
        for func_name, func in sch.mod.functions.items():
            body = func.body
            if not isinstance(body, S.BlockRealize):
                continue
            hints = parse_hints(body.block.annotations)
            if hints is None:
                continue
            root = sch.get_block(body.block.name_hint, func_name)
            removable = [(key, value) for key, value in ((PARALLEL, hints.max_parallel_extent),
                                                         (VECTORIZE, hints.max_vectorize_extent),
                                                         (UNROLL_EXPLICIT, hints.unroll_explicit),
                                                         (UNROLL_IMPLICIT, hints.unroll_implicit))
                         if value != NONE]
            for key, _ in removable:
                sch.unannotate(root, key)
            if not removable:
                logger.debug("root block of %r has hints without an integer value: %s", func_name,
                             dict(body.block.annotations))
                return root, None
            return root, hints
        return None

    @staticmethod
    def _rewrite_block(sch: Schedule, block: BlockRV, hints: RootHints) -> bool:
        loops = sch.get_loops(block)
        if not loops:
            return True
        realize = sch.state.realize(sch.func_name, sch.get(block).name_hint)
        plan = plan_loops(realize, [sch.get(loop) for loop in loops], hints.max_parallel_extent,
                          hints.max_vectorize_extent)
        n_loops = len(loops)
        try:
            if plan.num_parallel == n_loops and plan.num_vectorize == n_loops:
                fused = sch.fuse(*loops)
                outer, inner = sch.split(fused, [None, hints.max_vectorize_extent])
                sch.parallel(outer)
                sch.vectorize(inner)
                loops = [outer] * (n_loops - 1) + [inner]
            else:
                if plan.num_parallel > 0:
                    fused = sch.fuse(*loops[:plan.num_parallel])
                    sch.parallel(fused)
                    loops[:plan.num_parallel] = [fused] * plan.num_parallel
                if plan.num_vectorize > 0:
                    fused = sch.fuse(*loops[n_loops - plan.num_vectorize:])
                    sch.vectorize(fused)
                    loops[n_loops - plan.num_vectorize:] = [fused] * plan.num_vectorize
            if hints.unroll_explicit != NONE or hints.unroll_implicit != NONE:
                _rewrite_unroll(sch, block, loops[0], hints)
        except ScheduleError as exc:
            logger.debug("parallelization/vectorization failed: %s", exc)
            return False
        return True


def _rewrite_unroll(sch: Schedule, block: BlockRV, loop: LoopRV, hints: RootHints) -> None:
    """Put the unroll pragmas on the outermost loop, unless the step is 0 or the block is purely
    spatial (nothing to gain from unrolling it)."""
    if hints.unroll_explicit != NONE and hints.unroll_implicit != NONE:
        raise ScheduleError(f"the root block has both {UNROLL_EXPLICIT} and {UNROLL_IMPLICIT}; keep one")
    explicit = int(hints.unroll_explicit != NONE)
    max_step = hints.unroll_explicit + hints.unroll_implicit + 1
    if max_step <= 0 or is_spatial(sch.get(block)):
        return
    sch.annotate(loop, PRAGMA_AUTO_UNROLL_MAX_STEP, max_step)
    sch.annotate(loop, PRAGMA_UNROLL_EXPLICIT, explicit)

