"""TVM's rules for a record's run times, in one place: every layer that judges or stores a record
takes them from here.

- A failed build or run is logged as `FAILED_RUN_SECS` (1e10); a run time is a failure when it is
  not below that mark (`is_failure`).
- A record is valid when some run time is below the mark (`ran`) and its trace has an instruction
  before `EnterPostproc` (`sketch_is_valid`); records rank by the mean of all their run times,
  failures included (`mean_run_secs`).
- `run_secs_text` spells run times as TVM's `%.20g`, so the dedup key compares the same text.

See docs/tvm-formats.md sections 1 and 2, and docs/architecture.md, "Records and targets".
"""

from __future__ import annotations

import math
import re
from typing import Any, Sequence

__all__ = ["FAILED_RUN_SECS", "is_failure", "ran", "mean_run_secs", "sketch_is_valid", "trace_text_sketch_is_valid",
           "is_valid", "run_secs_text"]

#: TVM's run time of a failed build or run.
FAILED_RUN_SECS = 1e10


def is_failure(secs: float) -> bool:
    """Whether one run time (or a mean of them) marks a failure: not below `FAILED_RUN_SECS`
    (NaN included). Every judge of a single time uses this: the tuner's task schedulers, the hub."""
    return not secs < FAILED_RUN_SECS


def ran(run_secs: Sequence[float] | None) -> bool:
    """Whether some run time is not a failure (`is_failure`); None and [] never ran."""
    if run_secs:
        for value in run_secs:  # `is_failure` inlined, in a loop: this runs on every line of an import
            if value < FAILED_RUN_SECS:
                return True
    return False


def mean_run_secs(run_secs: Sequence[float] | None) -> float | None:
    """TVM's ranking key: the mean of all run times, failures included; None without any."""
    if not run_secs:
        return None
    return math.fsum(run_secs) / len(run_secs)


def sketch_is_valid(insts: Any) -> bool:
    """Whether a trace's instruction list (TVM's JSON) has an instruction before
    `EnterPostproc`, i.e. whether its first instruction is some other kind."""
    return (type(insts) is list and bool(insts) and type(insts[0]) is list and bool(insts[0])
            and insts[0][0] != "EnterPostproc")


_FIRST_KIND = re.compile(r'\s*\[\s*\[\s*(?:(\])|\[\s*"([A-Za-z_][A-Za-z0-9_]*)")')


def trace_text_sketch_is_valid(text: str) -> bool | None:
    """`sketch_is_valid` read off a trace's JSON text from its first few bytes, without parsing
    the trace; None when the text does not start the usual way (then parse it). Text without
    whitespace (what TVM and msdb write) is read with plain string operations."""
    if text.startswith('[[["'):
        end = text.find('"', 4)
        kind = text[4:end]
        if end > 4 and kind.isascii() and kind.isidentifier():
            return kind != "EnterPostproc"
    match = _FIRST_KIND.match(text)
    if match is None:
        return None
    if match.group(1) is not None:
        return False  # no instructions at all
    return match.group(2) != "EnterPostproc"


def is_valid(run_secs: Sequence[float] | None, insts: Any) -> bool:
    """TVM's validity of a record with these run times and trace instructions (JSON)."""
    return ran(run_secs) and sketch_is_valid(insts)


def run_secs_text(run_secs: Sequence[float] | None) -> str | None:
    """A run-time list as TVM writes it (None stays None): `%.20g` per value, except a
    `msdb.schedule.tvm_json.JsonFloat`, which keeps the spelling it was read with, and
    non-finite values, which get JSON's names (TVM never logs them)."""
    if run_secs is None:
        return None
    if len(run_secs) == 1:  # the common case, on every line of an import
        value = run_secs[0]
        if type(value) is float:
            spelled = "%.20g" % value
            if spelled[-1] <= "9":  # not inf or nan
                return "[" + spelled + "]"
    from msdb.schedule.tvm_json import format_float

    return "[" + ",".join(map(format_float, run_secs)) + "]"
