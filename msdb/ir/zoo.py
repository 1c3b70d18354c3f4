"""The standard benchmark workloads, built with `msdb.ir.te` so that each is structurally
identical to what TVM 0.27 builds for the same name and shape (see docs/architecture.md, "TE
builder and zoo").

Names: TVM's `te_workload.CONFIGS` (C1D C2D C3D CAP DEP DIL GMM GRP T2D CBR TBG NRM SFM, TVM's
four shapes each, index 0 first); `dense`, `linear`, `matmul`, `matmul_relu`, `matmul_bias`,
`matmul_bias_relu`; the layers of the two example MLPs, `linear0`, `relu0`, `linear1` (index 0 the
784-128-10 network, index 1 the 784-256-10 one; `models()` lists both).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Callable

from msdb.errors import MsdbError
from msdb.ir import te
from msdb.ir.function import IRModule

logger = logging.getLogger(__name__)

__all__ = ["UnknownWorkloadError", "names", "configs", "tensors", "build", "workload", "models"]


class UnknownWorkloadError(MsdbError, ValueError):
    """No zoo workload with this name or index."""


# =============================================================================================
# TVM's te_workload definitions
# =============================================================================================


def _out_size(size: int, kernel: int, stride: int, padding: int, dilation: int) -> int:
    """Output extent of a convolution along one dimension."""
    return (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


def conv1d_nlc(N: int, L: int, CI: int, CO: int, kernel_size: int, stride: int = 1,
               padding: int = 0, dilation: int = 1, groups: int = 1,
               in_dtype: str = "float32", out_dtype: str = "float32") -> list[te.Tensor]:
    """1-d convolution, NLC layout, optional groups (TVM "C1D")."""
    inputs = te.placeholder((N, L, CI), in_dtype, name="inputs")
    weight = te.placeholder((kernel_size, CI // groups, CO), in_dtype, name="weight")
    ci_per_group, co_per_group = CI // groups, CO // groups
    out_len = _out_size(L, kernel_size, stride, padding, dilation)
    rc = te.reduce_axis((0, ci_per_group), name="rc")
    rl = te.reduce_axis((0, kernel_size), name="rl")
    padded = te.pad(inputs, [0, padding, 0])
    output = te.compute(
        (N, out_len, CO),
        lambda n, l, co: te.sum(
            padded[n, l * stride + rl * dilation, co // co_per_group * ci_per_group + rc].astype(out_dtype)
            * weight[rl, rc, co].astype(out_dtype),
            axis=[rl, rc],
        ),
        name="conv1d_nlc",
    )
    return [inputs, weight, output]


def conv2d_nhwc(N: int, H: int, W: int, CI: int, CO: int, kernel_size: int, stride: int = 1,
                padding: int = 0, dilation: int = 1, groups: int = 1,
                in_dtype: str = "float32", out_dtype: str = "float32") -> list[te.Tensor]:
    """2-d convolution, NHWC layout, optional dilation and groups (TVM "C2D", "DIL", "GRP")."""
    inputs = te.placeholder((N, H, W, CI), in_dtype, name="inputs")
    weight = te.placeholder((kernel_size, kernel_size, CI // groups, CO), in_dtype, name="weight")
    ci_per_group, co_per_group = CI // groups, CO // groups
    out_h = _out_size(H, kernel_size, stride, padding, dilation)
    out_w = _out_size(W, kernel_size, stride, padding, dilation)
    rh = te.reduce_axis((0, kernel_size), name="rh")
    rw = te.reduce_axis((0, kernel_size), name="rw")
    rc = te.reduce_axis((0, ci_per_group), name="rc")
    padded = te.pad(inputs, [0, padding, padding, 0])
    output = te.compute(
        (N, out_h, out_w, CO),
        lambda n, h, w, co: te.sum(
            padded[n, h * stride + rh * dilation, w * stride + rw * dilation,
                   co // co_per_group * ci_per_group + rc].astype(out_dtype)
            * weight[rh, rw, rc, co].astype(out_dtype),
            axis=[rh, rw, rc],
        ),
        name="conv2d_nhwc",
    )
    return [inputs, weight, output]


def conv3d_ndhwc(N: int, D: int, H: int, W: int, CI: int, CO: int, kernel_size: int,
                 stride: int = 1, padding: int = 0, dilation: int = 1, groups: int = 1,
                 in_dtype: str = "float32", out_dtype: str = "float32") -> list[te.Tensor]:
    """3-d convolution, NDHWC layout (TVM "C3D")."""
    inputs = te.placeholder((N, D, H, W, CI), in_dtype, name="inputs")
    weight = te.placeholder((kernel_size,) * 3 + (CI // groups, CO), in_dtype, name="weight")
    ci_per_group, co_per_group = CI // groups, CO // groups
    out_d, out_h, out_w = (_out_size(s, kernel_size, stride, padding, dilation) for s in (D, H, W))
    rd = te.reduce_axis((0, kernel_size), name="rd")
    rh = te.reduce_axis((0, kernel_size), name="rh")
    rw = te.reduce_axis((0, kernel_size), name="rw")
    rc = te.reduce_axis((0, ci_per_group), name="rc")
    padded = te.pad(inputs, [0, padding, padding, padding, 0])
    output = te.compute(
        (N, out_d, out_h, out_w, CO),
        lambda n, d, h, w, co: te.sum(
            padded[n, d * stride + rd * dilation, h * stride + rh * dilation, w * stride + rw * dilation,
                   co // co_per_group * ci_per_group + rc].astype(out_dtype)
            * weight[rd, rh, rw, rc, co].astype(out_dtype),
            axis=[rd, rh, rw, rc],
        ),
        name="conv3d_ndhwc",
    )
    return [inputs, weight, output]


def depthwise_conv2d_nhwc(N: int, H: int, W: int, C: int, kernel_size: int, stride: int = 1,
                          padding: int = 0, dilation: int = 1, factor: int = 1,
                          in_dtype: str = "float32", out_dtype: str = "float32") -> list[te.Tensor]:
    """Depthwise 2-d convolution, NHWC (TVM "DEP"; both inputs keep the default name
    "placeholder", as in TVM)."""
    if factor != 1:
        raise UnknownWorkloadError(f"depthwise_conv2d_nhwc: only factor 1 is defined (TVM's too), got {factor}")
    inputs = te.placeholder((N, H, W, C), in_dtype)
    weight = te.placeholder((factor, kernel_size, kernel_size, C), in_dtype)
    out_h = _out_size(H, kernel_size, stride, padding, dilation)
    out_w = _out_size(W, kernel_size, stride, padding, dilation)
    rh = te.reduce_axis((0, kernel_size), name="rh")
    rw = te.reduce_axis((0, kernel_size), name="rw")
    padded = te.pad(inputs, [0, padding, padding, 0])
    output = te.compute(
        (N, out_h, out_w, C * factor),
        lambda n, h, w, c: te.sum(
            padded[n, h * stride + rh * dilation, w * stride + rw * dilation, c // factor].astype(out_dtype)
            * weight[c % factor, rh, rw, c // factor].astype(out_dtype),
            axis=[rh, rw],
        ),
        name="depth_conv2d_nhwc",
    )
    return [inputs, weight, output]


def _pad_tuple(padding: int) -> tuple[int, int, int, int]:
    """(top, left, bottom, right) for a symmetric integer padding (topi's get_pad_tuple)."""
    total = padding * 2
    first = (total + 1) // 2
    return first, first, total - first, total - first


def conv2d_transpose_nhwc(N: int, H: int, W: int, CI: int, CO: int, kernel_size: int,
                          stride: int = 1, padding: int = 0,
                          in_dtype: str = "float32", out_dtype: str = "float32") -> list[te.Tensor]:
    """Transposed 2-d convolution, NHWC (TVM "T2D"): pad the input, read it through a
    zero-inserting dilation (`if_then_else` on the stride phase), convolve with the flipped
    kernel."""
    inputs = te.placeholder((N, H, W, CI), in_dtype, name="inputs")
    weight = te.placeholder((kernel_size, kernel_size, CI, CO), in_dtype, name="weight")
    k = kernel_size
    fpad_top, fpad_left, fpad_bottom, fpad_right = _pad_tuple(padding)
    bpad_top, bpad_bottom = k - 1 - fpad_top, k - 1 - fpad_bottom
    bpad_left, bpad_right = k - 1 - fpad_left, k - 1 - fpad_right
    s = stride
    padded = te.pad(
        inputs,
        [0, (bpad_top + s - 1) // s, (bpad_left + s - 1) // s, 0],
        [0, (bpad_bottom + s - 1) // s, (bpad_right + s - 1) // s, 0],
    )
    border_h = (s - bpad_top % s) % s
    border_w = (s - bpad_left % s) % s
    strides = (1, s, s, 1)

    def dilated(*indices: Any) -> Any:
        not_zero = []
        index = []
        for i, step in enumerate(strides):
            if step == 1:
                index.append(indices[i])
            else:
                index.append(te.floordiv(indices[i], step))
                not_zero.append(te.floormod(indices[i], step).equal(0))
        if not_zero:
            return te.if_then_else(te.all(*not_zero), padded[tuple(index)], te.const(0.0, padded.dtype))
        return padded[tuple(index)]

    out_h = (H - 1) * s - fpad_top - fpad_bottom + k
    out_w = (W - 1) * s - fpad_left - fpad_right + k
    rc = te.reduce_axis((0, CI), name="rc")
    rh = te.reduce_axis((0, k), name="rh")
    rw = te.reduce_axis((0, k), name="rw")
    output = te.compute(
        (N, out_h, out_w, CO),
        lambda n, h, w, co: te.sum(
            dilated(n, h + rh + border_h, w + rw + border_w, rc).astype(out_dtype)
            * weight[k - 1 - rh, k - 1 - rw, rc, co].astype(out_dtype),
            axis=[rh, rw, rc],
        ),
        name="conv2d_transpose_nhwc",
    )
    return [inputs, weight, output]


def conv2d_capsule_nhwijc(N: int, H: int, W: int, CI: int, CO: int, kernel_size: int,
                          stride: int = 1, padding: int = 0, capsule_size: int = 4,
                          in_dtype: str = "float32", out_dtype: str = "float32") -> list[te.Tensor]:
    """Capsule 2-d convolution, NHWIJC (TVM "CAP")."""
    cap = capsule_size
    inputs = te.placeholder((N, H, W, cap, cap, CI), in_dtype, name="inputs")
    weight = te.placeholder((kernel_size, kernel_size, cap, cap, CI, CO), in_dtype, name="weight")
    out_h = (H + 2 * padding - kernel_size) // stride + 1
    out_w = (W + 2 * padding - kernel_size) // stride + 1
    rh = te.reduce_axis((0, kernel_size), name="rh")
    rw = te.reduce_axis((0, kernel_size), name="rw")
    cap_k = te.reduce_axis((0, cap), name="cap_k")
    rc = te.reduce_axis((0, CI), name="rc")
    padded = te.pad(inputs, [0, padding, padding, 0, 0, 0])
    output = te.compute(
        (N, out_h, out_w, cap, cap, CO),
        lambda n, h, w, cap_i, cap_j, co: te.sum(
            padded[n, h * stride + rh, w * stride + rw, cap_i, cap_k, rc].astype(out_dtype)
            * weight[rh, rw, cap_k, cap_j, rc, co].astype(out_dtype),
            axis=[rh, rw, cap_k, rc],
        ),
        name="conv2d_capsule_nhwijc",
    )
    return [inputs, weight, output]


def batch_matmul_nkkm(B: int, N: int, M: int, K: int, in_dtype: str = "float32",
                      out_dtype: str = "float32") -> list[te.Tensor]:
    """Batched matmul Z[b] = X[b] @ Y[b] (TVM "GMM")."""
    x = te.placeholder((B, N, K), in_dtype, name="X")
    y = te.placeholder((B, K, M), in_dtype, name="Y")
    k = te.reduce_axis((0, K), name="k")
    z = te.compute(
        (B, N, M),
        lambda b, i, j: te.sum(x[b][i][k].astype(out_dtype) * y[b][k][j].astype(out_dtype), axis=[k]),
        name="Z",
    )
    return [x, y, z]


def norm_bmn(B: int, M: int, N: int) -> list[te.Tensor]:
    """Frobenius norm of each matrix of a batch: D[b] = sqrt(sum A[b]^2) (TVM "NRM")."""
    a = te.placeholder((B, M, N), name="A")
    i = te.reduce_axis((0, M), name="i")
    j = te.reduce_axis((0, N), name="j")
    c = te.compute((B,), lambda b: te.sum(a[b][i][j] * a[b][i][j], axis=[i, j]), name="C")
    d = te.compute((B,), lambda b: te.sqrt(c[b]), name="D")
    return [a, d]


def softmax_mn(m: int, n: int) -> list[te.Tensor]:
    """Row softmax of an m x n matrix (TVM "SFM", topi's four stages)."""
    a = te.placeholder((m, n), name="A")
    return [a, te.softmax(a, axis=1)]


def conv2d_nhwc_bn_relu(N: int, H: int, W: int, CI: int, CO: int, kernel_size: int, strides: int,
                        padding: int, dilation: int = 1, in_dtype: str = "float32",
                        out_dtype: str = "float32") -> list[te.Tensor]:
    """Conv2d NHWC + bias + batch-norm scale/offset + relu (TVM "CBR"). Parameters come in
    TVM's order: data, kernel, bias, bn_offset, bn_scale, output."""
    data = te.placeholder((N, H, W, CI), in_dtype, name="data")
    kernel = te.placeholder((kernel_size, kernel_size, CI, CO), in_dtype, name="kernel")
    bias = te.placeholder((CO,), name="bias")
    bn_scale = te.placeholder((CO,), name="bn_scale")
    bn_offset = te.placeholder((CO,), name="bn_offset")
    dilated_k = (kernel_size - 1) * dilation + 1
    pad_top, pad_left, pad_down, pad_right = _pad_tuple(padding)
    out_h = (H - dilated_k + pad_top + pad_down) // strides + 1
    out_w = (W - dilated_k + pad_left + pad_right) // strides + 1
    padded = te.pad(data, [0, pad_top, pad_left, 0], [0, pad_down, pad_right, 0], name="PaddedInput")
    rc = te.reduce_axis((0, CI), name="rc")
    ry = te.reduce_axis((0, kernel_size), name="ry")
    rx = te.reduce_axis((0, kernel_size), name="rx")
    conv = te.compute(
        (N, out_h, out_w, CO),
        lambda nn, yy, xx, ff: te.sum(
            padded[nn, yy * strides + ry * dilation, xx * strides + rx * dilation, rc].astype(out_dtype)
            * kernel[ry, rx, rc, ff].astype(out_dtype),
            axis=[ry, rx, rc],
        ),
        name="Conv2dOutput",
        tag="conv2d_nhwc",
    )
    shape = (N, out_h, out_w, CO)
    conv = te.compute(shape, lambda i, j, k, l: conv[i, j, k, l] + bias[l], name="bias_add")
    conv = te.compute(shape, lambda i, j, k, l: conv[i, j, k, l] * bn_scale[l], name="bn_mul")
    conv = te.compute(shape, lambda i, j, k, l: conv[i, j, k, l] + bn_offset[l], name="bn_add")
    return [data, kernel, bias, bn_offset, bn_scale, te.relu(conv)]


def transpose_batch_matmul(batch: int, seq_len: int, n_head: int, n_dim: int,
                           in_dtype: str = "float32", out_dtype: str = "float32") -> list[te.Tensor]:
    """Attention-style Q K^T over heads, with explicit transposes (TVM "TBG")."""
    query = te.placeholder((batch, seq_len, n_head, n_dim), in_dtype, name="query")
    value = te.placeholder((batch, seq_len, n_head, n_dim), in_dtype, name="value")
    query_t = te.compute((batch, n_head, seq_len, n_dim), lambda b, h, l, d: query[b, l, h, d], name="query_T")
    value_t = te.compute((batch, n_head, n_dim, seq_len), lambda b, h, d, l: value[b, l, h, d], name="value_T")
    k = te.reduce_axis((0, n_dim), name="k")
    out = te.compute(
        (batch, n_head, seq_len, seq_len),
        lambda b, h, i, j: te.sum(query_t[b, h, i, k].astype(out_dtype) * value_t[b, h, k, j].astype(out_dtype), axis=[k]),
        name="C",
    )
    return [query, value, out]


# =============================================================================================
# msdb's extra workloads: matmuls, dense/linear and the MLP layers
# =============================================================================================


def _matmul(n: int, m: int, k: int, in_dtype: str, out_dtype: str) -> tuple[te.Tensor, te.Tensor, te.Tensor]:
    a = te.placeholder((n, k), in_dtype, name="A")
    b = te.placeholder((k, m), in_dtype, name="B")
    kk = te.reduce_axis((0, k), name="k")
    c = te.compute((n, m), lambda i, j: te.sum(a[i, kk].astype(out_dtype) * b[kk, j].astype(out_dtype), axis=[kk]), name="C")
    return a, b, c


def matmul(n: int, m: int, k: int, in_dtype: str = "float32", out_dtype: str = "float32") -> list[te.Tensor]:
    """C = A @ B with A (n, k), B (k, m) (TVM's `te_workload.matmul`)."""
    return list(_matmul(n, m, k, in_dtype, out_dtype))


def matmul_relu(n: int, m: int, k: int, in_dtype: str = "float32", out_dtype: str = "float32") -> list[te.Tensor]:
    """relu(A @ B) (TVM's `te_workload.matmul_relu`: the relu stage is topi's, named "compute")."""
    a, b, c = _matmul(n, m, k, in_dtype, out_dtype)
    return [a, b, te.relu(c)]


def _bias_add(c: te.Tensor, bias: te.Tensor) -> te.Tensor:
    return te.compute(c.shape, lambda i, j: c[i, j] + bias[j], name="bias_add")


def matmul_bias(n: int, m: int, k: int, in_dtype: str = "float32", out_dtype: str = "float32") -> list[te.Tensor]:
    """A @ B + bias[j] (a matmul anchor followed by an elementwise stage)."""
    a, b, c = _matmul(n, m, k, in_dtype, out_dtype)
    bias = te.placeholder((m,), out_dtype, name="bias")
    return [a, b, bias, _bias_add(c, bias)]


def matmul_bias_relu(n: int, m: int, k: int, in_dtype: str = "float32", out_dtype: str = "float32") -> list[te.Tensor]:
    """relu(A @ B + bias[j])."""
    a, b, c = _matmul(n, m, k, in_dtype, out_dtype)
    bias = te.placeholder((m,), out_dtype, name="bias")
    return [a, b, bias, te.relu(_bias_add(c, bias))]


def _dense(n: int, m: int, k: int, in_dtype: str, out_dtype: str) -> tuple[te.Tensor, te.Tensor, te.Tensor]:
    x = te.placeholder((n, k), in_dtype, name="X")
    w = te.placeholder((m, k), in_dtype, name="W")
    kk = te.reduce_axis((0, k), name="k")
    y = te.compute((n, m), lambda i, j: te.sum(x[i, kk].astype(out_dtype) * w[j, kk].astype(out_dtype), axis=kk), name="Y")
    return x, w, y


def dense(n: int, m: int, k: int, in_dtype: str = "float32", out_dtype: str = "float32") -> list[te.Tensor]:
    """Y = X W^T with X (n, k), W (m, k): a fully connected layer without bias."""
    return list(_dense(n, m, k, in_dtype, out_dtype))


def linear(n: int, m: int, k: int, in_dtype: str = "float32", out_dtype: str = "float32") -> list[te.Tensor]:
    """Z = X W^T + B in two blocks, Y = X W^T then Z = Y + B: the MLC course's `linear0`, and
    the workload TVM tunes for `relax`'s linear layers written in TE."""
    x, w, y = _dense(n, m, k, in_dtype, out_dtype)
    b = te.placeholder((m,), out_dtype, name="B")
    z = te.compute((n, m), lambda i, j: y[i, j] + b[j], name="Z")
    return [x, w, b, z]


def relu2d(n: int, m: int, dtype: str = "float32") -> list[te.Tensor]:
    """Y = max(X, 0) on an (n, m) matrix: the MLC course's `relu0` (buffers X, Y; block Y)."""
    x = te.placeholder((n, m), dtype, name="X")
    y = te.compute((n, m), lambda i, j: te.max(x[i, j], te.const(0, dtype)), name="Y")
    return [x, y]


# =============================================================================================
# Registry
# =============================================================================================


@dataclass(frozen=True)
class _Entry:
    builder: Callable[..., list[te.Tensor]]
    configs: tuple[tuple[Any, ...], ...]


_MLP_HIDDEN = (128, 256)

_REGISTRY: dict[str, _Entry] = {
    "C1D": _Entry(conv1d_nlc, ((1, 256, 64, 128, 3, 2, 1), (1, 128, 128, 256, 1, 2, 0),
                               (1, 64, 256, 256, 5, 1, 2), (1, 32, 512, 512, 3, 1, 1))),
    "C2D": _Entry(conv2d_nhwc, ((1, 224, 224, 3, 64, 7, 2, 3), (1, 56, 56, 64, 64, 1, 1, 0),
                                (1, 14, 14, 256, 256, 3, 1, 1), (1, 7, 7, 512, 512, 3, 1, 1))),
    "C3D": _Entry(conv3d_ndhwc, ((1, 16, 224, 224, 3, 64, 7, 2, 3), (1, 16, 56, 56, 64, 64, 1, 1, 0),
                                 (1, 16, 14, 14, 256, 256, 3, 1, 1), (1, 16, 7, 7, 512, 512, 3, 1, 1))),
    "CAP": _Entry(conv2d_capsule_nhwijc, ((1, 16, 16, 32, 32, 3, 2, 1), (1, 8, 8, 32, 32, 3, 1, 1),
                                          (1, 16, 16, 8, 16, 3, 2, 1), (1, 8, 8, 16, 16, 3, 1, 1))),
    "DEP": _Entry(depthwise_conv2d_nhwc, ((1, 112, 112, 32, 3, 1, 1), (1, 112, 112, 64, 3, 2, 1),
                                          (1, 14, 14, 512, 3, 2, 1), (1, 7, 7, 1024, 3, 1, 1))),
    "DIL": _Entry(conv2d_nhwc, ((1, 224, 224, 3, 64, 7, 2, 3, 2), (1, 56, 56, 64, 64, 1, 1, 0, 2),
                                (1, 14, 14, 256, 256, 3, 1, 1, 2), (1, 7, 7, 512, 512, 3, 1, 1, 2))),
    "GMM": _Entry(batch_matmul_nkkm, ((1, 128, 128, 128), (1, 512, 32, 512), (1, 512, 512, 512),
                                      (1, 1024, 1024, 1024))),
    "GRP": _Entry(conv2d_nhwc, ((1, 56, 56, 64, 128, 3, 2, 1, 1, 4), (1, 56, 56, 64, 64, 1, 1, 0, 1, 4),
                                (1, 14, 14, 256, 256, 3, 1, 1, 1, 4), (1, 7, 7, 512, 512, 3, 1, 1, 1, 4))),
    "T2D": _Entry(conv2d_transpose_nhwc, ((1, 4, 4, 512, 256, 4, 2, 1), (1, 8, 8, 256, 128, 4, 2, 1),
                                          (1, 16, 16, 128, 64, 4, 2, 1), (1, 32, 32, 64, 3, 4, 2, 1))),
    "CBR": _Entry(conv2d_nhwc_bn_relu, ((1, 224, 224, 3, 64, 7, 2, 3), (1, 56, 56, 64, 128, 3, 2, 1),
                                        (1, 28, 28, 128, 256, 1, 2, 0), (1, 7, 7, 512, 512, 3, 1, 1))),
    "TBG": _Entry(transpose_batch_matmul, ((1, 128, 12, 64), (1, 128, 16, 64), (1, 64, 12, 128),
                                           (1, 128, 12, 128))),
    "NRM": _Entry(norm_bmn, ((1, 256, 256), (1, 512, 512), (1, 1024, 1024), (1, 4096, 1024))),
    "SFM": _Entry(softmax_mn, ((256, 256), (512, 512), (1024, 1024), (2048, 2048))),
    "dense": _Entry(dense, ((1, 128, 784), (128, 128, 128), (512, 512, 512), (1024, 1024, 1024))),
    "linear": _Entry(linear, ((1, 128, 784), (1, 256, 784), (1, 10, 128), (1, 10, 256))),
    "matmul": _Entry(matmul, ((128, 128, 128), (256, 256, 256), (512, 512, 512), (1024, 1024, 1024))),
    "matmul_relu": _Entry(matmul_relu, ((128, 128, 128), (256, 256, 256), (512, 512, 512), (1024, 1024, 1024))),
    "matmul_bias": _Entry(matmul_bias, ((128, 128, 128), (256, 256, 256), (512, 512, 512), (1024, 1024, 1024))),
    "matmul_bias_relu": _Entry(matmul_bias_relu, ((128, 128, 128), (256, 256, 256), (512, 512, 512),
                                                  (1024, 1024, 1024))),
    "linear0": _Entry(linear, tuple((1, h, 784) for h in _MLP_HIDDEN)),
    "relu0": _Entry(relu2d, tuple((1, h) for h in _MLP_HIDDEN)),
    "linear1": _Entry(linear, tuple((1, 10, h) for h in _MLP_HIDDEN)),
}

_MODELS = {f"mlp_784_{h}_10": n for n, h in enumerate(_MLP_HIDDEN)}
_MLP_LAYERS = ("linear0", "relu0", "linear1")


def _entry(name: str) -> _Entry:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise UnknownWorkloadError(
            f"no zoo workload named {name!r}; known names: {', '.join(_REGISTRY)}"
        ) from None


def names() -> list[str]:
    """Every workload name: TVM's te_workload names first, then msdb's extras."""
    return list(_REGISTRY)


def configs(name: str) -> list[tuple[Any, ...]]:
    """The shape parameters of each indexed variant of `name` (index 0 first)."""
    return list(_entry(name).configs)


def tensors(name: str, *params: Any) -> list[te.Tensor]:
    """The TE graph of `name` with explicit parameters (the function's arguments, in order)."""
    entry = _entry(name)
    try:
        return entry.builder(*params)
    except TypeError as err:
        raise UnknownWorkloadError(f"{name}: bad parameters {params!r} ({err}); e.g. {entry.configs[0]!r}") from None


def build(name: str, *params: Any) -> IRModule:
    """Workload `name` with custom parameters (e.g. reduced shapes for quick tests):
    `build("GMM", 1, 16, 16, 16)`."""
    return IRModule.from_func(te.create_prim_func(tensors(name, *params)))


def workload(name: str, index: int = 0) -> IRModule:
    """Workload `name` at TVM's config `index` as a module {"main": f}."""
    entry = _entry(name)
    if not 0 <= index < len(entry.configs):
        raise UnknownWorkloadError(f"{name} has configs 0..{len(entry.configs) - 1}, asked for index {index}")
    return build(name, *entry.configs[index])


def models() -> dict[str, list[tuple[str, IRModule, int]]]:
    """The example networks as lists of (task name, workload, weight): each MLP runs each of
    its layers once."""
    return {
        model: [(layer, workload(layer, index), 1) for layer in _MLP_LAYERS]
        for model, index in _MODELS.items()
    }
