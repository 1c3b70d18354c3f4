"""`TransferDatabase`: answers for a workload nobody tuned, from its relatives' records re-fitted
to it.

A view that stores nothing and reads `source`; it layers last:
`OrderedUnionDatabase(local, shared, TransferDatabase(shared))`. An answer is a
`TransferredRecord` (the re-fitted trace, no run times, so a tuner still measures it); skipped
relatives and their reasons are in `answer(...).skipped`. The tuner's post-processors and anchor
procedure come in through the constructor. See docs/architecture.md, "Transfer".
"""

from __future__ import annotations

import logging
import math
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

from msdb.database.base import RELATIVES_LIMIT, Database, Relative, family_or_none
from msdb.database.errors import InvalidQuery, UnsupportedOperation
from msdb.errors import MsdbError
from msdb.records import ArgInfo, Target, TuningRecord, Workload

if TYPE_CHECKING:
    from msdb.ir.function import IRModule, PrimFunc
    from msdb.schedule import Schedule, Trace
    from msdb.schedule.refit import AnchorProcedure, Postprocess

__all__ = ["TransferDatabase", "TransferredRecord", "Transfer", "TransferSkip", "TransferAnswer", "family_distance",
           "NEIGHBOURS", "MAX_EXTENT_RATIO", "extent_ratio"]

logger = logging.getLogger(__name__)

#: How many re-fitted relatives a `TransferDatabase` answers with unless told.
NEIGHBOURS = 3

#: How far apart a relative's sizes may be for a transfer that nothing measures: no extent more
#: than this many times the other's (`extent_ratio`). ResNet-18's convs at 160 or 288 against 224,
#: at batch 2 or 4, and ResNet-50's 3x3 convs against ResNet-18's are within it; a conv of another
#: stage (64 against 512 channels) is not, and its schedule, re-fitted, measured up to 10x the
#: function's own default schedule (docs/benchmarks.md, "Records that travel").
MAX_EXTENT_RATIO = 4.0

_STORES_NOTHING = ("a TransferDatabase stores nothing; commit to the database it reads, or put a writable "
                   "database first in an OrderedUnionDatabase")

#: Answers kept per view (workload and target): a compile asks each function several times.
_CACHE_SIZE = 64


def family_distance(a: Sequence[int], b: Sequence[int]) -> float:
    """How far apart two relatives are: the sum over positions of |log((1 + |a_i|) / (1 + |b_i|))|
    of their abstracted extents (`msdb.hashing.family.FamilyKey.extents`, aligned position by
    position). A size halved or doubled costs log 2 wherever it appears; the 1 keeps the zeros
    the key also abstracts (loop minima, offsets) at distance 0 from each other. Vectors of
    different lengths (not relatives) are infinitely far apart."""
    if len(a) != len(b):
        return math.inf
    return sum(abs(math.log((1 + abs(x)) / (1 + abs(y)))) for x, y in zip(a, b))


def extent_ratio(a: Sequence[int], b: Sequence[int]) -> float:
    """The largest factor between two relatives' aligned extents, either way (with `family_distance`'s
    1 added: zeros compare equal); infinite for vectors of different lengths."""
    if len(a) != len(b):
        return math.inf
    return max((max((1 + abs(x)) / (1 + abs(y)), (1 + abs(y)) / (1 + abs(x))) for x, y in zip(a, b)), default=1.0)


@dataclass(frozen=True)
class Transfer:
    """Where a transferred answer came from: the relative's `workload` and its best `record` (whose
    run times are the relative's), the `distance` between the two (`family_distance`), and how
    the re-fit went (`route` "replay" or "anchor", `postproc` "rerun", "replayed" or "none",
    `changes`: the sampling decisions the re-fit changed, as text)."""

    workload: Workload
    record: TuningRecord
    distance: float
    route: str
    postproc: str
    changes: tuple[str, ...] = ()

    def describe(self) -> str:
        """One line: the relative (name and hash), the distance, the relative's own latency."""
        name = f"{self.workload.name} " if self.workload.name else ""
        secs = self.record.mean_run_secs
        measured = f", {secs * 1e6:.1f} us there" if math.isfinite(secs) else ""
        return f"{name}{self.workload.shash} at distance {self.distance:.3f}{measured}"


