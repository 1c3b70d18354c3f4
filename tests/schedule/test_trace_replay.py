"""Replaying traces: the per-kind dispatch to `Schedule`'s public primitives (TVM keyword
arguments, RV rebinding, decisions, post-processing), every fixture record replayed on its
stored workload (re-recording the same trace), the result compared with TVM's own replay, and
the MLC example run through real primitives."""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

import pytest

from msdb.errors import ScheduleError
from msdb.schedule import Instruction, Schedule, Trace
from msdb.schedule import tvm_json
from msdb.schedule.rv import BlockRV, ExprRV, LoopRV
from msdb.schedule.trace import TraceError

FIXTURES = Path(__file__).resolve().parents[1] / "data" / "fixtures"
DERIVED = FIXTURES / "tvm-0.27-derived"
REPLAY_DIRS = ["tvm-0.27/team_a", "tvm-0.27/team_b", "tvm-0.27/team_c", "tvm-legacy/team_a_pre0.24",
               "tvm-legacy/team_a_pre0.17"]


# ---------------------------------------------------------------- dispatch, with a fake schedule


class FakeSchedule:
    """Records every primitive call and returns canned outputs, in call order."""

    def __init__(self, returns: list[Any]) -> None:
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
        self._returns = list(returns)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)

        def primitive(*args: Any, **kwargs: Any) -> Any:
            self.calls.append((name, args, kwargs))
            return self._returns.pop(0)

        return primitive


DISPATCH_TRACE = [[
    ["GetBlock", [], ["C", "main"], ["b0"]],
    ["GetSBlock", [], ["root", "main"], ["b1"]],
    ["GetLoops", ["b0"], [], ["l2", "l3"]],
    ["SamplePerfectTile", ["l3"], [2, 64], ["v4", "v5"]],
    ["Split", ["l3", "v4", "v5"], [1], ["l6", "l7"]],
    ["Split", ["l2", "None", 4], [0, 1], ["l8", "l9"]],
    ["Reorder", ["l8", "l6", "l9", "l7"], [], []],
    ["Fuse", ["l8", "l6"], [1], ["l10"]],
    ["Parallel", ["l10"], [], []],
    ["Vectorize", ["l7"], [], []],
    ["Unroll", ["l9"], [], []],
    ["Bind", ["l10"], ["blockIdx.x"], []],
    ["SampleCategorical", [], [[0, 16], [0.5, 0.5]], ["v11"]],
    ["Annotate", ["b1", "v11"], ["meta_schedule.unroll_explicit"], []],
    ["Annotate", ["l10", "\"SSR\""], ["k"], []],
    ["Unannotate", ["b1"], ["meta_schedule.unroll_explicit"], []],
    ["CacheRead", ["b0", ["b0"]], [0, "shared"], ["b12"]],
    ["CacheWrite", ["b0", []], [0, "global"], ["b13"]],
    ["ComputeAt", ["b12", "l9"], [1, -1], []],
    ["ReverseComputeAt", ["b13", "l10"], [0, 2], []],
    ["GetChildBlocks", ["b1"], [], ["b14", "b15"]],
    ["GetProducers", ["b0"], [], ["b16"]],
    ["GetConsumers", ["b0"], [], ["b17"]],
    ["SampleComputeLocation", ["b16"], [], ["l18"]],
    ["ComputeInline", ["b16"], [], []],
    ["ReverseComputeInline", ["b17"], [], []],
    ["StorageAlign", ["b12"], [0, 1, 32, 8], []],
    ["RFactor", ["l9"], [1], ["b19"]],
    ["EnterPostproc", [], [], []],
    ["DecomposeReduction", ["b0", "l7"], [], ["b20"]],
], [[3, [16, 8]], [12, 1], [23, -1]]]


def _fake_outputs() -> list[Any]:
    """What each primitive of DISPATCH_TRACE returns, in order."""
    return [BlockRV(), BlockRV(), [LoopRV(), LoopRV()], [ExprRV(), ExprRV()], [LoopRV(), LoopRV()], [LoopRV(), LoopRV()],
            None, LoopRV(), None, None, None, None, ExprRV(), None, None, None, BlockRV(), BlockRV(), None, None,
            [BlockRV(), BlockRV()], [BlockRV()], [BlockRV()], LoopRV(), None, None, None, BlockRV(), None, BlockRV()]


