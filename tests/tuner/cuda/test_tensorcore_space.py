"""msdb's "cuda-tensorcore" design spaces (TVM 0.27's `DefaultCUDATensorCore` rules,
post-processors and mutators) against TVM's own, without TVM.

TVM's design spaces and post-processed candidates of the fp16 workloads are shipped in
tests/data/cuda_candidates (matmul_fp16, matmul_fp16_f16acc, conv2d_fp16: made by
tests/tuner/cuda/test_cuda_replay_tvm.py; the fp32 matmul, conv2d and softmax there were made
with the same defaults, TVM choosing its tensor-core set for sm_90), and those of the workloads
around the rule's edges in tensorcore_paths.json (tests/tuner/cuda/test_tensorcore_space_tvm.py:
int8, a batch matmul, dtypes no wmma group takes, a shape the tile does not divide).
"""

from __future__ import annotations

import json
import logging
from functools import lru_cache
from typing import Any

import pytest

from msdb.errors import ScheduleError
from msdb.hashing import structural_equal
from msdb.ir import from_script
from msdb.ir.function import IRModule
from msdb.records.target import Target
from msdb.schedule import Schedule, Trace
from msdb.schedule.tvm_json import dumps
from msdb.tuner.context import TuneContext
from msdb.tuner.space.auto_tensorize import auto_tensorize_mapping
from msdb.tuner.space.generators.base import SpaceGenerator
from msdb.tuner.space.mutators.base import create as create_mutators
from msdb.tuner.space.postprocs.base import Postproc
from msdb.tuner.space.postprocs.rewrite_tensorize import RewriteTensorize
from msdb.tuner.space.postprocs.verify_gpu_code import VerifyGPUCode
from msdb.tuner.space.rules.apply_custom_rule import ApplyCustomRule
from msdb.tuner.space.rules.base import ScheduleRule
from msdb.tuner.space.rules.multi_level_tiling_gpu import MultiLevelTilingGPU
from msdb.tuner.space.rules.multi_level_tiling_tensor_core import (WMMA_INTRIN_GROUPS, MultiLevelTilingTensorCore,
                                                                   TensorCoreIntrinGroup)
from msdb.schedule import tensor_intrin
from tests.tuner.cuda._candidates import DATA, TENSOR_CORE_WORKLOADS, load, tvm_module
from tests.tuner.test_space_cuda import post_processing_gives_tvms_traces

KIND = "cuda-tensorcore"
#: fp32 workloads shipped with TVM's design spaces under the same (tensor-core) defaults.
FALLBACK_WORKLOADS = ("matmul", "conv2d", "softmax")


def _generator(kind: str = KIND) -> SpaceGenerator:
    return SpaceGenerator.create("post-order-apply", sch_rules=kind, postprocs=kind, mutator_probs=kind)


def _context(mod: IRModule, target: dict[str, Any], kind: str = KIND) -> TuneContext:
    return TuneContext(mod=mod, target=Target(target), space_generator=_generator(kind), rand_state=1)


@lru_cache(maxsize=None)
def _workload(name: str) -> IRModule:
    return from_script(load(name)["workload"])


@lru_cache(maxsize=None)
def _spaces(name: str, kind: str = KIND) -> tuple[TuneContext, tuple[Schedule, ...]]:
    context = _context(_workload(name), load(name)["target"], kind)
    return context, tuple(context.generate_design_space())


@lru_cache(maxsize=None)
def _paths() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((DATA / "tensorcore_paths.json").read_text())
    return data


def _path_spaces(name: str, kind: str = KIND) -> list[Schedule]:
    data = _paths()
    spaces: list[Schedule] = _context(from_script(data["workloads"][name]["workload"]), data["target"],
                                      kind).generate_design_space()
    return spaces


def _insts_json(trace: Trace) -> Any:
    return json.loads(dumps(trace.normalized().as_json()))[0]


def _with_decisions(space: Trace, theirs: Trace) -> Trace:
    """msdb's design-space trace with TVM's sampling decisions, in order."""
    ours = [inst for inst in space.insts if inst.kind.startswith("Sample")]
    values = [theirs.get_decision(inst) for inst in theirs.insts if inst.kind.startswith("Sample")]
    assert len(ours) == len(values)
    return Trace(space.insts, dict(zip(ours, values)))


