"""`RewriteCooperativeFetch` (TVM's post-processor, in `Postproc::DefaultCUDA`;
docs/architecture.md, "Tuner"): turns each `meta_schedule.cooperative_fetch` annotation that
MultiLevelTiling put on a shared-memory copy into loops: the copy's fused innermost loop is
split so that all threads of the block (threadIdx.x, and threadIdx.y when bound) load it
together, each `vector` elements at a time (the sampled width, 1 when it does not divide the
loop or the copy moves 8-byte values).

The thread counts are those the trace bound last before each annotation (TVM reads them off
the trace in order), and the rewrites go through traced primitives so TVM replays them.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from msdb.errors import ScheduleError
from msdb.ir import expr as E
from msdb.ir import stmt as S
from msdb.ir.functor import post_order_visit
from msdb.tuner.codegen.cuda.emit_expr import elem_bytes
from msdb.tuner.space.gpu_target import gpu_target_of
from msdb.tuner.space.postprocs.base import Postproc
from msdb.tuner.space.rules.multi_level_tiling_gpu import COOPERATIVE_FETCH

if TYPE_CHECKING:
    from msdb.schedule.rv import BlockRV
    from msdb.schedule.schedule import Schedule

__all__ = ["RewriteCooperativeFetch", "max_dtype_bytes"]

logger = logging.getLogger(__name__)

WARP_EXECUTION = "warp_execution"


def max_dtype_bytes(block: S.Block) -> int:
    """The widest element the block's body stores, loads or casts to (TVM's
    GetMaxUsedDtypeBytes)."""
    widest = 1

    def visit(node: object) -> None:
        nonlocal widest
        if isinstance(node, S.BufferStore):
            widest = max(widest, elem_bytes(node.value.dtype))
        elif isinstance(node, E.BufferLoad):
            widest = max(widest, elem_bytes(node.dtype))
        elif isinstance(node, E.Call) and node.op in ("q_multiply_shift", "q_multiply_shift_per_axis"):
            widest = max(widest, 8)  # a 64-bit multiply inside
        elif isinstance(node, E.Cast):
            widest = max(widest, elem_bytes(node.dtype))

    post_order_visit(block.body, visit)
    return widest


class RewriteCooperativeFetch(Postproc):
    """Split and bind every cooperatively fetched copy (TVM's `RewriteCooperativeFetch`)."""

    def apply(self, sch: Schedule) -> bool:
        thread_x, thread_y = -1, -1
        tasks: list[tuple[BlockRV, int, int, int]] = []
        for inst in sch.trace.insts:
            if inst.kind == "Bind" and inst.attrs[0] in ("threadIdx.x", "threadIdx.y"):
                extent = E.const_int(sch.get(inst.inputs[0]).extent)
                if extent is None:
                    return False  # TVM requires a constant extent here
                if inst.attrs[0] == "threadIdx.x":
                    thread_x = extent
                else:
                    thread_y = extent
            elif inst.kind == "Annotate" and inst.attrs[0] == WARP_EXECUTION:
                thread_x = gpu_target_of(self.context).thread_warp_size
            elif inst.kind == "Annotate" and inst.attrs[0] == COOPERATIVE_FETCH:
                tasks.append((inst.inputs[0], int(sch.get(inst.inputs[1])), thread_x, thread_y))
        try:
            for block, vector, x, y in tasks:
                _rewrite(sch, block, vector, x, y)
        except ScheduleError as exc:
            logger.debug("cooperative fetch rewrite failed: %s", exc)
            return False
        return True


def _rewrite(sch: Schedule, block: BlockRV, vector: int, thread_x: int, thread_y: int) -> None:
    sch.unannotate(block, COOPERATIVE_FETCH)
    fused = sch.get_loops(block)[-1]
    extent = E.const_int(sch.get(fused).extent)
    if extent is None:
        return
    if extent % vector != 0 or max_dtype_bytes(sch.get(block)) > 4:
        vector = 1  # 64-bit vectors do not work well on CUDA (as TVM)
    if thread_y != -1:
        if vector > 1:
            _, ty, tx, vec = sch.split(fused, [None, thread_y, thread_x, vector])
            sch.vectorize(vec)
        else:
            _, ty, tx = sch.split(fused, [None, thread_y, thread_x])
        sch.bind(tx, "threadIdx.x")
        sch.bind(ty, "threadIdx.y")
    elif vector > 1:
        _, tx, vec = sch.split(fused, [None, thread_x, vector])
        sch.vectorize(vec)
        sch.bind(tx, "threadIdx.x")
    else:
        _, tx = sch.split(fused, [None, thread_x])
        sch.bind(tx, "threadIdx.x")
