"""Two `msdb tune` processes on one workload and target into one database (a SQLite file, or a
real PostgreSQL server), measuring locally or on one Dask LocalCluster: together they measure
no candidate twice, and the database holds every measurement (docs/architecture.md, "Team
scale"). Both use the same seed, so each proposes the other's candidates: only the
database's measured records and claims keep them apart."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from msdb import SQLiteDatabase
from msdb.ir import to_script, zoo
from msdb.schedule.schedule import Schedule
from msdb.tuner.search.replay import module_key

TARGET = "llvm -num-cores=1"
TRIALS = 4


def _module_key(record: Any) -> str:
    sch = Schedule(record.workload.mod)
    record.trace.apply_to_schedule(sch, remove_postproc=False)
    return module_key(sch.mod)


@pytest.mark.slow
@pytest.mark.parametrize("on_cluster", [False, True], ids=["local", "cluster"])
def test_two_tuners_measure_no_candidate_twice(shared_url: str, on_cluster: bool, request: pytest.FixtureRequest,
                                               tmp_path: Path) -> None:
    workload = tmp_path / "small_gmm.py"
    workload.write_text(to_script(zoo.build("GMM", 1, 16, 16, 16)))
    command = [sys.executable, "-m", "msdb.cli.main", "tune", shared_url, str(workload), "--target", TARGET,
               "--trials", str(TRIALS), "--per-iter", str(TRIALS), "--strategy", "replay-trace",
               "--cost-model", "random", "--seed", "0"]
    if on_cluster:
        command += ["--cluster", request.getfixturevalue("cluster").scheduler_address]
    else:
        command += ["--workers", "1"]
    tuners = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = [tuner.communicate(timeout=300) for tuner in tuners]
    for tuner, (out, err) in zip(tuners, outputs):
        assert tuner.returncode == 0, out + err
    reported = [int(re.search(r"Total trials: (\d+)", out).group(1)) for out, _ in outputs]  # type: ignore[union-attr]
    skipped = [int(m.group(1)) if (m := re.search(r"(\d+) candidate\(s\) skipped", out)) else 0 for out, _ in outputs]
    db = SQLiteDatabase(shared_url)
    try:
        records = db.get_all_tuning_records()
    finally:
        db.close()
    assert reported == [TRIALS, TRIALS], outputs  # the space has room for both: each measured its budget
    assert len(records) == sum(reported)  # every measurement is in the database
    keys = [_module_key(record) for record in records]
    assert len(set(keys)) == len(keys), f"a candidate was measured twice (skipped claims: {skipped})"
    assert len({record.storage_fields()[1] for record in records}) == len(records)  # no trace twice either
