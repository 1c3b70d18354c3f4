"""msdb's version is declared once per file that must carry it: pyproject.toml's `[project]
version` (what pip installs) and msdb/version.py (what the code reads, below every layer);
`msdb.__version__` is the latter, re-exported."""

from __future__ import annotations

import pathlib
import tomllib

import msdb
from msdb.version import __version__

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_the_version_module_says_what_pyproject_says() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert __version__ == project["version"]


def test_the_package_re_exports_the_version_module() -> None:
    assert msdb.__version__ is __version__
    assert "__version__" in msdb.__all__
