"""TuningRecord: TVM's validity, ranking mean and JSON form; ArgInfo. (Reading a record from a
TVM log line is the grammar's: tests/interop/test_grammar.py.)"""

from __future__ import annotations

import json
import math

import pytest

from msdb.ir import zoo
from msdb.records import ArgInfo, RecordFormatError, TuningRecord, Workload
from msdb.schedule import Schedule

@pytest.fixture(scope="module")
def workload() -> Workload:
    return Workload(zoo.build("matmul", 16, 16, 16))


@pytest.fixture(scope="module")
def traces(workload):
    sch = Schedule(workload.mod, seed=1)
    sch.get_loops(sch.get_block("C"))
    sch.enter_postproc()
    normal = sch.trace
    only_post = Schedule(workload.mod, seed=1)
    only_post.enter_postproc()
    return normal, only_post.trace, Schedule(workload.mod).trace


@pytest.mark.parametrize("run_secs, valid, mean", [
    (None, False, math.inf),
    ([], False, math.inf),
    ([1e10], False, 1e10),
    ([1e10, 1e10], False, 1e10),
    ([1e-3], True, 1e-3),
    ([1e-3, 3e-3], True, 2e-3),
    ([2e-3, 1e10], True, (2e-3 + 1e10) / 2),  # a failure counts in the mean
])
def test_validity_and_mean_follow_tvm(workload, traces, run_secs, valid, mean):
    rec = TuningRecord(traces[0], workload, run_secs)
    assert rec.is_valid is valid
    assert rec.mean_run_secs == pytest.approx(mean)


def test_a_trace_with_nothing_before_postproc_is_never_valid(workload, traces):
    _, only_post, empty = traces
    for trace in (only_post, empty):
        for form in (trace, trace.as_json(), json.dumps(trace.as_json())):
            assert not TuningRecord(form, workload, [1e-3]).is_valid


def test_the_trace_is_kept_in_any_form_and_converted_on_use(workload, traces):
    from msdb.schedule.tvm_json import dumps

    trace = traces[0]
    from_text = TuningRecord(dumps(trace.as_json()), workload, [1e-3])  # TVM's spelling, as logs and databases hold
    from_json = TuningRecord(trace.as_json(), workload, [1e-3])
    from_trace = TuningRecord(trace, workload, [1e-3])
    assert from_text.trace.as_json() == from_json.trace_json == from_trace.trace_json == trace.as_json()
    assert from_text.trace_hash() == from_trace.trace_hash()
    assert from_text.is_valid and from_json.is_valid and from_trace.is_valid


def test_arg_info(workload):
    assert ArgInfo.from_prim_func(workload.mod) == [ArgInfo("float32", (16, 16))] * 3
    assert ArgInfo.from_json(["TENSOR", "int8", [4, 8]]).as_json() == ["TENSOR", "int8", [4, 8]]
    with pytest.raises(RecordFormatError, match="TENSOR"):
        ArgInfo.from_json(["SCALAR", "int32"])
