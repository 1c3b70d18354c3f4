"""annotate, unannotate and storage_align: edit the annotations of a block or a loop, as
functions over the schedule state.

A block is named by its name, a loop by its variable (what a BlockRV or a LoopRV stands
for).
"""

from __future__ import annotations

from typing import Any, Callable

from msdb.errors import ScheduleError
from msdb.ir import expr as E
from msdb.ir import stmt as S
from msdb.schedule.state import ScheduleState
from msdb.schedule.tree_edit import with_block

__all__ = ["Target", "describe", "annotate", "unannotate", "storage_align"]

#: A block (by name) or a loop (by its variable).
Target = str | E.Var


def describe(state: ScheduleState, func_name: str, target: Target) -> str:
    """"block 'C'" or "loop 'i'", for messages."""
    if isinstance(target, str):
        return f"block {state.block(func_name, target).name_hint!r}"
    return f"loop {state.loop(func_name, target).loop_var.name!r}"


def annotate(state: ScheduleState, func_name: str, target: Target, ann_key: str, ann_val: Any) -> None:
    """Set annotation `ann_key` of the block or loop to `ann_val`."""
    if not isinstance(ann_key, str):
        raise ScheduleError(f"annotate: the key must be a string, got {ann_key!r}")
    _update_annotations(state, func_name, target, lambda anns: anns.__setitem__(ann_key, ann_val))


def unannotate(state: ScheduleState, func_name: str, target: Target, ann_key: str) -> None:
    """Remove annotation `ann_key` from the block or loop; it must be there."""
    what = describe(state, func_name, target)

    def remove(anns: dict[str, Any]) -> None:
        if ann_key not in anns:
            raise ScheduleError(f"unannotate: {what} has no annotation {ann_key!r}; it has {sorted(anns)}")
        del anns[ann_key]

    _update_annotations(state, func_name, target, remove)


def _update_annotations(state: ScheduleState, func_name: str, target: Target,
                        edit: Callable[[dict[str, Any]], None]) -> None:
    if isinstance(target, str):
        block = state.block(func_name, target)
        anns = dict(block.annotations)
        edit(anns)
        state.replace(func_name, block, with_block(block, annotations=anns))
    else:
        loop = state.loop(func_name, target)
        anns = dict(loop.annotations)
        edit(anns)
        state.replace(func_name, loop,
                      S.For(loop.loop_var, loop.min, loop.extent, loop.kind, loop.body, loop.thread_binding, anns))


def storage_align(state: ScheduleState, func_name: str, block_name: str, buffer_index: int, axis: int, factor: int,
                  offset: int) -> int:
    """Record TVM's "buffer_dim_align" annotation `[buffer_index, axis, factor, offset]` on the
    block (see `Schedule.storage_align`); returns the normalized axis. As TVM: the factor must
    be positive and the buffer allocated by a block; any offset is taken as given."""
    blk = state.block(func_name, block_name)
    where = f"storage_align: block {block_name!r}"
    if not 0 <= buffer_index < len(blk.writes):
        raise ScheduleError(f"{where}: buffer_index {buffer_index} is out of range; the block writes "
                            f"{len(blk.writes)} buffer(s)")
    ndim = len(blk.writes[buffer_index].buffer.shape)
    if axis < 0:
        axis += ndim
    if not 0 <= axis < ndim:
        raise ScheduleError(f"{where}: axis {axis} is out of range for buffer "
                            f"{blk.writes[buffer_index].buffer.name!r} of {ndim} dimension(s)")
    if factor <= 0:
        raise ScheduleError(f"{where}: factor must be positive, got {factor}")
    buffer = blk.writes[buffer_index].buffer
    if not any(any(b is buffer for b in node.alloc_buffers)
               for node in [blk, *state.ancestors(func_name, blk)] if isinstance(node, S.Block)):
        raise ScheduleError(f"{where}: buffer {buffer.name!r} is not allocated by a block (it is a function "
                            "parameter or a match_buffer); only intermediate buffers can be aligned")
    entries = [list(e) for e in blk.annotations.get("buffer_dim_align", ())]
    entry = [buffer_index, axis, factor, offset]
    for i, e in enumerate(entries):
        if e[0] == buffer_index and e[1] == axis:
            entries[i] = entry
            break
    else:
        entries.append(entry)
    annotations = dict(blk.annotations)
    annotations["buffer_dim_align"] = entries
    state.replace(func_name, blk, with_block(blk, annotations=annotations))
    return axis
