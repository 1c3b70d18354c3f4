"""The one TVM line grammar (`msdb.interop.tvm.grammar`): records and workloads read from and
written as TVM's lines, and `JSONDatabase` and `msdb import` accepting and rejecting the same
lines for the same reasons (they read through the one grammar)."""

from __future__ import annotations

import json
import pathlib
import shutil

import pytest

from msdb.database import JSONDatabase
from msdb.errors import MsdbError
from msdb.hashing import structural_equal, structural_hash
from msdb.interop.tvm.grammar import BadTvmLine, payload_of, record_from_line, workload_from_line, workload_line
from msdb.interop.tvm.import_reader import read_import
from msdb.interop.tvm.workdir import RECORD_FILE, WORKLOAD_FILE
from msdb.ir import zoo
from msdb.records import ArgInfo, Target, Workload
from msdb.schedule.tvm_json import dumps
from tests.cli.helpers import TEAMS, legacy_payload

LINES = (TEAMS["team_a"] / RECORD_FILE).read_text().splitlines()


@pytest.fixture(scope="module")
def workload() -> Workload:
    return Workload(zoo.build("matmul", 16, 16, 16))


# ---------------------------------------------------------------- records (moved from tests/records)


def test_tvm_record_line_round_trips() -> None:
    index, body = json.loads(LINES[0])
    rec = record_from_line(LINES[0], [Workload(zoo.workload("GMM"))])
    assert index == 0
    assert rec.target == Target({"keys": ["cpu"], "kind": "llvm", "mtriple": "x86_64-conda-linux-gnu", "num-cores": 1, "tag": ""})
    assert rec.args_info == (ArgInfo("float32", (1, 128, 128)),) * 3
    assert rec.as_json() == body
    assert rec.is_valid and rec.mean_run_secs == body[1][0]


@pytest.mark.parametrize("bad, message", [
    ({"trace": []}, "expected [trace, run_secs, target, args_info] after the workload index"),
    ([[["GetSBlock"]], []], "trace must be [instructions, decisions]"),
    ([[[["GetSBlock", [], []]], []]], "trace instruction 0 is not [kind, [inputs], [attrs], [outputs]]"),
    ([[[], [[0]]]], "trace decision 0 is not [instruction_index, decision]"),
    ([[[], []], ["fast"]], "run_secs must be a list of numbers"),
    ([[[], []], None, "llvm mcpu=x", None], "option 'mcpu=x' is not"),
])
def test_malformed_record_lines_are_refused(workload: Workload, bad: object, message: str) -> None:
    with pytest.raises(BadTvmLine) as info:
        record_from_line(json.dumps([0, bad]), [workload])
    assert message in str(info.value)
    assert isinstance(info.value, MsdbError)


def test_old_cli_target_strings_in_records_are_parsed(workload: Workload) -> None:
    rec = record_from_line(json.dumps([0, [[[], []], [1e-3], "llvm -num-cores=4", None]]), [workload])
    assert rec.target == Target({"kind": "llvm", "num-cores": 4})


# ---------------------------------------------------------------- workloads (moved from tests/records)


def test_tvm_line_form_round_trips_through_tvms_graph_encoding() -> None:
    mod = zoo.build("matmul_bias", 8, 8, 8)
    text = workload_line(Workload(mod))
    line = json.loads(text)
    assert line[0] == str(int(structural_hash(mod), 16))
    back = workload_from_line(text)
    assert back.tvm_shash == line[0] and back.tvm_payload == line[1]
    assert structural_equal(back.mod, mod)
    assert payload_of(back) == line[1]  # an imported payload is kept as it was


@pytest.mark.parametrize("bad, message", [
    (["1", "%%%"], "not valid base64"),
    (["1", "AAAA"], "fewer than the 8-byte length prefix"),
    (["1"], "expected a workload line"),
])
def test_bad_workload_lines(bad: list[str], message: str) -> None:
    with pytest.raises(BadTvmLine, match=message):
        workload_from_line(json.dumps(bad))


# ---------------------------------------------------------------- one grammar, two readers


def _compact(value: object) -> str:
    return json.dumps(value, separators=(",", ":"))


