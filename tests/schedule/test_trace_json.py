"""Trace JSON: TVM's writer byte for byte, every generation's record traces round-trip, old
spellings normalize to TVM 0.27's, and malformed traces fail naming the instruction."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from msdb.errors import MsdbError
from msdb.schedule import Instruction, Trace
from msdb.schedule import tvm_json
from msdb.schedule.rv import BlockRV, ExprRV, LoopRV
from msdb.schedule.trace import TraceError

FIXTURES = Path(__file__).resolve().parents[1] / "data" / "fixtures"
RECORD_FILES = sorted(FIXTURES.glob("tvm-*/**/database_tuning_record.json")) + [FIXTURES / "tvm-legacy" / "cuda_dp4a_records.json"]


def trace_text(line: str) -> str:
    """The exact substring of a record line `[index,[TRACE,...]]` that holds the trace, found by
    bracket matching (independent of the JSON code under test)."""
    start = line.index("[", 1) + 1
    depth, in_string, i = 0, False, start
    while True:
        ch = line[i]
        if in_string:
            if ch == "\\":
                i += 2
                continue
            if ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth == 0:
                return line[start:i + 1]
        i += 1


def record_lines(path: Path) -> list[str]:
    return [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_fixture_files_are_present() -> None:
    names = {p.relative_to(FIXTURES).as_posix() for p in RECORD_FILES}
    assert {"tvm-0.27/team_a/database_tuning_record.json", "tvm-legacy/team_a_pre0.17/database_tuning_record.json",
            "tvm-legacy/team_a_pre0.24/database_tuning_record.json", "tvm-legacy/cuda_dp4a_records.json"} <= names
    assert len(RECORD_FILES) == 6


# ---------------------------------------------------------------- tvm_json


# Written by TVM 0.27's JSONDatabase for run_secs [0.2, 1e-5, 1e10, 1.5, 123456789.125, 1e-30, 1e21,
# 1e-7, 0.1, 100.0, 1e16, 1e17, -0.0, 1e-4, 0.001, 123456.0].
TVM_FLOATS = ("[0.2000000000000000111,1.0000000000000000818e-05,10000000000,1.5,123456789.125,"
              "1.0000000000000000833e-30,1e+21,9.9999999999999995475e-08,0.10000000000000000555,100,"
              "10000000000000000,100000000000000000,-0,0.00010000000000000000479,0.0010000000000000000208,123456]")
FLOAT_VALUES = [0.2, 1e-5, 1e10, 1.5, 123456789.125, 1e-30, 1e21, 1e-7, 0.1, 100.0, 1e16, 1e17, -0.0, 1e-4, 0.001, 123456.0]


def test_floats_are_written_like_tvm() -> None:
    assert tvm_json.dumps(FLOAT_VALUES) == TVM_FLOATS
    assert tvm_json.format_float(0.00015) == "0.00014999999999999998686"


def test_writer_has_no_whitespace_and_sorts_keys() -> None:
    obj = {"kind": "llvm", "keys": ["cpu"], "num-cores": 1, "tag": "", "a": [None, True, False, (1, 2)]}
    assert tvm_json.dumps(obj) == '{"a":[null,true,false,[1,2]],"keys":["cpu"],"kind":"llvm","num-cores":1,"tag":""}'


# An annotation key and value with quotes, backslashes, control characters and non-ASCII text, as
# TVM 0.27 wrote them (bytes of a non-ASCII character as \xHH, \b and \f as \x08 and \x0C).
TVM_ESCAPES = ('["\\"va\\"l\\\\ue\\n\\xC3\\xA9\\t\\"","we\\"ird\\\\k\\ney\\xC3\\xA9\\xE4\\xB8\\xAD\\x01/",'
               '"\\x01\\x02\\x03\\x04\\x05\\x06\\x07\\x08\\t\\n\\x0B\\x0C\\r\\x0E\\x0F\\x10\\x11\\x12\\x13\\x14'
               '\\x15\\x16\\x17\\x18\\x19\\x1A\\x1B\\x1C\\x1D\\x1E\\x1F\\x7F\\xE2\\x80\\xA8\\xF0\\x9F\\x98\\x80"]')
ESCAPED_STRINGS = ['"va"l\\ue\n\u00e9\t"', 'we"ird\\k\ney\u00e9\u4e2d\x01/',
                   "".join(chr(c) for c in range(1, 32)) + "\x7f\u2028\U0001F600"]


def test_strings_are_escaped_like_tvm() -> None:
    assert tvm_json.dumps(ESCAPED_STRINGS) == TVM_ESCAPES
    assert tvm_json.loads(TVM_ESCAPES) == ESCAPED_STRINGS


def test_floats_keep_their_spelling_when_read() -> None:
    text = "[0.2,0.25,1.0,0.2000000000000000111,1e-05,10000000000]"
    value = tvm_json.loads(text)
    assert value == [0.2, 0.25, 1.0, 0.2, 1e-05, 10000000000]
    assert isinstance(value[0], tvm_json.JsonFloat) and isinstance(value[5], int)
    assert tvm_json.dumps(value) == text
    assert tvm_json.dumps([float(v) for v in value]) == "[0.2000000000000000111,0.25,1,0.2000000000000000111,1.0000000000000000818e-05,10000000000]"


def test_escaped_backslash_before_x_is_not_a_byte_escape() -> None:
    assert tvm_json.loads('["\\\\x41", "\\x41"]') == ["\\x41", "A"]


def test_malformed_json_raises_value_error() -> None:
    with pytest.raises(ValueError):
        tvm_json.loads("[1,")


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**63, 2**63) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(blacklist_categories=("Cs",))),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(st.characters(blacklist_categories=("Cs",)), max_size=5), children, max_size=4),
    max_leaves=12,
)


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(json_values)
def test_json_round_trip_property(value: object) -> None:
    text = tvm_json.dumps(value)
    back = tvm_json.loads(text)
    assert tvm_json.dumps(back) == text
    assert _same(back, value)


def _same(a: object, b: object) -> bool:
    if isinstance(b, float):
        return isinstance(a, (int, float)) and (a == b or (math.isnan(a) and math.isnan(b)))
    if isinstance(b, (list, tuple)):
        return isinstance(a, list) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(b, dict):
        return isinstance(a, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in b)
    return a == b and type(a) is type(b)


# ---------------------------------------------------------------- fixtures round trip


@pytest.mark.slow
@pytest.mark.parametrize("path", RECORD_FILES, ids=lambda p: p.relative_to(FIXTURES).as_posix())
def test_every_record_trace_round_trips_byte_for_byte(path: Path) -> None:
    lines = record_lines(path)
    assert lines
    for number, line in enumerate(lines, 1):
        original = trace_text(line)
        trace = Trace.from_json(tvm_json.loads(line)[1][0])
        assert len(trace.insts) > 0
        assert tvm_json.dumps(trace.as_json()) == original, f"{path.name}:{number}"
        # The whole line goes back out unchanged too (run_secs floats, target, args).
        assert tvm_json.dumps(tvm_json.loads(line)) == line, f"{path.name}:{number}"


def _traces(path: Path) -> list[Trace]:
    return [Trace.from_json(tvm_json.loads(line)[1][0]) for line in record_lines(path)]


@pytest.mark.slow
@pytest.mark.parametrize("generation", ["team_a_pre0.24", "team_a_pre0.17"])
def test_legacy_traces_normalize_to_tvm_027(generation: str) -> None:
    legacy_path = FIXTURES / "tvm-legacy" / generation / "database_tuning_record.json"
    current_path = FIXTURES / "tvm-0.27" / "team_a" / "database_tuning_record.json"
    current_lines = record_lines(current_path)
    legacy_lines = record_lines(legacy_path)
    assert len(legacy_lines) == len(current_lines)
    style = generation.split("_")[-1]
    for number, (old_line, new_line) in enumerate(zip(legacy_lines, current_lines), 1):
        old = Trace.from_json(tvm_json.loads(old_line)[1][0])
        assert not old.is_current
        assert old.normalized().is_current
        assert tvm_json.dumps(old.normalized().as_json()) == trace_text(new_line), f"line {number}"
        # and back: a 0.27 trace written for the older TVM gives the legacy bytes
        new = Trace.from_json(tvm_json.loads(new_line)[1][0])
        assert new.is_current
        assert tvm_json.dumps(new.legacy(style).as_json()) == trace_text(old_line), f"line {number}"
        # printing the legacy trace in the 0.27 form equals printing the 0.27 trace
        assert old.as_python() == new.as_python()


@pytest.mark.parametrize("generation", ["team_a_pre0.24", "team_a_pre0.17", "../tvm-0.27/team_a"])
def test_needs_normalizing_says_what_normalize_instruction_rewrites(generation: str) -> None:
    from msdb.schedule.instructions import needs_normalizing, normalize_instruction

    for trace in _traces(FIXTURES / "tvm-legacy" / generation / "database_tuning_record.json")[:16]:
        for inst in trace.insts:
            assert needs_normalizing(inst.kind, len(inst.attrs)) == (normalize_instruction(inst) is not inst)


def test_legacy_kinds_are_kept_as_read() -> None:
    trace = _traces(FIXTURES / "tvm-legacy" / "team_a_pre0.17" / "database_tuning_record.json")[0]
    kinds = {inst.kind for inst in trace.insts}
    assert "GetBlock" in kinds and "GetSBlock" not in kinds
    splits = [inst for inst in trace.insts if inst.kind == "Split"]
    assert splits and all(len(inst.attrs) == 1 for inst in splits)
    normalized = trace.normalized()
    assert {inst.kind for inst in normalized.insts} >= {"GetSBlock"}
    assert all(inst.attrs == (1, 0) for inst in normalized.insts if inst.kind == "Split")
    # decisions follow the rewritten instructions
    assert len(normalized.decisions) == len(trace.decisions)
    assert [normalized.decisions[i] for i in normalized.insts if i in normalized.decisions] == \
        [trace.decisions[i] for i in trace.insts if i in trace.decisions]


def test_unknown_kinds_round_trip_generically() -> None:
    text = ('[[["GetBlock",[],["compute","main"],["b0"]],["GetLoops",["b0"],[],["l1","l2"]],'
            '["Blockize",["l2"],[true],["b3"]],["Tensorize",["b3"],["dp4a",true],[]],'
            '["TransformLayout",["b0",0,1,"{\\"root\\":1}","None"],[2,true],[]],'
            '["SamplePartitionedTile",["l1"],[2,64,1,1],["v4","v5"]],["Frobnicate",["v4",[1.5,"\\"s\\""]],[{"k":"x"}],["_","l6"]]],'
            '[[5,[4,32]],[6,"anything"]]]')
    trace = Trace.from_json(tvm_json.loads(text))
    assert tvm_json.dumps(trace.as_json()) == text
    assert [inst.kind for inst in trace.insts][-1] == "Frobnicate"
    lines = trace.python_lines()
    assert lines[2] == "b3 = sch.blockize(target=l2, preserve_unit_iters=True)"
    assert lines[3] == 'sch.tensorize(block_or_loop=b3, tensor_intrin="dp4a", preserve_unit_iters=True)'
    assert lines[6] == '_, l6 = sch.frobnicate(v4, [1.5, "s"], {"k": x}, decision="anything")'


def test_outputs_are_renamed_in_order_of_definition() -> None:
    trace = Trace.from_json([[["GetSBlock", [], ["C", "main"], ["b7"]], ["GetLoops", ["b7"], [], ["l9", "l3"]],
                              ["Reorder", ["l3", "l9"], [], []]], []])
    assert trace.as_json() == [[["GetSBlock", [], ["C", "main"], ["b0"]], ["GetLoops", ["b0"], [], ["l1", "l2"]],
                                ["Reorder", ["l2", "l1"], [], []]], []]


def test_remove_postproc_drops_enter_postproc_and_after() -> None:
    trace = _traces(FIXTURES / "tvm-0.27" / "team_a" / "database_tuning_record.json")[0]
    insts, decisions = trace.as_json(remove_postproc=True)
    kinds = [inst[0] for inst in insts]
    assert "EnterPostproc" not in kinds
    full = trace.as_json()[0]
    assert full[len(insts)][0] == "EnterPostproc"
    assert full[:len(insts)] == insts
    assert all(index < len(insts) for index, _ in decisions)


def test_schedule_recorded_bools_are_written_as_tvm_integers() -> None:
    b0, l1, l2, l3 = BlockRV(), LoopRV(), LoopRV(), LoopRV()
    insts = [
        Instruction("GetSBlock", (), ("C", "main"), (b0,)),
        Instruction("GetLoops", (b0,), (), (l1,)),
        Instruction("Split", (l1, None, 4), (True, False), (l2, l3)),
        Instruction("Fuse", (l2, l3), (False,), (LoopRV(),)),
        Instruction("ComputeAt", (b0, l2), (True, -1), ()),
        Instruction("Annotate", (b0, True), ("k",), ()),
        Instruction("Blockize", (l3,), (True,), (BlockRV(),)),
    ]
    assert tvm_json.dumps(Trace(insts, {}).as_json()) == (
        '[[["GetSBlock",[],["C","main"],["b0"]],["GetLoops",["b0"],[],["l1"]],["Split",["l1","None",4],[1,0],["l2","l3"]],'
        '["Fuse",["l2","l3"],[0],["l4"]],["ComputeAt",["b0","l2"],[1,-1],[]],["Annotate",["b0",1],["k"],[]],'
        '["Blockize",["l3"],[true],["b5"]]],[]]')


# ---------------------------------------------------------------- malformed input

GOOD = [["GetSBlock", [], ["C", "main"], ["b0"]], ["GetLoops", ["b0"], [], ["l1", "l2"]],
        ["SamplePerfectTile", ["l2"], [2, 16], ["v3", "v4"]], ["Split", ["l2", "v3", "v4"], [1, 0], ["l5", "l6"]],
        ["SampleCategorical", [], [[0, 16], [0.5, 0.5]], ["v7"]]]


def _with(index: int, inst: list) -> list:
    insts = [list(i) for i in GOOD]
    insts[index] = inst
    return insts


@pytest.mark.parametrize("insts, decisions, index, fragment", [
    (_with(3, ["Split", ["l2", "v9", "v4"], [1, 0], ["l5", "l6"]]), [], 3, "'v9' is not defined"),
    (_with(1, ["GetLoops", ["b5"], [], ["l1", "l2"]]), [], 1, "'b5' is not defined"),
    (_with(3, ["Split", ["l2", "v3", "v4"], [1, 0, 0], ["l5", "l6"]]), [], 3, "attribute"),
    (_with(0, ["GetSBlock", [], ["C"], ["b0"]]), [], 0, "attribute"),
    (_with(1, ["GetLoops", ["b0", "b0"], [], ["l1", "l2"]]), [], 1, "input"),
    (_with(3, ["Split", ["l2", "v3", "v4"], [1, 0], ["l5"]]), [], 3, "defines 1 loops"),
    (_with(3, ["Split", ["b0", "v3", "v4"], [1, 0], ["l5", "l6"]]), [], 3, "must be a loop"),
    (_with(1, ["GetLoops", ["b0"], [], ["b1", "l2"]]), [], 1, "must be a loop"),
    (_with(1, ["GetLoops", ["b0"], [], ["x1", "l2"]]), [], 1, "output name"),
    (_with(1, ["GetLoops", ["b0"], [], ["b0", "l2"]]), [], 1, "already defined"),
    (_with(2, ["SamplePerfectTile", ["l2"], [3, 16], ["v3", "v4"]]), [], 2, "n=3"),
    (_with(4, ["SampleCategorical", [], [[0, 16], [0.5]], ["v7"]]), [], 4, "candidates"),
    (_with(2, ["SamplePerfectTile", ["l2"], [2, 16]]), [], 2, "[kind, inputs, attrs, outputs]"),
    (_with(2, ["SamplePerfectTile", "l2", [2, 16], ["v3", "v4"]]), [], 2, "inputs must be an array"),
    (_with(2, [7, ["l2"], [2, 16], ["v3", "v4"]]), [], 2, "kind must be"),
    (GOOD, [[2, [16]]], 2, "bad decision"),
    (GOOD, [[2, [16, "8"]]], 2, "bad decision"),
    (GOOD, [[4, 2]], 4, "out of range"),
    (GOOD, [[4, [1]]], 4, "bad decision"),
    (GOOD, [[1, [16, 8]]], 1, "not a sampling instruction"),
    (GOOD, [[9, 0]], 9, "out of range"),
    (GOOD, [[4, 0], [4, 1]], 4, "two decisions"),
])
def test_malformed_traces_name_the_instruction(insts: list, decisions: list, index: int, fragment: str) -> None:
    with pytest.raises(TraceError) as info:
        Trace.from_json([insts, decisions])
    message = str(info.value)
    assert fragment in message
    assert str(index) in message
    assert info.value.index == index
    assert isinstance(info.value, MsdbError)


@pytest.mark.parametrize("obj", [None, {}, [], [[]], [[], [], []], "[[], {}]", [[], {}], "[[], [", 7])
def test_trace_must_be_a_pair_of_arrays(obj: object) -> None:
    with pytest.raises(TraceError, match="trace must be"):
        Trace.from_json(obj)


def test_from_json_accepts_text() -> None:
    text = '[[["GetSBlock",[],["C","main"],["b0"]],["SampleCategorical",[],[[1,2],[0.2,0.8]],["v1"]]],[[1,1]]]'
    trace = Trace.from_json(text)
    assert tvm_json.dumps(trace.as_json()) == text
    assert Trace.from_json(text.encode()).as_json() == trace.as_json()


def test_decision_entry_must_be_a_pair() -> None:
    with pytest.raises(TraceError, match="trace decision 0"):
        Trace.from_json([GOOD, [[2]]])


def test_good_trace_parses() -> None:
    trace = Trace.from_json([GOOD, [[2, [16, 8]], [4, 1]]])
    assert [inst.kind for inst in trace.insts] == ["GetSBlock", "GetLoops", "SamplePerfectTile", "Split", "SampleCategorical"]
    assert trace.get_decision(trace.insts[2]) == [16, 8]
    assert isinstance(trace.insts[2].outputs[0], ExprRV)
    assert trace.as_json() == [GOOD, [[2, [16, 8]], [4, 1]]]


def test_as_json_of_a_hand_built_trace_with_a_foreign_rv_fails() -> None:
    stranger = LoopRV()
    trace = Trace([Instruction("Parallel", (stranger,), (), ())], {})
    with pytest.raises(TraceError, match="instruction 0 \\(Parallel\\)"):
        trace.as_json()
    with pytest.raises(TraceError, match="instruction 0"):
        trace.as_python()


# ---------------------------------------------------------------- properties over real traces

_ALL_LINES = [line for path in RECORD_FILES for line in record_lines(path)]


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(_ALL_LINES), st.booleans(), st.booleans())
def test_trace_transformations_are_stable(line: str, remove_postproc: bool, normalize: bool) -> None:
    trace = Trace.from_json(tvm_json.loads(line)[1][0])
    if normalize:
        trace = trace.normalized()
        assert trace.normalized().as_json() == trace.as_json()
    data = trace.as_json(remove_postproc)
    again = Trace.from_json(data)
    assert again.as_json() == data
    assert again.as_python() == trace.as_python(remove_postproc)
    simple = trace.simplified(remove_postproc)
    assert simple.simplified(remove_postproc).as_json() == simple.as_json()
    assert len(simple) <= len(again)
    # printing never fails and has one line per instruction
    assert len(trace.python_lines(legacy=True)) == len(trace)


def _decided_reference(trace: Trace) -> str | None:
    """`Trace.decided_json` by its definition: the simplified trace's JSON, None when a kept
    sampling instruction has no decision."""
    import json

    from msdb.schedule.instructions import kind_for

    kept = trace.simplified(remove_postproc=True)
    if any(kind_for(inst).is_sampling and inst not in kept.decisions for inst in kept.insts):
        return None
    return json.dumps(kept.as_json(remove_postproc=True), separators=(",", ":"))


def test_decided_json_is_the_simplified_traces_json_for_every_fixture_and_its_mutants() -> None:
    """The key a search remembers replays by, computed once per instruction sequence and then
    from the decisions alone, is the definition's for TVM's own traces of every generation, for
    traces with one decision changed (which share their instructions), with a decision
    dropped, and for the same trace read twice (other objects, same key)."""
    from msdb.schedule.instructions import kind_for

    checked = decided = 0
    for path in RECORD_FILES:
        lines = record_lines(path)[:12]
        for line in lines:
            trace = Trace.from_json(tvm_json.loads(line)[1][0])
            variants = [trace, Trace.from_json(tvm_json.loads(line)[1][0])]
            sampling = [inst for inst in trace.insts if kind_for(inst).is_sampling and inst in trace.decisions]
            for inst in sampling[:3]:
                decision = trace.get_decision(inst)
                if isinstance(decision, list) and len(decision) > 1:
                    variants.append(trace.with_decision(inst, decision[::-1], remove_postproc=True))
                elif isinstance(decision, int) and not isinstance(decision, bool):
                    variants.append(trace.with_decision(inst, decision + 1, remove_postproc=True))
                undecided = trace.decisions
                del undecided[inst]
                variants.append(Trace(trace.insts, undecided))
                for odd in (None, 0, False, []):  # decided as None is "decided"; falsy values are kept
                    variants.append(Trace(trace.insts, {**trace.decisions, inst: odd}))
            for variant in variants:
                expected = _decided_reference(variant)
                assert variant.decided_json() == expected, f"{path.name}"
                checked += 1
                decided += expected is not None
            assert variants[0].decided_json() == variants[1].decided_json()
    assert checked > 200 and 0 < decided < checked


def test_decided_json_of_a_trace_reading_an_undefined_input_answers_as_its_definition() -> None:
    """A trace one of whose instructions reads an RV nothing defined: undecided, the key is None
    (as the definition says before it serializes anything); decided, the same TraceError."""
    from msdb.ir import zoo
    from msdb.schedule import Schedule

    sch = Schedule(zoo.build("GMM", 1, 16, 16, 16), seed=0)
    block = sch.get_child_blocks(sch.get_block("root"))[0]
    loops = sch.get_loops(block)
    sch.split(loops[0], sch.sample_perfect_tile(loops[0], n=2))
    trace = sch.trace
    broken = [inst for inst in trace.insts if inst.kind != "GetLoops"]
    undecided = Trace(broken, {})
    assert undecided.decided_json() is None and _decided_reference(undecided) is None
    decided = Trace(broken, {inst: trace.decisions[inst] for inst in broken if inst in trace.decisions})
    with pytest.raises(TraceError, match="is not defined by an earlier instruction") as caught:
        decided.decided_json()
    with pytest.raises(TraceError) as expected:
        _decided_reference(decided)
    assert str(caught.value) == str(expected.value) and caught.value.index == expected.value.index
