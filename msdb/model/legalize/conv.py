"""`nn.conv2d` as TVM's generic `topi.nn.conv` (python/tvm/topi/nn/conv2d.py), which is what
Relax legalizes to (docs/architecture.md, "Legalization").

Blocks: `pad_temp` (topi/nn/pad.py: a copy even without padding) then `conv2d_nchw`, or
`group_conv2d_nchw` when groups > 1 (depthwise included); spatial axes nn, ff, yy, xx, reduce
axes rc (C / groups), ry, rx; input channel `rc`, or `ff // (F / groups) * (C / groups) + rc`.

`nn.conv2d_packed` is msdb's own (no TVM op): the conv of `fuse="packed"`, whose weights were
packed in blocks of 16 output channels when the model was loaded (`pack_weight`,
`msdb.model.fuse.pack_convs`); see `conv2d_packed`.
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

__all__ = ["conv2d_nchw", "conv2d_packed", "conv2d_blocked_output", "conv_out_dims", "conv_padding", "PACK_BLOCK",
           "pack_weight", "CONV_LAYOUTS"]

#: The layout attributes msdb legalizes convs with (Relax's defaults): attribute -> value.
CONV_LAYOUTS = {"data_layout": "NCHW", "kernel_layout": "OIHW", "out_layout": "NCHW"}

#: Output channels per block of a packed conv's weights (`pack_weight`): one AVX-512 vector of
#: fp32, two AVX2 ones.
PACK_BLOCK = 16


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


def conv_out_dims(h: int, w: int, kh: int, kw: int, strides: Sequence[int], pad_before: Sequence[int],
              pad_after: Sequence[int], dilation: Sequence[int], op: str) -> list[int]:
    out_dims = []
    for d, k, dil, pb, pe, s in zip((h, w), (kh, kw), dilation, pad_before, pad_after, strides):
        out = (d - (k - 1) * dil - 1 + pb + pe) // s + 1
        if out <= 0:
            raise ModelError(f"{op}: kernel, padding and strides give an empty output ({out})")
        out_dims.append(out)
    return out_dims


def conv2d_nchw(data: te.Tensor, weight: te.Tensor, strides: Sequence[int], pad_before: Sequence[int],
                pad_after: Sequence[int], dilation: Sequence[int], groups: int, op: str = "nn.conv2d") -> te.Tensor:
    """topi.nn.conv for NCHW data and OIHW weights."""
    n, c, h, w = static_shape(data, op)
    f, c_per_group, kh, kw = static_shape(weight, op)
    if data.ndim != 4 or weight.ndim != 4:
        raise ModelError(f"{op}: expects 4-d NCHW data and OIHW weights")
    if groups < 1 or c % groups or f % groups or c // groups != c_per_group:
        raise ModelError(f"{op}: {c} input channels, {f} filters of {c_per_group} channels and groups={groups} disagree")
    out_dims = conv_out_dims(h, w, kh, kw, strides, pad_before, pad_after, dilation, op)
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
    for key, want in CONV_LAYOUTS.items():
        if attrs.get(key, want) != want:
            raise ModelError(f"{op}: only {key}={want!r} is supported, got {attrs[key]!r}")
    out_dtype = attrs.get("out_dtype") or data.dtype
    if out_dtype != data.dtype or weight.dtype != data.dtype:
        raise ModelError(f"{op}: mixed dtypes ({data.dtype}, {weight.dtype} -> {out_dtype}) are not supported")
    before, after = conv_padding(attrs, op)
    return conv2d_nchw(data, weight, int_list(attrs, "strides", (1, 1), 2, op), before, after,
                       int_list(attrs, "dilation", (1, 1), 2, op), attr_int(attrs, "groups", 1, op), op)


def pack_weight(weight: np.ndarray) -> np.ndarray:
    """OIHW conv weights as `conv2d_packed` reads them: [O / PACK_BLOCK, I, H, W, PACK_BLOCK]
    (TVM's OIHW16o kernel layout), each block's output channels contiguous."""
    o, i, h, w = weight.shape
    if o % PACK_BLOCK:
        raise ModelError(f"nn.conv2d_packed: {o} output channels are not a multiple of {PACK_BLOCK}")
    return np.ascontiguousarray(weight.reshape(o // PACK_BLOCK, PACK_BLOCK, i, h, w).transpose(0, 2, 3, 4, 1))


def conv2d_packed(data: te.Tensor, weight: te.Tensor, strides: Sequence[int], pad_before: Sequence[int],
                  pad_after: Sequence[int], dilation: Sequence[int], op: str = "nn.conv2d_packed") -> te.Tensor:
    """A conv of NCHW data with packed weights ([F/16, C, KH, KW, 16], `pack_weight`), msdb's
    `fuse="packed"` form (docs/architecture.md, "Models"). Blocks: `pad_temp`, then
    `conv2d_NCHWc` computing [N, F/16, OH, OW, 16] (`conv2d_blocked_output`), then
    `conv2d_unpack` writing the NCHW result that the fused epilogue reads."""
    packed = conv2d_blocked_output(data, weight, strides, pad_before, pad_after, dilation, op)
    n, blocks, out_h, out_w, _ = static_shape(packed, op)
    return te.compute(tuple(i64(d) for d in (n, blocks * PACK_BLOCK, out_h, out_w)),
                      lambda nn, ff, yy, xx: packed[nn, te.floordiv(ff, i64(PACK_BLOCK)), yy, xx,
                                                    te.floormod(ff, i64(PACK_BLOCK))],
                      name="conv2d_unpack")


def conv2d_blocked_output(data: te.Tensor, weight: te.Tensor, strides: Sequence[int], pad_before: Sequence[int],
                          pad_after: Sequence[int], dilation: Sequence[int], op: str) -> te.Tensor:
    """The conv of NCHW data with packed weights ([F/16, C, KH, KW, 16]) as `pad_temp` then
    `conv2d_NCHWc` [N, F/16, OH, OW, 16]: output channels innermost, so that a schedule
    vectorizes over them (one weight vector times a broadcast input value per step, full
    vectors whatever the image width or stride). `conv2d_packed` unpacks it to NCHW; the
    `nchwc` mode keeps it blocked (`msdb.model.legalize.nchwc`)."""
    n, c, h, w = static_shape(data, op)
    if data.ndim != 4 or weight.ndim != 5:
        raise ModelError(f"{op}: expects 4-d NCHW data and 5-d packed weights [F/16, C, KH, KW, 16]")
    blocks, c_w, kh, kw, block = static_shape(weight, op)
    if c_w != c or block != PACK_BLOCK:
        raise ModelError(f"{op}: weights {[blocks, c_w, kh, kw, block]} do not pack {c} input channels in blocks "
                         f"of {PACK_BLOCK}")
    out_h, out_w = conv_out_dims(h, w, kh, kw, strides, pad_before, pad_after, dilation, op)
    temp = te.pad(data, [0, 0, *pad_before], [0, 0, *pad_after], name="pad_temp")
    rc = te.reduce_axis((i64(0), i64(c)), name="rc")
    ry = te.reduce_axis((i64(0), i64(kh)), name="ry")
    rx = te.reduce_axis((i64(0), i64(kw)), name="rx")
    (sh, sw), (dh, dw) = strides, dilation

    def body(nn: E.PrimExpr, fo: E.PrimExpr, yy: E.PrimExpr, xx: E.PrimExpr, fi: E.PrimExpr) -> E.PrimExpr:
        return te.sum(temp[nn, rc, yy * i64(sh) + ry * i64(dh), xx * i64(sw) + rx * i64(dw)]
                      * weight[fo, rc, ry, rx, fi], axis=[rc, ry, rx])

    return te.compute(tuple(i64(d) for d in (n, blocks, out_h, out_w, PACK_BLOCK)), lambda *i: body(*i),
                      name="conv2d_NCHWc", tag="conv2d_NCHWc", varargs_names=["nn", "fo", "yy", "xx", "fi"])


@register("nn.conv2d_packed", OpPattern.OUT_EWISE_FUSABLE, (2, 2))
def conv2d_packed_op(inputs: Sequence[Operand], attrs: Mapping[str, Any], constants: Mapping[str, np.ndarray]
                     ) -> Legalized:
    """`nn.conv2d_packed(data, packed_weight)`: msdb's own op (`fuse="packed"` puts it where a
    conv2d with constant weights and groups=1 was); attrs as `nn.conv2d`'s."""
    op = "nn.conv2d_packed"
    data, weight = expect_tensor(inputs[0], op, 0), expect_tensor(inputs[1], op, 1)
    out_dtype = attrs.get("out_dtype") or data.dtype
    if out_dtype != data.dtype or weight.dtype != data.dtype:
        raise ModelError(f"{op}: mixed dtypes ({data.dtype}, {weight.dtype} -> {out_dtype}) are not supported")
    before, after = conv_padding(attrs, op)
    return conv2d_packed(data, weight, int_list(attrs, "strides", (1, 1), 2, op), before, after,
                         int_list(attrs, "dilation", (1, 1), 2, op), op)
