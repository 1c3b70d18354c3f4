"""Matching a block against a tensor intrinsic, for the rules that tensorize (docs/architecture.md,
"Tuner"): TVM's `GetAutoTensorizeMappingInfo` and `TileWithTensorIntrin` (s_tir/schedule/analysis
and transform).

`auto_tensorize_mapping(sch, block, desc)` asks whether the block computes what the intrinsic's
description computes, up to a layout change: same statement shape (a store of the same
expression tree: same operators, constants and casts, same buffer element types; buffer shapes,
scopes and indices are not compared), and it proposes the index map that fuses the block's iter
vars onto the description's. Each iter var goes to the description iter var that indexes exactly
the same buffers and has its iteration type (conv2d's n, h, w index the output and the input
like a matmul's m, so `lambda n, h, w, co, rh, rw, rc: (n * 3136 + h * 56 + w, co,
rh * 192 + rw * 64 + rc)`); iter vars that match none stay in front, unmapped (a batch). A
description iter var left without a block iter var, or a block iter var with two candidates,
means no mapping.

`tile_with_tensor_intrin(sch, block, intrin)` then splits each of the block's loops that maps to a
description loop by that loop's extent and moves the inner parts innermost in the description's
order, returning the outermost of them: the loop to blockize. The loops are matched from the
innermost iter var outward by iteration type, as TVM does. A loop the description's extent does
not divide would need TVM's padding (PadEinsum), which msdb does not have: such a block is
reported as not tileable (None).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from msdb.ir import expr as E
from msdb.ir import stmt as S
from msdb.ir.arith.analyzer import simplify
from msdb.ir.function import PrimFunc
from msdb.ir.functor import free_vars, post_order_visit
from msdb.schedule import tensor_intrin
from msdb.schedule.analysis import simplify_non_trivial
from msdb.schedule.rv import BlockRV, LoopRV
from msdb.schedule.schedule import Schedule
from msdb.tuner.space import analysis as SA

__all__ = ["AutoTensorizeMapping", "auto_tensorize_mapping", "desc_block", "tile_with_tensor_intrin"]


@dataclass(frozen=True, eq=False)
class AutoTensorizeMapping:
    """How a block maps onto a description (TVM's AutoTensorizeMappingInfo): `initial` and
    `final` are the index map (one parameter per block iter var, named as it); `lhs_iters` the
    block's iter vars, `rhs_iters` the description's; `buffer_map` the block's buffers to the
    description's; `rhs_indices` the description's buffers to their indices (variables)."""

    initial: tuple[E.Var, ...]
    final: tuple[E.PrimExpr, ...]
    lhs_iters: tuple[S.IterVar, ...]
    rhs_iters: tuple[S.IterVar, ...]
    buffer_map: dict[E.Buffer, E.Buffer]
    rhs_indices: dict[E.Buffer, tuple[E.PrimExpr, ...]]


def desc_block(desc: PrimFunc) -> tuple[S.BlockRealize, list[S.For]]:
    """The description's computation block and the loops around it, outermost first (TVM's
    ExtractTensorIntrinDescInfo)."""
    root = desc.body
    assert isinstance(root, S.BlockRealize)
    loops: list[S.For] = []
    node: S.Stmt = root.block.body
    while isinstance(node, S.For):
        loops.append(node)
        node = node.body
    if not isinstance(node, S.BlockRealize):
        raise ValueError("tensor intrinsic description: expected loops around one block")
    return node, loops


def _type_code(dtype: str) -> str:
    """TVM's dtype code (what its comparator checks of an expression's type)."""
    for prefix in ("bfloat", "float", "uint", "int"):
        if dtype.startswith(prefix):
            return prefix
    return "uint" if dtype == "bool" else dtype


class _Matcher:
    """TVM's AutoTensorizeComparator: compares the block (lhs) with the description (rhs) and
    collects what the mapping needs."""

    def __init__(self, ranges: dict[E.Var, E.Range]) -> None:
        self.ranges = ranges
        self.rhs_to_lhs: dict[E.Buffer, E.Buffer] = {}
        self.lhs_to_rhs: dict[E.Buffer, E.Buffer] = {}
        self.lhs_indices: dict[E.Buffer, tuple[E.PrimExpr, ...]] = {}
        self.rhs_indices: dict[E.Buffer, tuple[E.PrimExpr, ...]] = {}

    def stmt(self, lhs: S.Stmt, rhs: S.Stmt) -> bool:
        if isinstance(lhs, S.BufferStore) and isinstance(rhs, S.BufferStore):
            return self.access(lhs.buffer, lhs.indices, rhs.buffer, rhs.indices) and self.expr(lhs.value, rhs.value)
        return False

    def expr(self, lhs: E.PrimExpr, rhs: E.PrimExpr) -> bool:
        if lhs is rhs:
            return True
        if type(lhs) is not type(rhs) or _type_code(lhs.dtype) != _type_code(rhs.dtype):
            return False
        if isinstance(lhs, E.BufferLoad):
            assert isinstance(rhs, E.BufferLoad)
            return self.access(lhs.buffer, lhs.indices, rhs.buffer, rhs.indices)
        if isinstance(lhs, E.BinaryOp):
            assert isinstance(rhs, E.BinaryOp)
            return self.expr(lhs.a, rhs.a) and self.expr(lhs.b, rhs.b)
        if isinstance(lhs, (E.IntImm, E.FloatImm)):
            assert isinstance(rhs, (E.IntImm, E.FloatImm))
            return lhs.value == rhs.value
        if isinstance(lhs, E.Cast):
            assert isinstance(rhs, E.Cast)
            return self.expr(lhs.value, rhs.value)
        if isinstance(lhs, E.Select):
            assert isinstance(rhs, E.Select)
            return (self.expr(lhs.condition, rhs.condition) and self.expr(lhs.true_value, rhs.true_value)
                    and self.expr(lhs.false_value, rhs.false_value))
        if isinstance(lhs, E.Call):
            assert isinstance(rhs, E.Call)
            return (lhs.op == rhs.op and len(lhs.args) == len(rhs.args)
                    and all(self.expr(a, b) for a, b in zip(lhs.args, rhs.args)))
        return False  # a variable outside the indices has no counterpart (TVM maps none)

    def buffer(self, lhs: E.Buffer, rhs: E.Buffer) -> bool:
        if lhs is rhs:
            return True
        if rhs in self.rhs_to_lhs:
            return self.rhs_to_lhs[rhs] is lhs
        if lhs in self.lhs_to_rhs:
            return self.lhs_to_rhs[lhs] is rhs
        if lhs.dtype != rhs.dtype:
            return False
        self.rhs_to_lhs[rhs] = lhs
        self.lhs_to_rhs[lhs] = rhs
        return True

    def access(self, lhs: E.Buffer, lhs_idx: tuple[E.PrimExpr, ...], rhs: E.Buffer,
               rhs_idx: tuple[E.PrimExpr, ...]) -> bool:
        if not self.buffer(lhs, rhs):
            return False
        if lhs not in self.lhs_indices:
            if rhs in self.rhs_indices:
                return False
            if not all(isinstance(i, E.Var) or (len(rhs_idx) == 1 and E.const_int(i) == 0) for i in rhs_idx):
                return False
            self.lhs_indices[lhs] = tuple(self._simplify_non_trivial(i) for i in lhs_idx)
            self.rhs_indices[rhs] = rhs_idx
            return True
        if rhs not in self.rhs_indices:
            return False
        return self._same(lhs_idx, self.lhs_indices[lhs]) and self._same(rhs_idx, self.rhs_indices[rhs])

    def _simplify_non_trivial(self, index: E.PrimExpr) -> E.PrimExpr:
        return simplify_non_trivial(index, self.ranges)

    def _same(self, a: tuple[E.PrimExpr, ...], b: tuple[E.PrimExpr, ...]) -> bool:
        return len(a) == len(b) and all(E.const_int(simplify(x - y, self.ranges)) == 0 for x, y in zip(a, b))


def auto_tensorize_mapping(sch: Schedule, block: BlockRV, desc: PrimFunc) -> AutoTensorizeMapping | None:
    """The mapping of `block` onto the description `desc`, or None (module docstring)."""
    lhs = SA.block_of(sch, block)
    rhs = desc_block(desc)[0].block
    kinds = (S.IterType.DATA_PAR, S.IterType.COMM_REDUCE)
    if not all(iv.iter_type in kinds for iv in lhs.iter_vars + rhs.iter_vars):
        return None
    matcher = _Matcher({iv.var: iv.dom for iv in lhs.iter_vars if iv.dom is not None})
    if not matcher.stmt(lhs.body, rhs.body):
        return None
    return _propose(matcher, lhs.iter_vars, rhs.iter_vars)


def _propose(m: _Matcher, lhs_iters: tuple[S.IterVar, ...], rhs_iters: tuple[S.IterVar, ...]) -> AutoTensorizeMapping | None:
    """TVM's AutoTensorizeMappingProposer: match iter vars by the set of buffers they index and
    their iteration type, then fuse the block's iter vars of each description iter var."""
    order = {rhs: i for i, rhs in enumerate(m.rhs_indices)}
    rhs_masks: dict[E.Var, set[int]] = {}
    lhs_masks: dict[E.Var, set[int]] = {}
    for rhs_buf, indices in m.rhs_indices.items():
        for index in indices:
            if not isinstance(index, E.Var):
                return None  # TVM raises: only variables index a description's buffers
            rhs_masks.setdefault(index, set()).add(order[rhs_buf])
        for index in m.lhs_indices[m.rhs_to_lhs[rhs_buf]]:
            for var in free_vars(index):
                lhs_masks.setdefault(var, set()).add(order[rhs_buf])
    rhs_type = {iv.var: iv.iter_type for iv in rhs_iters}
    initial = tuple(E.Var(iv.var.name, iv.var.dtype) for iv in lhs_iters)
    fused: dict[E.Var, E.PrimExpr | None] = {iv.var: None for iv in rhs_iters}
    unmapped: list[E.PrimExpr] = []
    for iv, param in zip(lhs_iters, initial):
        mask = lhs_masks.get(iv.var)
        candidates = [v for v, rmask in rhs_masks.items()
                      if mask is not None and rmask == mask and rhs_type.get(v) == iv.iter_type]
        if not candidates:
            unmapped.append(param)
        elif len(candidates) > 1:
            return None  # TVM does not support a non-unique mapping
        else:
            so_far = fused[candidates[0]]
            assert iv.dom is not None
            fused[candidates[0]] = param if so_far is None else so_far * iv.dom.extent + param
    if any(expr is None for expr in fused.values()):
        return None
    final = tuple(unmapped) + tuple(simplify(expr) for expr in fused.values() if expr is not None)
    return AutoTensorizeMapping(initial, final, lhs_iters, rhs_iters, dict(m.lhs_to_rhs), dict(m.rhs_indices))


