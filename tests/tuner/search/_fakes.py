"""What the search and tuning tests share: a user-written space generator (a schedule
function, the way a user plugs a space in) and a deterministic fake builder and runner (the
cost of a candidate is a pure function of its module, so runs can be compared exactly)."""

from __future__ import annotations

import hashlib
from typing import Any, Sequence

from msdb.hashing import structural_hash
from msdb.ir import zoo
from msdb.ir.function import IRModule
from msdb.schedule import Schedule
from msdb.tuner.measure.builder import Builder, BuilderInput, BuilderResult
from msdb.tuner.measure.runner import ReadyRunnerFuture, Runner, RunnerFuture, RunnerInput, RunnerResult

SMALL_GMM = zoo.build("GMM", 1, 32, 32, 32)


class TiledSpace:
    """One design space: the matmul's j and k loops split by sampled perfect tiles."""

    postprocs: list[Any] = []
    mutator_probs: dict[Any, float] = {}

    def _initialize_with_tune_context(self, context: Any) -> None:
        self.context = context

    def clone(self) -> TiledSpace:
        return TiledSpace()

    def generate_design_space(self, mod: IRModule) -> list[Schedule]:
        sch = Schedule(mod, seed=self.context.fork_seed())
        block = sch.get_block("Z")
        i, j, k = sch.get_loops(block)[-3:]
        j0, j1 = sch.split(j, sch.sample_perfect_tile(j, n=2, max_innermost_factor=16))
        k0, k1 = sch.split(k, sch.sample_perfect_tile(k, n=2, max_innermost_factor=16))
        sch.reorder(i, j0, k0, k1, j1)
        return [sch]


class FakeBuilder(Builder):
    """Builds nothing: the artifact 'path' is the module's structural hash."""

    def __init__(self) -> None:
        self.built: list[str] = []

    def build(self, inputs: Sequence[BuilderInput]) -> list[BuilderResult]:
        out = []
        for item in inputs:
            key = structural_hash(item.mod)
            self.built.append(key)
            out.append(BuilderResult(key, None))
        return out


class FakeRunner(Runner):
    """A deterministic cost from the module's hash (microseconds 10..1010)."""

    def run(self, inputs: Sequence[RunnerInput]) -> list[RunnerFuture]:
        out: list[RunnerFuture] = []
        for item in inputs:
            digest = int(hashlib.blake2b(str(item.artifact_path).encode(), digest_size=4).hexdigest(), 16)
            out.append(ReadyRunnerFuture(RunnerResult([1e-5 + (digest % 1000) * 1e-6], None)))
        return out
