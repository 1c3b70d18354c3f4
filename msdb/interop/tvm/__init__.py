"""TVM MetaSchedule interop: workload payloads, traces, targets and work_dirs of every TVM
generation (DESIGN.md section 6)."""

from __future__ import annotations

from msdb.interop.tvm.payload import (
    LegacyPayloadError,
    PayloadError,
    UnsupportedNodeError,
    decode_workload,
)

__all__ = ["decode_workload", "PayloadError", "LegacyPayloadError", "UnsupportedNodeError"]