def _assert_tvms_spaces(spaces: list[Schedule] | tuple[Schedule, ...], mod: IRModule, shipped: list[Any],
                        where: str) -> None:
    """Same number of spaces, TVM's instructions byte for byte (index maps included), and
    TVM's module when replayed with TVM's decisions."""
    assert len(spaces) == len(shipped), where
    for i, (ours, item) in enumerate(zip(spaces, shipped)):
        theirs = Trace.from_json(item["trace"])
        assert _insts_json(ours.trace) == _insts_json(theirs), f"{where} design space {i}"
        replayed = Schedule(mod)
        Trace.from_json(_with_decisions(ours.trace, theirs).as_json()).apply_to_schedule(replayed)
        assert structural_equal(replayed.mod, tvm_module(item["tvm_script"])), f"{where} design space {i}"


# ---------------------------------------------------------------- defaults


def test_the_tensorcore_kind_gives_tvms_rules_postprocs_and_mutators() -> None:
    cuda, tensorcore = ScheduleRule.create("cuda"), ScheduleRule.create(KIND)
    assert [type(r) for r in tensorcore] == [ApplyCustomRule, MultiLevelTilingTensorCore] + [type(r) for r in cuda[1:]]
    rule = tensorcore[1]
    assert isinstance(rule, MultiLevelTilingTensorCore)
    assert (rule.structure, rule.tile_binds, rule.max_innermost_factor) == \
        ("SSSRRSRS", ("blockIdx.y", "blockIdx.x", "threadIdx.y"), 4)
    assert (rule.reuse_read.levels, rule.reuse_read.scope, rule.reuse_write.levels, rule.reuse_write.scope) == \
        ((4,), "shared.dyn", (2,), "shared.dyn")
    assert [g.compute for g in rule.intrin_groups] == [
        "wmma_sync_16x16x16_f16f16f32", "wmma_sync_16x16x16_f16f16f32_trans", "wmma_sync_16x16x16_f16f16f16",
        "wmma_sync_16x16x16_f16f16f16_trans", "wmma_sync_16x16x16_s8s8s32", "wmma_sync_16x16x16_s8s8s32_trans"]
    assert WMMA_INTRIN_GROUPS[1] == TensorCoreIntrinGroup(
        "wmma_fill_16x16x16_f32", "wmma_load_16x16x16_f16_a_shared_dyn", "wmma_load_16x16x16_f16_b_trans_shared_dyn",
        "wmma_sync_16x16x16_f16f16f32_trans", "wmma_store_16x16x16_f32_shared_dyn")
    postprocs = Postproc.create(KIND)
    assert [type(p) for p in postprocs] == [type(p) for p in Postproc.create("cuda")] + [RewriteTensorize]
    assert [(type(m), p) for m, p in create_mutators(KIND).items()] == \
        [(type(m), p) for m, p in create_mutators("cuda").items()]


def test_the_rule_refuses_what_tvm_refuses() -> None:
    with pytest.raises(ValueError, match="threadIdx.x"):
        MultiLevelTilingTensorCore(tile_binds=("blockIdx.y", "blockIdx.x", "threadIdx.x"))
    with pytest.raises(ValueError, match="shared memory"):
        MultiLevelTilingTensorCore(reuse_write=MultiLevelTilingGPU().reuse_write)  # "local"
    unknown = TensorCoreIntrinGroup("wmma_fill_16x16x16_f32", "nope", "nope", "nope", "nope")
    with pytest.raises(ScheduleError, match="not registered"):
        MultiLevelTilingTensorCore((unknown,))


# ---------------------------------------------------------------- design spaces


