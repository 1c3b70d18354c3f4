"""Row-level helpers shared by import, merge, export, prune and verify.

These operations must each run as ONE transaction (DESIGN.md section 6: a bad line writes
nothing; a killed process leaves the database as it was), with dedup rules `SQLiteDatabase`'s
per-call API does not offer (records keyed by workload, target, trace and run times; workloads
imported with their TVM payload; opaque workloads). So they write rows directly with SQLAlchemy
Core on the database's engine, inside the database's own write transaction, using the tables of
`msdb.database.models` and the same column conventions `SQLiteDatabase` uses:

- a record without a target points at the target row whose config is `"null"` (kind "");
- `run_secs` is TVM's JSON spelling (`[10000000000]` for a failure), `mean_run_secs` the mean of
  all of them (None when there are none), `trace_hash` = `trace_json_hash(trace text)`;
- opaque workloads (TVM payloads msdb cannot decode: the <= 0.21 graph format, or a node type
  msdb's IR lacks) are flagged by an `ir_format` starting with `"opaque:"`; their three hash
  columns hold TVM's own shash as 16 hex digits, which is their key; their `script` is a comment.
  They are never replayed, and an export for TVM 0.27 leaves out the legacy-format ones (TVM 0.27
  cannot load them either).
"""

from __future__ import annotations

import datetime as _dt
import getpass
import json
import logging
import os
import socket
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

from msdb.errors import MsdbError

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from msdb.database.sqlite import SQLiteDatabase
    from msdb.ir.function import IRModule
    from msdb.records import Target

__all__ = [
    "OPAQUE_PREFIX", "OPAQUE_LEGACY", "OPAQUE_UNSUPPORTED", "NULL_TARGET", "ProgressFn", "is_opaque",
    "open_database", "TargetRows", "workload_row", "opaque_workload_row",
    "opaque_shash", "find_workload_id", "record_keys_of", "insert_source", "ensure_task", "load_workload_ir",
    "default_user", "default_host", "now", "run_secs_text", "mean_of", "file_of", "redact", "chunks",
]

logger = logging.getLogger(__name__)

#: `workload.ir_format` of opaque workloads starts with this.
OPAQUE_PREFIX = "opaque:"
#: A payload in TVM's <= 0.21 graph format (TVM 0.27 refuses it too: never exported).
OPAQUE_LEGACY = "opaque:tvm-legacy-graph"
#: A TVM >= 0.22 graph with a node type msdb's IR has no counterpart for (exported unchanged).
OPAQUE_UNSUPPORTED = "opaque:tvm-graph"
#: The config of the target row that records without a target point at (as SQLiteDatabase).
NULL_TARGET = "null"

#: `progress(done, total)`: how far a long operation is (the CLI draws a bar from it).
ProgressFn = Callable[[int, int], None]



def is_opaque(ir_format: str | None) -> bool:
    return bool(ir_format) and str(ir_format).startswith(OPAQUE_PREFIX)


def now() -> _dt.datetime:
    """UTC now without tzinfo (how the schema stores times)."""
    return _dt.datetime.now(_dt.timezone.utc).replace(tzinfo=None)


def default_user() -> str | None:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return None


def default_host() -> str:
    return socket.gethostname()


# ---------------------------------------------------------------- opening


def redact(location: str) -> str:
    """A URL with its password hidden (error messages end up in logs and bug reports)."""
    if "://" not in location:
        return location
    try:
        from sqlalchemy.engine import make_url

        return make_url(location).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - an unparsable URL is shown as given
        return location


def open_database(location: str | os.PathLike[str], *, create: bool = False) -> SQLiteDatabase:
    """Open an msdb database by file path or SQLAlchemy URL.

    `create=False` (every command that only reads, or merges from, a database) refuses a file
    path that does not exist instead of creating an empty database there: a typo must not leave
    a new file behind. Errors are `DatabaseOpenError` (an `MsdbError`) naming the location; a URL
    whose dialect or driver is not installed is one too, rather than SQLAlchemy's traceback.
    """
    from sqlalchemy import exc as sa_exc

    from msdb.database.errors import DatabaseOpenError
    from msdb.database.sqlite import SQLiteDatabase

    text = os.fspath(location)
    shown = redact(text)
    if not text.strip():
        raise DatabaseOpenError("empty database location; give a file path or an SQLAlchemy URL")
    if not create:
        path = file_of(text)
        if path is not None and not path.exists():
            raise DatabaseOpenError(f"{path}: no such database file")
    try:
        return SQLiteDatabase(text)
    except MsdbError:
        raise
    except (sa_exc.ArgumentError, sa_exc.NoSuchModuleError, ImportError) as exc:
        raise DatabaseOpenError(f"cannot open database {shown!r}: {exc}") from None
    except sa_exc.SQLAlchemyError as exc:
        raise DatabaseOpenError(f"cannot open database {shown!r}: {exc.__class__.__name__}: {exc}") from None
    except OSError as exc:
        raise DatabaseOpenError(f"cannot open database {shown!r}: {exc.strerror or exc}") from None


