"""Records and targets (DESIGN.md section 4): what a tuning database stores.

- `Workload`: a module and its three structural hashes (computed once, lazily).
- `TuningRecord(trace, workload, run_secs=None, target=None, args_info=None)`: a measured
  schedule, with TVM's `is_valid` and `mean_run_secs` and TVM's JSON form.
- `ArgInfo`: TVM's `["TENSOR", dtype, shape]`.
- `Target`: TVM's target config in canonical form, and the target match policy that makes
  msdb's queries target-aware (documented in `msdb.records.target` and docs/targets.md).
"""

from __future__ import annotations

from msdb.records.record import FAILED_RUN_SECS, ArgInfo, RecordFormatError, TuningRecord
from msdb.records.target import MatchKey, Target, TargetError
from msdb.records.workload import (
    HASH_MODES, UnknownModuleEquality, Workload, WorkloadPayloadError, decode_workload_payload,
    encode_workload_payload,
)

__all__ = [
    "ArgInfo", "FAILED_RUN_SECS", "HASH_MODES", "MatchKey", "RecordFormatError", "Target", "TargetError",
    "TuningRecord", "UnknownModuleEquality", "Workload", "WorkloadPayloadError", "decode_workload_payload", "encode_workload_payload",
]
