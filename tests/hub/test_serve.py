"""`msdb serve` over HTTP: a real server subprocess on a free loopback port, serving
the bundled team logs live and as a published snapshot. Every table page and canned query answers
200 with the rows msdb's own library computes; a published hub refuses arbitrary SQL and writes."""

from __future__ import annotations

import hashlib
import re
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest

import msdb
from msdb.database.catalog import list_workloads, show_workload, tuning_curves, workload_relatives
from msdb.hub.canned import QUERIES, RECORDS_SINCE_COLUMNS
from tests.hub.serving import MODELS, TEAM_LOGS, make_publish_dir, make_team_db, running_hub

pytestmark = pytest.mark.timeout(300)

TABLES = ("workload", "tuning_record", "target", "source", "model", "task")
GMM = "cd74d25fd1596994"


@pytest.fixture(scope="module")
def team_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_team_db(tmp_path_factory.mktemp("hub") / "team.sqlite")


@pytest.fixture(scope="module")
def live(team_db: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with running_hub(team_db, tmp_path_factory.mktemp("live") / "serve.log") as base:
        yield base


@pytest.fixture(scope="module")
def published(team_db: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    out = make_publish_dir(team_db, tmp_path_factory.mktemp("pub") / "hub")
    with running_hub(out, out.parent / "serve.log") as base:
        yield base, out


def rows(url: str, **params: Any) -> list[dict[str, Any]]:
    response = httpx.get(url, params={**params, "_shape": "array"}, timeout=30)
    assert response.status_code == 200, (url, response.text[:500])
    return response.json()


def count(db: Path, table: str) -> int:
    with sqlite3.connect(db) as conn:
        return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])


@pytest.mark.slow
@pytest.mark.parametrize("table", TABLES)
def test_every_table_answers_with_all_its_rows(live: str, team_db: Path, table: str) -> None:
    assert httpx.get(f"{live}/team/{table}", timeout=30).status_code == 200
    got = rows(f"{live}/team/{table}.json", _size="max")
    assert len(got) == count(team_db, table) > 0


@pytest.mark.slow
def test_index_database_and_row_pages_answer(live: str) -> None:
    for path in ("/", "/team", "/team/workload/1", "/team/tuning_record/1", "/-/metadata.json"):
        assert httpx.get(live + path, timeout=30).status_code == 200, path


def test_internal_tables_are_hidden_and_metadata_is_served(live: str) -> None:
    tables = {t["name"]: t for t in httpx.get(f"{live}/team.json", timeout=30).json()["tables"]}
    assert tables["alembic_version"]["hidden"] is True
    assert not tables["tuning_record"]["hidden"]
    meta = httpx.get(f"{live}/-/metadata.json", timeout=30).json()["databases"]["team"]
    assert set(meta["queries"]) == set(QUERIES)
    assert "target_id" in meta["tables"]["tuning_record"]["facets"]


def test_record_pages_show_traces_as_schedule_code_and_latency_in_us(live: str) -> None:
    page = httpx.get(f"{live}/team/tuning_record", timeout=30).text
    assert "def apply_trace(sch" in page and "sch.sample_perfect_tile(" in page
    assert " us" in page and "GFLOPS" in page
    assert "GetSBlock" not in page  # the raw JSON is not shown
    workload_page = httpx.get(f"{live}/team/workload", timeout=30).text
    assert f'href="/-/msdb/team/workload/{GMM}"' in workload_page
    assert "bytes of IR (not shown)" in workload_page


def test_best_record_is_the_library_best(live: str, team_db: Path) -> None:
    db = msdb.SQLiteDatabase(team_db, read_only=True)
    try:
        best = show_workload(db, GMM).best
    finally:
        db.close()
    got = rows(f"{live}/team/best_record.json", shash=GMM, target_kind="llvm")
    assert [(r["record_id"], r["latency_us"]) for r in got] == [(b.record_id, pytest.approx(b.mean_run_secs * 1e6))
                                                               for b in best]
    assert rows(f"{live}/team/best_record.json", shash=GMM, target_kind="cuda") == []
    page = httpx.get(f"{live}/team/best_record", params={"shash": GMM, "target_kind": ""}, timeout=30).text
    assert "sch.sample_perfect_tile(" in page


