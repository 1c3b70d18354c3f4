"""anchor-block mode and `find_anchor_block`."""

from __future__ import annotations

import dataclasses

import pytest

from msdb.hashing import find_anchor_block, structural_equal, structural_hash
from msdb.ir import stmt as S
from msdb.ir.function import IRModule

from . import ir_samples
from .ir_samples import buffer, compute, f32, func

FUSIONS = [
    dict(bias=False, relu=False),
    dict(bias=True, relu=False),
    dict(bias=False, relu=True),
    dict(bias=True, relu=True),
]


def test_matmul_fusions_share_the_anchor_hash_and_differ_structurally() -> None:
    mods = [ir_samples.matmul_fused(**kw) for kw in FUSIONS]
    anchors = {structural_hash(m, "anchor-block") for m in mods}
    assert len(anchors) == 1
    assert len({structural_hash(m) for m in mods}) == len(mods)
    assert len({structural_hash(m, "ignore-tensor") for m in mods}) == len(mods)
    for m in mods[1:]:
        assert structural_equal(mods[0], m, "anchor-block")
        assert not structural_equal(mods[0], m)
    assert structural_hash(mods[0], "anchor-block") == structural_hash(ir_samples.matmul(), "anchor-block")


def test_anchor_hash_sees_the_anchor_shape_and_loops() -> None:
    base = structural_hash(ir_samples.matmul_fused(bias=True), "anchor-block")
    assert structural_hash(ir_samples.matmul_fused(64, 128, 128, bias=True), "anchor-block") != base
    assert structural_hash(ir_samples.matmul_fused(128, 128, 64, bias=True), "anchor-block") != base
    assert structural_hash(ir_samples.matmul(dtype="float16"), "anchor-block") != base

    mod = ir_samples.matmul_fused(bias=True)
    root = mod.main.body.block
    first = root.body.seq[0]
    parallel = dataclasses.replace(first, kind=S.ForKind.PARALLEL)
    changed = IRModule.from_func(mod.main.with_body(
        S.BlockRealize((), ir_samples.TRUE, dataclasses.replace(root, body=S.seq(parallel, *root.body.seq[1:])))))
    assert structural_hash(changed, "anchor-block") != base
    assert structural_hash(changed) != structural_hash(mod)


def test_anchor_hash_ignores_other_blocks_and_the_signature() -> None:
    bias = ir_samples.matmul_fused(bias=True)
    relu = ir_samples.matmul_fused(relu=True)
    # The epilogue differs (add vs max, an extra parameter) but the anchor is the same.
    assert len(bias.main.params) != len(relu.main.params)
    assert structural_hash(bias, "anchor-block") == structural_hash(relu, "anchor-block")


def test_find_anchor_block_returns_the_reduction() -> None:
    block = find_anchor_block(ir_samples.matmul_fused(bias=True, relu=True))
    assert block is not None and block.name_hint == "C" and block.init is not None
    assert find_anchor_block(ir_samples.matmul().main).name_hint == "C"  # a PrimFunc works too
    assert find_anchor_block(ir_samples.conv2d_nhwc()).name_hint == "conv2d_nhwc"


def test_pure_elementwise_has_no_anchor_and_falls_back_to_ignore_tensor() -> None:
    mod = ir_samples.elementwise_relu()
    assert find_anchor_block(mod) is None
    assert structural_hash(mod, "anchor-block") == structural_hash(mod, "ignore-tensor")
    assert structural_equal(mod, ir_samples.elementwise_relu(), "anchor-block")
    assert not structural_equal(mod, ir_samples.elementwise_relu(32, 64), "anchor-block")


def test_with_two_reductions_the_one_with_more_flops_is_the_anchor() -> None:
    for big_first in (True, False):
        mod = ir_samples.matmul_then_rowsum(big_first=big_first)
        assert find_anchor_block(mod).name_hint == "C", big_first
        assert structural_hash(mod, "anchor-block") == structural_hash(ir_samples.matmul(64, 64, 64), "anchor-block")


