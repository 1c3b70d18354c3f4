"""`msdb pull` against a hub that lies: a real HTTP server on loopback, serving a
team database's rows the way datasette's JSON API does, except where it misbehaves. Every
misbehaviour ends the pull promptly with one `Error:` line and exit status 1, and the
destination database is as it was (a new one is not created); with `--skip-bad` the good
records land and the bad are listed."""

from __future__ import annotations

import base64
import contextlib
import http.server
import json
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.parse
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
from click.testing import CliRunner

from msdb.cli.main import cli
from tests.hub.hubs import ROOT, contents, copy_db, file_digest, loopback_server, make_team_db

#: Generous bound on how long a refused pull may take (the deadline cases use --timeout 2).
ENDS_WITHIN_S = 60.0


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_team_db(tmp_path_factory.mktemp("team") / "team.sqlite")


def _rows(db: Path, table: str) -> list[dict[str, Any]]:
    """`table`'s rows as datasette's JSON API gives them (BLOBs as `$base64` objects)."""
    with contextlib.closing(sqlite3.connect(db)) as conn:
        conn.row_factory = sqlite3.Row
        rows = [dict(row) for row in conn.execute(f"SELECT * FROM {table} ORDER BY id")]
    for row in rows:
        for key, value in row.items():
            if isinstance(value, bytes):
                row[key] = {"$base64": True, "encoded": base64.b64encode(value).decode()}
    return rows


class _Data:
    """What the hostile hub serves: a team database's rows, and how it misbehaves (`mode`)."""

    def __init__(self, db: Path, mode: str, forge: Callable[[dict[str, list[dict[str, Any]]]], None] | None) -> None:
        self.mode = mode
        self.tables = {t: _rows(db, t) for t in ("workload", "target", "tuning_record", "model", "task")}
        configs = {t["id"]: t["config"] for t in self.tables["target"]}
        for row in self.tables["tuning_record"]:
            row["target"] = configs[row["target_id"]]
        if forge is not None:
            forge(self.tables)
        self.release = threading.Event()


class _Handler(http.server.BaseHTTPRequestHandler):
    data: _Data

    def log_message(self, *args: Any) -> None:
        pass

    def _json(self, value: Any) -> None:
        body = json.dumps(value).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        data = self.data
        parts = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(parts.query)
        path = parts.path
        if path == "/-/databases.json":
            return self._json([{"name": "snap", "hash": None}])
        if path == "/-/metadata.json":
            return self._json({})
        if path == "/snap.json":
            queries = [] if data.mode == "endless-next" else [{"name": "records_since"}]
            return self._json({"tables": [{"name": t} for t in data.tables], "queries": queries})
        if path == "/snap/records_since.json":
            return self._records_since(int(query["after"][0]))
        table = path.removeprefix("/snap/").removesuffix(".json")
        rows = data.tables[table]
        if "_sort_desc" in query:
            return self._json({"rows": rows[-1:], "next": None})
        if "id__in" in query:
            wanted = {int(x) for x in query["id__in"][0].split(",")}
            rows = [row for row in rows if row["id"] in wanted]
        if data.mode == "endless-next" and table == "target":
            return self._json({"rows": rows, "next": "more"})  # ignores id__gt, always has more
        after = int(query.get("id__gt", ["0"])[0])
        rows = [row for row in rows if row["id"] > after]
        if table == "tuning_record":  # the table has no target column (records_since adds it)
            rows = [{k: v for k, v in row.items() if k != "target"} for row in rows[:1000]]
        return self._json({"rows": rows, "next": None})

    def _records_since(self, after: int) -> None:
        data = self.data
        if data.mode == "endless":  # a JSON body that never ends, no length
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            chunk = b'{"id": 1, "trace": "' + b"x" * 65000 + b'"},'
            with contextlib.suppress(OSError):
                self.wfile.write(b'{"rows": [')
                while not data.release.is_set():
                    self.wfile.write(chunk)
            return
        if data.mode == "huge-length":  # claims 2 GB, sends a little, then waits
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(2 * 10**9))
            self.end_headers()
            with contextlib.suppress(OSError):
                self.wfile.write(b'{"rows": [')
                self.wfile.flush()
            data.release.wait(60)
            return
        if data.mode == "trickle":  # a byte every half second: no read ever times out
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "100000")
            self.end_headers()
            with contextlib.suppress(OSError):
                for _ in range(100000):
                    self.wfile.write(b" ")
                    self.wfile.flush()
                    if data.release.wait(0.5):  # the server's pace, not a synchronization
                        return
            return
        if data.mode == "ignores-after":
            after = 0
        rows = [row for row in data.tables["tuning_record"] if row["id"] > after][:200]
        return self._json({"rows": rows, "next": None})


