"""Check a database end to end (`msdb verify`): integrity, rehash, replay.

- Integrity: SQLite's own `integrity_check`; every record's workload, target and source exist;
  every record's stored trace parses as TVM trace JSON, its `trace_hash`, `mean_run_secs` and
  `is_valid` agree with its trace and run_secs (they are derived columns that queries rank by;
  recomputed with the rules of `msdb.records.ranking`).
- Rehash: every decodable workload's IR is read back and hashed in the three modes; the hashes
  must equal the stored ones (a changed hash function or a corrupted blob would silently split a
  workload in two). An imported workload's TVM payload must still decode to the same workload.
  Opaque workloads: the payload must still unframe and the key must be TVM's shash.
- Replay: every distinct trace is replayed on its workload, as TVM does when it loads a log
  (apache/tvm#16288: there, one failing record aborts the whole load; here it is reported).

Each problem is one line naming the record or workload; nothing is changed.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlalchemy import func, select

from msdb.database import models as M
from msdb.database.rows import is_opaque, load_workload_ir, opaque_shash
from msdb.errors import MsdbError
from msdb.interop.progress import ProgressFn
from msdb.records.ranking import is_valid, mean_run_secs
from msdb.records.record import trace_json_hash

if TYPE_CHECKING:
    from msdb.database.sql import SQLiteDatabase
    from msdb.ir.function import IRModule

__all__ = ["VerifyReport", "verify_database"]

_BATCH = 2000


@dataclass
class VerifyReport:
    """What `verify_database` checked and found."""

    workloads: int = 0
    records: int = 0
    replayed: int = 0
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.problems

    def line(self) -> str:
        replay = f", {self.replayed} traces replayed" if self.replayed else ""
        n = len(self.problems)
        return (f"checked {self.workloads} workloads and {self.records} records{replay}: "
                f"{n} problem{'s' if n != 1 else ''}; {self.seconds:.2f} s")


def verify_database(db: SQLiteDatabase, *, replay: bool = True, progress: ProgressFn | None = None) -> VerifyReport:
    """Run the checks of the module docstring; see `VerifyReport`."""
    start = time.perf_counter()
    report = VerifyReport()
    w, r = M.workload.c, M.tuning_record.c
    with db.engine.connect() as conn:
        if conn.dialect.name == "sqlite":
            integrity = [row[0] for row in conn.exec_driver_sql("PRAGMA integrity_check")]
            if integrity != ["ok"]:
                report.problems.extend(f"SQLite integrity check: {line}" for line in integrity)
        _dangling(conn, report)
        workloads = conn.execute(select(w.id, w.shash, w.ignore_tensor_hash, w.anchor_hash, w.name, w.script,
                                        w.ir_format, w.ir_blob, w.tvm_payload, w.tvm_shash).order_by(w.id)).all()
        report.workloads = len(workloads)
        modules = {row.id: _rehash(row, report) for row in workloads}
        labels = {row.id: f"{row.shash}" + (f" {row.name}" if row.name else "") for row in workloads}
        total = int(conn.execute(select(func.count()).select_from(M.tuning_record)).scalar() or 0)
        replays: dict[tuple[int, str], list[int]] = {}
        traces: dict[tuple[int, str], str] = {}
        result = conn.execution_options(stream_results=True, yield_per=_BATCH).execute(
            select(r.id, r.workload_id, r.trace, r.trace_hash, r.run_secs, r.mean_run_secs, r.is_valid).order_by(r.id))
        done = 0
        for batch in result.partitions(_BATCH):
            for row in batch:
                _check_record(row, report)
                key = (row.workload_id, row.trace_hash)
                if replay and modules.get(row.workload_id) is not None:
                    if key not in replays:
                        replays[key] = []
                        traces[key] = row.trace
                    replays[key].append(row.id)
            done += len(batch)
            report.records = done
            if progress is not None:
                progress("checking", done, total)
    if replay:
        _replay(replays, traces, modules, labels, report, progress)
    report.seconds = time.perf_counter() - start
    return report


def _dangling(conn: Any, report: VerifyReport) -> None:
    """Records whose workload, target or source row is missing (foreign keys may be off)."""
    r = M.tuning_record.c
    for column, table, what in ((r.workload_id, M.workload, "workload"), (r.target_id, M.target, "target"),
                                (r.source_id, M.source, "source")):
        query = (select(r.id, column).select_from(M.tuning_record.outerjoin(table, table.c.id == column))
                 .where(column.is_not(None), table.c.id.is_(None)).order_by(r.id).limit(100))
        for row in conn.execute(query):
            report.problems.append(f"record {row[0]}: its {what} {row[1]} does not exist")


def _rehash(row: Any, report: VerifyReport) -> IRModule | None:
    """The workload's IR after checking its hashes (None for opaque or unreadable ones)."""
    from msdb.hashing import structural_hash
    from msdb.interop.tvm.payload import PayloadError, decode_workload, payload_bytes

    where = f"workload {row.shash}" + (f" ({row.name})" if row.name else "")
    if is_opaque(row.ir_format):
        if row.tvm_payload is None:
            report.problems.append(f"{where}: opaque workload without a payload")
            return None
        try:
            payload_bytes(row.tvm_payload)
        except PayloadError as exc:
            report.problems.append(f"{where}: opaque payload no longer unframes: {exc}")
        if row.tvm_shash is None or not row.tvm_shash.isdigit() or opaque_shash(row.tvm_shash) != row.shash:
            report.problems.append(f"{where}: opaque workload's key does not match its TVM shash {row.tvm_shash}")
        return None
    try:
        mod = load_workload_ir(row.ir_format, row.ir_blob, row.script, label=where)
    except MsdbError as exc:
        report.problems.append(f"{where}: its IR cannot be read: {exc}")
        return None
    stored = {"structural": row.shash, "ignore-tensor": row.ignore_tensor_hash, "anchor-block": row.anchor_hash}
    for mode, value in stored.items():
        try:
            fresh = structural_hash(mod, mode)
        except MsdbError as exc:  # pragma: no cover - hashing decoded IR does not fail
            report.problems.append(f"{where}: {mode} hash cannot be computed: {exc}")
            continue
        if fresh != value:
            report.problems.append(f"{where}: stored {mode} hash {value} but the IR hashes to {fresh}")
    if row.tvm_payload is not None:
        try:
            decoded = decode_workload(row.tvm_payload)
        except MsdbError as exc:
            report.problems.append(f"{where}: its TVM payload no longer decodes: {exc}")
        else:
            if structural_hash(decoded) != row.shash:
                report.problems.append(f"{where}: its TVM payload decodes to another workload "
                                       f"(hash {structural_hash(decoded)})")
    return mod


