"""GPU design spaces of the workloads msdb's legalization builds (int64 shapes and indices, as
TVM's Relax LegalizeOps writes them; docs/architecture.md, "CUDA"): random samples of each
space pass VerifyGPUCode, and the accepted candidates lower to CUDA C that NVRTC and ptxas
compile for sm_90.

A function may mix index dtypes: a te placeholder given Python ints has int32 shapes, the
legalized op's loops are int64, so a shared-memory cache of that input is filled by int32 loops
while the compute loops are int64, and both are bound to threadIdx.x. The GPU lowering then
uses one hardware index for both and casts it for the loops of the other dtype, as TVM's
UnifyThreadBinding does (before, every such candidate was rejected).
"""

from __future__ import annotations

import random
import shutil
from typing import Any, Callable

import pytest

from msdb.ir import expr as E
from msdb.ir import te
from msdb.ir.function import IRModule, PrimFunc
from msdb.model import from_onnx, zoo
from msdb.model.legalize import legalize_op
from msdb.model.lower import lower
from msdb.records.target import Target
from msdb.schedule.schedule import Schedule
from msdb.schedule.trace import Trace
from msdb.tuner.codegen.cuda import build_cuda
from msdb.tuner.codegen.cuda.lower import lower_gpu_module
from msdb.tuner.context import TuneContext
from msdb.tuner.search.replay import ReplayFailures, apply_trace
from msdb.tuner.space.generators.base import SpaceGenerator

SM90 = Target("cuda -arch=sm_90")
SAMPLES = 150
BUILT_PER_WORKLOAD = 2

Shape = Callable[..., tuple[Any, ...]]


def _int32(*dims: int) -> tuple[int, ...]:
    """Python ints: te gives the placeholder int32 shapes."""
    return dims


def _int64(*dims: int) -> tuple[E.PrimExpr, ...]:
    """int64 shapes, as msdb.model.lower and TVM's Relax give every tensor."""
    return tuple(E.make_const(d, "int64") for d in dims)


def _legalized(op: str, inputs: list[te.Tensor], attrs: dict[str, Any]) -> te.Tensor:
    out = legalize_op(op, inputs, attrs)
    assert isinstance(out, te.Tensor), f"{op} legalizes to one tensor"
    return out


def _conv2d(shape: Shape) -> PrimFunc:
    """ResNet's 3x3 conv2d of tests/data/cuda_candidates/conv2d.json, through msdb's legalization."""
    data = te.placeholder(shape(1, 64, 56, 56), "float32", "data")
    weight = te.placeholder(shape(64, 64, 3, 3), "float32", "weight")
    out = _legalized("nn.conv2d", [data, weight],
                      {"strides": (1, 1), "padding": (1, 1, 1, 1), "dilation": (1, 1), "groups": 1})
    return te.create_prim_func([data, weight, out])


def _matmul(shape: Shape, m: int = 128, k: int = 256, n: int = 64) -> PrimFunc:
    a = te.placeholder(shape(m, k), "float32", "A")
    b = te.placeholder(shape(k, n), "float32", "B")
    return te.create_prim_func([a, b, _legalized("matmul", [a, b], {})])


def _mlp_dense_bias_relu() -> PrimFunc:
    """The MLP's fused MatMul + Add(bias) + Relu, as msdb.model.lower fuses it."""
    model = lower(from_onnx(zoo.mlp(batch=4, features=64, hidden=(32, 16), num_classes=10)))
    return model.functions["fused_matmul_add_relu"]


WORKLOADS: dict[str, Callable[[], PrimFunc]] = {
    "conv2d-int32-inputs": lambda: _conv2d(_int32),
    "conv2d-int64": lambda: _conv2d(_int64),
    "matmul-int32-inputs": lambda: _matmul(_int32),
    "matmul-int64": lambda: _matmul(_int64),
    "mlp-dense-bias-relu": _mlp_dense_bias_relu,
}


def _accepted(func: PrimFunc, seed: int = 0) -> tuple[list[Schedule], ReplayFailures]:
    """Replay SAMPLES random draws of the cuda design spaces through the post-processors."""
    context = TuneContext(mod=func, target=SM90, space_generator=SpaceGenerator.create("post-order-apply"),
                          rand_state=1)
    spaces = context.generate_design_space()
    postprocs = list(context.space_generator.postprocs)
    rng = random.Random(seed)
    failures = ReplayFailures()
    accepted = []
    for _ in range(SAMPLES):
        space = spaces[rng.randrange(len(spaces))]
        sch = apply_trace(context.mod, Trace(space.trace.insts), postprocs, rng.getrandbits(31), failures)
        if sch is not None:
            accepted.append(sch)
    return accepted, failures


@pytest.mark.slow
@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n.startswith("conv2d") else n
                                  for n in sorted(WORKLOADS)])
def test_legalized_workloads_give_candidates_that_compile_for_sm90(name: str) -> None:
    accepted, failures = _accepted(WORKLOADS[name]())
    assert accepted, f"{name}: no candidate of {SAMPLES} passed the post-processors ({failures})"
    for sch in accepted[:BUILT_PER_WORKLOAD]:
        built = build_cuda(sch.mod, SM90)
        assert built.arch == "sm_90" and built.cubin and built.kernels
        assert all(k["block"][0] * k["block"][1] * k["block"][2] <= 1024 for k in built.kernels)
        assert "__global__" in built.source


def _mixed_matmul_with_shared_cache() -> IRModule:
    """16x32 @ 32x16 with int32-shaped inputs: the row of A is copied to shared memory by int32
    loops on threadIdx.x, the int64 matmul loops use threadIdx.x too."""
    a = te.placeholder((16, 32), "float32", "A")
    b = te.placeholder((32, 16), "float32", "B")
    sch = Schedule(te.create_prim_func([a, b, _legalized("matmul", [a, b], {})]))
    block = sch.get_block("matmul")
    i, j, _ = sch.get_loops(block)
    sch.bind(i, "blockIdx.x")
    sch.bind(j, "threadIdx.x")
    shared = sch.cache_read(block, 0, "shared")
    sch.compute_at(shared, i)
    _, thread = sch.split(sch.fuse(*sch.get_loops(shared)[1:]), [None, 16])
    sch.bind(thread, "threadIdx.x")
    return sch.mod


def test_thread_loops_of_two_index_dtypes_share_one_hardware_index() -> None:
    lowered = lower_gpu_module(_mixed_matmul_with_shared_cache())
    assert [(k.grid, k.block) for k in lowered.kernels] == [((16, 1, 1), (16, 1, 1))]


@pytest.mark.slow
@pytest.mark.skipif(not shutil.which("g++"), reason="the CPU emulation compiles with g++")
def test_a_kernel_with_both_index_dtypes_on_threadIdx_computes_the_matmul() -> None:
    from tests.tuner.cuda.test_cuda_codegen import _emulated_matches_interpreter

    _emulated_matches_interpreter(_mixed_matmul_with_shared_cache())
