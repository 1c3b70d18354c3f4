"""`RewriteReductionBlock` (docs/architecture.md, "Tuner"): TVM's post-processor that splits
every reduction block into an init block and an update block.

A reduction block keeps its `init` inside its loop nest until here, so that every schedule rule
could move and tile it as one block; the code generator wants the initialization hoisted out of
the reduction loops. Each reduction block (one with an init, whose reduction iter vars no
blockIdx/threadIdx loop feeds) is decomposed at its first loop, outermost first, that is not
spatial; a block with only spatial loops around it stays as it is. Blocks are found afresh
until a round decomposes none, as TVM does, and each decomposition goes through
`Schedule.get_block`, `get_loops` and `decompose_reduction` so the trace records TVM's
instructions.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from msdb.errors import ScheduleError
from msdb.ir import expr as E
from msdb.ir import stmt as S
from msdb.ir.functor import free_vars
from msdb.schedule.analysis import loop_iter_types, loops_above, statements_under
from msdb.tuner.space.postprocs.base import Postproc

if TYPE_CHECKING:
    from msdb.ir.function import IRModule
    from msdb.schedule.schedule import Schedule

__all__ = ["RewriteReductionBlock", "reduction_blocks", "decompose_point"]

logger = logging.getLogger(__name__)

AUTO_TENSORIZE = "meta_schedule.auto_tensorize"
AUTO_TENSORIZE_INIT = "meta_schedule.auto_tensorize_init"


def _is_gpu_thread_loop(loop: S.For) -> bool:
    tag = loop.thread_binding.thread_tag if loop.thread_binding is not None else ""
    return loop.kind == S.ForKind.THREAD_BINDING and tag.startswith(("blockIdx.", "threadIdx."))


def reduction_blocks(mod: IRModule) -> list[tuple[str, str]]:
    """(function name, block name) of every block to decompose, functions in module order and
    blocks in execution order (TVM's `ReductionBlockFinder`). As in TVM, a loop bound to
    blockIdx/threadIdx counts for every block visited after it."""
    found: list[tuple[str, str]] = []
    for func_name, func in mod.functions.items():
        bound: set[E.Var] = set()
        for node in statements_under(func.body, inits=True):
            if isinstance(node, S.For) and _is_gpu_thread_loop(node):
                bound.add(node.loop_var)
            elif isinstance(node, S.BlockRealize) and node.block.init is not None:
                if not any(iv.iter_type == S.IterType.COMM_REDUCE and free_vars(value) & bound
                           for iv, value in zip(node.block.iter_vars, node.iter_values)):
                    found.append((func_name, node.block.name_hint))
    return found


def decompose_point(sch: Schedule, func_name: str, block_name: str) -> int | None:
    """The index of the block's first loop (outermost first) that is not spatial, or None when
    all are (TVM's `FindDecomposePoint`)."""
    loops = loops_above(sch.state, func_name, sch.state.realize(func_name, block_name))
    return next((i for i, kind in enumerate(loop_iter_types(loops)) if kind != S.IterType.DATA_PAR), None)


class RewriteReductionBlock(Postproc):
    """Decompose every reduction block at its first non-spatial loop (TVM's
    `RewriteReductionBlock`); a primitive's refusal rejects the candidate."""

    def apply(self, sch: Schedule) -> bool:
        try:
            while True:
                rewritten = 0
                for func_name, block_name in reduction_blocks(sch.mod):
                    point = decompose_point(sch, func_name, block_name)
                    if point is None:
                        continue
                    block = sch.get_block(block_name, func_name)
                    loops = sch.get_loops(block)
                    init = sch.decompose_reduction(block, loops[point])
                    _move_tensorize_hints(sch, block, init)
                    rewritten += 1
                if rewritten == 0:
                    return True
        except ScheduleError as exc:
            logger.debug("decomposing a reduction failed: %s", exc)
            return False


def _move_tensorize_hints(sch: Schedule, block: Any, init: Any) -> None:
    """An auto-tensorize hint belongs to the update block; the init block gets the init's own
    hint (or an empty one, which still tells RewriteTensorize to look), as in TVM."""
    annotations = sch.get(block).annotations
    if AUTO_TENSORIZE not in annotations:
        return
    sch.unannotate(init, AUTO_TENSORIZE)
    tensorize_init = annotations.get(AUTO_TENSORIZE_INIT)
    sch.annotate(init, AUTO_TENSORIZE, tensorize_init if tensorize_init is not None else "")
    if tensorize_init is not None:
        sch.unannotate(block, AUTO_TENSORIZE_INIT)
        sch.unannotate(init, AUTO_TENSORIZE_INIT)
