"""What a database holds, for people: `msdb ls` (`list_workloads`) and `msdb show`
(`show_workload`, `workload_relatives`).

An empty or broken result says why (`no_match_message`, `dangling_note`) instead of failing.
See docs/architecture.md, "Databases".
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

from sqlalchemy import ColumnElement, case, distinct, func, or_, select, true

from msdb.database import models as M
from msdb.database.errors import DatabaseError
from msdb.database.location import where
from msdb.database.rows import is_opaque
from msdb.records import Target

if TYPE_CHECKING:
    from msdb.database.sql import SQLiteDatabase

__all__ = ["CatalogRow", "WorkloadNotFound", "AmbiguousHash", "NoRecordMatched", "WorkloadDetails", "BestRecord",
           "WorkloadListing", "list_workloads", "workload_listing", "no_match_message", "dangling_note",
           "show_workload", "resolve_hash", "target_label", "target_labels", "format_table", "format_details",
           "TuningCurve", "tuning_curves", "RelativeDetails", "workload_relatives"]


class WorkloadNotFound(DatabaseError):
    """No workload with this hash in the database."""


class AmbiguousHash(DatabaseError):
    """A hash prefix that several workloads share."""


class NoRecordMatched(DatabaseError):
    """A query target that no record of the database matches; the message lists the targets it has."""


def target_label(config: dict[str, Any] | None) -> str:
    """A short target description for tables: the kind, then the attributes that tell devices
    apart (`llvm -num-cores=1`, `cuda -arch=sm_80`; not the defaults TVM fills in); `-` for
    records without a target."""
    if config is None:
        return "-"
    from msdb.records.target import KIND_DEFAULTS, cli_form

    defaults = KIND_DEFAULTS.get(str(config.get("kind")), {})
    shown = {key: value for key, value in config.items() if key not in defaults or defaults[key] != value}
    return cli_form(shown, leave_out=("keys", "tag", "mtriple", "host"))


def target_labels(configs: Sequence[dict[str, Any] | None]) -> list[str]:
    """`target_label` of each config, made to tell apart the configs that differ only in what it
    hides (two `llvm -num-cores=1` rows whose targets differ in `-mtriple`): such a
    label gets the attributes on which its group differs (`llvm -num-cores=1
    -mtriple=x86_64-conda-linux-gnu` beside `llvm -num-cores=1`), or, failing that, the whole
    config. Equal configs keep equal labels."""
    from msdb.records.target import cli_form

    def key(config: dict[str, Any] | None) -> str:
        return json.dumps(config, sort_keys=True, default=str)

    labels = [target_label(config) for config in configs]
    groups: dict[str, dict[str, dict[str, Any]]] = {}
    for label, config in zip(labels, configs):
        if config is not None:
            groups.setdefault(label, {})[key(config)] = config
    extra: dict[str, str] = {}
    for distinct in groups.values():
        if len(distinct) < 2:
            continue
        differing = {name for config in distinct.values() for name in config
                     if len({key(other.get(name)) for other in distinct.values()}) > 1}
        shown = {k: cli_form({name: v for name, v in config.items() if name in differing}, leave_out=())
                 for k, config in distinct.items()}  # no kind: "? -mtriple=..."
        if len(set(shown.values())) < len(shown):  # they differ only in empty values: all of it
            shown = {k: cli_form(config, leave_out=()) for k, config in distinct.items()}
        extra.update({k: text.removeprefix("?").strip() for k, text in shown.items()})
    return [f"{label} {extra[key(config)]}".strip() if extra.get(key(config)) else label
            for label, config in zip(labels, configs)]


@dataclass
class CatalogRow:
    """One workload on one target."""

    shash: str
    name: str | None
    flops: int | None
    target: dict[str, Any] | None
    records: int
    valid: int
    best_run_secs: float | None
    sources: int
    opaque: bool = False

    @property
    def best_us(self) -> float | None:
        return None if self.best_run_secs is None else self.best_run_secs * 1e6

    @property
    def gflops(self) -> float | None:
        if self.best_run_secs is None or not self.flops or self.best_run_secs <= 0:
            return None
        return self.flops / self.best_run_secs / 1e9

    def as_json(self) -> dict[str, Any]:
        return {"shash": self.shash, "name": self.name, "flops": self.flops, "target": self.target,
                "records": self.records, "valid_records": self.valid, "best_run_secs": self.best_run_secs,
                "best_us": self.best_us, "gflops": self.gflops, "sources": self.sources, "opaque": self.opaque}


@dataclass
class WorkloadListing:
    """What `msdb ls` shows: the rows, why they are empty (`no_match`: no record matched the
    query target, and which targets there are; None otherwise) and `warnings` (records left
    out because their workload or target row is missing)."""

    rows: list[CatalogRow]
    no_match: str | None = None
    warnings: list[str] = field(default_factory=list)


def list_workloads(db: SQLiteDatabase, *, target: Target | str | dict[str, Any] | None = None) -> list[CatalogRow]:
    """One `CatalogRow` per workload and target, in commit order of workloads and targets; with
    `target`, only targets matching it (msdb's policy) and only workloads that have such records."""
    return workload_listing(db, target=target).rows


def no_match_message(db: SQLiteDatabase, conn: Any, query: Target) -> str:
    """The line for a query target that no record matches: it and the targets the records of
    `db` are for (a user who typed `cuda` for an `llvm` database sees at once why)."""
    r = M.tuning_record.c
    known = set(db.matching_target_ids(conn, None))
    labels = []
    for (target_id,) in conn.execute(select(r.target_id).distinct().order_by(r.target_id)):
        if target_id in known:
            stored = db.target_of(conn, target_id)
            label = "no target" if stored is None else target_label(stored.config)
            if label not in labels:
                labels.append(label)
    head = f"no record matched target {target_label(query.config)!r} in {where(db)}"
    if not labels:
        return f"{head}: it holds no records"
    return f"{head}; its records are for: {', '.join(labels)}"


def dangling_note(kind: str, ids: set[int], records: int | None, db: SQLiteDatabase) -> str:
    """The warning for records that point at `kind` rows ("workload" or "target") that do not
    exist (deleted by hand): what is left out and how to list them."""
    shown = ", ".join(str(i) for i in sorted(ids)[:5]) + (", ..." if len(ids) > 5 else "")
    count = "records" if records is None else f"{records} record{'s' if records != 1 else ''}"
    rows = f"{kind} row{'s' if len(ids) != 1 else ''} {shown}"
    return (f"{count} of {rows} left out: {'that row does' if len(ids) == 1 else 'those rows do'} not exist "
            f"in {where(db)} (deleted by hand?); `msdb verify` lists them")


def workload_listing(db: SQLiteDatabase, *, target: Target | str | dict[str, Any] | None = None) -> WorkloadListing:
    """`list_workloads`' rows with why they are empty and what was left out (`WorkloadListing`)."""
    query = Target.coerce(target)
    r, w = M.tuning_record.c, M.workload.c
    stats = (select(r.workload_id, r.target_id, func.count().label("n"),
                    func.sum(case((r.is_valid == true(), 1), else_=0)).label("valid"),
                    func.min(case((r.is_valid == true(), r.mean_run_secs), else_=None)).label("best"),
                    func.count(distinct(r.source_id)).label("sources"))
             .group_by(r.workload_id, r.target_id).order_by(r.workload_id, r.target_id))
    with db.engine.connect() as conn:
        workloads = {row.id: row for row in conn.execute(select(w.id, w.shash, w.name, w.flops, w.ir_format).order_by(w.id))}
        wanted = set(db.matching_target_ids(conn, query))
        existing = set(db.matching_target_ids(conn, None))
        targets = {tid: db.target_of(conn, tid) for tid in wanted}
        groups: dict[int, list[Any]] = {}
        lost_workloads: dict[int, int] = {}
        lost_targets: dict[int, int] = {}
        for row in conn.execute(stats):
            if row.target_id not in existing:
                lost_targets[row.target_id] = lost_targets.get(row.target_id, 0) + int(row.n)
            elif row.workload_id not in workloads:
                lost_workloads[row.workload_id] = lost_workloads.get(row.workload_id, 0) + int(row.n)
            else:
                groups.setdefault(row.workload_id, []).append(row)
        listing = WorkloadListing([])
        if lost_workloads:
            listing.warnings.append(dangling_note("workload", set(lost_workloads), sum(lost_workloads.values()), db))
        if lost_targets:
            listing.warnings.append(dangling_note("target", set(lost_targets), sum(lost_targets.values()), db))
        out = listing.rows
    for workload_id, wl in workloads.items():
        rows = [g for g in groups.get(workload_id, []) if g.target_id in wanted]
        if not rows:
            if query is None:
                out.append(CatalogRow(wl.shash, wl.name, wl.flops, None, 0, 0, None, 0, is_opaque(wl.ir_format)))
            continue
        for g in rows:
            config = targets[g.target_id]
            out.append(CatalogRow(wl.shash, wl.name, wl.flops, None if config is None else config.config,
                                  int(g.n), int(g.valid or 0), None if g.best is None else float(g.best),
                                  int(g.sources), is_opaque(wl.ir_format)))
    if query is not None and not out:
        with db.engine.connect() as conn:
            listing.no_match = no_match_message(db, conn, query)
    return listing


def format_table(rows: list[CatalogRow]) -> str:
    """`msdb ls`'s text table (fixed columns, numbers right-aligned)."""
    header = ("hash", "name", "target", "FLOPs", "records", "best_us", "GFLOPS", "sources")
    body = []
    for row, label in zip(rows, target_labels([row.target for row in rows])):
        body.append((
            row.shash, row.name or "-", label, "-" if row.flops is None else str(row.flops),
            str(row.records), "-" if row.best_us is None else f"{row.best_us:.2f}",
            "-" if row.gflops is None else f"{row.gflops:.2f}", str(row.sources),
        ))
    numeric = {3, 4, 5, 6, 7}
    widths = [max(len(cells[i]) for cells in [header, *body]) for i in range(len(header))]

    def fmt(cells: tuple[str, ...]) -> str:
        return "  ".join(c.rjust(widths[i]) if i in numeric else c.ljust(widths[i]) for i, c in enumerate(cells)).rstrip()

    return "\n".join([fmt(header)] + [fmt(cells) for cells in body])


# ---------------------------------------------------------------- show


@dataclass
class BestRecord:
    """The best valid record of a workload on one target."""

    record_id: int
    target: dict[str, Any] | None
    mean_run_secs: float
    flops: int | None
    trace: str
    source: str | None

    @property
    def gflops(self) -> float | None:
        if not self.flops or self.mean_run_secs <= 0:
            return None
        return self.flops / self.mean_run_secs / 1e9

    def schedule_code(self) -> str:
        """The trace as schedule code (`def apply_trace(sch): ...`, TVM's print of a trace)."""
        from msdb.schedule import Trace

        return Trace.from_json(self.trace).as_apply_trace()


@dataclass
class WorkloadDetails:
    """A workload for `msdb show`."""

    shash: str
    name: str | None
    flops: int | None
    script: str
    opaque: bool
    tvm_shash: str | None
    records: int
    best: list[BestRecord] = field(default_factory=list)
    from_tvm: bool = False  # imported from a TVM log (its payload kept): the script has TVM's attributes


def resolve_hash(db: SQLiteDatabase, text: str) -> int:
    """The workload row id for a hash: a unique prefix of msdb's 16-hex structural hash, or
    TVM's decimal shash."""
    w = M.workload.c
    key = text.strip().lower()
    if not key:
        raise WorkloadNotFound("empty workload hash; give a prefix of a hash from `msdb ls`")
    conditions: list[ColumnElement[bool]] = []
    if all(c in "0123456789abcdef" for c in key) and len(key) <= 16:
        conditions.append(w.shash.like(key.replace("%", "") + "%"))
    if key.isdigit():
        conditions.append(w.tvm_shash == key)
    if not conditions:
        raise WorkloadNotFound(f"{text!r} is not a workload hash (16 hex digits, a prefix of one, or TVM's decimal shash)")
    with db.engine.connect() as conn:
        rows = conn.execute(select(w.id, w.shash).where(or_(*conditions)).order_by(w.id)).all()
    if not rows:
        raise WorkloadNotFound(f"no workload with hash {text!r} in {where(db)}; `msdb ls` lists them")
    if len({row.shash for row in rows}) > 1:
        shown = ", ".join(row.shash for row in rows[:5])
        raise AmbiguousHash(f"hash prefix {text!r} matches {len(rows)} workloads ({shown}); give more digits")
    return int(rows[0].id)


def show_workload(db: SQLiteDatabase, text: str, *, target: Target | str | dict[str, Any] | None = None) -> WorkloadDetails:
    """The workload `text` names (see `resolve_hash`) with its best record per target."""
    query = Target.coerce(target)
    workload_id = resolve_hash(db, text)
    w, r, s = M.workload.c, M.tuning_record.c, M.source.c
    with db.engine.connect() as conn:
        wl = conn.execute(select(w.shash, w.name, w.flops, w.script, w.ir_format, w.tvm_shash,
                                 w.tvm_payload.is_not(None).label("from_tvm"))
                          .where(w.id == workload_id)).one()
        count = int(conn.execute(select(func.count()).select_from(M.tuning_record)
                                 .where(r.workload_id == workload_id)).scalar() or 0)
        details = WorkloadDetails(wl.shash, wl.name, wl.flops, wl.script, is_opaque(wl.ir_format), wl.tvm_shash, count,
                                  from_tvm=bool(wl.from_tvm))
        target_ids = [row[0] for row in conn.execute(select(r.target_id).where(r.workload_id == workload_id,
                                                                               r.is_valid == true())
                                                     .distinct().order_by(r.target_id))]
        wanted = set(db.matching_target_ids(conn, query))
        for target_id in target_ids:
            if target_id not in wanted:
                continue
            best = conn.execute(select(r.id, r.mean_run_secs, r.trace, r.source_id)
                                .where(r.workload_id == workload_id, r.target_id == target_id, r.is_valid == true())
                                .order_by(r.mean_run_secs, r.id).limit(1)).one()
            source = None
            if best.source_id is not None:
                src = conn.execute(select(s.kind, s.location, s.username, s.host).where(s.id == best.source_id)).one()
                who = "@".join(x for x in (src.username, src.host) if x)
                source = f"{src.kind} {src.location or ''}{f' by {who}' if who else ''}".strip()
            stored = db.target_of(conn, target_id)
            details.best.append(BestRecord(int(best.id), None if stored is None else stored.config,
                                           float(best.mean_run_secs), wl.flops, best.trace, source))
    return details


@dataclass
class RelativeDetails:
    """A workload of the same family as the one shown (`msdb.hashing.family`), with the sizes its
    family key abstracted and its best valid record per target (empty: none yet)."""

    shash: str
    name: str | None
    flops: int | None
    extents: tuple[int, ...]
    best: list[BestRecord] = field(default_factory=list)


def workload_relatives(db: SQLiteDatabase, text: str, *, target: Target | str | dict[str, Any] | None = None,
                       limit: int = 50) -> list[RelativeDetails]:
    """The relatives of the workload `text` names (see `resolve_hash`), in commit order, at most
    `limit`, each with its best record per target matching `target` (every target for None).
    The family is one lookup on `ix_workload_family_hash`; each best record one top-k index scan.
    An opaque workload has no family, hence no relatives."""
    import json

    query = Target.coerce(target)
    workload_id = resolve_hash(db, text)
    w, r = M.workload.c, M.tuning_record.c
    out: list[RelativeDetails] = []
    with db.engine.connect() as conn:
        family = conn.execute(select(w.family_hash).where(w.id == workload_id)).scalar()
        if family is None:
            return out
        wanted = set(db.matching_target_ids(conn, query))
        rows = conn.execute(select(w.id, w.shash, w.name, w.flops, w.family_extents)
                            .where(w.family_hash == family, w.id != workload_id).order_by(w.id).limit(limit)).all()
        for row in rows:
            relative = RelativeDetails(row.shash, row.name, row.flops, tuple(json.loads(row.family_extents or "[]")))
            target_ids = conn.execute(select(r.target_id).where(r.workload_id == row.id, r.is_valid == true())
                                      .distinct().order_by(r.target_id)).scalars().all()
            for target_id in target_ids:
                if target_id not in wanted:
                    continue
                best = conn.execute(select(r.id, r.mean_run_secs, r.trace)
                                    .where(r.workload_id == row.id, r.target_id == target_id, r.is_valid == true())
                                    .order_by(r.mean_run_secs, r.id).limit(1)).one()
                stored = db.target_of(conn, target_id)
                relative.best.append(BestRecord(int(best.id), None if stored is None else stored.config,
                                                float(best.mean_run_secs), row.flops, best.trace, None))
            out.append(relative)
    return out


#: `msdb show`'s note on which of a workload's two printed forms it shows: the structural hash
#: ignores the function attributes in which they differ, so one hash can print either way.
SCRIPT_FORM_NOTE = {
    True: "# script: as imported from TVM, with that TVM's function attributes (0.27: tirx.noalias, s_tir=True; "
          "msdb's own form writes tir.noalias); the hash ignores them, so both forms are this workload",
    False: "# script: msdb's form (tir.noalias; TVM 0.27 writes the same workload with tirx.noalias and "
           "s_tir=True); the hash ignores them, so both forms are this workload",
}


def format_details(details: WorkloadDetails) -> str:
    """`msdb show`'s text: the TVMScript (after a note on which form it is in), then per target
    the best trace as schedule code."""
    head = f"# workload {details.shash}"
    if details.name:
        head += f" ({details.name})"
    facts = []
    if details.flops is not None:
        facts.append(f"{details.flops} FLOPs")
    facts.append(f"{details.records} record{'s' if details.records != 1 else ''}")
    if details.tvm_shash:
        facts.append(f"TVM shash {details.tvm_shash}")
    head += ": " + ", ".join(facts)
    if not details.opaque:
        head += "\n" + SCRIPT_FORM_NOTE[details.from_tvm]
    parts = [head, details.script.rstrip("\n")]
    if not details.best:
        parts.append("# no valid record" + (" for this target" if details.records else ""))
    for best, label in zip(details.best, target_labels([best.target for best in details.best])):
        gflops = f", {best.gflops:.2f} GFLOPS" if best.gflops is not None else ""
        line = f"# best on {label}: {best.mean_run_secs * 1e6:.2f} us{gflops} (record {best.record_id}"
        line += f", {best.source})" if best.source else ")"
        parts.append(line + "\n" + best.schedule_code())
    return "\n\n".join(parts) + "\n"


@dataclass
class TuningCurve:
    """One run's best latency after each of its measurements (`msdb plot`): `label` names the
    source (kind, location, who, when), `best_us[i]` the best mean after i + 1 records (None
    while no record of the run was valid); `last_id` is the id of the last record counted, where
    `tuning_curves(..., since=...)` continues."""

    source_id: int | None
    label: str
    best_us: list[float | None]
    last_id: int = 0

    def label_lines(self, width: int) -> list[str]:
        """`label` in lines of at most `width` characters for a legend (`msdb plot`, the hub's
        chart): broken after spaces and slashes (a source is often an import path), a piece
        longer than a line cut where the line ends, so a legend is never clipped."""
        import re

        lines = [""]
        for piece in re.findall(r"[^ /]*[ /]?", self.label):
            while len(piece) > width:
                lines += [piece[:width], ""]
                piece = piece[width:]
            if len(lines[-1]) + len(piece) > width:
                lines.append("")
            lines[-1] += piece
        return [line.rstrip() for line in lines if line.strip()] or [""]


def tuning_curves(db: SQLiteDatabase, text: str, *, target: Target | str | dict[str, Any] | None = None,
                  since: list[TuningCurve] | None = None) -> tuple[str, list[TuningCurve]]:
    """(structural hash, one curve per source) of the workload `text` names, in commit order,
    records of targets that `target` matches (all when None).

    `since`: curves this function returned earlier for the same workload and target; they are
    continued (copies; new sources appended) with the records committed after the last one they
    counted, so a hub page that shows the curves of a workload with 100k records reads only the
    new ones (record ids are commit order and never reused)."""
    query = Target.coerce(target)
    workload_id = resolve_hash(db, text)
    w, r = M.workload.c, M.tuning_record.c
    curves: dict[int | None, TuningCurve] = {}
    after = 0
    for old in since or ():
        curves[old.source_id] = TuningCurve(old.source_id, old.label, list(old.best_us), old.last_id)
        after = max(after, old.last_id)
    with db.engine.connect() as conn:
        shash = conn.execute(select(w.shash).where(w.id == workload_id)).scalar_one()
        wanted = set(db.matching_target_ids(conn, query))
        # After a first pass, only the newest records are wanted: `workload_id + 0` keeps SQLite on
        # the primary key's range instead of the workload's whole range of the top-k index.
        workload_match = (r.workload_id + 0 == workload_id) if after else (r.workload_id == workload_id)
        rows = conn.execute(select(r.id, r.source_id, r.target_id, r.mean_run_secs, r.is_valid)
                            .where(workload_match, r.id > after).order_by(r.id))
        for record_id, source_id, target_id, mean_run_secs, is_valid in rows:
            if target_id not in wanted:
                continue
            curve = curves.get(source_id)
            if curve is None:
                curve = curves[source_id] = TuningCurve(source_id, _source_label(conn, source_id), [])
            best_us = curve.best_us
            best = best_us[-1] if best_us else None
            if is_valid and mean_run_secs is not None:
                us = float(mean_run_secs) * 1e6
                best = us if best is None or us < best else best
            best_us.append(best)
            curve.last_id = record_id
    return shash, list(curves.values())


def _source_label(conn: Any, source_id: int | None) -> str:
    if source_id is None:
        return "unknown source"
    s = M.source.c
    src = conn.execute(select(s.kind, s.location, s.username, s.host, s.created_at).where(s.id == source_id)).one()
    who = "@".join(x for x in (src.username, src.host) if x)
    when = src.created_at.strftime("%Y-%m-%d %H:%M") if src.created_at is not None else ""
    return " ".join(x for x in (f"#{source_id}", src.kind, src.location or "", f"by {who}" if who else "", when) if x)
