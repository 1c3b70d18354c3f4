"""Default (no-search) schedules against onnxruntime, one operator at a time, one thread.

    taskset -c 0 python bench/bench_default_schedule.py [--quick] [--naive]

Each row: an operator of ResNet-18 (plus a depthwise conv) as a one-node ONNX model, which
onnxruntime runs with one intra-op thread and msdb imports, legalizes and lowers exactly as
`msdb compile` does (`msdb.model`, the TensorIR TVM's Relax legalization gives it), then
schedules with `default_schedule` and builds with msdb's code generator. Times are the best of
several batches in CPU time of the calling thread (both run there), which holds up on a busy
machine. The budget is ResNet-18 end to end with default schedules within 3x
onnxruntime, so each operator should be within about 2-3x.
`--naive` also times the unscheduled function (what TVM compiles for a function without a
record). Outputs are checked against onnxruntime before timing.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from msdb.ir.flops import estimate_flops  # noqa: E402
from msdb.ir.function import IRModule, PrimFunc  # noqa: E402
from msdb.records.target import Target  # noqa: E402

TARGET = Target({"kind": "llvm", "num-cores": 1})


def onnx_model(op: str, inputs: dict[str, np.ndarray], out_shape: tuple[int, ...], consts: dict[str, np.ndarray],
               **attrs: Any) -> Any:
    """A one-node ONNX model (an `onnx.ModelProto`) of `op`, its constants as initializers."""
    from onnx import TensorProto, helper, numpy_helper

    node = helper.make_node(op, list(inputs) + list(consts), ["y"], **attrs)
    graph = helper.make_graph(
        [node], "bench",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, a.shape) for n, a in inputs.items()],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)],
        [numpy_helper.from_array(a, n) for n, a in consts.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def msdb_function(model: Any) -> PrimFunc:
    """The one PrimFunc msdb lowers a one-node ONNX model to (its parameters: the node's inputs
    and initializers in order, then the output)."""
    from msdb.model.lower import lower
    from msdb.model.onnx_frontend import from_onnx

    (func,) = lower(from_onnx(model, "bench")).functions.values()
    return func


def best_seconds(fn: Callable[[], object], min_seconds: float = 0.3) -> float:
    """The fastest of several timed batches (after a warm-up), in CPU time of this thread:
    both onnxruntime (one intra-op thread) and msdb's kernels (one OpenMP thread) run on the
    calling thread, and CPU time does not count the time another process holds the core."""
    fn()
    best = float("inf")
    deadline = time.perf_counter() + min_seconds
    while True:
        started = time.thread_time()
        n = 0
        while time.thread_time() - started < 0.02:
            fn()
            n += 1
        best = min(best, (time.thread_time() - started) / n)
        if time.perf_counter() > deadline:
            return best


class Case:
    """One operator: the ONNX node, msdb's function of it, its arrays (inputs then output)."""

    def __init__(self, name: str, model: Any, arrays: list[np.ndarray], feeds: dict[str, np.ndarray]):
        self.name, self.model, self.arrays, self.feeds = name, model, arrays, feeds
        self.func = msdb_function(model)


def conv_case(name: str, c: int, hw: int, f: int, k: int, stride: int, pad: int, groups: int = 1) -> Case:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, c, hw, hw)).astype("float32")
    w = rng.standard_normal((f, c // groups, k, k)).astype("float32")
    o = (hw + 2 * pad - k) // stride + 1
    y = np.zeros((1, f, o, o), "float32")
    model = onnx_model("Conv", {"x": x}, y.shape, {"w": w}, kernel_shape=[k, k], strides=[stride, stride],
                       pads=[pad] * 4, group=groups)
    return Case(name, model, [x, w, y], {"x": x})


def matmul_case(name: str, m: int, n: int, k: int) -> Case:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k)).astype("float32")
    b = rng.standard_normal((k, n)).astype("float32")
    y = np.zeros((m, n), "float32")
    return Case(name, onnx_model("MatMul", {"a": a}, y.shape, {"b": b}), [a, b, y], {"a": a})


def pool_case(name: str, c: int, hw: int, k: int, stride: int, pad: int) -> Case:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, c, hw, hw)).astype("float32")
    o = (hw + 2 * pad - k) // stride + 1
    y = np.zeros((1, c, o, o), "float32")
    model = onnx_model("MaxPool", {"x": x}, y.shape, {}, kernel_shape=[k, k], strides=[stride, stride], pads=[pad] * 4)
    return Case(name, model, [x, y], {"x": x})


def relu_case(name: str, shape: tuple[int, ...]) -> Case:
    x = np.random.default_rng(0).standard_normal(shape).astype("float32")
    return Case(name, onnx_model("Relu", {"x": x}, shape, {}), [x, np.zeros(shape, "float32")], {"x": x})


