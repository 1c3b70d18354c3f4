"""`msdb import --verify`'s own pass: every distinct (workload, trace) of an import replayed on
its decoded workload, as TVM does when it loads a log (a trace TVM cannot replay aborts TVM's
whole load, apache/tvm#16288). It is a stage between the one streaming reader and its sink:
rows whose replay fails become bad lines, the others go on (docs/architecture.md, "One
record's way")."""

from __future__ import annotations

from typing import Sequence

from msdb.interop.tvm.import_data import ParsedWorkDir, RecordRow, RecordSink
from msdb.interop.tvm.workdir import BadLine

__all__ = ["ReplayCheck"]


class ReplayCheck:
    """A `RecordSink` that replays the rows handed to it and hands the ones that replay on to
    `sink` (none when `sink` is None: a check that keeps nothing). `failures` are the record
    lines whose replay failed (`path:line: replay failed: reason`); `replayed` counts the
    distinct traces replayed. Opaque workloads are never replayed."""

    def __init__(self, sink: RecordSink | None) -> None:
        self.sink = sink
        self.failures: list[BadLine] = []
        self.replayed = 0
        self._problems: dict[tuple[int, str], str | None] = {}  # (id of the module, trace hash) -> problem

    def workloads(self, wd: ParsedWorkDir) -> None:
        if self.sink is not None:
            self.sink.workloads(wd)

    def records(self, wd: ParsedWorkDir, rows: Sequence[RecordRow]) -> None:
        from msdb.schedule.trace import replay_problem

        kept: list[RecordRow] = []
        for row in rows:
            number, index, _, trace_text, trace_hash = row[:5]
            workload = wd.workloads[index]
            mod = None if workload is None else workload.mod
            if mod is not None:
                key = (id(mod), trace_hash)
                if key not in self._problems:
                    self._problems[key] = replay_problem(mod, trace_text)
                    self.replayed += 1
                problem = self._problems[key]
                if problem is not None:
                    self.failures.append(BadLine(wd.record_path, number, f"replay failed: {problem}"))
                    continue
            kept.append(row)
        if self.sink is not None:
            self.sink.records(wd, kept)

    def done(self, wd: ParsedWorkDir) -> None:
        if self.sink is not None:
            self.sink.done(wd)
