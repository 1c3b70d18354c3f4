"""The one rule of what enters a database (`msdb.database.admission`), at the doors
other than `msdb pull` (tests/hub/test_hostile_hub.py): `msdb merge` from a forged SQLite file,
and `commit_tuning_record` / `commit_workload` through the Python API. A bad row is refused
with one line naming the source and the row, and the destination is unchanged; with
`skip_bad` the rest is merged and the bad rows are listed."""

from __future__ import annotations

import contextlib
import json
import shutil
import sqlite3
from pathlib import Path
from typing import Callable

import pytest
from click.testing import CliRunner

from msdb import SQLiteDatabase
from msdb.cli.main import cli
from msdb.database.admission import AdmissionError
from msdb.database.merge import merge_databases
from msdb.records import TuningRecord, Workload
from tests.database.helpers import CPU, matmul, split_trace
from tests.hub.hubs import contents, file_digest, make_team_db


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_team_db(tmp_path_factory.mktemp("team") / "team.sqlite", ("team_a", "team_b"))


@pytest.fixture
def dest(tmp_path: Path) -> Path:
    """A destination with data in it: team_c's logs."""
    return make_team_db(tmp_path / "dest.sqlite", ("team_c",))


def _forged(team: Path, tmp_path: Path, sql: str, *params: object) -> Path:
    """A copy of `team` changed by `sql`."""
    forged = tmp_path / "forged.sqlite"
    shutil.copyfile(team, forged)
    with contextlib.closing(sqlite3.connect(forged)) as conn:
        conn.execute(sql, params)
        conn.commit()
    return forged


def _merge(dest: Path, src: Path, **options: object):
    with contextlib.closing(SQLiteDatabase(dest)) as d, contextlib.closing(SQLiteDatabase(src, read_only=True)) as s:
        return merge_databases(d, s, **options)


FORGERIES = {
    "run_secs": ("UPDATE tuning_record SET run_secs = '[-1e308, 1e999]' WHERE id = 7",
                 "record 7: run_secs [-1e+308, Infinity] holds a value that is not a finite number"),
    "trace": ("UPDATE tuning_record SET trace = 'not JSON' WHERE id = 7", "record 7: trace is not JSON"),
    "kind": ("UPDATE tuning_record SET trace = replace(trace, '\"GetSBlock\"', '\"Evil\"') WHERE id = 7",
             'record 7: trace instruction 0 is of kind "Evil"'),
    "trace_hash": ("UPDATE tuning_record SET trace_hash = 'zz' WHERE id = 7",
                   'record 7: trace_hash "zz" is not 16 hex digits'),
    "args_info": ("UPDATE tuning_record SET args_info = 'xxxxxxxxxx' WHERE id = 7",
                  'record 7: args_info "xxxxxxxxxx" is not JSON'),
    "is_valid": ("UPDATE tuning_record SET is_valid = 1 - is_valid WHERE id = 7", "record 7: is_valid"),
    "script": ("UPDATE workload SET script = (SELECT script FROM workload WHERE id = 2), ir_blob = NULL WHERE id = 1",
               "workload 1 ("),
}


@pytest.mark.slow
@pytest.mark.parametrize("forgery", sorted(FORGERIES))
def test_merge_refuses_a_forged_file_and_changes_nothing(team: Path, dest: Path, tmp_path: Path,
                                                          forgery: str) -> None:
    sql, match = FORGERIES[forgery]
    forged = _forged(team, tmp_path, sql)
    before = file_digest(dest)
    with pytest.raises(AdmissionError) as error:
        _merge(dest, forged)
    message = str(error.value)
    assert message.startswith(f"{forged}: {match}") and "\n" not in message, message
    assert file_digest(dest) == before
    # the command: one line, exit status 1
    result = CliRunner().invoke(cli, ["merge", str(dest), str(forged)])
    assert result.exit_code == 1 and result.output.count("\n") == 1, result.output
    assert result.output.startswith(f"Error: {forged}: {match}")
    assert file_digest(dest) == before