def _uses(expr: E.PrimExpr, variables: set[E.Var]) -> bool:
    return bool(free_vars(expr) & variables)


def tile_with_tensor_intrin(sch: Schedule, block: BlockRV, intrin_name: str) -> LoopRV | None:
    """Split and reorder the block's loops so that the innermost ones are the description's
    (module docstring); the outermost of them, or None when the loops do not fit."""
    realize, desc_loops = desc_block(tensor_intrin.get(intrin_name).desc)
    desc_vars = {loop.loop_var for loop in desc_loops}
    node = SA.block_of(sch, block)
    target = sch.state.realize(sch.func_name, node.name_hint)
    loops: list[S.For] = []
    for loop in reversed(SA.loops_of(sch, node)):
        if isinstance(loop.body, S.SeqStmt):
            break
        loops.append(loop)
    loops.reverse()
    if any(E.const_int(loop.min) != 0 for loop in loops):
        return None
    loop_vars = {loop.loop_var for loop in loops}
    block_types = [iv.iter_type for iv in node.iter_vars]
    desc_types = [iv.iter_type for iv in realize.block.iter_vars]
    if len(block_types) < len(desc_types):
        return None
    mapped: list[tuple[S.For, S.For]] = []  # (block loop, description loop), innermost first
    next_index = len(loops) - 1
    for i_desc in reversed(range(len(desc_types))):
        bind = realize.iter_values[i_desc]
        desc_loop, desc_type = None, desc_types[i_desc]
        for i, candidate in enumerate(desc_loops):
            if not _uses(simplify(bind - candidate.loop_var), desc_vars):
                desc_loop, desc_type = candidate, desc_types[i]
                break
        if desc_loop is None or E.const_int(desc_loop.extent) is None:
            return None
        block_bind: E.PrimExpr | None = None
        for current in range(next_index, -1, -1):
            if current < len(block_types) and block_types[current] == desc_type:
                next_index, block_bind = current - 1, target.iter_values[current]
                break
        if block_bind is None:
            return None
        for loop in loops:
            if any(loop is seen for seen, _ in mapped) or _uses(simplify(block_bind - loop.loop_var), loop_vars):
                continue
            extent = E.const_int(loop.extent)
            if extent is None or extent % int(E.const_int(desc_loop.extent) or 1) != 0:
                return None  # TVM would pad the block (PadEinsum), which msdb does not have
            mapped.append((loop, desc_loop))
            break
    if not mapped:
        return None
    return _split_and_reorder(sch, block, mapped, desc_loops)


def _split_and_reorder(sch: Schedule, block: BlockRV, mapped: list[tuple[S.For, S.For]],
                       desc_loops: list[S.For]) -> LoopRV:
    rv_of = {sch.get(rv).loop_var: rv for rv in sch.get_loops(block)}
    suffix: list[Any] = [None] * len(desc_loops)
    inner: set[Any] = set()
    for block_loop, desc_loop in mapped:
        extent = int(E.const_int(desc_loop.extent) or 1)
        _, inner_rv = sch.split(rv_of[block_loop.loop_var], [None, extent])
        inner.add(sch.get(inner_rv).loop_var)
        suffix[next(i for i, d in enumerate(desc_loops) if d is desc_loop)] = inner_rv
    order: list[LoopRV] = []
    met = False
    for rv in sch.get_loops(block):
        if sch.get(rv).loop_var in inner:
            met = True
        elif met:
            order.append(rv)
    suffix_rvs = [rv for rv in suffix if rv is not None]
    sch.reorder(*(order + suffix_rvs))
    first: LoopRV = suffix_rvs[0]
    return first
