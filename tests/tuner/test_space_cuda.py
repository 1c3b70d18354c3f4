"""msdb's GPU design space (TVM 0.27's `DefaultCUDA` rules, post-processors and mutators) on
the three workloads of tests/data/cuda_candidates (1024^2 matmul, ResNet conv2d 1x64x56x56 3x3
pad 1, softmax 256x1024), checked against the design spaces and candidates TVM 0.27 produced
for them (shipped there by tests/tuner/cuda/test_cuda_replay_tvm.py; tests/tuner/test_space_cuda_tvm.py
compares with TVM live)."""

from __future__ import annotations

import json
import logging
import random
from functools import lru_cache
from pathlib import Path
from typing import Any

import pytest

from msdb.hashing import structural_equal
from msdb.ir import from_script
from msdb.ir import stmt as S
from msdb.ir.function import IRModule
from msdb.records.target import Target
from msdb.schedule import Schedule, Trace
from msdb.schedule.tvm_json import dumps
from msdb.tuner.context import TuneContext
from msdb.tuner.space.generators.base import SpaceGenerator
from msdb.tuner.space.mutators.thread_binding import MutateThreadBinding
from msdb.tuner.space.mutators.tile_size import MutateTileSize
from msdb.tuner.space.mutators.unroll import MutateUnroll
from msdb.tuner.space.postprocs.disallow_dynamic_loop import DisallowDynamicLoop
from msdb.tuner.space.postprocs.rewrite_cooperative_fetch import RewriteCooperativeFetch
from msdb.tuner.space.postprocs.rewrite_parallel_vectorize_unroll import RewriteParallelVectorizeUnroll
from msdb.tuner.space.postprocs.rewrite_reduction_block import RewriteReductionBlock
from msdb.tuner.space.postprocs.rewrite_unbound_block import RewriteUnboundBlock
from msdb.tuner.space.postprocs.verify_gpu_code import VerifyGPUCode
from msdb.tuner.space.rules.apply_custom_rule import ApplyCustomRule, register_custom_rule
from msdb.tuner.space.rules.auto_bind import AutoBind
from msdb.tuner.space.rules.auto_inline import AutoInline
from msdb.tuner.space.rules.cross_thread_reduction import CrossThreadReduction
from msdb.tuner.space.rules.inline_constant_scalars import InlineConstantScalars
from msdb.tuner.space.rules.multi_level_tiling import MultiLevelTiling
from msdb.tuner.space.rules.multi_level_tiling_gpu import MultiLevelTilingGPU
from msdb.tuner.space.rules.parallel_vectorize_unroll import ParallelizeVectorizeUnroll
from tests.tuner.cuda._candidates import load

#: The three workloads checked (tests/data/cuda_candidates has TVM's spaces and candidates of each).
WORKLOADS = ("matmul", "conv2d", "softmax")

CUDA = Target("cuda -arch=sm_90")


def _context(mod: IRModule, target: Target = CUDA, **space: Any) -> TuneContext:
    return TuneContext(mod=mod, target=target, space_generator=SpaceGenerator.create("post-order-apply", **space),
                       rand_state=1)


@lru_cache(maxsize=None)
def _workload(name: str) -> IRModule:
    return from_script(load(name)["workload"])


@lru_cache(maxsize=None)
def _spaces(name: str) -> tuple[TuneContext, tuple[Schedule, ...]]:
    context = _context(_workload(name), Target(load(name)["target"]))
    return context, tuple(context.generate_design_space())


def _insts_json(trace: Trace) -> Any:
    return json.loads(dumps(trace.normalized().as_json()))[0]


def _with_decisions(space: Trace, values: list[Any]) -> Trace:
    """The design space's trace with its sampling decisions set to `values`, in order."""
    samples = [inst for inst in space.insts if inst.kind.startswith("Sample")]
    assert len(samples) == len(values)
    return Trace(space.insts, dict(zip(samples, values)))


