"""Reading TVM work_dirs (`read_import`, the one reader of msdb import): every fixture
generation, and each bad input reported as path:line."""

from __future__ import annotations

import base64
import json
import pathlib
import shutil
import struct

import pytest

from msdb.interop.tvm.import_data import ParsedWorkDir
from msdb.interop.tvm.import_reader import read_import
from msdb.interop.tvm.workdir import RECORD_FILE, WORKLOAD_FILE, WorkDirError

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "data" / "fixtures"
TEAM_A = FIXTURES / "tvm-0.27" / "team_a"


def read_workdir(*paths: pathlib.Path) -> ParsedWorkDir:
    plan = read_import(list(paths), workers=1)
    (wd,) = plan.workdirs
    wd.bad_lines = plan.bad_lines  # type: ignore[attr-defined]
    wd.targets = plan.targets  # type: ignore[attr-defined]
    return wd


@pytest.mark.parametrize("team", ["team_a", "team_b", "team_c"])
def test_fixture_work_dirs_read_cleanly(team: str) -> None:
    wd = read_workdir(FIXTURES / "tvm-0.27" / team)
    assert wd.bad_lines == []
    assert len(wd.workloads) == 2 and len(wd.records) == 128
    assert wd.tvm_version == "0.27.0.post1"
    assert {wd.targets[row[2]].kind for row in wd.records} == {"llvm"}
    assert len(wd.workload_sha256) == 64


@pytest.mark.parametrize("legacy", ["team_a_pre0.24", "team_a_pre0.17"])
def test_legacy_work_dirs_read_cleanly(legacy: str) -> None:
    wd = read_workdir(FIXTURES / "tvm-legacy" / legacy)
    assert wd.bad_lines == [] and len(wd.records) == 128


def test_file_pair_is_accepted() -> None:
    wd = read_workdir(TEAM_A / WORKLOAD_FILE, TEAM_A / RECORD_FILE)
    assert len(wd.records) == 128


@pytest.fixture
def work_dir(tmp_path: pathlib.Path) -> pathlib.Path:
    target = tmp_path / "wd"
    shutil.copytree(TEAM_A, target)
    return target


def _rewrite(path: pathlib.Path, edit) -> None:
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(edit(lines)))


def _bad(wd_path: pathlib.Path) -> list[str]:
    return [str(b) for b in read_workdir(wd_path).bad_lines]


def test_blank_lines_are_ignored(work_dir: pathlib.Path) -> None:
    _rewrite(work_dir / RECORD_FILE, lambda ls: ls[:3] + ["\n", "   \n"] + ls[3:])
    wd = read_workdir(work_dir)
    assert wd.bad_lines == [] and len(wd.records) == 128


def test_truncated_last_line(work_dir: pathlib.Path) -> None:
    _rewrite(work_dir / RECORD_FILE, lambda ls: ls[:-1] + [ls[-1][:200]])
    (bad,) = _bad(work_dir)
    assert bad.startswith(f"{work_dir / RECORD_FILE}:128: truncated JSON")


def test_record_pointing_at_missing_workload(work_dir: pathlib.Path) -> None:
    _rewrite(work_dir / RECORD_FILE, lambda ls: [ls[0].replace("[0,", "[7,", 1)] + ls[1:])
    (bad,) = _bad(work_dir)
    assert bad == f"{work_dir / RECORD_FILE}:1: record points at workload index 7, but {WORKLOAD_FILE} has 2 workload(s)"


def test_base64_that_does_not_decode(work_dir: pathlib.Path) -> None:
    _rewrite(work_dir / WORKLOAD_FILE, lambda ls: [json.dumps([json.loads(ls[0])[0], "@@not-base64@@"]) + "\n"] + ls[1:])
    bad = _bad(work_dir)
    assert bad[0].startswith(f"{work_dir / WORKLOAD_FILE}:1: workload payload is not valid base64")
    # records of that workload are reported too, each at its own line
    assert len(bad) == 1 + sum(1 for r in (TEAM_A / RECORD_FILE).read_text().splitlines() if r.startswith("[0,"))


