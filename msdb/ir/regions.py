"""Infer a block's read and write regions from its body (what `T.reads`/`T.writes` state).

Used where a block is built without explicit regions: the TVMScript parser when `T.reads` is
absent, the TE builder, and schedule primitives that rebuild blocks. Follows TVM's
`GetBlockReadWriteRegion`: accesses are collected in visiting order (a store's value before its
indices), variables of loops *inside* the block are relaxed over their ranges, buffers the block
allocates are skipped, and when the block has an `init` (a reduction) the written buffers are
dropped from the reads.
"""

from __future__ import annotations

from typing import Hashable

from msdb.ir import expr as E
from msdb.ir import stmt as S
from msdb.ir.arith import expr_equal, expr_key, simplify, split_linear
from msdb.ir.functor import IRVisitor, substitute

__all__ = ["infer_access_regions", "relax"]


class _AccessCollector(IRVisitor):
    def __init__(self, skip: set[E.Buffer]) -> None:
        super().__init__()
        self.skip = skip
        self.loop_ranges: dict[E.Var, tuple[E.PrimExpr, E.PrimExpr]] = {}
        self.reads: dict[E.Buffer, list[list[tuple[E.PrimExpr, E.PrimExpr]]]] = {}
        self.writes: dict[E.Buffer, list[list[tuple[E.PrimExpr, E.PrimExpr]]]] = {}
        # accesses recorded under the current loop ranges: the same access again adds nothing
        # to the union (a Winograd transform loads one element hundreds of times)
        self._recorded: set[tuple[int, int, tuple[Hashable, ...]]] = set()

    def _record(self, table: dict, buffer: E.Buffer, indices: tuple[E.PrimExpr, ...]) -> None:
        if buffer in self.skip:
            return
        key = (id(table), id(buffer), tuple(expr_key(i) for i in indices))
        if key in self._recorded:
            return
        self._recorded.add(key)
        table.setdefault(buffer, []).append([relax(i, self.loop_ranges) for i in indices])

    def visit_BufferLoad(self, node: E.BufferLoad) -> None:
        # the load before the loads in its indices, as TVM's BlockReadWriteDetector (`take`)
        self._record(self.reads, node.buffer, node.indices)
        super().visit_BufferLoad(node)

    def visit_BufferStore(self, node: S.BufferStore) -> None:
        self.visit(node.value)
        for index in node.indices:
            self.visit(index)
        self._record(self.writes, node.buffer, node.indices)

    def visit_For(self, node: S.For) -> None:
        self.loop_ranges[node.loop_var] = (node.min, node.extent)
        self._recorded = set()
        super().visit_For(node)
        del self.loop_ranges[node.loop_var]
        self._recorded = set()

    def visit_BlockRealize(self, node: S.BlockRealize) -> None:
        # A nested block is summarized by its own regions, with its iter vars bound to values.
        for value in node.iter_values:
            self.visit(value)
        self.visit(node.predicate)
        block = node.block
        vmap = {iv.var: v for iv, v in zip(block.iter_vars, node.iter_values)}
        for table, regions in ((self.reads, block.reads), (self.writes, block.writes)):
            for region in regions:
                if region.buffer in self.skip:
                    continue
                dims = []
                for rng in region.region:
                    lo_min, lo_ext = relax(substitute(rng.min, vmap), self.loop_ranges)
                    if lo_min is None:  # not affine in the loops: the caller widens the dimension
                        dims.append((None, None))
                        continue
                    dims.append((lo_min, _add_extent(lo_ext, rng.extent)))
                table.setdefault(region.buffer, []).append(dims)


def _add_extent(relaxed_extent: E.PrimExpr, inner_extent: E.PrimExpr) -> E.PrimExpr:
    a, b = E.const_int(relaxed_extent), E.const_int(inner_extent)
    if a is not None and b is not None:
        return E.IntImm(relaxed_extent.dtype, a + b - 1)
    if a == 1:
        return inner_extent
    return relaxed_extent + inner_extent - 1


