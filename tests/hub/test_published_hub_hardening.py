"""A published hub shows no server path, answers writes 405 and a
refused `?sql=` in JSON; the workload page's tuning-curve chart neither clips long legends
(sources named by their import paths) nor covers its axis title.

Each hub is real: `msdb serve OUTDIR`, or the plain `datasette serve -i` that a publish
directory also works with (msdb's plugin loaded through its entry point), in a subprocess on a
free loopback port (`tests.hub.hubs.hub_server`).
"""

from __future__ import annotations

import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Iterator

import httpx
import pytest

import msdb
from msdb.database.catalog import TuningCurve
from msdb.hub.canned import QUERIES
from msdb.hub.plugin import FONT_PX, curve_svg
from msdb.hub.publish import publish
from tests.hub.hubs import hub_server
from tests.hub.serving import TEAM_LOGS, make_team_db, running_hub

pytestmark = pytest.mark.timeout(300)

GMM = "cd74d25fd1596994"
TABLES = ("workload", "tuning_record", "target", "source", "model", "task")
SVG = "{http://www.w3.org/2000/svg}"
#: What a monospace character of the legend and a sans-serif tick character take at most (px).
MONO_PX, SANS_PX = 0.6 * FONT_PX, 0.65 * FONT_PX


@pytest.fixture(scope="module")
def outdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("pub")
    db = make_team_db(root / "team.sqlite", ("team_a",))
    publish(db, root / "hub")
    return root / "hub"


@pytest.fixture(scope="module", params=["msdb-serve", "datasette-printed"])
def hub(request: pytest.FixtureRequest, outdir: Path) -> Iterator[str]:
    """The base URL (no trailing slash) of a hub serving the publish directory."""
    with hub_server(outdir, outdir.parent / f"{request.param}.log", request.param) as base:
        yield base.rstrip("/")


def pages(base: str) -> list[str]:
    """Every kind of page and JSON document a published hub has."""
    urls = ["/", "/.json", "/snapshot", "/snapshot.json", f"/-/msdb/snapshot/workload/{GMM}",
            "/-/msdb/snapshot/workload/ffff", "/-/msdb/snapshot/workload/0", "/nope", "/nope.json",
            "/snapshot/nope.json", "/snapshot.json?sql=select+1", "/snapshot/workload.json?_where=1"]
    for special in ("databases", "metadata", "versions", "plugins", "settings", "threads", "actor"):
        urls += [f"/-/{special}", f"/-/{special}.json"]
    for table in TABLES:
        urls += [f"/snapshot/{table}", f"/snapshot/{table}.json"]
    for table in ("source", "tuning_record"):
        urls += [f"/snapshot/{table}/1", f"/snapshot/{table}/1.json", f"/snapshot/{table}.csv"]
    for name in QUERIES:
        urls += [f"/snapshot/{name}", f"/snapshot/{name}.json"]
    return [base + url for url in urls]


@pytest.mark.slow
def test_no_page_or_json_of_a_published_hub_names_a_server_path(hub: str, outdir: Path) -> None:
    where = {str(outdir), str(outdir.resolve()), str(outdir.parent), str(Path.cwd())}
    for url in pages(hub):
        body = httpx.get(url, timeout=30).text
        shown = sorted(path for path in where if path in body)
        assert not shown, f"{url} shows {shown}"
    # what a puller reads of /-/databases.json is still there
    (listed,) = httpx.get(f"{hub}/-/databases.json", timeout=30).json()
    assert listed["name"] == "snapshot" and listed["is_mutable"] is False and len(listed["hash"]) == 64
    assert "path" not in listed


@pytest.mark.slow
def test_a_published_hub_answers_writes_405(hub: str, outdir: Path) -> None:
    digest = (outdir / "snapshot.sqlite").read_bytes()
    targets = [f"/snapshot/{name}" for name in QUERIES] + [f"/snapshot/{name}.json" for name in QUERIES]
    targets += [f"/snapshot/{table}" for table in TABLES] + ["/snapshot/tuning_record/1", "/snapshot"]
    requests = [("POST", path) for path in targets]
    requests += [(method, "/snapshot/workload") for method in ("PUT", "DELETE", "PATCH")]
    for method, path in requests:
        response = httpx.request(method, hub + path, data={"after": "0", "limit": "1"}, timeout=30)
        assert response.status_code == 405, (method, path, response.status_code, response.text[:300])
        assert response.json()["ok"] is False and "read-only" in response.json()["error"]
        assert "GET" in response.headers["allow"]
    assert httpx.get(f"{hub}/snapshot/records_since.json", params={"after": 0, "limit": 1}, timeout=30).status_code == 200
    assert (outdir / "snapshot.sqlite").read_bytes() == digest


