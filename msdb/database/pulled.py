"""The database side of `msdb pull` (docs/architecture.md, "Hub"): the pull's source row and
cursor, and the staging of one batch of a hub's rows as an msdb database that
`merge_databases` then merges (the HTTP side is `msdb.hub.pull`). Here because every read and
write of msdb's tables goes through `msdb.database`.

The cursor is the pull source row's `location`: the hub's URL with the last hub record id read
as its fragment (`http://hub:8001/#after=1234`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Sequence

from sqlalchemy import delete, select, update

from msdb.database import models as M

if TYPE_CHECKING:
    from msdb.database.sql import SQLiteDatabase
    from msdb.ir.function import IRModule

__all__ = ["PULL_FRAGMENT", "WORKLOAD_FIELDS", "RECORD_FIELDS", "cursor_location", "find_pull_cursor",
           "new_pull_source", "move_pull_cursor", "staging_database", "stage_rows", "add_pulled_tasks"]

PULL_FRAGMENT = "#after="
#: The hub's workload and record columns a pull copies.
WORKLOAD_FIELDS = ("shash", "ignore_tensor_hash", "anchor_hash", "name", "flops", "script", "ir_format", "ir_blob",
                   "tvm_payload", "tvm_shash", "created_at")
RECORD_FIELDS = ("id", "workload_id", "target_id", "trace", "trace_hash", "run_secs", "mean_run_secs", "is_valid",
                 "args_info")
_SOURCE_FIELDS = ("kind", "location", "sha256", "workload_sha256", "username", "host", "tvm_version", "msdb_version",
                  "created_at")


def cursor_location(url: str, after: int) -> str:
    """The `source.location` of a pull of `url` that has read the hub's records up to id `after`."""
    return f"{url}{PULL_FRAGMENT}{after}"


def find_pull_cursor(local: SQLiteDatabase, url: str) -> tuple[int | None, int]:
    """The pull source row of `url` and its cursor (None, 0 before the first pull)."""
    s = M.source.c
    prefix = f"{url}{PULL_FRAGMENT}"
    with local.engine.connect() as conn:
        rows = conn.execute(select(s.id, s.location).where(s.kind == "pull", s.location.like(f"{prefix}%"))
                            .order_by(s.id)).all()
    for row in rows:
        tail = str(row.location)[len(prefix):]
        if str(row.location).startswith(prefix) and tail.isdigit():
            return int(row.id), int(tail)
    return None, 0


def new_pull_source(local: SQLiteDatabase, url: str, after: int, *, user: str | None, host: str | None) -> int:
    """A new `pull` source row for `url` with its cursor at `after`."""
    from msdb.database.rows import default_host, default_user, insert_source

    with local.write_transaction() as conn:
        return insert_source(conn, kind="pull", location=cursor_location(url, after),
                             username=user if user is not None else default_user(),
                             host=host if host is not None else default_host())


def move_pull_cursor(local: SQLiteDatabase, source_id: int, url: str, after: int) -> None:
    """Commit the cursor past hub record `after` (after that batch's records were committed)."""
    with local.write_transaction() as conn:
        conn.execute(update(M.source).where(M.source.c.id == source_id).values(location=cursor_location(url, after)))


def staging_database() -> SQLiteDatabase:
    """An in-memory msdb database to stage a batch in."""
    from msdb.database.sql import SQLiteDatabase

    return SQLiteDatabase("sqlite://")


def stage_rows(local: SQLiteDatabase, staging: SQLiteDatabase, source_id: int, workloads: Mapping[int, Mapping[str, Any]],
               targets: Mapping[int, str], records: Sequence[Mapping[str, Any]],
               mods: Mapping[int, IRModule | None] | None = None) -> None:
    """Replace what `staging` holds by one batch of hub rows, admitted (`msdb.database.admission`):
    a copy of `local`'s pull source row, the records' workloads (`WORKLOAD_FIELDS`, `created_at`
    a datetime or None) and target configs, and the records (`RECORD_FIELDS`), each attributed
    to that source. `mods`: each workload's admitted IR (None for an opaque one), from which its
    FLOPs and family key are computed here, whatever the hub says (without `mods`, the family is
    computed from each row's IR, `msdb.database.rows.stored_family_columns`)."""
    from msdb.database.rows import family_columns, flops_or_none, now, stored_family_columns
    from msdb.database.bulk import insert_record_rows

    s = M.source.c
    with local.engine.connect() as conn:
        pull_source = conn.execute(select(*[s[f] for f in _SOURCE_FIELDS]).where(s.id == source_id)).one()
    with staging.write_transaction() as conn:
        for table in (M.task, M.model, M.tuning_record, M.workload, M.source):
            conn.execute(delete(table))
        conn.execute(M.source.insert().values(id=1, **{f: getattr(pull_source, f) for f in _SOURCE_FIELDS}))
        for wid in sorted(workloads):
            row = workloads[wid]
            # derived columns are computed here, from the IR, whatever the hub says: a hub of an
            # older msdb has no family, and the key must be this msdb's (msdb.database.rows)
            values = {f: row[f] for f in WORKLOAD_FIELDS}
            if mods is None:
                values.update(stored_family_columns(row["ir_format"], row["ir_blob"], row["script"],
                                                    label=f"hub workload {wid}"))
            else:
                mod = mods.get(wid)
                values.update(flops=None if mod is None else flops_or_none(mod), **family_columns(mod))
            if values["created_at"] is None:
                values["created_at"] = now()
            conn.execute(M.workload.insert().values(id=wid, **values))
        for tid in sorted(targets):
            staging.target_row_id_for_config(conn, targets[tid])
        config_ids = {config: tid for tid, config in conn.execute(select(M.target.c.id, M.target.c.config)).all()}
        insert_record_rows(conn, [
            (int(row["workload_id"]), config_ids[targets[int(row["target_id"])]], 1, row["trace"], row["trace_hash"],
             row["run_secs"], row["mean_run_secs"], bool(row["is_valid"]), row["args_info"])
            for row in records])


def add_pulled_tasks(local: SQLiteDatabase, tasks: Sequence[Mapping[str, Any]], models: Mapping[int, str],
                     hub_workloads: Mapping[int, Mapping[str, Any]]) -> int:
    """Add the hub's `tasks` (rows with model_id, workload_id, name, weight; `models` the hub's
    model names, `hub_workloads` its workload rows with shash and ir_format) whose workload
    `local` has, by structural hash; a task `local` has keeps its weight. How many were new."""
    from msdb.database.rows import ensure_task, find_workload_id, is_opaque

    t, m = M.task.c, M.model.c
    with local.engine.connect() as conn:
        have = {(row.model, row.name) for row in conn.execute(
            select(m.name.label("model"), t.name).join(M.model, m.id == t.model_id))}
    new = [task for task in tasks if (models.get(int(task["model_id"])), task["name"]) not in have
           and int(task["model_id"]) in models and int(task["workload_id"]) in hub_workloads]
    added = 0
    if not new:
        return 0
    with local.write_transaction() as conn:
        for task in new:
            hub_workload = hub_workloads[int(task["workload_id"])]
            same = None if is_opaque(hub_workload.get("ir_format")) else _same
            workload_id = find_workload_id(conn, str(hub_workload["shash"]), same)
            if workload_id is None:
                continue  # none of its records were pulled
            ensure_task(conn, models[int(task["model_id"])], workload_id, str(task["name"]), float(task["weight"]),
                        keep_weight=True)
            added += 1
    return added


def _same(_workload_id: int) -> bool:
    return True  # both sides hashed with msdb's stable hash and confirmed equality (as in a merge)
