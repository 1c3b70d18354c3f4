"""The TVM line grammar's quick path (`LineParser._quick`, which checks most of a trace as text)
and its general path (`LineParser.record` with the JSON scanner) must give the same fields for
every line the quick path accepts. Property test: record lines of a real TVM log, edited where the quick path
looks (instructions after EnterPostproc, decisions, run_secs) with JSON fragments chosen to sit
on its edges (numbers TVM would respell, escapes, Split-like lists, legacy kinds, whitespace)."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
import pytest

from msdb.interop.tvm.grammar import LineParser
from tests.cli.helpers import RECORD_FILE, TEAMS, WORKLOAD_FILE

LINES = (TEAMS["team_a"] / RECORD_FILE).read_text().splitlines()[:4]
WORKLOADS = [object()] * 4  # placeholders: traces are not checked against them
#: team_a's GMM, decoded: traces are checked against its blocks (`trace_fit`)
GMM = [LineParser().workload((TEAMS["team_a"] / WORKLOAD_FILE).read_text().splitlines()[0])] * 4
SCALARS = ["0", "-0", "1.5", "0.1", "1e5", "1E+5", "-2.50", "1e999", "true", "false", "null", '"a"', '""', '"é"',
           '"\\u00e9"', '"\\n"', '"a b"', '"GetBlock"', '"Split"', '"\\u0047etBlock"', '"\x7f"', '"\u2028"', "NaN",
           "-Infinity", "123456789012345678901234567890", "00", "1.", "-"]
KINDS = ['"Foo"', '"GetBlock"', '"Split"', '"EnterPostproc"', '"Get\\u0042lock"', '"X y"', '"é"', '"_a1"', '"1a"']

scalar = st.sampled_from(SCALARS)
fragment = st.recursive(scalar | scalar.map(lambda s: f'["Split",[],[{s}],[]]'),
                        lambda inner: st.lists(inner, max_size=3).map(lambda xs: "[" + ",".join(xs) + "]"),
                        max_leaves=6)
fragments = st.lists(fragment, max_size=3).map(",".join)


def _parser(general: bool, unknown_kinds: bool = True) -> LineParser:
    parser = LineParser(unknown_kinds=unknown_kinds)
    for line in LINES:  # the sketches, targets and tails are known
        assert type(parser.record(line, WORKLOADS, WORKLOAD_FILE)) is tuple
        assert type(parser.record(line, GMM, WORKLOAD_FILE)) is tuple
    if general:
        parser._quick = lambda *args: None  # type: ignore[method-assign]
    return parser


# any instruction kind (the quick path's text checks at their widest), and TVM's kinds only
QUICK = _parser(general=False)
GENERAL = _parser(general=True)
QUICK_TVM = _parser(general=False, unknown_kinds=False)
GENERAL_TVM = _parser(general=True, unknown_kinds=False)


@st.composite
def edited_lines(draw: st.DrawFn) -> str:
    compact = json.dumps(json.loads(draw(st.sampled_from(LINES))), separators=(",", ":"), ensure_ascii=False)
    enter = compact.index('["EnterPostproc",[],[],[]]')
    insts_end = compact.index("]],[[", enter) + 1  # after the last instruction
    where = draw(st.sampled_from(["instruction", "decision", "run_secs", "character"]))
    if where == "instruction":
        inst = f"[{draw(st.sampled_from(KINDS))},[{draw(fragments)}],[{draw(fragments)}],[{draw(fragments)}]]"
        return compact[:insts_end] + "," + inst + compact[insts_end:]
    if where == "decision":
        index = draw(st.sampled_from(["0", "3", "-1", "200", "true", "1.0"]))
        return compact[:insts_end + 3] + f"[{index},{draw(fragment)}]," + compact[insts_end + 3:]
    if where == "run_secs":
        trace, run_secs = json.loads(compact)[1][:2]
        head = json.dumps(trace, separators=(",", ":"), ensure_ascii=False) + ","
        at = compact.index(head) + len(head)
        old = json.dumps(run_secs, separators=(",", ":"))
        assert compact.startswith(old, at)
        return compact[:at] + "[" + draw(fragments) + "]" + compact[at + len(old):]
    at = draw(st.integers(enter, insts_end - 1))
    return compact[:at] + draw(st.sampled_from(['"', "[", "]", ",", " ", "\\", "0", "Split", "\t"])) + compact[at + 1:]


@pytest.mark.slow
@settings(max_examples=400, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(edited_lines())
def test_a_line_the_quick_path_accepts_gets_the_general_paths_row(line: str) -> None:
    for quick_parser, general_parser, workloads in ((QUICK, GENERAL, WORKLOADS), (QUICK_TVM, GENERAL_TVM, GMM)):
        quick = quick_parser._quick(line, 4, workloads)
        if quick is None:
            continue  # the general path decides alone
        general = general_parser.record(line, workloads, WORKLOAD_FILE)
        assert type(general) is tuple, general
        assert general == quick


def test_the_edits_reach_the_quick_path() -> None:
    """The property above is not vacuous: edited lines the quick path accepts exist."""
    compact = json.dumps(json.loads(LINES[0]), separators=(",", ":"))
    enter = compact.index('["EnterPostproc",[],[],[]]')
    insts_end = compact.index("]],[[", enter) + 1
    line = compact[:insts_end] + ',["Foo",["a",1.5],[[0,"x"]],["b"]]' + compact[insts_end:]
    assert QUICK._quick(line, 4, WORKLOADS) is not None
    # a kind TVM does not have: the general path names it unless unknown kinds are allowed
    assert QUICK_TVM._quick(line, 4, WORKLOADS) is None
    assert "kind \"Foo\", which TVM does not have" in GENERAL_TVM.record(line, WORKLOADS, WORKLOAD_FILE)
    line = compact[:insts_end] + ',["Annotate",["a",1.5],[[0,"x"]],["b"]]' + compact[insts_end:]
    assert QUICK_TVM._quick(line, 4, WORKLOADS) is not None
