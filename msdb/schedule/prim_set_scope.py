"""set_scope: move an intermediate buffer to another storage scope, as a function over the
schedule state (TVM's SetScope, a block-annotation primitive).

TVM's CrossThreadReduction rule uses it on GPUs: when a reduction is computed at a consumer's
thread-bound loop, its result buffer is set to "shared" so that every thread of the block reads
the one value (docs/architecture.md, "Schedules and traces").
"""

from __future__ import annotations

import dataclasses

from msdb.errors import ScheduleError
from msdb.ir import stmt as S
from msdb.ir.functor import replace_buffers
from msdb.schedule.state import ScheduleState

__all__ = ["set_scope", "VALID_SCOPE_BASES"]

#: The storage scopes TVM's runtime knows (a tag may follow a dot: "shared.dyn", "wmma.accumulator").
VALID_SCOPE_BASES = frozenset(["global", "shared", "warp", "local", "wmma", "m16n8k8", "metal", "texture"])


def _valid_scope(scope: str) -> bool:
    base, _, tag = scope.partition(".")
    if base in ("global", "shared", "local", "warp"):
        return True  # any tag: "shared.dyn", "global.texture", "local.fragment"
    return base in VALID_SCOPE_BASES and bool(tag)


def set_scope(state: ScheduleState, func_name: str, block_name: str, buffer_index: int, storage_scope: str) -> None:
    """Give the block's `buffer_index`-th written buffer the storage scope `storage_scope`,
    everywhere under the block that allocates it (see `Schedule.set_scope`)."""
    block = state.block(func_name, block_name)
    where = f"set_scope: block {block_name!r}"
    if not 0 <= buffer_index < len(block.writes):
        raise ScheduleError(f"{where}: buffer_index {buffer_index} is out of range; the block writes "
                            f"{len(block.writes)} buffer(s)")
    buffer = block.writes[buffer_index].buffer
    if buffer.scope == storage_scope:
        return  # TVM: nothing to do, and no check of the allocation site either
    if not isinstance(storage_scope, str) or not _valid_scope(storage_scope):
        raise ScheduleError(f"{where}: storage scope {storage_scope!r} is not valid; use e.g. \"shared\", "
                            "\"local\", \"global\" or \"warp\"")
    site = _allocation_site(state, func_name, block, buffer)
    if site is None:
        raise ScheduleError(f"{where}: buffer {buffer.name!r} is not allocated by a block (it is a function "
                            "parameter or a match_buffer); only intermediate buffers can change scope")
    new_buffer = dataclasses.replace(buffer, scope=storage_scope)
    new_site = replace_buffers(site, {buffer: new_buffer})
    assert isinstance(new_site, S.Block)
    state.replace(func_name, site, new_site)


def _allocation_site(state: ScheduleState, func_name: str, block: S.Block, buffer: object) -> S.Block | None:
    """The block (the block itself or one enclosing it) whose alloc_buffers hold `buffer`."""
    for node in [block, *state.ancestors(func_name, block)]:
        if isinstance(node, S.Block) and any(b is buffer for b in node.alloc_buffers):
            return node
    return None
