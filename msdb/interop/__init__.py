"""Interoperability with other tuning systems' files (TVM MetaSchedule today, `msdb.interop.tvm`).

Knows file formats and nothing about SQL: `msdb.database` imports this package, never the other
way round (docs/architecture.md, "Which way imports point").
"""

from __future__ import annotations

from msdb.interop.progress import ProgressFn

__all__ = ["ProgressFn"]
