"""The hub's canned queries: named, parameterized SQL that datasette serves at `/<db>/<name>` and
`/<db>/<name>.json?param=...&_shape=array`, how a hub answers with arbitrary SQL switched off.

`best_record`, `leaderboard`, `shared_workloads`, `records_since`, `model_hits` and `relatives`.
Datasette passes every parameter as a string: the SQL casts. The SQL reads msdb's tables by name
and is checked against the library's answers by tests/hub/test_serve.py. See
docs/architecture.md, "Hub".
"""

from __future__ import annotations

from typing import Any

__all__ = ["PAGE_MAX", "RECORDS_SINCE", "RECORDS_SINCE_COLUMNS", "RECORDS_SINCE_SQL", "QUERIES", "canned_queries"]

#: The most rows one page of `records_since` returns; `msdb serve` sets datasette's
#: `max_returned_rows` to it, since datasette cuts any query at that many rows without a next page.
PAGE_MAX = 1000

#: The name of the sync query, as `msdb pull` asks for it: `/<db>/records_since.json?after=ID&limit=N&_shape=array`.
RECORDS_SINCE = "records_since"

#: The columns of `records_since`, in order: every column of `tuning_record`, then the workload's
#: three hashes, the target's canonical config JSON (`target`), and the source's kind and location.
RECORDS_SINCE_COLUMNS = (
    "id", "workload_id", "target_id", "source_id", "trace", "trace_hash", "run_secs", "mean_run_secs", "is_valid",
    "args_info", "shash", "ignore_tensor_hash", "anchor_hash", "target", "source_kind", "source_location",
)

_GFLOPS = "CASE WHEN w.flops > 0 AND {secs} > 0 THEN w.flops / {secs} / 1e9 END"

#: Records with `id > :after` in id order, at most `:limit` of them (PAGE_MAX when empty, zero,
#: negative or larger). `:after` empty means from the start. A client pages by passing the last
#: id it got as the next `after`: ids are commit order and never reused (AUTOINCREMENT), so a
#: page boundary never skips or repeats a record, however many are added meanwhile.
RECORDS_SINCE_SQL = f"""
SELECT r.id, r.workload_id, r.target_id, r.source_id, r.trace, r.trace_hash, r.run_secs, r.mean_run_secs,
       r.is_valid, r.args_info, w.shash, w.ignore_tensor_hash, w.anchor_hash, t.config AS target,
       s.kind AS source_kind, s.location AS source_location
FROM tuning_record r
JOIN workload w ON w.id = r.workload_id
JOIN target t ON t.id = r.target_id
LEFT JOIN source s ON s.id = r.source_id
WHERE r.id > coalesce(cast(nullif(:after, '') AS integer), 0)
ORDER BY r.id
LIMIT CASE WHEN cast(:limit AS integer) BETWEEN 1 AND {PAGE_MAX} THEN cast(:limit AS integer) ELSE {PAGE_MAX} END
""".strip()

#: The best valid record `r` of workload `w` on target `t`: one index range scan (the top-k index).
_BEST_OF_W_ON_T = """JOIN tuning_record r ON r.id = (
    SELECT b.id FROM tuning_record b
    WHERE b.workload_id = w.id AND b.target_id = t.id AND b.is_valid = 1
    ORDER BY b.mean_run_secs, b.id LIMIT 1)"""

#: One row per target (of kind `:target_kind`, every kind when empty) with a valid record of the
#: workload `:shash`: the best such record. One index range scan per target (the top-k index).
BEST_RECORD_SQL = f"""
SELECT r.id AS record_id, w.shash, w.name, t.config AS target, r.mean_run_secs * 1e6 AS latency_us,
       {_GFLOPS.format(secs="r.mean_run_secs")} AS gflops, r.run_secs, r.trace, r.args_info, r.source_id
FROM workload w
JOIN target t ON :target_kind = '' OR t.kind = :target_kind
{_BEST_OF_W_ON_T}
WHERE w.shash = :shash
ORDER BY r.mean_run_secs, t.id
""".strip()

LEADERBOARD_SQL = f"""
WITH best AS (
    SELECT workload_id, target_id, min(mean_run_secs) AS secs, count(*) AS valid_records
    FROM tuning_record WHERE is_valid = 1 GROUP BY workload_id, target_id),
uses AS (
    SELECT workload_id, sum(weight) AS weight, count(DISTINCT model_id) AS models
    FROM task GROUP BY workload_id)
SELECT w.shash, w.name, t.config AS target, b.valid_records, b.secs * 1e6 AS best_us,
       coalesce(u.weight, 1.0) AS weight, b.secs * 1e6 * coalesce(u.weight, 1.0) AS weighted_us,
       {_GFLOPS.format(secs="b.secs")} AS gflops, coalesce(u.models, 0) AS models
FROM best b
JOIN workload w ON w.id = b.workload_id
JOIN target t ON t.id = b.target_id
LEFT JOIN uses u ON u.workload_id = w.id
ORDER BY weighted_us DESC, w.shash, t.id
""".strip()

