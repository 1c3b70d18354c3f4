"""Printing traces as Python exactly as TVM 0.27 does (checked against TVM's own output stored in
tests/data/fixtures/tvm-0.27-derived), the older TVM spellings, and the trace transformations
`simplified` and `with_decision` (checked against TVM's choices on every fixture record)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from msdb.schedule import Instruction, Trace
from msdb.schedule import tvm_json
from msdb.schedule.rv import BlockRV, ExprRV, LoopRV
from msdb.schedule.trace import TraceError

FIXTURES = Path(__file__).resolve().parents[1] / "data" / "fixtures"
DERIVED = FIXTURES / "tvm-0.27-derived"
TEAMS = ("team_a", "team_b", "team_c")


def record_traces(path: Path, limit: int | None = None) -> list[Trace]:
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()][:limit]
    return [Trace.from_json(tvm_json.loads(line)[1][0]) for line in lines]


@pytest.fixture(scope="module")
def tvm_traces() -> dict:
    return json.loads((DERIVED / "traces.json").read_text())


@pytest.fixture(scope="module")
def tvm_printing() -> dict:
    return json.loads((DERIVED / "printing.json").read_text(encoding="utf-8"))


# ---------------------------------------------------------------- against TVM's prints


@pytest.mark.slow
@pytest.mark.parametrize("team", TEAMS)
def test_every_fixture_trace_prints_like_tvm(team: str, tvm_traces: dict) -> None:
    expected = tvm_traces[team]
    traces = record_traces(FIXTURES / "tvm-0.27" / team / "database_tuning_record.json")
    assert len(traces) == len(expected) == 128
    for line, trace in enumerate(traces):
        entry = expected[str(line)]
        text = trace.as_apply_trace()
        if "text" in entry:
            assert text == entry["text"]
        assert hashlib.sha256(text.encode()).hexdigest() == entry["sha256"], f"{team} line {line}"


@pytest.mark.parametrize("team", TEAMS)
def test_simplified_keeps_what_tvm_keeps(team: str, tvm_traces: dict) -> None:
    expected = tvm_traces[team]
    for line, trace in enumerate(record_traces(FIXTURES / "tvm-0.27" / team / "database_tuning_record.json")):
        entry = expected[str(line)]
        index = {inst: i for i, inst in enumerate(trace.insts)}
        for remove_postproc, key in ((False, "simplified_keep"), (True, "simplified_keep_remove_postproc")):
            simple = trace.simplified(remove_postproc)
            assert [index[inst] for inst in simple.insts] == entry[key], f"{team} line {line} {remove_postproc}"
            assert all(simple.decisions[inst] == trace.decisions[inst] for inst in simple.decisions)
            assert set(simple.decisions) == {inst for inst in simple.insts if inst in trace.decisions}


@pytest.mark.parametrize("case", ["many_kinds", "inline_kinds", "reduction_kinds", "thread_kinds", "decomposed", "hand_built",
                                  "hand_built_with_decisions"])
def test_every_kind_prints_and_writes_like_tvm(case: str, tvm_printing: dict) -> None:
    expected = tvm_printing[case]
    trace = Trace.from_json(tvm_json.loads(expected["json"]))
    assert tvm_json.dumps(trace.as_json()) == expected["json"]
    assert trace.python_lines() == expected["python"]
    assert trace.python_lines(remove_postproc=True) == expected["python_remove_postproc"]
    assert trace.as_apply_trace() == expected["str"]
    assert str(trace) == "\n".join(expected["python"])


# ---------------------------------------------------------------- the MLC example

MLC_TEXT = """\
b0 = sch.get_sblock(name="C", func_name="main")
l1, l2, l3 = sch.get_loops(block=b0)
v4, v5 = sch.sample_perfect_tile(loop=l2, n=2, max_innermost_factor=16, decision=[16, 8])
l6, l7 = sch.split(loop=l2, factors=[v4, v5], preserve_unit_iters=True, disable_predication=False)
sch.reorder(l1, l6, l3, l7)
b8 = sch.decompose_reduction(block=b0, loop=l3)"""


def mlc_trace() -> Trace:
    """The trace of MLC's `stochastic_schedule_mm`, built by hand the way `Schedule` records it."""
    b0, l1, l2, l3, v4, v5, l6, l7 = BlockRV(), LoopRV(), LoopRV(), LoopRV(), ExprRV(), ExprRV(), LoopRV(), LoopRV()
    tile = Instruction("SamplePerfectTile", (l2,), (2, 16), (v4, v5))
    insts = [
        Instruction("GetSBlock", (), ("C", "main"), (b0,)),
        Instruction("GetLoops", (b0,), (), (l1, l2, l3)),
        tile,
        Instruction("Split", (l2, v4, v5), (True, False), (l6, l7)),
        Instruction("Reorder", (l1, l6, l3, l7), (), ()),
        Instruction("DecomposeReduction", (b0, l3), (), (BlockRV(),)),
    ]
    return Trace(insts, {tile: [16, 8]})


