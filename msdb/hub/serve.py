"""`msdb serve PATH`: datasette over an msdb database (docs/architecture.md, "Hub").

PATH is one of two things, served differently:
- a live database file: served mutable, in WAL mode, so tuners and imports keep writing while
  it serves (a non-WAL file locked by a writer would answer "database is locked" after 5 s);
  arbitrary SQL stays on, for the team on this machine or network;
- a `msdb publish` directory (`manifest.json` beside `snapshot.sqlite`): served immutable
  (datasette's `-i`: no locks, no journal, cacheable) with arbitrary SQL off, so a published
  hub answers only its pages, the JSON API and the canned queries. Nothing writes to it. The
  cost model files its manifest names (`cost-models/`) are served too, by the plugin's route
  `/-/msdb/<database>/cost-models/<name>` (`msdb pull` fetches them).

The server is datasette's ASGI app on uvicorn in this process, built with datasette's Python API
(`build_datasette`) with msdb's metadata and plugin registered even when the plugin's entry point
is not installed.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import webbrowser
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from msdb.errors import MsdbError

__all__ = ["MANIFEST_NAME", "SNAPSHOT_NAME", "ServeError", "ServePlan", "plan_serve", "build_datasette", "serve"]

log = logging.getLogger(__name__)

#: The file names of a publish directory (shared with `msdb.hub.publish`).
MANIFEST_NAME = "manifest.json"
SNAPSHOT_NAME = "snapshot.sqlite"

#: Datasette settings for every msdb hub: sync pages as large as the canned query allows; no facet
#: suggestions (each tries a GROUP BY per column on every table page: seconds on a million records;
#: the metadata names the useful facets).
BASE_SETTINGS: dict[str, Any] = {"max_returned_rows": 1000, "suggest_facets": False}


class ServeError(MsdbError):
    """A path that `msdb serve` cannot serve (missing, not an msdb database, a broken publish directory)."""


@dataclass(frozen=True)
class ServePlan:
    """What `serve` will do with a path: the SQLite file, datasette's name for it (the file's
    stem), whether it is a published snapshot (immutable, SQL off), and then its manifest
    (served in the metadata as `msdb_manifest`, where `msdb pull` checks the snapshot)."""

    file: Path
    name: str
    published: bool
    manifest: dict[str, Any] | None = None


def _read_manifest(directory: Path) -> dict[str, Any]:
    manifest_path = directory / MANIFEST_NAME
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ServeError(f"{manifest_path}: not a readable JSON manifest ({exc}); run `msdb publish DB {directory}` "
                         "again") from None
    if not isinstance(manifest, dict):
        raise ServeError(f"{manifest_path}: not a JSON object; run `msdb publish DB {directory}` again")
    return manifest


def _snapshot_of(directory: Path, manifest: dict[str, Any]) -> Path:
    name = manifest.get("snapshot", SNAPSHOT_NAME)
    manifest_path = directory / MANIFEST_NAME
    if not isinstance(name, str) or Path(name).name != name:
        raise ServeError(f"{manifest_path}: snapshot {name!r} must be a file name in {directory}")
    snapshot = directory / name
    if not snapshot.is_file():
        raise ServeError(f"{directory} has a manifest but no snapshot {name}; run `msdb publish DB {directory}` again")
    return snapshot


def _check_cost_models(directory: Path, manifest: dict[str, Any]) -> None:
    """Refuse a publish directory whose manifest names cost model files it lacks (or names them
    in a way `msdb pull` would refuse)."""
    from msdb.hub.publish import manifest_cost_models

    manifest_path = directory / MANIFEST_NAME
    try:
        models = manifest_cost_models(manifest)
    except ValueError as exc:
        raise ServeError(f"{manifest_path}: {exc}; run `msdb publish DB {directory} --cost-model FILE` again") from None
    for model in models:
        if not (directory / model.file).is_file():
            raise ServeError(f"{directory} has a manifest naming cost model {model.file} but no such file; run "
                             f"`msdb publish DB {directory} --cost-model FILE` again")


def _check_msdb_file(path: Path) -> None:
    """Refuse a file that is not an SQLite database with msdb's tables, read without writing."""
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        raise ServeError(f"{path}: not an SQLite database ({exc})") from None
    missing = {"workload", "tuning_record", "target"} - tables
    if missing:
        raise ServeError(f"{path}: not an msdb database (no table {', '.join(sorted(missing))}); "
                         "`msdb import` or `msdb merge` makes one")


