"""The cyclic garbage collector kept off the long-lived heap while a round is searched
(docs/architecture.md, "Search").

A round replays, post-processes and featurizes about a thousand candidates, each a few hundred
thousand short-lived IR nodes and analysis objects. Every 700 new container objects Python's
collector scans its youngest generation, and each time the old generations fill it scans
everything the process holds (the database's records, the cost model, the remembered
replays): a tenth of a conv2d round's wall time went to collections that found almost nothing,
because immutable IR trees are freed by reference counting as soon as a candidate is dropped.
During a round the objects alive at its start are frozen (`gc.freeze`: no collection looks
at them) and the youngest generation is collected less often; both are undone when the round
ends, so cyclic garbage made during it is still collected, just later. A heap someone else froze
(the caller, an enclosing round) is left as it is.
"""

from __future__ import annotations

import contextlib
import gc
from typing import Iterator

__all__ = ["SEARCH_GEN0_THRESHOLD", "collector_quiet"]

#: The youngest generation's threshold during a round (Python's default is 700).
SEARCH_GEN0_THRESHOLD = 20_000


@contextlib.contextmanager
def collector_quiet() -> Iterator[None]:
    """Freeze what is alive and raise the youngest generation's threshold for the block;
    the collector's thresholds and generations are as they were afterwards."""
    thresholds = gc.get_threshold()
    # Objects someone froze before (the caller, or an enclosing round) stay frozen after.
    freezing = gc.get_freeze_count() == 0
    if freezing:
        gc.freeze()
    if thresholds[0]:  # 0: the user turned automatic collection off
        gc.set_threshold(max(thresholds[0], SEARCH_GEN0_THRESHOLD), *thresholds[1:])
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        if freezing:
            gc.unfreeze()
