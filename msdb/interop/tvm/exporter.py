"""Export an msdb database as a TVM 0.27 work_dir (`msdb export`): TVM's `dump_pruned`, per
workload **and target** (DESIGN.md section 6).

For every (workload, target) pair the best `top_k` valid records (ascending mean run time, ties
in commit order; the `ix_tuning_record_top_k` index scan) are written, optionally only for
targets that match a query target (msdb's target policy, `Target.matches`). Workloads imported
from TVM keep their original payload byte for byte (and TVM's shash); workloads msdb created
are encoded in TVM 0.27's graph format (`msdb.interop.tvm.encode`). Opaque workloads in TVM's
<= 0.21 format are left out (TVM 0.27 cannot load them) and reported.

Lines are written by TVM's JSON writer rules (`msdb.schedule.tvm_json`): compact, sorted keys,
`%.20g` floats, so TVM's `JSONDatabase(work_dir=...)` loads the result and `msdb import` of it
adds nothing to the database it came from.

Atomic: the two files are written into a fresh directory beside OUTDIR, flushed, and renamed
into place (an existing OUTDIR is moved aside first and removed after), so a killed export
leaves either the old work_dir or the new one, never a half-written file TVM would abort on.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from msdb.errors import MsdbError
from msdb.interop.tvm.workdir import RECORD_FILE, WORKLOAD_FILE
from msdb.ops.store import NULL_TARGET, OPAQUE_LEGACY, ProgressFn, is_opaque

if TYPE_CHECKING:
    from msdb.database.sqlite import SQLiteDatabase
    from msdb.records import Target

__all__ = ["ExportError", "ExportSummary", "export_workdir"]

logger = logging.getLogger(__name__)


class ExportError(MsdbError):
    """An export msdb refuses (bad OUTDIR, k < 1); nothing was written."""


@dataclass
class ExportSummary:
    """What an export wrote."""

    outdir: Path
    workloads: int = 0
    records: int = 0
    pairs: int = 0
    skipped: list[str] = field(default_factory=list)
    seconds: float = 0.0

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
    `target` only, when given) as a TVM 0.27 work_dir at `outdir`; see the module docstring."""
    from sqlalchemy import select, true

    from msdb.database import models as M
    from msdb.records import Target as TargetCls

    start = time.perf_counter()
    if top_k < 1:
        raise ExportError(f"--top-k must be at least 1, got {top_k}")
    query = TargetCls.coerce(target)
    out = Path(outdir)
    _check_outdir(out)
    summary = ExportSummary(out)
    r, w, t = M.tuning_record.c, M.workload.c, M.target.c
    top = (select(r.trace, r.run_secs, r.args_info)
           .where(r.workload_id == _param("w"), r.target_id == _param("t"), r.is_valid == true())
           .order_by(r.mean_run_secs, r.id).limit(top_k))
    with db.engine.connect() as conn:
        targets = {row.id: row.config for row in conn.execute(select(t.id, t.config))}
        wanted = {tid for tid, config in targets.items() if _target_matches(query, config)}
        pairs = [(row[0], row[1]) for row in conn.execute(
            select(r.workload_id, r.target_id).where(r.is_valid == true()).distinct()
            .order_by(r.workload_id, r.target_id)) if row[1] in wanted]
        workload_rows = {row.id: row for row in conn.execute(
            select(w.id, w.shash, w.tvm_payload, w.tvm_shash, w.ir_format, w.ir_blob, w.script)
            .where(w.id.in_(sorted({p[0] for p in pairs}))))} if pairs else {}
        workload_lines: list[str] = []
        record_lines: list[str] = []
        indexes: dict[int, int | None] = {}
        target_text: dict[int, str] = {}
        for done, (workload_id, target_id) in enumerate(pairs, start=1):
            if workload_id not in indexes:
                line = _workload_line(workload_rows[workload_id], summary)
                indexes[workload_id] = None if line is None else len(workload_lines)
                if line is not None:
                    workload_lines.append(line)
            index = indexes[workload_id]
            if index is None:
                continue
            if target_id not in target_text:
                target_text[target_id] = _tvm_json_text(targets[target_id])
            rows = conn.execute(top, {"w": workload_id, "t": target_id}).all()
            for trace, run_secs, args_info in rows:
                record_lines.append(f"[{index},[{trace},{run_secs or 'null'},{target_text[target_id]},"
                                    f"{args_info or 'null'}]]\n")
            summary.pairs += 1
            if progress is not None and done % 100 == 0:
                progress("exporting", done, len(pairs))
    summary.workloads = len(workload_lines)
    summary.records = len(record_lines)
    _write_atomically(out, "".join(workload_lines), "".join(record_lines))
    if progress is not None:
        progress("exporting", len(pairs), len(pairs))
    summary.seconds = time.perf_counter() - start
    return summary


def _param(name: str) -> Any:
    from sqlalchemy import Integer, bindparam

    return bindparam(name, type_=Integer)


def _target_matches(query: Target | None, config: str) -> bool:
    if query is None:
        return True
    if config == NULL_TARGET:
        return False
    from msdb.records import Target

    return query.matches(Target(json.loads(config)))


def _tvm_json_text(config: str) -> str:
    from msdb.schedule.tvm_json import dumps

    return "null" if config == NULL_TARGET else dumps(json.loads(config))


def _workload_line(row: Any, summary: ExportSummary) -> str | None:
    """TVM's workload line for a stored workload, or None (reported) when TVM cannot take it."""
    from msdb.schedule.tvm_json import dumps

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
        from msdb.ops.store import load_workload_ir

        try:
            payload = encode_workload(load_workload_ir(row.ir_format, row.ir_blob, row.script))
        except MsdbError as exc:
            summary.skipped.append(f"workload {row.shash}: cannot be encoded in TVM 0.27's graph format ({exc})")
            return None
    shash = row.tvm_shash if row.tvm_shash is not None else str(int(row.shash, 16))
    return dumps([shash, payload]) + "\n"


def _check_outdir(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise ExportError(f"{out} exists and is not a directory; give a new or work_dir path for the export")
    if out.is_dir():
        extra = sorted(p.name for p in out.iterdir() if p.name not in (WORKLOAD_FILE, RECORD_FILE))
        if extra:
            shown = ", ".join(extra[:5]) + (", ..." if len(extra) > 5 else "")
            raise ExportError(f"{out} holds other files ({shown}); msdb export only replaces a TVM work_dir; "
                              "choose another OUTDIR")
    if not out.parent.is_dir():
        raise ExportError(f"cannot export to {out}: folder {out.parent} does not exist")


def _write_atomically(out: Path, workloads: str, records: str) -> None:
    """Write the work_dir aside and rename it into place (see the module docstring)."""
    parent = out.parent
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.export-", dir=parent))
    try:
        for name, text in ((WORKLOAD_FILE, workloads), (RECORD_FILE, records)):
            with open(staging / name, "w", encoding="utf-8", newline="\n") as handle:
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())
        os.chmod(staging, 0o755)
        old: Path | None = None
        if out.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=parent))
            old.rmdir()
            os.rename(out, old)
        try:
            os.rename(staging, out)
        except BaseException:
            if old is not None:
                os.rename(old, out)  # put the previous export back
            raise
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    _fsync_dir(parent)


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)
