"""Schedule rules and space generators: the design spaces msdb generates are TVM's (every trace
TVM 0.27 tuned for the fixtures' workloads has the shape of one of msdb's design spaces), and
each rule does what TVM's does on the blocks it is made for."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from msdb.database import JSONDatabase
from msdb.hashing import structural_hash
from msdb.ir import zoo
from msdb.ir.function import IRModule
from msdb.records.target import Target
from msdb.schedule import Schedule
from msdb.schedule.rv import BlockRV
from msdb.schedule.trace import Trace
from msdb.tuner.context import TuneContext
from msdb.kinds import UnknownKind
from msdb.tuner.space.generators import PostOrderApply, ScheduleFn, SpaceGenerator
from msdb.tuner.space.rules import (AddRFactor, AutoInline, MultiLevelTiling, ParallelizeVectorizeUnroll,
                                    RandomComputeLocation, ReuseConfig, ScheduleRule)

FIXTURES = Path(__file__).resolve().parents[2] / "data" / "fixtures" / "tvm-0.27"
CPU = Target("llvm -num-cores=1")


def spaces(mod: IRModule, rules: object = "llvm", target: Target = CPU, seed: int = 0) -> list[Schedule]:
    generator = PostOrderApply(sch_rules=rules, postprocs=[], mutator_probs={})  # type: ignore[arg-type]
    return TuneContext(mod=mod, target=target, space_generator=generator, rand_state=seed).generate_design_space()


def kinds(sch: Schedule) -> list[str]:
    return [inst.kind for inst in sch.trace.insts]


def shape(trace: Trace) -> str:
    """A trace's instructions without decisions, the parallel extent masked (MutateParallel
    changes it in TVM's tuned traces)."""
    insts, _ = trace.simplified(remove_postproc=True).as_json()
    for inst in insts:
        if inst[0] == "Annotate" and inst[2] == ["meta_schedule.parallel"]:
            inst[1][1] = "P"
    return json.dumps(insts)


@pytest.mark.parametrize("team", ["team_a", "team_b", "team_c"])
def test_every_trace_tvm_tuned_is_one_of_msdbs_design_spaces(team: str) -> None:
    by_workload: dict[str, list] = {}
    for record in JSONDatabase(work_dir=FIXTURES / team, allow_missing=False).get_all_tuning_records():
        by_workload.setdefault(structural_hash(record.workload.mod), []).append(record)
    assert len(by_workload) == 2
    for records in by_workload.values():
        ours = [shape(s.trace) for s in spaces(records[0].workload.mod)]
        theirs = {shape(r.trace) for r in records}
        assert len(ours) == 3  # no cache, write cache after tile level 1, after level 2
        assert theirs <= set(ours), f"{records[0].workload.mod.main.name}: TVM's traces are not msdb's spaces"


def test_multi_level_tiling_splits_ssrsrs_and_adds_the_write_cache_variants() -> None:
    mod = zoo.build("GMM", 1, 32, 32, 32)
    result = spaces(mod, rules=[MultiLevelTiling()])
    assert len(result) == 3
    for sch in result:
        tiles = [i for i in sch.trace.insts if i.kind == "SamplePerfectTile"]
        assert [i.attrs[0] for i in tiles] == [4, 4, 4, 2]  # b, i, j spatial; k reduction
        assert all(sch.trace.get_decision(i)[-1] <= 64 for i in tiles)
        assert sch.get(sch.get_block("Z")).annotations["meta_schedule.tiling_structure"] == "SSRSRS"
    assert sorted(kinds(s).count("CacheWrite") for s in result) == [0, 1, 1]
    cached = [s for s in result if "CacheWrite" in kinds(s)]
    locations = {s.trace.insts[kinds(s).index("ReverseComputeAt")].inputs[1] for s in cached}
    assert len(locations) == 2


def test_multi_level_tiling_leaves_blocks_without_reuse_alone() -> None:
    mod = zoo.build("relu0", 1, 64)  # spatial: no reduction, nothing to tile
    assert [kinds(s) for s in spaces(mod, rules=[MultiLevelTiling()])] == [["GetSBlock", "GetSBlock"]]
    with pytest.raises(ValueError, match="structure"):
        MultiLevelTiling("SXR")


def test_multi_level_tiling_must_reuse_honours_the_block_annotation() -> None:
    mod = zoo.build("GMM", 1, 16, 16, 16)
    sch = Schedule(mod)
    sch.annotate(sch.get_block("Z"), "s_tir.meta_schedule.write_cache_level", [2])
    result = spaces(sch.mod, rules=[MultiLevelTiling(reuse_write=ReuseConfig("may", (1, 2)))])
    assert len(result) == 1 and "CacheWrite" in kinds(result[0])