def cases(quick: bool) -> list[Case]:
    result = [
        conv_case("conv 64x56x56 3x3 s1", 64, 56, 64, 3, 1, 1),
        conv_case("conv 128x28x28 3x3 s1", 128, 28, 128, 3, 1, 1),
        conv_case("conv 64->128 56x56 3x3 s2", 64, 56, 128, 3, 2, 1),
        conv_case("conv 256x14x14 3x3 s1", 256, 14, 256, 3, 1, 1),
        conv_case("conv 512x7x7 3x3 s1", 512, 7, 512, 3, 1, 1),
        conv_case("conv 64->128 1x1 s2", 64, 56, 128, 1, 2, 0),
        conv_case("stem 3->64 224 7x7 s2", 3, 224, 64, 7, 2, 3),
        conv_case("conv 128->256 28x28 3x3 s2", 128, 28, 256, 3, 2, 1),
        conv_case("conv 256->512 14x14 3x3 s2", 256, 14, 512, 3, 2, 1),
        conv_case("conv 128->256 1x1 s2", 128, 28, 256, 1, 2, 0),
        conv_case("conv 256->512 1x1 s2", 256, 14, 512, 1, 2, 0),
        conv_case("depthwise 128x56x56 3x3", 128, 56, 128, 3, 1, 1, groups=128),
        matmul_case("matmul 1x512x1000", 1, 1000, 512),
        pool_case("maxpool 64x112x112 3x3 s2", 64, 112, 3, 2, 1),
        relu_case("relu 1x64x56x56", (1, 64, 56, 56)),
    ]
    return [result[0], result[4], result[6]] + result[-4:] if quick else result


#: How often each operator runs in ResNet-18 (torchvision's layout), for the weighted total.
RESNET18_COUNT = {
    "stem 3->64 224 7x7 s2": 1, "maxpool 64x112x112 3x3 s2": 1, "conv 64x56x56 3x3 s1": 4,
    "conv 64->128 56x56 3x3 s2": 1, "conv 128x28x28 3x3 s1": 3, "conv 64->128 1x1 s2": 1,
    "conv 128->256 28x28 3x3 s2": 1, "conv 256x14x14 3x3 s1": 3, "conv 128->256 1x1 s2": 1,
    "conv 256->512 14x14 3x3 s2": 1, "conv 512x7x7 3x3 s1": 3, "conv 256->512 1x1 s2": 1,
    "matmul 1x512x1000": 1,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer operators")
    parser.add_argument("--naive", action="store_true", help="also time the unscheduled function")
    args = parser.parse_args()

    from msdb.tuner import build
    from msdb.tuner.space.default_schedule import default_schedule
    from msdb.tuner.compile.reference import onnxruntime_session

    print(f"| operator | GFLOP | onnxruntime ms | msdb default ms | GFLOPS | ratio to ort |{' naive ms |' if args.naive else ''}")
    print(f"|---|---|---|---|---|---|{'---|' if args.naive else ''}")
    ratios = []
    weighted = [0.0, 0.0]  # onnxruntime, msdb: ResNet-18's operators times their counts
    for case in cases(args.quick):
        flop = float(estimate_flops(IRModule.from_func(case.func)))
        session = onnxruntime_session(case.model)
        expected = session.run(None, case.feeds)[0]
        ort_s = best_seconds(lambda: session.run(None, case.feeds))
        started = time.perf_counter()
        sch = default_schedule(case.func, TARGET)
        kernel = build(sch.mod, TARGET)
        compile_s = time.perf_counter() - started
        kernel.num_threads = 1
        arrays = [a.copy() for a in case.arrays]
        kernel(*arrays)
        np.testing.assert_allclose(arrays[-1], expected, rtol=1e-3, atol=1e-3)
        ours = best_seconds(lambda: kernel(*arrays))
        ratio = ours / ort_s
        ratios.append(ratio)
        count = RESNET18_COUNT.get(case.name, 0)
        weighted[0] += count * ort_s
        weighted[1] += count * ours
        naive = ""
        if args.naive:
            plain = build(IRModule.from_func(case.func), TARGET)
            plain.num_threads = 1
            naive = f" {best_seconds(lambda: plain(*arrays), 0.1) * 1e3:.3f} |"
        print(f"| {case.name} | {flop / 1e9:.3f} | {ort_s * 1e3:.3f} | {ours * 1e3:.3f} | {flop / ours / 1e9:.1f} | "
              f"{ratio:.2f}x |{naive}  (compile {compile_s:.1f} s)", flush=True)
    print(f"geometric mean ratio: {float(np.exp(np.mean(np.log(ratios)))):.2f}x")
    if not args.quick:
        print(f"ResNet-18's convolutions, max-pool and matmul, each times its count: onnxruntime "
              f"{weighted[0] * 1e3:.2f} ms, msdb default schedules {weighted[1] * 1e3:.2f} ms "
              f"({weighted[1] / weighted[0]:.2f}x)")


if __name__ == "__main__":
    main()