class TransferredRecord(TuningRecord):
    """A relative's record re-fitted to another workload: the re-fitted trace on that workload,
    no run times (nothing was measured on it), and `transfer`, its provenance."""

    __slots__ = ("transfer",)

    def __init__(self, trace: Trace, workload: Workload, target: Target | None, transfer: Transfer,
                 args_info: Sequence[ArgInfo] | None = None) -> None:
        super().__init__(trace, workload, None, target, args_info)
        self.transfer = transfer

    def with_workload(self, workload: Workload) -> TuningRecord:
        clone = super().with_workload(workload)
        return TransferredRecord(clone.trace, workload, clone.target, self.transfer, clone.args_info)

    def __repr__(self) -> str:
        return f"<TransferredRecord {self.workload!r} from {self.transfer.describe()}>"


@dataclass(frozen=True)
class TransferSkip:
    """A relative that gave no answer, and why (its trace did not fit, or its record could not be read)."""

    workload: Workload
    record: TuningRecord
    distance: float
    reason: str

    def __str__(self) -> str:
        return f"{self.workload.shash} at distance {self.distance:.3f}: {self.reason}"


@dataclass(frozen=True)
class TransferAnswer:
    """`TransferDatabase.answer`: the transferred records, nearest first, with their re-fitted
    schedules (same order), the relatives skipped on the way, and, without records, why
    (`reason`)."""

    records: tuple[TransferredRecord, ...] = ()
    schedules: tuple[Schedule, ...] = ()
    skipped: tuple[TransferSkip, ...] = ()
    reason: str | None = None


