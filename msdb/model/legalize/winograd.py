"""`nn.conv2d_winograd`: msdb's own op for `fuse="winograd"` (NCHW data) and `fuse="nchwc"`
(NCHW16c data), a 3x3 stride-1 conv computed with Winograd's minimal filtering F(m x m, 3 x 3).

Blocks `pad_temp`, `data_pack` (B^T d B per tile), `bgemm` (the batched product), `inverse`
(A^T M A) and `conv2d_unpack`; the weights U = G g G^T are transformed once at load time
(`winograd_weight`, called by `msdb.model.fuse.pack_convs` and `msdb.model.nchwc`). Why, the
block shapes and the measured rounding: see docs/architecture.md, "Models".
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any, Mapping, Sequence

import numpy as np

from msdb.ir import expr as E
from msdb.ir import stmt as S
from msdb.ir import te
from msdb.model.graph import ModelError
from msdb.model.legalize.common import expect_tensor, i64, static_shape
from msdb.model.legalize.conv import PACK_BLOCK, conv_padding
from msdb.model.legalize.registry import Legalized, Operand, register
from msdb.model.ops import OpPattern

__all__ = ["winograd_tile", "PARTIAL_TILE_WASTE", "winograd_weight", "winograd_output", "not_unit_step", "conv2d_winograd",
           "channels_innermost", "WINOGRAD_BLOCKS", "WINOGRAD_RULES"]

#: The block names a schedule recognizes a Winograd conv by (`tuner/space/default_planner.py`).
WINOGRAD_BLOCKS = ("data_pack", "bgemm", "inverse")

#: The `schedule_rule` annotation of each transform: a design space schedules them with msdb's
#: custom rules (`tuner/space/rules/winograd.py`), as TVM does its own Winograd convs'.
WINOGRAD_RULES = {"data_pack": "msdb_winograd_data_pack", "inverse": "msdb_winograd_inverse"}

_F = Fraction
#: (B^T, G, A^T) of F(m, 3) per output tile size m, interpolation points 0, 1, -1 (m = 2) and
#: 0, 1, -1, 2, -2 (m = 4), plus the point at infinity: the standard Cook-Toom matrices.
_MATRICES: dict[int, tuple[list[list[Fraction]], list[list[Fraction]], list[list[Fraction]]]] = {
    2: ([[_F(v) for v in row] for row in ((1, 0, -1, 0), (0, 1, 1, 0), (0, -1, 1, 0), (0, 1, 0, -1))],
        [[_F(1), _F(0), _F(0)], [_F(1, 2)] * 3, [_F(1, 2), _F(-1, 2), _F(1, 2)], [_F(0), _F(0), _F(1)]],
        [[_F(v) for v in row] for row in ((1, 1, 1, 0), (0, 1, -1, -1))]),
    4: ([[_F(v) for v in row] for row in ((4, 0, -5, 0, 1, 0), (0, -4, -4, 1, 1, 0), (0, 4, -4, -1, 1, 0),
                                          (0, -2, -1, 2, 1, 0), (0, 2, -1, -2, 1, 0), (0, 4, 0, -5, 0, 1))],
        [[_F(1, 4), _F(0), _F(0)], [_F(-1, 6)] * 3, [_F(-1, 6), _F(1, 6), _F(-1, 6)],
         [_F(1, 24), _F(1, 12), _F(1, 6)], [_F(1, 24), _F(-1, 12), _F(1, 6)], [_F(0), _F(0), _F(1)]],
        [[_F(v) for v in row] for row in ((1, 1, 1, 1, 1, 0), (0, 1, -1, 2, -2, 0), (0, 1, 1, 4, 4, 0),
                                          (0, 1, -1, 8, -8, 1))]),
}


#: How many more outputs than a conv's its tiles may compute when `winograd_tile` allows partial
#: F(2, 3) tiles: 7 x 7 in 2 x 2 tiles computes 8 x 8 (64 / 49). A fraction, so that 7 x 7 itself
#: compares exactly.
PARTIAL_TILE_WASTE = Fraction(64, 49)


def winograd_tile(out_h: int, out_w: int, partial: bool = False) -> int | None:
    """The output tile size m a conv whose output is `out_h` x `out_w` gets: the largest of 4
    and 2 dividing both, else None (the conv stays direct). Measured (one thread, AVX-512)
    against the packed direct conv (`fuse="winograd"`): whole tiles win (64x56x56 F(4, 3) 0.53x,
    256x14x14 F(2, 3) 0.72x), partial ones lose (256x14x14 F(4, 3) 1.19x, 512x7x7 F(2, 3) 1.51x:
    the extra tiles, and transformed weights too big for L2).

    `partial` (`fuse="nchwc"`, NCHW16c data): where no tile size divides the output, F(2, 3) in
    partial tiles when they compute at most `PARTIAL_TILE_WASTE` times the outputs. Against the
    blocked direct conv (one thread, Zen 4) 512x7x7 F(2, 3) measured 1.37 vs 2.05 ms, F(4, 3)
    2.42 ms; ResNet-18 0.66-0.67x -> 0.61-0.62x onnxruntime (docs/benchmarks.md, stop 40)."""
    for m in sorted(_MATRICES, reverse=True):
        if out_h % m == 0 and out_w % m == 0:
            return m
    if partial and (-(-out_h // 2) * 2) * (-(-out_w // 2) * 2) <= PARTIAL_TILE_WASTE * out_h * out_w:
        return 2
    return None


def not_unit_step(attrs: Mapping[str, Any]) -> str | None:
    """The first of a conv's `strides` and `dilation` that is not (1, 1) (a conv Winograd's
    F(m, 3) cannot compute), or None."""
    for key in ("strides", "dilation"):
        if [int(v) for v in attrs.get(key, (1, 1))] != [1, 1]:
            return key
    return None


def winograd_output(h: int, w: int, pad_before: Sequence[int], pad_after: Sequence[int]) -> tuple[int, int]:
    """The output size of a 3x3 stride-1 conv of an h x w image with this padding."""
    return h + pad_before[0] + pad_after[0] - 2, w + pad_before[1] + pad_after[1] - 2


def winograd_weight(weight: np.ndarray, m: int) -> np.ndarray:
    """OIHW 3x3 weights as `conv2d_winograd` reads them: U = G g G^T per filter and channel,
    [m+2, m+2, O / 16, I, 16] (output channels in blocks of `PACK_BLOCK`, as `pack_weight`'s),
    computed in float64 and stored in the weights' dtype."""
    o, i, kh, kw = weight.shape
    if (kh, kw) != (3, 3) or o % PACK_BLOCK or m not in _MATRICES:
        raise ModelError(f"nn.conv2d_winograd: weights {list(weight.shape)} are not 3x3 in blocks of "
                         f"{PACK_BLOCK} output channels, or tile {m} is not one of {sorted(_MATRICES)}")
    g = np.array(_MATRICES[m][1], dtype=np.float64)
    u = np.einsum("ea,fcab,vb->evfc", g, weight.astype(np.float64), g)
    alpha = m + 2
    blocked = u.reshape(alpha, alpha, o // PACK_BLOCK, PACK_BLOCK, i).transpose(0, 1, 2, 4, 3)
    return np.ascontiguousarray(blocked).astype(weight.dtype)


def channels_innermost(data_pack: S.Block) -> bool:
    """Whether a Winograd conv's `data_pack` block is NCHW16c data's, [n, th, eps, nu, tw, c]
    (its last iter var the input channel), rather than NCHW data's [n, th, eps, nu, c, tw]
    (`conv2d_winograd`): the schedules vectorize its last loop either way, and must know which
    of the two it is to tile it. Told by what it reads, not by names: NCHW16c data is 5-d, and
    so is its padded copy, whether or not a schedule inlined that copy."""
    return any(len(region.buffer.shape) == 5 for region in data_pack.reads)


def _combination(terms: Sequence[tuple[Fraction, E.PrimExpr]], dtype: str) -> E.PrimExpr:
    """sum(coefficient * value), zero terms left out and +-1 as plain adds and subtracts."""
    total: E.PrimExpr | None = None
    for coefficient, value in terms:
        if coefficient == 0:
            continue
        if abs(coefficient) != 1:
            value = value * te.const(float(abs(coefficient)), dtype)
        if total is None:
            total = value if coefficient > 0 else te.const(0.0, dtype) - value
        else:
            total = total + value if coefficient > 0 else total - value
    return total if total is not None else te.const(0.0, dtype)


def _choice(index: E.PrimExpr, cases: Sequence[E.PrimExpr], first: int = 0) -> E.PrimExpr:
    """cases[index - first] as a balanced tree of `if_then_else`, folded to one case once the
    index's loops are unrolled. Balanced: a chain would make every analysis of it quadratic.
    `if_then_else`, not `Select`: TVM's AutoInline (and msdb's, `tuner/space/rules`) leaves a
    block that has one where it is, so a design space never inlines a transform into the
    product, which would recompute it for every channel block."""
    if len(cases) == 1:
        return cases[0]
    half = len(cases) // 2
    return te.if_then_else(E.LT(index, i64(first + half)), _choice(index, cases[:half], first),
                           _choice(index, cases[half:], first + half))


def conv2d_winograd(data: te.Tensor, weight: te.Tensor, pad_before: Sequence[int], pad_after: Sequence[int],
                    op: str = "nn.conv2d_winograd") -> te.Tensor:
    """A 3x3 stride-1 conv with Winograd-transformed weights ([m+2, m+2, F/16, C, 16],
    `winograd_weight`; m from their shape): the blocks of the module docstring. NCHW `data`
    gives an NCHW output (`fuse="winograd"`); NCHW16c data (C counting the padding channels of
    its last block) gives an NCHW16c output (`fuse="nchwc"`, `msdb.model.nchwc`). An output that
    does not split into whole m x m tiles gets partial tiles at the bottom and right (computed
    on more zero padding, never unpacked).

    The transformed input `data_pack` is [n, th, eps, nu, c, tw] for NCHW data, so that its
    tile column `tw` is the contiguous (vectorized) loop, and [n, th, eps, nu, tw, c] for NCHW16c
    data, whose channels are contiguous in the input: both the transform's reads and its writes
    are then whole vectors of channels. The product reads it one value at a time (a broadcast),
    where the order does not matter."""
    shape = static_shape(data, op)
    blocked = data.ndim == 5
    if data.ndim not in (4, 5) or weight.ndim != 5 or (blocked and shape[4] != PACK_BLOCK):
        raise ModelError(f"{op}: expects NCHW data or NCHW{PACK_BLOCK}c data ([N, C/{PACK_BLOCK}, H, W, {PACK_BLOCK}]) "
                         f"and 5-d transformed weights [m+2, m+2, F/16, C, 16], got data {list(shape)} and "
                         f"weights {list(static_shape(weight, op))}")
    n, c, h, w = (shape[0], shape[1] * PACK_BLOCK, shape[2], shape[3]) if blocked else shape
    alpha, alpha_w, blocks, c_w, block = static_shape(weight, op)
    m = alpha - 2
    if alpha != alpha_w or m not in _MATRICES or c_w != c or block != PACK_BLOCK:
        raise ModelError(f"{op}: weights {[alpha, alpha_w, blocks, c_w, block]} are not F(m, 3) transforms "
                         f"(m in {sorted(_MATRICES)}) of {c} input channels in blocks of {PACK_BLOCK}")
    out_h, out_w = winograd_output(h, w, pad_before, pad_after)
    if out_h <= 0 or out_w <= 0:
        raise ModelError(f"{op}: kernel and padding give an empty output ({out_h}x{out_w})")
    tiles_h, tiles_w = -(-out_h // m), -(-out_w // m)
    dtype = data.dtype
    b_t, _, a_t = _MATRICES[m]
    # partial tiles at the bottom and right: their extra outputs are computed on zero padding
    # and never unpacked
    extra = [tiles_h * m - out_h, tiles_w * m - out_w]
    lanes = [0] if blocked else []
    temp = te.pad(data, [0, 0, *pad_before, *lanes], [0, 0, pad_after[0] + extra[0], pad_after[1] + extra[1], *lanes],
                  name="pad_temp")
    block_size = i64(PACK_BLOCK)

    def read(nn: E.PrimExpr, cc: E.PrimExpr, y: E.PrimExpr, x: E.PrimExpr) -> E.PrimExpr:
        if blocked:
            return temp[nn, te.floordiv(cc, block_size), y, x, te.floormod(cc, block_size)]
        return temp[nn, cc, y, x]

    def pack(nn: E.PrimExpr, th: E.PrimExpr, eps: E.PrimExpr, nu: E.PrimExpr, cc: E.PrimExpr,
             tw: E.PrimExpr) -> E.PrimExpr:
        window = [[read(nn, cc, th * i64(m) + i64(a), tw * i64(m) + i64(b)) for b in range(alpha)]
                  for a in range(alpha)]
        cases = [_combination([(b_t[e][a] * b_t[v][b], window[a][b]) for a in range(alpha) for b in range(alpha)],
                              dtype)
                 for e in range(alpha) for v in range(alpha)]
        return _choice(eps * i64(alpha) + nu, cases)

    order = ["nn", "th", "eps", "nu", *(["tw", "cc"] if blocked else ["cc", "tw"])]
    extents = {"nn": n, "th": tiles_h, "eps": alpha, "nu": alpha, "cc": c, "tw": tiles_w}
    packed = te.compute(tuple(i64(extents[name]) for name in order), lambda *ivs: pack(**dict(zip(order, ivs))),
                        name="data_pack", attrs={"schedule_rule": WINOGRAD_RULES["data_pack"]}, varargs_names=order)
    rc = te.reduce_axis((i64(0), i64(c)), name="rc")

    def packed_at(nn: E.PrimExpr, th: E.PrimExpr, eps: E.PrimExpr, nu: E.PrimExpr, tw: E.PrimExpr) -> E.PrimExpr:
        at = {"nn": nn, "th": th, "eps": eps, "nu": nu, "cc": rc, "tw": tw}
        return packed[tuple(at[name] for name in order)]

    product = te.compute(tuple(i64(d) for d in (n, tiles_h, alpha, alpha, blocks, tiles_w, PACK_BLOCK)),
                         lambda nn, th, eps, nu, fo, tw, fi: te.sum(packed_at(nn, th, eps, nu, tw)
                                                                    * weight[eps, nu, fo, rc, fi], axis=[rc]),
                         name="bgemm", varargs_names=["nn", "th", "eps", "nu", "fo", "tw", "fi"])

    def inverse(nn: E.PrimExpr, fo: E.PrimExpr, th: E.PrimExpr, i: E.PrimExpr, tw: E.PrimExpr, j: E.PrimExpr,
                fi: E.PrimExpr) -> E.PrimExpr:
        cases = [_combination([(a_t[r][e] * a_t[s][v], product[nn, th, i64(e), i64(v), fo, tw, fi])
                               for e in range(alpha) for v in range(alpha)], dtype)
                 for r in range(m) for s in range(m)]
        return _choice(i * i64(m) + j, cases)

    tiles = te.compute(tuple(i64(d) for d in (n, blocks, tiles_h, m, tiles_w, m, PACK_BLOCK)), inverse,
                       name="inverse", attrs={"schedule_rule": WINOGRAD_RULES["inverse"]},
                       varargs_names=["nn", "fo", "th", "i", "tw", "j", "fi"])
    mi = i64(m)
    if blocked:
        return te.compute(tuple(i64(d) for d in (n, blocks, out_h, out_w, PACK_BLOCK)),
                          lambda nn, fo, yy, xx, fi: tiles[nn, fo, te.floordiv(yy, mi), te.floormod(yy, mi),
                                                           te.floordiv(xx, mi), te.floormod(xx, mi), fi],
                          name="conv2d_unpack", varargs_names=["nn", "fo", "yy", "xx", "fi"])
    return te.compute(tuple(i64(d) for d in (n, blocks * PACK_BLOCK, out_h, out_w)),
                      lambda nn, ff, yy, xx: tiles[nn, te.floordiv(ff, block_size), te.floordiv(yy, mi),
                                                   te.floormod(yy, mi), te.floordiv(xx, mi), te.floormod(xx, mi),
                                                   te.floormod(ff, block_size)],
                      name="conv2d_unpack")


@register("nn.conv2d_winograd", OpPattern.OUT_EWISE_FUSABLE, (2, 2))
def conv2d_winograd_op(inputs: Sequence[Operand], attrs: Mapping[str, Any], constants: Mapping[str, np.ndarray]
                       ) -> Legalized:
    """`nn.conv2d_winograd(data, transformed_weight)`: msdb's own op (`fuse="winograd"` puts it
    where a 3x3 stride-1 conv2d with constant weights was, `fuse="nchwc"` where one read blocked
    data); attrs as `nn.conv2d`'s (`padding`; strides and dilation must be 1)."""
    op = "nn.conv2d_winograd"
    data, weight = expect_tensor(inputs[0], op, 0), expect_tensor(inputs[1], op, 1)
    if weight.dtype != data.dtype or (attrs.get("out_dtype") or data.dtype) != data.dtype:
        raise ModelError(f"{op}: mixed dtypes are not supported")
    step = not_unit_step(attrs)
    if step is not None:
        raise ModelError(f"{op}: {step} must be (1, 1), got {attrs[step]!r}")
    before, after = conv_padding(attrs, op)
    return conv2d_winograd(data, weight, before, after, op)