@pytest.mark.parametrize("name", TENSOR_CORE_WORKLOADS)
def test_the_design_spaces_are_tvms(name: str) -> None:
    """One space per matching wmma group (B as is and transposed), TVM's instructions byte for
    byte (ReIndex, the index maps of TransformLayout / TransformBlockLayout, the warp layout of
    the accumulator naming the sampled tile factors), and TVM's module."""
    _, spaces = _spaces(name)
    _assert_tvms_spaces(spaces, _workload(name), load(name)["design_spaces"], name)
    computes = [next(inst.inputs[1] for inst in s.trace.insts if inst.kind == "Annotate"
                     and inst.attrs[0] == "meta_schedule.auto_tensorize") for s in spaces]
    acc = "f16" if name == "matmul_fp16_f16acc" else "f32"
    assert computes == [f"wmma_sync_16x16x16_f16f16{acc}_trans", f"wmma_sync_16x16x16_f16f16{acc}"]


@pytest.mark.parametrize("name", FALLBACK_WORKLOADS)
def test_blocks_tensor_cores_cannot_compute_get_the_cuda_spaces(name: str) -> None:
    """fp32 workloads: no wmma group matches, and the spaces are the CUDA tiling's, which is
    what TVM gave under its tensor-core defaults."""
    _, spaces = _spaces(name)
    _assert_tvms_spaces(spaces, _workload(name), load(name)["design_spaces"], name)
    _, cuda = _spaces(name, "cuda")
    assert [_insts_json(s.trace) for s in spaces] == [_insts_json(s.trace) for s in cuda]


@pytest.mark.parametrize("name", ["int8", "batch_fp16"])
def test_int8_and_batch_matmuls_get_tvms_spaces(name: str) -> None:
    """int8 into int32 takes the s8s8s32 groups (shared rows aligned by 16); a batch matmul
    keeps its batch iter var unmapped, in front, and fuses its loop into blockIdx.y."""
    shipped = _paths()["workloads"][name]
    spaces = _path_spaces(name)
    _assert_tvms_spaces(spaces, from_script(shipped["workload"]), shipped["design_spaces"], name)
    insts = spaces[0].trace.insts
    if name == "int8":
        assert any(inst.kind == "Annotate" and inst.inputs[1] == "wmma_sync_16x16x16_s8s8s32_trans" for inst in insts)
        assert [tuple(inst.attrs) for inst in insts if inst.kind == "StorageAlign"] == [(0, -2, 32, 16)] * 2
    else:
        first_bind = next(i for i, inst in enumerate(insts) if inst.kind == "Bind")
        assert tuple(insts[first_bind].attrs) == ("blockIdx.y",) and len(insts[first_bind - 1].inputs) == 3


@pytest.mark.parametrize("name", ["uint8", "int8_to_int16", "fp16_fp64"])
def test_dtypes_no_wmma_group_takes_fall_back_as_in_tvm(name: str) -> None:
    """uint8 x int8 into int32, int8 into int16, fp16 into fp64: the element types differ from
    every group's, so TVM (and msdb) give the CUDA tiling's three spaces, no ReIndex."""
    shipped = _paths()["workloads"][name]
    spaces = _path_spaces(name)
    _assert_tvms_spaces(spaces, from_script(shipped["workload"]), shipped["design_spaces"], name)
    assert len(spaces) == 3 and not any(inst.kind == "ReIndex" for s in spaces for inst in s.trace.insts)
    assert [_insts_json(s.trace) for s in spaces] == [_insts_json(s.trace) for s in _path_spaces(name, "cuda")]


def test_a_shape_the_tile_does_not_divide_is_left_to_the_cuda_tiling() -> None:
    """100 rows: TVM pads the block to 112 (PadEinsum) and tensorizes; msdb has no PadEinsum and
    leaves the block to the CUDA tiling (a known difference, docs/architecture.md, "Tuner")."""
    shipped = _paths()["workloads"]["fp16_odd"]
    tvm_kinds = {inst.kind for item in shipped["design_spaces"] for inst in Trace.from_json(item["trace"]).insts}
    assert "PadEinsum" in tvm_kinds and len(shipped["design_spaces"]) == 2
    spaces = _path_spaces("fp16_odd")
    assert [_insts_json(s.trace) for s in spaces] == [_insts_json(s.trace) for s in _path_spaces("fp16_odd", "cuda")]


