"""Post-processors: msdb's CPU post-processors rewrite a schedule exactly as TVM 0.27's do.

The key check is against real TVM: every record of the TVM 0.27 tuning logs in the fixtures
stores the full trace TVM ran, post-processing included. Replaying the trace without its
post-processing and running msdb's post-processors must give the module that replaying TVM's
post-processing instructions gives, and must record the very same instructions (the trace's
JSON is identical, so TVM replays msdb's traces)."""

from __future__ import annotations

from pathlib import Path

import pytest

from msdb.database import JSONDatabase
from msdb.hashing import structural_equal, structural_hash
from msdb.ir import expr as E
from msdb.ir import stmt as S
from msdb.ir import te, zoo
from msdb.ir.function import IRModule
from msdb.schedule import Schedule
from msdb.schedule.trace import Trace
from msdb.kinds import UnknownKind
from msdb.tuner.space.postprocs import (DisallowDynamicLoop, Postproc, RewriteParallelVectorizeUnroll,
                                        RewriteReductionBlock, create)
from msdb.tuner.space.postprocs.loop_plan import NONE, LoopPlan, index_stride, plan_loops
from msdb.tuner.space.postprocs.rewrite_parallel_vectorize_unroll import RootHints, parse_hints
from msdb.tuner.space.postprocs.rewrite_reduction_block import decompose_point, reduction_blocks

FIXTURES = Path(__file__).resolve().parents[2] / "data" / "fixtures" / "tvm-0.27"
TEAMS = ["team_a", "team_b", "team_c"]


def postprocessed(mod: IRModule, trace: Trace, postprocs: list[Postproc] | None = None) -> tuple[Schedule, list[bool]]:
    """`trace` replayed without its post-processing, then post-processed by msdb."""
    sch = Schedule(mod, seed=0)
    trace.apply_to_schedule(sch, remove_postproc=True)
    sch.enter_postproc()
    return sch, [p.apply(sch) for p in (postprocs if postprocs is not None else create("llvm"))]


def kinds_after_postproc(trace: Trace) -> list[str]:
    kinds = [inst.kind for inst in trace.insts]
    return kinds[kinds.index("EnterPostproc") + 1:]


def hinted(mod: IRModule, **hints: int) -> Schedule:
    """A schedule whose root block carries the ParallelizeVectorizeUnroll rule's hints."""
    sch = Schedule(mod, seed=0)
    root = sch.get_block("root")
    for key, value in hints.items():
        sch.annotate(root, f"meta_schedule.{key}", value)
    sch.enter_postproc()
    return sch


# ---------------------------------------------------------------- parity with TVM 0.27


@pytest.mark.slow
@pytest.mark.parametrize("team", TEAMS)
def test_every_fixture_record_postprocesses_exactly_as_tvm_did(team: str) -> None:
    records = JSONDatabase(work_dir=FIXTURES / team, allow_missing=False).get_all_tuning_records()
    assert len(records) == 128
    for n, record in enumerate(records):
        assert record.target.config["kind"] == "llvm"
        mod = record.workload.mod
        expected = Schedule(mod, seed=0)
        record.trace.apply_to_schedule(expected, remove_postproc=False)
        sch, results = postprocessed(mod, record.trace)
        assert results == [True, True, True], f"{team} record {n}"
        assert structural_equal(sch.mod, expected.mod), f"{team} record {n}: the post-processed modules differ"
        assert structural_hash(sch.mod) == structural_hash(expected.mod)
        assert kinds_after_postproc(sch.trace) == kinds_after_postproc(record.trace.normalized())
        # the same instructions with the same inputs and attributes, RV for RV: TVM's own JSON
        assert sch.trace.as_json() == record.trace.normalized().as_json(), f"{team} record {n}"


def test_the_fixtures_exercise_every_rewrite() -> None:
    """The parity test covers each path of RewriteParallelVectorizeUnroll: fuse-split-parallel-
    vectorize, parallel alone, vectorize alone, the unroll pragmas, and decomposition."""
    seen: set[str] = set()
    for team in TEAMS:
        for record in JSONDatabase(work_dir=FIXTURES / team, allow_missing=False).get_all_tuning_records():
            post = record.trace.normalized().insts
            post = post[[i.kind for i in post].index("EnterPostproc"):]
            seen.update(i.kind for i in post)
            seen.update(i.attrs[0] for i in post if i.kind == "Annotate")
    assert {"Split", "Parallel", "Vectorize", "Fuse", "DecomposeReduction", "Unannotate",
            "pragma_auto_unroll_max_step", "pragma_unroll_explicit"} <= seen