class TransferDatabase(Database):
    """Answers a workload without records of its own in `source` with its nearest relatives'
    re-fitted records (module docstring).

    `neighbours`: at most this many answers (the nearest relatives that fit). `postprocess` and
    `anchor`: the tuner's post-processors and anchor-trace procedure (`refit_trace`'s
    arguments); None: msdb's defaults. `candidates`: how many relatives are read from `source`
    (`Database.relatives`' limit). `seed`: of each re-fit (only decisions a trace lacks draw).
    """

    def __init__(self, source: Database, neighbours: int = NEIGHBOURS, *, postprocess: Postprocess | None = None,
                 anchor: AnchorProcedure | None = None, candidates: int = RELATIVES_LIMIT, seed: int = 0,
                 module_equality: str | None = None, max_ratio: float = MAX_EXTENT_RATIO) -> None:
        if not isinstance(source, Database):
            raise TypeError(f"TransferDatabase: source must be a Database view (a MemoryDatabase, SQLiteDatabase, "
                            f"union, ...), got {type(source).__name__}")
        for name, value, least in (("neighbours", neighbours, 1), ("candidates", candidates, 1)):
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise InvalidQuery(f"TransferDatabase: {name}={value!r} must be an int >= {least}")
        if isinstance(max_ratio, bool) or not isinstance(max_ratio, (int, float)) or not max_ratio >= 1:
            raise InvalidQuery(f"TransferDatabase: max_ratio={max_ratio!r} must be a number >= 1 (math.inf: any)")
        for name, fn in (("postprocess", postprocess), ("anchor", anchor)):
            if fn is not None and not callable(fn):
                raise TypeError(f"TransferDatabase: {name} must be callable or None, got {type(fn).__name__}")
        super().__init__(module_equality or source.module_equality)
        self.source = source
        self.neighbours = neighbours
        self.postprocess = postprocess
        self.anchor = anchor
        self.candidates = candidates
        self.seed = seed
        self.max_ratio = float(max_ratio)
        self._cache: OrderedDict[tuple[str, str | None], TransferAnswer] = OrderedDict()

    def __repr__(self) -> str:
        return f"TransferDatabase({self.source!r}, neighbours={self.neighbours})"

    # ---- the answer ----
    def answer(self, mod: IRModule | PrimFunc | Workload, target: Target | str | dict[str, Any] | None) -> TransferAnswer:
        """The transferred records for `mod` on `target` (module docstring), nearest first, at
        most `neighbours`; none when `source` has a valid record of the workload itself."""
        workload = Workload.coerce(mod)
        query = Target.coerce(target)
        if self.source.get_top_k(workload, 1, query):
            return TransferAnswer(reason="the workload has records of its own")
        # keyed by the module itself (structural), whatever the view's equality: the answer holds
        # schedules of this very module, and two functions with one anchor block differ
        key = (workload.shash, query.canonical_json() if query is not None else None)
        cached = self._cache.get(key)
        if cached is not None:
            self._cache.move_to_end(key)
            return cached
        answer = self._transfer(workload, query)
        self._cache[key] = answer
        if len(self._cache) > _CACHE_SIZE:
            self._cache.popitem(last=False)
        return answer

    def _transfer(self, workload: Workload, target: Target | None) -> TransferAnswer:
        from msdb.schedule.refit import refit_trace

        family = family_or_none(workload)
        if family is None:
            return TransferAnswer(reason="the workload has no family (no readable IR)")
        relatives = self.source.relatives(workload, target, limit=self.candidates)
        ranked = sorted(((family_distance(family.extents, r.extents), r) for r in relatives if r.best is not None),
                        key=_nearest_first)
        near = [(distance, relative) for distance, relative in ranked
                if extent_ratio(family.extents, relative.extents) <= self.max_ratio]
        if ranked and not near:
            return TransferAnswer(reason=f"every relative with a record has a size more than {self.max_ratio:g}x "
                                         f"apart (the nearest at distance {ranked[0][0]:.2f})")
        ranked = near
        if not ranked:
            if not self.source.lists_relatives:
                return TransferAnswer(reason=f"{self.source!r} cannot list relatives")
            return TransferAnswer(reason="no relative has a valid record for this target" if relatives
                                  else "no relatives")
        args_info = _args_info(workload)
        records: list[TransferredRecord] = []
        schedules: list[Schedule] = []
        skipped: list[TransferSkip] = []
        for distance, relative in ranked:
            if len(records) >= self.neighbours:
                break
            best = relative.best
            assert best is not None
            if not math.isfinite(distance):
                skipped.append(self._skip(workload, relative, best, distance, "its extents do not align"))
                continue
            try:
                result = refit_trace(best.trace, workload.mod, postprocess=self.postprocess, anchor=self.anchor,
                                     seed=self.seed)
            except MsdbError as exc:  # an unreadable stored trace: the relative is skipped, not the query
                skipped.append(self._skip(workload, relative, best, distance, str(exc)))
                continue
            if result.schedule is None:
                skipped.append(self._skip(workload, relative, best, distance, str(result.failure)))
                continue
            transfer = Transfer(relative.workload, best, distance, result.route, result.postproc,
                                tuple(str(change) for change in result.changes))
            records.append(TransferredRecord(result.schedule.trace, workload, best.target, transfer, args_info))
            schedules.append(result.schedule)
            logger.debug("transfer to %s: %s", workload.shash, transfer.describe())
        reason = None if records else f"no relative's trace fits ({len(skipped)} tried)"
        return TransferAnswer(tuple(records), tuple(schedules), tuple(skipped), reason)

    @staticmethod
    def _skip(workload: Workload, relative: Relative, record: TuningRecord, distance: float,
              reason: str) -> TransferSkip:
        logger.info("transfer to %s: skipped relative %s at distance %.3f: %s", workload.shash,
                    relative.workload.shash, distance, reason)
        return TransferSkip(relative.workload, record, distance, reason)

    # ---- TVM's interface ----
    def _top_k(self, workload: Workload, top_k: int, target: Target | None) -> list[TuningRecord]:
        """At most `top_k` transferred records, nearest relative first. They have no run times
        (module docstring): unlike the other views' answers they are not valid by TVM's rule."""
        return list(self.answer(workload, target).records[:top_k])

    def query_schedule(self, mod: IRModule | PrimFunc | Workload, target: Target | str | dict[str, Any] | None,
                       workload_name: str = "main") -> Schedule | None:
        """The nearest relative's re-fitted schedule of the asked workload (a copy: the caller may
        go on scheduling it), or None."""
        answer = self.answer(mod, target)
        return answer.schedules[0].copy() if answer.schedules else None

    def get_measured(self, workload: IRModule | PrimFunc | Workload,
                     target: Target | str | dict[str, Any] | None = None) -> list[TuningRecord]:
        """Nothing was measured here: a transferred candidate is still to be measured."""
        return []

    def has_workload(self, mod: IRModule | PrimFunc | Workload) -> bool:
        """Stores nothing, so has no workload."""
        return False

    def commit_workload(self, mod: IRModule | PrimFunc | Workload) -> Workload:
        raise UnsupportedOperation(_STORES_NOTHING)

    def commit_tuning_record(self, record: TuningRecord) -> None:
        raise UnsupportedOperation(_STORES_NOTHING)

    def get_all_tuning_records(self) -> list[TuningRecord]:
        return []

    def __len__(self) -> int:
        return 0

    def close(self) -> None:
        """Closes nothing: `source` belongs to whoever opened it (it may be another layer too)."""
        self._cache.clear()


def _nearest_first(item: tuple[float, Relative]) -> tuple[float, float, str]:
    """Distance, then the relative's own latency (faster first), then its hash: a total order."""
    distance, relative = item
    assert relative.best is not None
    return distance, relative.best.mean_run_secs, relative.workload.shash


def _args_info(workload: Workload) -> list[ArgInfo] | None:
    try:
        return ArgInfo.from_prim_func(workload.mod)
    except MsdbError:  # a symbolic shape: TVM's arg info has none
        return None
