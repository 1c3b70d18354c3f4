"""Shared by the CLI and interop tests: the team logs, variants of them with one defect, and
snapshots that show a database did not change."""

from __future__ import annotations

import base64
import hashlib
import json
import pathlib
import shutil
import sqlite3
import struct
from typing import Any, Callable

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "data" / "fixtures"
TEAMS = {name: FIXTURES / "tvm-0.27" / name for name in ("team_a", "team_b", "team_c")}
LEGACY = {name: FIXTURES / "tvm-legacy" / name for name in ("team_a_pre0.24", "team_a_pre0.17")}
WORKLOAD_FILE = "database_workload.json"
RECORD_FILE = "database_tuning_record.json"
TABLES = ("workload", "target", "source", "tuning_record", "model", "task")


def copy_team(name: str, dest: pathlib.Path) -> pathlib.Path:
    """A writable copy of a fixture work_dir."""
    source = TEAMS.get(name) or LEGACY[name]
    shutil.copytree(source, dest)
    return dest


def edit_lines(path: pathlib.Path, edit: Callable[[list[str]], list[str]]) -> None:
    """Rewrite a file's lines (keeping their newlines)."""
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(edit(lines)))


def frame(document: bytes) -> str:
    """A TVM workload payload: 8-byte little-endian length, then the bytes, in base64."""
    return base64.b64encode(struct.pack("<Q", len(document)) + document).decode("ascii")


def unframe(payload: str) -> bytes:
    return base64.b64decode(payload)[8:]


def legacy_payload() -> str:
    """A workload payload in TVM's <= 0.21 graph format (`root`, `b64ndarrays`)."""
    graph = {"root": 1, "nodes": [{"type_key": ""}, {"type_key": "IRModule", "attrs": {"functions": "0"}}],
             "b64ndarrays": [], "attrs": {"tvm_version": "0.20.0"}}
    return frame(json.dumps(graph, indent=2).encode())


def with_unknown_node(payload: str, old: str = "tirx.For", new: str = "tirx.Frobnicate") -> str:
    """`payload` with one node type renamed to one msdb does not know."""
    graph = json.loads(unframe(payload))
    for node in graph["nodes"]:
        if node.get("type") == old:
            node["type"] = new
            break
    else:  # pragma: no cover - the fixtures all have loops
        raise AssertionError(f"no {old} node")
    return frame(json.dumps(graph, indent=2).encode())


def file_records(*work_dirs: pathlib.Path) -> list[list[Any]]:
    """Every record line of the work_dirs, parsed."""
    out = []
    for wd in work_dirs:
        for line in (wd / RECORD_FILE).read_text().splitlines():
            if line.strip():
                out.append(json.loads(line))
    return out


def best_mean_by_tvm_shash(*work_dirs: pathlib.Path) -> dict[str, float]:
    """TVM's shash -> minimum mean run_secs of the valid records of that workload, computed from
    the files alone (TVM's validity rule)."""
    best: dict[str, float] = {}
    for wd in work_dirs:
        shashes = [json.loads(line)[0] for line in (wd / WORKLOAD_FILE).read_text().splitlines() if line.strip()]
        for index, (trace, run_secs, _target, _args) in ((r[0], r[1]) for r in file_records(wd)):
            if not run_secs or min(run_secs) >= 1e10 or not trace[0] or trace[0][0][0] == "EnterPostproc":
                continue
            mean = sum(run_secs) / len(run_secs)
            key = shashes[index]
            best[key] = min(best.get(key, mean), mean)
    return best


def snapshot(db_path: pathlib.Path) -> tuple[str, dict[str, int], str]:
    """(sha256 of the database file, row count per table, a digest of every row): equal before
    and after means nothing was written."""
    data = db_path.read_bytes() if db_path.exists() else b""
    counts: dict[str, int] = {}
    digest = hashlib.sha256()
    if db_path.exists():
        conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
        try:
            for table in TABLES:
                counts[table] = conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
                for row in conn.execute(f"SELECT * FROM {table} ORDER BY id"):
                    digest.update(repr(row).encode())
        finally:
            conn.close()
    return hashlib.sha256(data).hexdigest(), counts, digest.hexdigest()


def row_counts(db_path: pathlib.Path) -> dict[str, int]:
    return snapshot(db_path)[1]


def record_keys(db_path: pathlib.Path) -> set[tuple[Any, ...]]:
    """What a record is, independent of row ids: (workload shash, target config, trace,
    run_secs, args_info, provenance file sha256)."""
    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        rows = conn.execute(
            "SELECT w.shash, t.config, r.trace, r.run_secs, r.args_info, s.sha256, s.location "
            "FROM tuning_record r JOIN workload w ON w.id = r.workload_id JOIN target t ON t.id = r.target_id "
            "LEFT JOIN source s ON s.id = r.source_id").fetchall()
    finally:
        conn.close()
    return set(rows)


def query(db_path: pathlib.Path, sql: str) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()
