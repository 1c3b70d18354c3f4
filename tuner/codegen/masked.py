"""Masked memory operations (`llvm.masked.load/store/gather`) emitted in pieces no wider than
one vector register of the target.

Why: the emitter pads vectors whose length is not a power of two with masked-off lanes, and a
register tile spans several registers, so a masked operation is often wider than the hardware's
vectors (32 lanes of float where AVX2 holds 8). LLVM's x86 backend then splits it during type
legalization, and that split is wrong in LLVM 22 when one of the pieces has a mask that folds to
all-false: the piece becomes a plain unmasked load whose lanes are stored as they are (a
stride-2 7x7 conv's padding copy stored input values where it should store zeros, NaNs in its
output on AVX2; an LLVM build with assertions stops in `LocationSize::getValue`). AVX-512
machines were not affected only because their 16-lane registers made those pieces native. So
the emitter never hands LLVM a masked operation wider than a register: it writes the pieces
itself, each one register wide (the last padded with masked-off lanes), skips pieces whose
lanes are all known to be off (the loop's padding lanes), and writes pieces whose lanes are all
on as plain loads and stores (docs/architecture.md, "Code generation").
"""

from __future__ import annotations

from typing import Callable

import llvmlite.ir as ir

from msdb.tuner.codegen.types import I1, I32, I64, PTR, Poison, const, int_lanes

__all__ = ["MaskedMemory", "piece_width"]

#: Declares the intrinsic of a kind ("load", "store", "gather") for a vector type.
IntrinsicFor = Callable[[str, ir.VectorType], ir.Function]


def piece_width(count: int, register_lanes: int) -> int:
    """Lanes of each piece of a `count`-lane masked operation: the register's lanes, or the
    power of two that covers `count` when that is smaller (a narrower legal vector)."""
    width = 1
    while width < count and width < register_lanes:
        width *= 2
    return width


def _mask_lanes(mask: ir.Value, count: int) -> list[int] | None:
    """The lanes of a constant mask (1 on, 0 off), None when the mask is computed at run time."""
    if not isinstance(mask, ir.Constant):
        return None
    if mask.constant is None or isinstance(mask.constant, (list, tuple)):
        lanes = int_lanes(mask)
        return None if lanes is None else [int(bool(v)) for v in lanes]
    return [int(bool(mask.constant))] * count


def _passthru(vt: ir.VectorType, start: int, active: int | None, lanes: list[int] | None) -> ir.Constant:
    """What a masked load of `vt` (lanes `start` on of the whole vector, `lanes` its constant
    mask) gives in its masked-off lanes: poison when they are all padding lanes (from `active`
    on), else zero. A padding lane is never stored (a mask built on a condition keeps it off:
    `EmitExpr.within`); a value there kept LLVM from folding a
    store of a padded accumulator into its next load (EarlyCSE forwards a masked store only to
    a masked load whose pass-through is wholly undefined) once an `llvm.fmuladd` computed the
    accumulator: LLVM does not look through the intrinsic for lanes nobody reads, so the zero
    stayed (ResNet-18's 7 x 7 and 14 x 14 convs in TVM's layout ran 3x slower)."""
    if active is not None and lanes is not None and all(on or start + j >= active for j, on in enumerate(lanes)):
        return Poison(vt)
    return ir.Constant(vt, None)


def _bits(element: ir.Type) -> int:
    """Bits of one lane of `element` (a float, an integer or a pointer)."""
    if isinstance(element, ir.IntType):
        return int(element.width)
    return {ir.HalfType: 16, ir.FloatType: 32, ir.DoubleType: 64}.get(type(element), 64)


