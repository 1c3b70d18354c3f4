"""Small ONNX models built with `onnx.helper`, with seeded random weights (docs/architecture.md,
"Models").

Why they exist: the tests, the examples and the benchmarks need real ONNX files (ResNet-18/34/50,
a depthwise MobileNet-style net and a MobileNetV2-like one, an MLP, a BERT-style encoder and a GPT-2-style decoder as
Hugging Face exports them) without downloading any. The layouts follow the
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

__all__ = ["resnet", "mobilenet_like", "mobilenet_v2", "mlp", "bert", "gpt2", "NAMED", "named"]

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


# =============================================================================================
# Transformers, as PyTorch / Hugging Face export them (opset 14-17, or 20 with `Gelu`)
# =============================================================================================


class _Transformer(_Builder):
    """The pieces of a transformer export: shape arithmetic on `Shape` (folded by the importer
    when the shapes are static), linear layers as MatMul + Add, layer norms as one
    `LayerNormalization` (opset >= 17) or PyTorch's decomposed form (before 17)."""

    def __init__(self, seed: int, opset: int) -> None:
        super().__init__(seed)
        self.opset = opset
        self.count = 0

    def fresh(self, hint: str) -> str:
        self.count += 1
        return f"{hint}_{self.count}"

    def const(self, array: Any, hint: str) -> str:
        """A `Constant` node (as the exporter writes scalars and shapes)."""
        name = self.fresh(hint)
        value = self.onnx.numpy_helper.from_array(np.asarray(array), name)
        self.nodes.append(self.onnx.helper.make_node("Constant", [], [name], name=name, value=value))
        return name

    def op(self, op: str, inputs: list[str], hint: str, outputs: int = 1, **attrs: Any) -> Any:
        name = self.fresh(hint)
        outs = [name] if outputs == 1 else [f"{name}:{i}" for i in range(outputs)]
        self.nodes.append(self.onnx.helper.make_node(op, inputs, outs, name=name, **attrs))
        return outs[0] if outputs == 1 else outs

    def unsqueeze(self, x: str, axes: list[int], hint: str) -> str:
        if self.opset >= 13:
            return self.op("Unsqueeze", [x, self.const(np.array(axes, "int64"), "axes")], hint)
        return self.op("Unsqueeze", [x], hint, axes=axes)

    def linear(self, x: str, fin: int, fout: int, name: str) -> str:
        w = (self.rng.standard_normal((fin, fout)) * np.sqrt(1.0 / fin)).astype("float32")
        b = (self.rng.standard_normal(fout) * 0.02).astype("float32")
        y = self.op("MatMul", [x, self.init(f"{name}.weight", w)], f"{name}.MatMul")
        return self.op("Add", [y, self.init(f"{name}.bias", b)], f"{name}.Add")

    def layer_norm(self, x: str, hidden: int, name: str, eps: float = 1e-5) -> str:
        gamma = self.init(f"{name}.weight", self.rng.uniform(0.8, 1.2, hidden).astype("float32"))
        beta = self.init(f"{name}.bias", (self.rng.standard_normal(hidden) * 0.02).astype("float32"))
        if self.opset >= 17:
            return self.op("LayerNormalization", [x, gamma, beta], f"{name}.LayerNormalization", axis=-1, epsilon=eps)
        mean = self.reduce_mean(x, f"{name}.ReduceMean")
        d = self.op("Sub", [x, mean], f"{name}.Sub")
        sq = self.op("Pow", [d, self.const(np.array(2.0, "float32"), "two")], f"{name}.Pow")
        var = self.reduce_mean(sq, f"{name}.ReduceMean")
        var = self.op("Add", [var, self.const(np.array(eps, "float32"), "eps")], f"{name}.Add")
        std = self.op("Sqrt", [var], f"{name}.Sqrt")
        y = self.op("Div", [d, std], f"{name}.Div")
        y = self.op("Mul", [y, gamma], f"{name}.Mul")
        return self.op("Add", [y, beta], f"{name}.Add")

    def reduce_mean(self, x: str, hint: str) -> str:
        if self.opset >= 18:
            return self.op("ReduceMean", [x, self.const(np.array([-1], "int64"), "axes")], hint, keepdims=1)
        return self.op("ReduceMean", [x], hint, axes=[-1], keepdims=1)

    def dim(self, x: str, index: int, hint: str) -> str:
        """`x.size(index)` as the tracer exports it: Shape, then Gather of a 0-d index."""
        shape = self.op("Shape", [x], f"{hint}.Shape")
        return self.op("Gather", [shape, self.const(np.array(index, "int64"), "index")], f"{hint}.Gather", axis=0)

    def split_heads(self, x: str, heads: int, head_dim: int, perm: list[int], hint: str, static: bool) -> str:
        """`x.view(x.size()[:-1] + (heads, head_dim)).permute(perm)`: the view's shape built
        from Shape/Gather/Unsqueeze/Concat (what a dynamic-axes export keeps) or, `static`, a
        constant with copied (0) and inferred (-1) dimensions."""
        if static:
            shape = self.const(np.array([0, -1, heads, head_dim], "int64"), "shape")
            y = self.op("Reshape", [x, shape], f"{hint}.Reshape")
            return self.op("Transpose", [y], f"{hint}.Transpose", perm=perm)
        batch = self.unsqueeze(self.dim(x, 0, f"{hint}.batch"), [0], f"{hint}.Unsqueeze")
        seq = self.unsqueeze(self.dim(x, 1, f"{hint}.seq"), [0], f"{hint}.Unsqueeze")
        shape = self.op("Concat", [batch, seq, self.const(np.array([heads], "int64"), "heads"),
                                   self.const(np.array([head_dim], "int64"), "head_dim")], f"{hint}.Concat", axis=0)
        y = self.op("Reshape", [x, shape], f"{hint}.Reshape")
        return self.op("Transpose", [y], f"{hint}.Transpose", perm=perm)

    def merge_heads(self, x: str, hidden: int, hint: str) -> str:
        y = self.op("Transpose", [x], f"{hint}.Transpose", perm=[0, 2, 1, 3])
        return self.op("Reshape", [y, self.const(np.array([0, 0, hidden], "int64"), "shape")], f"{hint}.Reshape")

    def attention(self, q: str, k: str, v: str, heads: int, hidden: int, name: str,
                  mask: str | None = None, causal: str | None = None) -> str:
        head_dim = hidden // heads
        static = causal is not None  # TVM reads no Shape of a Split output
        q = self.split_heads(q, heads, head_dim, [0, 2, 1, 3], f"{name}.query", static)
        k = self.split_heads(k, heads, head_dim, [0, 2, 3, 1], f"{name}.key", static)
        v = self.split_heads(v, heads, head_dim, [0, 2, 1, 3], f"{name}.value", static)
        scores = self.op("MatMul", [q, k], f"{name}.MatMul")
        scores = self.op("Div", [scores, self.const(np.array(np.sqrt(head_dim), "float32"), "scale")], f"{name}.Div")
        if mask is not None:
            scores = self.op("Add", [scores, mask], f"{name}.Add")
        if causal is not None:
            low = self.const(np.array(np.finfo(np.float32).min, "float32"), "min")
            scores = self.op("Where", [causal, scores, low], f"{name}.Where")
        probs = self.op("Softmax", [scores], f"{name}.Softmax", axis=-1)
        context = self.op("MatMul", [probs, v], f"{name}.MatMul")
        return self.merge_heads(context, hidden, f"{name}.context")

    def gelu_erf(self, x: str, name: str) -> str:
        """`F.gelu` (erf form); one `Gelu` node from opset 20."""
        if self.opset >= 20:
            return self.op("Gelu", [x], f"{name}.Gelu")
        y = self.op("Div", [x, self.const(np.array(1.4142135381698608, "float32"), "sqrt2")], f"{name}.Div")
        y = self.op("Erf", [y], f"{name}.Erf")
        y = self.op("Add", [y, self.const(np.array(1.0, "float32"), "one")], f"{name}.Add")
        y = self.op("Mul", [x, y], f"{name}.Mul")
        return self.op("Mul", [y, self.const(np.array(0.5, "float32"), "half")], f"{name}.Mul")

    def gelu_tanh(self, x: str, name: str) -> str:
        """GPT-2's `gelu_new`: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
        cube = self.op("Pow", [x, self.const(np.array(3.0, "float32"), "three")], f"{name}.Pow")
        y = self.op("Mul", [self.const(np.array(0.044715, "float32"), "c"), cube], f"{name}.Mul")
        y = self.op("Add", [x, y], f"{name}.Add")
        y = self.op("Mul", [self.const(np.array(np.sqrt(2 / np.pi), "float32"), "c"), y], f"{name}.Mul")
        y = self.op("Tanh", [y], f"{name}.Tanh")
        y = self.op("Add", [self.const(np.array(1.0, "float32"), "one"), y], f"{name}.Add")
        y = self.op("Mul", [x, y], f"{name}.Mul")
        return self.op("Mul", [self.const(np.array(0.5, "float32"), "half"), y], f"{name}.Mul")

    def transformer_model(self, name: str, inputs: list[tuple[str, list[int]]], output: str,
                          out_shape: list[int]) -> onnx.ModelProto:
        helper = self.onnx.helper
        graph = helper.make_graph(
            self.nodes, name,
            [helper.make_tensor_value_info(n, self.onnx.TensorProto.INT64, s) for n, s in inputs],
            [helper.make_tensor_value_info(output, self.onnx.TensorProto.FLOAT, out_shape)],
            self.inits,
        )
        model = helper.make_model(graph, producer_name="msdb.model.zoo",
                                  opset_imports=[helper.make_opsetid("", self.opset)])
        model.ir_version = 8 if self.opset <= 17 else 9
        return model


#: MobileNetV2's inverted-residual stages (torchvision's `inverted_residual_setting`):
#: expansion t, output channels c, repeats n, first stride s.
MOBILENET_V2_STAGES = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                       (6, 160, 3, 2), (6, 320, 1, 1))


def mobilenet_v2(batch: int = 1, image: int = 224, num_classes: int = 1000, seed: int = 0, *,
                 width: float = 1.0, stages: int = len(MOBILENET_V2_STAGES)) -> onnx.ModelProto:
    """A MobileNetV2-like net (torchvision's layout with batch norm folded into biased convs,
    as exporters fold it): stem conv3x3/2 to 32 channels, the first `stages` inverted-residual
    stages of `MOBILENET_V2_STAGES` (a 1x1 expansion conv, a depthwise conv3x3, a linear 1x1
    projection, and a residual `Add` where stride is 1 and the channels match; ReLU6 as `Clip`
    with initializer bounds), a 1x1 conv to 1280 channels, GlobalAveragePool, Flatten,
    Gemm(transB). `width` scales the channels (rounded to multiples of 8). Input "data"."""
    b = _Builder(seed)
    lo = b.init("relu6.min", np.array(0.0, dtype="float32"))
    hi = b.init("relu6.max", np.array(6.0, dtype="float32"))

    def channels(c: int) -> int:
        return max(8, int(c * width + 4) // 8 * 8)

    def conv_relu6(x: str, cin: int, cout: int, kernel: int, stride: int, name: str, group: int = 1) -> str:
        y = b.conv(x, cin, cout, kernel, stride, name, group=group, bias=True)
        return b.node("Clip", [y, lo, hi], f"{name}.relu6")

    cin = channels(32)
    x = conv_relu6("data", 3, cin, 3, 2, "features.0")
    index = 1
    for t, c, n, s in MOBILENET_V2_STAGES[:stages]:
        cout = channels(c)
        for i in range(n):
            stride = s if i == 0 else 1
            p = f"features.{index}"
            hidden = cin * t
            y = conv_relu6(x, cin, hidden, 1, 1, f"{p}.expand") if t != 1 else x
            y = conv_relu6(y, hidden, hidden, 3, stride, f"{p}.dw", group=hidden)
            y = b.conv(y, hidden, cout, 1, 1, f"{p}.project", bias=True)
            x = b.node("Add", [y, x], f"{p}.add") if stride == 1 and cin == cout else y
            cin = cout
            index += 1
    last = channels(1280) if width > 1.0 else 1280
    x = conv_relu6(x, cin, last, 1, 1, f"features.{index}")
    x = b.node("GlobalAveragePool", [x], "avgpool")
    x = b.node("Flatten", [x], "flatten", axis=1)
    x = b.gemm(x, last, num_classes, "classifier")
    return b.model("mobilenet_v2", [("data", [batch, 3, image, image])], x, [batch, num_classes])


def bert(layers: int = 12, hidden: int = 768, heads: int = 12, seq: int = 128, batch: int = 1,
         vocab: int = 30522, seed: int = 0, *, opset: int = 14, intermediate: int | None = None,
         max_positions: int = 512) -> onnx.ModelProto:
    """A BERT-base-like encoder (Hugging Face `BertModel`'s export, without the pooler): inputs
    "input_ids" and "attention_mask" (int64 `[batch, seq]`), output the last hidden state
    `[batch, seq, hidden]`. Embeddings are Gathers from constant tables (word; token type of
    `ConstantOfShape(Shape(input_ids))` zeros; positions sliced from a constant buffer); the
    extended mask is `(1 - Cast(Unsqueeze(mask))) * float32.min`; each layer is self-attention
    (head split by Reshape on a Shape-built shape, Transpose, batched MatMuls, Div, Add of the
    mask, Softmax), erf-GELU feed-forward and two layer norms. `opset` 14-16: decomposed layer
    norms; 17: `LayerNormalization`; 20: also `Gelu`. Defaults are BERT-base; tests use
    `bert(layers=1, hidden=64, heads=2, seq=16, vocab=100)`."""
    b = _Transformer(seed, opset)
    inter = intermediate or 4 * hidden

    def table(rows: int, tag: str) -> str:
        return b.init(f"embeddings.{tag}.weight", (b.rng.standard_normal((rows, hidden)) * 0.02).astype("float32"))

    words = b.op("Gather", [table(vocab, "word_embeddings"), "input_ids"], "embeddings.word.Gather", axis=0)
    zeros = b.op("ConstantOfShape", [b.op("Shape", ["input_ids"], "embeddings.Shape")], "embeddings.ConstantOfShape",
                 value=b.onnx.numpy_helper.from_array(np.array([0], "int64")))
    types = b.op("Gather", [table(2, "token_type_embeddings"), zeros], "embeddings.token_type.Gather", axis=0)
    x = b.op("Add", [words, types], "embeddings.Add")
    positions = b.init("embeddings.position_ids", np.arange(max_positions, dtype="int64")[None, :])
    seq_len = b.unsqueeze(b.dim("input_ids", 1, "embeddings.seq"), [0], "embeddings.Unsqueeze")
    positions = b.op("Slice", [positions, b.const(np.array([0], "int64"), "start"), seq_len,
                               b.const(np.array([1], "int64"), "axis"), b.const(np.array([1], "int64"), "step")],
                     "embeddings.Slice")
    x = b.op("Add", [x, b.op("Gather", [table(max_positions, "position_embeddings"), positions],
                             "embeddings.position.Gather", axis=0)], "embeddings.Add")
    x = b.layer_norm(x, hidden, "embeddings.LayerNorm", eps=1e-12)
    mask = b.unsqueeze(b.unsqueeze("attention_mask", [1], "mask.Unsqueeze"), [2], "mask.Unsqueeze")
    mask = b.op("Cast", [mask], "mask.Cast", to=b.onnx.TensorProto.FLOAT)
    mask = b.op("Sub", [b.const(np.array(1.0, "float32"), "one"), mask], "mask.Sub")
    mask = b.op("Mul", [mask, b.const(np.array(np.finfo(np.float32).min, "float32"), "min")], "mask.Mul")
    for i in range(layers):
        p = f"encoder.layer.{i}"
        q = b.linear(x, hidden, hidden, f"{p}.attention.self.query")
        k = b.linear(x, hidden, hidden, f"{p}.attention.self.key")
        v = b.linear(x, hidden, hidden, f"{p}.attention.self.value")
        context = b.attention(q, k, v, heads, hidden, f"{p}.attention.self", mask=mask)
        y = b.linear(context, hidden, hidden, f"{p}.attention.output.dense")
        x = b.layer_norm(b.op("Add", [y, x], f"{p}.attention.output.Add"), hidden,
                         f"{p}.attention.output.LayerNorm", eps=1e-12)
        y = b.gelu_erf(b.linear(x, hidden, inter, f"{p}.intermediate.dense"), f"{p}.intermediate")
        y = b.linear(y, inter, hidden, f"{p}.output.dense")
        x = b.layer_norm(b.op("Add", [y, x], f"{p}.output.Add"), hidden, f"{p}.output.LayerNorm", eps=1e-12)
    x = b.op("Identity", [x], "last_hidden_state")
    return b.transformer_model("bert", [("input_ids", [batch, seq]), ("attention_mask", [batch, seq])], x,
                               [batch, seq, hidden])


def gpt2(layers: int = 12, hidden: int = 768, heads: int = 12, seq: int = 128, batch: int = 1,
         vocab: int = 50257, seed: int = 0, *, opset: int = 14, max_positions: int = 1024) -> onnx.ModelProto:
    """A GPT-2-small-like decoder block stack (Hugging Face `GPT2Model`'s export): input
    "input_ids" (int64 `[batch, seq]`), output the final layer norm's `[batch, seq, hidden]`.
    Position ids are `Unsqueeze(Range(0, seq, 1))` on constants; each block is layer norm,
    the fused QKV projection `Split` in three, causal attention (the mask `Slice`d from a
    constant lower-triangular bool buffer, applied with `Where` against float32.min), the
    output projection, a residual Add, layer norm, the tanh-GELU (`gelu_new`: Pow, Tanh) MLP
    and a residual Add. `opset` as in `bert`. Defaults are GPT-2 small; tests use
    `gpt2(layers=1, hidden=64, heads=2, seq=16, vocab=100, max_positions=32)`."""
    b = _Transformer(seed, opset)

    def table(rows: int, tag: str) -> str:
        return b.init(f"{tag}.weight", (b.rng.standard_normal((rows, hidden)) * 0.02).astype("float32"))

    x = b.op("Gather", [table(vocab, "wte"), "input_ids"], "wte.Gather", axis=0)
    positions = b.op("Range", [b.const(np.array(0, "int64"), "start"), b.const(np.array(seq, "int64"), "limit"),
                               b.const(np.array(1, "int64"), "delta")], "position.Range")
    positions = b.unsqueeze(positions, [0], "position.Unsqueeze")
    x = b.op("Add", [x, b.op("Gather", [table(max_positions, "wpe"), positions], "wpe.Gather", axis=0)], "Add")
    bias = b.init("attn.bias", np.tril(np.ones((max_positions, max_positions), dtype=bool))[None, None])
    for i in range(layers):
        p = f"h.{i}"
        y = b.layer_norm(x, hidden, f"{p}.ln_1")
        qkv = b.linear(y, hidden, 3 * hidden, f"{p}.attn.c_attn")
        split = b.const(np.array([hidden] * 3, "int64"), "split")
        if opset >= 13:
            q, k, v = b.op("Split", [qkv, split], f"{p}.attn.Split", outputs=3, axis=2)
        else:
            q, k, v = b.op("Split", [qkv], f"{p}.attn.Split", outputs=3, axis=2, split=[hidden] * 3)
        q_len = b.dim("input_ids", 1, f"{p}.attn.q_len")
        k_len = b.dim("input_ids", 1, f"{p}.attn.k_len")
        start = b.unsqueeze(b.op("Sub", [k_len, q_len], f"{p}.attn.Sub"), [0], f"{p}.attn.Unsqueeze")
        k_len = b.unsqueeze(k_len, [0], f"{p}.attn.Unsqueeze")
        causal = b.op("Slice", [bias, start, k_len, b.const(np.array([2], "int64"), "axes"),
                                b.const(np.array([1], "int64"), "steps")], f"{p}.attn.Slice")
        causal = b.op("Slice", [causal, b.const(np.array([0], "int64"), "starts"), k_len,
                                b.const(np.array([3], "int64"), "axes"), b.const(np.array([1], "int64"), "steps")],
                      f"{p}.attn.Slice")
        context = b.attention(q, k, v, heads, hidden, f"{p}.attn", causal=causal)
        y = b.linear(context, hidden, hidden, f"{p}.attn.c_proj")
        x = b.op("Add", [y, x], f"{p}.Add")
        y = b.layer_norm(x, hidden, f"{p}.ln_2")
        y = b.gelu_tanh(b.linear(y, hidden, 4 * hidden, f"{p}.mlp.c_fc"), f"{p}.mlp.act")
        y = b.linear(y, 4 * hidden, hidden, f"{p}.mlp.c_proj")
        x = b.op("Add", [y, x], f"{p}.Add")
    x = b.layer_norm(x, hidden, "ln_f")
    return b.transformer_model("gpt2", [("input_ids", [batch, seq])], x, [batch, seq, hidden])


#: The models by name, at their full sizes (what `msdb sample --zoo NAME` builds; see
#: docs/architecture.md, "Sampling").
NAMED: dict[str, Any] = {
    "resnet18": lambda: resnet(18), "resnet34": lambda: resnet(34), "resnet50": lambda: resnet(50),
    "mobilenet": mobilenet_like, "mobilenet_v2": mobilenet_v2, "mlp": mlp, "bert": bert, "gpt2": gpt2,
}


def named(name: str) -> onnx.ModelProto:
    """The model `name` of `NAMED` at its default sizes; `ModelError` naming the known ones."""
    build = NAMED.get(name)
    if build is None:
        raise ModelError(f"no zoo model named {name!r}; known models: {', '.join(NAMED)}")
    proto: onnx.ModelProto = build()
    return proto
