"""`nn.max_pool2d` and `nn.avg_pool2d` as topi's C++ pool (include/tvm/topi/nn/pooling.h,
`pool_impl_nd`) builds them (docs/architecture.md, "Legalization").

Blocks: `pad_temp` only when some padding is nonzero (C++ `topi::pad`: conditions only on the
padded sides, pad value the dtype's lowest for max and 0 for avg), then `pool_max`, or
`pool_sum` + `pool_avg`; axes ax0.., reduce axes rv0, rv1; `pool_max` and `pool_avg` carry
the `schedule_rule` annotation MetaSchedule dispatches on.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from msdb.ir import expr as E
from msdb.ir import te
from msdb.model.graph import ModelError
from msdb.model.legalize.common import ax_compute, expect_tensor, i64, int_list, static_shape
from msdb.model.legalize.conv import PACK_BLOCK, conv_padding
from msdb.model.legalize.registry import Legalized, Operand, register
from msdb.model.ops import OpPattern

__all__ = ["topi_cpp_pad", "pool2d"]


def topi_cpp_pad(data: te.Tensor, before: Sequence[int], after: Sequence[int], value: E.PrimExpr,
                 name: str) -> te.Tensor:
    """C++ `topi::pad`: `x >= before` only where before > 0, `x < before + n` only where after > 0."""
    shape = static_shape(data, name)

    def body(*out: E.PrimExpr) -> E.PrimExpr:
        conds: list[E.PrimExpr] = []
        index: list[E.PrimExpr] = []
        for d, n in enumerate(shape):
            if before[d]:
                conds.append(out[d] >= i64(before[d]))
                index.append(out[d] - i64(before[d]))
            else:
                index.append(out[d])
            if after[d]:
                conds.append(te.simplify(out[d] < i64(before[d] + n)))
        if conds:
            return te.if_then_else(te.all(*conds), data[tuple(index)], value)
        return data[tuple(index)]

    return ax_compute([n + b + a for n, b, a in zip(shape, before, after)], body, name=name)


def pool2d(x: te.Tensor, kind: str, kernel: Sequence[int], strides: Sequence[int], dilation: Sequence[int],
           pad_before: Sequence[int], pad_after: Sequence[int], ceil_mode: bool, count_include_pad: bool,
           op: str) -> te.Tensor:
    """topi pool2d over the H, W axes (2, 3) of an NCHW tensor, or of an NCHW16c one (5-d: the
    `nchwc` mode's, `msdb.model.legalize.nchwc`)."""
    shape = static_shape(x, op)
    if len(shape) not in (4, 5):
        raise ModelError(f"{op}: expects a 4-d NCHW or 5-d NCHW16c input, got shape {list(shape)}")
    axes = (2, 3)
    tails = list(pad_after)
    offsets = [0, 0]
    out_shape = list(shape)
    for i, ax in enumerate(axes):
        if ceil_mode:
            offsets[i] = strides[i] - 1
            tails[i] += offsets[i]
        raw = (shape[ax] - (kernel[i] - 1) * dilation[i] - 1 + pad_before[i] + tails[i]) // strides[i] + 1
        if ceil_mode and (raw - 1) * strides[i] >= shape[ax] + pad_before[i]:
            raw -= 1
        if raw <= 0:
            raise ModelError(f"{op}: pool window, padding and strides give an empty output ({raw})")
        out_shape[ax] = raw
    do_pad = any(pad_before) or any(tails)
    inner = [0] * (len(shape) - 4)
    before4 = [0, 0, *pad_before, *inner]
    after4 = [0, 0, *tails, *inner]
    rv = [te.reduce_axis((i64(0), i64(k)), name=f"rv{i}") for i, k in enumerate(kernel)]

    def window(out: tuple[E.PrimExpr, ...]) -> tuple[E.PrimExpr, ...]:
        index = list(out)
        for i, ax in enumerate(axes):
            index[ax] = out[ax] * i64(strides[i]) + rv[i] * i64(dilation[i])
        return tuple(index)

    if kind == "max":
        temp = topi_cpp_pad(x, before4, after4, te.min_value(x.dtype), "pad_temp") if do_pad else x
        return ax_compute(out_shape, lambda *o: te.max(temp[window(o)], axis=rv), "pool_max",
                          attrs={"schedule_rule": "meta_schedule.pool_max"})
    temp = topi_cpp_pad(x, before4, after4, E.make_const(0, x.dtype), "pad_temp") if do_pad else x
    pool_sum = ax_compute(out_shape, lambda *o: te.sum(temp[window(o)], axis=rv), "pool_sum")

    def average(*out: E.PrimExpr) -> E.PrimExpr:
        count: E.PrimExpr = i64(1)
        for i, ax in enumerate(axes):
            start = out[ax] * i64(strides[i]) - i64(pad_before[i])
            end = start + i64((kernel[i] - 1) * dilation[i])
            if count_include_pad:
                end = E.Min(end, i64(shape[ax] + tails[i] - 1 - offsets[i]))
                count = count * (_divide(end - start, dilation[i]) + i64(1))
            else:
                jumps = E.Max(_divide(i64(dilation[i] - 1) - start, dilation[i]), i64(0))
                end = E.Min(end, i64(shape[ax] - 1))
                count = count * (_divide(end - (start + i64(dilation[i]) * jumps), dilation[i]) + i64(1))
        if not count_include_pad:
            count = E.Max(count, i64(1))
        return pool_sum[out] / E.Cast(x.dtype, count)

    return ax_compute(out_shape, average, "pool_avg", attrs={"schedule_rule": "meta_schedule.pool_avg"})


def _divide(value: E.PrimExpr, divisor: int) -> E.PrimExpr:
    """topi's truncating `value / divisor`; by 1 it is `value` itself (TVM's simplifier drops
    it; msdb's simplifier does not re-canonicalize the sum under a removed `/ 1`)."""
    return value if divisor == 1 else value / i64(divisor)


def _pool(inputs: Sequence[Operand], attrs: Mapping[str, Any], kind: str, op: str) -> te.Tensor:
    x = expect_tensor(inputs[0], op, 0)
    want = "NCHW" if x.ndim == 4 else f"NCHW{PACK_BLOCK}c"
    if x.ndim == 5 and static_shape(x, op)[4] != PACK_BLOCK:
        raise ModelError(f"{op}: a 5-d input must be NCHW{PACK_BLOCK}c, got shape {list(static_shape(x, op))}")
    for key in ("layout", "out_layout"):
        if attrs.get(key, "NCHW") != want:
            raise ModelError(f"{op}: a {x.ndim}-d input needs {key}={want!r}, got {attrs.get(key, 'NCHW')!r}")
    if "pool_size" not in attrs:
        raise ModelError(f"{op}: attribute 'pool_size' is required")
    kernel = int_list(attrs, "pool_size", (1, 1), 2, op)
    strides = int_list(attrs, "strides", (1, 1), 2, op)
    dilation = int_list(attrs, "dilation", (1, 1), 2, op)
    before, after = conv_padding(attrs, op)
    return pool2d(x, kind, kernel, strides, dilation, before, after, bool(attrs.get("ceil_mode", False)),
                  bool(attrs.get("count_include_pad", False)), op)


@register("nn.max_pool2d", OpPattern.OUT_EWISE_FUSABLE, (1, 1))
def max_pool2d(inputs: Sequence[Operand], attrs: Mapping[str, Any], constants: Mapping[str, np.ndarray]) -> Legalized:
    """`nn.max_pool2d(x)`, attrs: `pool_size` (2 ints, required), `strides`, `dilation` (2
    ints, default 1), `padding` (4 ints top, left, bottom, right), `ceil_mode` (bool),
    `layout` "NCHW"."""
    return _pool(inputs, attrs, "max", "nn.max_pool2d")


@register("nn.avg_pool2d", OpPattern.OUT_EWISE_FUSABLE, (1, 1))
def avg_pool2d(inputs: Sequence[Operand], attrs: Mapping[str, Any], constants: Mapping[str, np.ndarray]) -> Legalized:
    """`nn.avg_pool2d(x)`, attrs as `nn.max_pool2d` plus `count_include_pad` (bool, default
    False, as ONNX AveragePool)."""
    return _pool(inputs, attrs, "avg", "nn.avg_pool2d")