SHARED_WORKLOADS_SQL = """
SELECT w.shash, w.name, count(DISTINCT task.model_id) AS models,
       group_concat(DISTINCT m.name) AS model_names,
       (SELECT count(*) FROM tuning_record r WHERE r.workload_id = w.id) AS records
FROM task
JOIN model m ON m.id = task.model_id
JOIN workload w ON w.id = task.workload_id
GROUP BY w.id
HAVING count(DISTINCT task.model_id) > 1
ORDER BY models DESC, w.shash
""".strip()

MODEL_HITS_SQL = f"""
WITH hits AS (
    SELECT task.id AS task_id, r.target_id, r.id AS record_id, min(r.mean_run_secs) AS secs
    FROM model m
    JOIN task ON task.model_id = m.id
    JOIN tuning_record r ON r.workload_id = task.workload_id AND r.is_valid = 1
    JOIN target t ON t.id = r.target_id
    WHERE m.name = :model AND (:target_kind = '' OR t.kind = :target_kind)
    GROUP BY task.id, r.target_id)
SELECT task.name AS task, task.weight, w.shash, w.name AS workload, t.config AS target,
       CASE WHEN h.task_id IS NULL THEN 'miss' ELSE 'hit' END AS status, h.record_id,
       h.secs * 1e6 AS best_us, {_GFLOPS.format(secs="h.secs")} AS gflops
FROM model m
JOIN task ON task.model_id = m.id
JOIN workload w ON w.id = task.workload_id
LEFT JOIN hits h ON h.task_id = task.id
LEFT JOIN target t ON t.id = h.target_id
WHERE m.name = :model
ORDER BY task.id, t.id
""".strip()

#: One row per relative of workload `:shash` (same `family_hash`, another row) and target (of
#: kind `:target_kind`, every kind when empty) with a valid record: the best such record. The
#: family is one lookup on `ix_workload_family_hash`, each best record one top-k index scan.
RELATIVES_SQL = f"""
SELECT w.shash, w.name, w.family_extents, t.config AS target, r.id AS record_id,
       r.mean_run_secs * 1e6 AS latency_us, {_GFLOPS.format(secs="r.mean_run_secs")} AS gflops, r.trace
FROM workload a
JOIN workload w ON w.family_hash = a.family_hash AND w.id <> a.id
JOIN target t ON :target_kind = '' OR t.kind = :target_kind
{_BEST_OF_W_ON_T}
WHERE a.shash = :shash
ORDER BY w.id, t.id
""".strip()

#: name -> datasette's canned-query metadata (`sql`, `title`, `description`).
QUERIES: dict[str, dict[str, str]] = {
    "best_record": {
        "title": "Best record of a workload",
        "description": "The best valid record of the workload with structural hash `shash` on each target of kind "
                       "`target_kind` (every kind when empty), with its trace as schedule code.",
        "sql": BEST_RECORD_SQL,
    },
    "leaderboard": {
        "title": "Leaderboard: workloads by weighted latency",
        "description": "Best latency of each workload and target times the summed weight of the model tasks "
                       "that use it, largest first: where more tuning saves the most time.",
        "sql": LEADERBOARD_SQL,
    },
    "shared_workloads": {
        "title": "Workloads shared across models",
        "description": "Workloads that more than one model uses: records tuned for one serve the others.",
        "sql": SHARED_WORKLOADS_SQL,
    },
    RECORDS_SINCE: {
        "title": "Records since an id (sync)",
        "description": f"Records with id greater than `after`, in id order, at most `limit` (at most {PAGE_MAX}); "
                       "page on by passing the last id as `after`. Used by `msdb pull`.",
        "sql": RECORDS_SINCE_SQL,
    },
    "model_hits": {
        "title": "What a model would hit",
        "description": "For each task of model `model`, the best valid record on targets of kind `target_kind` "
                       "(every kind when empty), or `miss`.",
        "sql": MODEL_HITS_SQL,
    },
    "relatives": {
        "title": "Relatives of a workload",
        "description": "Workloads of the same family as the workload with structural hash `shash` (its anchor "
                       "block at other sizes or index dtypes), with their best valid record on each target of kind "
                       "`target_kind` (every kind when empty). Their latencies were measured on them, not on "
                       "`shash`.",
        "sql": RELATIVES_SQL,
    },
}


def canned_queries() -> dict[str, dict[str, Any]]:
    """A fresh copy of `QUERIES` for a datasette metadata dict (datasette may annotate it)."""
    return {name: dict(query) for name, query in QUERIES.items()}
