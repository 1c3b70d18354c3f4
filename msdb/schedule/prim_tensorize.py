"""tensorize: replace a block's computation by a tensor intrinsic's implementation, as a
function over the schedule state (TVM's Tensorize; the intrinsics are in
`msdb.schedule.tensor_intrin`).

TVM's rule: the block (usually made by blockize) must compute what the intrinsic's
description computes: the description's root block body and the block's body have the same
loops, blocks and arithmetic, each description buffer standing for a region of one of the
block's buffers at a fixed offset (`X_shared[v_i_o, v_k_o * 4 + vi]` for the description's
`A[vi]`: offset `[v_i_o, v_k_o * 4]`). The block keeps its name, iter vars, bindings, reads
and writes; its body becomes the implementation's root block body, and each implementation
buffer becomes a `T.match_buffer` over the region it stands for (the offset, extended by the
implementation's own access region). The implementation's block annotations are added where
the block does not already set them (docs/architecture.md, "Schedules and traces").
"""

from __future__ import annotations

import dataclasses
from typing import Any

from msdb.errors import ScheduleError
from msdb.ir import expr as E
from msdb.ir import stmt as S
from msdb.ir.arith import simplify
from msdb.ir.functor import free_vars, replace_buffers, substitute
from msdb.schedule import tensor_intrin
from msdb.schedule.state import ScheduleState
from msdb.schedule.tree_edit import with_block

__all__ = ["tensorize"]


class _Mismatch(Exception):
    """The block does not compute what the description computes (why, for the message)."""


class _Matcher:
    """TVM's TensorizeComparator, for what tensor intrinsics describe: loops, blocks, stores
    and expressions compared node by node; description variables map onto the block's;
    description buffers map onto the block's buffers with a per-buffer index offset."""

    def __init__(self) -> None:
        self.vars: dict[E.Var, E.Var] = {}  # description var -> block var
        self.buffers: dict[E.Buffer, E.Buffer] = {}  # description buffer -> block buffer
        self.offsets: dict[E.Buffer, list[E.PrimExpr]] = {}  # block buffer -> index offset

    def stmt(self, ours: S.Stmt | None, desc: S.Stmt | None) -> None:
        if ours is None or desc is None:
            if ours is not desc:
                raise _Mismatch("one side has an init or a statement the other lacks")
            return
        if type(ours) is not type(desc):
            raise _Mismatch(f"a {type(ours).__name__} stands where the description has a {type(desc).__name__}")
        if isinstance(ours, S.For):
            assert isinstance(desc, S.For)
            if E.const_int(ours.extent) != E.const_int(desc.extent) or E.const_int(ours.extent) is None:
                raise _Mismatch(f"loop {ours.loop_var.name!r} has extent {ours.extent}, the description's "
                                f"{desc.extent}")
            self.vars[desc.loop_var] = ours.loop_var
            self.stmt(ours.body, desc.body)
        elif isinstance(ours, S.SeqStmt):
            assert isinstance(desc, S.SeqStmt)
            if len(ours.seq) != len(desc.seq):
                raise _Mismatch("the statement sequences differ in length")
            for a, b in zip(ours.seq, desc.seq):
                self.stmt(a, b)
        elif isinstance(ours, S.BlockRealize):
            assert isinstance(desc, S.BlockRealize)
            block, dblock = ours.block, desc.block
            if len(block.iter_vars) != len(dblock.iter_vars):
                raise _Mismatch(f"block {block.name_hint!r} has {len(block.iter_vars)} iter vars, the description's "
                                f"{len(dblock.iter_vars)}")
            for iv, div in zip(block.iter_vars, dblock.iter_vars):
                if iv.iter_type != div.iter_type or _extent(iv) != _extent(div):
                    raise _Mismatch(f"iter var {iv.var.name!r} of block {block.name_hint!r} differs in kind or extent")
                self.vars[div.var] = iv.var
            for value, dvalue in zip(ours.iter_values, desc.iter_values):
                self.expr(value, dvalue)
            self.stmt(block.init, dblock.init)
            self.stmt(block.body, dblock.body)
        elif isinstance(ours, S.BufferStore):
            assert isinstance(desc, S.BufferStore)
            self.access(ours.buffer, ours.indices, desc.buffer, desc.indices)
            self.expr(ours.value, desc.value)
        elif isinstance(ours, S.Evaluate):
            assert isinstance(desc, S.Evaluate)
            self.expr(ours.value, desc.value)
        else:
            raise _Mismatch(f"msdb does not tensorize a {type(ours).__name__}")

    def expr(self, ours: E.PrimExpr, desc: E.PrimExpr) -> None:
        if isinstance(ours, E.BufferLoad) and isinstance(desc, E.BufferLoad):
            self.access(ours.buffer, ours.indices, desc.buffer, desc.indices)
            return
        if type(ours) is not type(desc) or ours.dtype != desc.dtype:
            raise _Mismatch(f"{_describe(ours)} stands where the description has {_describe(desc)}")
        if isinstance(ours, E.Var):
            assert isinstance(desc, E.Var)
            if self.vars.get(desc) is not ours:
                raise _Mismatch(f"variable {ours.name!r} does not match the description's {desc.name!r}")
        elif isinstance(ours, (E.IntImm, E.FloatImm, E.StringImm)):
            if ours.value != desc.value:  # type: ignore[attr-defined]
                raise _Mismatch(f"constant {ours.value} differs from the description's {desc.value}")  # type: ignore[attr-defined]
        elif isinstance(ours, E.BinaryOp):
            assert isinstance(desc, E.BinaryOp)
            self.expr(ours.a, desc.a)
            self.expr(ours.b, desc.b)
        elif isinstance(ours, E.Cast):
            assert isinstance(desc, E.Cast)
            self.expr(ours.value, desc.value)
        elif isinstance(ours, E.Call):
            assert isinstance(desc, E.Call)
            if ours.op != desc.op or len(ours.args) != len(desc.args):
                raise _Mismatch(f"a call of {ours.op!r} stands where the description calls {desc.op!r}")
            for a, b in zip(ours.args, desc.args):
                self.expr(a, b)
        else:
            children_a, children_b = _children(ours), _children(desc)
            if children_a is None or children_b is None or len(children_a) != len(children_b):
                raise _Mismatch(f"msdb does not tensorize {_describe(ours)}")
            for a, b in zip(children_a, children_b):
                self.expr(a, b)

    def access(self, buffer: E.Buffer, indices: tuple[E.PrimExpr, ...], dbuffer: E.Buffer,
               dindices: tuple[E.PrimExpr, ...]) -> None:
        known = self.buffers.setdefault(dbuffer, buffer)
        if known is not buffer:
            raise _Mismatch(f"description buffer {dbuffer.name!r} stands for both {known.name!r} and {buffer.name!r}")
        if buffer.dtype != dbuffer.dtype:
            raise _Mismatch(f"buffer {buffer.name!r} holds {buffer.dtype}, the description's {dbuffer.name!r} "
                            f"{dbuffer.dtype}")
        lead = len(indices) - len(dindices)
        if lead < 0:
            raise _Mismatch(f"buffer {buffer.name!r} has fewer dimensions than the description's {dbuffer.name!r}")
        mine = set(self.vars.values())
        offset = list(indices[:lead])
        for index, dindex in zip(indices[lead:], dindices):
            mapped = substitute(dindex, {d: v for d, v in self.vars.items()})
            diff = simplify(E.Sub(index, mapped, index.dtype))
            if any(v in mine for v in free_vars(diff)):
                raise _Mismatch(f"the access {buffer.name}{list(indices)} is not the description's access plus an "
                                "offset")
            offset.append(diff)
        known_offset = self.offsets.setdefault(buffer, offset)
        if known_offset is not offset and any(E.const_int(simplify(E.Sub(a, b, a.dtype))) != 0
                                              for a, b in zip(known_offset, offset)):
            raise _Mismatch(f"buffer {buffer.name!r} is accessed at two different offsets")