def _post_process(context: TuneContext, mod: IRModule, trace: Trace, seed: int = 0) -> tuple[Schedule, str]:
    sch = Schedule(mod, seed=seed)
    trace.apply_to_schedule(sch, remove_postproc=True)
    sch.enter_postproc()
    for postproc in context.space_generator.postprocs:
        if not postproc.apply(sch):
            return sch, type(postproc).__name__
    return sch, "accepted"


def _thread_tags_of_blocks(stmt: S.Stmt, tags: tuple[str, ...], out: dict[str, tuple[str, ...]]) -> None:
    if isinstance(stmt, S.For):
        tag = stmt.thread_binding.thread_tag if stmt.thread_binding is not None else ""
        _thread_tags_of_blocks(stmt.body, tags + (tag,), out)
    elif isinstance(stmt, S.SeqStmt):
        for child in stmt.seq:
            _thread_tags_of_blocks(child, tags, out)
    elif isinstance(stmt, S.BlockRealize):
        out[stmt.block.name_hint] = tags
        _thread_tags_of_blocks(stmt.block.body, tags, out)


# ---------------------------------------------------------------- defaults by target kind


def test_a_cuda_target_before_sm_75_selects_tvms_gpu_rules_postprocs_and_mutators() -> None:
    generator = _context(_workload("matmul"), Target("cuda -arch=sm_70")).space_generator
    assert [type(r) for r in generator.sch_rules] == [ApplyCustomRule, MultiLevelTilingGPU, InlineConstantScalars,
                                                      AutoInline, CrossThreadReduction, ParallelizeVectorizeUnroll,
                                                      AutoBind]
    tiling = generator.sch_rules[1]
    assert (tiling.structure, tiling.tile_binds, tiling.vector_load_lens) == \
        ("SSSRRSRS", ("blockIdx.x", "vthread.x", "threadIdx.x"), (1, 2, 3, 4, 8, 16))
    assert (tiling.reuse_read.scope, tiling.reuse_write.scope) == ("shared", "local")
    inline = generator.sch_rules[3]
    assert inline.into_producer and not inline.disallow_if_then_else and not inline.disallow_op
    assert generator.sch_rules[4].thread_extents == (4, 8, 16, 32, 64, 128, 256, 512)
    unroll = generator.sch_rules[5]
    assert (unroll.max_jobs_per_core, unroll.max_vectorize_extent) == (-1, -1)
    assert unroll.unroll_max_steps == (0, 16, 32, 64, 128, 256, 512, 1024)
    assert [type(p) for p in generator.postprocs] == [DisallowDynamicLoop, RewriteCooperativeFetch,
                                                      RewriteUnboundBlock, RewriteParallelVectorizeUnroll,
                                                      RewriteReductionBlock, VerifyGPUCode]
    assert [(type(m), p) for m, p in generator.mutator_probs.items()] == \
        [(MutateTileSize, 0.9), (MutateUnroll, 0.08), (MutateThreadBinding, 0.02)]


@pytest.mark.parametrize("target, kind", [("cuda -arch=sm_75", "cuda-tensorcore"), ("cuda -arch=sm_90", "cuda-tensorcore"),
                                          ("cuda -arch=sm_70", "cuda"), ("cuda", "cuda"), ("llvm", "llvm")])
def test_tvm_picks_the_tensor_core_set_from_sm_75_on(target: str, kind: str) -> None:
    """TVM's GetRuleKindFromTarget: a CUDA target of sm_75 or newer gets DefaultCUDATensorCore
    (the tensor-core tiling first, then the GPU rules; RewriteTensorize last)."""
    from msdb.tuner.space.postprocs.rewrite_tensorize import RewriteTensorize
    from msdb.tuner.space.rules.multi_level_tiling_tensor_core import MultiLevelTilingTensorCore

    context = _context(_workload("matmul"), Target(target))
    assert context.space_kind() == kind
    rules, postprocs = context.space_generator.sch_rules, context.space_generator.postprocs
    assert (type(rules[1]) is MultiLevelTilingTensorCore) == (kind == "cuda-tensorcore")
    assert (type(postprocs[-1]) is RewriteTensorize) == (kind == "cuda-tensorcore")


