"""`Schedule`: TVM's scheduling primitives over msdb's IR, each recorded into a trace.

TVM's split (docs/architecture.md, "Schedules and traces"): the primitives are functions over
the schedule state (`ScheduleState`: the module and its block tree), in the `prim_*` modules,
and they share one scope analysis (`msdb.schedule.analysis`). `Schedule` is the recording
facade: each method resolves its random variables to what they stand for (a block name, a loop
variable, an integer), calls the primitive function, binds new random variables to what the
primitive created and records the call as an `Instruction` with TVM's layout. A primitive that
raises `ScheduleError` leaves the schedule unchanged and usable: the state, the symbol table,
the trace and the random generator are rolled back.

Random variables stay valid across primitives because they name stable identities: a block by
its name (unique in its function), a loop by its loop `Var` (a rebuilt loop keeps it).
"""

from __future__ import annotations

import contextlib
import random
from typing import Any, Iterator, Sequence

from msdb.errors import ScheduleError
from msdb.ir import expr as E
from msdb.ir.function import IRModule, PrimFunc
from msdb.schedule import (
    prim_annotate,
    prim_blockize,
    prim_cache,
    prim_compute_at,
    prim_for_kind,
    prim_get,
    prim_inline,
    prim_layout,
    prim_loops,
    prim_reduction,
    prim_reindex,
    prim_sampling,
    prim_set_scope,
    prim_tensorize,
)
from msdb.schedule.index_map import IndexMap
from msdb.schedule.instruction import IndexMapInput, Instruction, RawInput
from msdb.schedule.rv import INLINE_MARK, ROOT_MARK, RV, BlockRV, ExprRV, LoopRV, LoopTarget
from msdb.schedule.state import ScheduleState
from msdb.schedule.trace import Trace

__all__ = ["Schedule"]


def _flatten_rvs(items: Sequence[Any]) -> list[Any]:
    """fuse(a, b) and fuse([a, b]) both work, as in TVM's Python API."""
    out: list[Any] = []
    for item in items:
        if isinstance(item, (list, tuple)):
            out.extend(item)
        else:
            out.append(item)
    return out


def _buffer_access(buffer: tuple[str, int] | int, buffer_index_type: int | None, op: str) -> tuple[int, int]:
    """(index, 0 for a read or 1 for a write) of TVM's `buffer=("read", 0)` or of a trace's
    two attributes."""
    if isinstance(buffer, tuple) and len(buffer) == 2 and buffer[0] in ("read", "write"):
        return _index(buffer[1]), 0 if buffer[0] == "read" else 1
    if buffer_index_type in (0, 1) and not isinstance(buffer, (tuple, list)):
        return _index(buffer), int(buffer_index_type)
    raise ScheduleError(f"{op}: the buffer must be (\"read\", index) or (\"write\", index), got {buffer!r}")


def _index(value: Any) -> int:
    """An integer argument given as an int, a bool or an IntImm."""
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