def test_leaderboard_orders_workloads_by_weighted_latency(live: str, team_db: Path) -> None:
    db = msdb.SQLiteDatabase(team_db, read_only=True)
    try:
        listing = {row.shash: row for row in list_workloads(db)}
    finally:
        db.close()
    got = rows(f"{live}/team/leaderboard.json")
    assert {r["shash"] for r in got} == set(listing)
    weighted = [r["weighted_us"] for r in got]
    assert weighted == sorted(weighted, reverse=True)
    for r in got:
        assert r["best_us"] == pytest.approx(listing[r["shash"]].best_us)
        assert r["weight"] == (2.0 if r["shash"] == GMM else 1.0)  # GMM: a task of resnet and of bert
        assert r["weighted_us"] == pytest.approx(r["best_us"] * r["weight"])


def test_shared_workloads_are_the_ones_two_models_use(live: str) -> None:
    got = rows(f"{live}/team/shared_workloads.json")
    assert [(r["shash"], sorted(r["model_names"].split(",")), r["records"]) for r in got] == [
        (GMM, ["bert", "resnet"], 128)]


@pytest.mark.slow
def test_records_since_pages_through_every_record_in_id_order(live: str, team_db: Path) -> None:
    seen: list[dict[str, Any]] = []
    after = ""
    while True:
        page = rows(f"{live}/team/records_since.json", after=after, limit=50)
        assert len(page) <= 50
        if not page:
            break
        seen.extend(page)
        after = str(page[-1]["id"])
    with sqlite3.connect(team_db) as conn:
        conn.row_factory = sqlite3.Row
        stored = [dict(r) for r in conn.execute("SELECT * FROM tuning_record ORDER BY id")]
    assert [r["id"] for r in seen] == [r["id"] for r in stored]
    assert tuple(seen[0]) == RECORDS_SINCE_COLUMNS
    assert all({k: r[k] for k in s} == s for r, s in zip(seen, stored))  # every tuning_record column, as stored
    assert {r["shash"] for r in seen} == {r.shash for r in msdb_listing(team_db)}
    first = rows(f"{live}/team/records_since.json", after=seen[9]["id"], limit=3)
    assert [r["id"] for r in first] == [r["id"] for r in seen[10:13]]
    assert len(rows(f"{live}/team/records_since.json")) == len(stored)  # defaults: from the start, a full page


def msdb_listing(team_db: Path) -> list[Any]:
    db = msdb.SQLiteDatabase(team_db, read_only=True)
    try:
        return list_workloads(db)
    finally:
        db.close()


def test_model_hits_lists_each_task_as_hit_or_miss(live: str) -> None:
    got = rows(f"{live}/team/model_hits.json", model="resnet", target_kind="llvm")
    assert [(r["task"], r["status"]) for r in got] == [("GMM", "hit"), ("linear", "hit")]
    assert all(r["best_us"] > 0 and r["record_id"] for r in got)
    missed = rows(f"{live}/team/model_hits.json", model="mobilenet", target_kind="cuda")
    assert [r["status"] for r in missed] == ["miss", "miss"] and all(r["record_id"] is None for r in missed)
    assert rows(f"{live}/team/model_hits.json", model="no such model", target_kind="") == []


@pytest.mark.parametrize("name", sorted(QUERIES))
def test_every_canned_query_page_answers(live: str, name: str) -> None:
    params = {"shash": GMM, "target_kind": "llvm", "model": "resnet", "after": "0", "limit": "5"}
    assert httpx.get(f"{live}/team/{name}", params=params, timeout=30).status_code == 200


@pytest.mark.slow
def test_workload_page_has_schedule_code_script_and_one_curve_per_source(live: str, team_db: Path) -> None:
    page = httpx.get(f"{live}/-/msdb/team/workload/{GMM}", timeout=30)
    assert page.status_code == 200
    html = page.text
    db = msdb.SQLiteDatabase(team_db, read_only=True)
    try:
        _, curves = tuning_curves(db, GMM)
    finally:
        db.close()
    assert len(curves) == 2  # team_a's and team_b's imports
    assert html.count('class="msdb-curve"') == len(curves)
    assert "<svg" in html and "def apply_trace(sch" in html and "sch.sample_perfect_tile(" in html
    assert "prim_func" in html and 'style="color:' in html  # TVMScript, highlighted by Pygments
    assert "http://" not in html.split("<svg", 1)[1].split("</svg>")[0].replace("http://www.w3.org/2000/svg", "")
    assert httpx.get(f"{live}/-/msdb/team/workload/{GMM[:8]}", timeout=30).status_code == 200  # a prefix
    assert httpx.get(f"{live}/-/msdb/team/workload/ffffffffffffffff", timeout=30).status_code == 404
    assert httpx.get(f"{live}/-/msdb/nosuchdb/workload/{GMM}", timeout=30).status_code == 404


