"""Small ONNX models built with `onnx.helper`, with seeded random weights (docs/architecture.md,
"Models").

Why they exist: the tests, the examples and the benchmarks need real ONNX files (ResNet-18/34, a
depthwise MobileNet-style net, an MLP) without downloading any. The layouts follow the
torchvision exports TVM users compile (convs without bias followed by BatchNormalization,
1x1 downsample convs, GlobalAveragePool, Flatten, Gemm with transB), so the task layout TVM
extracts from them (27 tasks for ResNet-18 in the "zero" pipeline) is the one a user sees.
Every size is a parameter so that tests can build tiny versions (16x16 images, 8 channels).

`onnx` is imported inside each builder: it is the optional extra `msdb[onnx]`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from msdb.model.graph import ModelError

if TYPE_CHECKING:  # pragma: no cover
    import onnx

__all__ = ["resnet", "mobilenet_like", "mlp"]

#: the default-domain opset every builder writes
OPSET = 13


def _onnx() -> Any:
    try:
        import onnx
    except ImportError:  # pragma: no cover - depends on the environment
        raise ModelError("building ONNX models needs the onnx package: pip install 'msdb[onnx]'") from None
    return onnx


class _Builder:
    """Nodes, initializers and names for one graph; weights from one seeded generator."""

    def __init__(self, seed: int) -> None:
        self.onnx = _onnx()
        self.rng = np.random.default_rng(seed)
        self.nodes: list[Any] = []
        self.inits: list[Any] = []

    def init(self, name: str, array: np.ndarray) -> str:
        self.inits.append(self.onnx.numpy_helper.from_array(np.require(array, requirements="C"), name))
        return name

    def node(self, op: str, inputs: list[str], name: str, **attrs: Any) -> str:
        self.nodes.append(self.onnx.helper.make_node(op, inputs, [name], name=name, **attrs))
        return name

    def conv(self, x: str, cin: int, cout: int, kernel: int, stride: int, name: str, *,
             group: int = 1, bias: bool = False) -> str:
        """A Conv with He-scaled weights (activations stay of order one through deep nets)."""
        fan_in = cin // group * kernel * kernel
        w = (self.rng.standard_normal((cout, cin // group, kernel, kernel)) * np.sqrt(2.0 / fan_in)).astype("float32")
        inputs = [x, self.init(f"{name}.weight", w)]
        if bias:
            inputs.append(self.init(f"{name}.bias", (self.rng.standard_normal(cout) * 0.1).astype("float32")))
        pad = kernel // 2
        return self.node("Conv", inputs, name, kernel_shape=[kernel, kernel], strides=[stride, stride],
                         pads=[pad, pad, pad, pad], dilations=[1, 1], group=group)

    def batch_norm(self, x: str, channels: int, name: str) -> str:
        gamma = self.rng.uniform(0.5, 1.5, channels).astype("float32")
        beta = (self.rng.standard_normal(channels) * 0.1).astype("float32")
        mean = (self.rng.standard_normal(channels) * 0.1).astype("float32")
        var = self.rng.uniform(0.5, 1.5, channels).astype("float32")
        inputs = [x] + [self.init(f"{name}.{part}", a) for part, a in
                        (("weight", gamma), ("bias", beta), ("running_mean", mean), ("running_var", var))]
        return self.node("BatchNormalization", inputs, name, epsilon=1e-5, momentum=0.9)

    def gemm(self, x: str, fin: int, fout: int, name: str) -> str:
        w = (self.rng.standard_normal((fout, fin)) * np.sqrt(1.0 / fin)).astype("float32")
        b = (self.rng.standard_normal(fout) * 0.1).astype("float32")
        return self.node("Gemm", [x, self.init(f"{name}.weight", w), self.init(f"{name}.bias", b)], name,
                         alpha=1.0, beta=1.0, transB=1)

    def model(self, name: str, inputs: list[tuple[str, list[int]]], output: str,
              out_shape: list[int]) -> onnx.ModelProto:
        helper = self.onnx.helper
        f32 = self.onnx.TensorProto.FLOAT
        graph = helper.make_graph(
            self.nodes, name,
            [helper.make_tensor_value_info(n, f32, s) for n, s in inputs],
            [helper.make_tensor_value_info(output, f32, out_shape)],
            self.inits,
        )
        model = helper.make_model(graph, producer_name="msdb.model.zoo",
                                  opset_imports=[helper.make_opsetid("", OPSET)])
        model.ir_version = 8  # readable by every onnxruntime >= 1.17
        return model


def resnet(depth: int = 18, batch: int = 1, image: int = 224, num_classes: int = 1000, seed: int = 0, *,
           width: int = 64, softmax: bool = False, batch_norm: bool = True) -> onnx.ModelProto:
    """ResNet-18 or -34 (basic blocks) or ResNet-50 (bottleneck blocks, torchvision's v1.5: the
    stride on the 3x3 conv, 4x expansion) as torchvision exports it: stem conv7x7/2 + BN + ReLU +
    MaxPool 3x3/2, four stages of blocks (`width`, 2x, 4x, 8x channels, times 4 at a
    bottleneck's output; 1x1 downsample conv + BN where the shape changes), GlobalAveragePool,
    Flatten, Gemm(transB); a Softmax at the end only when `softmax`. Input "data" is
    `[batch, 3, image, image]`. `batch_norm=False` gives the export of a model whose
    batch-norms were folded: every conv has a bias and no BatchNormalization follows (the same
    structure as fold mode's result)."""
    blocks = {18: (2, 2, 2, 2), 34: (3, 4, 6, 3), 50: (3, 4, 6, 3)}.get(depth)
    if blocks is None:
        raise ModelError(f"resnet: depth {depth} is not 18, 34 or 50")
    bottleneck = depth == 50
    b = _Builder(seed)

    def conv_bn(x: str, cin: int, cout: int, kernel: int, stride: int, conv: str, bn: str) -> str:
        if not batch_norm:
            return b.conv(x, cin, cout, kernel, stride, conv, bias=True)
        return b.batch_norm(b.conv(x, cin, cout, kernel, stride, conv), cout, bn)

    x = conv_bn("data", 3, width, 7, 2, "conv1", "bn1")
    x = b.node("Relu", [x], "relu")
    x = b.node("MaxPool", [x], "maxpool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = width
    for stage, count in enumerate(blocks):
        mid = width * 2 ** stage
        cout = mid * 4 if bottleneck else mid
        for i in range(count):
            stride = 2 if stage > 0 and i == 0 else 1
            p = f"layer{stage + 1}.{i}"
            if bottleneck:
                y = b.node("Relu", [conv_bn(x, cin, mid, 1, 1, f"{p}.conv1", f"{p}.bn1")], f"{p}.relu1")
                y = b.node("Relu", [conv_bn(y, mid, mid, 3, stride, f"{p}.conv2", f"{p}.bn2")], f"{p}.relu2b")
                y = conv_bn(y, mid, cout, 1, 1, f"{p}.conv3", f"{p}.bn3")
            else:
                y = conv_bn(x, cin, cout, 3, stride, f"{p}.conv1", f"{p}.bn1")
                y = b.node("Relu", [y], f"{p}.relu1")
                y = conv_bn(y, cout, cout, 3, 1, f"{p}.conv2", f"{p}.bn2")
            shortcut = x
            if stride != 1 or cin != cout:
                shortcut = conv_bn(x, cin, cout, 1, stride, f"{p}.downsample.0", f"{p}.downsample.1")
            y = b.node("Add", [y, shortcut], f"{p}.add")
            x = b.node("Relu", [y], f"{p}.relu2")
            cin = cout
    x = b.node("GlobalAveragePool", [x], "avgpool")
    x = b.node("Flatten", [x], "flatten", axis=1)
    x = b.gemm(x, cin, num_classes, "fc")
    if softmax:
        x = b.node("Softmax", [x], "softmax", axis=-1)
    return b.model(f"resnet{depth}", [("data", [batch, 3, image, image])], x, [batch, num_classes])


def mobilenet_like(batch: int = 1, image: int = 224, num_classes: int = 1000, seed: int = 0, *,
                   width: int = 32, stages: int = 4) -> onnx.ModelProto:
    """A MobileNet-v1-style net: stem conv3x3/2, then `stages` depthwise-separable blocks
    (depthwise conv3x3 with `group` = channels, pointwise conv1x1 doubling the channels from the
    second block on, stride 2 on every other block), every conv biased and followed by ReLU6 as
    `Clip(x, 0, 6)` with min/max as initializer inputs (opset >= 11); then one residual
    `Add` + `Relu` block, GlobalAveragePool, Flatten, Gemm(transB). Input "data"."""
    b = _Builder(seed)
    lo = b.init("relu6.min", np.array(0.0, dtype="float32"))
    hi = b.init("relu6.max", np.array(6.0, dtype="float32"))
    x = b.conv("data", 3, width, 3, 2, "stem.conv", bias=True)
    x = b.node("Clip", [x, lo, hi], "stem.relu6")
    cin = width
    for i in range(stages):
        stride = 2 if i % 2 == 1 else 1
        cout = cin if i == 0 else cin * 2 if i % 2 == 1 else cin
        p = f"block{i}"
        y = b.conv(x, cin, cin, 3, stride, f"{p}.dw", group=cin, bias=True)
        y = b.node("Clip", [y, lo, hi], f"{p}.dw.relu6")
        y = b.conv(y, cin, cout, 1, 1, f"{p}.pw", bias=True)
        x = b.node("Clip", [y, lo, hi], f"{p}.pw.relu6")
        cin = cout
    y = b.conv(x, cin, cin, 3, 1, "res.dw", group=cin, bias=True)
    y = b.node("Clip", [y, lo, hi], "res.dw.relu6")
    y = b.conv(y, cin, cin, 1, 1, "res.pw", bias=True)
    y = b.node("Add", [y, x], "res.add")
    x = b.node("Relu", [y], "res.relu")
    x = b.node("GlobalAveragePool", [x], "avgpool")
    x = b.node("Flatten", [x], "flatten", axis=1)
    x = b.gemm(x, cin, num_classes, "fc")
    return b.model("mobilenet_like", [("data", [batch, 3, image, image])], x, [batch, num_classes])


def mlp(batch: int = 1, features: int = 784, hidden: tuple[int, ...] = (256, 128), num_classes: int = 10,
        seed: int = 0, *, softmax: bool = True) -> onnx.ModelProto:
    """A multi-layer perceptron: Gemm(transB) + Relu for the first layer, MatMul + Add(bias) +
    Relu for the following hidden layers (as PyTorch exports `x @ W + b`), a Gemm(transB)
    classifier and, when `softmax`, a Softmax over the classes. Input "data" `[batch, features]`."""
    b = _Builder(seed)
    x = b.gemm("data", features, hidden[0], "fc0")
    x = b.node("Relu", [x], "relu0")
    fin = hidden[0]
    for i, fout in enumerate(hidden[1:], start=1):
        w = (b.rng.standard_normal((fin, fout)) * np.sqrt(2.0 / fin)).astype("float32")
        bias = (b.rng.standard_normal(fout) * 0.1).astype("float32")
        x = b.node("MatMul", [x, b.init(f"fc{i}.weight", w)], f"fc{i}.matmul")
        x = b.node("Add", [x, b.init(f"fc{i}.bias", bias)], f"fc{i}.add")
        x = b.node("Relu", [x], f"relu{i}")
        fin = fout
    x = b.gemm(x, fin, num_classes, "classifier")
    if softmax:
        x = b.node("Softmax", [x], "softmax", axis=-1)
    return b.model("mlp", [("data", [batch, features])], x, [batch, num_classes])