def test_replay_calls_each_primitive_with_tvm_keywords() -> None:
    trace = Trace.from_json(DISPATCH_TRACE)
    outputs = _fake_outputs()
    sch = FakeSchedule(outputs)
    trace.apply_to_schedule(sch, remove_postproc=False)  # type: ignore[arg-type]
    b0, b1, (l2, l3), (v4, v5), (l6, l7), (l8, l9), _, l10 = outputs[:8]
    v11, b12, b13 = outputs[12], outputs[16], outputs[17]
    b16, b17 = outputs[21][0], outputs[22][0]
    expected = [
        ("get_sblock", (), {"name": "C", "func_name": "main"}),
        ("get_sblock", (), {"name": "root", "func_name": "main"}),
        ("get_loops", (), {"block": b0}),
        ("sample_perfect_tile", (), {"loop": l3, "n": 2, "max_innermost_factor": 64, "decision": [16, 8]}),
        ("split", (), {"loop": l3, "factors": [v4, v5], "preserve_unit_iters": True, "disable_predication": False}),
        ("split", (), {"loop": l2, "factors": [None, 4], "preserve_unit_iters": False, "disable_predication": True}),
        ("reorder", (l8, l6, l9, l7), {}),
        ("fuse", (l8, l6), {"preserve_unit_iters": True}),
        ("parallel", (), {"loop": l10}),
        ("vectorize", (), {"loop": l7}),
        ("unroll", (), {"loop": l9}),
        ("bind", (), {"loop": l10, "thread_axis": "blockIdx.x"}),
        ("sample_categorical", (), {"candidates": [0, 16], "probs": [0.5, 0.5], "decision": 1}),
        ("annotate", (), {"block_or_loop": b1, "ann_key": "meta_schedule.unroll_explicit", "ann_val": v11}),
        ("annotate", (), {"block_or_loop": l10, "ann_key": "k", "ann_val": "SSR"}),
        ("unannotate", (), {"block_or_loop": b1, "ann_key": "meta_schedule.unroll_explicit"}),
        ("cache_read", (), {"block": b0, "read_buffer_index": 0, "storage_scope": "shared", "consumer_blocks": [b0]}),
        ("cache_write", (), {"block": b0, "write_buffer_index": 0, "storage_scope": "global", "consumer_blocks": None}),
        ("compute_at", (), {"block": b12, "loop": l9, "preserve_unit_loops": True, "index": -1}),
        ("reverse_compute_at", (), {"block": b13, "loop": l10, "preserve_unit_loops": False, "index": 2}),
        ("get_child_blocks", (b1,), {}),
        ("get_producers", (), {"block": b0}),
        ("get_consumers", (), {"block": b0}),
        ("sample_compute_location", (), {"block": b16, "decision": -1}),
        ("compute_inline", (), {"block": b16}),
        ("reverse_compute_inline", (), {"block": b17}),
        ("storage_align", (), {"block": b12, "buffer_index": 0, "axis": 1, "factor": 32, "offset": 8}),
        ("rfactor", (), {"loop": l9, "factor_axis": 1}),
        ("enter_postproc", (), {}),
        ("decompose_reduction", (), {"block": b0, "loop": l7}),
    ]
    assert len(sch.calls) == len(expected)
    for got, want in zip(sch.calls, expected):
        assert got[0] == want[0]
        assert len(got[1]) == len(want[1]) and all(a is b for a, b in zip(got[1], want[1])), got
        assert got[2].keys() == want[2].keys(), got
        for key, value in want[2].items():
            assert _same(got[2][key], value), (got, key)


def _same(a: Any, b: Any) -> bool:
    if isinstance(b, list):
        return isinstance(a, list) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(b, (BlockRV, LoopRV, ExprRV)):
        return a is b
    return a == b and type(a) is type(b)


def test_remove_postproc_stops_before_enter_postproc() -> None:
    sch = FakeSchedule(_fake_outputs())
    Trace.from_json(DISPATCH_TRACE).apply_to_schedule(sch, remove_postproc=True)  # type: ignore[arg-type]
    names = [call[0] for call in sch.calls]
    assert "enter_postproc" not in names and "decompose_reduction" not in names
    assert names[-1] == "rfactor"