class MaskedMemory:
    """Writes masked loads, stores and gathers for one module with `builder`, in pieces of at
    most `register_bits` (see the module docstring)."""

    def __init__(self, intrinsic: IntrinsicFor, register_bits: int) -> None:
        self.intrinsic = intrinsic
        self.register_bits = register_bits

    def lanes_per_register(self, element: ir.Type) -> int:
        return max(1, self.register_bits // _bits(element))

    # ---- public operations
    def load(self, b: ir.IRBuilder, ptr: ir.Value, vt: ir.VectorType, align: int, mask: ir.Value,
             active: int | None = None) -> ir.Value:
        """`llvm.masked.load` of `vt` at `ptr`: masked-off lanes zero, or poison when all of
        them are padding lanes (`_passthru`). Lanes from `active` on are off whatever `mask`
        says."""
        def piece(start: int, width: int, lanes: list[int] | None, piece_mask: ir.Value) -> ir.Value:
            sub_t = ir.VectorType(vt.element, width)
            addr = self._offset(b, ptr, vt.element, start)
            if lanes is not None and all(lanes):
                return b.load(addr, typ=sub_t, align=align)
            return b.call(self.intrinsic("load", sub_t), [addr, const(I32, align), piece_mask,
                                                          _passthru(sub_t, start, active, lanes)])

        return self._pieces(b, vt, mask, active, piece)

    def gather(self, b: ir.IRBuilder, ptrs: ir.Value, vt: ir.VectorType, align: int, mask: ir.Value,
               passthru: ir.Constant) -> ir.Value:
        """`llvm.masked.gather` of `vt` from the vector of pointers `ptrs`."""
        count = vt.count

        def piece(start: int, width: int, lanes: list[int] | None, piece_mask: ir.Value) -> ir.Value:
            sub_t = ir.VectorType(vt.element, width)
            sub_ptrs = self._slice(b, ptrs, count, start, width)
            sub_ptrs.type = ir.VectorType(PTR, width)
            fill = ir.Constant(sub_t, None if passthru.constant is None else ir.Undefined)
            return b.call(self.intrinsic("gather", sub_t), [sub_ptrs, const(I32, align), piece_mask, fill])

        if count <= piece_width(count, self.lanes_per_register(vt.element)):
            return b.call(self.intrinsic("gather", vt), [ptrs, const(I32, align), mask, passthru])
        return self._pieces(b, vt, mask, None, piece)

    def store(self, b: ir.IRBuilder, value: ir.Value, ptr: ir.Value, align: int, mask: ir.Value,
              active: int | None = None) -> None:
        """`llvm.masked.store` of `value` at `ptr`. Lanes from `active` on are off."""
        vt = value.type
        count = vt.count
        width = piece_width(count, self.lanes_per_register(vt.element))
        if count == width:
            b.call(self.intrinsic("store", vt), [value, ptr, const(I32, align), mask])
            return
        known = _mask_lanes(mask, count)
        for start in range(0, count, width):
            if active is not None and start >= active:
                break
            lanes = self._piece_lanes(known, count, start, width)
            if lanes is not None and not any(lanes):
                continue
            sub = self._slice(b, value, count, start, width)
            addr = self._offset(b, ptr, vt.element, start)
            if lanes is not None and all(lanes):
                b.store(sub, addr, align=align)
            else:
                b.call(self.intrinsic("store", sub.type),
                       [sub, addr, const(I32, align), self._mask_piece(b, mask, count, start, width, lanes)])

    # ---- pieces
    def _pieces(self, b: ir.IRBuilder, vt: ir.VectorType, mask: ir.Value, active: int | None,
                piece: Callable[[int, int, list[int] | None, ir.Value], ir.Value]) -> ir.Value:
        count = vt.count
        width = piece_width(count, self.lanes_per_register(vt.element))
        if count == width:
            return piece(0, width, _mask_lanes(mask, count), mask)
        known = _mask_lanes(mask, count)
        parts: list[ir.Value] = []
        for start in range(0, count, width):
            lanes = self._piece_lanes(known, count, start, width)
            if (active is not None and start >= active) or (lanes is not None and not any(lanes)):
                parts.append(ir.Constant(ir.VectorType(vt.element, width), None))
            else:
                parts.append(piece(start, width, lanes, self._mask_piece(b, mask, count, start, width, lanes)))
        return self._concat(b, parts, count)

    @staticmethod
    def _piece_lanes(known: list[int] | None, count: int, start: int, width: int) -> list[int] | None:
        if known is None:
            return None
        return [known[start + j] if start + j < count else 0 for j in range(width)]

    @staticmethod
    def _offset(b: ir.IRBuilder, ptr: ir.Value, element: ir.Type, start: int) -> ir.Value:
        # not inbounds: a piece whose lanes are all off may begin past the buffer's end
        return ptr if start == 0 else b.gep(ptr, [const(I64, start)], source_etype=element)

    @staticmethod
    def _slice(b: ir.IRBuilder, vector: ir.Value, count: int, start: int, width: int) -> ir.Value:
        """Lanes [start, start + width) of `vector`; lanes past its end repeat lane 0 (they are
        masked off)."""
        picks = [start + j if start + j < count else 0 for j in range(width)]
        return b.shuffle_vector(vector, ir.Constant(vector.type, ir.Undefined), const(ir.VectorType(I32, width), picks))

    @staticmethod
    def _mask_piece(b: ir.IRBuilder, mask: ir.Value, count: int, start: int, width: int,
                    lanes: list[int] | None) -> ir.Value:
        """Lanes [start, start + width) of `mask`, off past its end; `lanes` are those lanes
        when the mask is a constant (`_piece_lanes`), and then the piece is a constant too: no
        instruction, which a piece that turns out all on would leave unused."""
        if lanes is not None:
            return const(ir.VectorType(I1, width), lanes)
        picks = [start + j if start + j < count else count for j in range(width)]
        off = const(ir.VectorType(I1, count), [0] * count)
        return b.shuffle_vector(mask, off, const(ir.VectorType(I32, width), picks))

    @staticmethod
    def _concat(b: ir.IRBuilder, parts: list[ir.Value], count: int) -> ir.Value:
        """The first `count` lanes of the pieces laid end to end (pairwise shufflevectors)."""
        while len(parts) & (len(parts) - 1):
            parts.append(ir.Constant(parts[0].type, ir.Undefined))
        while len(parts) > 1:
            joined = []
            for a, c in zip(parts[::2], parts[1::2]):
                n = a.type.count
                joined.append(b.shuffle_vector(a, c, const(ir.VectorType(I32, 2 * n), list(range(2 * n)))))
            parts = joined
        whole = parts[0]
        if whole.type.count == count:
            return whole
        assert whole.type.count >= count
        return b.shuffle_vector(whole, ir.Constant(whole.type, ir.Undefined), const(ir.VectorType(I32, count),
                                                                                  list(range(count))))
