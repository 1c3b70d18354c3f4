"""Importing TVM work_dirs into an msdb database (library level): counts, dedup, generations,
provenance, opaque payloads, run_secs and targets as TVM has them, and bad lines."""

from __future__ import annotations

import json
import pathlib
import sys

import pytest

from msdb.database import tvm_import
from msdb.database.location import open_database
from msdb.database.rows import OPAQUE_LEGACY, OPAQUE_UNSUPPORTED
from msdb.database.tvm_import import ImportAborted, ImportWriter, import_tvm
from msdb.interop.tvm import grammar, import_reader
from msdb.interop.tvm.import_reader import read_import
from msdb.interop.tvm.trace_check import normalize_trace_json
from msdb.interop.tvm.workdir import WorkDirError
from msdb.schedule import Trace
from msdb.schedule.tvm_json import dumps
from tests.cli.helpers import (
    LEGACY, RECORD_FILE, TEAMS, WORKLOAD_FILE, best_mean_by_tvm_shash, copy_team, edit_lines, legacy_payload, query,
    record_keys, row_counts, snapshot, with_unknown_node,
)


@pytest.fixture
def db_path(tmp_path: pathlib.Path) -> pathlib.Path:
    return tmp_path / "msdb.sqlite"


def _import(db_path: pathlib.Path, *paths: pathlib.Path, **options):
    db = open_database(db_path, create=True)
    try:
        return import_tvm(db, list(paths), **options)
    finally:
        db.close()


def test_three_teams_give_five_workloads_and_384_records(db_path: pathlib.Path) -> None:
    summary = _import(db_path, TEAMS["team_a"], TEAMS["team_b"], TEAMS["team_c"], user="alice", host="lab1")
    assert (summary.workloads_new, summary.workloads_known) == (5, 1)  # GMM is in team_a and team_b
    assert (summary.records_new, summary.records_duplicate) == (384, 0)
    assert summary.records_invalid == 1  # team_a holds one failed run ([1e10]); kept, as TVM keeps it
    counts = row_counts(db_path)
    assert counts["workload"] == 5 and counts["tuning_record"] == 384 and counts["source"] == 3
    names = [row[0] for row in query(db_path, "SELECT name FROM workload ORDER BY id")]
    assert names == ["GMM", "linear", "C2D", "C1D", "DEP"]


def test_reimport_changes_nothing(db_path: pathlib.Path) -> None:
    _import(db_path, TEAMS["team_a"], TEAMS["team_b"], TEAMS["team_c"])
    before = snapshot(db_path)
    summary = _import(db_path, TEAMS["team_c"], TEAMS["team_b"], TEAMS["team_a"])
    assert (summary.workloads_new, summary.workloads_known) == (0, 6)
    assert (summary.records_new, summary.records_duplicate) == (0, 384)
    assert snapshot(db_path)[1:] == before[1:]


def test_provenance_is_recorded(db_path: pathlib.Path) -> None:
    import hashlib

    _import(db_path, TEAMS["team_a"], user="alice", host="lab1")
    rows = query(db_path, "SELECT kind, location, sha256, username, host, tvm_version, msdb_version, created_at, "
                          "workload_sha256 FROM source")
    assert len(rows) == 1
    kind, location, sha, user, host, tvm_version, msdb_version, created, workload_sha = rows[0]
    record_file = TEAMS["team_a"] / RECORD_FILE
    assert (kind, location, user, host, tvm_version) == ("import", str(record_file.resolve()), "alice", "lab1",
                                                         "0.27.0.post1")
    assert sha == hashlib.sha256(record_file.read_bytes()).hexdigest()
    assert workload_sha == hashlib.sha256((TEAMS["team_a"] / WORKLOAD_FILE).read_bytes()).hexdigest()
    assert msdb_version and created
    tvm_shashes = {row[0] for row in query(db_path, "SELECT tvm_shash FROM workload")}
    assert tvm_shashes == {json.loads(line)[0] for line in (TEAMS["team_a"] / WORKLOAD_FILE).read_text().splitlines()}
    payloads = [row[0] for row in query(db_path, "SELECT tvm_payload FROM workload ORDER BY id")]
    assert payloads == [json.loads(line)[1] for line in (TEAMS["team_a"] / WORKLOAD_FILE).read_text().splitlines()]