@pytest.mark.slow
def test_workload_page_and_canned_query_list_the_relatives_and_their_best_records(tmp_path: Path) -> None:
    """Workload families on the hub: the same matmul at three sizes is one family; each page lists the other two,
    linked, with the best record per target, and the `relatives` canned query answers what the
    library does."""
    from tests.database.helpers import CPU, GPU, matmul, record

    path = tmp_path / "family.sqlite"
    db = msdb.SQLiteDatabase(path)
    small, mid, large = (db.commit_workload(matmul(n=n)) for n in (16, 32, 64))
    db.commit_tuning_records([record(mid, [2e-3]), record(mid, [1e-3], inner=2), record(mid, [4e-3], GPU)])
    # two targets whose short labels are equal: the page tells them apart
    for target in ("llvm -num-cores=1 -mtriple=x86_64-conda-linux-gnu", "llvm -num-cores=1"):
        db.commit_tuning_record(record(small, [3e-3], msdb.Target(target)))
    db.close()
    reader = msdb.SQLiteDatabase(path, read_only=True)
    try:
        expected = workload_relatives(reader, small.shash)
    finally:
        reader.close()
    assert [(r.shash, len(r.best)) for r in expected] == [(mid.shash, 2), (large.shash, 0)]
    with running_hub(path, tmp_path / "serve.log") as base:
        html = httpx.get(f"{base}/-/msdb/family/workload/{small.shash}", timeout=30).text
        got = rows(f"{base}/family/relatives.json", shash=small.shash, target_kind="")
        cpu_only = rows(f"{base}/family/relatives.json", shash=small.shash, target_kind="llvm")
        own = httpx.get(f"{base}/-/msdb/family/workload/{mid.shash}", timeout=30).text
    assert "<h2>Relatives</h2>" in html
    headings = re.findall(r'<h3 class="msdb-best">([^:<]*):', html)
    assert sorted(headings) == ["llvm -num-cores=1", "llvm -num-cores=1 -mtriple=x86_64-conda-linux-gnu"], headings
    assert f'class="msdb-relative" href="/-/msdb/family/workload/{mid.shash}"' in html
    assert f'class="msdb-relative" href="/-/msdb/family/workload/{large.shash}"' in html
    assert "1,000.00 us" in html and "no valid record" in html  # mid's best on the CPU; large has none
    assert f"workload/{small.shash}" in own and f"workload/{mid.shash}\"" not in own.split("<h2>Relatives</h2>")[1]
    assert [(r["shash"], r["record_id"], r["latency_us"]) for r in got] == [
        (rel.shash, best.record_id, pytest.approx(best.mean_run_secs * 1e6)) for rel in expected for best in rel.best]
    assert [r["record_id"] for r in cpu_only] == [expected[0].best[0].record_id]


@pytest.mark.slow
def test_live_database_takes_writes_while_served(tmp_path: Path) -> None:
    db = make_team_db(tmp_path / "growing.sqlite", teams=("team_a",))
    with running_hub(db, tmp_path / "serve.log") as base:
        page = f"{base}/-/msdb/growing/workload/{GMM}"
        before = len(rows(f"{base}/growing/tuning_record.json", _size="max"))
        curves_before = httpx.get(page, timeout=30).text.count('class="msdb-curve"')
        msdb.import_logs(str(db), [TEAM_LOGS / "team_b"], model=MODELS["team_b"])  # a writer while it serves
        after = len(rows(f"{base}/growing/tuning_record.json", _size="max"))
        curves_after = httpx.get(page, timeout=30).text.count('class="msdb-curve"')
        assert httpx.get(f"{base}/growing.json", params={"sql": "select 1"}, timeout=30).status_code == 200
    assert (before, after) == (128, 256)
    assert (curves_before, curves_after) == (1, 2)  # team_b's GMM records: a second source, a second line
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_continued_tuning_curves_equal_curves_computed_afresh(tmp_path: Path) -> None:
    """The workload page continues its cached curves with only the newer records."""
    path = make_team_db(tmp_path / "curves.sqlite", teams=("team_a",))
    db = msdb.SQLiteDatabase(path, read_only=True)
    try:
        _, first = tuning_curves(db, GMM)
        msdb.import_logs(str(path), [TEAM_LOGS / "team_b"], model=MODELS["team_b"])
        _, continued = tuning_curves(db, GMM, since=first)
        _, fresh = tuning_curves(db, GMM)
        _, unchanged = tuning_curves(db, GMM, since=fresh)
    finally:
        db.close()
    assert continued == fresh == unchanged and len(fresh) == 2 and len(first) == 1
    assert [len(c.best_us) for c in fresh] == [64, 64]


