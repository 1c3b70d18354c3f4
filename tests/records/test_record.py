"""TuningRecord: TVM's validity, ranking mean and JSON form; ArgInfo."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from msdb.ir import zoo
from msdb.records import ArgInfo, RecordFormatError, Target, TuningRecord, Workload
from msdb.schedule import Schedule

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "fixtures" / "tvm-0.27" / "team_a" / "database_tuning_record.json"


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


def test_tvm_record_json_round_trips():
    line = FIXTURE.read_text().splitlines()[0]
    index, body = json.loads(line)
    rec = TuningRecord.from_json(body, Workload(zoo.workload("GMM")))
    assert index == 0
    assert rec.target == Target({"keys": ["cpu"], "kind": "llvm", "mtriple": "x86_64-conda-linux-gnu", "num-cores": 1, "tag": ""})
    assert rec.args_info == (ArgInfo("float32", (1, 128, 128)),) * 3
    assert rec.as_json() == body
    assert rec.is_valid and rec.mean_run_secs == body[1][0]


@pytest.mark.parametrize("bad, message", [
    ({"trace": []}, "a tuning record is"),
    ([[["GetSBlock"]], []], "a trace is"),
    ([[[["GetSBlock", [], []]], []]], "an instruction is"),
    ([[[], [[0]]]], "a decision is"),
    ([[[], []], ["fast"]], "run_secs must be a list of numbers"),
    ([[[], []], None, "llvm mcpu=x", None], "option 'mcpu=x' is not"),
])
def test_malformed_record_json_is_refused(workload, bad, message):
    with pytest.raises(Exception, match=message) as info:
        TuningRecord.from_json(bad, workload)
    from msdb.errors import MsdbError

    assert isinstance(info.value, MsdbError)


def test_old_cli_target_strings_in_records_are_parsed(workload):
    rec = TuningRecord.from_json([[[], []], [1e-3], "llvm -num-cores=4", None], workload)
    assert rec.target == Target({"kind": "llvm", "num-cores": 4})


def test_arg_info(workload):
    assert ArgInfo.from_prim_func(workload.mod) == [ArgInfo("float32", (16, 16))] * 3
    assert ArgInfo.from_json(["TENSOR", "int8", [4, 8]]).as_json() == ["TENSOR", "int8", [4, 8]]
    with pytest.raises(RecordFormatError, match="TENSOR"):
        ArgInfo.from_json(["SCALAR", "int32"])