@pytest.mark.parametrize("legacy", sorted(LEGACY))
def test_legacy_generations_import_to_the_same_records_as_team_a(tmp_path: pathlib.Path, legacy: str) -> None:
    _import(tmp_path / "new.sqlite", TEAMS["team_a"])
    summary = _import(tmp_path / "old.sqlite", LEGACY[legacy])
    assert summary.records_new == 128
    new_keys = record_keys(tmp_path / "new.sqlite")
    old_keys = record_keys(tmp_path / "old.sqlite")
    strip = lambda keys: {k[:5] for k in keys}  # noqa: E731 - provenance differs (another file)
    assert strip(old_keys) == strip(new_keys)
    # and into a database that has team_a already, nothing is new
    again = _import(tmp_path / "new.sqlite", LEGACY[legacy])
    assert (again.records_new, again.records_duplicate, again.workloads_new) == (0, 128, 0)


@pytest.mark.parametrize("legacy", sorted(LEGACY))
def test_trace_normalization_agrees_with_trace_normalized(legacy: str) -> None:
    for line in (LEGACY[legacy] / RECORD_FILE).read_text().splitlines()[:20]:
        trace = json.loads(line)[1][0]
        assert dumps(normalize_trace_json(trace)) == dumps(Trace.from_json(trace).normalized().as_json())


def test_the_same_plan_with_parallel_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(import_reader, "_CHUNK", 40)
    one = read_import([TEAMS["team_a"], LEGACY["team_a_pre0.17"]], workers=1)
    two = read_import([TEAMS["team_a"], LEGACY["team_a_pre0.17"]], workers=2)
    assert [wd.records for wd in one.workdirs] == [wd.records for wd in two.workdirs]
    assert [wd.normalized for wd in two.workdirs] == [0, 128]
    assert {k: v for k, v in one.targets.items()} == {k: v for k, v in two.targets.items()}


