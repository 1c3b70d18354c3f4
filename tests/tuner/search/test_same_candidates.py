"""The search loop's speed-ups change none of its choices (issue 29): a small evolutionary tune
of a conv2d, a matmul and a Winograd conv, with the deterministic fake runner and a seed, measures exactly the
candidates the loop measured before them (stop 35's code, whose digests are pinned here).

A change that means to make the search choose differently (a new mutator, another order of
draws) updates the digests, and says so; a change that only makes it faster must not."""

from __future__ import annotations

import hashlib

import pytest

from msdb.database import MemoryDatabase
from msdb.ir import te, zoo
from msdb.ir.function import IRModule
from msdb.model.legalize.winograd import conv2d_winograd
from msdb.records import Target
from msdb.tuner.cost_model import XGBModel
from msdb.tuner.search.evolutionary import EvolutionarySearch
from msdb.tuner.tune import tune_tir

from ._fakes import FakeBuilder, FakeRunner


def _winograd() -> IRModule:
    """A 16-channel 8 x 8 conv as `--fuse winograd` makes it, F(4, 3): the functions whose
    transforms the search's memos of repeated accesses are for."""
    data = te.placeholder((1, 16, 8, 8), "float32", name="data")
    weight = te.placeholder((6, 6, 1, 16, 16), "float32", name="weight")
    return IRModule.from_func(te.create_prim_func([data, weight, conv2d_winograd(data, weight, [1, 1], [1, 1])]))


PINNED = {
    "c2d": (zoo.build("C2D", 1, 14, 14, 16, 16, 3, 1, 1), "22fb79a8e96a45e5"),
    "gmm": (zoo.build("GMM", 1, 32, 32, 32), "951244fa0a384853"),
    "winograd": (_winograd(), "2b2812875b18e041"),  # stop 35's code measures these too (checked at stop 39)
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
