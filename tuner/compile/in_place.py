"""Which outputs of a function may be written over one of its inputs (docs/architecture.md,
"Compile": `memory_plan`).

Why: a conv whose epilogue adds a residual (ResNet's bottlenecks) reads the residual and writes
its output, two tensors of the same shape; written into the residual's own memory, the output
lands in cache lines the function has just read, instead of lines it must first fetch (a
ResNet-50 stage-1 output is 3.2 MB, more than L2). onnxruntime's NCHWc conv does the same with
its `Sum` input.

The rule is about data flow, so it holds for any schedule of the function: an input may give
its memory to an output when the input is read by one block only, at exactly that block's
iteration indices, and what that block writes (also at its own indices) is read the same way by
one block only, and so on up to the block that writes the output, which nothing else writes.
Then each output element is computed from the input element at the same place, after it is
read, and no other element of the input is read later through the shared memory.
"""

from __future__ import annotations

from dataclasses import dataclass

from msdb.ir import expr as E
from msdb.ir import stmt as S
from msdb.ir.function import PrimFunc
from msdb.ir.functor import post_order_visit

__all__ = ["in_place_inputs"]


def in_place_inputs(func: PrimFunc, inputs: int) -> dict[int, int]:
    """{output position: input position} for the outputs of `func` that may take the memory of
    an input (positions in `func.buffers`; the first `inputs` are the inputs). An input gives
    its memory to one output at most."""
    buffers = func.buffers
    blocks: list[_Accesses] = []

    def collect(node: object) -> None:
        if isinstance(node, S.Block) and node.iter_vars:
            blocks.append(_Accesses.of(node))

    post_order_visit(func.body, collect)
    found: dict[int, int] = {}
    for position in range(inputs):
        source = buffers[position]
        if sum(b is source for b in buffers) != 1:
            continue
        end = _elementwise_chain_end(source, blocks)
        if end is None or end not in buffers[inputs:]:
            continue
        out = buffers.index(end, inputs)
        if out not in found and end.dtype == source.dtype and _same_shape(end, source):
            found[out] = position
    return found


@dataclass(frozen=True)
class _Accesses:
    """A block with the loads and stores of its body, walked once."""

    block: S.Block
    loads: list[E.BufferLoad]
    stores: list[S.BufferStore]

    @staticmethod
    def of(block: S.Block) -> _Accesses:
        loads: list[E.BufferLoad] = []
        stores: list[S.BufferStore] = []

        def collect(node: object) -> None:
            if isinstance(node, E.BufferLoad):
                loads.append(node)
            elif isinstance(node, S.BufferStore):
                stores.append(node)

        post_order_visit(block.body, collect)
        return _Accesses(block, loads, stores)


def _elementwise_chain_end(source: E.Buffer, blocks: list[_Accesses]) -> E.Buffer | None:
    """The buffer at the end of `source`'s chain of elementwise blocks (see the module
    docstring), or None when `source` is read any other way."""
    current = source
    while True:
        readers = [b for b in blocks if any(load.buffer is current for load in b.loads)]
        if not readers:
            return current if current is not source else None
        if len(readers) != 1:
            return None
        reader = readers[0]
        block = reader.block
        if block.init is not None or len(reader.stores) != 1 or not _at_own_indices(block, reader.stores[0].indices):
            return None
        if any(load.buffer is current and not _at_own_indices(block, load.indices) for load in reader.loads):
            return None
        written = reader.stores[0].buffer
        if sum(written is store.buffer for b in blocks for store in b.stores) != 1:
            return None
        current = written


def _at_own_indices(block: S.Block, indices: tuple[E.PrimExpr, ...]) -> bool:
    """The indices are the block's spatial iteration variables, in order."""
    return (len(indices) == len(block.iter_vars)
            and all(iv.iter_type == S.IterType.DATA_PAR and index is iv.var
                    for index, iv in zip(indices, block.iter_vars)))


def _same_shape(a: E.Buffer, b: E.Buffer) -> bool:
    dims_a = [E.const_int(d) for d in a.shape]
    dims_b = [E.const_int(d) for d in b.shape]
    return None not in dims_a and dims_a == dims_b
