"""What the schedule rules ask of a block (docs/architecture.md, "Tuner"): TVM's block
predicates of `schedule/analysis` that only the tuner uses, over msdb's scope analysis
(`msdb.schedule.analysis`), so that every rule and post-processor answers "is this block
spatial / trivially bound / already tiled / worth tiling" the same way.

Each function follows the TVM predicate of the same name (tvm-tuner-facts.md, section 2):
`needs_multi_level_tiling` is NeedsMultiLevelTiling, `needs_rfactor` is
NeedsRFactorOrCrossThreadReduction, `read_write_pattern` is AnalyzeReadWritePattern."""

from __future__ import annotations

from typing import NamedTuple

from msdb.ir import expr as E
from msdb.ir.arith import as_affine
from msdb.ir import stmt as S
from msdb.ir.function import PrimFunc
from msdb.ir.functor import free_vars, post_order_visit
from msdb.schedule import analysis as A
from msdb.schedule.rv import BlockRV
from msdb.schedule.schedule import Schedule

__all__ = [
    "TILING_STRUCTURE", "RANDOM_COMPUTE_PRODUCER", "block_of", "is_root", "is_spatial", "is_spatial_prim_func",
    "loops_of", "consumers", "producers", "is_trivial_binding", "is_tiled", "needs_multi_level_tiling", "ReadWritePattern",
    "read_write_pattern", "is_write_cache", "space_and_reduction_length", "needs_rfactor", "has_if_then_else",
    "uses_ops",
]

TILING_STRUCTURE = "meta_schedule.tiling_structure"
RANDOM_COMPUTE_PRODUCER = "meta_schedule.random_compute_producer"


def block_of(sch: Schedule, block: BlockRV) -> S.Block:
    result: S.Block = sch.get(block)
    return result


def is_root(sch: Schedule, block: BlockRV) -> bool:
    """Whether the block is its function's root block (TVM: its sref has no parent)."""
    return sch.state.parent(sch.func_name, sch.state.realize(sch.func_name, block_of(sch, block).name_hint)) is None


def consumers(sch: Schedule, block: S.Block) -> list[S.Block]:
    """The block's consumers in its scope, without recording an instruction (TVM's rules ask
    the state, not the traced schedule)."""
    return A.scope_of(sch.state, sch.func_name, block).consumers(block)


def producers(sch: Schedule, block: S.Block) -> list[S.Block]:
    """The block's producers in its scope, without recording an instruction."""
    return A.scope_of(sch.state, sch.func_name, block).producers(block)


def is_spatial(block: S.Block) -> bool:
    """Every iter var of the block is data-parallel."""
    return all(iv.iter_type == S.IterType.DATA_PAR for iv in block.iter_vars)


def is_spatial_prim_func(func: PrimFunc) -> bool:
    """Every block of the function is spatial (no reduction anywhere)."""
    spatial = True

    def visit(node: object) -> None:
        nonlocal spatial
        if spatial and type(node) is S.Block and not is_spatial(node):
            spatial = False

    post_order_visit(func.body, visit)
    return spatial


def loops_of(sch: Schedule, block: S.Block) -> list[S.For]:
    """The loops around the block up to its scope block, outermost first (GetLoops)."""
    return A.loops_above(sch.state, sch.func_name, sch.state.realize(sch.func_name, block.name_hint))


def is_trivial_binding(sch: Schedule, block: S.Block) -> bool:
    """Each iter var is bound to exactly the loop variable at its position."""
    loops = loops_of(sch, block)
    values = sch.state.realize(sch.func_name, block.name_hint).iter_values
    return len(loops) == len(values) and all(v is loop.loop_var for v, loop in zip(values, loops))


def is_tiled(block: S.Block) -> bool:
    """The block was already tiled by MultiLevelTiling (HasBeenMultiLevelTiled)."""
    return TILING_STRUCTURE in block.annotations


def needs_multi_level_tiling(sch: Schedule, block: S.Block) -> bool:
    """A reduction-like block with one write, trivially bound, whose reads reuse data: some
    non-unit spatial iter var does not index some read buffer (matmul, conv; not pooling)."""
    if is_tiled(block) or len(block.writes) != 1 or not block.reads or is_spatial(block):
        return False
    if not is_trivial_binding(sch, block):
        return False
    write_buffer = block.writes[0].buffer
    spatial_vars = [iv.var for iv in block.iter_vars if iv.iter_type == S.IterType.DATA_PAR
                    and not (iv.dom is not None and E.const_int(iv.dom.min) == 0 and E.const_int(iv.dom.extent) == 1)]
    seen: set[int] = set()
    unused = 0
    for region in block.reads:
        if id(region.buffer) in seen:
            return False
        seen.add(id(region.buffer))
        if region.buffer is write_buffer:
            continue
        used: set[E.Var] = set()
        for rng in region.region:
            if E.const_int(rng.extent) is None:
                return False
            used |= free_vars(rng.min)
        unused += sum(1 for var in spatial_vars if var not in used)
    return unused >= 1


