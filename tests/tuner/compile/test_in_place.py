"""`in_place_inputs` (tuner/compile/in_place.py): an output may take an input's memory only when
it is computed element by element from it, through blocks that read it nowhere else."""

from __future__ import annotations

import pytest

from msdb.ir import te
from msdb.tuner.compile.in_place import in_place_inputs
from tests.isa import IsaLevel, runnable_levels


def _func(*tensors: te.Tensor):
    return te.create_prim_func(list(tensors))


def test_a_chain_of_elementwise_blocks_writes_in_place_of_its_first_input() -> None:
    x = te.placeholder((4, 8), name="x")
    y = te.placeholder((4, 8), name="y")
    added = te.compute((4, 8), lambda i, j: x[i, j] + y[i, j], name="added")
    out = te.compute((4, 8), lambda i, j: added[i, j] * te.const(2.0, "float32"), name="out")
    assert in_place_inputs(_func(x, y, out), 2) == {2: 0}


def test_a_broadcast_operand_gives_no_memory() -> None:
    bias = te.placeholder((8,), name="bias")
    x = te.placeholder((4, 8), name="x")
    out = te.compute((4, 8), lambda i, j: x[i, j] + bias[j], name="out")
    assert in_place_inputs(_func(bias, x, out), 2) == {2: 1}


def test_an_input_read_anywhere_but_its_own_place_gives_no_memory() -> None:
    x = te.placeholder((8, 8), name="x")
    transposed = te.compute((8, 8), lambda i, j: x[i, j] + x[j, i], name="out")
    assert in_place_inputs(_func(x, transposed), 1) == {}
    shifted = te.compute((8, 7), lambda i, j: x[i, j] + x[i, j + 1], name="out")
    assert in_place_inputs(_func(x, shifted), 1) == {}


def test_an_input_a_reduction_or_two_blocks_read_gives_no_memory() -> None:
    x = te.placeholder((4, 8), name="x")
    k = te.reduce_axis((0, 8), name="k")
    total = te.compute((4,), lambda i: te.sum(x[i, k], axis=k), name="total")
    scaled = te.compute((4, 8), lambda i, j: x[i, j] / total[i], name="out")
    assert in_place_inputs(_func(x, scaled), 1) == {}  # the sum reads x after an output is written
    doubled = te.compute((4, 8), lambda i, j: x[i, j] * te.const(2.0, "float32"), name="doubled")
    halved = te.compute((4, 8), lambda i, j: x[i, j] * te.const(0.5, "float32"), name="halved")
    assert in_place_inputs(_func(x, doubled, halved), 1) == {}


def test_an_output_of_another_shape_or_dtype_takes_no_memory() -> None:
    x = te.placeholder((4, 8), name="x")
    as_int = te.compute((4, 8), lambda i, j: x[i, j].astype("int32"), name="out")
    assert in_place_inputs(_func(x, as_int), 1) == {}


@pytest.mark.slow
@pytest.mark.parametrize("level", runnable_levels(), ids=lambda level: level.name)
def test_an_output_over_its_residual_input_is_right_under_sampled_schedules(level: IsaLevel) -> None:
    """The rule is data flow, so it holds for any schedule: random samples of the tuner's CPU
    design space of a matmul with a residual add (TVM's rules and post-processors, as a tuning
    run draws them), each built and run with the output written over the residual, compute what
    they compute with separate memory (and what numpy does)."""
    import numpy as np

    from msdb.schedule.trace import Trace
    from msdb.tuner import build
    from msdb.tuner.search.replay import apply_trace
    from msdb.tuner.tune import make_context

    a = te.placeholder((32, 64), name="a")
    w = te.placeholder((64, 48), name="w")
    residual = te.placeholder((32, 48), name="residual")
    k = te.reduce_axis((0, 64), name="k")
    product = te.compute((32, 48), lambda i, j: te.sum(a[i, k] * w[k, j], axis=k), name="product")
    out = te.compute((32, 48), lambda i, j: product[i, j] + residual[i, j], name="out")
    func = _func(a, w, residual, out)
    assert in_place_inputs(func, 3) == {3: 2}

    target = level.target()
    context = make_context(func, target, "post-order-apply", "replay-trace", 0, "residual_matmul", 1)
    spaces = context.space_generator.generate_design_space(context.mod)
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(shape).astype("float32") for shape in ((32, 64), (64, 48), (32, 48))]
    expected = arrays[0] @ arrays[1] + arrays[2]
    built: set[str] = set()
    for seed in range(12):
        space = spaces[seed % len(spaces)].trace.simplified(remove_postproc=True)
        sch = apply_trace(context.mod, Trace(space.insts), context.space_generator.postprocs, seed)
        if sch is None:
            continue
        kernel = build(sch.mod, target)
        separate = np.zeros((32, 48), "float32")
        kernel(arrays[0], arrays[1], arrays[2], separate)
        shared = arrays[2].copy()
        kernel(arrays[0], arrays[1], shared, shared)
        np.testing.assert_array_equal(shared, separate)
        np.testing.assert_allclose(shared, expected, rtol=1e-5, atol=1e-5)
        built.add(str(sch.trace))
    assert len(built) >= 6  # distinct schedules, each right
