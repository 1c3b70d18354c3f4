"""`nn.conv2d` as TVM's generic `topi.nn.conv` (python/tvm/topi/nn/conv2d.py), which is what
Relax legalizes to (docs/architecture.md, "Legalization").

Blocks: `pad_temp` (topi/nn/pad.py: a copy even without padding) then `conv2d_nchw`, or
`group_conv2d_nchw` when groups > 1 (depthwise included); spatial axes nn, ff, yy, xx, reduce
axes rc (C / groups), ry, rx; input channel `rc`, or `ff // (F / groups) * (C / groups) + rc`.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from msdb.ir import expr as E
from msdb.ir import te
from msdb.model.graph import ModelError
from msdb.model.legalize.common import attr_int, expect_tensor, i64, int_list, static_shape
from msdb.model.legalize.registry import Legalized, Operand, register
from msdb.model.ops import OpPattern

__all__ = ["conv2d_nchw", "conv_padding"]


def conv_padding(attrs: Mapping[str, Any], op: str) -> tuple[list[int], list[int]]:
    """Relax's `padding`: 1 value (all sides), 2 (top/bottom, left/right) or 4 (top, left,
    bottom, right); returns (before, after) per spatial dimension."""
    value = attrs.get("padding", (0, 0, 0, 0))
    pads = [int(value)] if isinstance(value, (int, np.integer)) else [int(p) for p in value]
    if len(pads) == 1:
        pads = pads * 4
    elif len(pads) == 2:
        pads = pads + pads
    if len(pads) != 4 or any(p < 0 for p in pads):
        raise ModelError(f"{op}: padding must be 1, 2 or 4 non-negative ints, got {value!r}")
    return pads[:2], pads[2:]


def conv2d_nchw(data: te.Tensor, weight: te.Tensor, strides: Sequence[int], pad_before: Sequence[int],
                pad_after: Sequence[int], dilation: Sequence[int], groups: int, op: str = "nn.conv2d") -> te.Tensor:
    """topi.nn.conv for NCHW data and OIHW weights."""
    n, c, h, w = static_shape(data, op)
    f, c_per_group, kh, kw = static_shape(weight, op)
    if data.ndim != 4 or weight.ndim != 4:
        raise ModelError(f"{op}: expects 4-d NCHW data and OIHW weights")
    if groups < 1 or c % groups or f % groups or c // groups != c_per_group:
        raise ModelError(f"{op}: {c} input channels, {f} filters of {c_per_group} channels and groups={groups} disagree")
    out_dims = []
    for d, k, dil, pb, pe, s in zip((h, w), (kh, kw), dilation, pad_before, pad_after, strides):
        out = (d - (k - 1) * dil - 1 + pb + pe) // s + 1
        if out <= 0:
            raise ModelError(f"{op}: kernel, padding and strides give an empty output ({out})")
        out_dims.append(out)
    temp = te.pad(data, [0, 0, *pad_before], [0, 0, *pad_after], name="pad_temp")
    rc = te.reduce_axis((i64(0), i64(c // groups)), name="rc")
    ry = te.reduce_axis((i64(0), i64(kh)), name="ry")
    rx = te.reduce_axis((i64(0), i64(kw)), name="rx")
    (sh, sw), (dh, dw) = strides, dilation

    def body(nn: E.PrimExpr, ff: E.PrimExpr, yy: E.PrimExpr, xx: E.PrimExpr) -> E.PrimExpr:
        channel: E.PrimExpr = rc
        if groups != 1:
            channel = te.floordiv(ff, i64(f // groups)) * i64(c // groups) + rc
        return te.sum(temp[nn, channel, yy * i64(sh) + ry * i64(dh), xx * i64(sw) + rx * i64(dw)]
                      * weight[ff, rc, ry, rx], axis=[rc, ry, rx])

    name = "group_conv2d_nchw" if groups > 1 else "conv2d_nchw"
    shape = tuple(i64(d) for d in (n, f, *out_dims))
    return te.compute(shape, lambda *i: body(*i), name=name, tag=name, varargs_names=["nn", "ff", "yy", "xx"])


@register("nn.conv2d", OpPattern.OUT_EWISE_FUSABLE, (2, 2))
def conv2d(inputs: Sequence[Operand], attrs: Mapping[str, Any], constants: Mapping[str, np.ndarray]) -> Legalized:
    """`nn.conv2d(data, weight)`, attrs (Relax names): `strides` (2 ints, default 1),
    `padding` (4 ints top, left, bottom, right; 1 or 2 accepted), `dilation` (2 ints),
    `groups` (int), `data_layout` "NCHW", `kernel_layout` "OIHW", `out_layout` "NCHW",
    `out_dtype` (None/"" or the input dtype). Bias is a separate `add`."""
    op = "nn.conv2d"
    data, weight = expect_tensor(inputs[0], op, 0), expect_tensor(inputs[1], op, 1)
    for key, want in (("data_layout", "NCHW"), ("kernel_layout", "OIHW"), ("out_layout", "NCHW")):
        if attrs.get(key, want) != want:
            raise ModelError(f"{op}: only {key}={want!r} is supported, got {attrs[key]!r}")
    out_dtype = attrs.get("out_dtype") or data.dtype
    if out_dtype != data.dtype or weight.dtype != data.dtype:
        raise ModelError(f"{op}: mixed dtypes ({data.dtype}, {weight.dtype} -> {out_dtype}) are not supported")
    before, after = conv_padding(attrs, op)
    return conv2d_nchw(data, weight, int_list(attrs, "strides", (1, 1), 2, op), before, after,
                       int_list(attrs, "dilation", (1, 1), 2, op), attr_int(attrs, "groups", 1, op), op)