class ReadWritePattern(NamedTuple):
    exists: bool
    surjective: bool
    injective: bool
    ordered: bool
    no_const_read: bool
    no_shift_read: bool


_NO_PATTERN = ReadWritePattern(False, False, False, False, False, False)


def _var_with_shift(expr: E.PrimExpr) -> tuple[E.Var | None, bool]:
    """(var, shifted) when `expr` is a variable plus a constant (TVM's AnalyzeVarWithShift),
    read through msdb's one affine reader."""
    form = as_affine(expr)
    if form is None or len(form.terms) != 1:
        return None, False
    ((var, coef),) = form.terms.items()
    return (var, form.const != 0) if coef == 1 else (None, False)


def read_write_pattern(read: S.BufferRegion, write: S.BufferRegion) -> ReadWritePattern:
    """How the read region's indices map onto the write region's (each write index must be a
    plain variable): whether every write index is read (surjective), at most once (injective),
    in order, and whether reads use constants or shifted variables."""
    position: dict[E.Var, int] = {}
    for i, rng in enumerate(write.region):
        if E.const_int(rng.extent) is None or type(rng.min) is not E.Var:
            return _NO_PATTERN
        position[rng.min] = i
    no_const_read = no_shift_read = True
    mapped: list[int] = []
    for rng in read.region:
        if E.const_int(rng.extent) is None:
            return _NO_PATTERN
        if E.const_int(rng.min) is not None:
            no_const_read = False
            continue
        var, shifted = _var_with_shift(rng.min)
        if var is None or var not in position:
            return _NO_PATTERN
        mapped.append(position[var])
        no_shift_read = no_shift_read and not shifted
    counts = [0] * len(write.region)
    for i in mapped:
        counts[i] += 1
    ordered = all(a <= b for a, b in zip(mapped, mapped[1:]))
    return ReadWritePattern(True, all(c > 0 for c in counts), all(c < 2 for c in counts), ordered, no_const_read,
                            no_shift_read)


def is_write_cache(block: S.Block) -> bool:
    """One write, and every read maps onto it injectively and in order (a copy-like block)."""
    if len(block.writes) != 1:
        return False
    return all((p := read_write_pattern(r, block.writes[0])).injective and p.ordered for r in block.reads)


def space_and_reduction_length(loops: list[S.For]) -> tuple[int, int] | None:
    """Products of the spatial and of the reduction loops' extents; None when a loop is of
    another kind or not constant."""
    space = reduce = 1
    for loop in loops:
        kind = A.loop_iter_type(loop)
        extent = E.const_int(loop.extent)
        if extent is None or kind not in (S.IterType.DATA_PAR, S.IterType.COMM_REDUCE):
            return None
        if kind == S.IterType.DATA_PAR:
            space *= extent
        else:
            reduce *= extent
    return space, reduce


def needs_rfactor(sch: Schedule, block: S.Block, max_parallel_extent: int) -> bool:
    """A perfectly nested, trivially bound reduction block whose reduction dominates: worth
    rfactor when tiling cannot find enough parallelism in its spatial loops."""
    if not block.writes or is_tiled(block):
        return False
    scope = A.scope_of(sch.state, sch.func_name, block)
    if not scope.is_reduction_block(block) or not is_trivial_binding(sch, block):
        return False
    loops = loops_of(sch, block)
    kinds = A.loop_iter_types(loops)
    if any(k not in (S.IterType.DATA_PAR, S.IterType.COMM_REDUCE) for k in kinds):
        return False
    if S.IterType.COMM_REDUCE not in kinds:
        return False
    for outer, inner in zip(loops, loops[1:]):
        if outer.body is not inner:
            return False
    if loops:
        body = loops[-1].body
        if not isinstance(body, S.BlockRealize) or body.block is not block:
            return False
    lengths = space_and_reduction_length(loops)
    if lengths is None:
        return False
    space, reduce = lengths
    if needs_multi_level_tiling(sch, block):
        return not (space >= reduce or space > max_parallel_extent)
    return reduce > 1


def has_if_then_else(block: S.Block) -> bool:
    """The block holds an if-then-else-like construct (IfThenElse, Select, if_then_else)."""
    found = False

    def visit(node: object) -> None:
        nonlocal found
        if type(node) in (S.IfThenElse, E.Select) or (type(node) is E.Call and node.op == "if_then_else"):
            found = True

    post_order_visit(block, visit)
    return found


def uses_ops(block: S.Block, ops: frozenset[str]) -> bool:
    """The block calls one of the intrinsics named in `ops` ("exp", ...)."""
    found = False

    def visit(node: object) -> None:
        nonlocal found
        if type(node) is E.Call and node.op in ops:
            found = True

    post_order_visit(block, visit)
    return found