def is_behind(location: str | os.PathLike[str]) -> bool:
    """Whether `location` holds an msdb database at an older schema revision, which opening it
    would migrate. Asks `msdb.database.migrate.schema_state` through a plain engine (read-only
    for a file) instead of opening the database for msdb; anything that cannot be read is
    False: opening it then says what is wrong."""
    from sqlalchemy import create_engine
    from sqlalchemy import exc as sa_exc

    from msdb.database.migrate import SchemaState, schema_state

    text = os.fspath(location)
    path = file_of(text)
    if path is not None and not path.is_file():
        return False
    url = f"sqlite:///file:{path.resolve()}?mode=ro&uri=true" if path is not None else text
    try:
        engine = create_engine(url)
    except (sa_exc.ArgumentError, sa_exc.NoSuchModuleError, ImportError):
        return False
    try:
        with engine.connect() as conn:
            return schema_state(conn)[0] is SchemaState.BEHIND
    except sa_exc.SQLAlchemyError:
        return False
    finally:
        engine.dispose()


def file_of(text: str) -> Path | None:
    """The file behind a path or an sqlite URL; None for other URLs and in-memory SQLite."""
    if "://" not in text:
        return Path(text).expanduser()
    if not text.startswith("sqlite"):
        return None
    try:
        from sqlalchemy.engine import make_url

        database = make_url(text).database
    except Exception:  # noqa: BLE001 - let SQLiteDatabase report a malformed URL
        return None
    if not database or database == ":memory:" or database.startswith("file:"):
        return None
    return Path(database).expanduser()


# ---------------------------------------------------------------- targets


class TargetRows:
    """Target row ids by canonical config, inserting unknown ones (inside a write transaction)."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.ids: dict[str, int] = {}

    def id_for(self, target: Target | None) -> int:
        config = target.canonical_json() if target is not None else NULL_TARGET
        return self.id_for_config(config, target)

    def id_for_config(self, config: str, target: Target | None = None) -> int:
        from sqlalchemy import insert, select

        from msdb.database import models as M

        known = self.ids.get(config)
        if known is not None:
            return known
        t = M.target.c
        target_id = self.conn.execute(select(t.id).where(t.config == config)).scalar()
        if target_id is None:
            if target is None and config != NULL_TARGET:
                from msdb.records import Target

                target = Target(json.loads(config))
            key = target.match_key if target is not None else None
            target_id = self.conn.execute(insert(M.target).values(
                config=config, kind=key.kind if key else "", arch=key.arch if key else "",
                isa=key.isa if key else "", device=key.device if key else "")).inserted_primary_key[0]
        self.ids[config] = int(target_id)
        return int(target_id)


# ---------------------------------------------------------------- workloads


def opaque_shash(tvm_shash: str) -> str:
    """TVM's decimal uint64 shash as the 16 hex digits msdb's hash columns hold."""
    return format(int(tvm_shash) & 0xFFFF_FFFF_FFFF_FFFF, "016x")


def workload_row(mod: IRModule, *, hashes: dict[str, str], name: str | None, tvm_payload: str | None,
                 tvm_shash: str | None, flops: int | None = None) -> dict[str, Any]:
    """The `workload` row of a decoded module (hashes computed by the caller)."""
    from msdb.database.ir_codec import IR_FORMAT, dump_ir
    from msdb.ir import to_script

    blob = dump_ir(mod)
    if flops is None:
        flops = estimate_flops_or_none(mod)
    return {
        "shash": hashes["structural"], "ignore_tensor_hash": hashes["ignore-tensor"],
        "anchor_hash": hashes["anchor-block"], "name": name, "flops": flops, "script": to_script(mod),
        "ir_format": IR_FORMAT if blob is not None else None, "ir_blob": blob, "tvm_payload": tvm_payload,
        "tvm_shash": tvm_shash, "created_at": now(),
    }


def opaque_workload_row(*, tvm_shash: str, payload: str, ir_format: str, reason: str, name: str | None = None) -> dict[str, Any]:
    """The `workload` row of a payload msdb cannot decode, keyed by TVM's shash."""
    key = opaque_shash(tvm_shash)
    script = (f"# opaque TVM workload (TVM shash {tvm_shash}): msdb cannot decode its payload\n"
              f"# ({reason}).\n# The payload is kept byte for byte; records of it are never replayed.\n")
    return {
        "shash": key, "ignore_tensor_hash": key, "anchor_hash": key, "name": name or f"opaque-{tvm_shash}",
        "flops": None, "script": script, "ir_format": ir_format, "ir_blob": None, "tvm_payload": payload,
        "tvm_shash": tvm_shash, "created_at": now(),
    }


def estimate_flops_or_none(mod: IRModule) -> int | None:
    """FLOPs for GFLOPS figures; a workload the estimator cannot handle is stored without."""
    try:
        from msdb.ir import estimate_flops

        return int(estimate_flops(mod))
    except Exception as exc:  # noqa: BLE001 - an auxiliary figure must never block an import
        logger.warning("FLOP estimate failed (%s); stored without it", exc)
        return None