def test_an_llvm_target_and_explicit_choices_keep_theirs() -> None:
    cpu = _context(_workload("matmul"), Target({"kind": "llvm", "num-cores": 1})).space_generator
    assert MultiLevelTiling in [type(r) for r in cpu.sch_rules]
    assert not any(isinstance(r, (MultiLevelTilingGPU, AutoBind)) for r in cpu.sch_rules)
    explicit = _context(_workload("matmul"), sch_rules="llvm", postprocs=[DisallowDynamicLoop()],
                        mutator_probs={}).space_generator
    assert [type(r) for r in explicit.sch_rules] == [type(r) for r in cpu.sch_rules]
    assert [type(p) for p in explicit.postprocs] == [DisallowDynamicLoop] and explicit.mutator_probs == {}


# ---------------------------------------------------------------- design spaces


@pytest.mark.parametrize("name", WORKLOADS)
def test_the_design_spaces_are_tvms_instruction_for_instruction(name: str) -> None:
    """Same instructions, inputs and attributes as TVM's design spaces for the workload; the
    decisions are msdb's own draws, one per sampling instruction, and replay."""
    _, spaces = _spaces(name)
    tvm_spaces = [Trace.from_json(s["trace"]) for s in load(name)["design_spaces"]]
    assert len(spaces) == len(tvm_spaces)
    for i, (ours, theirs) in enumerate(zip(spaces, tvm_spaces)):
        assert _insts_json(ours.trace) == _insts_json(theirs), f"{name} design space {i}"
        samples = [inst for inst in ours.trace.insts if inst.kind.startswith("Sample")]
        assert len(ours.trace.decisions) == len(theirs.decisions) == len(samples)
        replayed = Schedule(_workload(name))
        Trace.from_json(ours.trace.as_json()).apply_to_schedule(replayed)
        assert structural_equal(replayed.mod, ours.mod)


def test_cross_thread_reduction_reuses_the_consumers_thread_count() -> None:
    """Softmax's last design space reduces both the row max and the row sum across threads,
    inside the normalization's loop: every threadIdx.x split uses the expsum's sampled count
    (TVM's GetThreadIdxExtentFromTrace), and both results live in shared memory."""
    _, spaces = _spaces("softmax")
    trace = spaces[-1].trace
    thread_splits = [inst.inputs[2] for inst in trace.insts if inst.kind == "Split" and inst.inputs[1] is None]
    first_sample = next(inst for inst in trace.insts if inst.kind == "SampleCategorical")
    assert len(thread_splits) == 3 and all(f is first_sample.outputs[0] for f in thread_splits)
    scopes = {b.name: b.scope for b in spaces[-1].mod.functions["main"].body.block.alloc_buffers}
    assert scopes["T_softmax_maxelem"] == scopes["T_softmax_expsum"] == "shared"


# ---------------------------------------------------------------- post-processors


@pytest.mark.parametrize("name", WORKLOADS)
def test_post_processing_tvms_candidates_gives_tvms_traces(name: str) -> None:
    """TVM's measure candidates, replayed up to EnterPostproc and post-processed by msdb, end
    with TVM's post-processed trace instruction for instruction (cooperative fetch splits,
    unroll pragmas, reduction inits)."""
    context, _ = _spaces(name)
    post_processing_gives_tvms_traces(context, _workload(name), name, load(name)["candidates"])


def post_processing_gives_tvms_traces(context: TuneContext, mod: IRModule, name: str,
                                      items: list[dict[str, Any]]) -> list[Schedule]:
    """Each of TVM's post-processed candidates, replayed up to EnterPostproc and post-processed
    by msdb, is accepted and ends with TVM's trace; the schedules, for more checks."""
    out = []
    for i, item in enumerate(items):
        theirs = Trace.from_json(item["trace"])
        sch, verdict = _post_process(context, mod, theirs)
        assert verdict == "accepted", f"{name} candidate {i}"
        assert json.loads(dumps(sch.trace.as_json())) == json.loads(dumps(theirs.normalized().as_json())), \
            f"{name} candidate {i}"
        out.append(sch)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("name", WORKLOADS)
