"""Datasette metadata for an msdb database (docs/architecture.md, "Hub"): titles, column
descriptions, units, facets, sort orders, hidden tables and the canned queries.

Written as a plain dict (datasette 0.65's metadata format) so `msdb serve` passes it to
datasette directly and `msdb publish` writes the same thing to a file for a plain
`datasette -m metadata.json`. Datasette 1.0 reads canned queries and `allow_sql` from
`datasette.yaml` instead and silently drops them from metadata: msdb pins 0.65.
"""

from __future__ import annotations

from typing import Any

from msdb.hub.canned import canned_queries

__all__ = ["TABLES", "HIDDEN_TABLES", "build_metadata"]

#: Tables people have no use for in the browser (Alembic's and live tuners' bookkeeping); still
#: readable by URL.
HIDDEN_TABLES = ("alembic_version", "sqlite_sequence", "measurement_claim")

#: table -> its datasette metadata. Column descriptions mirror the schema's comments.
TABLES: dict[str, dict[str, Any]] = {
    "workload": {
        "title": "Workloads",
        "description": "One row per distinct workload (TensorIR module), deduplicated by structural hash. "
                       "The shash links to the workload page: TVMScript, best schedules and tuning curves.",
        "sort": "id",
        "label_column": "name",
        "facets": ["name"],
        "columns": {
            "shash": "msdb's structural hash (16 hex digits); links to the workload page",
            "ignore_tensor_hash": "structural hash ignoring constant tensor bytes",
            "anchor_hash": "structural hash of the anchor block",
            "name": "task or model layer name, for people",
            "flops": "estimated floating point operations of one run",
            "script": "the IR as TVMScript",
            "ir_format": "codec of ir_blob",
            "ir_blob": "the IR serialized for fast loading (binary, not shown)",
            "tvm_payload": "base64 payload of the TVM log line it came from (clipped)",
            "tvm_shash": "TVM's own structural hash from that line (provenance only)",
            "created_at": "when the row was written",
            "family_hash": "shape-free key of the anchor block: workloads sharing it are relatives (the same "
                           "operator at other sizes); listed on the workload page",
            "family_extents": "the sizes the family key abstracted (loop extents, shapes, index constants), "
                              "in walk order",
        },
    },
    "tuning_record": {
        "title": "Tuning records",
        "description": "One measured schedule per row, newest first. Traces are shown as the schedule code TVM "
                       "prints; latency in microseconds and GFLOPS.",
        "sort_desc": "id",
        "facets": ["target_id", "source_id", "is_valid"],
        "units": {"mean_run_secs": "s"},
        "columns": {
            "id": "commit order (never reused)",
            "workload_id": "the workload measured",
            "target_id": "the target it ran on",
            "source_id": "where the record came from (import, tune, merge, pull)",
            "trace": "TVM trace JSON [instructions, decisions], shown as schedule code",
            "trace_hash": "hash of the trace JSON, for deduplication",
            "run_secs": "run times in seconds, as TVM wrote them; [1e10] is a failed run",
            "mean_run_secs": "mean of run_secs (failures included): TVM's ranking key; shown in us",
            "is_valid": "1 when every run succeeded",
            "args_info": "the arguments' dtypes and shapes, TVM's JSON",
        },
    },
    "target": {
        "title": "Targets",
        "description": "Canonical target configs; kind, arch, isa and device are the match key.",
        "sort": "id",
        "label_column": "config",
        "facets": ["kind", "arch"],
        "columns": {
            "config": "canonical config JSON (sorted keys); 'null' for records without a target",
            "kind": "target kind (llvm, cuda, ...)",
            "arch": "mcpu or GPU arch, '' when not stated",
            "isa": "instruction set from mtriple, '' when not stated",
            "device": "device attribute, '' when not stated",
        },
    },
    "source": {
        "title": "Sources",
        "description": "Provenance of records: imports, tuning runs, merges and pulls.",
        "sort_desc": "id",
        "label_column": "location",
        "facets": ["kind", "tvm_version", "msdb_version"],
        "columns": {
            "kind": "import, tune, merge or pull",
            "location": "file path or URL",
            "sha256": "of the file the records came from",
            "username": "who (left out of published snapshots)",
            "host": "which machine (left out of published snapshots)",
            "tvm_version": "TVM version that wrote the log",
            "msdb_version": "msdb version that wrote the rows",
            "created_at": "when",
            "workload_sha256": "of an import's workload file",
        },
    },
    "model": {
        "title": "Models",
        "description": "Models whose tasks use the workloads.",
        "sort": "name",
        "label_column": "name",
    },
    "task": {
        "title": "Tasks",
        "description": "Which model uses which workload, and with what weight (how often it runs per inference).",
        "sort": "id",
        "label_column": "name",
        "facets": ["model_id"],
        "columns": {
            "model_id": "the model",
            "workload_id": "the workload the task runs",
            "name": "the task's name in the model",
            "weight": "how many times the task runs per inference",
        },
    },
}


def build_metadata(database: str, *, immutable: bool = False, title: str | None = None) -> dict[str, Any]:
    """The metadata dict for one msdb database served under the name `database` (datasette's
    name: the file's stem). `immutable`: a published read-only snapshot, so arbitrary SQL is switched off
    for the database as well as by `default_allow_sql` (belt and braces: either alone would do)."""
    tables: dict[str, Any] = {name: {**spec, "columns": dict(spec.get("columns", {}))} for name, spec in TABLES.items()}
    for name in HIDDEN_TABLES:
        tables[name] = {"hidden": True}
    entry: dict[str, Any] = {"tables": tables, "queries": canned_queries()}
    if immutable:
        entry["allow_sql"] = False
    return {
        "title": title or ("msdb hub (read-only snapshot)" if immutable else "msdb tuning database"),
        "description": "TVM MetaSchedule tuning records: browse workloads, best schedules and tuning curves; "
                       "the canned queries answer the common questions.",
        "about": "msdb",
        "databases": {database: entry},
    }