def load_workload_ir(ir_format: str | None, ir_blob: bytes | None, script: str) -> IRModule:
    """The IR of a stored workload row: the fast blob when readable, else its TVMScript."""
    from msdb.database.ir_codec import IR_FORMAT, load_ir

    if is_opaque(ir_format):
        raise MsdbError("an opaque workload has no IR msdb can read")
    if ir_format == IR_FORMAT and ir_blob is not None:
        try:
            return load_ir(bytes(ir_blob))
        except Exception as exc:  # noqa: BLE001 - fall back to the script, which is authoritative
            logger.warning("workload IR blob unreadable (%s); parsing its script", exc)
    from msdb.ir import from_script

    return from_script(script)


def find_workload_id(conn: Connection, shash: str, mod: IRModule | None) -> int | None:
    """The row of a workload: same structural hash and, for a decoded module, structurally equal
    (TVM's rule: a 64-bit hash match is confirmed before two workloads are taken as one). With
    `mod=None` (an opaque workload) only opaque rows of that key match."""
    from sqlalchemy import select

    from msdb.database import models as M

    w = M.workload.c
    rows = conn.execute(select(w.id, w.ir_format, w.ir_blob, w.script).where(w.shash == shash).order_by(w.id)).all()
    for row in rows:
        if mod is None:
            if is_opaque(row.ir_format):
                return int(row.id)
            continue
        if is_opaque(row.ir_format):
            continue
        from msdb.hashing import structural_equal

        try:
            stored = load_workload_ir(row.ir_format, row.ir_blob, row.script)
        except MsdbError as exc:
            logger.warning("workload %d cannot be read back (%s); taking the hash match as equality", row.id, exc)
            return int(row.id)
        if structural_equal(stored, mod):
            return int(row.id)
    return None


# ---------------------------------------------------------------- records


def run_secs_text(run_secs: Sequence[float] | None) -> str | None:
    """TVM's spelling of a run_secs list (`[10000000000]` for a failure), as stored."""
    if run_secs is None:
        return None
    from msdb.schedule.tvm_json import format_float

    return "[" + ",".join(format_float(float(x)) for x in run_secs) + "]"


def mean_of(run_secs: Sequence[float] | None) -> float | None:
    """TVM's ranking key: the mean of all run times, failures included; None without any."""
    if not run_secs:
        return None
    import math

    return math.fsum(run_secs) / len(run_secs)


def record_keys_of(conn: Connection, workload_id: int) -> set[tuple[int, int, str, str | None]]:
    """Dedup keys `(workload_id, target_id, trace_hash, run_secs)` of a workload's records."""
    from sqlalchemy import select

    from msdb.database import models as M

    r = M.tuning_record.c
    rows = conn.execute(select(r.target_id, r.trace_hash, r.run_secs).where(r.workload_id == workload_id))
    return {(workload_id, row[0], row[1], row[2]) for row in rows}


# ---------------------------------------------------------------- provenance, models


def insert_source(conn: Connection, *, kind: str, location: str | None, sha256: str | None, username: str | None,
                  host: str | None, tvm_version: str | None, msdb_version: str | None = None,
                  created_at: _dt.datetime | None = None, workload_sha256: str | None = None) -> int:
    """A `source` row (provenance of the records inserted with its id). `sha256`: of the file
    the records came from; `workload_sha256`: of an import's workload file."""
    from sqlalchemy import insert

    import msdb
    from msdb.database import models as M

    return int(conn.execute(insert(M.source).values(
        kind=kind, location=location, sha256=sha256, workload_sha256=workload_sha256, username=username, host=host,
        tvm_version=tvm_version, msdb_version=msdb_version if msdb_version is not None else msdb.__version__,
        created_at=created_at if created_at is not None else now())).inserted_primary_key[0])


def ensure_task(conn: Connection, model_name: str, workload_id: int, task_name: str, weight: float = 1.0) -> bool:
    """Note that model `model_name` uses the workload as task `task_name`; True when added.
    A workload the model already has (under any task name) is left alone; a task name taken by
    another workload gets the workload's row id appended."""
    from sqlalchemy import insert, select

    from msdb.database import models as M

    mt, tt = M.model.c, M.task.c
    model_id = conn.execute(select(mt.id).where(mt.name == model_name)).scalar()
    if model_id is None:
        model_id = conn.execute(insert(M.model).values(name=model_name)).inserted_primary_key[0]
    if conn.execute(select(tt.id).where(tt.model_id == model_id, tt.workload_id == workload_id)).first() is not None:
        return False
    name = task_name
    if conn.execute(select(tt.id).where(tt.model_id == model_id, tt.name == name)).first() is not None:
        name = f"{task_name}#{workload_id}"
    conn.execute(insert(M.task).values(model_id=model_id, workload_id=workload_id, name=name, weight=weight))
    return True


def chunks(items: Sequence[Any], size: int) -> Iterable[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start:start + size]