def test_sampled_candidates_replay_and_run_every_block_on_bound_threads(name: str) -> None:
    context, spaces = _spaces(name)
    mod = _workload(name)
    rng = random.Random(3)
    accepted: list[Schedule] = []
    for attempt in range(120):
        space = spaces[attempt % len(spaces)]
        sch, verdict = _post_process(context, mod, Trace(space.trace.insts), seed=rng.randrange(1 << 30))
        if verdict == "accepted":
            accepted.append(sch)
        if len(accepted) == 3:
            break
    assert len(accepted) == 3
    for sch in accepted:
        blocks: dict[str, tuple[str, ...]] = {}
        _thread_tags_of_blocks(sch.mod.functions["main"].body, (), blocks)
        for block, tags in blocks.items():
            if block != "root":
                assert any(t.startswith("blockIdx.") for t in tags) and any(t.startswith("threadIdx.") for t in tags), \
                    f"{name}: block {block} is not bound to threads"
        hints = [key for node in blocks for key in sch.get(sch.get_block(node)).annotations
                 if key in ("meta_schedule.cooperative_fetch", "meta_schedule.unroll_explicit")]
        assert hints == []
        replayed = Schedule(mod)
        Trace.from_json(json.loads(dumps(sch.trace.as_json()))).apply_to_schedule(replayed, remove_postproc=False)
        assert structural_equal(replayed.mod, sch.mod)


def test_rewrite_unbound_block_binds_a_block_no_rule_bound() -> None:
    """A block left on the host (here: no AutoBind) gets blockIdx.x x threadIdx.x with the most
    threads its loop allows, through traced instructions."""
    mod = _workload("softmax")
    context = _context(mod, sch_rules=[], postprocs="cuda")
    sch = Schedule(mod)
    sch.enter_postproc()
    assert RewriteUnboundBlock(max_threadblocks=256).apply(sch)
    blocks: dict[str, tuple[str, ...]] = {}
    _thread_tags_of_blocks(sch.mod.functions["main"].body, (), blocks)
    assert blocks["T_softmax_norm"] == ("blockIdx.x", "threadIdx.x")
    assert blocks["T_softmax_maxelem"] == ("blockIdx.x", "threadIdx.x", "")
    text = str(sch.trace)
    assert 'sch.split(loop=l9, factors=[None, 1024]' in text and "sch.get_sblock(name=\"T_softmax_norm\"" in text
    assert all(p.apply(sch) for p in context.space_generator.postprocs)


@pytest.mark.parametrize("decisions,verdict", [
    # 16 x 4 = 64 threads, 20 KiB of shared memory: runs
    ([[4, 1, 16, 4, 4], [1, 2, 4, 8, 16], [256, 2, 2], 3, 3, 7], "accepted"),
    # 64 x 32 = 2048 threads: more than MultiLevelTiling's bound (1024)
    ([[1, 1, 64, 16, 1], [1, 1, 32, 32, 1], [256, 2, 2], 3, 3, 0], "VerifyGPUCode"),
    # 2 x 2 = 4 threads: fewer than a warp for a block with 2^20 outputs
    ([[4, 1, 2, 128, 1], [4, 1, 2, 128, 1], [256, 2, 2], 3, 3, 0], "VerifyGPUCode"),
    # 128 x 128 tiles of a 64-deep reduction: 64 KiB of shared memory
    ([[8, 1, 16, 8, 1], [8, 1, 16, 8, 1], [16, 4, 16], 3, 3, 0], "VerifyGPUCode"),
])
def test_verify_gpu_code_rejects_what_the_gpu_cannot_run(decisions: list[Any], verdict: str) -> None:
    context, spaces = _spaces("matmul")
    _, got = _post_process(context, _workload("matmul"), _with_decisions(spaces[0].trace, decisions))
    assert got == verdict


