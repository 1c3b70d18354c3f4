"""Rows of msdb's tables, one way each: every writer and reader of the tables builds and finds
rows with these helpers, inside the caller's transaction.

Column conventions (run_secs spelling, UTC times, opaque workloads under `OPAQUE_PREFIX` keyed
by `opaque_shash`, family columns built in `workload_row`): docs/architecture.md, "Databases".
"""

from __future__ import annotations

import datetime as _dt
import functools
import getpass
import logging
import pickle
import socket
from typing import TYPE_CHECKING, Any, Callable

from sqlalchemy import Table, bindparam, insert, select, update

from msdb.database import models as M
from msdb.database.errors import DatabaseError
from msdb.errors import MsdbError
from msdb.interop.tvm.payload import LEGACY_GRAPH, UNSUPPORTED_GRAPH

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from msdb.database.admission import StorageFields
    from msdb.ir.function import IRModule

__all__ = [
    "OPAQUE_PREFIX", "OPAQUE_LEGACY", "OPAQUE_UNSUPPORTED", "SOURCE_KINDS", "HASH_COLUMNS", "now", "insert_row", "is_opaque",
    "opaque_ir_format", "opaque_shash", "flops_or_none", "family_columns", "stored_family_columns", "workload_row", "opaque_workload_row", "load_workload_ir",
    "stored_ir", "find_workload_id", "keep_tvm_payload", "record_keys_of", "stored_record_id", "default_user", "default_host", "insert_source",
    "ensure_task",
]

logger = logging.getLogger(__name__)

#: `workload.ir_format` of opaque workloads starts with this.
OPAQUE_PREFIX = "opaque:"
#: A payload in TVM's <= 0.21 graph format (TVM 0.27 refuses it too: never exported).
OPAQUE_LEGACY = OPAQUE_PREFIX + LEGACY_GRAPH
#: A TVM >= 0.22 graph with a node type msdb's IR has no counterpart for (exported unchanged).
OPAQUE_UNSUPPORTED = OPAQUE_PREFIX + UNSUPPORTED_GRAPH
#: What `source.kind` may be ("transfer": candidates re-fitted from a relative's record and
#: measured by `msdb compile --transfer-trials`; the location names that record;
#: "tvm": what TVM itself committed through `msdb.tvm.as_tvm_database`).
SOURCE_KINDS = ("import", "tune", "merge", "pull", "transfer", "tvm")
#: The workload column holding the hash of each module equality.
HASH_COLUMNS = {"structural": M.workload.c.shash, "ignore-tensor": M.workload.c.ignore_tensor_hash,
                "anchor-block": M.workload.c.anchor_hash}


def now() -> _dt.datetime:
    """UTC now without tzinfo (how the schema stores times)."""
    return _dt.datetime.now(_dt.timezone.utc).replace(tzinfo=None)


def insert_row(conn: Connection, table: Table, values: dict[str, Any]) -> int:
    """INSERT one row into `table` (of `msdb.database.models`); its new id."""
    key = conn.execute(insert(table).values(**values)).inserted_primary_key
    assert key is not None
    return int(key[0])


# ---------------------------------------------------------------- workloads


def is_opaque(ir_format: str | None) -> bool:
    """Whether a workload row holds an opaque payload (no IR msdb can read)."""
    return bool(ir_format) and str(ir_format).startswith(OPAQUE_PREFIX)


def opaque_ir_format(payload_kind: str) -> str:
    """The `ir_format` of an opaque workload whose payload is of `payload_kind`
    (`msdb.interop.tvm.payload.LEGACY_GRAPH` or `UNSUPPORTED_GRAPH`)."""
    return OPAQUE_PREFIX + payload_kind


def opaque_shash(tvm_shash: str) -> str:
    """TVM's decimal uint64 shash as the 16 hex digits msdb's hash columns hold."""
    return format(int(tvm_shash) & 0xFFFF_FFFF_FFFF_FFFF, "016x")


def flops_or_none(mod: IRModule) -> int | None:
    """FLOPs for the GFLOPS figures of the listings; a workload the estimator cannot handle is
    stored without (an auxiliary figure must never block a commit or an import)."""
    try:
        from msdb.ir import estimate_flops

        return int(estimate_flops(mod))
    except Exception as exc:  # noqa: BLE001 - see the docstring
        logger.warning("FLOP estimate failed (%s); stored without it", exc)
        return None


def family_columns(mod: IRModule | None) -> dict[str, str | None]:
    """The `family_hash` and `family_extents` (JSON) of a workload row; both None for no IR. The
    family only serves the relatives query, so a module the walk refuses (it refused the
    structural hash first, so this does not happen for a stored one) is logged and stored
    without one rather than failing the commit."""
    if mod is None:
        return {"family_hash": None, "family_extents": None}
    import json

    from msdb.hashing.family import family_key

    try:
        key = family_key(mod)
    except Exception as exc:  # noqa: BLE001 - see the docstring
        logger.warning("family key failed (%s: %s); stored without it", type(exc).__name__, exc)
        return {"family_hash": None, "family_extents": None}
    return {"family_hash": key.hash, "family_extents": json.dumps(list(key.extents), separators=(",", ":"))}


