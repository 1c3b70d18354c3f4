"""What reading TVM work_dirs yields, and what an import did: the data passed between the
reader (`msdb.interop.tvm.import_reader`), `--verify`'s replay pass
(`msdb.interop.tvm.replay_check`) and the database's import writer (`msdb.database.tvm_import`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, Sequence

from msdb.errors import MsdbError
from msdb.interop.tvm.grammar import ParsedWorkload
from msdb.interop.tvm.workdir import BadLine

if TYPE_CHECKING:
    from msdb.records import Target

__all__ = ["ImportAborted", "ImportPlan", "ImportSummary", "ParsedWorkDir", "ParsedWorkload", "RecordRow",
           "RecordSink", "Discard", "failed_runs"]


class ImportAborted(MsdbError):
    """A TVM log has bad lines and skipping them was not asked for; nothing was written."""

    def __init__(self, bad_lines: Sequence[BadLine]) -> None:
        self.bad_lines = list(bad_lines)
        first = self.bad_lines[0]
        more = len(self.bad_lines) - 1
        tail = f" (and {more} more bad line{'s' if more != 1 else ''})" if more else ""
        super().__init__(f"{first}{tail}; nothing was imported (--skip-bad imports the other lines)")


#: A parsed record: (line, workload_index, target_key, trace_text, trace_hash, run_secs_text,
#: mean_run_secs, is_valid, args_text): the line number and `msdb.interop.tvm.grammar.RecordFields`.
#: Tuples, not objects: an import holds 100k of them.
RecordRow = tuple[int, int, str, str, str, "str | None", "float | None", bool, "str | None"]


@dataclass
class ParsedWorkDir:
    """Everything read from one work_dir; `workloads[i]` is None for a bad workload line.
    `targets` are the parsed targets of record rows by their `target_key`: the reader's (shared
    by the work_dirs it reads), growing while the records are parsed."""

    workload_path: Path
    record_path: Path
    workload_sha256: str
    record_sha256: str
    workloads: list[ParsedWorkload | None] = field(default_factory=list)
    records: list[RecordRow] = field(default_factory=list)
    normalized: int = 0
    targets: dict[str, Target | None] = field(default_factory=dict)

    @property
    def tvm_version(self) -> str | None:
        versions = sorted({w.tvm_version for w in self.workloads if w is not None and w.tvm_version})
        return versions[-1] if versions else None

    @property
    def location(self) -> str:
        return str(self.record_path.resolve())


class RecordSink(Protocol):
    """Where a streaming read hands a work_dir: first its workloads, then its record rows in
    batches (each batch handed once, in line order), then its end (when the record file's
    sha256 is known)."""

    def workloads(self, wd: ParsedWorkDir) -> None: ...

    def records(self, wd: ParsedWorkDir, rows: Sequence[RecordRow]) -> None: ...

    def done(self, wd: ParsedWorkDir) -> None: ...


class Discard:
    """A `RecordSink` that keeps nothing: a reading pass that only checks the lines."""

    def workloads(self, wd: ParsedWorkDir) -> None:
        pass

    def records(self, wd: ParsedWorkDir, rows: Sequence[RecordRow]) -> None:
        pass

    def done(self, wd: ParsedWorkDir) -> None:
        pass


@dataclass
class ImportPlan:
    """What `read_import` found: parsed work_dirs (their record rows, unless a sink took them),
    the targets they name, and the bad lines in file order."""

    workdirs: list[ParsedWorkDir]
    targets: dict[str, Target | None]
    bad_lines: list[BadLine]

    @property
    def n_records(self) -> int:
        return sum(len(wd.records) for wd in self.workdirs)


def failed_runs(count: int) -> str:
    """How import and merge summaries count the new records that are failed runs: stored (TVM
    stores them too) and never ranked best; worded so that nobody reads them as lines that were
    rejected (those are "bad lines")."""
    return f"{count} failed run{'s' if count != 1 else ''}" + (" (stored)" if count else "")


@dataclass
class ImportSummary:
    """What an import did. `records_invalid` counts the new records TVM ranks as invalid (failed
    builds or runs, no run_secs); they are stored as TVM stores them."""

    workloads_new: int = 0
    workloads_known: int = 0
    records_new: int = 0
    records_duplicate: int = 0
    records_invalid: int = 0
    bad_lines: list[BadLine] = field(default_factory=list)
    opaque: list[str] = field(default_factory=list)
    replayed: int = 0
    replay_failures: list[str] = field(default_factory=list)
    sources: list[int] = field(default_factory=list)
    seconds: float = 0.0
    #: Whether the rows are committed where the user asked for them (so an interrupt that
    #: arrives now must not be reported as "nothing imported").
    committed: bool = False

    def line(self) -> str:
        text = (f"workloads: {self.workloads_new} new, {self.workloads_known} known; records: {self.records_new} new, "
                f"{self.records_duplicate} duplicate, {failed_runs(self.records_invalid)}")
        if self.bad_lines:
            text += f"; {len(self.bad_lines)} bad line{'s' if len(self.bad_lines) != 1 else ''} skipped"
        if self.replayed or self.replay_failures:
            text += f"; {self.replayed} traces replayed, {len(self.replay_failures)} failed"
        return text + f"; {self.seconds:.2f} s"