def test_verify_gpu_code_counts_the_pipeline_copies_of_shared_memory() -> None:
    """With a 4-stage cp.async pipeline TVM keeps 3 copies of each shared tile: the 20 KiB
    schedule above needs 60 KiB and is refused (as TVM does), without the pipeline it runs."""
    context, spaces = _spaces("matmul")
    decisions = [[4, 1, 16, 4, 4], [1, 2, 4, 8, 16], [256, 2, 2], 3, 3, 7]
    assert _post_process(context, _workload("matmul"), _with_decisions(spaces[0].trace, decisions))[1] == "accepted"
    assert _post_process(context, _workload("matmul"), _with_decisions(spaces[1].trace, decisions))[1] == \
        "VerifyGPUCode"


def test_a_block_without_a_spatial_loop_is_left_unbound_and_its_candidates_rejected() -> None:
    """A reduction to a scalar has no spatial loop to bind to blockIdx: TVM adds a unit loop
    (AddUnitLoop), which msdb's Schedule lacks, so AutoBind leaves the block (its spaces still
    generate, the cross-thread variant included) and RewriteUnboundBlock rejects the candidate."""
    from msdb.ir import te

    a = te.placeholder((4096,), "float32", name="A")
    k = te.reduce_axis((0, 4096), name="k")
    mod = IRModule.from_func(te.create_prim_func([a, te.compute((), lambda: te.sum(a[k], axis=k), name="S")]))
    context = _context(mod)
    spaces = context.generate_design_space()
    assert [sum(inst.kind == "Bind" for inst in s.trace.insts) for s in spaces] == [0, 1]
    assert {_post_process(context, mod, Trace(s.trace.insts))[1] for s in spaces} == {"RewriteUnboundBlock"}


# ---------------------------------------------------------------- mutators and custom rules


def test_mutate_thread_binding_redraws_one_sampled_thread_count() -> None:
    context, spaces = _spaces("softmax")
    mutator = MutateThreadBinding()
    mutator._initialize_with_tune_context(context)
    trace = spaces[0].trace
    mutated = mutator.apply(trace, random.Random(0))
    assert mutated is not None
    changed = [inst for inst in trace.insts if inst.kind == "SampleCategorical"
               and mutated.get_decision(inst) != trace.get_decision(inst)]
    assert len(changed) == 1 and changed[0].attrs[0] in ([32, 64, 128, 256], [32, 64, 128, 256, 512, 1024])
    _, matmul_spaces = _spaces("matmul")
    assert mutator.apply(matmul_spaces[0].trace, random.Random(0)) is None  # no sampled thread split there


CUSTOM = '''
@T.prim_func
def main(A: T.Buffer((4096,), "float32"), B: T.Buffer((4096,), "float32")):
    for i in range(4096):
        with T.block("B"):
            vi = T.axis.spatial(4096, i)
            T.block_attr({"schedule_rule": "halve"})
            B[vi] = A[vi] * T.float32(0.5)
'''


def test_apply_custom_rule_runs_the_registered_rule_and_drops_unknown_ones(caplog: Any) -> None:
    mod = from_script(CUSTOM)

    def halve(sch: Schedule, block: Any) -> list[Schedule]:
        (loop,) = sch.get_loops(block)
        outer, inner = sch.split(loop, [None, 128])
        sch.bind(outer, "blockIdx.x")
        sch.bind(inner, "threadIdx.x")
        return [sch]

    register_custom_rule("halve", "cuda", halve)
    try:
        (space,) = _context(mod).generate_design_space()
    finally:
        register_custom_rule("halve", "cuda", None)
    assert [inst.kind for inst in space.trace.insts] == ["GetSBlock", "GetSBlock", "GetLoops", "Split", "Bind", "Bind"]
    with caplog.at_level(logging.WARNING):
        (default,) = _context(mod).generate_design_space()
    assert "Unknown schedule rule 'halve'" in caplog.text
    assert [inst.kind for inst in default.trace.insts][2:] == ["Unannotate", "GetLoops", "Fuse", "SampleCategorical",
                                                              "Split", "Bind", "Bind"]  # AutoBind's
    assert "schedule_rule" not in default.get(default.get_block("B")).annotations


