"""A real browser on a real hub: Debian's chromium, headless, loads the workload page
that `msdb serve` renders and sees the trace as schedule code and the tuning-curve chart; a
screenshot is kept as a test artifact (in $MSDB_TEST_ARTIFACTS when set, else the test's tmp
folder). Chromium is part of the test set-up (README, .ci/run): a missing one fails, never skips."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.hub.serving import make_team_db, running_hub

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]

GMM = "cd74d25fd1596994"
#: Flags for headless chromium as root in a container: no sandbox, no GPU, nothing fetched from
#: the network behind the page's back, a throw-away profile.
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run",
         "--disable-extensions", "--hide-scrollbars", "--window-size=1280,2000")


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.fail("chromium is not installed: `apt-get update && apt-get install -y chromium` "
                    "(the README's test command and .ci/run do it)")
    return found


def run_chromium(*args: str, profile: Path) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([chromium(), *FLAGS, f"--user-data-dir={profile}", *args], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    return result


def test_workload_page_in_chromium_shows_schedule_code_and_chart(tmp_path: Path) -> None:
    db = make_team_db(tmp_path / "team.sqlite")
    artifacts = Path(os.environ.get("MSDB_TEST_ARTIFACTS") or tmp_path / "artifacts")
    artifacts.mkdir(parents=True, exist_ok=True)
    screenshot = artifacts / "hub-workload-page.png"
    screenshot.unlink(missing_ok=True)
    with running_hub(db, tmp_path / "serve.log") as base:
        url = f"{base}/-/msdb/team/workload/{GMM}"
        dom = run_chromium("--dump-dom", url, profile=tmp_path / "profile").stdout
        run_chromium(f"--screenshot={screenshot}", url, profile=tmp_path / "profile")
    # The DOM chromium built (not the HTML sent): the trace as TVM prints it, the inline chart.
    assert f"Workload {GMM} (GMM)" in dom
    assert "def apply_trace(sch: s_tir.Schedule) -&gt; None:" in dom
    assert "sch.sample_perfect_tile(loop=" in dom and "sch.get_sblock(name=" in dom
    assert '<svg xmlns="http://www.w3.org/2000/svg" class="msdb-curves"' in dom
    assert dom.count('class="msdb-curve"') == 2  # one line per source: team_a's and team_b's imports
    assert "GetSBlock" not in dom  # no raw trace JSON
    png = screenshot.read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 20_000, len(png)
    print(f"screenshot: {screenshot}")