def test_parallel_workers_report_bad_lines_in_order(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(import_reader, "_CHUNK", 30)
    wd = copy_team("team_a", tmp_path / "wd")
    edit_lines(wd / RECORD_FILE, lambda ls: [ls[0][:50] + "\n"] + ls[1:70] + ['[7,[[[],[]],null,null,null]]\n'] + ls[70:])
    one = read_import([wd], workers=1)
    two = read_import([wd], workers=2)
    assert [str(b) for b in one.bad_lines] == [str(b) for b in two.bad_lines]
    assert [b.line for b in two.bad_lines] == [1, 71]


def test_run_secs_null_empty_and_failed_are_invalid_as_in_tvm(tmp_path: pathlib.Path) -> None:
    wd = copy_team("team_c", tmp_path / "wd")

    def edit(lines: list[str]) -> list[str]:
        out = []
        for i, run_secs in enumerate([None, [], [1e10], [1e10, 2e-3]]):
            record = json.loads(lines[i])
            record[1][1] = run_secs
            out.append(dumps(record) + "\n")
        return out + lines[4:]

    edit_lines(wd / RECORD_FILE, edit)
    summary = _import(tmp_path / "db.sqlite", wd)
    assert summary.records_invalid == 3
    rows = query(tmp_path / "db.sqlite", "SELECT run_secs, mean_run_secs, is_valid FROM tuning_record ORDER BY id LIMIT 4")
    assert rows == [(None, None, 0), ("[]", None, 0), ("[10000000000]", 1e10, 0),
                    ("[10000000000,0.0020000000000000000416]", (1e10 + 2e-3) / 2, 1)]


def test_target_strings_parse_like_their_dicts(tmp_path: pathlib.Path) -> None:
    wd = copy_team("team_c", tmp_path / "wd")

    def edit(lines: list[str]) -> list[str]:
        record = json.loads(lines[0])
        record[1][2] = "llvm -mtriple=x86_64-conda-linux-gnu -num-cores=1"
        other = json.loads(lines[1])
        other[1][2] = "llvm -num-cores=4"
        return [dumps(record) + "\n", dumps(other) + "\n"] + lines[2:]

    edit_lines(wd / RECORD_FILE, edit)
    _import(tmp_path / "db.sqlite", wd)
    configs = [json.loads(row[0]) for row in query(tmp_path / "db.sqlite", "SELECT config FROM target ORDER BY id")]
    assert configs == [
        {"keys": ["cpu"], "kind": "llvm", "mtriple": "x86_64-conda-linux-gnu", "num-cores": 1, "tag": ""},
        {"keys": ["cpu"], "kind": "llvm", "num-cores": 4, "tag": ""},
    ]


def test_model_option_records_tasks(db_path: pathlib.Path) -> None:
    _import(db_path, TEAMS["team_a"], model="mlp")
    _import(db_path, TEAMS["team_b"], model="mlp")
    assert query(db_path, "SELECT name FROM model") == [("mlp",)]
    assert query(db_path, "SELECT t.name, w.name FROM task t JOIN workload w ON w.id = t.workload_id ORDER BY t.id") == [
        ("GMM", "GMM"), ("linear", "linear"), ("C2D", "C2D")]


def test_best_mean_matches_the_files(db_path: pathlib.Path) -> None:
    _import(db_path, *TEAMS.values())
    expected = best_mean_by_tvm_shash(*TEAMS.values())
    rows = query(db_path, "SELECT w.tvm_shash, MIN(r.mean_run_secs) FROM tuning_record r JOIN workload w "
                          "ON w.id = r.workload_id WHERE r.is_valid GROUP BY w.id")
    assert {shash: best for shash, best in rows} == pytest.approx(expected, rel=1e-15)


# ---------------------------------------------------------------- opaque payloads


def _with_workload_payload(tmp_path: pathlib.Path, make: object) -> pathlib.Path:
    wd = copy_team("team_c", tmp_path / "wd")

    def edit(lines: list[str]) -> list[str]:
        shash, payload = json.loads(lines[1])
        return [lines[0], json.dumps([shash, make(payload)]) + "\n"]  # type: ignore[operator]

    edit_lines(wd / WORKLOAD_FILE, edit)
    return wd


def test_legacy_graph_is_refused_by_name_unless_opaque(tmp_path: pathlib.Path) -> None:
    wd = _with_workload_payload(tmp_path, lambda _: legacy_payload())
    with pytest.raises(ImportAborted) as info:
        _import(tmp_path / "db.sqlite", wd)
    message = str(info.value)
    assert message.startswith(f"{wd / WORKLOAD_FILE}:2: workload is in TVM's legacy (<= 0.21) graph format")
    assert "--opaque" in message and "(and 64 more bad lines)" in message
    assert row_counts(tmp_path / "db.sqlite")["workload"] == 0

    summary = _import(tmp_path / "db.sqlite", wd, opaque=True)
    assert (summary.workloads_new, summary.records_new) == (2, 128)
    assert len(summary.opaque) == 1 and "opaque payload (TVM shash 9915929228997527995)" in summary.opaque[0]
    row = query(tmp_path / "db.sqlite", "SELECT shash, ir_format, tvm_shash, tvm_payload FROM workload WHERE id = 2")[0]
    assert row == (format(9915929228997527995, "016x"), OPAQUE_LEGACY, "9915929228997527995", legacy_payload())
    again = _import(tmp_path / "db.sqlite", wd, opaque=True)
    assert (again.workloads_new, again.records_new) == (0, 0)


def test_unknown_node_type_is_named_and_importable_as_opaque(tmp_path: pathlib.Path) -> None:
    wd = _with_workload_payload(tmp_path, with_unknown_node)
    with pytest.raises(ImportAborted, match=r"database_workload.json:2: unsupported node type 'tirx.Frobnicate'"):
        _import(tmp_path / "db.sqlite", wd)
    first_two = {0: 0, 1: 0}

    def keep(lines: list[str]) -> list[str]:  # two records of each workload keep the replay short
        out = []
        for line in lines:
            index = json.loads(line)[0]
            if first_two[index] < 2:
                first_two[index] += 1
                out.append(line)
        return out

    edit_lines(wd / RECORD_FILE, keep)
    summary = _import(tmp_path / "db.sqlite", wd, opaque=True, verify=True)
    assert summary.records_new == 4
    assert summary.replayed == 2 and summary.replay_failures == []  # the opaque workload's are never replayed
    assert query(tmp_path / "db.sqlite", "SELECT ir_format FROM workload ORDER BY id")[1] == (OPAQUE_UNSUPPORTED,)


# ---------------------------------------------------------------- bad lines


def test_bad_line_writes_nothing_and_skip_bad_imports_the_rest(tmp_path: pathlib.Path) -> None:
    db_path = tmp_path / "db.sqlite"
    _import(db_path, TEAMS["team_c"])
    before = snapshot(db_path)
    wd = copy_team("team_a", tmp_path / "wd")
    edit_lines(wd / RECORD_FILE, lambda ls: ls[:-1] + [ls[-1][: len(ls[-1]) // 2]])
    with pytest.raises(ImportAborted, match=r"database_tuning_record.json:128: truncated JSON"):
        _import(db_path, wd)
    assert snapshot(db_path) == before
    summary = _import(db_path, wd, skip_bad=True)
    assert summary.records_new == 127 and [b.line for b in summary.bad_lines] == [128]


def test_blank_lines_are_ignored(tmp_path: pathlib.Path) -> None:
    wd = copy_team("team_a", tmp_path / "wd")
    edit_lines(wd / RECORD_FILE, lambda ls: ls[:5] + ["\n", "  \n"] + ls[5:] + ["\n"])
    edit_lines(wd / WORKLOAD_FILE, lambda ls: ["\n"] + ls)
    summary = _import(tmp_path / "db.sqlite", wd)
    assert summary.records_new == 128 and summary.bad_lines == []


@pytest.mark.parametrize("edit, reason", [
    (lambda r: [5, r[1]], "record points at workload index 5, but database_workload.json has 2 workload(s)"),
    (lambda r: [0, [r[1][0], r[1][1], "llvm num-cores=4", r[1][3]]], "bad target: target string 'llvm num-cores=4': option 'num-cores=4' is not of the form -key=value"),
    (lambda r: [0, [r[1][0], r[1][1], "nosuchkind", r[1][3]]], "unknown target kind 'nosuchkind'"),
    (lambda r: [0, [r[1][0], ["fast"], r[1][2], r[1][3]]], "run_secs must be a list of numbers or null"),
    (lambda r: [0, [[r[1][0][0], [[99, 1]]], r[1][1], r[1][2], r[1][3]]], "trace decision 0 points at instruction 99"),
    (lambda r: [0, [[[["GetSBlock", []]], []], r[1][1], r[1][2], r[1][3]]], "trace instruction 0 is not [kind"),
    (lambda r: [0, [r[1][0], r[1][1], r[1][2], [["TENSOR", "float32"]]]], "args_info"),
    (lambda r: {"record": r}, "expected a record line"),
])
def test_bad_record_lines_name_file_and_line(tmp_path: pathlib.Path, edit: object, reason: str) -> None:
    wd = copy_team("team_c", tmp_path / "wd")
    edit_lines(wd / RECORD_FILE, lambda ls: ls[:2] + [json.dumps(edit(json.loads(ls[2]))) + "\n"] + ls[3:])  # type: ignore[operator]
    plan = read_import([wd])
    assert len(plan.bad_lines) == 1
    assert str(plan.bad_lines[0]).startswith(f"{wd / RECORD_FILE}:3: ")
    assert reason in str(plan.bad_lines[0])


def test_records_of_a_bad_workload_line_are_bad_too(tmp_path: pathlib.Path) -> None:
    wd = copy_team("team_c", tmp_path / "wd")
    edit_lines(wd / WORKLOAD_FILE, lambda ls: [ls[0], '["1", "not base64!"]\n'])
    plan = read_import([wd])
    assert str(plan.bad_lines[0]).startswith(f"{wd / WORKLOAD_FILE}:2: workload payload is not valid base64")
    assert len(plan.bad_lines) == 65
    assert "which is a bad line of database_workload.json" in str(plan.bad_lines[1])


def test_lines_in_other_json_spellings_import_the_same(tmp_path: pathlib.Path) -> None:
    wd = copy_team("team_c", tmp_path / "wd")
    edit_lines(wd / RECORD_FILE, lambda ls: [json.dumps(json.loads(line), indent=None) + "\n" for line in ls])
    _import(tmp_path / "spaced.sqlite", wd)
    _import(tmp_path / "plain.sqlite", TEAMS["team_c"])
    strip = lambda keys: {k[:5] for k in keys}  # noqa: E731
    assert strip(record_keys(tmp_path / "spaced.sqlite")) == strip(record_keys(tmp_path / "plain.sqlite"))


def test_paths_pairs_and_errors(tmp_path: pathlib.Path) -> None:
    team = TEAMS["team_b"]
    assert read_import([team / RECORD_FILE, team / WORKLOAD_FILE]).n_records == 128  # either order
    with pytest.raises(WorkDirError, match="needs its partner"):
        read_import([team / WORKLOAD_FILE])
    with pytest.raises(WorkDirError, match="no such file or directory"):
        read_import([tmp_path / "missing"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(WorkDirError, match=r"not a MetaSchedule work_dir \(missing database_workload.json, "
                                           r"database_tuning_record.json\)"):
        read_import([tmp_path / "empty"])


def test_verify_refuses_traces_that_do_not_replay(tmp_path: pathlib.Path) -> None:
    """A trace that fits its workload's blocks and loops but does not replay (a tile factor
    of 0) is a bad line under `verify`: it stops the import, or is left out and listed with
    `skip_bad`."""
    wd = copy_team("team_a", tmp_path / "wd")

    def edit(lines: list[str]) -> list[str]:
        record = json.loads(lines[1])
        record[1][0][1][0][1] = [0, 1, 1, 1]  # a tile factor of 0
        return [dumps(record) + "\n" for record in [json.loads(lines[0]), record]]

    edit_lines(wd / RECORD_FILE, edit)
    db = tmp_path / "db.sqlite"
    with pytest.raises(ImportAborted, match=r":2: replay failed: .*nothing was imported"):
        _import(db, wd, verify=True)
    assert query(db, "SELECT COUNT(*) FROM tuning_record") == [(0,)]
    summary = _import(db, wd, verify=True, skip_bad=True)
    assert summary.replayed == 2 and summary.records_new == 1
    assert len(summary.replay_failures) == 1
    assert summary.replay_failures[0].startswith(f"{wd / RECORD_FILE}:2: replay failed: ")


def test_a_workload_msdb_had_gets_tvms_payload(db_path: pathlib.Path) -> None:
    from msdb.ir import zoo

    db = open_database(db_path, create=True)
    try:
        db.commit_workload(zoo.workload("GMM"))  # the same workload as team_a's first line
    finally:
        db.close()
    assert query(db_path, "SELECT tvm_payload FROM workload") == [(None,)]
    summary = _import(db_path, TEAMS["team_a"])
    assert (summary.workloads_new, summary.workloads_known) == (1, 1)
    shash, payload = json.loads((TEAMS["team_a"] / WORKLOAD_FILE).read_text().splitlines()[0])
    assert query(db_path, "SELECT tvm_shash, tvm_payload FROM workload WHERE id = 1") == [(shash, payload)]


def test_legacy_lines_with_whitespace_are_normalized_too(tmp_path: pathlib.Path) -> None:
    wd = copy_team("team_a_pre0.17", tmp_path / "wd")
    edit_lines(wd / RECORD_FILE, lambda ls: [json.dumps(json.loads(line)) + "\n" for line in ls])  # ", " spacing
    _import(tmp_path / "spaced.sqlite", wd)
    _import(tmp_path / "new.sqlite", TEAMS["team_a"])
    strip = lambda keys: {k[:5] for k in keys}  # noqa: E731
    assert strip(record_keys(tmp_path / "spaced.sqlite")) == strip(record_keys(tmp_path / "new.sqlite"))


# ---------------------------------------------------------------- the quick path


def _compact(value: object) -> str:
    return json.dumps(value, separators=(",", ":"))


@pytest.mark.parametrize("paths", [
    [TEAMS["team_a"], TEAMS["team_b"], TEAMS["team_c"]],
    [LEGACY["team_a_pre0.24"], LEGACY["team_a_pre0.17"]],
])
def test_the_quick_path_gives_the_rows_of_the_general_path(monkeypatch: pytest.MonkeyPatch, paths: list) -> None:
    quick = read_import(paths, workers=1)
    monkeypatch.setattr(grammar.LineParser, "_quick", lambda self, text, n, workloads: None)
    general = read_import(paths, workers=1)
    assert [wd.records for wd in quick.workdirs] == [wd.records for wd in general.workdirs]
    assert [wd.normalized for wd in quick.workdirs] == [wd.normalized for wd in general.workdirs]
    assert quick.targets.keys() == general.targets.keys()


def test_most_lines_of_a_tvm_log_take_the_quick_path(monkeypatch: pytest.MonkeyPatch) -> None:
    taken: list[bool] = []
    quick = grammar.LineParser._quick

    def counting(self, text, n, workloads):  # type: ignore[no-untyped-def]
        row = quick(self, text, n, workloads)
        taken.append(row is not None)
        return row

    monkeypatch.setattr(grammar.LineParser, "_quick", counting)
    plan = read_import([TEAMS["team_b"]], workers=1)
    assert len(plan.workdirs[0].records) == 128
    assert sum(taken) >= 120  # the first line of each target and sketch goes the general way


@pytest.mark.parametrize("edit, reason", [
    # line 1 edited (its sketch, before EnterPostproc, is known by then: only the rest is scanned)
    (lambda r: r[:1] + [[[r[1][0][0][:-1] + [["Parallel", "l53", [], []]], r[1][0][1]]] + r[1][1:]],
     "is not [kind, [inputs], [attrs], [outputs]]"),
    (lambda r: r[:1] + [[[r[1][0][0], r[1][0][1] + [[len(r[1][0][0]), 1]]]] + r[1][1:]],
     "points at instruction"),
    (lambda r: r[:1] + [[r[1][0], [float("inf")]] + r[1][2:]], "not a finite number"),
    (lambda r: r[:1] + [[r[1][0], [True]] + r[1][2:]], "run_secs must be a list of numbers"),
    (lambda r: r[:1] + [r[1][:3] + [[["TENSOR", "float32"]]]], "args_info"),
])
def test_compact_bad_lines_after_good_ones_are_reported(tmp_path: pathlib.Path, edit: object, reason: str) -> None:
    wd = copy_team("team_a", tmp_path / "wd")
    edit_lines(wd / RECORD_FILE, lambda ls: ls[:2] + [_compact(edit(json.loads(ls[0]))) + "\n"] + ls[3:])  # type: ignore[operator]
    lines = (wd / RECORD_FILE).read_text().splitlines()
    sketch = lines[0][:lines[0].index('["EnterPostproc"')]
    assert lines[2].startswith(sketch)  # line 3 reuses line 1's sketch, which was checked then
    plan = read_import([wd], workers=1)
    assert [str(b).split(": ", 1)[0] for b in plan.bad_lines] == [f"{wd / RECORD_FILE}:3"]
    assert reason in str(plan.bad_lines[0])
    assert len(plan.workdirs[0].records) == 127


def test_a_trace_without_postproc_and_a_legacy_line_among_new_ones(tmp_path: pathlib.Path) -> None:
    wd = copy_team("team_a", tmp_path / "wd")
    record = json.loads((wd / RECORD_FILE).read_text().splitlines()[3])
    insts = record[1][0][0]
    cut = [i for i, inst in enumerate(insts) if inst[0] == "EnterPostproc"][0]
    no_postproc = [record[0], [[insts[:cut], [d for d in record[1][0][1] if d[0] < cut]]] + record[1][1:]]
    legacy = [record[0], [[[["GetBlock"] + inst[1:] if inst[0] == "GetSBlock" else inst for inst in insts],
                            record[1][0][1]]] + record[1][1:]]
    edit_lines(wd / RECORD_FILE, lambda ls: ls + [_compact(no_postproc) + "\n", _compact(legacy) + "\n"])
    plan = read_import([wd], workers=1)
    assert not plan.bad_lines
    rows = plan.workdirs[0].records
    assert plan.workdirs[0].normalized == 1
    assert rows[-2][3] == _compact(no_postproc[1][0]) and rows[-2][7] is True
    assert rows[-1][3:5] == rows[3][3:5]  # normalized to TVM 0.27's GetSBlock: the same trace, the same hash


def test_a_record_committed_through_the_api_and_the_same_record_imported_are_one(db_path: pathlib.Path) -> None:
    from msdb.interop.tvm.grammar import record_from_line
    from msdb.interop.tvm.payload import decode_workload
    from msdb.schedule import tvm_json

    team = TEAMS["team_a"]
    line = (team / RECORD_FILE).read_text().splitlines()[5]
    index, body = tvm_json.loads(line)
    payload = json.loads((team / WORKLOAD_FILE).read_text().splitlines()[index])[1]
    db = open_database(db_path, create=True)
    try:
        workload = db.commit_workload(decode_workload(payload))
        db.commit_tuning_record(record_from_line(line, [None] * index + [workload]))
    finally:
        db.close()
    (stored_hash,) = query(db_path, "SELECT trace_hash FROM tuning_record")[0]
    summary = _import(db_path, team)
    assert (summary.records_new, summary.records_duplicate) == (127, 1)
    assert row_counts(db_path)["tuning_record"] == 128
    imported = read_import([team], workers=1).workdirs[0].records[5]
    assert imported[4] == stored_hash and imported[3] == line[line.index(",") + 2:][:len(imported[3])]


# ---------------------------------------------------------------- the streaming import


@pytest.mark.slow
@pytest.mark.parametrize("workers", [1, 2])
def test_the_replay_pass_hands_on_every_row_that_replays(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch,
                                                         workers: int) -> None:
    """`verify` is a pass of its own between the one reader and the writer: on logs whose
    traces all replay it changes nothing that is stored, with rows written while later
    chunks are parsed (many small chunks and batches) or on one process."""
    monkeypatch.setattr(import_reader, "_CHUNK", 20)  # many chunks: rows are written while later ones are parsed
    monkeypatch.setattr(import_reader, "_PROGRESS_EVERY", 25)  # and many batches on one process
    paths = [TEAMS["team_a"], LEGACY["team_a_pre0.17"]]
    streamed = _import(tmp_path / "streamed.sqlite", *paths, workers=workers, user="u", host="h")
    verified = _import(tmp_path / "verified.sqlite", *paths, workers=1, user="u", host="h", verify=True)
    line = lambda s: s.line().split(";")[:2]  # noqa: E731 - the workloads and records, not replays or seconds
    assert line(streamed) == line(verified)
    assert verified.replayed > 0 and verified.replay_failures == []
    assert record_keys(tmp_path / "streamed.sqlite") == record_keys(tmp_path / "verified.sqlite")
    columns = "kind, location, sha256, username, host, tvm_version"
    assert query(tmp_path / "streamed.sqlite", f"SELECT {columns} FROM source ORDER BY id") == \
        query(tmp_path / "verified.sqlite", f"SELECT {columns} FROM source ORDER BY id")


@pytest.mark.parametrize("workers", [1, 2])
def test_a_bad_last_line_rolls_back_rows_already_written(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch,
                                                         workers: int) -> None:
    monkeypatch.setattr(import_reader, "_CHUNK", 20)
    monkeypatch.setattr(import_reader, "_PROGRESS_EVERY", 25)
    db_path = tmp_path / "db.sqlite"
    _import(db_path, TEAMS["team_c"])
    before = snapshot(db_path)
    wd = copy_team("team_a", tmp_path / "wd")
    edit_lines(wd / RECORD_FILE, lambda ls: ls[:-1] + [ls[-1][:200]])
    written: list[int] = []
    original = ImportWriter.records

    def counting(self, wd_, rows):  # type: ignore[no-untyped-def]
        original(self, wd_, rows)
        written.append(len(rows))

    monkeypatch.setattr(ImportWriter, "records", counting)
    with pytest.raises(ImportAborted, match=rf"{RECORD_FILE}:128: truncated JSON"):
        _import(db_path, TEAMS["team_b"], wd, workers=workers)
    assert sum(written) >= 128 + 100  # team_b and most of team_a went into the transaction before line 128
    assert snapshot(db_path) == before


_KILL_AT: list[int] = []  # start offset of the chunk whose worker kills itself (set before forking)


def _parse_chunk_or_die(task: tuple) -> tuple:  # module level: workers receive it pickled by name
    import os
    import signal

    if task[0] in _KILL_AT:
        os.kill(os.getpid(), signal.SIGKILL)  # as the OOM killer would
    return import_reader._parse_chunk_of_the_reader(task)


def test_a_parsing_worker_killed_from_outside_fails_the_import_cleanly(tmp_path: pathlib.Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from msdb.interop.tvm.import_reader import ImportWorkerError

    monkeypatch.setattr(import_reader, "_CHUNK", 20)
    text = (TEAMS["team_a"] / RECORD_FILE).read_text()
    monkeypatch.setattr(import_reader, "_parse_chunk_of_the_reader", import_reader._parse_chunk, raising=False)
    monkeypatch.setattr(import_reader, "_parse_chunk", _parse_chunk_or_die)
    monkeypatch.setattr(sys.modules[__name__], "_KILL_AT", [import_reader._line_chunks(text, 20)[2][0]])
    db_path = tmp_path / "db.sqlite"
    _import(db_path, TEAMS["team_c"])
    before = snapshot(db_path)
    with pytest.raises(ImportWorkerError, match=rf"{RECORD_FILE}: a process parsing this file died"):
        _import(db_path, TEAMS["team_a"], workers=2)  # not a hang: the import fails, the transaction rolls back
    assert snapshot(db_path) == before