# ---------------------------------------------------------------- tuning


def _matmul(n: int, dtype: str, acc: str = "float32") -> IRModule:
    """C = A @ B over (n, n), accumulated in `acc`."""
    from msdb.ir import te

    a, b = te.placeholder((n, n), dtype, name="A"), te.placeholder((n, n), dtype, name="B")
    k = te.reduce_axis((0, n), name="k")
    c = te.compute((n, n), lambda i, j: te.sum(a[i, k].astype(acc) * b[k, j].astype(acc), axis=k), name="C")
    return IRModule.from_func(te.create_prim_func([a, b, c]))


def _tune_on_sm_80(mod: IRModule, builder: Any) -> list[Any]:
    """Four replay-trace trials of `mod` for sm_80 (no GPU: each run stored as failed); the records."""
    from msdb.database import MemoryDatabase
    from msdb.tuner.tune import tune_tir

    db = MemoryDatabase()
    result = tune_tir(mod, "cuda -arch=sm_80", db, max_trials_global=4, num_trials_per_iter=4, strategy="replay-trace",
                      cost_model="random", seed=0, builder=builder, check_best=False, pretrain=False)
    records = db.get_all_tuning_records()
    assert result.tasks[0].trials == 4 and len(records) == 4
    assert all(r.target is not None and r.target.kind == "cuda" and list(r.run_secs) == [1e10] for r in records)
    return records


@pytest.mark.slow
def test_tune_tir_on_a_cuda_target_builds_cubins_and_records_failed_runs_without_a_gpu(tmp_path: Path) -> None:
    """No GPU here: candidates compile to cubins through NVRTC and ptxas, and each measurement
    is stored as a failed run ([1e10]) under the cuda target."""
    from msdb.tuner.measure.builder import BuilderInput, LocalBuilder

    mod = _matmul(128, "float32")
    with LocalBuilder(max_workers=1, artifact_dir=str(tmp_path)) as builder:
        records = _tune_on_sm_80(mod, builder)
        sch = Schedule(mod)
        records[0].trace.apply_to_schedule(sch, remove_postproc=False)
        (built,) = builder.build([BuilderInput(sch.mod, CUDA)])
    assert built.ok and built.artifact_path is not None and built.artifact_path.endswith(".cubin")
    assert Path(built.artifact_path).stat().st_size > 0


@pytest.mark.slow
@pytest.mark.parametrize("dtype, acc, sync", [("float16", "float32", "wmma_sync_16x16x16_f16f16f32"),
                                              ("int8", "int32", "wmma_sync_16x16x16_s8s8s32")])
def test_tune_tir_of_a_matmul_on_sm_80_tunes_tensor_core_kernels(tmp_path: Path, dtype: str, acc: str,
                                                                 sync: str) -> None:
    """The default kind of an sm_80 target is "cuda-tensorcore": a search over an fp16 or int8
    matmul samples the tensor-core spaces, post-processes them into wmma calls (RewriteTensorize)
    and builds the candidates into cubins; without a GPU each run is stored as failed."""
    from msdb.ir import to_script
    from msdb.tuner.codegen.cuda import build_cuda
    from msdb.tuner.measure.builder import LocalBuilder

    mod = _matmul(256, dtype, acc)
    with LocalBuilder(max_workers=1, artifact_dir=str(tmp_path)) as builder:
        records = _tune_on_sm_80(mod, builder)
    for record in records:
        kinds = [inst.kind for inst in record.trace.insts]
        assert "ReIndex" in kinds and "TransformLayout" in kinds
        assert any(inst.kind == "Tensorize" and str(inst.attrs[0]).startswith(sync) for inst in record.trace.insts)
        sch = Schedule(mod)
        record.trace.apply_to_schedule(sch, remove_postproc=False)
        assert "tvm_mma_sync" in to_script(sch.mod)
    built = build_cuda(sch.mod, "cuda -arch=sm_80")
    assert built.cubin and all(kernel["registers"] > 0 for kernel in built.kernels)
