"""`RewriteTensorize` (docs/architecture.md, "Tuner"): TVM's post-processor that tensorizes every
block a schedule rule marked for it.

The tensor-core rule blockizes each tile it wants computed by a tensor intrinsic and annotates
the outer block `meta_schedule.auto_tensorize` with the intrinsic's name, and RewriteReductionBlock
gives a decomposed reduction's init block the fill intrinsic's name the same way. Tensorizing is
left until here (after VerifyGPUCode, as TVM orders it: it is costly and does not change whether
a candidate is valid). Blocks are taken children first, in execution order (TVM's
PostOrderVisit); each one's annotation is removed and the block tensorized (`GetSBlock`,
`Unannotate`, `Tensorize` in the trace). A block whose tensorization fails keeps its loops, as
in TVM, which only logs it; an empty annotation (an init without a fill intrinsic) is left alone
(TVM vectorizes such an init only when asked to, which its tensor-core defaults do not).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from msdb.errors import ScheduleError
from msdb.ir import stmt as S
from msdb.ir.functor import post_order_visit
from msdb.tuner.space.postprocs.base import Postproc
from msdb.tuner.space.postprocs.rewrite_reduction_block import AUTO_TENSORIZE

if TYPE_CHECKING:
    from msdb.ir.function import IRModule
    from msdb.schedule.schedule import Schedule

__all__ = ["RewriteTensorize", "AUTO_TENSORIZE", "marked_blocks"]

logger = logging.getLogger(__name__)


def marked_blocks(mod: IRModule) -> list[tuple[str, str, str]]:
    """(block, function, intrinsic) of each block marked `meta_schedule.auto_tensorize`,
    children first in execution order (TVM's PostOrderVisit)."""
    jobs: list[tuple[str, str, str]] = []
    for func_name, func in mod.functions.items():
        def visit(node: object, func_name: str = func_name) -> None:
            if type(node) is S.Block:
                intrin = node.annotations.get(AUTO_TENSORIZE)
                if intrin:
                    jobs.append((node.name_hint, func_name, str(intrin)))

        post_order_visit(func.body, visit)
    return jobs


class RewriteTensorize(Postproc):
    """Tensorize each block annotated `meta_schedule.auto_tensorize` with the intrinsic it
    names; never rejects a candidate."""

    def apply(self, sch: Schedule) -> bool:
        for block_name, func_name, intrin in marked_blocks(sch.mod):
            block = sch.get_block(block_name, func_name)
            sch.unannotate(block, AUTO_TENSORIZE)
            try:
                sch.tensorize(block, intrin)
            except ScheduleError as exc:
                logger.warning("tensorizing %s with %s failed: %s", block_name, intrin, exc)
        return True
