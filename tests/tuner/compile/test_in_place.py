"""`in_place_inputs` (tuner/compile/in_place.py): an output may take an input's memory only when
it is computed element by element from it, through blocks that read it nowhere else."""

from __future__ import annotations

from msdb.ir import te
from msdb.tuner.compile.in_place import in_place_inputs


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