def test_mlc_example_prints_exactly() -> None:
    trace = mlc_trace()
    assert str(trace) == MLC_TEXT
    assert trace.as_python() == MLC_TEXT
    assert trace.python_lines() == MLC_TEXT.splitlines()


def test_mlc_example_in_older_tvm_forms() -> None:
    trace = mlc_trace()
    pre017 = trace.as_python(legacy=True)
    assert pre017.splitlines()[0] == 'b0 = sch.get_block(name="C", func_name="main")'
    assert pre017.splitlines()[3] == "l6, l7 = sch.split(loop=l2, factors=[v4, v5], preserve_unit_iters=True)"
    assert trace.as_python(legacy="pre0.17") == pre017
    pre024 = trace.as_python(legacy="pre0.24").splitlines()
    assert pre024[0] == 'b0 = sch.get_block(name="C", func_name="main")'
    assert pre024[3] == MLC_TEXT.splitlines()[3]
    assert pre024[1:] == MLC_TEXT.splitlines()[1:]
    assert trace.as_apply_trace(legacy=True).startswith("# from tvm import tir\ndef apply_trace(sch: tir.Schedule) -> None:\n"
                                                        '  b0 = sch.get_block(name="C"')
    # the legacy JSON forms
    insts = trace.legacy(True).as_json()[0]
    assert insts[0][0] == "GetBlock" and insts[3][2] == [1]
    assert trace.legacy("pre0.24").as_json()[0][3][2] == [1, 0]


def test_legacy_style_still_prints_a_set_disable_predication() -> None:
    loop = LoopRV()
    trace = Trace([Instruction("GetLoops", (BlockRV(),), (), (loop,))], {})
    with pytest.raises(TraceError):
        trace.as_python()  # the block RV is not defined in the trace
    b0 = BlockRV()
    trace = Trace([Instruction("GetSBlock", (), ("C", "main"), (b0,)), Instruction("GetLoops", (b0,), (), (loop,)),
                   Instruction("Split", (loop, None, 4), (1, 1), (LoopRV(), LoopRV()))], {})
    assert trace.python_lines(legacy=True)[2].endswith("preserve_unit_iters=True, disable_predication=True)")


def test_bad_legacy_argument() -> None:
    with pytest.raises(ValueError, match="legacy"):
        mlc_trace().as_python(legacy="0.9")


def test_empty_trace_prints_pass() -> None:
    assert str(Trace((), {})) == ""
    assert Trace((), {}).as_apply_trace() == "# from tvm import s_tir\ndef apply_trace(sch: s_tir.Schedule) -> None:\n  pass"
    assert Trace((), {}).as_json() == [[], []]


def test_cuda_traces_print_every_kind() -> None:
    traces = record_traces(FIXTURES / "tvm-legacy" / "cuda_dp4a_records.json")
    assert len(traces) == 2
    for trace in traces:
        text = trace.as_python()
        lines = text.splitlines()
        assert len(lines) == len(trace.insts)
        assert all("sch." in line for line in lines)
        assert "b7 = sch.blockize(target=l6, preserve_unit_iters=True)" in lines
        assert 'sch.tensorize(block_or_loop=b122, tensor_intrin="dp4a", preserve_unit_iters=True)' in lines
        assert 'sch.bind(loop=l37, thread_axis="blockIdx.x")' in lines
        assert 'b41 = sch.cache_read(block=b7, read_buffer_index=0, storage_scope="shared", consumer_blocks=[b7])' in lines
        assert 'sch.annotate(block_or_loop=b121, ann_key="meta_schedule.auto_tensorize", ann_val="")' in lines
        assert lines[0] == 'b0 = sch.get_sblock(name="compute", func_name="main")'
        assert trace.as_python(legacy=True).splitlines()[0] == 'b0 = sch.get_block(name="compute", func_name="main")'
        # 0.2 probabilities print with 17 digits, as TVM prints floats
        assert "probs=[0.20000000000000001, 0.20000000000000001" in text
        compile(trace.as_apply_trace(), "<trace>", "exec")  # it is valid Python


