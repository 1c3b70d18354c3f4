"""Block primitives of `Schedule`: caching, moving, inlining and reduction rewrites of blocks.

TVM's TensorIR semantics (tvm.s_tir.Schedule) over msdb's IR. Each public method validates its
arguments, applies the rewrite through `self._state` inside `self._atomic()` (so an illegal use
raises `ScheduleError` and leaves the schedule untouched), records an `Instruction` with TVM's
layout and returns the BlockRVs TVM returns. The rewrites themselves live in `_block_*.py`
modules, one per family, so this file reads as the API.

Block naming follows TVM 0.27 and keeps names unique: cache_read/cache_write create
`<buffer>_<scope>` blocks, decompose_reduction creates `<name>_init` and renames the update to
`<name>_update`, rfactor creates `<name>_rf` (the write-back block keeps `<name>`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from msdb.errors import ScheduleError
from msdb.ir import expr as E
from msdb.schedule import _block_cache, _block_compute_at, _block_inline, _block_reduction
from msdb.schedule._block_tree import with_block
from msdb.schedule.rv import BlockRV, LoopRV

if TYPE_CHECKING:
    from msdb.schedule.state import ScheduleState

#: Symbol-table values of the special LoopRVs `sample_compute_location` returns for its
#: decisions -1 (leave the block where it is: "compute root") and -2 (inline the block).
ROOT_MARK = "root"
INLINE_MARK = "inline"


class BlockPrimitives:
    """Mixin with the block primitives; `Schedule` provides the internal API it uses
    (`_state`, `_func_name`, `_atomic`, `_record`, `_block_name`, `_lookup`, `_new_block_rv`)."""

    _state: ScheduleState
    _func_name: str
    _symbols: dict[Any, Any]

    # ---- caching ----
    def cache_read(self, block: BlockRV, read_buffer_index: int, storage_scope: str,
                   consumer_blocks: Sequence[BlockRV] | None = None) -> BlockRV:
        """Read buffer `block.reads[read_buffer_index]` through a new buffer
        `<name>_<storage_scope>` that a new copy block `<name>_<storage_scope>` fills.

        Requires: the index names one of the block's read regions; at most one block of the
        scope writes the buffer. Every reader of the buffer in the scope (or only
        `consumer_blocks`) then reads the copy. An input buffer's copy goes first in the
        scope; an intermediate buffer's copy goes right after its producer.

        Before: `C[i, j] += A[i, k] * B[k, j]`; `sch.cache_read(c, 0, "shared")`;
        after: a block `A_shared[v0, v1] = A[v0, v1]` over the whole of A, then
        `C[i, j] += A_shared[i, k] * B[k, j]`. Returns the copy block.
        """
        with self._atomic():  # type: ignore[attr-defined]
            name = self._block_name(block)  # type: ignore[attr-defined]
            consumers = [self._block_name(b) for b in (consumer_blocks or [])]  # type: ignore[attr-defined]
            new_name = _block_cache.cache_read(self._state, self._func_name, name, _index(read_buffer_index),
                                               str(storage_scope), consumers)
            rv = self._new_block_rv(new_name)  # type: ignore[attr-defined]
            self._record("CacheRead", [block, list(consumer_blocks or [])],  # type: ignore[attr-defined]
                         [int(read_buffer_index), str(storage_scope)], [rv])
        return rv

    def cache_write(self, block: BlockRV, write_buffer_index: int, storage_scope: str,
                    consumer_blocks: Sequence[BlockRV] | None = None) -> BlockRV:
        """Make `block` write a new buffer `<name>_<storage_scope>` and copy it back to the
        original buffer in a new block `<name>_<storage_scope>` placed right after the block's
        loop nest (before its first consumer).

        Requires: the block is the only writer of the buffer in its scope.
        `consumer_blocks` read the cache directly instead of the original buffer.

        Before: `C[i, j] += A[i, k] * B[k, j]`; `sch.cache_write(c, 0, "global")`;
        after: `C_global[i, j] += ...` then a block `C[v0, v1] = C_global[v0, v1]`.
        The original block keeps its name; returns the copy block ("C_global").
        """
        with self._atomic():  # type: ignore[attr-defined]
            name = self._block_name(block)  # type: ignore[attr-defined]
            consumers = [self._block_name(b) for b in (consumer_blocks or [])]  # type: ignore[attr-defined]
            new_name = _block_cache.cache_write(self._state, self._func_name, name, _index(write_buffer_index),
                                                str(storage_scope), consumers)
            rv = self._new_block_rv(new_name)  # type: ignore[attr-defined]
            self._record("CacheWrite", [block, list(consumer_blocks or [])],  # type: ignore[attr-defined]
                         [int(write_buffer_index), str(storage_scope)], [rv])
        return rv

    # ---- moving ----
    def compute_at(self, block: BlockRV, loop: LoopRV, preserve_unit_loops: bool = False, index: int = -1) -> None:
        """Move a producer block under `loop` of its consumers, computing per iteration of
        `loop` exactly the region the consumers under it read.

        Requires: block and loop in the same scope, the loop does not enclose the block, the
        block is complete or a reduction and writes no output buffer, and every consumer of
        the block is under the loop (after every producer of the block there).
        New loops `ax0, ax1, ...` cover the block's iter vars; unit loops are dropped unless
        `preserve_unit_loops`. `index`: -1 right before the first consumer, -2 right after the
        last producer, or an explicit position among the loop's children.

        Before: `for i: B[i] = A[i]` / `for i0, i1: C[i0*4+i1] = B[i0*4+i1]`;
        `sch.compute_at(b, i0)`; after: `for i0: (for ax0 in 4: B[i0*4+ax0] = ...; for i1: C...)`.
        A LoopRV from `sample_compute_location` meaning "root" leaves the block in place, one
        meaning "inline" inlines it.

        Beyond TVM's checks, msdb refuses moves that TVM accepts but that change the result:
        a block whose predicate says more than "iter vars inside their domains" (it would be
        dropped), and a reduction block that a loop of its new place would repeat inside its
        own reduction loops.
        """
        self._move(block, loop, preserve_unit_loops, index, reverse=False)

    def reverse_compute_at(self, block: BlockRV, loop: LoopRV, preserve_unit_loops: bool = False,
                           index: int = -1) -> None:
        """Move a consumer block under `loop` of its producers, consuming per iteration of
        `loop` exactly the region the producers under it write.

        Requires: block and loop in the same scope, the loop does not enclose the block, the
        block is complete or a reduction, and every producer of the block is under the loop.

        Also refused (TVM accepts them and changes the result): the cases compute_at refuses,
        and a place where a producer under the loop is still reducing over the loop (or one
        around it) while the block's new bindings depend on those loops (it would read partial
        sums).

        Before: `for i0, i1: C[...] = ...` / `for ax0, ax1: D[...] = C[...]`;
        `sch.reverse_compute_at(d, i0, preserve_unit_loops=True)`; after: the copy loop nest
        sits inside `i0`, covering the tile of C that one iteration of `i0` produced.
        """
        self._move(block, loop, preserve_unit_loops, index, reverse=True)

    def _move(self, block: BlockRV, loop: LoopRV, preserve_unit_loops: bool, index: int, reverse: bool) -> None:
        kind = "ReverseComputeAt" if reverse else "ComputeAt"
        with self._atomic():  # type: ignore[attr-defined]
            name = self._block_name(block)  # type: ignore[attr-defined]
            target = self._lookup(loop, LoopRV)  # type: ignore[attr-defined]
            if isinstance(target, E.Var):
                _block_compute_at.compute_at(self._state, self._func_name, name, target, bool(preserve_unit_loops),
                                             _index(index), reverse)
            elif target == INLINE_MARK:
                if reverse:
                    _block_inline.reverse_compute_inline(self._state, self._func_name, name)
                else:
                    _block_inline.compute_inline(self._state, self._func_name, name)
            elif target != ROOT_MARK:  # the root location leaves the block where it is (TVM)
                raise ScheduleError(f"{kind}: {loop!r} does not stand for a loop")
            self._record(kind, [block, loop], [bool(preserve_unit_loops), int(index)], [])  # type: ignore[attr-defined]

    # ---- inlining ----
    def compute_inline(self, block: BlockRV) -> None:
        """Inline a spatial block into its consumers: every load of the buffer it writes is
        replaced by the value it stores, and the block and its buffer disappear.

        Requires: no init (not a reduction), only spatial iter vars, a single store whose
        indices are distinct iter vars, no write to an output buffer, the only writer of its
        buffer. Before: `B[i] = A[i] * 2` / `C[i] = B[i] + 1`; after: `C[i] = A[i] * 2 + 1`.
        """
        with self._atomic():  # type: ignore[attr-defined]
            name = self._block_name(block)  # type: ignore[attr-defined]
            _block_inline.compute_inline(self._state, self._func_name, name)
            self._record("ComputeInline", [block], [], [])  # type: ignore[attr-defined]

    def reverse_compute_inline(self, block: BlockRV) -> None:
        """Inline an elementwise consumer into its single producer: the producer stores the
        consumer's value straight into the consumer's buffer.

        Requires: the block is complete, its only producer is complete (no reduction) and has
        no other consumer, and it loads the producer's buffer with its iter vars as indices.
        Before: `B[i, j] = A[i, j] * 2` / `C[i, j] = B[j, i] + 1`;
        after: `C[j, i] = A[i, j] * 2 + 1` in the producer block.
        """
        with self._atomic():  # type: ignore[attr-defined]
            name = self._block_name(block)  # type: ignore[attr-defined]
            _block_inline.reverse_compute_inline(self._state, self._func_name, name)
            self._record("ReverseComputeInline", [block], [], [])  # type: ignore[attr-defined]

    # ---- reductions ----
    def decompose_reduction(self, block: BlockRV, loop: LoopRV) -> BlockRV:
        """Split a reduction block into an init block `<name>_init`, placed right before
        `loop` with copies (`<loop>_init`) of the loops under `loop` that its spatial iter
        vars use, and the update block, renamed `<name>_update` (as TVM does; `block` keeps
        pointing at it).

        Requires: a reduction block (with init) and `loop` one of its enclosing loops, above
        every loop its reduction iter vars use, and no loop from `loop` down that repeats the
        block's iterations (one its bindings do not use, or only partly): the hoisted init
        would then run once for several rounds of updates (TVM accepts this and changes the
        result). Returns the init block.
        """
        with self._atomic():  # type: ignore[attr-defined]
            name = self._block_name(block)  # type: ignore[attr-defined]
            loop_var = self._loop_var(loop, "decompose_reduction")
            init_name, update_name = _block_reduction.decompose_reduction(self._state, self._func_name, name, loop_var)
            self._rename_block(name, update_name)
            rv = self._new_block_rv(init_name)  # type: ignore[attr-defined]
            self._record("DecomposeReduction", [block, loop], [], [rv])  # type: ignore[attr-defined]
        return rv

    def rfactor(self, loop: LoopRV, factor_axis: int) -> BlockRV:
        """Factor the reduction over `loop` out: a block `<name>_rf` accumulates partial
        results into a new buffer `<buffer>_rf` (the loop's extent inserted as dimension
        `factor_axis`), and the original block (same name, same BlockRVs) reduces those
        partial results.

        Placement is TVM's: the rfactor block goes into a copy of the block's whole loop nest
        (fresh loops) right before the nest's outermost loop; the write-back block stays where
        the block was, in the original loops (so existing LoopRVs point at the write-back
        nest) minus the ones only other reduction iter vars used. A reduction moved under a
        consumer's loop by compute_at thus keeps its write-back before that consumer.

        Requires: `loop` is serial and encloses exactly one block, a reduction with a
        recognized combiner (+, *, min, max) and identity init; only reduction iter vars use
        it; the block is the first block under its outermost loop; the outermost loop its
        reduction iter vars use encloses nothing else; no unused loop of extent > 1 sits
        below a reduction loop. Returns the rfactor block.
        """
        with self._atomic():  # type: ignore[attr-defined]
            loop_var = self._loop_var(loop, "rfactor")
            rf_name = _block_reduction.rfactor(self._state, self._func_name, loop_var, _index(factor_axis))
            rv = self._new_block_rv(rf_name)  # type: ignore[attr-defined]
            self._record("RFactor", [loop], [int(factor_axis)], [rv])  # type: ignore[attr-defined]
        return rv

    # ---- annotations ----
    def storage_align(self, block: BlockRV, buffer_index: int, axis: int, factor: int, offset: int) -> None:
        """Ask for dimension `axis` of the block's `buffer_index`-th written buffer to have a
        stride with `stride % factor == offset` (TVM's padding against bank conflicts).

        Recorded like TVM as the block annotation "buffer_dim_align": a list of
        `[buffer_index, axis, factor, offset]`, one per (buffer, axis), a later call for the
        same pair replacing the earlier one.
        """
        with self._atomic():  # type: ignore[attr-defined]
            name = self._block_name(block)  # type: ignore[attr-defined]
            blk = self._state.block(self._func_name, name)
            buffer_index, axis, factor, offset = (_index(buffer_index), _index(axis), _index(factor), _index(offset))
            where = f"storage_align: block {name!r}"
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
            if not 0 <= offset < factor:
                raise ScheduleError(f"{where}: offset must be in [0, factor), got {offset} with factor {factor}")
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
            self._state.replace(self._func_name, blk, with_block(blk, annotations=annotations))
            self._record("StorageAlign", [block], [buffer_index, axis, factor, offset],  # type: ignore[attr-defined]
                         [])

    # ---- helpers ----
    def _loop_var(self, loop: LoopRV, prim: str) -> E.Var:
        target = self._lookup(loop, LoopRV)  # type: ignore[attr-defined]
        if not isinstance(target, E.Var):
            raise ScheduleError(f"{prim}: {loop!r} does not stand for a loop (it is the {target!r} location)")
        self._state.loop(self._func_name, target)
        return target

    def _rename_block(self, old: str, new: str) -> None:
        """Point every BlockRV bound to block `old` at `new` (a primitive renamed it)."""
        if old == new:
            return
        for rv, value in list(self._symbols.items()):
            if isinstance(rv, BlockRV) and value == old:
                self._symbols[rv] = new


def _index(value: Any) -> int:
    """An int argument given as int, IntImm or ExprRV-free integer-like value."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, E.IntImm):
        return value.value
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ScheduleError(f"expected an integer, got {value!r}") from None
