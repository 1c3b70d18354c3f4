"""Schedules and traces (docs/architecture.md, "Schedules and traces"): TVM's primitives over
msdb's IR as functions over the schedule state, `Schedule` the facade that records them as
instructions with sampling decisions, and `Trace`, serialized in TVM's trace JSON
(docs/tvm-formats.md, section 1) and printed as Python."""

from __future__ import annotations

from msdb.errors import ScheduleError
from msdb.schedule.instruction import Instruction
from msdb.schedule.rv import BlockRV, ExprRV, LoopRV
from msdb.schedule.schedule import Schedule
from msdb.schedule.trace import Trace

__all__ = ["Schedule", "Trace", "Instruction", "ScheduleError", "BlockRV", "LoopRV", "ExprRV"]
