"""The family key (`msdb.hashing.family`): equal across resolutions, batch sizes and index
dtypes, different across operators, layouts and data dtypes; the abstracted sizes line up
between relatives; a workload without an anchor block is keyed by its whole function."""

from __future__ import annotations

import pytest

from msdb.hashing import family_extents, family_hash, family_key, structural_hash
from msdb.hashing.family import family_tokens
from msdb.ir import te, to_script, zoo
from msdb.ir.function import IRModule, PrimFunc
from tests.workloads import conv_func, matmul_func, max_pool_func, relu_func


def te_conv_nchw(n: int, c: int, hw: int, f: int, k: int, stride: int, pad: int, dtype: str = "float32") -> PrimFunc:
    """A conv2d written directly in te with int32 sizes (a standalone workload, as a user tunes
    one), the way topi's conv2d_nchw writes it: pad_temp, then conv2d_nchw."""
    data = te.placeholder((n, c, hw, hw), dtype, "data")
    weight = te.placeholder((f, c, k, k), dtype, "weight")
    size = hw + 2 * pad
    pad_temp = te.compute(
        (n, c, size, size),
        lambda i0, i1, i2, i3: te.if_then_else(
            te.all(i2 >= pad, i2 < hw + pad, i3 >= pad, i3 < hw + pad),
            data[i0, i1, i2 - pad, i3 - pad], te.const(0.0, dtype)),
        name="pad_temp")
    out = (size - k) // stride + 1
    rc, ry, rx = te.reduce_axis((0, c), "rc"), te.reduce_axis((0, k), "ry"), te.reduce_axis((0, k), "rx")
    conv = te.compute(
        (n, f, out, out),
        lambda nn, ff, yy, xx: te.sum(pad_temp[nn, rc, yy * stride + ry, xx * stride + rx] * weight[ff, rc, ry, rx],
                                      axis=[rc, ry, rx]),
        name="conv2d_nchw")
    return te.create_prim_func([data, weight, conv])


def nhwc(n: int, hw: int, c: int, f: int, in_dtype: str = "float32", out_dtype: str = "float32") -> IRModule:
    return IRModule.from_func(te.create_prim_func(zoo.conv2d_nhwc(n, hw, hw, c, f, 3, 2, 1, in_dtype=in_dtype,
                                                                  out_dtype=out_dtype)))


def test_a_conv_is_one_family_across_resolutions_batch_sizes_and_index_dtypes() -> None:
    standalone = te_conv_nchw(1, 4, 8, 8, 3, 2, 1)  # int32 indices
    in_model = conv_func(1, 4, 8, 8, 3, 2, 1)  # inside a Relax model (its legalization): int64 indices
    assert "int64" not in to_script(standalone) and "T.int64(" in to_script(in_model)
    # the index dtype alone splits every hash but the family
    assert structural_hash(standalone, "anchor-block") != structural_hash(in_model, "anchor-block")
    relatives = [standalone, in_model, conv_func(8, 4, 8, 8, 3, 2, 1), conv_func(1, 4, 32, 8, 3, 2, 1),
                 conv_func(2, 16, 56, 32, 3, 2, 1), te_conv_nchw(4, 8, 28, 16, 3, 2, 1)]
    assert len({family_hash(m) for m in relatives}) == 1
    assert len({structural_hash(m, "anchor-block") for m in relatives}) == len(relatives)
    # a fused epilogue does not change the anchor, so not the family either
    assert family_hash(conv_func(2, 8, 16, 8, 3, 2, 1, epilogue="bu")) == family_hash(in_model)


