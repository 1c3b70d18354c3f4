"""Turning a trace into a measurable candidate (TVM's `ThreadedTraceApply`): replay it on the
task's module with a fresh seed (decisions the trace lacks are sampled anew), enter
post-processing, run the post-processors; any failure drops the candidate.

And the key a candidate is deduplicated by: the structural hash of the post-processed module
(TVM's rule), in the database's module equality.
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import TYPE_CHECKING, Any, Sequence

from msdb.errors import MsdbError
from msdb.identity_cache import IdentityCache

if TYPE_CHECKING:
    from msdb.database.base import Database
    from msdb.ir.function import IRModule
    from msdb.schedule.schedule import Schedule
    from msdb.schedule.trace import Trace
    from msdb.tuner.context import TuneContext
    from msdb.tuner.search.prefix_replay import PrefixReplays

__all__ = ["apply_trace", "module_key", "measured_module_keys", "ReplayFailures"]

logger = logging.getLogger(__name__)


class ReplayFailures(Counter[str]):
    """Why candidates were dropped, by reason (TVM's SummarizeFailures)."""


def apply_trace(mod: IRModule, trace: Trace, postprocs: Sequence[Any], seed: int,
                failures: ReplayFailures | None = None, *, prefixes: PrefixReplays | None = None,
                parent: Schedule | None = None) -> Schedule | None:
    """`trace` (post-processing removed) replayed on `mod` and post-processed, or None when a
    replay step or a post-processor fails. Failures are expected (a sampled decision may make a
    later primitive illegal): they are counted, not raised.

    With `prefixes`, the replay keeps copies of its schedule for mutants of the candidate, and
    a fully decided `trace` mutated from `parent` starts from the parent's copy before their
    first difference (`msdb.tuner.search.prefix_replay`)."""
    from msdb.schedule.schedule import Schedule
    from msdb.tuner.profiler import Profiler

    if prefixes is not None:
        sch, start, copies, branch_point = prefixes.begin(mod, trace, seed, parent)
    else:
        sch, start, copies, branch_point = Schedule(mod, seed=seed), 0, [], None
    try:
        with Profiler.timeit("replay"):
            trace.apply_to_schedule(sch, remove_postproc=True, start=start, branch_point=branch_point)
        with Profiler.timeit("post-processing"):
            sch.enter_postproc()
            for postproc in postprocs:
                if not postproc.apply(sch):
                    if failures is not None:
                        failures[type(postproc).__name__] += 1
                    return None
    except MsdbError as exc:
        if failures is not None:
            failures[type(exc).__name__] += 1
        logger.debug("candidate dropped: %s", exc)
        return None
    if prefixes is not None:
        prefixes.remember(sch, copies)
    return sch


#: Candidates' keys by module identity: an evolutionary round keys its whole population in
#: every generation, and unmutated parents, remembered replays and the database's best recur.
_KEYS: IdentityCache[str] = IdentityCache(4096)


def module_key(mod: IRModule, module_equality: str = "structural") -> str:
    """What a candidate is deduplicated by: its post-processed module's structural hash."""
    from msdb.hashing.api import structural_hash

    return _KEYS.get(mod, lambda: structural_hash(mod, module_equality), module_equality)


def measured_module_keys(context: TuneContext, database: Database) -> set[str]:
    """The keys of every module the database measured for the context's workload and target
    (failed runs included): replaying each stored trace, post-processing included."""
    from msdb.schedule.schedule import Schedule

    assert context.mod is not None
    keys: set[str] = set()
    for record in database.get_measured(context.mod, context.target):
        sch = Schedule(record.workload.mod)
        try:
            record.trace.apply_to_schedule(sch, remove_postproc=False)
        except MsdbError as exc:
            logger.warning("a stored trace of task %r does not replay (%s); it cannot be skipped by module", 
                           context.task_name, exc)
            continue
        keys.add(module_key(sch.mod, database.module_equality))
    return keys