def workload_row(mod: IRModule, *, hashes: dict[str, str], name: str | None, tvm_payload: str | None = None,
                 tvm_shash: str | None = None) -> dict[str, Any]:
    """The `workload` row of a decoded module with its three hashes: the IR as TVMScript (the
    portable form) and as a fast blob (`msdb.ir.codec`; left out when the IR does not pickle),
    FLOPs, its family (`family_columns`), and what a TVM log said about it."""
    from msdb.ir import to_script
    from msdb.ir.codec import IR_FORMAT, dump_ir

    try:
        blob: bytes | None = dump_ir(mod)
    except (pickle.PicklingError, TypeError, AttributeError) as exc:
        logger.debug("workload IR not pickled (%s); the script is stored alone", exc)
        blob = None
    return {
        "shash": hashes["structural"], "ignore_tensor_hash": hashes["ignore-tensor"],
        "anchor_hash": hashes["anchor-block"], "name": name, "flops": flops_or_none(mod), "script": to_script(mod),
        "ir_format": IR_FORMAT if blob is not None else None, "ir_blob": blob, "tvm_payload": tvm_payload,
        "tvm_shash": tvm_shash, "created_at": now(), **family_columns(mod),
    }


def opaque_workload_row(*, tvm_shash: str, payload: str, payload_kind: str, reason: str) -> dict[str, Any]:
    """The `workload` row of a payload msdb cannot decode, keyed by TVM's shash."""
    key = opaque_shash(tvm_shash)
    script = (f"# opaque TVM workload (TVM shash {tvm_shash}): msdb cannot decode its payload\n"
              f"# ({reason}).\n# The payload is kept byte for byte; records of it are never replayed.\n")
    return {
        "shash": key, "ignore_tensor_hash": key, "anchor_hash": key, "name": f"opaque-{tvm_shash}", "flops": None,
        "script": script, "ir_format": opaque_ir_format(payload_kind), "ir_blob": None, "tvm_payload": payload,
        "tvm_shash": tvm_shash, "created_at": now(), **family_columns(None),
    }


def load_workload_ir(ir_format: str | None, ir_blob: bytes | None, script: str, *, label: str = "workload") -> IRModule:
    """The IR of a workload row: its blob when it is of `msdb.ir.codec.IR_FORMAT` and readable,
    else its TVMScript (`msdb.ir.codec.load_stored_ir`, which says why a blob that fails falls
    back to the script). An opaque row raises `MsdbError`: it has no IR."""
    from msdb.ir.codec import load_stored_ir

    if is_opaque(ir_format):
        raise MsdbError(f"{label} is an opaque TVM payload: it has no IR msdb can read")
    return load_stored_ir(ir_format, ir_blob, script, label=label)


def stored_family_columns(ir_format: str | None, ir_blob: bytes | None, script: str, *,
                          label: str = "workload") -> dict[str, str | None]:
    """`family_columns` of a stored (or copied) workload row: from its IR, None for an opaque row
    or one whose IR cannot be read (logged; the row is still stored, without relatives)."""
    if is_opaque(ir_format):
        return family_columns(None)
    try:
        mod = load_workload_ir(ir_format, ir_blob, script, label=label)
    except Exception as exc:  # noqa: BLE001 - an auxiliary key never blocks storing the row
        logger.warning("%s: IR unreadable (%s: %s); stored without a family", label, type(exc).__name__,
                       str(exc)[:200])
        return family_columns(None)
    return family_columns(mod)


def stored_ir(conn: Connection, workload_id: int, *, label: str = "workload") -> IRModule:
    """The IR of workload row `workload_id` (see `load_workload_ir`)."""
    w = M.workload.c
    row = conn.execute(select(w.ir_format, w.ir_blob, w.script).where(w.id == workload_id)).one()
    return load_workload_ir(row.ir_format, row.ir_blob, row.script, label=f"{label} {workload_id}")


def find_workload_id(conn: Connection, key: str, same: Callable[[int], bool] | None, *,
                     mode: str = "structural") -> int | None:
    """The row of a workload whose hash under `mode` is `key`: the first row of that hash for
    which `same(row id)` confirms equality (TVM's rule: a 64-bit hash match is confirmed before
    two workloads are taken as one). With `same=None` the workload is opaque and only opaque
    rows of that key match; opaque rows never match a decoded workload."""
    w = M.workload.c
    rows = conn.execute(select(w.id, w.ir_format).where(HASH_COLUMNS[mode] == key).order_by(w.id)).all()
    for row in rows:
        if is_opaque(row.ir_format) != (same is None):
            continue
        if same is None or same(int(row.id)):
            return int(row.id)
    return None


def keep_tvm_payload(conn: Connection, workload_id: int, payload: str, tvm_shash: str) -> None:
    """Give a workload row msdb had (tuned or created here) the payload TVM itself wrote for it,
    so an export hands TVM its own bytes from now on; a row that has one keeps it."""
    w = M.workload.c
    conn.execute(update(M.workload).where(w.id == workload_id, w.tvm_payload.is_(None))
                 .values(tvm_payload=payload, tvm_shash=tvm_shash))