def test_decision_provider_can_change_decisions() -> None:
    seen = []

    def provider(inst: Instruction, inputs: list, attrs: tuple, decision: Any) -> Any:
        seen.append((inst.kind, decision))
        if inst.kind == "SamplePerfectTile":
            assert len(inputs) == 1 and isinstance(inputs[0], LoopRV) and attrs == (2, 64)
            return [4, 32]
        return decision

    sch = FakeSchedule(_fake_outputs())
    Trace.from_json(DISPATCH_TRACE).apply_to_schedule(sch, remove_postproc=False, decision_provider=provider)  # type: ignore[arg-type]
    assert sch.calls[3][2]["decision"] == [4, 32]
    assert ("SampleCategorical", 1) in seen and ("GetLoops", None) in seen
    assert len(seen) == len(DISPATCH_TRACE[0])


@pytest.mark.parametrize("kind", ["TransformLayout", "PadEinsum"])
def test_kinds_msdb_cannot_replay_raise_schedule_error(kind: str) -> None:
    """A kind msdb does not know (PadEinsum), and a TransformLayout in a layout of a TVM older
    than 0.13 (index map among the inputs with the buffer), are kept but not replayed."""
    inst = {"PadEinsum": ["PadEinsum", ["b0"], [[16, 16, 16]], []],
            "TransformLayout": ["TransformLayout", ["b0", 0, 1, "{\"root\":1}", "None"], [1], []]}[kind]
    trace = Trace.from_json([[["GetSBlock", [], ["C", "main"], ["b0"]], ["GetLoops", ["b0"], [], ["l1"]], inst], []])
    sch = FakeSchedule([BlockRV(), [LoopRV()]])
    with pytest.raises(ScheduleError, match=f"instruction {kind} is not supported for replay") as info:
        trace.apply_to_schedule(sch, remove_postproc=False)  # type: ignore[arg-type]
    assert "instruction 2" in str(info.value)


def test_output_count_mismatch_is_reported() -> None:
    trace = Trace.from_json([[["GetSBlock", [], ["C", "main"], ["b0"]], ["GetLoops", ["b0"], [], ["l1", "l2"]]], []])
    sch = FakeSchedule([BlockRV(), [LoopRV(), LoopRV(), LoopRV()]])
    with pytest.raises(ScheduleError, match=r"instruction 1 \(GetLoops\).*3 output\(s\), the trace expects 2"):
        trace.apply_to_schedule(sch, remove_postproc=False)  # type: ignore[arg-type]


def test_primitive_errors_name_the_instruction() -> None:
    class Failing(FakeSchedule):
        def get_loops(self, block: Any) -> Any:
            raise ScheduleError("no loops here")

    trace = Trace.from_json([[["GetSBlock", [], ["C", "main"], ["b0"]], ["GetLoops", ["b0"], [], ["l1"]]], []])
    with pytest.raises(ScheduleError, match=r"replaying trace instruction 1 \(GetLoops\): no loops here"):
        trace.apply_to_schedule(Failing([BlockRV()]), remove_postproc=False)  # type: ignore[arg-type]


def test_hand_built_trace_with_foreign_rv_fails_on_replay() -> None:
    trace = Trace([Instruction("Parallel", (LoopRV(),), (), ())], {})
    with pytest.raises(TraceError, match="instruction 0"):
        trace.apply_to_schedule(FakeSchedule([None]), remove_postproc=False)  # type: ignore[arg-type]


# ---------------------------------------------------------------- real replay on the fixtures


def _needs_primitives() -> None:
    missing = [name for name in ("get_sblock", "get_loops", "split", "reorder", "fuse", "parallel", "vectorize",
                                 "annotate", "unannotate", "cache_write", "reverse_compute_at", "compute_at",
                                 "sample_perfect_tile", "sample_categorical", "sample_compute_location",
                                 "decompose_reduction", "get_child_blocks", "get_consumers", "enter_postproc")
               if not hasattr(Schedule, name)]
    assert missing == [], f"Schedule lacks {missing}"


@lru_cache(maxsize=None)
def _workloads(folder: str) -> list[Any]:
    from msdb.interop.tvm.payload import decode_workload

    lines = (FIXTURES / folder / "database_workload.json").read_text().splitlines()
    return [decode_workload(json.loads(line)[1]) for line in lines if line.strip()]


