"""The hit/miss report of a compile: one entry per function of the model, saying what answered it
(`SCHEDULED_BY`: exact, anchor-block, transferred, default) and why not the ones before.

A miss carries one of four reasons, decided from what the layers hold: `no such workload`,
`workload known but no record for this target` (the targets that have one listed), `only failed
records`, `trace does not apply` (the error's text). See docs/architecture.md, "Compile".
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

__all__ = ["FunctionReport", "MissReason", "TransferInfo", "SCHEDULED_BY", "report_json", "format_report",
           "summary_line"]

#: What answered a function, best first: a record of the function itself (or a schedule
#: function), a record of its anchor block, a relative's record re-fitted, the default schedule.
SCHEDULED_BY = ("exact", "anchor-block", "transferred", "default")


class MissReason:
    """The reasons a function missed (the `reason` strings of the report)."""

    NO_WORKLOAD = "no such workload"
    NO_RECORD_FOR_TARGET = "workload known but no record for this target"
    ONLY_FAILED = "only failed records"
    TRACE_DOES_NOT_APPLY = "trace does not apply"
    NO_DATABASE = "no database"

    ALL = (NO_WORKLOAD, NO_RECORD_FOR_TARGET, ONLY_FAILED, TRACE_DOES_NOT_APPLY, NO_DATABASE)


@dataclass
class TransferInfo:
    """Where a transferred schedule came from: the relative `workload` (structural hash) and its
    `name`, the `models` that use it and the layer `db` that stores it, the `distance` between the
    two (`msdb.database.transfer.family_distance`), the re-fit's `route`, the relative's own
    measured `relative_us` (on the relative, not on this function), and the relatives `skipped`
    on the way (each with its reason). With `--transfer-trials`: `measured`, what was measured,
    fastest first (the default schedule among them)."""

    workload: str
    name: str | None = None
    models: list[str] = field(default_factory=list)
    db: str | None = None
    distance: float = 0.0
    route: str | None = None
    relative_us: float | None = None
    skipped: list[str] = field(default_factory=list)
    measured: str | None = None

    def describe(self) -> str:
        where = f"{self.name} {self.workload}" if self.name else self.workload
        models = f" of model {', '.join(self.models)}" if self.models else ""
        db = f" in {self.db}" if self.db else ""
        measured = f"; {self.measured}" if self.measured else ""
        return f"{where}{models}{db}, distance {self.distance:.2f}{measured}"


@dataclass
class FunctionReport:
    """How one function of the model was scheduled.

    `hash` is the structural hash of the function as a workload (what a database stores);
    `weight` its number of calls in the model; `db` the location of the answering layer as the
    user gave it; `matched_by` "structural" (the trace replayed on the stored workload),
    "anchor-block" (TVM's anchor-trace procedure) or "schedule function" (a
    `ScheduleFnDatabase` layer); `record_us` / `record_gflops` what the applied record
    measured (on its own workload, the FLOPs of the stored workload: an anchor-block match's
    epilogue differs); `flop` the function's own FLOPs; `reason` and `detail` say why a miss
    missed (see the module docstring), `detail` listing the targets that have records or
    quoting the error. `run_ms`: milliseconds per model run its calls took, when the model was
    run and profiled (`msdb compile --run`, `CompiledModel.profile`), else None.
    `scheduled_by`: one of `SCHEDULED_BY`; `transfer`: where a transferred schedule came from
    (`hit` stays False: no record of this function answered, and `reason` says why);
    `transfer_miss`: why a compile with transfer found none to use (the default answered).
    """

    name: str
    hash: str
    weight: int
    hit: bool
    db: str | None = None
    matched_by: str | None = None
    record_us: float | None = None
    record_gflops: float | None = None
    record_target: str | None = None
    reason: str | None = None
    detail: str | None = None
    targets_with_records: list[str] = field(default_factory=list)
    flop: int | None = None
    run_ms: float | None = None
    scheduled_by: str = "default"
    transfer: TransferInfo | None = None
    transfer_miss: str | None = None

    def as_json(self) -> dict[str, Any]:
        return asdict(self)

    def answer(self) -> str:
        """The last column of the table: which layer and record, or why it missed."""
        if self.hit:
            speed = f"{self.record_us:.1f} us" if self.record_us is not None else "?"
            if self.record_gflops is not None:
                speed += f", {self.record_gflops:.1f} GFLOPS"
            return f"hit in {self.db} ({self.matched_by}; {speed})"
        missed = f"miss: {self.reason}" + (f" ({self.detail})" if self.detail else "")
        if self.transfer is not None:
            return f"transferred from {self.transfer.describe()} ({missed})"
        if self.transfer_miss is not None:
            return f"{missed}; no transfer: {self.transfer_miss}"
        return missed


def report_json(entries: Sequence[FunctionReport]) -> str:
    """The report as JSON: a list, one object per function, in the model's function order."""
    return json.dumps([e.as_json() for e in entries], indent=2)


def summary_line(entries: Sequence[FunctionReport]) -> str:
    """`hits: h/n functions, w/W calls`, then `; transferred: t functions, c calls` when any was."""
    hits = [e for e in entries if e.hit]
    weight = sum(e.weight for e in entries)
    hit_weight = sum(e.weight for e in hits)
    line = f"hits: {len(hits)}/{len(entries)} functions, {hit_weight}/{weight} calls"
    transferred = [e for e in entries if e.scheduled_by == "transferred"]
    if transferred:
        line += f"; transferred: {len(transferred)} functions, {sum(e.weight for e in transferred)} calls"
    return line


def format_report(entries: Sequence[FunctionReport]) -> str:
    """A plain-text table, one row per function: name, hash, weight, and the answer."""
    rows = [("function", "hash", "weight", "answer")]
    rows += [(e.name, e.hash, str(e.weight), e.answer()) for e in entries]
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    lines = [f"{r[0]:<{widths[0]}}  {r[1]:<{widths[1]}}  {r[2]:>{widths[2]}}  {r[3]}" for r in rows]
    lines.insert(1, "-" * max(len(line) for line in lines))
    return "\n".join(lines)
