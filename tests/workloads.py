"""ResNet-style PrimFuncs shared by the compile, schedule, hashing and TVM tests, built by
`msdb.model.legalize.legalize_op` over te placeholders: the TensorIR TVM 0.27's Relax
legalization gives each operator (docs/architecture.md, "Legalization"), with a conv's epilogue
chained onto its output in one function, the shape of TVM's `fused_conv2d_add_relu`. Small
shapes, so the tests stay fast."""

from __future__ import annotations

from msdb.ir import expr as E
from msdb.ir import te
from msdb.ir.function import PrimFunc
from msdb.model.legalize import legalize_op
from msdb.model.legalize.common import static_shape
from msdb.model.legalize.nchwc import blocks_of


def _placeholder(shape: tuple[int, ...], name: str) -> te.Tensor:
    """A float32 placeholder with int64 dimensions, as Relax's shapes are."""
    return te.placeholder(tuple(E.make_const(d, "int64") for d in shape), "float32", name)


def _one(op: str, *inputs: te.Tensor, **attrs: object) -> te.Tensor:
    out = legalize_op(op, inputs, attrs)
    assert isinstance(out, te.Tensor), f"{op} legalizes to one tensor"
    return out


def conv_func(n: int, c: int, hw: int, f: int, k: int, stride: int, pad: int, *, groups: int = 1,
              epilogue: str = "", packed: bool = False, winograd: int = 0, blocked: bool = False) -> PrimFunc:
    """A conv (NCHW / OIHW, dilation 1) and its epilogue: `epilogue` is a sequence of "b" (bias
    add), "r" (residual add) and "u" (relu), e.g. "bu" = TVM's fused_conv2d_add_relu. `packed`:
    `fuse="packed"`'s conv, weights [f/16, c, k, k, 16] (`msdb.model.legalize.conv.pack_weight`);
    `winograd` m: `fuse="winograd"`'s F(m, 3) conv (k 3, stride 1), weights [m+2, m+2, f/16, c, 16]
    (`msdb.model.legalize.winograd.winograd_weight`); with `blocked`, `fuse="nchwc"`'s: data,
    bias, residual and output NCHW16c ([n, blocks(c), hw, hw, 16]), weights for c padded to
    whole blocks (`msdb.model.legalize.nchwc.blocks_of`)."""
    if blocked and not winograd:
        raise ValueError("blocked: only a Winograd conv here (the blocked direct conv: tests/model/test_nchwc.py)")
    data = _placeholder((n, blocks_of(c), hw, hw, 16) if blocked else (n, c, hw, hw), "data")
    if winograd:
        weight = _placeholder((winograd + 2, winograd + 2, f // 16, blocks_of(c) * 16 if blocked else c, 16), "weight")
        out = _one("nn.conv2d_winograd", data, weight, padding=(pad,) * 4)
    elif packed:
        weight = _placeholder((f // 16, c, k, k, 16), "weight")
        out = _one("nn.conv2d_packed", data, weight, strides=(stride, stride), padding=(pad,) * 4)
    else:
        weight = _placeholder((f, c // groups, k, k), "weight")
        out = _one("nn.conv2d", data, weight, strides=(stride, stride), padding=(pad,) * 4, groups=groups)
    args = [data, weight]
    for step in epilogue:
        if step == "u":
            out = _one("nn.relu", out)
            continue
        if step not in "br":
            raise ValueError(f"unknown epilogue step {step!r}; use b, r or u")
        bias = (1, f // 16, 1, 1, 16) if blocked else (1, f, 1, 1)
        other = _placeholder(bias if step == "b" else static_shape(out, "add"),
                             "bias" if step == "b" else "residual")
        args.append(other)
        out = _one("add", out, other)
    return te.create_prim_func([*args, out])


def matmul_func(m: int, n: int, k: int, *, bias: bool = False, batch: tuple[int, ...] = ()) -> PrimFunc:
    """Relax's legalized matmul (A (*batch, m, k) @ B (k, n): a transformer's linear layer has
    batch (1,)), plus a broadcast add of a (1, n) bias."""
    a, b = _placeholder((*batch, m, k), "A"), _placeholder((k, n), "B")
    out = _one("matmul", a, b)
    args = [a, b]
    if bias:
        args.append(_placeholder((1, n), "C"))
        out = _one("add", out, args[-1])
    return te.create_prim_func([*args, out])


def max_pool_func(n: int, c: int, hw: int, k: int, stride: int, pad: int) -> PrimFunc:
    """`nn.max_pool2d`: pad_temp (padded with the dtype's lowest value), then pool_max."""
    data = _placeholder((n, c, hw, hw), "data")
    out = _one("nn.max_pool2d", data, pool_size=(k, k), strides=(stride, stride), padding=(pad,) * 4)
    return te.create_prim_func([data, out])


def relu_func(shape: tuple[int, ...]) -> PrimFunc:
    """An elementwise function: `nn.relu` of a tensor."""
    x = _placeholder(shape, "x")
    return te.create_prim_func([x, _one("nn.relu", x)])