def relax(index: E.PrimExpr, ranges: dict[E.Var, tuple[E.PrimExpr, E.PrimExpr]]) -> tuple[E.PrimExpr, E.PrimExpr]:
    """(min, extent) covering `index` as the variables in `ranges` run over their ranges.
    Non-affine uses of those variables give (None, None) for the caller to widen to the
    whole dimension."""
    if not ranges:
        return index, E.IntImm(index.dtype, 1)
    terms = split_linear(index, ranges)
    if terms is None:
        return None, None  # type: ignore[return-value]
    coefs, rest = terms
    coefs = {v: c for v, c in coefs.items() if c != 0}
    if not coefs:
        return index, E.IntImm(index.dtype, 1)
    lo: E.PrimExpr | None = rest
    span = 0
    for var, coef in coefs.items():
        vmin, vext = ranges[var]
        ext = E.const_int(vext)
        if ext is None:
            return None, None  # type: ignore[return-value]
        if coef > 0:
            start = vmin * coef if E.const_int(vmin) != 0 else None
        else:
            start = (vmin + (ext - 1)) * coef
        if start is not None:
            lo = start if lo is None else lo + start
        span += abs(coef) * (ext - 1)
    if lo is None:
        lo = E.IntImm(index.dtype, 0)
    return lo, E.IntImm(index.dtype, span + 1)


def _union(accesses: list[list[tuple[E.PrimExpr, E.PrimExpr]]], buffer: E.Buffer) -> S.BufferRegion:
    """One region covering every access: identical accesses collapse, accesses at constant
    offsets from each other merge into one span, anything else widens to the full dimension."""
    dims: list[E.Range] = []
    for d in range(len(buffer.shape)):
        cands = [acc[d] for acc in accesses]
        first_min, first_ext = cands[0]
        same = first_min is not None and all(_same(m, first_min) and _same(e, first_ext) for m, e in cands)
        if same:
            dims.append(E.Range(first_min, first_ext))
            continue
        merged = _merge_offsets(cands)
        if merged is not None:
            dims.append(merged)
            continue
        zero = E.make_const(0, buffer.shape[d].dtype)
        dims.append(E.Range(zero, buffer.shape[d]))
    return S.BufferRegion(buffer, tuple(dims))


def _merge_offsets(cands: list[tuple[E.PrimExpr, E.PrimExpr]]) -> E.Range | None:
    """Merge accesses whose starts differ from the first one's by constants and whose extents
    are constants (`C[v]`, `C[v + 1]`, `C[v + 2]` -> `C[v:v + 3]`, as TVM does); None when they
    don't line up that way."""
    base, _ = cands[0]
    if base is None:
        return None
    spans: list[tuple[int, int]] = []
    offsets: dict[Hashable, int | None] = {}  # a Winograd transform loads one element many times
    for start, extent in cands:
        ext = E.const_int(extent) if extent is not None else None
        if start is None or ext is None:
            return None
        key = expr_key(start)
        if key not in offsets:
            offsets[key] = E.const_int(simplify(start - base))
        offset = offsets[key]
        if offset is None:
            return None
        spans.append((offset, offset + ext))
    lo = min(a for a, _ in spans)
    hi = max(b for _, b in spans)
    start = base if lo == 0 else simplify(base + lo)
    return E.Range(start, E.IntImm(cands[0][1].dtype, hi - lo))


def _same(a: E.PrimExpr | None, b: E.PrimExpr | None) -> bool:
    if a is None or b is None:
        return False
    return expr_equal(a, b)


def infer_access_regions(
    body: S.Stmt,
    init: S.Stmt | None = None,
    alloc_buffers: tuple[E.Buffer, ...] = (),
) -> tuple[tuple[S.BufferRegion, ...], tuple[S.BufferRegion, ...]]:
    """(reads, writes) of a block with this body, init and allocations."""
    collector = _AccessCollector(set(alloc_buffers))
    if init is not None:
        collector.visit(init)
    collector.visit(body)
    writes = tuple(_union(acc, buf) for buf, acc in collector.writes.items())
    reads = tuple(
        _union(acc, buf)
        for buf, acc in collector.reads.items()
        if init is None or buf not in collector.writes
    )
    return reads, writes