@pytest.mark.slow
def test_refused_sql_is_json_when_json_was_asked(hub: str) -> None:
    for url, params in (("/snapshot.json", {"sql": "select 1"}), ("/snapshot.json", {"sql": "select * from source"}),
                        ("/snapshot", {"sql": "select 1", "_format": "json"})):
        response = httpx.get(hub + url, params=params, timeout=30)
        assert response.status_code == 403 and response.headers["content-type"].startswith("application/json")
        body = response.json()
        assert body["ok"] is False and body["status"] == 403 and "SQL is off on this hub" in body["error"]
    page = httpx.get(f"{hub}/snapshot", params={"sql": "select 1"}, timeout=30)  # a browser still gets a page
    assert page.status_code == 403 and page.headers["content-type"].startswith("text/html")


# ---------------------------------------------------------------- the tuning-curve chart


def _texts(svg: str) -> tuple[ET.Element, list[ET.Element]]:
    root = ET.fromstring(svg)
    return root, list(root.iter(f"{SVG}text"))


def _check_chart(svg: str, labels: list[str]) -> None:
    """Every legend line inside the chart, each label whole across its lines (and as a tooltip),
    legends below the plot and clear of each other, tick labels clear of the y-axis title."""
    root, texts = _texts(svg)
    width, height = float(root.get("width", 0)), float(root.get("height", 0))
    legends = [t for t in texts if t.get("class") == "msdb-legend"]
    assert len(legends) == len(labels)
    plot = root.find(f"{SVG}rect")
    assert plot is not None
    plot_bottom = float(plot.get("y", 0)) + float(plot.get("height", 0))
    previous_bottom = plot_bottom + 16  # below the x tick labels and the axis title "trials"
    for text, label in zip(legends, labels):
        assert "monospace" in text.get("style", "")
        title = text.find(f"{SVG}title")
        assert title is not None and title.text == label
        lines = [span.text or "" for span in text.findall(f"{SVG}tspan")]
        assert re.sub(r"\s", "", "".join(lines)) == re.sub(r"\s", "", label)  # nothing left out
        x, y = float(text.get("x", 0)), float(text.get("y", 0))
        assert all(x + MONO_PX * len(line) <= width for line in lines), (width, lines)
        assert y - FONT_PX >= previous_bottom - 4  # clear of what is above it
        previous_bottom = y + 16 * (len(lines) - 1) + 4
        assert previous_bottom <= height
    (title,) = [t for t in texts if t.get("class") == "msdb-axis-title"]
    title_right = float(title.get("x", 0)) + FONT_PX / 2 + 4
    for tick in (t for t in texts if t.get("class") == "msdb-tick"):
        assert float(tick.get("x", 0)) - SANS_PX * len(tick.text or "") >= title_right, tick.text


def test_long_legends_wrap_inside_the_chart_and_ticks_clear_the_axis_title() -> None:
    path = "/home/someone/projects/tuning/" + "deeply/nested/" * 6 + "database_tuning_record.json"
    labels = [f"#{i} import {path} by alice@alice-workstation 2026-11-29 07:43" for i in range(3)]
    labels.append("#9 import /" + "x" * 300)  # one piece longer than a line
    curves = [TuningCurve(i, label, [1234567.8 / (i + 1), 45678.9 / (i + 1), None]) for i, label in enumerate(labels)]
    _check_chart(curve_svg(curves), labels)


@pytest.mark.slow
def test_the_workload_page_chart_of_sources_with_long_import_paths(tmp_path: Path) -> None:
    """A live hub (a snapshot leaves import paths out) of logs imported from deep folders; it
    also still lists its file's path in /-/databases.json (for the team, on its own machine)."""
    deep = tmp_path.joinpath(*["a-rather-long-folder-name"] * 8)
    for team in ("team_a", "team_b"):
        shutil.copytree(TEAM_LOGS / team, deep / team)
        msdb.import_logs(str(tmp_path / "team.sqlite"), [deep / team])
    with running_hub(tmp_path / "team.sqlite", tmp_path / "serve.log") as base:
        page = httpx.get(f"{base}/-/msdb/team/workload/{GMM}", timeout=30).text
        (listed,) = httpx.get(f"{base}/-/databases.json", timeout=30).json()
    assert listed["path"] == str((tmp_path / "team.sqlite").resolve())  # a live hub still lists its file
    svg = re.search(r'<svg xmlns="http://www.w3.org/2000/svg" class="msdb-curves".*?</svg>', page, re.S)
    assert svg is not None
    _root, texts = _texts(svg[0])
    labels = [t.find(f"{SVG}title").text or "" for t in texts if t.get("class") == "msdb-legend"]  # type: ignore[union-attr]
    assert len(labels) == 2 and all(str(deep) in label for label in labels)
    _check_chart(svg[0], labels)