def test_length_prefix_that_disagrees(work_dir: pathlib.Path) -> None:
    def edit(lines: list[str]) -> list[str]:
        shash, payload = json.loads(lines[1])
        raw = base64.b64decode(payload)
        wrong = base64.b64encode(struct.pack("<Q", len(raw)) + raw[8:]).decode()
        return [lines[0], json.dumps([shash, wrong]) + "\n"]

    _rewrite(work_dir / WORKLOAD_FILE, edit)
    bad = _bad(work_dir)
    assert bad[0] == f"{work_dir / WORKLOAD_FILE}:2: workload payload's length prefix says {len(base64.b64decode(json.loads((TEAM_A / WORKLOAD_FILE).read_text().splitlines()[1])[1]))} bytes but {len(base64.b64decode(json.loads((TEAM_A / WORKLOAD_FILE).read_text().splitlines()[1])[1])) - 8} follow"


def test_malformed_record_shapes(work_dir: pathlib.Path) -> None:
    _rewrite(work_dir / RECORD_FILE, lambda ls: ['{"a": 1}\n', '[0, [[[], []], "fast"]]\n', '[0, [[[], []], null, 5]]\n'] + ls[3:])
    assert _bad(work_dir) == [
        f"{work_dir / RECORD_FILE}:1: expected a record line [workload_index, [trace, run_secs, target, args_info]]",
        f'{work_dir / RECORD_FILE}:2: run_secs must be a list of numbers or null, got "fast"',
        f"{work_dir / RECORD_FILE}:3: target must be a config object or a target string, got 5",
    ]


def test_missing_file_and_directory_without_files(tmp_path: pathlib.Path) -> None:
    with pytest.raises(WorkDirError, match="no such file or directory"):
        read_workdir(tmp_path / "nope")
    with pytest.raises(WorkDirError, match=r"not a MetaSchedule work_dir \(missing database_workload.json, database_tuning_record.json\)"):
        read_workdir(tmp_path)
    (tmp_path / "f.json").write_text("")
    with pytest.raises(WorkDirError, match="a file needs its partner"):
        read_workdir(tmp_path / "f.json")
    with pytest.raises(WorkDirError, match="no such file"):
        read_workdir(tmp_path / "f.json", tmp_path / "g.json")


def test_a_workload_line_that_is_not_utf8_keeps_its_index(work_dir: pathlib.Path) -> None:
    lines = (work_dir / WORKLOAD_FILE).read_bytes().split(b"\n")
    (work_dir / WORKLOAD_FILE).write_bytes(b"\n".join([b'["1", "\xff"]'] + lines[1:]))
    wd = read_workdir(work_dir)
    first_index = sum(1 for r in (TEAM_A / RECORD_FILE).read_text().splitlines() if r.startswith("[0,"))
    assert str(wd.bad_lines[0]) == f"{work_dir / WORKLOAD_FILE}:1: line is not UTF-8 text"
    assert len(wd.bad_lines) == 1 + first_index  # the records of workload 0 name that bad line
    assert all("which is a bad line of" in b.reason for b in wd.bad_lines[1:])
    assert {row[1] for row in wd.records} == {1}  # the rest still point at workload 1, not shifted


def test_run_secs_beyond_floats_and_indexes_json_does_not_allow(work_dir: pathlib.Path) -> None:
    def edit(lines: list[str]) -> list[str]:
        huge = json.loads(lines[1])
        huge[1][1] = [10 ** 400]
        return [lines[0], json.dumps(huge) + "\n", "[00" + lines[2][2:], lines[3].replace("[0,", "[\u0660,", 1)] + lines[4:]

    _rewrite(work_dir / RECORD_FILE, edit)
    bad = _bad(work_dir)
    assert bad[0].startswith(f"{work_dir / RECORD_FILE}:2: run_secs [1000") and bad[0].endswith(
        "holds a value that is not a finite number")
    assert bad[1].startswith(f"{work_dir / RECORD_FILE}:3: invalid JSON")
    assert bad[2].startswith(f"{work_dir / RECORD_FILE}:4: invalid JSON")
    assert len(bad) == 3
