"""Search strategies (docs/architecture.md, "Tuner"): what to measure next for one task.

- `base`: `SearchStrategy` (subclass it to plug in one's own) and `create(kind)`;
- `evolutionary`: `EvolutionarySearch`, TVM's default (cost-model-guided, warm-started from the
  database);
- `replay_trace`: `ReplayTrace`, random decisions on the design spaces' traces;
- `replay_func`: `ReplayFunc`, the space generator re-run per candidate;
- `replay`: replaying a trace into a post-processed candidate, and the module key candidates
  are deduplicated by.
"""

from __future__ import annotations

from msdb.tuner.search.base import SearchStrategy, UnknownSearchStrategy, create
from msdb.tuner.search.evolutionary import EvolutionarySearch
from msdb.tuner.search.replay_func import ReplayFunc
from msdb.tuner.search.replay_trace import ReplayTrace

__all__ = ["SearchStrategy", "UnknownSearchStrategy", "create", "EvolutionarySearch", "ReplayFunc", "ReplayTrace"]