def _describe(expr: E.PrimExpr) -> str:
    if isinstance(expr, E.Var):
        return f"variable {expr.name!r}"
    if isinstance(expr, E.BufferLoad):
        return f"a load of {expr.buffer.name!r}"
    return f"a {type(expr).__name__} of {expr.dtype}"


def _extent(iv: S.IterVar) -> int | None:
    return None if iv.dom is None else E.const_int(iv.dom.extent)


def _children(expr: E.PrimExpr) -> list[E.PrimExpr] | None:
    if isinstance(expr, E.Not):
        return [expr.a]
    if isinstance(expr, E.Select):
        return [expr.condition, expr.true_value, expr.false_value]
    return None


def tensorize(state: ScheduleState, func_name: str, block_name: str, intrin_name: str) -> None:
    """Tensorize the block with the intrinsic (see `Schedule.tensorize`)."""
    intrin = tensor_intrin.get(intrin_name)
    block = state.block(func_name, block_name)
    where = f"tensorize: block {block_name!r} with {intrin_name!r}"
    desc_root = intrin.desc.body
    impl_root = intrin.impl.body
    if not isinstance(desc_root, S.BlockRealize) or not isinstance(impl_root, S.BlockRealize):
        raise ScheduleError(f"{where}: the intrinsic's description and implementation must each be one root block")
    matcher = _Matcher()
    try:
        if block.init is not None:
            raise _Mismatch("the block still has an init (decompose the reduction first)")
        matcher.stmt(block.body, desc_root.block.body)
    except _Mismatch as err:
        raise ScheduleError(f"{where}: the block does not compute what the intrinsic describes: {err}") from None

    desc_params = [intrin.desc.buffer_map[p] for p in intrin.desc.params]
    impl_params = [intrin.impl.buffer_map[p] for p in intrin.impl.params]
    regions = {r.buffer: r.region for r in impl_root.block.reads + impl_root.block.writes}
    fresh: dict[E.Buffer, E.Buffer] = {}
    matches: list[S.MatchBufferRegion] = []
    for dbuf, ibuf in zip(desc_params, impl_params):
        ours = matcher.buffers.get(dbuf)
        if ours is None:
            raise ScheduleError(f"{where}: the block never accesses the description's buffer {dbuf.name!r}")
        offset = matcher.offsets[ours]
        own = regions.get(ibuf)
        if own is None:
            raise ScheduleError(f"{where}: the implementation's root block does not list buffer {ibuf.name!r} "
                                "among its reads or writes")
        lead = len(offset) - len(own)
        ranges = [E.Range(m, E.IntImm(m.dtype, 1)) for m in offset[:lead]]
        for base, rng in zip(offset[lead:], own):
            ranges.append(E.Range(simplify(E.Add(base, rng.min, base.dtype)), rng.extent))
        new_buf = dataclasses.replace(ibuf)
        fresh[ibuf] = new_buf
        matches.append(S.MatchBufferRegion(new_buf, S.BufferRegion(ours, tuple(ranges))))
    body = replace_buffers(impl_root.block.body, fresh)
    assert isinstance(body, S.Stmt)
    annotations: dict[str, Any] = dict(block.annotations)
    for key, value in impl_root.block.annotations.items():
        annotations.setdefault(key, value)
    new_block = with_block(block, body=body, match_buffers=tuple(matches), annotations=annotations)
    state.replace(func_name, block, new_block)