@pytest.mark.slow
def test_merge_skip_bad_merges_the_rest_and_lists_the_bad(team: Path, dest: Path, tmp_path: Path) -> None:
    forged = _forged(team, tmp_path, FORGERIES["script"][0])
    with contextlib.closing(sqlite3.connect(forged)) as conn:
        for sql, _ in (FORGERIES["run_secs"], FORGERIES["trace_hash"]):
            conn.execute(sql.replace("id = 7", "id = 200"))
        conn.commit()
        of_1 = conn.execute("SELECT count(*) FROM tuning_record WHERE workload_id = 1").fetchone()[0]
        assert conn.execute("SELECT workload_id FROM tuning_record WHERE id = 200").fetchone()[0] != 1
    summary = _merge(dest, forged, skip_bad=True)
    assert summary.records_refused == of_1 + 1
    assert len(summary.refused) == 2, summary.refused
    assert summary.refused[0].startswith("workload 1 (") and "hashes to" in summary.refused[0]
    assert summary.refused[1].startswith('record 200: trace_hash "zz"')
    assert f"{of_1 + 1} refused" in summary.line()
    # the command: the summary line on stdout, each bad row on stderr, exit status 0
    again = tmp_path / "again.sqlite"
    result = CliRunner().invoke(cli, ["merge", str(again), str(forged), "--skip-bad"])
    assert result.exit_code == 0, result.output + result.stderr
    assert f"{of_1 + 1} refused" in result.stdout
    assert result.stderr.splitlines() == [f"{forged}: {line} (skipped)" for line in summary.refused]
    with contextlib.closing(sqlite3.connect(dest)) as conn:
        assert conn.execute("SELECT min(mean_run_secs) >= 0 FROM tuning_record").fetchone()[0] == 1
        assert conn.execute("SELECT count(*) FROM tuning_record WHERE trace_hash = 'zz'").fetchone()[0] == 0
    # nothing broken to repair: merging the real data afterwards gives what merging it at once gives
    _merge(dest, team)
    expected = make_team_db(tmp_path / "expected.sqlite", ("team_c",))
    _merge(expected, team)
    assert contents(dest) == contents(expected)


def test_merge_of_good_files_is_unchanged(team: Path, tmp_path: Path) -> None:
    """Admission changes nothing for honest data: a merge into an empty database equals the
    source, and merging again adds nothing."""
    dest = tmp_path / "copy.sqlite"
    first = _merge(dest, team)
    assert first.records_refused == 0 and not first.refused
    assert contents(dest) == contents(team)
    again = _merge(dest, team)
    assert again.records_new == 0 and again.records_duplicate == first.records_new


# ---------------------------------------------------------------- the Python API


def _record(workload: Workload, trace: object, run_secs: object = (1e-3,), **options: object) -> TuningRecord:
    return TuningRecord(trace, workload, run_secs, CPU, **options)  # type: ignore[arg-type]


BAD_RECORDS: dict[str, tuple[Callable[[Workload, str], TuningRecord], str]] = {
    "negative": (lambda w, t: _record(w, t, [-1e308]), "holds a negative time"),
    "inf": (lambda w, t: _record(w, t, [1e-3, float("inf")]), "not a finite number"),
    "beyond the failure mark": (lambda w, t: _record(w, t, [1e300]), "beyond TVM's failure mark"),
    "trace not JSON": (lambda w, t: _record(w, "not JSON"), "trace is not JSON"),
    "unknown kind": (lambda w, t: _record(w, t.replace('"GetSBlock"', '"Evil"', 1)), 'of kind "Evil"'),
    "args_info": (lambda w, t: _record(w, t, args_info=[["TENSOR", "float32", "x"]]), "args_info"),
}


@pytest.mark.parametrize("case", sorted(BAD_RECORDS))
def test_commit_tuning_record_refuses_what_import_refuses(tmp_path: Path, case: str) -> None:
    make, match = BAD_RECORDS[case]
    path = tmp_path / "api.sqlite"
    with contextlib.closing(SQLiteDatabase(path)) as db:
        workload = db.commit_workload(matmul())
        good = split_trace(workload.mod, 2)
        text = json.dumps(good.as_json(), separators=(",", ":"))
        db.commit_tuning_record(_record(workload, good))
        before = len(db)
        with pytest.raises(AdmissionError, match=match) as error:
            db.commit_tuning_records([_record(workload, split_trace(workload.mod, 4)), make(workload, text)])
        assert str(error.value).startswith(f"{path}: record 1 of 2: ") and "nothing was committed" in str(error.value)
        with pytest.raises(AdmissionError, match=match):
            db.commit_tuning_record(make(workload, text))
        assert len(db) == before


def test_commit_workload_refuses_claimed_hashes(tmp_path: Path) -> None:
    with contextlib.closing(SQLiteDatabase(tmp_path / "api.sqlite")) as db:
        real = Workload(matmul())
        other = Workload(matmul(n=32))
        forged = Workload(other.mod, hashes=real.hashes)  # another module under real's hashes
        with pytest.raises(AdmissionError, match="but its IR hashes to"):
            db.commit_workload(forged)
        assert db.workloads() == []
        stored = db.commit_workload(real)
        assert stored.shash == real.shash
