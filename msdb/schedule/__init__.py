"""Schedules and traces (DESIGN.md section 3): TVM's primitives over msdb's IR, recorded as
instructions with sampling decisions, serialized in TVM's trace JSON and printed as Python."""

from __future__ import annotations

from msdb.errors import ScheduleError
from msdb.schedule.instruction import Instruction
from msdb.schedule.rv import BlockRV, ExprRV, LoopRV
from msdb.schedule.schedule import Schedule
from msdb.schedule.trace import Trace

__all__ = ["Schedule", "Trace", "Instruction", "ScheduleError", "BlockRV", "LoopRV", "ExprRV"]
