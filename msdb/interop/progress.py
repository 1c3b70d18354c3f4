"""`ProgressFn`: how msdb's long operations report how far they are.

An import, merge, export or verify calls `progress(phase, done, total)` now and then: `phase`
names the stretch of work ("importing", "replaying", "merging", ...), `done` of `total` items
are finished. The command line draws one progress bar per phase from it
(`msdb.cli.common.ProgressBars`). Defined here, in the lowest package whose operations report
progress (reading TVM work_dirs), so every layer above names the same type.
"""

from __future__ import annotations

from typing import Callable

__all__ = ["ProgressFn"]

#: `progress(phase, done, total)`.
ProgressFn = Callable[[str, int, int], None]