# ---------------------------------------------------------------- records


def record_keys_of(conn: Connection, workload_id: int) -> set[tuple[int, int, str, str | None]]:
    """Dedup keys `(workload_id, target_id, trace_hash, run_secs)` of a workload's records: the
    same measurement (same workload, target, trace and run times) is stored once."""
    r = M.tuning_record.c
    rows = conn.execute(select(r.target_id, r.trace_hash, r.run_secs).where(r.workload_id == workload_id))
    return {(workload_id, row[0], row[1], row[2]) for row in rows}


def stored_record_id(conn: Connection, workload_id: int, target_id: int, fields: StorageFields) -> int | None:
    """The id of a stored record with the dedup key of a record of `workload_id` and
    `target_id` whose `TuningRecord.storage_fields()` are `fields`, None when there is none.
    One lookup on the top-k index (`ix_tuning_record_top_k`: workload, target, validity and
    mean run time lead it), so the check reads none of the workload's other records."""
    _text, trace_hash, run_text, mean, valid = fields
    params: dict[str, Any] = {"w": workload_id, "t": target_id, "v": valid, "h": trace_hash}
    if mean is not None:
        params["m"] = mean
    if run_text is not None:
        params["r"] = run_text
    return conn.execute(_stored_record_statement(mean is None, run_text is None), params).scalar()


@functools.lru_cache(maxsize=4)
def _stored_record_statement(no_mean: bool, no_run_secs: bool) -> Any:
    """SELECT the id of the record with the dedup key `:w, :t, :v, :m, :h, :r`; its leading
    conditions are the columns of the top-k index, in order."""
    r = M.tuning_record.c
    conditions = [r.workload_id == bindparam("w"), r.target_id == bindparam("t"), r.is_valid == bindparam("v"),
                  r.mean_run_secs.is_(None) if no_mean else r.mean_run_secs == bindparam("m"),
                  r.trace_hash == bindparam("h"),
                  r.run_secs.is_(None) if no_run_secs else r.run_secs == bindparam("r")]
    return select(r.id).where(*conditions).limit(1)


# ---------------------------------------------------------------- provenance, models and tasks


def default_user() -> str | None:
    """Who runs this process (provenance), when the system can say."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return None


def default_host() -> str:
    return socket.gethostname()


def insert_source(conn: Connection, *, kind: str, location: str | None = None, sha256: str | None = None,
                  workload_sha256: str | None = None, username: str | None = None, host: str | None = None,
                  tvm_version: str | None = None, msdb_version: str | None = None,
                  created_at: _dt.datetime | None = None) -> int:
    """A `source` row: where the records inserted with its id come from. `sha256`: of the file
    the records came from (an import's record file); `workload_sha256`: of an import's
    workload file; `msdb_version` and `created_at` default to this msdb and now (a merge
    copies them from the source database)."""
    from msdb.version import __version__

    if kind not in SOURCE_KINDS:
        raise DatabaseError(f"unknown source kind {kind!r}; expected one of {', '.join(SOURCE_KINDS)}")
    return insert_row(conn, M.source, {
        "kind": kind, "location": location, "sha256": sha256, "workload_sha256": workload_sha256, "username": username,
        "host": host, "tvm_version": tvm_version,
        "msdb_version": msdb_version if msdb_version is not None else __version__,
        "created_at": created_at if created_at is not None else now()})


def ensure_task(conn: Connection, model_name: str, workload_id: int, task_name: str, weight: float = 1.0, *,
                keep_weight: bool = False) -> int:
    """Note that model `model_name` uses workload row `workload_id` as task `task_name` with
    `weight` (the model row is created when new); returns the task's id.

    A model uses a workload once, as one task (TVM's task extraction merges equal workloads
    into one task, and its task names are unique within a model):
    - the model already has a task of this workload (under any name): that task stays, with
      its name; its weight becomes `weight` unless `keep_weight` (an import, which knows no
      weights, and a merge, where the destination's rows win, keep it);
    - the name is taken by a task of another workload: the new task is named
      `"{task_name}#{workload_id}"`. Both workloads keep their task; repointing the name
      would silently drop the first workload from the model (two different conv2d layers
      named after the same anchor block, say).
    """
    mt, tt = M.model.c, M.task.c
    model_id = conn.execute(select(mt.id).where(mt.name == model_name)).scalar()
    if model_id is None:
        model_id = insert_row(conn, M.model, {"name": model_name})
    task_id = conn.execute(select(tt.id).where(tt.model_id == model_id, tt.workload_id == workload_id)
                           .order_by(tt.id)).scalar()
    if task_id is not None:
        if not keep_weight:
            conn.execute(update(M.task).where(tt.id == task_id).values(weight=weight))
        return int(task_id)
    name = task_name
    if conn.execute(select(tt.id).where(tt.model_id == model_id, tt.name == name)).first() is not None:
        name = f"{task_name}#{workload_id}"
    return insert_row(conn, M.task, {"model_id": model_id, "workload_id": workload_id, "name": name, "weight": weight})