@pytest.mark.slow
def test_published_hub_answers_pages_and_canned_queries(published: tuple[str, Path], team_db: Path) -> None:
    base, out = published
    for table in TABLES:
        assert len(rows(f"{base}/snapshot/{table}.json", _size="max")) == count(team_db, table)
    assert len(rows(f"{base}/snapshot/records_since.json", after=0, limit=1000)) == count(team_db, "tuning_record")
    assert httpx.get(f"{base}/-/msdb/snapshot/workload/{GMM}", timeout=30).status_code == 200
    dbs = httpx.get(f"{base}/-/databases.json", timeout=30).json()
    assert [(d["name"], d["is_mutable"]) for d in dbs] == [("snapshot", False)]
    manifest = httpx.get(f"{base}/-/metadata.json", timeout=30).json()["msdb_manifest"]
    assert manifest["sha256"] == hashlib.sha256((out / "snapshot.sqlite").read_bytes()).hexdigest()


@pytest.mark.slow
def test_published_hub_refuses_sql_and_writes(published: tuple[str, Path]) -> None:
    base, out = published
    snapshot = out / "snapshot.sqlite"
    digest = hashlib.sha256(snapshot.read_bytes()).hexdigest()
    refused_gets = [
        ("/snapshot", {"sql": "select 1"}),
        ("/snapshot.json", {"sql": "select * from source"}),
        ("/snapshot/tuning_record.json", {"_where": "1=1"}),
    ]
    for path, params in refused_gets:
        response = httpx.get(base + path, params=params, timeout=30)
        assert response.status_code == 403, (path, params, response.status_code)
    delete = "delete from tuning_record"
    writes = [
        ("/snapshot", {"sql": delete}),
        ("/snapshot/tuning_record", {"id": "1"}),
        ("/snapshot/-/insert", {"row": "{}"}),
        ("/snapshot/tuning_record/-/insert", {"row": "{}"}),
        ("/snapshot/tuning_record/1/-/delete", {}),
        ("/snapshot/records_since", {"after": "0", "limit": "1"}),
    ]
    for path, form in writes:
        response = httpx.post(base + path, data=form, timeout=30)
        assert response.status_code >= 400, (path, response.status_code)
    assert len(rows(f"{base}/snapshot/tuning_record.json", _size="max")) == 384
    assert hashlib.sha256(snapshot.read_bytes()).hexdigest() == digest


@pytest.mark.slow
def test_serve_refuses_what_is_not_an_msdb_database(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    sqlite3.connect(tmp_path / "other.sqlite").execute("CREATE TABLE t (x)").connection.close()
    (tmp_path / "nomanifest").mkdir()
    for path, message in [(tmp_path / "missing.sqlite", "no such database file"),
                          (tmp_path / "notes.txt", "not an SQLite database"),
                          (tmp_path / "other.sqlite", "not an msdb database"),
                          (tmp_path / "nomanifest", "without manifest.json")]:
        result = subprocess.run([sys.executable, "-m", "msdb.cli.main", "serve", str(path)], capture_output=True,
                                text=True, timeout=60)
        assert result.returncode == 1, result.stderr
        assert result.stderr.startswith("Error: ") and message in result.stderr, result.stderr


@pytest.mark.slow
def test_plain_datasette_picks_up_the_plugin_by_its_entry_point(team_db: Path) -> None:
    """`pip install msdb` registers the plugin with datasette itself: no `msdb serve` needed."""
    def get(path: str) -> str:
        result = subprocess.run([sys.executable, "-m", "datasette", str(team_db), "--get", path], capture_output=True,
                                text=True, timeout=120)
        assert result.returncode == 0, result.stderr
        return result.stdout

    assert "sch.sample_perfect_tile(" in get("/team/tuning_record/1")
    assert 'class="msdb-curves"' in get(f"/-/msdb/team/workload/{GMM}")


def test_run_secs_cells_mark_failures_by_the_ranking_rule() -> None:
    import asyncio

    from msdb.hub.plugin import render_cell

    cell = asyncio.run(render_cell({}, "[0.001, 10000000000, 2e10]", "run_secs", "tuning_record", "team", None))
    assert cell == "1,000.00 us, failed, failed"
