"""parallel, vectorize, bind and unroll: change a loop's kind, as functions over the schedule
state.

parallel, vectorize and bind need TVM's "compact dataflow" under the loop (each block directly
under it is a complete or a reduction block, judged within the loop's subtree) and a loop
variable that feeds only spatial iter vars (a reduction one too for threadIdx.x/y/z: a
cross-thread reduction). unroll is always legal.
"""

from __future__ import annotations

from msdb.errors import ScheduleError
from msdb.ir import expr as E
from msdb.ir import stmt as S
from msdb.schedule import analysis as A
from msdb.schedule.state import ScheduleState

__all__ = ["THREAD_AXES", "parallel", "vectorize", "bind", "unroll"]

#: The thread axes `bind` accepts.
THREAD_AXES = frozenset(
    ["blockIdx.x", "blockIdx.y", "blockIdx.z", "threadIdx.x", "threadIdx.y", "threadIdx.z",
     "vthread", "vthread.x", "vthread.y", "vthread.z"]
)


def parallel(state: ScheduleState, func_name: str, loop_var: E.Var) -> None:
    _set_loop_kind(state, func_name, loop_var, S.ForKind.PARALLEL, None)


def vectorize(state: ScheduleState, func_name: str, loop_var: E.Var) -> None:
    _set_loop_kind(state, func_name, loop_var, S.ForKind.VECTORIZED, None)


def bind(state: ScheduleState, func_name: str, loop_var: E.Var, thread_axis: str) -> None:
    if not isinstance(thread_axis, str) or thread_axis not in THREAD_AXES:
        raise ScheduleError(f"bind: unknown thread axis {thread_axis!r}; expected one of {sorted(THREAD_AXES)}")
    _set_loop_kind(state, func_name, loop_var, S.ForKind.THREAD_BINDING, thread_axis)


def unroll(state: ScheduleState, func_name: str, loop_var: E.Var) -> None:
    old = state.loop(func_name, loop_var)
    new = S.For(old.loop_var, old.min, old.extent, S.ForKind.UNROLLED, old.body, None, old.annotations)
    state.replace(func_name, old, new)


def _set_loop_kind(state: ScheduleState, func_name: str, loop_var: E.Var, kind: S.ForKind,
                   thread_axis: str | None) -> None:
    loop = state.loop(func_name, loop_var)
    verb = {S.ForKind.PARALLEL: "parallelize", S.ForKind.VECTORIZED: "vectorize"}.get(kind, "bind")
    op = {S.ForKind.PARALLEL: "parallel", S.ForKind.VECTORIZED: "vectorize"}.get(kind, "bind")
    _check_compact_dataflow(loop, op)
    cross_thread = thread_axis is not None and thread_axis.startswith("threadIdx.")
    var = loop.loop_var
    for node in A.statements_under(loop.body):
        if type(node) is not S.BlockRealize:
            continue
        block = node.block
        for iv, value in zip(block.iter_vars, node.iter_values):
            if not A.uses_var(value, var):
                continue
            if iv.iter_type == S.IterType.DATA_PAR:
                continue
            if iv.iter_type == S.IterType.COMM_REDUCE and cross_thread:
                continue
            kind_name = "reduction" if iv.iter_type == S.IterType.COMM_REDUCE else "non-spatial"
            raise ScheduleError(
                f"{op}: cannot {verb} a loop bound to a {kind_name} iter var of block "
                f"{block.name_hint}: loop {var.name!r} feeds iter var {iv.var.name!r}"
                + ("; only threadIdx.x/y/z may be bound to a reduction" if kind == S.ForKind.THREAD_BINDING else ""))
    binding = None
    if thread_axis is not None:
        binding = S.IterVar(None, E.Var(thread_axis, var.dtype), S.IterType.THREAD_INDEX, thread_axis)
    state.replace(func_name, loop, S.For(var, loop.min, loop.extent, kind, loop.body, binding, loop.annotations))


def _check_compact_dataflow(loop: S.For, op: str) -> None:
    """TVM's CheckSubtreeCompactDataflow: each block directly under the loop is a complete
    block or a reduction block, judged within the loop's subtree."""
    scope = A.BlockScope(loop)
    for block in scope.blocks:
        if scope.is_complete_block(block) or scope.is_reduction_block(block):
            continue
        reason = "another block under the loop writes the same buffer" if not scope.is_dominant(block) else \
            "it is neither a complete block nor a reduction block"
        raise ScheduleError(
            f"{op}: loop {loop.loop_var.name!r} does not have a compact dataflow: block "
            f"{block.name_hint!r} under it is not allowed ({reason})")
