"""Records and targets (docs/architecture.md, "Records and targets"): what a tuning database
stores.

- `Workload`: a module and its three structural hashes (computed once, lazily).
- `TuningRecord(trace, workload, run_secs=None, target=None, args_info=None)`: a measured
  schedule, with TVM's `is_valid` and `mean_run_secs`.
- `ArgInfo`: TVM's `["TENSOR", dtype, shape]`.
- `Target`: TVM's target config in canonical form, and the target match policy that makes
  msdb's queries target-aware (docs/targets.md).
- `msdb.records.ranking`: TVM's rules for run times (failure mark, validity, ranking mean,
  spelling), the one place every layer takes them from.

A record's and a workload's TVM log lines are read and written by `msdb.interop.tvm.grammar`.
"""

from __future__ import annotations

from msdb.records.ranking import FAILED_RUN_SECS
from msdb.records.record import ArgInfo, RecordFormatError, TuningRecord
from msdb.records.target import MatchKey, Target, TargetError
from msdb.records.workload import HASH_MODES, UnknownModuleEquality, Workload

__all__ = [
    "ArgInfo", "FAILED_RUN_SECS", "HASH_MODES", "MatchKey", "RecordFormatError", "Target", "TargetError",
    "TuningRecord", "UnknownModuleEquality", "Workload",
]