def test_the_proposed_mapping_fuses_a_conv_into_a_matmul() -> None:
    """conv2d NHWC: n, h, w index the output and the input as the intrinsic's m does, rh, rw, rc
    the inputs as its k does (the input's `v_co // 64 * 64 + v_rc` simplifies to `v_rc`)."""
    sch = Schedule(_workload("conv2d_fp16"))
    block = sch.get_block("conv2d_nhwc")
    mapping = auto_tensorize_mapping(sch, block, tensor_intrin.get("wmma_sync_16x16x16_f16f16f32").desc)
    assert mapping is not None
    from msdb.schedule.index_map import IndexMap

    assert IndexMap(mapping.initial, mapping.final).as_lambda() == (
        "lambda v_n, v_h, v_w, v_co, v_rh, v_rw, v_rc: (v_n * 3136 + v_h * 56 + v_w, v_co, v_rh * 192 + v_rw * 64 + v_rc,)")
    assert auto_tensorize_mapping(sch, block, tensor_intrin.get("wmma_sync_16x16x16_s8s8s32").desc) is None


def test_spaces_are_deterministic() -> None:
    first = [_insts_json(s.trace) for s in _context(_workload("conv2d_fp16"), load("conv2d_fp16")["target"])
             .generate_design_space()]
    again = [_insts_json(s.trace) for s in _context(_workload("conv2d_fp16"), load("conv2d_fp16")["target"])
             .generate_design_space()]
    assert first == again


# ---------------------------------------------------------------- post-processors


@pytest.mark.parametrize("name", TENSOR_CORE_WORKLOADS + FALLBACK_WORKLOADS)
def test_post_processing_tvms_candidates_gives_tvms_traces_and_modules(name: str) -> None:
    """TVM's measure candidates, replayed up to EnterPostproc and post-processed by msdb, are
    accepted and end with TVM's trace (the init decomposed with the fill intrinsic's name, every
    marked block tensorized: GetSBlock, Unannotate, Tensorize) and TVM's module."""
    context, _ = _spaces(name)
    items = load(name)["candidates"]
    for i, (sch, item) in enumerate(zip(post_processing_gives_tvms_traces(context, _workload(name), name, items),
                                        items)):
        assert structural_equal(sch.mod, tvm_module(item["tvm_script"])), f"{name} candidate {i}"


def test_verify_gpu_code_checks_the_tensorized_kernels_without_touching_the_trace() -> None:
    """VerifyGPUCode runs before RewriteTensorize (TVM's order); it checks a tensorized copy, so
    the candidate's trace gains nothing from it."""
    context, _ = _spaces("matmul_fp16")
    item = load("matmul_fp16")["candidates"][0]
    sch = Schedule(_workload("matmul_fp16"), seed=0)
    Trace.from_json(item["trace"]).apply_to_schedule(sch, remove_postproc=True)
    sch.enter_postproc()
    verify = next(p for p in context.space_generator.postprocs if isinstance(p, VerifyGPUCode))
    for postproc in context.space_generator.postprocs:
        if postproc is verify:
            break
        assert postproc.apply(sch)
    before = len(sch.trace.insts)
    assert verify.apply(sch) and len(sch.trace.insts) == before


def test_rewrite_tensorize_logs_a_failure_and_keeps_the_candidate(caplog: pytest.LogCaptureFixture) -> None:
    """A marked block the intrinsic does not match stays as it is (TVM only logs it); an empty
    mark is left alone."""
    sch = Schedule(_workload("matmul_fp16"))
    block = sch.get_block("C")
    sch.annotate(block, "meta_schedule.auto_tensorize", "wmma_fill_16x16x16_f32")
    with caplog.at_level(logging.WARNING):
        assert RewriteTensorize().apply(sch)
    assert "wmma_fill_16x16x16_f32" in caplog.text
    assert [inst.kind for inst in sch.trace.insts][-2:] == ["GetSBlock", "Unannotate"]
    unmarked = Schedule(_workload("matmul_fp16"))
    assert structural_equal(sch.mod, unmarked.mod)  # the loops stay; only the mark went
    empty = Schedule(_workload("matmul_fp16"))
    empty.annotate(empty.get_block("C"), "meta_schedule.auto_tensorize", "")
    n = len(empty.trace.insts)
    assert RewriteTensorize().apply(empty) and len(empty.trace.insts) == n