@contextlib.contextmanager
def hostile_hub(db: Path, mode: str = "honest",
                forge: Callable[[dict[str, list[dict[str, Any]]]], None] | None = None) -> Iterator[str]:
    """A hub on a free loopback port serving `db`'s rows, misbehaving as `mode` says, after
    `forge` changed them; yields its base URL."""
    data = _Data(db, mode, forge)
    with loopback_server(type("_HostileHandler", (_Handler,), {"data": data}), data.release) as url:
        yield url


def _pull(url: str, db: Path, *options: str) -> tuple[int, str, float]:
    start = time.monotonic()
    result = CliRunner().invoke(cli, ["pull", url, str(db), *options])
    return result.exit_code, result.output, time.monotonic() - start


def _refused(url: str, db: Path, match: str, *options: str) -> None:
    """`msdb pull URL DB` ends with one `Error:` line matching `match`, exit status 1, DB as it was."""
    before = file_digest(db)
    code, output, seconds = _pull(url, db, *options)
    assert code == 1, output
    assert output.count("\n") == 1 and output.startswith("Error: "), output
    assert match in output, output
    assert seconds < ENDS_WITHIN_S
    assert file_digest(db) == before
    assert not list(db.parent.glob(f".{db.name}.*"))  # no staging folder left either


@pytest.fixture
def existing(team: Path, tmp_path: Path) -> Path:
    return copy_db(team, tmp_path / "local.sqlite")


@pytest.mark.slow
@pytest.mark.parametrize("mode, match, options", [
    ("endless", "answered more than 268,435,456 bytes", ()),
    ("huge-length", "answered more than 268,435,456 bytes", ()),
    ("trickle", "no answer within 2 s", ("--timeout", "2")),
    ("ignores-after", "its pages do not advance", ()),
    ("endless-next", "its pages do not advance", ()),
])
def test_a_hub_that_does_not_end_is_cut(team: Path, existing: Path, tmp_path: Path, mode: str, match: str,
                                        options: tuple[str, ...]) -> None:
    with hostile_hub(team, mode) as url:
        _refused(url, existing, match, *options)
        _refused(url, tmp_path / "new.sqlite", match, *options)
    assert not (tmp_path / "new.sqlite").exists()


def _set(field: str, value: Any, record_id: int = 5) -> Callable[[dict[str, list[dict[str, Any]]]], None]:
    def forge(tables: dict[str, list[dict[str, Any]]]) -> None:
        tables["tuning_record"][record_id - 1][field] = value

    return forge


def _unknown_kind(tables: dict[str, list[dict[str, Any]]]) -> None:
    row = tables["tuning_record"][4]
    row["trace"] = row["trace"].replace('"GetSBlock"', '"Os_System"', 1)


def _forged_script(tables: dict[str, list[dict[str, Any]]], victim: int = 1) -> None:
    """Workload `victim` keeps its real hashes and gets another workload's script (and no blob)."""
    first, second = tables["workload"][victim - 1], tables["workload"][victim % len(tables["workload"])]
    first["script"] = second["script"]
    first["ir_blob"] = None
    first["ir_format"] = None


FORGERIES = {
    "run_secs": (_set("run_secs", "[-1e308, 1e999]"), "record 5: run_secs [-1e+308, Infinity] holds a value that "
                                                      "is not a finite number"),
    "negative": (_set("run_secs", "[-1e308]"), "record 5: run_secs [-1e+308] holds a negative time"),
    "trace": (_set("trace", "this is not JSON"), "record 5: trace is not JSON"),
    "kind": (_unknown_kind, 'record 5: trace instruction 0 is of kind "Os_System", which TVM does not have'),
    "trace_hash": (_set("trace_hash", "zz"), 'record 5: trace_hash "zz" is not 16 hex digits'),
    "args_info": (_set("args_info", "xxxxxxxxxx"), 'record 5: args_info "xxxxxxxxxx" is not JSON'),
    "mean": (_set("mean_run_secs", -1.0), "record 5: mean_run_secs -1.0 is not the mean of its run_secs"),
    "script": (_forged_script, "workload 1 ("),
}