class Schedule:
    """A schedule of an IRModule (a lone PrimFunc is treated as {"main": f}).

    `seed` makes sampling deterministic: the same seed and the same calls give the same
    decisions. Every primitive is recorded in `trace`.
    """

    def __init__(self, mod: IRModule | PrimFunc, seed: int | None = None) -> None:
        if isinstance(mod, PrimFunc):
            mod = IRModule.from_func(mod)
        if not isinstance(mod, IRModule):
            raise TypeError(f"Schedule expects an IRModule or PrimFunc, got {type(mod).__name__}")
        self._state = ScheduleState(mod)
        self._func_name: str = "main" if "main" in mod.functions or len(mod.functions) != 1 else next(iter(mod.functions))
        self._symbols: dict[RV, Any] = {}
        self._insts: list[Instruction] = []
        self._decisions: dict[Instruction, Any] = {}
        self._seed = seed
        self._rng = random.Random(seed if seed is not None else random.SystemRandom().randrange(1, 2**31))
        self._rng_frames: list[list[Any]] = []

    # =========================================================================================
    # The schedule itself
    # =========================================================================================

    @property
    def mod(self) -> IRModule:
        """The module as transformed so far."""
        return self._state.mod

    @property
    def state(self) -> ScheduleState:
        """The schedule state the primitives work on (TVM's `Schedule.state`)."""
        return self._state

    @property
    def func_name(self) -> str:
        """The function the primitives work on."""
        return self._func_name

    def work_on(self, func_name: str) -> None:
        """Direct later primitives (get_block without func_name) at `func_name`."""
        self._state.func(func_name)
        self._func_name = func_name

    @property
    def trace(self) -> Trace:
        """The instructions recorded so far, with their sampling decisions."""
        return Trace(tuple(self._insts), dict(self._decisions))

    def copy(self, seed: int | None = None) -> Schedule:
        """An independent schedule in the same state: same RVs, same trace, forked RNG state
        (or, with `seed`, an RNG seeded anew: copying the generator's state costs more than the
        rest of the copy, and a replay resumed from a copy reseeds it anyway)."""
        clone = Schedule.__new__(Schedule)
        clone._state = self._state.copy()
        clone._func_name = self._func_name
        clone._symbols = dict(self._symbols)
        clone._insts = list(self._insts)
        clone._decisions = dict(self._decisions)
        if seed is None:
            clone._seed = self._seed
            clone._rng = random.Random()
            clone._rng.setstate(self._rng.getstate())
        else:
            clone._seed = seed
            clone._rng = random.Random(seed)
        clone._rng_frames = []
        return clone

    def seed(self, seed: int) -> None:
        """Reseed the sampler."""
        self._seed = seed
        self._rng = random.Random(seed)

    def fork_seed(self) -> int:
        """A new seed drawn from this schedule's RNG (for child schedules)."""
        return self._rng.randrange(1, 2**31)

    def get(self, rv: RV | int) -> Any:
        """What an RV stands for now: a Block, a For (or the "root"/"inline" mark of a sampled
        compute location), or an int (for an ExprRV)."""
        if isinstance(rv, BlockRV):
            return self._state.block(self._func_name, self._block_name(rv))
        if isinstance(rv, LoopRV):
            target = self._lookup(rv, LoopRV)
            return target if isinstance(target, str) else self._state.loop(self._func_name, target)
        if isinstance(rv, ExprRV):
            return self._value(rv)
        if isinstance(rv, int):
            return rv
        raise TypeError(f"get() expects a BlockRV, LoopRV or ExprRV, got {type(rv).__name__}")

    def has_block(self, block: BlockRV) -> bool:
        """Whether the block an RV stands for still exists (TVM's HasBlock: an inlined block
        does not)."""
        try:
            self._state.block(self._func_name, self._block_name(block))
        except (ScheduleError, LookupError):
            return False
        return True

    def remove_rv(self, rv: RV) -> None:
        """Forget an RV (TVM's RemoveRV)."""
        self._symbols.pop(rv, None)

    # =========================================================================================
    # Resolving, binding and recording (private to the facade)
    # =========================================================================================

    def _lookup(self, rv: RV, kind: type) -> Any:
        if not isinstance(rv, kind):
            raise ScheduleError(f"expected a {kind.__name__}, got {type(rv).__name__}")
        try:
            return self._symbols[rv]
        except KeyError:
            raise ScheduleError(f"{kind.__name__} {rv!r} does not belong to this schedule (or was removed)") from None

    def _block_name(self, rv: BlockRV) -> str:
        name: str = self._lookup(rv, BlockRV)
        return name

    def _loop_var(self, rv: LoopRV) -> E.Var:
        """The variable of the loop a LoopRV stands for, with a clear error for the
        root/inline marks (whether the loop still exists, the primitive asks the state)."""
        target: LoopTarget = self._lookup(rv, LoopRV)
        if isinstance(target, str):
            raise ScheduleError(f"the LoopRV stands for the {target!r} location of sample_compute_location, not a loop")
        return target

    def _target(self, rv: BlockRV | LoopRV, op: str) -> prim_annotate.Target:
        """A block name or a loop variable, for the primitives that take either."""
        if isinstance(rv, BlockRV):
            return self._block_name(rv)
        if isinstance(rv, LoopRV):
            return self._loop_var(rv)
        raise ScheduleError(f"{op}: expected a BlockRV or LoopRV, got {type(rv).__name__}")

    def _value(self, rv: ExprRV | int | E.IntImm) -> int:
        if isinstance(rv, int):
            return rv
        if isinstance(rv, E.IntImm):
            return rv.value
        value: int = self._lookup(rv, ExprRV)
        return value

    def _new_block_rv(self, name: str) -> BlockRV:
        rv = BlockRV()
        self._symbols[rv] = name
        return rv

    def _new_loop_rv(self, target: LoopTarget) -> LoopRV:
        rv = LoopRV()
        self._symbols[rv] = target
        return rv

    def _new_expr_rv(self, value: int) -> ExprRV:
        rv = ExprRV()
        self._symbols[rv] = int(value)
        return rv

    def _rename_block(self, old: str, new: str) -> None:
        """Point every BlockRV bound to block `old` at `new` (a primitive renamed it)."""
        if old == new:
            return
        for rv, value in list(self._symbols.items()):
            if isinstance(rv, BlockRV) and value == old:
                self._symbols[rv] = new

    def _record(self, kind: str, inputs: Sequence[Any], attrs: Sequence[Any], outputs: Sequence[Any],
                decision: Any = None) -> None:
        inst = Instruction(kind, tuple(inputs), tuple(attrs), tuple(outputs))
        self._insts.append(inst)
        if decision is not None:
            self._decisions[inst] = decision

    @contextlib.contextmanager
    def _atomic(self) -> Iterator[None]:
        """On ScheduleError, restore the state, the symbol table, the trace and the random
        generator as they were on entry (nested uses restore to their own entry)."""
        # The RNG state (a 625-word tuple) is saved lazily, by `_sampler()`, only when a
        # primitive inside actually draws: most primitives never do, and copying it for every
        # instruction was the largest single cost of replaying a trace.
        frame: list[Any] = [None]
        self._rng_frames.append(frame)
        saved = (self._state.copy(), dict(self._symbols), len(self._insts), dict(self._decisions))
        try:
            yield
        except ScheduleError:
            state, symbols, n_insts, decisions = saved
            self._state = state
            self._symbols = symbols
            del self._insts[n_insts:]
            self._decisions = decisions
            if frame[0] is not None:
                self._rng.setstate(frame[0])
            raise
        finally:
            self._rng_frames.pop()

    def _sampler(self) -> random.Random:
        """The RNG, for a primitive about to draw from it: first saves its state in every
        enclosing `_atomic()` that has not saved it yet, so a failure can rewind it."""
        frames = self._rng_frames
        if frames and frames[-1][0] is None:
            state = self._rng.getstate()
            for frame in frames:
                if frame[0] is None:
                    frame[0] = state
        return self._rng

    # =========================================================================================
    # Getters
    # =========================================================================================

    def get_block(self, name: str, func_name: str | None = None) -> BlockRV:
        """The block named `name` in `func_name` (default: the function worked on).

        Requires: a block of that name exists. Recorded as TVM's "GetSBlock" with attrs
        [name, function name]."""
        with self._atomic():
            saved_func = self._func_name
            try:
                if func_name is not None and func_name != self._func_name:
                    self._state.func(func_name)
                    self._func_name = func_name
                self._state.block(self._func_name, name)
            except ScheduleError:
                self._func_name = saved_func
                raise
            rv = self._new_block_rv(name)
            self._record("GetSBlock", [], [name, self._func_name], [rv])
            return rv

    get_sblock = get_block

    def get_loops(self, block: BlockRV) -> list[LoopRV]:
        """The loops around `block`, outermost first, up to its scope block."""
        with self._atomic():
            loop_vars = prim_get.get_loops(self._state, self._func_name, self._block_name(block))
            rvs = [self._new_loop_rv(v) for v in loop_vars]
            self._record("GetLoops", [block], [], rvs)
            return rvs

    def get_child_blocks(self, block_or_loop: BlockRV | LoopRV) -> list[BlockRV]:
        """The blocks directly under a block or loop (not those nested in other blocks), in
        execution order."""
        with self._atomic():
            if not isinstance(block_or_loop, (BlockRV, LoopRV)):
                raise ScheduleError(f"get_child_blocks expects a BlockRV or LoopRV, got {type(block_or_loop).__name__}")
            names = prim_get.get_child_blocks(self._state, self._func_name,
                                              self._target(block_or_loop, "get_child_blocks"))
            rvs = [self._new_block_rv(n) for n in names]
            self._record("GetChildBlocks", [block_or_loop], [], rvs)
            return rvs

    def get_producers(self, block: BlockRV) -> list[BlockRV]:
        """Blocks of the same scope that write what `block` reads or writes before it (RAW and
        WAW dependencies), in TVM's order."""
        with self._atomic():
            names = prim_get.get_producers(self._state, self._func_name, self._block_name(block))
            rvs = [self._new_block_rv(n) for n in names]
            self._record("GetProducers", [block], [], rvs)
            return rvs

    def get_consumers(self, block: BlockRV) -> list[BlockRV]:
        """Blocks of the same scope that read or rewrite what `block` writes after it."""
        with self._atomic():
            names = prim_get.get_consumers(self._state, self._func_name, self._block_name(block))
            rvs = [self._new_block_rv(n) for n in names]
            self._record("GetConsumers", [block], [], rvs)
            return rvs

    # =========================================================================================
    # Loop transformations
    # =========================================================================================

    def split(self, loop: LoopRV, factors: Sequence[int | ExprRV | E.PrimExpr | None],
              preserve_unit_iters: bool = True, disable_predication: bool = False) -> list[LoopRV]:
        """Split a loop into nested loops, outermost first.

        Requires: the loop starts at 0 and has no annotation or thread binding; every factor is
        positive; at most one factor is None (inferred as ceil(extent / product of the
        others)); the product covers the extent. When the product exceeds the extent, the
        blocks directly under the loop get the predicate `i_0 * f1 + i_1 < extent` (unless
        `disable_predication`).

        Before: `for i in range(16): C[vi] ...  (vi = i)`
        Call:   `i_0, i_1 = sch.split(i, [None, 4])`
        After:  `for i_0, i_1 in T.grid(4, 4): ... (vi = i_0 * 4 + i_1)`
        """
        with self._atomic():
            loop_var = self._loop_var(loop)
            factor_list = list(factors)
            resolved = [self._value(f) if isinstance(f, ExprRV) else f for f in factor_list]
            new_vars = prim_loops.split(self._state, self._func_name, loop_var, resolved, bool(preserve_unit_iters),
                                        bool(disable_predication))
            rvs = [self._new_loop_rv(v) for v in new_vars]
            self._record("Split", [loop, *factor_list], [bool(preserve_unit_iters), bool(disable_predication)], rvs)
            return rvs

    def fuse(self, *loops: LoopRV | Sequence[LoopRV], preserve_unit_iters: bool = True) -> LoopRV:
        """Fuse a chain of directly nested loops into one (`i_j_fused`).

        Requires: each loop is the only statement in the body of the previous one, no loop has
        annotations or a thread binding, all start at 0, and no extent depends on an outer
        loop of the chain.

        Before: `for i, j in T.grid(4, 8): ... (vi = i, vj = j)`
        Call:   `f = sch.fuse(i, j)`
        After:  `for i_j_fused in range(32): ... (vi = i_j_fused // 8, vj = i_j_fused % 8)`
        """
        rvs = _flatten_rvs(loops)
        with self._atomic():
            loop_vars = [self._loop_var(rv) for rv in rvs]
            fused = prim_loops.fuse(self._state, self._func_name, loop_vars, bool(preserve_unit_iters))
            rv = self._new_loop_rv(fused)
            self._record("Fuse", rvs, [bool(preserve_unit_iters)], [rv])
            return rv

    def reorder(self, *ordered_loops: LoopRV | Sequence[LoopRV]) -> None:
        """Reorder loops of one nest: the given loops take each other's positions in the given
        order (outermost first); loops between them that are not given stay where they are.

        Requires: the loops are distinct and lie on one chain of directly nested loops (each
        loop between the outermost and the innermost given loop is the only statement of its
        parent), under one scope; the blocks under them have only spatial or reduction iter
        vars; no outer loop's range depends on an inner loop in the new order.

        Before: `for i, j, k in T.grid(...)`
        Call:   `sch.reorder(k, i)`
        After:  `for k, j, i in T.grid(...)`
        """
        rvs = _flatten_rvs(ordered_loops)
        with self._atomic():
            prim_loops.reorder(self._state, self._func_name, [self._loop_var(rv) for rv in rvs])
            self._record("Reorder", rvs, [], [])

    # ---- loop kinds ----

    def parallel(self, loop: LoopRV) -> None:
        """Mark a loop parallel.

        Requires: the blocks under the loop form a compact dataflow (each is a complete or
        reduction block that is the only writer of its outputs within the loop), and the
        loop variable feeds only spatial iter vars."""
        with self._atomic():
            prim_for_kind.parallel(self._state, self._func_name, self._loop_var(loop))
            self._record("Parallel", [loop], [], [])

    def vectorize(self, loop: LoopRV) -> None:
        """Mark a loop vectorized (same requirements as `parallel`)."""
        with self._atomic():
            prim_for_kind.vectorize(self._state, self._func_name, self._loop_var(loop))
            self._record("Vectorize", [loop], [], [])

    def bind(self, loop: LoopRV, thread_axis: str) -> None:
        """Bind a loop to a GPU thread axis ("blockIdx.x", "threadIdx.y", "vthread.x", ...).

        Requires: as `parallel`, except that a reduction iter var may be fed when the axis is
        threadIdx.x/y/z (cross-thread reduction)."""
        with self._atomic():
            prim_for_kind.bind(self._state, self._func_name, self._loop_var(loop), thread_axis)
            self._record("Bind", [loop], [thread_axis], [])

    def unroll(self, loop: LoopRV) -> None:
        """Mark a loop unrolled (always legal)."""
        with self._atomic():
            prim_for_kind.unroll(self._state, self._func_name, self._loop_var(loop))
            self._record("Unroll", [loop], [], [])

    # =========================================================================================
    # Annotations
    # =========================================================================================

    def annotate(self, block_or_loop: BlockRV | LoopRV, ann_key: str, ann_val: Any) -> None:
        """Set annotation `ann_key` of a block or loop to `ann_val` (str, int, float, bool, a
        list of them, or an ExprRV, stored as its integer value)."""
        with self._atomic():
            value = self._value(ann_val) if isinstance(ann_val, ExprRV) else ann_val
            prim_annotate.annotate(self._state, self._func_name, self._target(block_or_loop, "annotate"), ann_key,
                                   value)
            self._record("Annotate", [block_or_loop, ann_val], [ann_key], [])

    def unannotate(self, block_or_loop: BlockRV | LoopRV, ann_key: str) -> None:
        """Remove annotation `ann_key` from a block or loop.

        Requires: the annotation is present."""
        with self._atomic():
            prim_annotate.unannotate(self._state, self._func_name, self._target(block_or_loop, "unannotate"), ann_key)
            self._record("Unannotate", [block_or_loop], [ann_key], [])

    def storage_align(self, block: BlockRV, buffer_index: int, axis: int, factor: int, offset: int) -> None:
        """Ask for dimension `axis` of the block's `buffer_index`-th written buffer to have a
        stride with `stride % factor == offset` (TVM's padding against bank conflicts).

        Recorded like TVM as the block annotation "buffer_dim_align": a list of
        `[buffer_index, axis, factor, offset]`, one per (buffer, axis), a later call for the
        same pair replacing the earlier one.
        """
        with self._atomic():
            name = self._block_name(block)
            buffer_index, axis, factor, offset = (_index(buffer_index), _index(axis), _index(factor), _index(offset))
            prim_annotate.storage_align(self._state, self._func_name, name, buffer_index, axis, factor, offset)
            # TVM records the axis as given (-2), the annotation holds it normalized
            self._record("StorageAlign", [block], [buffer_index, axis, factor, offset], [])

    def set_scope(self, block: BlockRV, buffer_index: int, storage_scope: str) -> None:
        """Move the block's `buffer_index`-th written buffer to storage `storage_scope`
        ("shared", "local", ...) everywhere it is used.

        Requires: the buffer is allocated by a block (not a function parameter) and the scope
        is one TVM knows. Setting the scope the buffer already has changes nothing.

        Before: `T_softmax_maxelem = T.alloc_buffer((256,))`;
        `sch.set_scope(b, 0, "shared")`; after:
        `T_softmax_maxelem_shared = T.alloc_buffer((256,), scope="shared")` (same name).
        """
        with self._atomic():
            index = _index(buffer_index)
            prim_set_scope.set_scope(self._state, self._func_name, self._block_name(block), index, str(storage_scope))
            self._record("SetScope", [block], [index, str(storage_scope)], [])

    def blockize(self, target: LoopRV, preserve_unit_iters: bool = True) -> BlockRV:
        """Wrap the loop, the loops under it and the one block they hold into a new block
        `<name>_o` whose iter vars are the outer parts of the block's bindings; the block
        keeps the inner parts (see `msdb.schedule.prim_blockize`).

        Requires: the loop holds exactly one block, without a predicate, whose bindings
        divide at the loop (`outer * inner_extent + inner`). A reduction's init moves to the
        outer block as `<name>_init`.

        Before: `for k_0, k_1 in T.grid(256, 4): C[i, j] += A[i, k_0 * 4 + k_1] ...`;
        `sch.blockize(k_1)`; after: a block `C_o` (v_k_o bound to k_0) holding `for k_1 in
        range(4)` and the block `C` (v_k_i bound to k_1) reading `A[v_i_o, v_k_o * 4 + v_k_i]`.
        Returns the new outer block.
        """
        with self._atomic():
            if not isinstance(target, LoopRV):
                raise ScheduleError(f"blockize: msdb blockizes a loop, got {type(target).__name__}")
            name = prim_blockize.blockize(self._state, self._func_name, self._loop_var(target),
                                          bool(preserve_unit_iters))
            rv = self._new_block_rv(name)
            self._record("Blockize", [target], [bool(preserve_unit_iters)], [rv])
        return rv

    def tensorize(self, block_or_loop: BlockRV | LoopRV, tensor_intrin: str, preserve_unit_iters: bool = True) -> None:
        """Replace the computation of a block (a loop is blockized first) by the
        implementation of the tensor intrinsic registered as `tensor_intrin`
        (`msdb.schedule.tensor_intrin`), after checking that the block computes what the
        intrinsic's description computes.

        Requires: the block's body matches the description (same loops, same arithmetic, the
        description's buffers mapped onto regions of the block's buffers). The block keeps
        its iter vars, reads and writes; its body becomes the implementation's, with one
        `T.match_buffer` per implementation buffer over the region it maps onto.
        """
        with self._atomic():
            if isinstance(block_or_loop, LoopRV):
                name = prim_blockize.blockize(self._state, self._func_name, self._loop_var(block_or_loop),
                                              bool(preserve_unit_iters))
            else:
                name = self._block_name(block_or_loop)
            prim_tensorize.tensorize(self._state, self._func_name, name, str(tensor_intrin))
            self._record("Tensorize", [block_or_loop], [str(tensor_intrin), bool(preserve_unit_iters)], [])

    # =========================================================================================
    # Layouts
    # =========================================================================================

    def reindex(self, block: BlockRV, buffer: tuple[str, int] | int, buffer_index_type: int | None = None) -> BlockRV:
        """Make the block access one of its buffers by its own iter vars, through a new buffer
        `<name>_reindex` and a copy block (see `msdb.schedule.prim_reindex`). `buffer` is
        ("read", i) or ("write", i) as in TVM (or the index, with `buffer_index_type` 0 for a
        read and 1 for a write, as a trace records it).

        Requires: a leaf block accessing the buffer with one index pattern, under loops that
        each hold only the next.

        Before: `C[v_n, v_h, v_w, v_co] += PadInput[v_n, v_h + v_rh, v_w + v_rw, v_rc] * ...`;
        `sch.reindex(b, ("read", 0))`; after: a block `PadInput_reindex_reindex` filling
        `PadInput_reindex[v0, ..., v5] = PadInput[v0, v1 + v3, v2 + v4, v5]` before the conv,
        which reads `PadInput_reindex[v_n, v_h, v_w, v_rh, v_rw, v_rc]`. Returns the copy block.
        """
        with self._atomic():
            index, kind = _buffer_access(buffer, buffer_index_type, "reindex")
            name = prim_reindex.reindex(self._state, self._func_name, self._block_name(block), index, kind)
            rv = self._new_block_rv(name)
            self._record("ReIndex", [block], [index, kind], [rv])
        return rv

    def transform_layout(self, block: BlockRV, buffer: tuple[str, int] | int, index_map: Any,
                         pad_value: Any = None, assume_injective_transform: bool = False,
                         buffer_index_type: int | None = None) -> None:
        """Lay one of the block's buffers out anew: every access `B[i, j]` becomes
        `B'[f(i, j)]` for the index map `f` (a Python function of the indices, an `IndexMap`,
        or the JSON a trace records, whose free variables may name sampled variables), see
        `msdb.schedule.prim_layout`. `buffer` as in `reindex`.

        Requires: a buffer some block allocates; a map that does not pad (no `pad_value`).

        Before: `C_reindex[v_i, v_j] = ...` over (1024, 1024);
        `sch.transform_layout(b, ("write", 0), lambda i, j: (i // 16, j // 16, i % 16, j % 16))`;
        after: `C_reindex` has shape (64, 64, 16, 16), written at
        `[v_i // 16, v_j // 16, v_i % 16, v_j % 16]`.
        """
        with self._atomic():
            index, kind = _buffer_access(buffer, buffer_index_type, "transform_layout")
            recorded, bound = self._index_map(index_map, "transform_layout")
            prim_layout.transform_layout(self._state, self._func_name, self._block_name(block), index, kind, bound,
                                         pad_value, bool(assume_injective_transform))
            self._record("TransformLayout", [block, recorded], [index, kind, pad_value,
                                                                bool(assume_injective_transform)], [])

    def transform_block_layout(self, block: BlockRV, index_map: Any) -> None:
        """Re-index the block's iteration space: new iter vars take the index map's outputs of
        the old ones, new loops run over them (see `msdb.schedule.prim_layout`).

        Requires: the block's loops each hold only the next, bind its iter vars one to one in
        order and start at 0; a bijective affine map.

        Before: `for n, h, w, co in T.grid(1, 56, 56, 64)` around a block over them;
        `sch.transform_block_layout(b, lambda n, h, w, co: (n * 3136 + h * 56 + w, co))`;
        after: `for ax0, ax1 in T.grid(3136, 64)`, the block's iter vars `v0, v1`.
        """
        with self._atomic():
            recorded, bound = self._index_map(index_map, "transform_block_layout", pretty=True)
            if isinstance(recorded, IndexMapInput) and recorded.rvs:
                raise ScheduleError("transform_block_layout: the index map may not use sampled variables")
            prim_layout.transform_block_layout(self._state, self._func_name, self._block_name(block), bound)
            self._record("TransformBlockLayout", [block], [str(recorded)], [])

    def _index_map(self, index_map: Any, op: str, pretty: bool = False) -> tuple[RawInput, IndexMap]:
        """What the trace records for `index_map` (a map made here in TVM's JSON, indented with
        `pretty` as TransformBlockLayout records it) and the map with its sampled variables
        bound."""
        if isinstance(index_map, IndexMapInput):
            recorded = index_map
            parsed = IndexMap.from_json(str(index_map))
        elif isinstance(index_map, str):
            parsed = IndexMap.from_json(index_map)
            recorded = IndexMapInput(index_map, {})
        else:
            parsed = index_map if isinstance(index_map, IndexMap) else IndexMap.from_function(index_map, op)
            recorded = IndexMapInput(parsed.to_json(pretty=pretty), {})
        values = {name: self._value(rv) for name, rv in recorded.rvs.items() if isinstance(rv, ExprRV)}
        return recorded, parsed.bind(values)

    # =========================================================================================
    # Caching
    # =========================================================================================

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
        with self._atomic():
            name = self._block_name(block)
            consumers = [self._block_name(b) for b in (consumer_blocks or [])]
            new_name = prim_cache.cache_read(self._state, self._func_name, name, _index(read_buffer_index),
                                             str(storage_scope), consumers)
            rv = self._new_block_rv(new_name)
            self._record("CacheRead", [block, list(consumer_blocks or [])], [int(read_buffer_index), str(storage_scope)],
                         [rv])
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
        with self._atomic():
            name = self._block_name(block)
            consumers = [self._block_name(b) for b in (consumer_blocks or [])]
            new_name = prim_cache.cache_write(self._state, self._func_name, name, _index(write_buffer_index),
                                              str(storage_scope), consumers)
            rv = self._new_block_rv(new_name)
            self._record("CacheWrite", [block, list(consumer_blocks or [])],
                         [int(write_buffer_index), str(storage_scope)], [rv])
        return rv

    # =========================================================================================
    # Moving and inlining blocks
    # =========================================================================================

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
        with self._atomic():
            name = self._block_name(block)
            target = self._lookup(loop, LoopRV)
            if isinstance(target, E.Var):
                if reverse or not self._state.take_tried(prim_sampling.compute_at_move(
                        self._func_name, name, target, bool(preserve_unit_loops), _index(index))):
                    prim_compute_at.compute_at(self._state, self._func_name, name, target, bool(preserve_unit_loops),
                                               _index(index), reverse)
            elif target == INLINE_MARK:
                if reverse:
                    prim_inline.reverse_compute_inline(self._state, self._func_name, name)
                elif not self._state.take_tried(prim_sampling.inline_move(self._func_name, name)):
                    prim_inline.compute_inline(self._state, self._func_name, name)
            elif target != ROOT_MARK:  # the root location leaves the block where it is (TVM)
                raise ScheduleError(f"{kind}: {loop!r} does not stand for a loop")
            self._record(kind, [block, loop], [bool(preserve_unit_loops), int(index)], [])

    def compute_inline(self, block: BlockRV) -> None:
        """Inline a spatial block into its consumers: every load of the buffer it writes is
        replaced by the value it stores, and the block and its buffer disappear.

        Requires: no init (not a reduction), only spatial iter vars, a single store whose
        indices are distinct iter vars, no write to an output buffer, the only writer of its
        buffer. Before: `B[i] = A[i] * 2` / `C[i] = B[i] + 1`; after: `C[i] = A[i] * 2 + 1`.
        """
        with self._atomic():
            prim_inline.compute_inline(self._state, self._func_name, self._block_name(block))
            self._record("ComputeInline", [block], [], [])

    def reverse_compute_inline(self, block: BlockRV) -> None:
        """Inline an elementwise consumer into its single producer: the producer stores the
        consumer's value straight into the consumer's buffer.

        Requires: the block is complete and has no init, its only producer is complete (no
        reduction; an init of the producer is rewritten like its body, as TVM does) and has no
        other consumer, and it loads the producer's buffer with its iter vars as indices.
        Before: `B[i, j] = A[i, j] * 2` / `C[i, j] = B[j, i] + 1`;
        after: `C[j, i] = A[i, j] * 2 + 1` in the producer block.
        """
        with self._atomic():
            prim_inline.reverse_compute_inline(self._state, self._func_name, self._block_name(block))
            self._record("ReverseComputeInline", [block], [], [])

    # =========================================================================================
    # Reductions
    # =========================================================================================

    def decompose_reduction(self, block: BlockRV, loop: LoopRV) -> BlockRV:
        """Split a reduction block into an init block `<name>_init`, placed right before
        `loop` with copies (`<loop>_init`) of the loops under `loop` that its spatial iter
        vars use, and the update block, renamed `<name>_update` (as TVM does; `block` keeps
        pointing at it).

        Requires: a reduction block and `loop` one of its enclosing loops, above every loop
        its reduction iter vars use, and no loop from `loop` down that repeats the block's
        iterations (one its bindings do not use, or only partly): the hoisted init would then
        run once for several rounds of updates (TVM accepts this and changes the result).
        Returns the init block.
        """
        with self._atomic():
            name = self._block_name(block)
            loop_var = self._loop_var(loop)
            init_name, update_name = prim_reduction.decompose_reduction(self._state, self._func_name, name, loop_var)
            self._rename_block(name, update_name)
            rv = self._new_block_rv(init_name)
            self._record("DecomposeReduction", [block, loop], [], [rv])
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
        with self._atomic():
            loop_var = self._loop_var(loop)
            rf_name = prim_reduction.rfactor(self._state, self._func_name, loop_var, _index(factor_axis))
            rv = self._new_block_rv(rf_name)
            self._record("RFactor", [loop], [int(factor_axis)], [rv])
        return rv

    # =========================================================================================
    # Sampling
    # =========================================================================================

    def sample_perfect_tile(self, loop: LoopRV, n: int, max_innermost_factor: int = 16,
                            decision: Sequence[int] | None = None) -> list[ExprRV]:
        """Sample `n` tile sizes whose product is the loop's extent, the innermost at most
        `max_innermost_factor` (-1: no limit). A given `decision` is used instead of sampling
        (repaired as TVM does if it no longer divides the extent). A loop of non-constant
        extent gives [-1, 1, ..., 1], as in TVM."""
        with self._atomic():
            result = prim_sampling.sample_perfect_tile(self._state, self._func_name, self._loop_var(loop), n,
                                                       max_innermost_factor, decision, self._sampler)
            rvs = [self._new_expr_rv(v) for v in result]
            self._record("SamplePerfectTile", [loop], [n, max_innermost_factor], rvs, decision=list(result))
            return rvs

    def sample_categorical(self, candidates: Sequence[int], probs: Sequence[float],
                           decision: int | None = None) -> ExprRV:
        """Sample one of `candidates` with probabilities `probs`; `decision` is the index to
        use instead of sampling."""
        with self._atomic():
            cands = [int(c) for c in candidates]
            weights = [float(p) for p in probs]
            index = prim_sampling.sample_categorical(cands, weights, decision, self._sampler)
            rv = self._new_expr_rv(cands[index])
            self._record("SampleCategorical", [], [cands, weights], [rv], decision=index)
            return rv

    def sample_compute_location(self, block: BlockRV, decision: int | None = None) -> LoopRV:
        """Sample where `block` could be computed: -2 inline, -1 root (where it is), i the i-th
        loop around its first consumer (TVM's candidate rules). A given `decision` is kept if
        it is still a candidate, else the nearest candidate before it."""
        with self._atomic():
            chosen, target = prim_sampling.sample_compute_location(self._state, self._func_name,
                                                                   self._block_name(block), decision, self._sampler)
            rv = self._new_loop_rv(target)
            self._record("SampleComputeLocation", [block], [], [rv], decision=chosen)
            return rv

    def enter_postproc(self) -> None:
        """Mark the start of post-processing instructions in the trace."""
        self._record("EnterPostproc", [], [], [])