def test_auto_inline_inlines_elementwise_producers_and_keeps_padding() -> None:
    mod = zoo.build("matmul_bias_relu", 16, 16, 16)
    (sch,) = spaces(mod, rules=[AutoInline()])
    assert kinds(sch).count("ComputeInline") == 1  # the bias add goes into the relu
    conv = zoo.build("C2D", 1, 8, 8, 4, 4, 3, 1, 1)
    (sch,) = spaces(conv, rules=[AutoInline()])
    assert "ComputeInline" not in kinds(sch)  # the padding has an if_then_else: TVM keeps it
    sch.get_block("PadInput")


def test_add_rfactor_on_a_long_reduction_gives_rfactor_variants_and_the_original() -> None:
    mod = zoo.build("NRM", 1, 256, 256)
    result = spaces(mod, rules=[AddRFactor()])
    assert sorted(kinds(s).count("RFactor") for s in result) == [0, 1, 1]  # PostOrderApply pops variants last first
    for sch in (s for s in result if "RFactor" in kinds(s)):
        assert sch.get(sch.get_block("C")).annotations["meta_schedule.random_compute_producer"] == 1
    gmm = zoo.build("GMM", 1, 128, 128, 128)  # enough spatial parallelism: no rfactor
    assert all("RFactor" not in kinds(s) for s in spaces(gmm, rules=[AddRFactor()]))


def test_random_compute_location_samples_where_the_padding_goes() -> None:
    conv = zoo.build("C2D", 1, 8, 8, 4, 4, 3, 1, 1)
    (sch,) = spaces(conv, rules=[RandomComputeLocation()])
    assert kinds(sch)[-2:] == ["SampleComputeLocation", "ComputeAt"]
    locations = {sch.trace.get_decision(sch.trace.insts[-2])
                 for sch in (spaces(conv, rules=[RandomComputeLocation()], seed=s)[0] for s in range(12))}
    assert len(locations) > 1


def test_parallelize_vectorize_unroll_annotates_the_root_only() -> None:
    gmm = zoo.build("GMM", 1, 16, 16, 16)
    (sch,) = spaces(gmm, rules=[ParallelizeVectorizeUnroll()], target=Target("llvm -num-cores=4"))
    root = sch.get(sch.get_block("root"))
    assert root.annotations["meta_schedule.parallel"] == 64
    assert root.annotations["meta_schedule.vectorize"] == 64
    assert root.annotations["meta_schedule.unroll_explicit"] in (0, 16, 64, 512)
    (spatial,) = spaces(zoo.build("relu0", 1, 64), rules=[ParallelizeVectorizeUnroll()])
    assert "SampleCategorical" not in kinds(spatial)  # nothing to unroll in an all-spatial function


def test_default_spaces_replay_from_their_traces_and_are_seeded() -> None:
    conv = zoo.build("C2D", 1, 8, 8, 4, 4, 3, 1, 1)
    first = spaces(conv, seed=3)
    again = spaces(conv, seed=3)
    assert [s.trace.as_json() for s in first] == [s.trace.as_json() for s in again]
    for sch in first:
        replayed = Schedule(conv)
        sch.trace.apply_to_schedule(replayed)
        assert structural_hash(replayed.mod) == structural_hash(sch.mod)


def test_a_users_rule_plugs_into_post_order_apply() -> None:
    class SplitEveryInnermostLoop(ScheduleRule):
        def apply(self, sch: Schedule, block: BlockRV) -> list[Schedule]:
            loops = sch.get_loops(block)
            if not loops:
                return [sch]
            twin = sch.copy()
            twin.split(loops[-1], [None, 2])
            return [sch, twin]

    result = spaces(zoo.build("GMM", 1, 16, 16, 16), rules=[SplitEveryInnermostLoop()])
    assert sorted(kinds(s).count("Split") for s in result) == [0, 1]
    assert isinstance(SpaceGenerator.create("post-order-apply"), PostOrderApply)


def test_schedule_fn_and_unknown_kinds() -> None:
    def tile(sch: Schedule) -> None:
        loops = sch.get_loops(sch.get_block("Z"))
        sch.split(loops[-1], sch.sample_perfect_tile(loops[-1], n=2))

    generator = ScheduleFn(tile)
    context = TuneContext(mod=zoo.build("GMM", 1, 16, 16, 16), target=CPU, space_generator=generator, rand_state=0)
    (space,) = context.generate_design_space()
    assert kinds(space) == ["GetSBlock", "GetLoops", "SamplePerfectTile", "Split"]
    with pytest.raises(UnknownKind, match="unknown space generator 'nope'; known: post-order-apply, schedule-fn"):
        SpaceGenerator.create("nope")
    with pytest.raises(UnknownKind, match="schedule-rule set 'hexagon'"):
        ScheduleRule.create("hexagon")
    bad = ScheduleFn(lambda sch: 3)
    bad._initialize_with_tune_context(context)
    with pytest.raises(TypeError, match="expected None, a Schedule or a list"):
        bad.generate_design_space(zoo.build("GMM", 1, 16, 16, 16))
