"""TVM's own writer turning TVM's records into record lines, for `msdb.tvm` (docs/architecture.md,
"TVM uses msdb").

What TVM commits to msdb arrives as a TVM `TuningRecord` object. Walking its JSON from Python
(TVM's ffi arrays, an item at a time) took 2 ms a record, the larger part of a commit; TVM's
`JSONDatabase` writes the same record as a line in C++ in a tenth of that. So each session keeps
a scratch `JSONDatabase` in a staging folder of the temporary directory (`msdb.staging`: removed
on close, and by the next session when a killed one left it): a commit goes through it, its one
new line is read back (the file is emptied now and then), and msdb's import grammar (`LineParser`) reads the
line as it reads a log's, so the stored trace is the text TVM's writer wrote, byte for byte.
The scratch database keeps the session's records in memory, as TVM's own `JSONDatabase` does
when it is the tuning database (a few kilobytes a trial).
"""

from __future__ import annotations

import logging
import os
import tempfile
import threading
import weakref
from pathlib import Path
from typing import Any

__all__ = ["TVMLineWriter"]

logger = logging.getLogger(__name__)

#: The prefix of the scratch folders in the temporary directory.
SCRATCH_PREFIX = "msdb-tvm-lines-"
#: The scratch record file is emptied once this many bytes were read from it: emptying a file
#: costs more than reading a line (a third of a millisecond on an overlay file system).
_EMPTY_AFTER = 1 << 20


class TVMLineWriter:
    """TVM 0.27's record line for a TVM `TuningRecord` (see the module docstring)."""

    def __init__(self, tvm: Any) -> None:
        from tvm.s_tir.meta_schedule.database import JSONDatabase

        from msdb.staging import StagingDir

        self._tvm = tvm
        self._stage = StagingDir.create(Path(tempfile.gettempdir()), SCRATCH_PREFIX)
        self._finalizer = weakref.finalize(self, self._stage.remove)
        self._database = JSONDatabase(work_dir=str(self._stage.path))
        self._records = self._stage.path / "database_tuning_record.json"
        self._workloads = self._stage.path / "database_workload.json"
        #: the TVM workloads the scratch database holds (TVM objects hash and compare by identity)
        self._known: set[Any] = set()
        #: how far the record file has been read (it is emptied past `_EMPTY_AFTER`)
        self._read = 0
        self._lock = threading.Lock()

    def line(self, record: Any) -> str:
        """The line TVM's `JSONDatabase` writes for `record`, pointing at workload 0 (the
        record's own workload, whatever its index in the scratch database)."""
        with self._lock:
            workload = record.workload
            if workload not in self._known:
                self._database.commit_workload(workload.mod)
                os.truncate(self._workloads, 0)
                self._known.add(workload)
            self._database.commit_tuning_record(record)
            with open(self._records, "rb") as handle:
                handle.seek(self._read)
                data = handle.read()
            self._read += len(data)
            if self._read > _EMPTY_AFTER:
                os.truncate(self._records, 0)
                self._read = 0
        text = data.decode("utf-8").rstrip("\n")
        return "[0" + text[text.index(","):]

    def close(self) -> None:
        """Remove the scratch folder."""
        self._finalizer()