# ---------------------------------------------------------------- the factory


def test_create_llvm_gives_tvms_cpu_postprocs_in_order() -> None:
    postprocs = Postproc.create("llvm")
    assert [type(p) for p in postprocs] == [DisallowDynamicLoop, RewriteParallelVectorizeUnroll,
                                           RewriteReductionBlock]
    assert [type(p) for p in create()] == [type(p) for p in postprocs]
    assert repr(postprocs[0]) == "DisallowDynamicLoop()"
    with pytest.raises(UnknownKind, match="hexagon"):
        Postproc.create("hexagon")  # a TVM target kind msdb has no defaults for


def test_clone_drops_the_context() -> None:
    postproc = RewriteReductionBlock()
    postproc.context = object()  # type: ignore[assignment]
    twin = postproc.clone()
    assert type(twin) is RewriteReductionBlock and twin.context is None and postproc.context is not None


# ---------------------------------------------------------------- DisallowDynamicLoop


def test_disallow_dynamic_loop_rejects_a_symbolic_extent() -> None:
    n = te.var("n")
    a = te.placeholder((n,), name="A")
    b = te.compute((n,), lambda i: a[i] * 2.0, name="B")
    dynamic = IRModule.from_func(te.create_prim_func([a, b]))
    assert DisallowDynamicLoop().apply(Schedule(dynamic)) is False
    assert DisallowDynamicLoop().apply(Schedule(zoo.build("matmul", 16, 16, 16))) is True


def test_disallow_dynamic_loop_looks_at_the_extent_node_not_its_value() -> None:
    """As in TVM: `8 + 8` is not an integer immediate, even though it folds to one."""
    sch = Schedule(zoo.build("relu0", 1, 16))
    body = sch.mod.main.body
    loop = next(node for node in _walk(body) if isinstance(node, S.For))
    odd = S.For(loop.loop_var, loop.min, E.Add(E.IntImm(loop.extent.dtype, 0), loop.extent), loop.kind, loop.body)
    sch.state.replace("main", loop, odd)
    assert DisallowDynamicLoop().apply(sch) is False


def _walk(stmt: S.Stmt) -> list[S.Stmt]:
    from msdb.schedule.analysis import statements_under

    return list(statements_under(stmt, inits=True))


# ---------------------------------------------------------------- RewriteParallelVectorizeUnroll


def test_index_stride_follows_tvms_stride_extractor() -> None:
    i, j = E.Var("i"), E.Var("j")
    four, one = E.IntImm("int32", 4), E.IntImm("int32", 1)
    assert index_stride(E.Add(E.Mul(i, four), j), i) == 4
    assert index_stride(E.Add(E.Mul(i, four), j), j) == 1
    assert index_stride(E.Mul(four, E.Add(i, j)), j) == 4
    assert index_stride(E.Add(E.Mul(i, four), i), i) == 1  # the smaller of the two sides
    assert index_stride(E.Sub(i, one), i) == 0  # a subtraction hides the variable, as in TVM
    assert index_stride(E.FloorDiv(i, four), i) == 0
    assert index_stride(j, i) == 0


def test_an_elementwise_block_is_fused_split_parallelized_and_vectorized() -> None:
    sch = hinted(zoo.build("relu0", 1, 128), parallel=16, vectorize=64)
    assert RewriteParallelVectorizeUnroll().apply(sch) is True
    assert kinds_after_postproc(sch.trace) == ["GetSBlock", "Unannotate", "Unannotate", "GetChildBlocks", "GetLoops",
                                               "Fuse", "Split", "Parallel", "Vectorize"]
    outer = sch.mod.main.body.block.body
    assert isinstance(outer, S.For) and outer.kind == S.ForKind.PARALLEL and outer.extent.value == 2
    assert isinstance(outer.body, S.For) and outer.body.kind == S.ForKind.VECTORIZED and outer.body.extent.value == 64
    assert sch.mod.main.body.block.annotations == {}


