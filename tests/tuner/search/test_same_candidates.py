"""The search loop's speed-ups change none of its choices (issue 29): a small evolutionary tune
of a conv2d and a matmul, with the deterministic fake runner and a seed, measures exactly the
candidates the loop measured before them (stop 35's code, whose digests are pinned here).

A change that means to make the search choose differently (a new mutator, another order of
draws) updates the digests, and says so; a change that only makes it faster must not."""

from __future__ import annotations

import hashlib

import pytest

from msdb.database import MemoryDatabase
from msdb.ir import zoo
from msdb.records import Target
from msdb.tuner.cost_model import XGBModel
from msdb.tuner.search.evolutionary import EvolutionarySearch
from msdb.tuner.tune import tune_tir

from ._fakes import FakeBuilder, FakeRunner

PINNED = {
    "c2d": (zoo.build("C2D", 1, 14, 14, 16, 16, 3, 1, 1), "22fb79a8e96a45e5"),
    "gmm": (zoo.build("GMM", 1, 32, 32, 32), "951244fa0a384853"),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(PINNED))
def test_the_search_measures_what_it_measured_before_it_was_made_faster(name: str) -> None:
    mod, digest = PINNED[name]
    db = MemoryDatabase()
    tune_tir(mod, Target("llvm -num-cores=1"), db, 24, 8,
             strategy=EvolutionarySearch(population_size=48, init_min_unmeasured=12),
             cost_model=XGBModel(seed=0, num_warmup_samples=0), seed=3, builder=FakeBuilder(),  # type: ignore[arg-type]
             runner=FakeRunner(), check_best=False)  # type: ignore[arg-type]
    records = db.get_all_tuning_records()
    assert len(records) == 24
    traces = "\n".join(str(r.trace.as_json()) for r in records)
    assert hashlib.sha256(traces.encode()).hexdigest()[:16] == digest
