"""The search strategy interface (docs/architecture.md, "Tuner"): TVM's `SearchStrategy`, which
proposes the candidates of each measurement round for one task and learns from their results.

A strategy's session runs `pre_tuning` once, then alternates `generate_measure_candidates`
(None: the task is done) and `notify_runner_results`, and ends with `post_tuning`. What every
strategy shares lives here: the trial budget, and the set of post-processed modules already
measured (this session's, and, beyond TVM, every record the database holds for the workload and
target), so that no candidate is measured twice and a resumed run re-measures nothing; and the
claims that keep several tuners on one database from measuring a candidate twice (`_claim`,
docs/architecture.md, "Team scale").
"""

from __future__ import annotations

import logging
import random
import uuid
from typing import TYPE_CHECKING, Any, Sequence

from msdb.kinds import UnknownKind, load_kind

if TYPE_CHECKING:
    from msdb.database.base import Database
    from msdb.records import Workload
    from msdb.schedule.schedule import Schedule
    from msdb.schedule.trace import Trace
    from msdb.tuner.candidate import MeasureCandidate
    from msdb.tuner.context import TuneContext
    from msdb.tuner.measure.runner import RunnerResult

__all__ = ["SearchStrategy", "UnknownSearchStrategy", "create"]

logger = logging.getLogger(__name__)


#: what `create` raises for a name msdb does not have (one error class for every kind).
UnknownSearchStrategy = UnknownKind


class SearchStrategy:
    """Base class: subclass it and override `generate_measure_candidates` (and, when the
    strategy learns, `notify_runner_results`) to plug a strategy of one's own into `tune_tir`."""

    def __init__(self) -> None:
        self.context: TuneContext | None = None
        self.max_trials = 0
        self.num_trials_per_iter = 0
        self.trials_done = 0
        self.design_spaces: list[Trace] = []
        self.database: Database | None = None
        self.cost_model: Any = None
        self.measured: set[str] = set()
        self.rng = random.Random(0)
        self.claim_owner = uuid.uuid4().hex  # this session, in the database's measurement claims
        self.claims_lost = 0  # candidates skipped because another tuner claimed them
        self._claims: dict[int, tuple[Schedule, str]] = {}  # id(sch) -> (sch, module key), claimed, unsettled
        self._claim_workload: Workload | None = None  # one token: the database finds its row once

    # ---- session -------------------------------------------------------------------------
    def _initialize_with_tune_context(self, context: TuneContext) -> None:
        self.context = context

    def pre_tuning(self, max_trials: int, num_trials_per_iter: int, design_spaces: list[Schedule],
                   database: Database | None = None, cost_model: Any = None) -> None:
        """Start a session of at most `max_trials` measurements, `num_trials_per_iter` a round,
        over the design spaces' traces (post-processing removed, as TVM keeps them)."""
        from msdb.tuner.search.replay import measured_module_keys

        context = self._context()
        if max_trials < 1 or num_trials_per_iter < 1:
            raise ValueError(f"max_trials ({max_trials}) and num_trials_per_iter ({num_trials_per_iter}) must be >= 1")
        self.max_trials = max_trials
        self.num_trials_per_iter = num_trials_per_iter
        self.trials_done = 0
        self.design_spaces = [sch.trace.simplified(remove_postproc=True) for sch in design_spaces]
        if not self.design_spaces:
            raise ValueError(f"task {context.task_name!r}: the space generator made no design space")
        self.database = database
        self.cost_model = cost_model
        self.rng = context.rng()
        self.measured = measured_module_keys(context, database) if database is not None else set()
        self.claim_owner = uuid.uuid4().hex
        self.claims_lost = 0
        self._claims = {}
        self._claim_workload = None

    def generate_measure_candidates(self) -> list[MeasureCandidate] | None:
        """The next round's candidates, or None when the task is done."""
        raise NotImplementedError

    def notify_runner_results(self, candidates: list[MeasureCandidate], results: list[RunnerResult]) -> None:
        """Count the measured candidates against the budget and settle the round's claims."""
        self.trials_done += len(results)
        self._settle_claims([c.sch for c in candidates[:len(results)]])

    def post_tuning(self) -> None:
        """End the session, giving back claims on candidates that were never measured."""
        self._settle_claims([])

    def clone(self) -> SearchStrategy:
        twin = type(self).__new__(type(self))
        twin.__dict__.update(self.__dict__)
        twin.measured = set()
        twin.design_spaces = []
        twin.claim_owner = uuid.uuid4().hex
        twin.claims_lost = 0
        twin._claims = {}
        twin._claim_workload = None
        return twin

    # ---- shared helpers ------------------------------------------------------------------
    def _context(self) -> TuneContext:
        if self.context is None or self.context.mod is None:
            raise ValueError(f"{type(self).__name__} is not initialized with a TuneContext holding a module")
        return self.context

    def _claim(self, batch: Sequence[tuple[str, Schedule]]) -> list[Schedule]:
        """The schedules of `batch` ((module key, schedule) pairs not measured before) that this
        session won in the database's measurement claims: no other tuner of the workload and
        target measures them (`Database.claim_candidates`). The others are counted in
        `claims_lost` and stay in `measured`: another tuner measures them, so a strategy picks
        other candidates instead."""
        if not batch:
            return []
        context = self._context()
        if self.database is None:
            won = {key for key, _ in batch}
        else:
            won = self.database.claim_candidates(self._claimed_workload(), context.target,
                                                 [key for key, _ in batch], owner=self.claim_owner)
        picked = []
        for key, sch in batch:
            if key in won:
                self._claims[id(sch)] = (sch, key)
                picked.append(sch)
            else:
                self.claims_lost += 1
        if len(picked) < len(batch):
            logger.info("task %r: %d candidate(s) skipped, claimed by another tuner", context.task_name,
                        len(batch) - len(picked))
        return picked

    def _settle_claims(self, measured: list[Schedule]) -> None:
        """Make the claims of the `measured` schedules permanent and give back every other open
        claim of this session (candidates cut from a round or never measured)."""
        if not self._claims:
            return
        done = [self._claims.pop(id(sch))[1] for sch in measured if id(sch) in self._claims]
        rest = [key for _, key in self._claims.values()]
        self._claims = {}
        if self.database is not None:
            self.database.settle_claims(self._claimed_workload(), self._context().target, owner=self.claim_owner,
                                        measured=done, unmeasured=rest)

    def _claimed_workload(self) -> Workload:
        if self._claim_workload is None:
            from msdb.records import Workload

            self._claim_workload = Workload.coerce(self._context().mod)  # type: ignore[arg-type]
        return self._claim_workload

    def _round_size(self) -> int:
        """How many candidates this round asks for (0: the budget is spent)."""
        return max(0, min(self.num_trials_per_iter, self.max_trials - self.trials_done))

    @staticmethod
    def create(kind: str = "evolutionary", **kwargs: Any) -> SearchStrategy:
        return create(kind, **kwargs)


#: kind -> (module, class).
_KINDS = {
    "evolutionary": ("msdb.tuner.search.evolutionary", "EvolutionarySearch"),
    "replay-trace": ("msdb.tuner.search.replay_trace", "ReplayTrace"),
    "replay-func": ("msdb.tuner.search.replay_func", "ReplayFunc"),
}


def create(kind: str = "evolutionary", **kwargs: Any) -> SearchStrategy:
    """A strategy by name: "evolutionary" (default), "replay-trace" or "replay-func"."""
    strategy: SearchStrategy = load_kind(_KINDS, kind, "search strategy")(**kwargs)
    return strategy
