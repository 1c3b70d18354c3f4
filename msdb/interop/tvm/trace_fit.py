"""Whether a record's trace can belong to the workload its line points at, decided without a
replay: the cheap check `msdb import` runs on every record, which catches a record file paired
with the wrong workload file.

Block names of `GetSBlock` and loop counts of `GetLoops` are checked where they are sound, once
per sketch, workload and pair. See docs/architecture.md, "TVM interop" and "One record's way".
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from msdb.ir.function import IRModule

__all__ = ["TraceRefs", "WorkloadBlocks", "trace_refs", "workload_blocks", "misfit"]

#: Kinds that leave every loop nest of the workload as it was (they read the schedule, sample,
#: annotate or change a loop's kind, not its existence).
_LOOP_SAFE = frozenset({
    "GetSBlock", "GetBlock", "GetLoops", "GetChildBlocks", "GetProducers", "GetConsumers", "GetOutputBlocks",
    "Annotate", "Unannotate", "SamplePerfectTile", "SampleCategorical", "SampleComputeLocation",
    "SamplePartitionedTile", "Parallel", "Vectorize", "Unroll", "Bind", "StorageAlign", "SetScope",
})
#: Kinds that neither create nor rename a block (they may move, inline or re-tile one).
_BLOCK_SAFE = _LOOP_SAFE | {"Split", "Fuse", "Reorder", "ComputeAt", "ReverseComputeAt", "ComputeInline",
                            "ReverseComputeInline", "AddUnitLoop"}
_GET_BLOCK = frozenset({"GetSBlock", "GetBlock"})


class TraceRefs(NamedTuple):
    """What a trace's sound prefix says about its workload: `blocks` as (instruction index,
    block name), `loops` as (instruction index, block name, loops returned)."""

    blocks: tuple[tuple[int, str], ...]
    loops: tuple[tuple[int, str, int], ...]


class WorkloadBlocks:
    """A workload's blocks by name, with the loops around each (-1 where two blocks of one
    name disagree: such a count is not checked). Small and picklable: parsing workers get it
    instead of the IR."""

    __slots__ = ("loops",)

    def __init__(self, loops: dict[str, int]) -> None:
        self.loops = loops

    def __getstate__(self) -> dict[str, int]:
        return self.loops

    def __setstate__(self, state: dict[str, int]) -> None:
        self.loops = state


def trace_refs(insts: list[Any]) -> TraceRefs | None:
    """The checkable facts of well-formed instructions (`[kind, inputs, attrs, outputs]` each),
    or None when there are none."""
    blocks: list[tuple[int, str]] = []
    loops: list[tuple[int, str, int]] = []
    rv_blocks: dict[str, str] = {}
    loops_sound = True
    for i, (kind, inputs, attrs, outputs) in enumerate(insts):
        if kind not in _BLOCK_SAFE:
            break
        if kind in _GET_BLOCK:
            if attrs and type(attrs[0]) is str:
                blocks.append((i, attrs[0]))
                if len(outputs) == 1 and type(outputs[0]) is str:
                    rv_blocks[outputs[0]] = attrs[0]
        elif kind == "GetLoops":
            if loops_sound and len(inputs) == 1 and type(inputs[0]) is str and inputs[0] in rv_blocks:
                loops.append((i, rv_blocks[inputs[0]], len(outputs)))
        elif kind not in _LOOP_SAFE:
            loops_sound = False
    if not blocks:
        return None
    return TraceRefs(tuple(blocks), tuple(loops))


def workload_blocks(mod: IRModule) -> WorkloadBlocks:
    """The blocks of every function of `mod` with the loops between each and its enclosing
    block (TVM's `get_loops`: the `For`s above a block up to the next block; `if` and `let`
    between them do not count)."""
    from msdb.ir import stmt as S

    loops: dict[str, int] = {}
    stack: list[tuple[Any, int]] = [(func.body, 0) for func in mod.functions.values()]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, S.For):
            stack.append((node.body, depth + 1))
        elif isinstance(node, (S.BlockRealize, S.Block)):
            block = node.block if isinstance(node, S.BlockRealize) else node
            name = block.name_hint
            loops[name] = depth if loops.get(name, depth) == depth else -1
            stack.append((block.body, 0))
            if block.init is not None:
                stack.append((block.init, 0))
        elif isinstance(node, S.SeqStmt):
            stack.extend((item, depth) for item in node.seq)
        elif isinstance(node, S.IfThenElse):
            stack.append((node.then_case, depth))
            if node.else_case is not None:
                stack.append((node.else_case, depth))
        elif isinstance(node, S.LetStmt):
            stack.append((node.body, depth))
    return WorkloadBlocks(loops)


def misfit(refs: TraceRefs, blocks: WorkloadBlocks) -> str | None:
    """Why a trace with `refs` cannot belong to a workload with `blocks`, or None."""
    have = blocks.loops
    for i, name in refs.blocks:
        if name not in have:
            shown = ", ".join(sorted(have)[:8]) + (", ..." if len(have) > 8 else "")
            return f"trace instruction {i} gets block {name!r}, which the workload does not have (its blocks: {shown})"
    for i, name, n in refs.loops:
        count = have[name]
        if 0 <= count < n:
            return (f"trace instruction {i} gets {n} loops around block {name!r}, but the workload has "
                    f"{count} there")
    return None