@pytest.mark.slow
@pytest.mark.parametrize("forgery", sorted(FORGERIES))
def test_a_forged_page_is_refused(team: Path, existing: Path, tmp_path: Path, forgery: str) -> None:
    forge, match = FORGERIES[forgery]
    with hostile_hub(team, forge=forge) as url:
        _refused(url, existing, match)
        _refused(url, tmp_path / "new.sqlite", match)
    assert not (tmp_path / "new.sqlite").exists()


def test_skip_bad_pulls_the_good_records_and_lists_the_bad(team: Path, tmp_path: Path) -> None:
    def forge_all(tables: dict[str, list[dict[str, Any]]]) -> None:
        for name in ("run_secs", "trace", "kind", "trace_hash", "args_info"):
            FORGERIES[name][0](tables)
        tables["tuning_record"][5]["run_secs"] = "[-1e308, 1e999]"  # another record: ids 5 and 6 forged
        _forged_script(tables, victim)

    with contextlib.closing(sqlite3.connect(team)) as conn:
        victim = conn.execute("SELECT max(id) FROM workload").fetchone()[0]
        of_victim = {row[0] for row in conn.execute("SELECT id FROM tuning_record WHERE workload_id = ?", (victim,))}
        assert not of_victim & {5, 6}
    local = tmp_path / "pulled.sqlite"
    with hostile_hub(team, forge=forge_all) as url:
        code, output, _ = _pull(url, local, "--skip-bad")
    assert code == 0, output
    lines = output.splitlines()
    assert lines[-1].startswith(f"{url}: 384 records read in 2 pages: ")
    bad = lines[:-1]
    assert all(line.startswith(f"{url}: ") and line.endswith(" (skipped)") for line in bad)
    assert any(f"workload {victim} (" in line and "hashes to" in line for line in bad)
    assert any(line.startswith(f"{url}: record 6: run_secs") for line in bad)
    assert any(line.startswith(f"{url}: record 5: ") for line in bad)
    refused = len(of_victim | {5, 6})
    assert f"{384 - refused} new, 0 duplicate, {refused} refused" in lines[-1]
    with contextlib.closing(sqlite3.connect(local)) as conn:
        assert conn.execute("SELECT count(*) FROM tuning_record").fetchone()[0] == 384 - refused
        assert conn.execute("SELECT min(mean_run_secs) >= 0 FROM tuning_record").fetchone()[0] == 1
        shashes = {row[0] for row in conn.execute("SELECT shash FROM workload")}
    with contextlib.closing(sqlite3.connect(team)) as conn:
        real_victim = conn.execute("SELECT shash FROM workload WHERE id = ?", (victim,)).fetchone()[0]
    assert real_victim not in shashes  # the forged script under the victim's hash was not stored
    # nothing broken to repair: merging the real data gives the team database
    result = CliRunner().invoke(cli, ["merge", str(local), str(team)])
    assert result.exit_code == 0, result.output
    assert contents(local) == contents(team)


_KILLABLE = """
import sys
from msdb.hub.pull import pull
pull(sys.argv[1], sys.argv[2], timeout_s=600)
"""


@pytest.mark.slow
def test_a_killed_pull_into_a_new_file_leaves_nothing_the_next_pull_keeps(team: Path, tmp_path: Path) -> None:
    """A pull killed while it creates DB (here, waiting on a hub that trickles) leaves no DB and
    a staging folder that the next pull removes."""
    local = tmp_path / "new.sqlite"
    with hostile_hub(team, "trickle") as slow:
        proc = subprocess.Popen([sys.executable, "-c", _KILLABLE, slow, str(local)], stderr=subprocess.PIPE,
                                cwd=ROOT)
        try:
            deadline = time.monotonic() + ENDS_WITHIN_S
            while not list(tmp_path.glob(".new.sqlite.pull-*/new.sqlite")):  # poll for the staged DB
                assert proc.poll() is None and time.monotonic() < deadline
                time.sleep(0.02)
            proc.send_signal(signal.SIGKILL)
            proc.wait(30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert not local.exists() and list(tmp_path.glob(".new.sqlite.pull-*"))
    with hostile_hub(team) as url:
        code, output, _ = _pull(url, local)
    assert code == 0, output
    assert not list(tmp_path.glob(".new.sqlite.*"))
    assert contents(local)[1] == contents(team)[1]