def test_softmax_anchor_is_the_first_of_equal_reductions() -> None:
    # max and sum reductions have the same FLOPs: the first in program order wins.
    assert find_anchor_block(ir_samples.softmax()).name_hint == "T_softmax_maxelem"


def test_anchor_in_a_tie_is_the_first() -> None:
    a, b = buffer("A", (8, 8)), buffer("B", (8, 8))
    s1, s2 = buffer("S1", (8,)), buffer("S2", (8,))
    r1 = compute("first", s1, [(8, "S"), (8, "R")], lambda i, j: a[i, j], init=f32(0))
    r2 = compute("second", s2, [(8, "S"), (8, "R")], lambda i, j: b[i, j], init=f32(0))
    assert find_anchor_block(IRModule.from_func(func([a, b, s1, s2], [r1, r2]))).name_hint == "first"
    assert find_anchor_block(IRModule.from_func(func([a, b, s1, s2], [r2, r1]))).name_hint == "second"


def test_anchor_is_taken_from_the_entry_function() -> None:
    mm = ir_samples.matmul().main
    relu = ir_samples.elementwise_relu().main
    conv = ir_samples.conv2d_nhwc().main
    assert find_anchor_block(IRModule({"main": relu, "mm": mm})) is None
    assert find_anchor_block(IRModule({"main": mm, "conv": conv})).name_hint == "C"
    entry = IRModule({"main": mm, "conv": conv.with_attrs(**{"tir.is_entry_func": True})})
    assert find_anchor_block(entry).name_hint == "conv2d_nhwc"
    assert find_anchor_block(IRModule({"a": mm, "b": conv})) is None  # no entry function


def test_anchor_hash_differs_from_the_structural_hash() -> None:
    mod = ir_samples.matmul()
    assert structural_hash(mod, "anchor-block") != structural_hash(mod)


def _zoo():
    from msdb.ir import zoo

    return zoo


def test_zoo_matmul_family_shares_the_anchor_of_the_hand_built_matmul() -> None:
    zoo = _zoo()
    family = [zoo.workload(n) for n in ("matmul", "matmul_relu", "matmul_bias", "matmul_bias_relu")]
    assert {structural_hash(m, "anchor-block") for m in family} == {structural_hash(ir_samples.matmul(), "anchor-block")}
    assert len({structural_hash(m) for m in family}) == 4
    assert structural_hash(family[0]) == structural_hash(ir_samples.matmul())


def test_zoo_dense_and_linear_share_the_anchor_and_relu_has_none() -> None:
    zoo = _zoo()
    dense, linear = zoo.workload("dense"), zoo.workload("linear0")
    assert structural_hash(dense, "anchor-block") == structural_hash(linear, "anchor-block")
    assert structural_hash(dense) != structural_hash(linear)
    relu = zoo.workload("relu0")
    assert find_anchor_block(relu) is None
    assert structural_hash(relu, "anchor-block") == structural_hash(relu, "ignore-tensor")


def test_zoo_softmax_anchor_is_its_first_reduction() -> None:
    assert find_anchor_block(_zoo().workload("SFM")).name_hint == "T_softmax_maxelem"


# tvm.s_tir.analysis.find_anchor_sblock on TVM 0.27's te_workload CONFIGS[name][0].
TVM_ANCHORS = {
    "C1D": "conv1d_nlc", "C2D": "conv2d_nhwc", "C3D": "conv3d_ndhwc", "GMM": "Z", "GRP": "conv2d_nhwc",
    "DIL": "conv2d_nhwc", "DEP": "depth_conv2d_nhwc", "T2D": "conv2d_transpose_nhwc",
    "CAP": "conv2d_capsule_nhwijc", "NRM": "C", "SFM": "T_softmax_maxelem", "CBR": "Conv2dOutput", "TBG": "C",
}


@pytest.mark.parametrize("name", sorted(TVM_ANCHORS))
def test_zoo_anchor_is_the_block_tvm_picks(name: str) -> None:
    block = find_anchor_block(_zoo().workload(name))
    assert block is not None and block.name_hint == TVM_ANCHORS[name]
