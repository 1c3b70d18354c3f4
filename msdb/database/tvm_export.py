"""`msdb export`: an msdb database as a TVM 0.27 work_dir, TVM's `dump_pruned` per workload
**and target** (docs/targets.md, "In the databases").

For every (workload, target) pair the best `top_k` valid records (ascending mean run time, ties
in commit order; the `ix_tuning_record_top_k` index scan) are written, optionally only for
targets that match a query target (msdb's target policy). Workloads imported from TVM keep
their original payload byte for byte (and TVM's shash); workloads msdb created are encoded in
TVM 0.27's graph format. Opaque workloads in TVM's <= 0.21 format are left out (TVM 0.27 cannot
load them) and reported.

This module reads the rows; the lines are spelled by the one TVM line grammar
(`msdb.interop.tvm.grammar`: compact, sorted keys, `%.20g` floats), so TVM's
`JSONDatabase(work_dir=...)` loads the result and `msdb import` of it adds nothing to the
database it came from, and the work_dir is written atomically
(`msdb.interop.tvm.workdir.write_workdir`).
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Integer, bindparam, select, true

from msdb.database import models as M
from msdb.database.rows import OPAQUE_LEGACY, is_opaque, load_workload_ir
from msdb.errors import MsdbError
from msdb.interop.progress import ProgressFn
from msdb.interop.tvm.grammar import format_record_line, format_workload_line, target_text, tvm_shash_of
from msdb.interop.tvm.workdir import ExportError, check_output_dir, write_workdir
from msdb.records import Target

if TYPE_CHECKING:
    from msdb.database.sql import SQLiteDatabase

__all__ = ["ExportError", "ExportSummary", "export_workdir"]

logger = logging.getLogger(__name__)


@dataclass
class ExportSummary:
    """What an export wrote."""

    outdir: Path
    workloads: int = 0
    records: int = 0
    pairs: int = 0
    skipped: list[str] = field(default_factory=list)
    seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)  # records left out: their workload or target row is gone

    def line(self) -> str:
        text = (f"exported {self.records} records of {self.workloads} workloads "
                f"({self.pairs} workload/target pairs) to {self.outdir}")
        if self.skipped:
            text += f"; {len(self.skipped)} workload{'s' if len(self.skipped) != 1 else ''} left out"
        return text + f"; {self.seconds:.2f} s"


def export_workdir(db: SQLiteDatabase, outdir: str | os.PathLike[str], *, top_k: int = 1,
                   target: Target | str | dict[str, Any] | None = None,
                   progress: ProgressFn | None = None) -> ExportSummary:
    """Write the best `top_k` valid records of every workload and target (targets matching
    `target` only, when given) as a TVM 0.27 work_dir at `outdir`; see the module docstring.
    A `target` that no record matches raises `NoRecordMatched` (naming the targets there are)
    and writes nothing; records whose workload or target row is gone are left out, with a
    warning in the summary."""
    from msdb.database.catalog import NoRecordMatched, dangling_note, no_match_message

    start = time.perf_counter()
    if top_k < 1:
        raise ExportError(f"--top-k must be at least 1, got {top_k}")
    query = Target.coerce(target)
    out = Path(outdir)
    check_output_dir(out)
    summary = ExportSummary(out)
    r, w = M.tuning_record.c, M.workload.c
    top = (select(r.trace, r.run_secs, r.args_info)
           .where(r.workload_id == bindparam("w", type_=Integer), r.target_id == bindparam("t", type_=Integer),
                  r.is_valid == true())
           .order_by(r.mean_run_secs, r.id).limit(top_k))
    with db.engine.connect() as conn:
        wanted = set(db.matching_target_ids(conn, query))
        existing = set(db.matching_target_ids(conn, None))
        every = conn.execute(select(r.workload_id, r.target_id).where(r.is_valid == true()).distinct()
                             .order_by(r.workload_id, r.target_id)).all()
        lost_targets = {row[1] for row in every if row[1] not in existing}
        if lost_targets:
            summary.warnings.append(dangling_note("target", lost_targets, None, db))
        pairs = [(row[0], row[1]) for row in every if row[1] in wanted]
        workload_rows = {row.id: row for row in conn.execute(
            select(w.id, w.shash, w.tvm_payload, w.tvm_shash, w.ir_format, w.ir_blob, w.script)
            .where(w.id.in_(sorted({p[0] for p in pairs}))))} if pairs else {}
        lost_workloads = {p[0] for p in pairs if p[0] not in workload_rows}
        if lost_workloads:
            summary.warnings.append(dangling_note("workload", lost_workloads, None, db))
            pairs = [p for p in pairs if p[0] in workload_rows]
        if query is not None and not pairs and not lost_workloads:
            raise NoRecordMatched(no_match_message(db, conn, query) + "; nothing was written")
        workload_lines: list[str] = []
        record_lines: list[str] = []
        indexes: dict[int, int | None] = {}
        targets: dict[int, str] = {}
        for done, (workload_id, target_id) in enumerate(pairs, start=1):
            if workload_id not in indexes:
                line = _workload_line(workload_rows[workload_id], summary)
                indexes[workload_id] = None if line is None else len(workload_lines)
                if line is not None:
                    workload_lines.append(line + "\n")
            index = indexes[workload_id]
            if index is None:
                continue
            if target_id not in targets:
                targets[target_id] = target_text(db.target_of(conn, target_id))
            for trace, run_secs, args_info in conn.execute(top, {"w": workload_id, "t": target_id}):
                record_lines.append(format_record_line(index, trace, run_secs, targets[target_id], args_info) + "\n")
            summary.pairs += 1
            if progress is not None and done % 100 == 0:
                progress("exporting", done, len(pairs))
    summary.workloads = len(workload_lines)
    summary.records = len(record_lines)
    write_workdir(out, "".join(workload_lines), "".join(record_lines))
    if progress is not None:
        progress("exporting", len(pairs), len(pairs))
    summary.seconds = time.perf_counter() - start
    return summary


def _workload_line(row: Any, summary: ExportSummary) -> str | None:
    """TVM's workload line for a stored workload, or None (reported) when TVM cannot take it."""
    if row.ir_format == OPAQUE_LEGACY:
        summary.skipped.append(f"workload {row.shash} (TVM shash {row.tvm_shash}): opaque payload in TVM's legacy "
                               "(<= 0.21) graph format, which TVM 0.27 cannot load")
        return None
    payload = row.tvm_payload
    if payload is None:
        if is_opaque(row.ir_format):  # pragma: no cover - opaque rows always keep their payload
            summary.skipped.append(f"workload {row.shash}: opaque without a payload")
            return None
        from msdb.interop.tvm.encode import encode_workload

        try:
            payload = encode_workload(load_workload_ir(row.ir_format, row.ir_blob, row.script,
                                                       label=f"workload {row.shash}"))
        except MsdbError as exc:
            summary.skipped.append(f"workload {row.shash}: cannot be encoded in TVM 0.27's graph format ({exc})")
            return None
    return format_workload_line(row.tvm_shash if row.tvm_shash is not None else tvm_shash_of(row.shash), payload)
