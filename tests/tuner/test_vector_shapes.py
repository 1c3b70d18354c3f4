"""Property tests over shapes for the vector paths that decide by shape: tails and
padding lanes, masks, strided reads, padding copies, unrolled windows. Random convolutions
(NCHW and packed), max-pools and matmuls, drawn from a seeded generator, are scheduled by
`default_schedule`, built for each ISA level the host can execute (`isa_target`) and compared
with numpy. The shapes are fixed by the seeds below, so a failure names its shape in the test
id and reproduces on any machine that has the level.

The regression the suite missed before: 7x7 stride-2 convs whose 26-wide padding rows were
vectors of 32 lanes on AVX2's 8-lane registers, which LLVM split wrongly
(`msdb.tuner.codegen.masked`); a stem-like conv followed by a max-pool was wrong in all four fuse
modes. Both are here as named cases."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from msdb.records.target import Target
from tests.tuner.space.test_default_schedule import numpy_conv, rand, run, with_epilogue
from tests.workloads import conv_func, matmul_func, max_pool_func

CONV_SEED, PACKED_SEED, POOL_SEED, MATMUL_SEED = 3101, 3102, 3103, 3104


def _conv_cases(seed: int, count: int, packed: bool) -> list:
    rng = np.random.default_rng(seed)
    cases = []
    while len(cases) < count:
        k = int(rng.choice([1, 3, 3, 5, 7, 7]))
        stride = int(rng.choice([1, 2]))
        pad = int(rng.integers(1 if k > 1 else 0, k // 2 + 1))
        hw = int(rng.integers(max(3, k - 2 * pad), 30))
        if pad and rng.random() < 0.5:  # the right padding starts at a register boundary (8 or 16 lanes)
            hw = int(rng.choice([16, 24, 32])) - pad
        c = int(rng.choice([1, 3, 4, 8, 16]))
        f = int(rng.choice([16, 32])) if packed else int(rng.choice([4, 8, 12, 16, 24]))
        groups = 1 if packed or rng.random() < 0.75 else int(np.gcd(c, f))
        epilogue = str(rng.choice(["", "b", "bu", "bru"]))
        case = (c, hw, f, k, stride, pad, groups, epilogue)
        cases.append(pytest.param(*case, id="c{}-hw{}-f{}-k{}-s{}-p{}-g{}-{}".format(*case)))
    return cases


def _pool_cases(seed: int, count: int) -> list:
    rng = np.random.default_rng(seed)
    cases = []
    for _ in range(count):
        k = int(rng.choice([2, 3]))
        stride = int(rng.choice([1, 2]))
        pad = int(rng.integers(0, k // 2 + 1))
        hw = int(rng.integers(k, 40))
        c = int(rng.choice([1, 3, 8, 16]))
        cases.append(pytest.param(c, hw, k, stride, pad, id=f"c{c}-hw{hw}-k{k}-s{stride}-p{pad}"))
    return cases


def _matmul_cases(seed: int, count: int) -> list:
    rng = np.random.default_rng(seed)
    cases = []
    for _ in range(count):
        m, n, k = int(rng.integers(1, 9)), int(rng.integers(1, 100)), int(rng.integers(1, 70))
        bias = bool(rng.random() < 0.5)
        cases.append(pytest.param(m, n, k, bias, id=f"m{m}-n{n}-k{k}-{'bias' if bias else 'plain'}"))
    return cases


REGRESSIONS = [
    pytest.param(3, 20, 8, 7, 2, 3, 1, "", id="regression-stem-7x7s2-hw20"),
    pytest.param(3, 20, 16, 7, 2, 3, 1, "bu", id="regression-stem-7x7s2-hw20-bu"),
    pytest.param(3, 30, 16, 7, 2, 3, 1, "bu", id="regression-stem-7x7s2-hw30-bu"),
]


@pytest.mark.slow
@pytest.mark.parametrize("c,hw,f,k,stride,pad,groups,epilogue", REGRESSIONS + _conv_cases(CONV_SEED, 16, packed=False))
def test_random_convolutions_compute_what_numpy_computes(c: int, hw: int, f: int, k: int, stride: int, pad: int,
                                                         groups: int, epilogue: str, isa_target: Target) -> None:
    func = conv_func(1, c, hw, f, k, stride, pad, groups=groups, epilogue=epilogue)
    x, w = rand(1, c, hw, hw), rand(f, c // groups, k, k)
    inputs, expected = with_epilogue([x, w], numpy_conv(x, w, stride, pad, groups), epilogue)
    np.testing.assert_allclose(run(func, inputs, isa_target), expected, rtol=1e-4, atol=1e-4)


@pytest.mark.slow
@pytest.mark.parametrize("c,hw,f,k,stride,pad,groups,epilogue", REGRESSIONS[1:] + _conv_cases(PACKED_SEED, 10, packed=True))
def test_random_packed_convolutions_compute_what_numpy_computes(c: int, hw: int, f: int, k: int, stride: int, pad: int,
                                                                groups: int, epilogue: str, isa_target: Target) -> None:
    from msdb.model.legalize.conv import pack_weight

    func = conv_func(1, c, hw, f, k, stride, pad, epilogue=epilogue, packed=True)
    x, w = rand(1, c, hw, hw), rand(f, c, k, k)
    inputs, expected = with_epilogue([x, pack_weight(w)], numpy_conv(x, w, stride, pad), epilogue)
    np.testing.assert_allclose(run(func, inputs, isa_target), expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("c,hw,k,stride,pad", _pool_cases(POOL_SEED, 10))
def test_random_max_pools_compute_what_numpy_computes(c: int, hw: int, k: int, stride: int, pad: int,
                                                      isa_target: Target) -> None:
    x = rand(1, c, hw, hw)
    padded = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)), constant_values=-np.inf)
    out = (hw + 2 * pad - k) // stride + 1
    expected = np.max([padded[:, :, ry:ry + stride * out:stride, rx:rx + stride * out:stride]
                       for ry in range(k) for rx in range(k)], axis=0)
    np.testing.assert_array_equal(run(max_pool_func(1, c, hw, k, stride, pad), [x], isa_target), expected)


@pytest.mark.slow
@pytest.mark.parametrize("m,n,k,bias", _matmul_cases(MATMUL_SEED, 10))
def test_random_matmuls_compute_what_numpy_computes(m: int, n: int, k: int, bias: bool, isa_target: Target) -> None:
    a, b = rand(m, k), rand(k, n)
    inputs = [a, b] + ([rand(1, n, seed=3)] if bias else [])
    expected = a @ b + (inputs[2] if bias else 0)
    np.testing.assert_allclose(run(matmul_func(m, n, k, bias=bias), inputs, isa_target), expected,
                               rtol=1e-4, atol=1e-4)


@pytest.mark.slow
@pytest.mark.parametrize("fuse", ["tvm", "fold", "packed", "winograd", "nchwc"])
def test_a_stem_and_max_pool_match_onnxruntime_in_every_fuse_mode(fuse: str, isa_target: Target,
                                                                  tmp_path: Path) -> None:
    """A reported regression: a stem-like conv (3 channels, 7x7, stride 2, pad 3) with batch-norm
    and relu on a small image, then a 3x3 stride-2 max-pool, was wrong on AVX2 in every mode."""
    onnx = pytest.importorskip("onnx", reason="the ONNX frontend is the optional extra msdb[onnx]")
    pytest.importorskip("onnxruntime", reason="onnxruntime is the reference (msdb[onnx])")
    from msdb.model.zoo import _Builder
    from msdb.tuner.compile import compile_model
    from msdb.tuner.compile.reference import onnxruntime_session

    image = 20
    b = _Builder(seed=31)
    x = b.batch_norm(b.conv("data", 3, 16, 7, 2, "conv1"), 16, "bn1")
    x = b.node("Relu", [x], "relu")
    x = b.node("MaxPool", [x], "maxpool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    path = tmp_path / "stem.onnx"
    onnx.save(b.model("stem", [("data", [1, 3, image, image])], x, [1, 16, 5, 5]), str(path))
    compiled = compile_model(path, None, isa_target, fuse=fuse)
    data = np.random.default_rng(0).standard_normal((1, 3, image, image)).astype("float32")
    (expected,) = onnxruntime_session(path).run(None, {"data": data})
    (actual,) = compiled.run({"data": data})
    np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=1e-4 * float(np.max(np.abs(expected))))
