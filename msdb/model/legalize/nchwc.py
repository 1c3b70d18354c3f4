"""msdb's own ops of the `nchwc` mode (no TVM op): activations in blocks of `PACK_BLOCK` channels,
NCHW16c ([N, C/16, H, W, 16]), between the convs, pools and elementwise ops of a CNN
(docs/architecture.md, "Models"; `msdb.model.nchwc` rewrites the graph).

Why: a conv, depthwise conv or pool over NCHW data vectorizes along a row of the image, which at
7 or 14 pixels is one masked vector and at stride 2 a strided one; over NCHW16c every step is a
full vector of 16 channels whatever the image width or stride, and a conv's output needs no
transposition back to NCHW (`conv2d_packed`'s `conv2d_unpack`).

- `nn.conv2d_nchwc(data, weight)`: NCHW16c data and weights [F/16, C/16, KH, KW, 16 (input), 16
  (output)] (`pack_blocked_weight`), or NCHW data (a model's stem, whose 3 channels would be
  mostly padding in blocks) and `pack_weight`'s [F/16, C, KH, KW, 16]; output NCHW16c.
- `nn.depthwise_conv2d_nchwc(data, weight)`: NCHW16c data, weights [C/16, KH, KW, 16]
  (`pack_depthwise_weight`).
- `nn.to_nchwc(x)` and `nn.from_nchwc(x, channels=C)`: the layout changes where a blocked
  region starts and ends. Channels past C (C not a multiple of 16) are zeros going in and are
  dropped coming out; in between they hold finite values no output reads (their weights are 0).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import numpy as np

from msdb.ir import expr as E
from msdb.ir import te
from msdb.model.graph import ModelError
from msdb.model.legalize.common import attr_int, expect_tensor, i64, int_list, static_shape
from msdb.model.legalize.conv import PACK_BLOCK, conv2d_blocked_output, conv_out_dims, conv_padding
from msdb.model.legalize.registry import Legalized, Operand, register
from msdb.model.ops import OpPattern

__all__ = ["blocks_of", "pack_blocked_weight", "pack_depthwise_weight", "pad_channels", "pad_weight_channels"]


def blocks_of(channels: int) -> int:
    """How many blocks of `PACK_BLOCK` hold `channels` channels (the last one padded)."""
    return -(-channels // PACK_BLOCK)


def pad_channels(array: np.ndarray, axis: int, value: float = 0.0) -> np.ndarray:
    """`array` with `axis` padded with `value` to a whole number of blocks."""
    missing = blocks_of(array.shape[axis]) * PACK_BLOCK - array.shape[axis]
    if not missing:
        return array
    widths = [(0, 0)] * array.ndim
    widths[axis] = (0, missing)
    return np.pad(array, widths, constant_values=value)


def pad_weight_channels(weight: np.ndarray) -> np.ndarray:
    """OIHW weights with both channel counts padded with zeros to whole blocks: what a conv
    between NCHW16c tensors reads (the padding input channels then never reach an output)."""
    return pad_channels(pad_channels(weight, 0), 1)


def pack_blocked_weight(weight: np.ndarray) -> np.ndarray:
    """OIHW weights as `nn.conv2d_nchwc` reads them with NCHW16c data: [F/16, C/16, KH, KW, 16
    (input channel), 16 (output channel)] (TVM's OIHW16i16o), both channel counts padded with
    zeros to whole blocks."""
    padded = pad_weight_channels(weight)
    f, c, kh, kw = padded.shape
    blocked = padded.reshape(f // PACK_BLOCK, PACK_BLOCK, c // PACK_BLOCK, PACK_BLOCK, kh, kw)
    return np.ascontiguousarray(blocked.transpose(0, 2, 4, 5, 3, 1))


def pack_depthwise_weight(weight: np.ndarray) -> np.ndarray:
    """Depthwise weights [C, 1, KH, KW] as `nn.depthwise_conv2d_nchwc` reads them: [C/16, KH,
    KW, 16], the channels padded with zeros to whole blocks."""
    padded = pad_channels(weight[:, 0], 0)
    c, kh, kw = padded.shape
    return np.ascontiguousarray(padded.reshape(c // PACK_BLOCK, PACK_BLOCK, kh, kw).transpose(0, 2, 3, 1))


def _blocked_shape(tensor: te.Tensor, op: str, position: int) -> tuple[int, ...]:
    shape = static_shape(tensor, op)
    if len(shape) != 5 or shape[4] != PACK_BLOCK:
        raise ModelError(f"{op}: input {position} must be NCHW{PACK_BLOCK}c ([N, C/{PACK_BLOCK}, H, W, "
                         f"{PACK_BLOCK}]), got shape {list(shape)}")
    return shape


Window = Callable[[E.PrimExpr, E.PrimExpr], tuple[E.PrimExpr, E.PrimExpr]]


def _window(data: te.Tensor, kh: int, kw: int, attrs: Mapping[str, Any], op: str
            ) -> tuple[te.Tensor, te.TEIterVar, te.TEIterVar, list[int], Window]:
    """A blocked conv's kernel window over NCHW16c `data` (attrs as `nn.conv2d`'s): the padded
    input `pad_temp`, the window's reduce axes ry and rx, the output's height and width, and
    the input row and column an output pixel reads at a window step."""
    _, _, h, w, _ = static_shape(data, op)
    before, after = conv_padding(attrs, op)
    (sh, sw), (dh, dw) = int_list(attrs, "strides", (1, 1), 2, op), int_list(attrs, "dilation", (1, 1), 2, op)
    out = conv_out_dims(h, w, kh, kw, (sh, sw), before, after, (dh, dw), op)
    temp = te.pad(data, [0, 0, *before, 0], [0, 0, *after, 0], name="pad_temp")
    ry = te.reduce_axis((i64(0), i64(kh)), name="ry")
    rx = te.reduce_axis((i64(0), i64(kw)), name="rx")

    def window(yy: E.PrimExpr, xx: E.PrimExpr) -> tuple[E.PrimExpr, E.PrimExpr]:
        return yy * i64(sh) + ry * i64(dh), xx * i64(sw) + rx * i64(dw)

    return temp, ry, rx, out, window


@register("nn.conv2d_nchwc", OpPattern.OUT_EWISE_FUSABLE, (2, 2))
def conv2d_nchwc(inputs: Sequence[Operand], attrs: Mapping[str, Any], constants: Mapping[str, np.ndarray]
                 ) -> Legalized:
    """`nn.conv2d_nchwc(data, weight)`, attrs as `nn.conv2d`'s (groups 1): blocks `pad_temp`
    and `conv2d_NCHWc` ([N, F/16, OH, OW, 16]), reduce axes rc (input blocks), ry, rx, rci (the
    16 channels of a block), so that one input value is broadcast against a weight vector of 16
    output channels per step."""
    op = "nn.conv2d_nchwc"
    data, weight = expect_tensor(inputs[0], op, 0), expect_tensor(inputs[1], op, 1)
    if weight.dtype != data.dtype:
        raise ModelError(f"{op}: mixed dtypes ({data.dtype}, {weight.dtype}) are not supported")
    if data.ndim == 4:
        before, after = conv_padding(attrs, op)
        return conv2d_blocked_output(data, weight, int_list(attrs, "strides", (1, 1), 2, op), before, after,
                                     int_list(attrs, "dilation", (1, 1), 2, op), op)
    n, blocks_in, h, w, _ = _blocked_shape(data, op, 0)
    wshape = static_shape(weight, op)
    if len(wshape) != 6 or wshape[1] != blocks_in or wshape[4:] != (PACK_BLOCK, PACK_BLOCK):
        raise ModelError(f"{op}: weights {list(wshape)} are not [F/{PACK_BLOCK}, {blocks_in}, KH, KW, {PACK_BLOCK}, "
                         f"{PACK_BLOCK}] for data {[n, blocks_in, h, w, PACK_BLOCK]}")
    blocks_out, _, kh, kw = wshape[:4]
    temp, ry, rx, (out_h, out_w), window = _window(data, kh, kw, attrs, op)
    rc = te.reduce_axis((i64(0), i64(blocks_in)), name="rc")
    rci = te.reduce_axis((i64(0), i64(PACK_BLOCK)), name="rci")

    def body(nn: E.PrimExpr, fo: E.PrimExpr, yy: E.PrimExpr, xx: E.PrimExpr, fi: E.PrimExpr) -> E.PrimExpr:
        return te.sum(temp[(nn, rc, *window(yy, xx), rci)] * weight[fo, rc, ry, rx, rci, fi], axis=[rc, ry, rx, rci])

    return te.compute(tuple(i64(d) for d in (n, blocks_out, out_h, out_w, PACK_BLOCK)), lambda *i: body(*i),
                      name="conv2d_NCHWc", tag="conv2d_NCHWc", varargs_names=["nn", "fo", "yy", "xx", "fi"])


@register("nn.depthwise_conv2d_nchwc", OpPattern.OUT_EWISE_FUSABLE, (2, 2))
def depthwise_conv2d_nchwc(inputs: Sequence[Operand], attrs: Mapping[str, Any], constants: Mapping[str, np.ndarray]
                           ) -> Legalized:
    """`nn.depthwise_conv2d_nchwc(data, weight)`, attrs as `nn.conv2d`'s: blocks `pad_temp` and
    `depthwise_conv2d_NCHWc`, each output channel from its own input channel."""
    op = "nn.depthwise_conv2d_nchwc"
    data, weight = expect_tensor(inputs[0], op, 0), expect_tensor(inputs[1], op, 1)
    if weight.dtype != data.dtype:
        raise ModelError(f"{op}: mixed dtypes ({data.dtype}, {weight.dtype}) are not supported")
    n, blocks, _, _, _ = _blocked_shape(data, op, 0)
    wshape = static_shape(weight, op)
    if len(wshape) != 4 or wshape[0] != blocks or wshape[3] != PACK_BLOCK:
        raise ModelError(f"{op}: weights {list(wshape)} are not [{blocks}, KH, KW, {PACK_BLOCK}]")
    temp, ry, rx, (out_h, out_w), window = _window(data, wshape[1], wshape[2], attrs, op)

    def body(nn: E.PrimExpr, c: E.PrimExpr, yy: E.PrimExpr, xx: E.PrimExpr, ci: E.PrimExpr) -> E.PrimExpr:
        return te.sum(temp[(nn, c, *window(yy, xx), ci)] * weight[c, ry, rx, ci], axis=[ry, rx])

    return te.compute(tuple(i64(d) for d in (n, blocks, out_h, out_w, PACK_BLOCK)), lambda *i: body(*i),
                      name="depthwise_conv2d_NCHWc", tag="depthwise_conv2d_NCHWc",
                      varargs_names=["nn", "c", "yy", "xx", "ci"])


@register("nn.to_nchwc", OpPattern.INJECTIVE, (1, 1))
def to_nchwc(inputs: Sequence[Operand], attrs: Mapping[str, Any], constants: Mapping[str, np.ndarray]) -> Legalized:
    """`nn.to_nchwc(x)`: NCHW to NCHW16c, channels past C zero. No attrs."""
    op = "nn.to_nchwc"
    x = expect_tensor(inputs[0], op, 0)
    shape = static_shape(x, op)
    if len(shape) != 4:
        raise ModelError(f"{op}: expects a 4-d NCHW input, got shape {list(shape)}")
    n, c, h, w = shape
    zero = E.make_const(0, x.dtype)

    def body(nn: E.PrimExpr, cb: E.PrimExpr, yy: E.PrimExpr, xx: E.PrimExpr, ci: E.PrimExpr) -> E.PrimExpr:
        channel = cb * i64(PACK_BLOCK) + ci
        value = x[nn, channel, yy, xx]
        return value if c % PACK_BLOCK == 0 else te.if_then_else(channel < i64(c), value, zero)

    return te.compute(tuple(i64(d) for d in (n, blocks_of(c), h, w, PACK_BLOCK)), lambda *i: body(*i),
                      name="T_to_nchwc", varargs_names=["nn", "cb", "yy", "xx", "ci"])


@register("nn.from_nchwc", OpPattern.INJECTIVE, (1, 1))
def from_nchwc(inputs: Sequence[Operand], attrs: Mapping[str, Any], constants: Mapping[str, np.ndarray]) -> Legalized:
    """`nn.from_nchwc(x)`, attr `channels` (C): NCHW16c back to NCHW, the padding channels dropped."""
    op = "nn.from_nchwc"
    x = expect_tensor(inputs[0], op, 0)
    n, blocks, h, w, _ = _blocked_shape(x, op, 0)
    channels = attr_int(attrs, "channels", blocks * PACK_BLOCK, op)
    if blocks_of(channels) != blocks:
        raise ModelError(f"{op}: channels={channels} do not fill {blocks} blocks of {PACK_BLOCK}")
    return te.compute(tuple(i64(d) for d in (n, channels, h, w)),
                      lambda nn, cc, yy, xx: x[nn, te.floordiv(cc, i64(PACK_BLOCK)), yy, xx,
                                               te.floormod(cc, i64(PACK_BLOCK))],
                      name="T_from_nchwc", varargs_names=["nn", "cc", "yy", "xx"])