def test_every_fixture_print_is_valid_python() -> None:
    printed = 0
    for path in sorted(FIXTURES.glob("tvm-*/**/database_tuning_record.json")):
        for trace in record_traces(path, limit=4):
            compile(trace.as_apply_trace(), str(path), "exec")
            printed += 1
    assert printed, f"no fixture record files under {FIXTURES}"


# ---------------------------------------------------------------- with_decision, simplified


def test_with_decision_replaces_one_decision() -> None:
    trace = mlc_trace()
    tile = trace.insts[2]
    changed = trace.with_decision(tile, [32, 4], remove_postproc=False)
    assert changed.get_decision(tile) == [32, 4]
    assert trace.get_decision(tile) == [16, 8]  # the original is unchanged
    assert changed.insts == trace.insts
    assert "decision=[32, 4]" in str(changed)


def test_with_decision_remove_postproc_truncates() -> None:
    trace = record_traces(FIXTURES / "tvm-0.27" / "team_a" / "database_tuning_record.json")[0]
    sampling = next(inst for inst in trace.insts if inst.kind == "SampleCategorical")
    changed = trace.with_decision(sampling, 0, remove_postproc=True)
    kinds = [inst.kind for inst in changed.insts]
    assert "EnterPostproc" not in kinds
    assert changed.insts == trace.insts[:len(kinds)]
    assert changed.get_decision(sampling) == 0
    assert len(changed.decisions) == len(trace.decisions)


def test_with_decision_validates() -> None:
    trace = mlc_trace()
    with pytest.raises(TraceError, match="samples 2"):
        trace.with_decision(trace.insts[2], [128], remove_postproc=False)
    stranger = Instruction("SampleCategorical", (), ([1, 2], [0.5, 0.5]), (ExprRV(),))
    with pytest.raises(TraceError, match="not part of this trace"):
        trace.with_decision(stranger, 0, remove_postproc=False)


def test_simplified_drops_unused_pure_instructions() -> None:
    b0, unused_b, l1, l2 = BlockRV(), BlockRV(), LoopRV(), LoopRV()
    v = ExprRV()
    sample = Instruction("SampleCategorical", (), ([1, 2], [0.5, 0.5]), (v,))
    insts = [
        Instruction("GetSBlock", (), ("C", "main"), (b0,)),
        Instruction("GetSBlock", (), ("D", "main"), (unused_b,)),
        Instruction("GetLoops", (b0,), (), (l1, l2)),
        sample,
        Instruction("Parallel", (l1,), (), ()),
        Instruction("EnterPostproc", (), (), ()),
        Instruction("GetLoops", (b0,), (), (LoopRV(),)),
    ]
    trace = Trace(insts, {sample: 1})
    simple = trace.simplified(remove_postproc=True)
    assert [inst.kind for inst in simple.insts] == ["GetSBlock", "GetLoops", "Parallel"]
    assert simple.decisions == {}
    kept = trace.simplified(remove_postproc=False)
    assert [inst.kind for inst in kept.insts] == ["GetSBlock", "GetLoops", "Parallel", "EnterPostproc"]


def test_simplified_sees_blocks_used_inside_lists() -> None:
    b0, b1 = BlockRV(), BlockRV()
    insts = [Instruction("GetSBlock", (), ("C", "main"), (b0,)), Instruction("GetSBlock", (), ("D", "main"), (b1,)),
             Instruction("CacheRead", (b0, [b1]), (0, "shared"), (BlockRV(),))]
    assert len(Trace(insts, {}).simplified(remove_postproc=False).insts) == 3
