"""TVM MetaSchedule interop (docs/architecture.md, "TVM interop"): TVM's on-disk formats of
every generation (docs/tvm-formats.md section 1), and nothing about SQL.

- `grammar`: the one grammar of workload and record lines, read (`LineParser`) and written
  (`record_line`, `workload_line`); used by `JSONDatabase` and the importer alike.
- `payload`, `encode`: workload payloads (TVM's object graph) decoded into msdb IR and encoded
  from it.
- `trace_check`: a trace's JSON shape, its instruction kinds, and its rewrite to TVM 0.27's
  spelling; `trace_fit`: whether a trace can belong to its workload, without a replay.
- `workdir`: the two files of a work_dir, their lines, bad-line reports, atomic writing.
- `import_reader`: the one reader of whole work_dirs (`read_import`), fast (parallel parsing
  workers), handing rows to a sink as it parses; `replay_check`: `--verify`'s replay pass, a
  stage before the sink; `import_data`: what reading yields.

The package itself loads only the payload decoder and the work_dir names; import the modules
above for the rest.
"""

from __future__ import annotations

from msdb.interop.tvm.payload import (
    LegacyPayloadError,
    PayloadError,
    UnsupportedNodeError,
    decode_workload,
)
from msdb.interop.tvm.workdir import RECORD_FILE, WORKLOAD_FILE, WorkDirError

__all__ = [
    "decode_workload", "PayloadError", "LegacyPayloadError", "UnsupportedNodeError", "RECORD_FILE", "WORKLOAD_FILE",
    "WorkDirError",
]
