"""A database of records for a model without tuning it: one sampled, post-processed design space
per function (TVM's CPU rules, fixed seed), committed with a stand-in run time. What the transfer
tests need from "a model somebody tuned" is a valid record per function whose trace a real
search would produce; measuring them would only cost time."""

from __future__ import annotations

from pathlib import Path

from msdb.database.sql import SQLiteDatabase
from msdb.records import Target, TuningRecord

#: The run time the sampled records carry (not measured; the tests never compare it).
STAND_IN_SECS = 1e-3


def sampled_records_db(model_path: Path, db_path: Path, model_name: str, target: Target, *,
                       contains: str = "conv2d") -> list[str]:
    """Fill `db_path` with the model's tasks (as `model_name`) and one sampled record for every
    function whose name has `contains`; returns the names of those functions."""
    from msdb.model.loader import load
    from msdb.model.tasks import extract_tasks, record_model_tasks
    from msdb.tuner.compile.compiler import as_workload
    from msdb.tuner.context import TuneContext
    from msdb.tuner.search.replay import apply_trace
    from msdb.tuner.space.generators.post_order_apply import PostOrderApply

    model = load(str(model_path))
    db = SQLiteDatabase(db_path)
    names = []
    try:
        record_model_tasks(db, model_name, extract_tasks(model))
        for name, func in model.functions.items():
            if contains not in name:
                continue
            workload = db.commit_workload(as_workload(func))
            generator = PostOrderApply()
            context = TuneContext(mod=workload.mod, target=target, space_generator=generator, rand_state=0)
            space = context.generate_design_space()[0]
            sch = apply_trace(workload.mod, space.trace.simplified(remove_postproc=True), generator.postprocs, 0)
            assert sch is not None, f"{name}: a design space of msdb's own failed its post-processors"
            db.commit_tuning_record(TuningRecord(sch.trace, workload, [STAND_IN_SECS], target))
            names.append(name)
    finally:
        db.close()
    return names