def _check_record(row: Any, report: VerifyReport) -> None:
    from msdb.interop.tvm.trace_check import legacy_kinds, scan_trace
    from msdb.schedule import tvm_json

    where = f"record {row.id}"
    try:
        trace = tvm_json.loads(row.trace)
    except ValueError as exc:
        report.problems.append(f"{where}: stored trace is not JSON ({exc})")
        return
    problem, _ = scan_trace(trace, legacy_kinds())
    if problem is not None:
        report.problems.append(f"{where}: {problem}")
        return
    if trace_json_hash(row.trace) != row.trace_hash:
        report.problems.append(f"{where}: trace_hash {row.trace_hash} does not match its trace")
    run_secs = None
    if row.run_secs is not None:
        try:
            run_secs = json.loads(row.run_secs)
        except ValueError:
            report.problems.append(f"{where}: run_secs {row.run_secs[:40]!r} is not JSON")
            return
    mean = mean_run_secs(run_secs)
    if (mean is None) != (row.mean_run_secs is None) or (
            mean is not None and not math.isclose(mean, row.mean_run_secs, rel_tol=1e-12)):
        report.problems.append(f"{where}: mean_run_secs {row.mean_run_secs} but run_secs {row.run_secs} average {mean}")
    valid = is_valid(run_secs, trace[0])
    if bool(row.is_valid) != valid:
        report.problems.append(f"{where}: is_valid is {bool(row.is_valid)} but TVM's rule says {valid}")


def _replay(replays: dict[tuple[int, str], list[int]], traces: dict[tuple[int, str], str],
            modules: dict[int, IRModule | None], labels: dict[int, str], report: VerifyReport,
            progress: ProgressFn | None) -> None:
    from msdb.schedule.trace import replay_problem

    total = len(replays)
    for done, ((workload_id, _), ids) in enumerate(replays.items(), start=1):
        mod = modules[workload_id]
        assert mod is not None
        problem = replay_problem(mod, traces[(workload_id, _)])
        if problem is not None:
            more = f" (and {len(ids) - 1} more records with this trace)" if len(ids) > 1 else ""
            report.problems.append(f"record {ids[0]}{more} (workload {labels[workload_id]}): replay failed: {problem}")
        report.replayed += 1
        if progress is not None and (done % 50 == 0 or done == total):
            progress("replaying", done, total)
