"""Random samples of the design spaces tried on every core (docs/architecture.md, "Tuner").

Why: on GPU targets about 95% of random samples fail VerifyGPUCode, so each round of
`EvolutionarySearch._sample_init_population` replays thousands of traces to find fifty that
run; in one Python process that was most of a GPU trial's wall time (TVM samples on a thread
pool). Here the tries of a round are split over forked worker processes, each replaying its
share and answering only *whether* each try survived (a Schedule does not pickle, and the
answer is a few bytes). The parent draws every try's design space and seed beforehand, in the
order the serial loop draws them, and replays the survivors itself with the same seed: a
replay is deterministic, so the samples, and everything after them, are those of the serial
loop whatever the number of workers.

Workers are forked, so they inherit the module, the design spaces and the post-processors
(with their tune context) without pickling them; the pool lives for one call. Where fork is
not available, or one core is all there is, or a worker dies, the caller samples serially.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import TYPE_CHECKING, Any, Sequence

from msdb.tuner.search.replay import ReplayFailures, apply_trace

if TYPE_CHECKING:
    from msdb.ir.function import IRModule
    from msdb.schedule.trace import Trace

__all__ = ["available_workers", "survivors"]

logger = logging.getLogger(__name__)

#: What forked workers read: (module, design spaces, post-processors), set just before the fork.
_STATE: tuple[IRModule, Sequence[Trace], Sequence[Any]] | None = None


def available_workers() -> int:
    """Cores this process may run on (taskset/affinity respected), where fork exists; else 1."""
    if "fork" not in multiprocessing.get_all_start_methods():
        return 1
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def survivors(mod: IRModule, spaces: Sequence[Trace], postprocs: Sequence[Any], tries: Sequence[tuple[int, int]],
              workers: int) -> list[str | None] | None:
    """For each try (design space index, seed): None when `apply_trace(mod, Trace(spaces[i].insts),
    postprocs, seed)` gives a schedule, else the name of what dropped it (ReplayFailures' key).
    None when the workers could not do it (a worker died, no process could be forked): the
    caller then samples in its own process, with the same result."""
    global _STATE
    chunks = [list(tries[i::workers]) for i in range(workers)]
    _STATE = (mod, list(spaces), list(postprocs))
    try:
        with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("fork")) as pool:
            answers = list(pool.map(_try_chunk, chunks))
    except (BrokenProcessPool, OSError) as exc:
        logger.warning("sampling in %d forked workers failed (%s); sampling in this process instead", workers, exc)
        return None
    finally:
        _STATE = None
    out: list[str | None] = [None] * len(tries)
    for start, answer in enumerate(answers):
        out[start::workers] = answer
    return out


def _try_chunk(chunk: list[tuple[int, int]]) -> list[str | None]:
    """In a worker: replay each try of the chunk; None where it survived, else why not."""
    from msdb.schedule.trace import Trace

    assert _STATE is not None, "parallel sampling workers must be forked by survivors()"
    mod, spaces, postprocs = _STATE
    out: list[str | None] = []
    for index, seed in chunk:
        failures = ReplayFailures()
        sch = apply_trace(mod, Trace(spaces[index].insts), postprocs, seed, failures)
        out.append(None if sch is not None else next(iter(failures), "unknown"))
    return out
