"""Shape manipulation for transformer graphs: `split`, `squeeze`, `expand_dims`,
`broadcast_to` and `shape_to_tensor` (docs/architecture.md, "Legalization").

topi's C++ computes (blocks `T_split`, `T_squeeze`, `T_broadcast_to`, axes ax0, ...) except
`expand_dims` (topi's Python-style compute: block `expand_dims`, axes i0, ...) and Relax's own
`shape_to_tensor` (a function of no inputs: `if_then_else(i == 0, d0, if_then_else(i == 1, d1,
... 0))`, which constant folding evaluates).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from msdb.ir import expr as E
from msdb.ir import te
from msdb.model.graph import ModelError
from msdb.model.legalize.common import ax_compute, expect_tensor, i64, static_shape
from msdb.model.legalize.index import broadcast_index
from msdb.model.legalize.registry import Legalized, Operand, register
from msdb.model.ops import OpPattern

__all__ = ["split_offsets"]


def split_offsets(extent: int, indices_or_sections: Any, op: str = "split") -> list[tuple[int, int]]:
    """(offset, size) of each part: `indices_or_sections` is a number of equal sections or
    the split points (Relax's `split`)."""
    if isinstance(indices_or_sections, (int, np.integer)):
        sections = int(indices_or_sections)
        if sections <= 0 or extent % sections:
            raise ModelError(f"{op}: cannot split {extent} into {sections} equal sections")
        size = extent // sections
        return [(i * size, size) for i in range(sections)]
    points = [0] + [int(p) for p in indices_or_sections] + [extent]
    if any(b < a for a, b in zip(points, points[1:])):
        raise ModelError(f"{op}: split points {list(indices_or_sections)} are not increasing within {extent}")
    return [(a, b - a) for a, b in zip(points, points[1:])]


@register("split", OpPattern.INJECTIVE, (1, 1))
def split(inputs: Sequence[Operand], attrs: Mapping[str, Any], constants: Mapping[str, np.ndarray]) -> Legalized:
    """`split(x)`, attrs `indices_or_sections` (an int or the split points) and `axis`: one
    `T_split` block per part, `out[i] = x[i + offset]` on the axis."""
    x = expect_tensor(inputs[0], "split", 0)
    shape = static_shape(x, "split")
    axis = int(attrs.get("axis", 0)) % len(shape)
    sections = attrs.get("indices_or_sections", 1)
    sections = [int(p) for p in sections] if isinstance(sections, (list, tuple)) else int(sections)
    parts = split_offsets(shape[axis], sections)
    def part(offset: int, size: int) -> te.Tensor:
        out_shape = list(shape)
        out_shape[axis] = size

        def body(*out: E.PrimExpr) -> E.PrimExpr:
            index = list(out)
            if offset:
                index[axis] = index[axis] + i64(offset)
            return x[tuple(index)]

        return ax_compute(out_shape, body, "T_split" if isinstance(sections, list) else "T_split_sections")

    return tuple(part(offset, size) for offset, size in parts)


@register("squeeze", OpPattern.BROADCAST, (1, 1))
def squeeze(inputs: Sequence[Operand], attrs: Mapping[str, Any], constants: Mapping[str, np.ndarray]) -> Legalized:
    """`squeeze(x)`, attr `axis` (int list; None: every axis of size 1): block `T_squeeze`,
    the squeezed axes read at 0."""
    x = expect_tensor(inputs[0], "squeeze", 0)
    shape = static_shape(x, "squeeze")
    axis = attrs.get("axis")
    axes = [d for d, n in enumerate(shape) if n == 1] if axis is None else sorted(int(a) % len(shape) for a in axis)
    if any(shape[a] != 1 for a in axes):
        raise ModelError(f"squeeze: axes {axes} of shape {list(shape)} are not all of size 1")
    out_shape = [n for d, n in enumerate(shape) if d not in axes]

    def body(*out: E.PrimExpr) -> E.PrimExpr:
        it = iter(out)
        return x[tuple(i64(0) if d in axes else next(it) for d in range(len(shape)))]

    return ax_compute(out_shape, body, "T_squeeze")


@register("expand_dims", OpPattern.BROADCAST, (1, 1))
def expand_dims(inputs: Sequence[Operand], attrs: Mapping[str, Any], constants: Mapping[str, np.ndarray]) -> Legalized:
    """`expand_dims(x)`, attr `axis` (int list, positions in the output): block
    `expand_dims`, axes i0, ..., the new axes not read."""
    x = expect_tensor(inputs[0], "expand_dims", 0)
    shape = static_shape(x, "expand_dims")
    rank = len(shape) + len(list(attrs.get("axis", ())))
    new = sorted(int(a) % rank for a in attrs.get("axis", ()))
    it = iter(shape)
    out_shape = [1 if d in new else next(it) for d in range(rank)]

    def body(*out: E.PrimExpr) -> E.PrimExpr:
        return x[tuple(v for d, v in enumerate(out) if d not in new)]

    return te.compute(tuple(i64(d) for d in out_shape), body, name="expand_dims",
                      varargs_names=[f"i{d}" for d in range(rank)])


@register("broadcast_to", OpPattern.BROADCAST, (1, 1))
def broadcast_to(inputs: Sequence[Operand], attrs: Mapping[str, Any], constants: Mapping[str, np.ndarray]) -> Legalized:
    """`broadcast_to(x)`, attr `shape`: block `T_broadcast_to`, size-1 dimensions read at 0."""
    x = expect_tensor(inputs[0], "broadcast_to", 0)
    shape = static_shape(x, "broadcast_to")
    target = [int(d) for d in attrs.get("shape", ())]
    try:
        if [int(d) for d in np.broadcast_shapes(tuple(shape), tuple(target))] != target:
            raise ValueError
    except ValueError:
        raise ModelError(f"broadcast_to: cannot broadcast {list(shape)} to {target}") from None
    return ax_compute(target, lambda *out: x[broadcast_index(out, target, shape)], "T_broadcast_to")


@register("shape_to_tensor", OpPattern.ELEMWISE, (0, 0))
def shape_to_tensor(inputs: Sequence[Operand], attrs: Mapping[str, Any], constants: Mapping[str, np.ndarray]) -> Legalized:
    """`shape_to_tensor(shape_of(x))` of a static shape, attr `shape` (the dimensions): an
    int64 vector computed from nothing, block `shape_to_tensor`, axis i."""
    values = [int(d) for d in attrs.get("shape", ())]

    def body(i: E.PrimExpr) -> E.PrimExpr:
        result: E.PrimExpr = i64(0)
        for idx in range(len(values) - 1, -1, -1):
            result = te.if_then_else(E.EQ(i, i64(idx)), i64(values[idx]), result)
        return result

    return te.compute((i64(len(values)),), body, name="shape_to_tensor")