def test_a_reduction_gets_parallel_outer_loops_and_the_unroll_pragmas() -> None:
    sch = hinted(zoo.build("matmul", 16, 16, 16), parallel=16, vectorize=64, unroll_explicit=64)
    assert RewriteParallelVectorizeUnroll().apply(sch) is True
    assert kinds_after_postproc(sch.trace) == ["GetSBlock", "Unannotate", "Unannotate", "Unannotate",
                                               "GetChildBlocks", "GetLoops", "Fuse", "Parallel", "Annotate",
                                               "Annotate"]
    fused = sch.mod.main.body.block.body
    assert isinstance(fused, S.For) and fused.kind == S.ForKind.PARALLEL and fused.extent.value == 256
    assert dict(fused.annotations) == {"pragma_auto_unroll_max_step": 64, "pragma_unroll_explicit": 1}
    # then RewriteReductionBlock hoists the init out of the reduction loop
    assert RewriteReductionBlock().apply(sch) is True
    assert kinds_after_postproc(sch.trace)[-3:] == ["GetSBlock", "GetLoops", "DecomposeReduction"]
    assert {"C_init", "C_update"} <= set(sch.state.index("main").blocks)


def test_an_implicit_unroll_step_and_a_zero_step() -> None:
    sch = hinted(zoo.build("matmul", 16, 16, 16), unroll_implicit=16)
    assert RewriteParallelVectorizeUnroll().apply(sch) is True
    outer = sch.mod.main.body.block.body
    assert dict(outer.annotations) == {"pragma_auto_unroll_max_step": 16, "pragma_unroll_explicit": 0}
    sch = hinted(zoo.build("matmul", 16, 16, 16), unroll_explicit=0)  # step 0: nothing to unroll
    assert RewriteParallelVectorizeUnroll().apply(sch) is True
    assert "Annotate" not in kinds_after_postproc(sch.trace)


def test_a_spatial_block_is_not_unrolled() -> None:
    sch = hinted(zoo.build("relu0", 1, 128), unroll_explicit=512)
    assert RewriteParallelVectorizeUnroll().apply(sch) is True
    assert kinds_after_postproc(sch.trace) == ["GetSBlock", "Unannotate", "GetChildBlocks", "GetLoops"]


def test_without_hints_nothing_is_recorded() -> None:
    sch = Schedule(zoo.build("matmul", 16, 16, 16))
    assert RewriteParallelVectorizeUnroll().apply(sch) is True
    assert len(sch.trace) == 0


def test_contradictory_or_unreadable_hints_reject_the_candidate() -> None:
    both = hinted(zoo.build("matmul", 16, 16, 16), unroll_explicit=16, unroll_implicit=16)
    assert RewriteParallelVectorizeUnroll().apply(both) is False
    sch = Schedule(zoo.build("matmul", 16, 16, 16))
    sch.annotate(sch.get_block("root"), "meta_schedule.parallel", "many")
    assert RewriteParallelVectorizeUnroll().apply(sch) is False  # TVM would loop forever here


def test_parse_hints() -> None:
    assert parse_hints({"other": 1}) is None
    assert parse_hints({"meta_schedule.vectorize": 64, "meta_schedule.parallel": E.IntImm("int32", 16)}) == \
        RootHints(max_parallel_extent=16, max_vectorize_extent=64)
    assert parse_hints({"meta_schedule.parallel": "x"}) == RootHints()


def test_plan_fuses_everything_when_every_loop_allows_it() -> None:
    sch = Schedule(zoo.build("relu0", 1, 128))
    block = sch.get_block("Y")
    _, j = sch.get_loops(block)
    sch.split(j, [None, 8])
    loops = [sch.get(rv) for rv in sch.get_loops(block)]
    realize = sch.state.realize("main", "Y")
    # 1 x 16 x 8, contiguous: all three fused whatever the vector limit (TVM then splits it off)
    assert plan_loops(realize, loops, 16, 64) == LoopPlan(3, 3)
    assert plan_loops(realize, loops, 16, 4) == LoopPlan(3, 3)
    # without a parallel hint: the innermost loops whose product stays within the limit
    assert plan_loops(realize, loops, NONE, 64) == LoopPlan(NONE, 1)
    assert plan_loops(realize, loops, NONE, 128) == LoopPlan(NONE, 3)
    assert plan_loops(realize, loops, NONE, NONE) == LoopPlan(NONE, NONE)


def _tiled_conv(tile: int) -> Schedule:
    sch = Schedule(zoo.build("C2D", 1, 14, 14, 16, 16, 3, 1, 1))
    block = sch.get_block("conv2d_nhwc")
    loops = sch.get_loops(block)
    sch.split(loops[2], [None, tile])
    sch.split(loops[4], [None, 4])
    return sch