def test_other_operators_layouts_and_data_dtypes_are_other_families() -> None:
    nchw = family_hash(conv_func(1, 4, 8, 16, 3, 2, 1))
    others = {
        "NHWC": family_hash(nhwc(1, 8, 4, 16)),
        "packed": family_hash(conv_func(1, 4, 8, 16, 3, 2, 1, packed=True)),
        "float16": family_hash(te_conv_nchw(1, 4, 8, 16, 3, 2, 1, dtype="float16")),
        "int8": family_hash(nhwc(1, 8, 4, 16, in_dtype="int8", out_dtype="int32")),
        "NHWC float16": family_hash(nhwc(1, 8, 4, 16, in_dtype="float16", out_dtype="float16")),
        "matmul": family_hash(matmul_func(16, 16, 16)),
        "max_pool": family_hash(max_pool_func(1, 4, 8, 3, 2, 1)),
        "batch_matmul": family_hash(zoo.build("GMM", 1, 16, 16, 16)),
    }
    assert len({nchw, *others.values()}) == len(others) + 1, others
    # and each of those is itself one family across sizes
    assert family_hash(nhwc(4, 32, 8, 32)) == others["NHWC"]
    assert family_hash(nhwc(2, 16, 8, 8, in_dtype="int8", out_dtype="int32")) == others["int8"]
    assert family_hash(matmul_func(128, 64, 32)) == others["matmul"]


def test_data_constants_stay_and_index_constants_go() -> None:
    """A float constant of the data path is part of the family; a loop extent or an index
    constant is not."""
    def scaled(factor: float, n: int) -> PrimFunc:
        a = te.placeholder((n, n), "float32", "A")
        k = te.reduce_axis((0, n), "k")
        out = te.compute((n,), lambda i: te.sum(a[i, k] * te.const(factor, "float32"), axis=[k]), name="S")
        return te.create_prim_func([a, out])

    assert family_hash(scaled(2.0, 8)) == family_hash(scaled(2.0, 64))
    assert family_hash(scaled(2.0, 8)) != family_hash(scaled(0.5, 8))


def test_extents_are_the_abstracted_sizes_in_walk_order_and_line_up_between_relatives() -> None:
    small, large = family_key(matmul_func(4, 16, 8)), family_key(matmul_func(32, 64, 128))
    assert small.hash == large.hash
    assert len(small.extents) == len(large.extents) > 0
    # the loops around the anchor come first: (min, extent) of i, j, k
    assert small.extents[:6] == (0, 4, 0, 16, 0, 8)
    assert large.extents[:6] == (0, 32, 0, 64, 0, 128)
    # position by position, every difference is one of the sizes that changed
    assert {(a, b) for a, b in zip(small.extents, large.extents) if a != b} <= {(4, 32), (16, 64), (8, 128)}
    assert family_extents(matmul_func(4, 16, 8)) == small.extents


def test_a_workload_without_an_anchor_block_is_keyed_by_its_whole_function() -> None:
    """The documented fallback: no reduction block (elementwise) -> the whole module in family
    mode, so the same elementwise function at other sizes is still one family."""
    assert family_tokens(relu_func((1, 4, 8, 8)))[0] == "Family-module"
    assert family_tokens(matmul_func(4, 4, 4))[0].startswith("Family-anchor")
    assert family_hash(relu_func((1, 4, 8, 8))) == family_hash(relu_func((8, 16, 32, 32)))
    assert family_hash(relu_func((1, 4, 8, 8))) != family_hash(relu_func((4, 8)))  # rank is kept
    assert family_key(relu_func((2, 3))).extents[-2:] != ()


def test_the_family_of_a_prim_func_is_that_of_its_module() -> None:
    func = conv_func(1, 4, 8, 8, 3, 2, 1)
    assert family_key(func) == family_key(IRModule.from_func(func))


def test_the_family_key_is_pinned() -> None:
    """The key is stored in databases: a change to the family walk is a schema migration that
    recomputes `workload.family_hash` (docs/architecture.md, "Hashing")."""
    assert family_hash(matmul_func(4, 16, 8)) == PINNED_MATMUL


def test_bad_input_is_refused_with_a_type_error() -> None:
    with pytest.raises(TypeError, match="IRModule or a PrimFunc"):
        family_hash("not a module")  # type: ignore[arg-type]


def test_structural_hashes_do_not_see_family_mode() -> None:
    """Family mode is a flag of the one walk; the other modes' streams are unchanged (the golden
    hashes in tests/hashing/test_hash_stability.py pin them)."""
    mod = conv_func(1, 4, 8, 8, 3, 2, 1)
    assert structural_hash(mod, "anchor-block") != family_hash(mod)


#: The family of `matmul_func(4, 16, 8)` (any sizes of it).
PINNED_MATMUL = "32a55230a7324dbb"
