"""Schedule core: getters, recorded instruction layouts, atomic failure, determinism across
processes, and a MetaSchedule-style multi-level tiling replay."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from msdb.errors import ScheduleError
from msdb.hashing import structural_equal, structural_hash
from msdb.ir import stmt as S
from msdb.schedule import BlockRV, LoopRV, Schedule

from tests.schedule._loop_workloads import (
    CHAIN, MATMUL, assert_same_results, binding_lines, gmm, load, loop_lines,
)

REPO = Path(__file__).resolve().parents[2]


# ---- getters ------------------------------------------------------------------------------


def test_get_block_records_get_sblock_with_the_function_name() -> None:
    sch = Schedule(load(MATMUL))
    block = sch.get_block("C")
    assert isinstance(block, BlockRV)
    assert sch.get(block).name_hint == "C"
    inst = sch.trace.insts[-1]
    assert (inst.kind, inst.inputs, inst.attrs, inst.outputs) == ("GetSBlock", (), ("C", "main"), (block,))
    same = sch.get_sblock("C", func_name="main")
    assert sch.get(same) is sch.get(block)


def test_get_block_of_a_missing_block_fails_cleanly() -> None:
    sch = Schedule(load(MATMUL))
    before = sch.mod
    with pytest.raises(ScheduleError, match="'D'") as info:
        sch.get_block("D")
    assert "C" in str(info.value)  # lists the blocks there are
    with pytest.raises(ScheduleError, match="'nope'"):
        sch.get_block("C", func_name="nope")
    assert sch.mod is before and structural_equal(sch.mod, before)
    assert sch.trace.insts == ()
    assert sch.func_name == "main"
    sch.get_block("C")  # still usable
    assert len(sch.trace.insts) == 1


def test_get_loops_and_child_blocks() -> None:
    sch = Schedule(load(CHAIN))
    block_b = sch.get_block("B")
    loops = sch.get_loops(block_b)
    assert [sch.get(lp).loop_var.name for lp in loops] == ["i", "j"]
    inst = sch.trace.insts[-1]
    assert (inst.kind, inst.inputs, inst.attrs, inst.outputs) == ("GetLoops", (block_b,), (), tuple(loops))
    root = sch.get_block("root")
    children = sch.get_child_blocks(root)
    assert [sch.get(b).name_hint for b in children] == ["B", "C"]
    assert sch.trace.insts[-1].kind == "GetChildBlocks"
    under_i = sch.get_child_blocks(loops[0])
    assert [sch.get(b).name_hint for b in under_i] == ["B"]
    assert sch.get_loops(root) == []


def test_producers_and_consumers() -> None:
    sch = Schedule(load(CHAIN))
    block_b, block_c = sch.get_block("B"), sch.get_block("C")
    assert [sch.get(b).name_hint for b in sch.get_consumers(block_b)] == ["C"]
    assert [sch.get(b).name_hint for b in sch.get_producers(block_c)] == ["B"]
    assert sch.get_producers(block_b) == [] and sch.get_consumers(block_c) == []
    kinds = [inst.kind for inst in sch.trace.insts[-4:]]
    assert kinds == ["GetConsumers", "GetProducers", "GetProducers", "GetConsumers"]


def test_get_rejects_foreign_rvs() -> None:
    a, b = Schedule(load(MATMUL)), Schedule(load(MATMUL))
    block = a.get_block("C")
    with pytest.raises(ScheduleError, match="does not belong"):
        b.get_loops(block)
    with pytest.raises(ScheduleError, match="expected a BlockRV"):
        a.get_loops(a.get_loops(block)[0])  # type: ignore[arg-type]


# ---- atomicity ----------------------------------------------------------------------------


def test_a_failed_primitive_changes_nothing() -> None:
    sch = Schedule(load(MATMUL), seed=0)
    i, j, k = sch.get_loops(sch.get_block("C"))
    snapshot = (sch.mod, len(sch.trace.insts), dict(sch._symbols))
    for bad in (lambda: sch.split(k, [5, 3]), lambda: sch.vectorize(k), lambda: sch.fuse(i, k),
                lambda: sch.reorder(i, i), lambda: sch.unannotate(i, "x")):
        with pytest.raises(ScheduleError):
            bad()
        assert (sch.mod, len(sch.trace.insts), dict(sch._symbols)) == snapshot
    # the LoopRVs still work after the failures
    sch.split(k, [4, 4])
    assert len(sch.get_loops(sch.get_block("C"))) == 4


def test_a_failure_after_sampling_rewinds_the_random_state() -> None:
    fresh = Schedule(load(MATMUL), seed=8)
    expected = [fresh.get(fresh.sample_categorical(list(range(100)), [1.0] * 100)) for _ in range(3)]
    sch = Schedule(load(MATMUL), seed=8)
    with pytest.raises(ScheduleError):
        with sch._atomic():  # a composite step that samples and then fails
            sch.sample_categorical(list(range(100)), [1.0] * 100)
            with sch._atomic():
                sch.sample_categorical(list(range(100)), [1.0] * 100)
            raise ScheduleError("later step failed")
    assert sch.trace.insts == ()
    assert [sch.get(sch.sample_categorical(list(range(100)), [1.0] * 100)) for _ in range(3)] == expected


def test_removed_loop_rvs_report_the_loop_is_gone() -> None:
    sch = Schedule(load(MATMUL))
    i, j, k = sch.get_loops(sch.get_block("C"))
    sch.split(j, [4, 4])
    with pytest.raises(ScheduleError, match="'j' no longer exists"):
        sch.parallel(j)


# ---- determinism --------------------------------------------------------------------------

_PROGRAM = textwrap.dedent(
    """
    import json, sys
    sys.path.insert(0, {repo!r})
    from msdb.hashing import structural_hash
    from msdb.schedule import Schedule
    from tests.schedule._loop_workloads import BATCH_MATMUL, load, script_of

    def schedule(seed):
        sch = Schedule(load(BATCH_MATMUL), seed=seed)
        block = sch.get_block("Z")
        b, i, j, k = sch.get_loops(block)
        i_tiles = sch.split(i, sch.sample_perfect_tile(i, n=3, max_innermost_factor=4))
        j_tiles = sch.split(j, sch.sample_perfect_tile(j, n=2, max_innermost_factor=4))
        k_tiles = sch.split(k, sch.sample_perfect_tile(k, n=2))
        sch.reorder(b, i_tiles[0], j_tiles[0], k_tiles[0], i_tiles[1], k_tiles[1], i_tiles[2], j_tiles[1])
        fused = sch.fuse(b, i_tiles[0], j_tiles[0])
        sch.parallel(fused)
        sch.vectorize(j_tiles[1])
        v = sch.sample_categorical([0, 16, 64], [0.2, 0.3, 0.5])
        sch.annotate(block, "unroll", v)
        decisions = [sch.trace.decisions[inst] for inst in sch.trace.insts if inst in sch.trace.decisions]
        return sch, decisions

    sch, decisions = schedule(int(sys.argv[1]))
    print(json.dumps({{"hash": structural_hash(sch.mod), "script": script_of(sch.mod), "decisions": decisions}}))
    """
)


def _in_fresh_process(seed: int, hash_seed: str) -> dict:
    env = dict(os.environ, PYTHONHASHSEED=hash_seed)
    out = subprocess.run([sys.executable, "-c", _PROGRAM.format(repo=str(REPO)), str(seed)], capture_output=True,
                         text=True, env=env, cwd=REPO, check=True, timeout=120)
    return json.loads(out.stdout)


@pytest.mark.slow
def test_same_seed_same_module_in_fresh_processes() -> None:
    first = _in_fresh_process(1234, "0")
    second = _in_fresh_process(1234, "4242")
    assert first == second
    namespace: dict = {}
    exec(compile(_PROGRAM.format(repo=str(REPO)).split("sch, decisions = schedule")[0], "<program>", "exec"), namespace)
    sch, decisions = namespace["schedule"](1234)
    assert decisions == first["decisions"]
    assert structural_hash(sch.mod) == first["hash"]
    assert namespace["script_of"](sch.mod) == first["script"]
    # and the seed matters
    assert len({json.dumps(namespace["schedule"](seed)[1]) for seed in range(6)}) > 1


# ---- a MetaSchedule multi-level tiling trace ----------------------------------------------


def _tile_like_metaschedule(sch: Schedule, decisions: dict[str, list[int]]) -> None:
    """The instructions of a real TVM 0.27 GMM record (team_a, line 0), with the block
    primitives left out when the mixin does not provide them."""
    b0 = sch.get_block("Z", func_name="main")
    b1 = sch.get_block("root", func_name="main")
    sch.annotate(b0, "meta_schedule.tiling_structure", "SSRSRS")
    l2, l3, l4, l5 = sch.get_loops(b0)
    tiles = {}
    for name, loop, n in (("b", l2, 4), ("i", l3, 4), ("j", l4, 4), ("k", l5, 2)):
        factors = sch.sample_perfect_tile(loop, n=n, max_innermost_factor=64, decision=decisions[name])
        tiles[name] = sch.split(loop, factors, preserve_unit_iters=True, disable_predication=False)
    b, i, j, k = tiles["b"], tiles["i"], tiles["j"], tiles["k"]
    sch.reorder(b[0], i[0], j[0], b[1], i[1], j[1], k[0], b[2], i[2], j[2], k[1], b[3], i[3], j[3])
    has_blocks = hasattr(sch, "cache_write") and hasattr(sch, "reverse_compute_at")
    if has_blocks:
        b34 = sch.cache_write(b0, 0, "global")
        sch.reverse_compute_at(b34, j[1], preserve_unit_loops=True)
    sch.annotate(b1, "meta_schedule.parallel", 16)
    sch.annotate(b1, "meta_schedule.vectorize", 64)
    v35 = sch.sample_categorical([0, 16, 64, 512], [0.25, 0.25, 0.25, 0.25], decision=3)
    sch.annotate(b1, "meta_schedule.unroll_explicit", v35)
    sch.enter_postproc()
    b36 = sch.get_block("root", func_name="main")
    for key in ("meta_schedule.parallel", "meta_schedule.vectorize", "meta_schedule.unroll_explicit"):
        sch.unannotate(b36, key)
    children = sch.get_child_blocks(b36)
    loops = sch.get_loops(children[0])
    fused = sch.fuse(*loops[:6], preserve_unit_iters=True)
    sch.parallel(fused)
    sch.annotate(fused, "pragma_auto_unroll_max_step", 512)
    sch.annotate(fused, "pragma_unroll_explicit", 1)
    if has_blocks:
        inner = sch.get_loops(children[1])
        sch.vectorize(sch.fuse(inner[-1], preserve_unit_iters=True))
    else:
        sch.vectorize(sch.fuse(sch.get_loops(children[0])[-1]))


def test_multi_level_tiling_replay_keeps_meaning() -> None:
    mod = load(gmm(1, 16, 16, 16))
    sch = Schedule(mod, seed=0)
    _tile_like_metaschedule(sch, {"b": [1, 1, 1, 1], "i": [2, 1, 1, 8], "j": [2, 1, 8, 1], "k": [2, 8]})
    lines = loop_lines(sch.mod)
    assert lines[0].startswith("for b_0_i_0_j_0_b_1_i_1_j_1_fused in T.parallel(4")
    assert sch.trace.insts[-1].kind == "Vectorize"
    assert "EnterPostproc" in [inst.kind for inst in sch.trace.insts]
    assert_same_results(mod, sch.mod)


def test_multi_level_tiling_on_the_real_shape_matches_tvm_bindings() -> None:
    # TVM 0.27 prints these bindings for the same trace without CacheWrite/ReverseComputeAt
    sch = Schedule(load(gmm(1, 128, 128, 128)), seed=0)
    block = sch.get_block("Z")
    l2, l3, l4, l5 = sch.get_loops(block)
    tiles = [sch.split(lp, sch.sample_perfect_tile(lp, n=n, max_innermost_factor=64, decision=d))
             for lp, n, d in ((l2, 4, [1, 1, 1, 1]), (l3, 4, [2, 1, 1, 64]), (l4, 4, [8, 1, 16, 1]), (l5, 2, [8, 16]))]
    b, i, j, k = tiles
    sch.reorder(b[0], i[0], j[0], b[1], i[1], j[1], k[0], b[2], i[2], j[2], k[1], b[3], i[3], j[3])
    fused = sch.fuse(*sch.get_loops(block)[:6])
    sch.parallel(fused)
    sch.vectorize(sch.fuse(sch.get_loops(block)[-1]))
    assert binding_lines(sch.mod) == [
        "v_b = T.axis.spatial(1, b_2 + b_3)",
        "v_i = T.axis.spatial(128, b_0_i_0_j_0_b_1_i_1_j_1_fused // 8 * 64 + i_2 * 64 + i_3)",
        "v_j = T.axis.spatial(128, b_0_i_0_j_0_b_1_i_1_j_1_fused % 8 * 16 + j_2)",
        "v_k = T.axis.reduce(128, k_0 * 16 + k_1)",
    ]
    loop = sch.get(fused)
    assert loop.kind == S.ForKind.PARALLEL and loop.extent.value == 16


def test_copy_is_independent() -> None:
    mod = load(MATMUL)
    sch = Schedule(mod, seed=0)
    i, j, k = sch.get_loops(sch.get_block("C"))
    clone = sch.copy()
    clone.split(i, [4, 4])
    assert len(sch.get_loops(sch.get_block("C"))) == 3
    assert len(clone.get_loops(clone.get_block("C"))) == 4
    assert isinstance(sch.get_loops(sch.get_block("C"))[0], LoopRV)
    assert_same_results(mod, clone.mod)


def test_a_re_dressed_loop_or_block_patches_the_index_to_what_a_fresh_walk_gives() -> None:
    """A primitive that only re-dresses a statement (a loop's kind or annotations, a block's
    annotations, a block with its init) patches the function's index instead of dropping it;
    every entry is the one a fresh walk of the function gives, through loops inside blocks
    inside sequences (a conv's padding, init and update), and a primitive that rebuilds a
    subtree still drops it for a fresh walk."""
    from msdb.ir import zoo
    from msdb.schedule.state import _build_index

    sch = Schedule(zoo.build("C2D", 1, 14, 14, 16, 16, 3, 1, 1))
    state = sch.state

    def assert_patched_and_fresh() -> None:
        patched = state._indexes.get("main")
        assert patched is not None  # kept through the replacement, not dropped
        fresh = _build_index(state.func("main"))
        for field in ("blocks", "realizes", "loops", "parent"):
            got, want = getattr(patched, field), getattr(fresh, field)
            assert {id(key) for key in got} == {id(key) for key in want}, field
            assert all(got[key] is want[key] for key in want), field

    conv = sch.get_block("conv2d_nhwc")
    assert sch.get(conv).init is not None
    sch.annotate(conv, "meta_schedule.tiling_structure", "SSRSRS")  # a block with its init
    assert_patched_and_fresh()
    sch.decompose_reduction(conv, sch.get_loops(conv)[4])
    assert "main" not in state._indexes  # a rebuilt subtree: walked afresh on the next lookup
    pad_loops = sch.get_loops(sch.get_block("PadInput"))
    for step in (lambda: sch.parallel(pad_loops[1]), lambda: sch.vectorize(pad_loops[-1]),
                 lambda: sch.annotate(sch.get_loops(conv)[2], "pragma_auto_unroll_max_step", 16),
                 lambda: sch.annotate(conv, "meta_schedule.unroll_explicit", 1),
                 lambda: sch.unroll(sch.get_loops(sch.get_block("conv2d_nhwc_init"))[-1])):
        step()
        assert_patched_and_fresh()
    sch.split(sch.get_loops(conv)[1], [None, 7])
    assert "main" not in state._indexes
    assert len(sch.get_loops(conv)) == 8