def _edge_work_dir(root: pathlib.Path) -> pathlib.Path:
    """team_a with a line of every kind both readers must judge: good ones in TVM 0.27's compact
    form, in other spellings, in older TVM generations' instruction names; and bad ones of every
    reason the grammar gives, at the workload and the record level."""
    wd = root / "wd"
    shutil.copytree(TEAMS["team_a"], wd)
    gmm, dense = (wd / WORKLOAD_FILE).read_text().splitlines()
    shash = json.loads(dense)[0]
    payload = json.loads(dense)[1]
    workload_lines = [gmm.encode(), b"", dense.encode(), json.dumps([shash, "not base64!"]).encode(), b'["1", "\xff"]',
                      json.dumps([shash, legacy_payload()]).encode(), json.dumps([int(shash), payload]).encode(),
                      json.dumps(["abc", payload]).encode()]
    (wd / WORKLOAD_FILE).write_bytes(b"\n".join(workload_lines) + b"\n")
    records = [json.loads(line) for line in LINES[:6]]
    first = records[0]
    legacy = [first[0], [[[["GetBlock"] + i[1:] if i[0] == "GetSBlock" else i for i in first[1][0][0]],
                          first[1][0][1]]] + first[1][1:]]
    lines = LINES[:4] + [
        "",                                                               # blank: no line at all
        json.dumps(records[4]),                                           # spaces: another spelling
        _compact(legacy),                                                 # GetBlock: rewritten
        _compact([2, records[5][1]]),                                     # a bad workload line
        _compact([9, records[5][1]]),                                     # no such workload
        _compact([4, records[5][1]]),                                     # an opaque workload
        LINES[5][:300],                                                   # truncated
        "not json",
        _compact({"record": records[5]}),
        _compact([0, [records[5][1][0], ["fast"]] + records[5][1][2:]]),
        _compact([0, [records[5][1][0], [float("inf")]] + records[5][1][2:]]),
        _compact([0, records[5][1][:2] + ["llvm num-cores=4", None]]),
        _compact([0, records[5][1][:2] + [5, None]]),
        _compact([0, records[5][1][:3] + [[["TENSOR", "float32"]]]]),
        _compact([0, [[records[5][1][0][0], [[999, 1]]]] + records[5][1][1:]]),
        _compact([0, [[[["GetSBlock", []]], []]] + records[5][1][1:]]),
        _compact([0, [records[5][1][0], None, None, None]]),              # null run_secs: kept, invalid
        _compact([0, [records[5][1][0], [1e10], None, None]]),            # a failure: kept, invalid
        _compact([1, json.loads(LINES[64])[1]]),                           # a record of the second workload
        _compact([1, records[5][1]]),                                     # GMM's trace on dense: cannot belong
        _compact([3, records[5][1]]),                                     # a line that was not UTF-8
        _compact([5, records[5][1]]),                                     # an int shash: a bad line
    ]
    (wd / RECORD_FILE).write_bytes(b"\n".join([line.encode() for line in lines] + [b"[0,\xff]"]) + b"\n")
    return wd


def test_json_database_and_the_importer_accept_and_reject_the_same_lines(tmp_path: pathlib.Path) -> None:
    wd = _edge_work_dir(tmp_path)
    plan = read_import([wd], workers=1)
    db = JSONDatabase(work_dir=wd, allow_missing=False)
    blank = "empty line (TVM 0.27 crashes on it)"
    imported_bad = {(str(b.path), b.line): b.reason for b in plan.bad_lines}
    loaded_bad = {(e.path, e.line): e.reason for e in db.load_errors if e.reason != blank}
    assert imported_bad.keys() == loaded_bad.keys()
    for where, reason in imported_bad.items():
        if "--opaque" in reason:  # the importer adds how to keep it: an option JSONDatabase lacks
            assert reason.startswith(loaded_bad[where] + " (--opaque imports it")
        else:
            assert reason == loaded_bad[where], where
    assert {(e.path, e.line) for e in db.load_errors if e.reason == blank} == {
        (str(wd / WORKLOAD_FILE), 2), (str(wd / RECORD_FILE), 5)}
    reasons = " | ".join(imported_bad.values())
    for expected in ("workload payload is not valid base64", "line is not UTF-8 text", "legacy (<= 0.21) graph",
                     "is not a decimal integer", "which is a bad line of", "but database_workload.json has 7", "expected a workload line",
                     "truncated JSON", "invalid JSON", "expected a record line", "run_secs must be a list",
                     "not a finite number", "bad target", "target must be a config object", "args_info",
                     "points at instruction 999", "trace instruction 0 is not", "cannot belong to workload 1"):
        assert expected in reasons, expected

    (rows,) = [workdir.records for workdir in plan.workdirs]
    records = db.get_all_tuning_records()
    assert len(rows) == len(records) == 9
    assert plan.workdirs[0].normalized == 1
    for row, record in zip(rows, records):
        _, _, target_key, trace_text, trace_hash, run_text, mean, valid, args_text = row
        assert record.storage_fields() == (trace_text, trace_hash, run_text, mean, valid)
        assert record.target == plan.targets[target_key]
        args = record.args_info_json()
        assert (None if args is None else dumps(args)) == args_text
    assert records[5].trace_text == records[0].trace_text  # GetBlock spelled as TVM 0.27 does
