"""TVM's run-time rules, in one place (`msdb.records.ranking`): the results the former copies
gave (the importer's `%.20g`/`min` forms, `TuningRecord`'s `any`/`format_float` forms, `msdb
verify`'s validity formula) are kept wherever they were right."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from msdb.records.ranking import (
    FAILED_RUN_SECS, is_failure, is_valid, mean_run_secs, ran, run_secs_text, sketch_is_valid, trace_text_sketch_is_valid,
)
from msdb.schedule.tvm_json import JsonFloat, dumps, format_float

finite = st.one_of(st.floats(-1e300, 1e300), st.sampled_from([FAILED_RUN_SECS, 0.0, -0.0]),
                   st.integers(-10**12, 10**12))
run_lists = st.lists(finite, max_size=5)
kinds = st.sampled_from(["GetSBlock", "EnterPostproc", "Split", "SamplePerfectTile", "A_1"])
insts = st.lists(st.tuples(kinds, st.lists(st.sampled_from(["b0", "l1", 3, None]), max_size=2))
                 .map(lambda t: [t[0], t[1], [], []]), max_size=4)


@given(run_lists)
def test_run_secs_text_is_tvms_spelling(run_secs: list[float]) -> None:
    text = run_secs_text(run_secs)
    assert text == "[" + ",".join("%.20g" % x for x in run_secs) + "]"  # the importer's form
    assert text == "[" + ",".join(map(format_float, run_secs)) + "]"  # the record API's form
    assert run_secs_text(None) is None


def test_a_float_read_from_json_keeps_its_spelling_and_names_are_json() -> None:
    assert run_secs_text([JsonFloat("0.2")]) == "[0.2]"
    assert run_secs_text([0.2]) == "[0.2000000000000000111]"
    assert run_secs_text([float("inf"), float("nan")]) == "[Infinity,NaN]"
    assert run_secs_text([float("-inf")]) == "[-Infinity]"


@given(run_lists)
def test_ran_and_mean_are_the_former_forms(run_secs: list[float]) -> None:
    assert ran(run_secs) == (bool(run_secs) and min(run_secs) < FAILED_RUN_SECS)  # the importer's form
    assert ran(run_secs) == (bool(run_secs) and any(r < FAILED_RUN_SECS for r in run_secs))  # TuningRecord's
    mean = mean_run_secs(run_secs)
    assert mean == (math.fsum(run_secs) / len(run_secs) if run_secs else None)
    assert not ran(None) and mean_run_secs(None) is None


@given(run_lists)
def test_ran_is_some_run_time_that_is_not_a_failure(run_secs: list[float]) -> None:
    assert ran(run_secs) == any(not is_failure(x) for x in run_secs)


def test_is_failure_is_the_mark_and_beyond() -> None:
    assert is_failure(FAILED_RUN_SECS) and is_failure(2e10) and is_failure(math.inf) and is_failure(math.nan)
    assert not is_failure(0.0) and not is_failure(1e9) and not is_failure(9_999_999_999.0)


@given(run_lists, insts)
def test_validity_is_verifys_formula_and_reads_off_the_text(run_secs: list[float], trace_insts: list) -> None:
    expected = (bool(run_secs) and any(x < 1e10 for x in run_secs) and bool(trace_insts)
                and trace_insts[0][0] != "EnterPostproc")
    assert is_valid(run_secs, trace_insts) == expected
    assert sketch_is_valid(trace_insts) == (bool(trace_insts) and trace_insts[0][0] != "EnterPostproc")
    for text in (dumps([trace_insts, []]), "[ [ " + dumps(trace_insts)[1:] + ", []]"):
        assert trace_text_sketch_is_valid(text) in (None, sketch_is_valid(trace_insts))
    assert trace_text_sketch_is_valid(dumps([trace_insts, []])) == sketch_is_valid(trace_insts)
