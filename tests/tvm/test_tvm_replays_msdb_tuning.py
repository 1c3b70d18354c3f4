"""Real TVM 0.27 replays what msdb's tuner finds: msdb tunes GMM and a conv2d (a few real
measurements each), `msdb export` writes the work_dir, TVM's JSONDatabase loads it, and every
record TVM replays gives the module msdb's replay gives (TVM's TVMScript print parsed by msdb,
structurally equal). So a record msdb tunes is a record TVM can apply.

One known difference is compared away: where a block binding after compute_at and fuse is not
an affine iter map, TVM's IterMapSimplify gives up and keeps its sum's terms in another order
(`rw_0 + f // 4 * 4 + a // 8` where msdb writes `f // 4 * 4 + rw_0 + a // 8`); both orders
compute the same index, so bindings are compared in msdb's canonical form."""

from __future__ import annotations

import pathlib

import pytest

from msdb.database.location import open_database
from msdb.database.tvm_export import export_workdir
from msdb.hashing import structural_equal
from msdb.ir import from_script, zoo
from msdb.ir import stmt as S
from msdb.ir.arith.analyzer import simplify
from msdb.ir.function import IRModule
from msdb.ir.functor import IRMutator
from msdb.records import Target
from msdb.schedule import Schedule
from msdb.tuner.cost_model import XGBModel
from msdb.tuner.search.evolutionary import EvolutionarySearch
from msdb.tuner.tune import tune_tir
from tests.workloads import conv_func

pytestmark = pytest.mark.tvm

TARGET = Target({"kind": "llvm", "num-cores": 1})
WORKLOADS = {
    "gmm": zoo.build("GMM", 1, 32, 32, 32),
    "c2d": zoo.build("C2D", 1, 8, 8, 8, 8, 3, 1, 1),
    # fuse="packed"'s conv with its unpack and a bias + residual + relu epilogue: the default
    # schedule's trace (measured in the first round) moves the epilogue under the tile through
    # the `[c // 16, ..., c % 16]` read
    "packed": IRModule.from_func(conv_func(1, 8, 7, 32, 3, 1, 1, epilogue="bru", packed=True)),
    # fuse="winograd"'s F(4, 3) conv (36 tiles, 16 channels): the default schedule's trace
    # computes data_pack under the product's tile row and the inverse and epilogue after it
    "winograd": IRModule.from_func(conv_func(1, 16, 24, 16, 3, 1, 1, epilogue="bru", winograd=4)),
}


class _CanonicalBindings(IRMutator):
    def visit_BlockRealize(self, node: S.BlockRealize) -> S.Stmt:
        return S.BlockRealize(tuple(simplify(v) for v in node.iter_values), node.predicate, self.visit(node.block))


def canonical(mod: IRModule) -> IRModule:
    return IRModule({name: f.with_body(_CanonicalBindings().visit(f.body)) for name, f in mod.functions.items()})


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_tvm_replays_every_record_msdb_tuned(tmp_path: pathlib.Path, name: str) -> None:
    tvm = pytest.importorskip("tvm")
    from tvm.s_tir.meta_schedule.database import JSONDatabase

    mod = WORKLOADS[name]
    db = open_database(tmp_path / "msdb.sqlite", create=True)
    try:
        strategy = EvolutionarySearch(population_size=16, init_min_unmeasured=8, genetic_num_iters=2)
        model = XGBModel(seed=0, num_warmup_samples=0)  # ranks from the second round: mutants get measured
        result = tune_tir(mod, TARGET, db, 8, 4, strategy=strategy, cost_model=model, seed=7, task_name=name)
        assert result.tasks[0].trials == 8 and result.tasks[0].best is not None
        records = db.get_all_tuning_records()
        assert len(records) == 8
        export_workdir(db, tmp_path / "work_dir", top_k=8)
    finally:
        db.close()

    if name in ("packed", "winograd"):  # the default schedule's record (no sampling) is among them
        moved = "ComputeAt" if name == "winograd" else "ReverseComputeAt"
        assert any("SamplePerfectTile" not in str(r.trace.as_json()) and f"'{moved}'" in str(r.trace.as_json())
                   for r in records if r.is_valid)
    tvm_db = JSONDatabase(work_dir=str(tmp_path / "work_dir"))
    tvm_records = tvm_db.get_all_tuning_records()
    valid = [r for r in records if r.is_valid]
    assert len(tvm_records) == len(valid) >= 1
    ours = {}
    for record in valid:
        sch = Schedule(record.workload.mod)
        record.trace.apply_to_schedule(sch, remove_postproc=False)
        ours[str(record.trace.as_json())] = canonical(sch.mod)
    for tvm_record in tvm_records:
        tvm_sch = tvm.s_tir.Schedule(tvm_record.workload.mod)
        tvm_record.trace.apply_to_schedule(tvm_sch, remove_postproc=False)
        replayed_by_tvm = canonical(from_script(tvm_sch.mod.script()))
        assert any(structural_equal(replayed_by_tvm, mine) for mine in ours.values()), \
            f"{name}: TVM's replay of a msdb-tuned trace differs from msdb's:\n{tvm_sch.mod.script()}"