def _records(folder: str) -> list[list[Any]]:
    lines = (FIXTURES / folder / "database_tuning_record.json").read_text(encoding="utf-8").splitlines()
    return [tvm_json.loads(line) for line in lines if line.strip()]


def _replay_and_check(folder: str, every: int) -> int:
    _needs_primitives()
    workloads = _workloads(folder)
    checked = 0
    for number, (workload_index, (trace_json, *_rest)) in enumerate(_records(folder)):
        if number % every:
            continue
        trace = Trace.from_json(trace_json)
        sch = Schedule(workloads[workload_index], seed=number)
        trace.apply_to_schedule(sch, remove_postproc=False)
        # the replay records the same trace, in the 0.27 form, with the same decisions
        assert tvm_json.dumps(sch.trace.as_json()) == tvm_json.dumps(trace.normalized().as_json()), f"{folder} line {number}"
        checked += 1
    return checked


@pytest.mark.slow
@pytest.mark.parametrize("folder", REPLAY_DIRS)
def test_fixture_traces_replay_on_their_workloads_sample(folder: str) -> None:
    assert _replay_and_check(folder, every=16) == 8


@pytest.mark.slow
@pytest.mark.parametrize("folder", REPLAY_DIRS)
def test_every_fixture_trace_replays_on_its_workload(folder: str) -> None:
    assert _replay_and_check(folder, every=1) == 128


def _tvm_replays() -> list[Path]:
    return sorted((DERIVED / "replayed").glob("*.py"))


@pytest.mark.slow
@pytest.mark.parametrize("path", _tvm_replays(), ids=lambda p: p.stem)
def test_replay_gives_the_module_tvm_gives(path: Path) -> None:
    _needs_primitives()
    from msdb.hashing import structural_equal
    from msdb.ir import from_script

    match = re.fullmatch(r"(team_[abc])_line(\d+)(_nopostproc)?", path.stem)
    assert match
    folder, line, remove_postproc = f"tvm-0.27/{match.group(1)}", int(match.group(2)), bool(match.group(3))
    workload_index, (trace_json, *_rest) = _records(folder)[line]
    sch = Schedule(_workloads(folder)[workload_index])
    Trace.from_json(trace_json).apply_to_schedule(sch, remove_postproc=remove_postproc)
    expected = from_script(path.read_text())
    assert structural_equal(sch.mod, expected)


def test_the_replayed_modules_cover_both_postproc_modes() -> None:
    stems = [p.stem for p in _tvm_replays()]
    assert len(stems) == 48
    assert sum(stem.endswith("_nopostproc") for stem in stems) == 24


# ---------------------------------------------------------------- the MLC example, for real

MATMUL = '''
# from tvm.script import tirx as T
@T.prim_func(s_tir=True)
def main(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128, 128), "float32"), C: T.Buffer((128, 128), "float32")):
    T.func_attr({"global_symbol": "main", "tirx.noalias": True})
    for i, j, k in T.grid(128, 128, 128):
        with T.sblock("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0.0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
'''

MLC_TEXT = """\
b0 = sch.get_sblock(name="C", func_name="main")
l1, l2, l3 = sch.get_loops(block=b0)
v4, v5 = sch.sample_perfect_tile(loop=l2, n=2, max_innermost_factor=16, decision=[16, 8])
l6, l7 = sch.split(loop=l2, factors=[v4, v5], preserve_unit_iters=True, disable_predication=False)
sch.reorder(l1, l6, l3, l7)
b8 = sch.decompose_reduction(block=b0, loop=l3)"""

SCHEDULE_MM_TEXT = """\
b0 = sch.get_sblock(name="C", func_name="main")
l1, l2, l3 = sch.get_loops(block=b0)
l4, l5 = sch.split(loop=l2, factors=[None, 4], preserve_unit_iters=True, disable_predication=False)
sch.reorder(l1, l4, l3, l5)
b6 = sch.decompose_reduction(block=b0, loop=l3)"""


def schedule_mm(sch: Schedule, jfactor: int = 4) -> Schedule:
    block_c = sch.get_block("C", "main")
    i, j, k = sch.get_loops(block=block_c)
    j_0, j_1 = sch.split(loop=j, factors=[None, jfactor])
    sch.reorder(i, j_0, k, j_1)
    sch.decompose_reduction(block_c, k)
    return sch