def test_index_strides_are_remembered_by_shape_and_handed_to_fresh_variables() -> None:
    """A second schedule of the same tiling (fresh loop variables) gets its strides from the
    first one's simplification, over its own variables, equal to simplifying its own indices."""
    from msdb.ir.arith import simplify
    from msdb.ir.functor import substitute
    from msdb.tuner.space.postprocs import loop_plan
    from msdb.tuner.space.postprocs.loop_plan import index_strides

    loop_plan._STRIDES_BY_SHAPE.clear()
    for tile in (7, 7, 2):
        sch = _tiled_conv(tile)
        realize = sch.state.realize("main", "conv2d_nhwc")
        binding = {iv.var: v for iv, v in zip(realize.block.iter_vars, realize.iter_values)}
        for access in (*realize.block.reads, *realize.block.writes):
            for rng in access.region:
                index = substitute(rng.min, binding)
                assert loop_plan._simplified_strides(index) == index_strides(simplify(index))
    assert loop_plan._STRIDES_BY_SHAPE  # the second 7 found the first one's entries


def _reference_iter_type(loop: S.For) -> S.IterType:
    """TVM's GetLoopIterType written plainly: the kinds of iter var whose binding uses the loop."""
    from msdb.ir.functor import free_vars
    from msdb.schedule.analysis import child_block_realizes

    kinds = {iv.iter_type for realize in child_block_realizes(loop.body)
             for iv, value in zip(realize.block.iter_vars, realize.iter_values) if loop.loop_var in free_vars(value)}
    if kinds - {S.IterType.DATA_PAR, S.IterType.COMM_REDUCE} or len(kinds) == 2:
        return S.IterType.OPAQUE
    return S.IterType.COMM_REDUCE if kinds == {S.IterType.COMM_REDUCE} else S.IterType.DATA_PAR


def test_loop_iter_types_of_a_nest_are_each_loops_own() -> None:
    from msdb.schedule.analysis import loop_iter_types

    sch = _tiled_conv(7)
    block = sch.get_block("conv2d_nhwc")
    rvs = sch.get_loops(block)
    sch.fuse(rvs[-2], rvs[-1])  # two reduction loops: still a reduction
    rvs = sch.get_loops(block)
    sch.reorder(rvs[-2], rvs[-3])
    loops = [sch.get(rv) for rv in sch.get_loops(block)]
    types = loop_iter_types(loops)
    assert types == [_reference_iter_type(loop) for loop in loops]
    assert types == [S.IterType.DATA_PAR] * 5 + [S.IterType.COMM_REDUCE] * 3
    # a loop feeding a spatial and a reduction iter var is opaque
    fused = sch.fuse(*sch.get_loops(block)[4:6])  # the last spatial loop and the first reduction
    assert loop_iter_types([sch.get(fused)]) == [S.IterType.OPAQUE]


def test_plan_prefers_vectorizing_when_an_access_is_not_contiguous() -> None:
    a = te.placeholder((32, 4), name="A")
    b = te.compute((4, 32), lambda i, j: a[j, i], name="B")
    sch = Schedule(IRModule.from_func(te.create_prim_func([a, b])))
    loops = [sch.get(rv) for rv in sch.get_loops(sch.get_block("B"))]
    realize = sch.state.realize("main", "B")
    # A[j, i] lets only the innermost loop vectorize; the parallel loops give way to it
    assert plan_loops(realize, loops, 16, 64) == LoopPlan(1, 1)
    sch = hinted(IRModule.from_func(te.create_prim_func([a, b])), parallel=16, vectorize=64)
    assert RewriteParallelVectorizeUnroll().apply(sch) is True
    assert kinds_after_postproc(sch.trace)[-4:] == ["Fuse", "Parallel", "Fuse", "Vectorize"]


# ---------------------------------------------------------------- RewriteReductionBlock


def test_reduction_blocks_and_their_decompose_points() -> None:
    sch = Schedule(zoo.build("matmul", 16, 16, 16))
    assert reduction_blocks(sch.mod) == [("main", "C")]
    assert decompose_point(sch, "main", "C") == 2
    assert reduction_blocks(zoo.build("relu0", 1, 16)) == []


def test_rewrite_reduction_block_runs_to_a_fixed_point() -> None:
    sch = Schedule(zoo.build("matmul", 16, 16, 16))
    assert RewriteReductionBlock().apply(sch) is True
    assert [inst.kind for inst in sch.trace.insts] == ["GetSBlock", "GetLoops", "DecomposeReduction"]
    assert sch.trace.insts[0].attrs == ("C", "main")
    assert reduction_blocks(sch.mod) == []
    assert RewriteReductionBlock().apply(sch) is True
    assert len(sch.trace) == 3