def _ensure_wal(path: Path) -> None:
    """Switch a live database to WAL so datasette reads while writers write (a no-op when it is)."""
    conn = sqlite3.connect(path, timeout=30)
    try:
        mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
        if str(mode).lower() != "wal":
            log.info("switching %s to WAL so it can be served while it is written", path)
            conn.execute("PRAGMA journal_mode=WAL")
    except sqlite3.OperationalError as exc:
        raise ServeError(f"{path}: cannot switch to WAL to serve it live ({exc}); serve a `msdb publish` "
                         "directory instead") from None
    finally:
        conn.close()


def plan_serve(path: str | Path) -> ServePlan:
    """What PATH is (see the module docstring); raises `ServeError` for anything else."""
    given = Path(path).expanduser()
    if given.is_dir():
        if not (given / MANIFEST_NAME).is_file():
            raise ServeError(f"{given} is a directory without {MANIFEST_NAME}: give a database file or a "
                             "`msdb publish` directory")
        manifest = _read_manifest(given)
        snapshot = _snapshot_of(given, manifest)
        _check_msdb_file(snapshot)
        _check_cost_models(given, manifest)
        return ServePlan(snapshot.resolve(), snapshot.stem, True, manifest)
    if not given.is_file():
        raise ServeError(f"{given}: no such database file or publish directory")
    _check_msdb_file(given)
    return ServePlan(given.resolve(), given.stem, False)


def build_datasette(plan: ServePlan, *, settings: dict[str, Any] | None = None) -> Any:
    """A `datasette.app.Datasette` serving `plan` with msdb's metadata and plugin (startup not
    yet invoked). A live file is switched to WAL first."""
    from datasette.app import Datasette
    from datasette.plugins import pm

    from msdb.hub import plugin
    from msdb.hub.metadata import build_metadata

    # Routes are built when Datasette() is constructed: the plugin must be registered before.
    if not pm.is_registered(plugin) and pm.get_plugin("msdb") is None:
        pm.register(plugin, name="msdb")
    all_settings = {**BASE_SETTINGS, **(settings or {})}
    metadata = build_metadata(plan.name, immutable=plan.published)
    if plan.manifest is not None:
        metadata["msdb_manifest"] = plan.manifest
    if plan.published:
        all_settings["default_allow_sql"] = False
        return Datasette(immutables=[str(plan.file)], metadata=metadata, settings=all_settings)
    _ensure_wal(plan.file)
    return Datasette([str(plan.file)], metadata=metadata, settings=all_settings)


def serve(path: str | Path, host: str = "127.0.0.1", port: int = 8001, open_browser: bool = False, *,
          on_ready: Callable[[ServePlan, str], None] | None = None) -> None:
    """Serve PATH (a database file or a publish directory) over HTTP until interrupted.
    `on_ready(plan, url)` is called once PATH is checked, just before the server starts (the
    CLI prints the URL there); datasette's startup hooks run in the server's lifespan."""
    import uvicorn

    plan = plan_serve(path)
    ds = build_datasette(plan)
    url = f"http://{host}:{port}/"
    how = "read-only snapshot, SQL off" if plan.published else "live, WAL"
    log.info("serving %s (%s) at %s", plan.file, how, url)
    if on_ready is not None:
        on_ready(plan, url)
    if open_browser:
        webbrowser.open(url)
    uvicorn.run(ds.app(), host=host, port=port, log_level="warning", lifespan="on")