def stochastic_schedule_mm(sch: Schedule) -> Schedule:
    block_c = sch.get_block("C", "main")
    i, j, k = sch.get_loops(block=block_c)
    j_factors = sch.sample_perfect_tile(loop=j, n=2)
    j_0, j_1 = sch.split(loop=j, factors=j_factors)
    sch.reorder(i, j_0, k, j_1)
    sch.decompose_reduction(block_c, k)
    return sch


def _matmul() -> Any:
    _needs_primitives()
    from msdb.ir import from_script

    return from_script(MATMUL)


def test_schedule_mm_trace_prints_like_mlc() -> None:
    sch = schedule_mm(Schedule(_matmul()))
    assert str(sch.trace) == SCHEDULE_MM_TEXT


@pytest.mark.parametrize("seed", [0, 1, 7])
def test_stochastic_schedule_mm_with_forced_decision(seed: int) -> None:
    from msdb.hashing import structural_equal

    mod = _matmul()
    sch = stochastic_schedule_mm(Schedule(mod, seed=seed))
    trace = sch.trace
    tile = next(inst for inst in trace.insts if inst.kind == "SamplePerfectTile")
    decision = trace.get_decision(tile)
    assert len(decision) == 2 and decision[0] * decision[1] == 128
    forced = trace.with_decision(tile, [16, 8], remove_postproc=True)
    replayed = Schedule(mod)
    forced.apply_to_schedule(replayed, remove_postproc=False)
    assert str(replayed.trace).splitlines() == MLC_TEXT.splitlines()
    assert str(forced) == MLC_TEXT
    # the same module as scheduling directly with that decision
    direct = Schedule(mod)
    block_c = direct.get_block("C", "main")
    i, j, k = direct.get_loops(block=block_c)
    j_0, j_1 = direct.split(loop=j, factors=direct.sample_perfect_tile(loop=j, n=2, decision=[16, 8]))
    direct.reorder(i, j_0, k, j_1)
    direct.decompose_reduction(block_c, k)
    assert structural_equal(replayed.mod, direct.mod)
    # a seeded run is reproducible, and replaying its own trace gives its own module
    again = stochastic_schedule_mm(Schedule(mod, seed=seed))
    assert tvm_json.dumps(again.trace.as_json()) == tvm_json.dumps(trace.as_json())
    own = Schedule(mod)
    trace.apply_to_schedule(own, remove_postproc=False)
    assert structural_equal(own.mod, sch.mod)


def test_cuda_dp4a_trace_replays_fully() -> None:
    """The older TVM's CUDA log (Blockize, Tensorize "dp4a") replays on its workload, TVM's
    dp4a dense (shipped with TVM 0.27's replay in tests/data/cuda_candidates), to TVM's module
    (tests/tuner/cuda has the full comparison)."""
    from msdb.hashing import structural_equal
    from msdb.ir import from_script

    _needs_primitives()
    data = json.loads((FIXTURES.parent / "cuda_candidates" / "dp4a_fixture.json").read_text())
    line = (FIXTURES / "tvm-legacy" / "cuda_dp4a_records.json").read_text().splitlines()[0]
    trace = Trace.from_json(tvm_json.loads(line)[1][0])
    sch = Schedule(from_script(data["workload"]))
    trace.apply_to_schedule(sch, remove_postproc=False)
    assert len(sch.trace.insts) == len(trace.insts)
    assert structural_equal(sch.mod, from_script(data["replayed"][0].replace("[T.Ramp(0, 1, 4)]", "[0]")))


def test_every_replayable_kind_names_a_schedule_method_with_its_keywords() -> None:
    """The registry's data drive replay: each kind's method exists on `Schedule` and takes the
    keywords TVM's Python API uses (what the trace prints)."""
    import inspect

    from msdb.schedule.instructions import known_kinds, kind_of

    for name in known_kinds():
        kind = kind_of(name)
        if not kind.replayable:
            continue
        params = inspect.signature(getattr(Schedule, kind.method)).parameters
        for param in kind.params:
            if param.keyword is not None:
                assert param.keyword in params, f"{name}: {kind.method} has no keyword {param.keyword!r}"
