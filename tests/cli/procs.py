"""Shared by the tests of killed and interrupted imports: real `msdb import` runs in subprocesses,
big logs for them, and the processes they start, found and watched through /proc (polling with
deadlines, never sleeping as synchronization)."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import time
from typing import Callable, TypeVar

import pytest

from tests.cli.helpers import RECORD_FILE, TEAMS, WORKLOAD_FILE

T = TypeVar("T")

#: `msdb ARGS...` with two parsing workers however few cores this test may use (the import
#: itself is the real one; only the worker count is fixed, so that there are workers to watch).
_MSDB_TWO_WORKERS = """
import sys
from msdb.interop.tvm import import_reader
count = import_reader._worker_count
import_reader._worker_count = lambda requested, n_lines: count(2, n_lines)
from msdb.cli.main import cli
cli(sys.argv[1:], prog_name="msdb")
"""


def msdb(*args: object, new_session: bool = False, **popen: object) -> subprocess.Popen[str]:
    """`msdb ARGS...` started in a subprocess (in its own process group with `new_session`, as
    a terminal's foreground job: a Ctrl-C then goes to the group)."""
    return subprocess.Popen([sys.executable, "-c", _MSDB_TWO_WORKERS, *map(str, args)], text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=new_session,
                            **popen)  # type: ignore[call-overload]


def _templates(team: str) -> list[tuple[str, str, list[float]]]:
    """(line up to the trace, line after run_secs, run_secs) of each record line of a team."""
    decoder = json.JSONDecoder()
    templates = []
    for line in (TEAMS[team] / RECORD_FILE).read_text().splitlines():
        if not line.strip():
            continue
        _, end = decoder.raw_decode(line, line.index(",") + 2)  # the trace
        run_secs, end2 = decoder.raw_decode(line, end + 1)
        templates.append((line[:end] + ",", line[end2:], run_secs))
    return templates


def distinct_records(n_records: int, team: str = "team_a") -> int:
    """How many different records `synthesize(..., n_records, team)` writes: a failed run's
    run_secs ([1e10]) is not varied, so its copies are one record."""
    templates = _templates(team)
    copies = [len(range(i, n_records, len(templates))) for i in range(len(templates))]
    return sum(1 if all(x >= 1e10 for x in t[2]) and c else c for t, c in zip(templates, copies))


def synthesize(out: pathlib.Path, n_records: int, team: str = "team_a") -> pathlib.Path:
    """A work_dir of `n_records` record lines: the team's lines repeated, each copy with its own
    run_secs (so that none is a duplicate but the failed runs')."""
    src = TEAMS[team]
    templates = _templates(team)
    out.mkdir(parents=True)
    (out / WORKLOAD_FILE).write_bytes((src / WORKLOAD_FILE).read_bytes())
    with open(out / RECORD_FILE, "w") as handle:
        for i in range(n_records):
            head, tail, run_secs = templates[i % len(templates)]
            scale = 1.0 + i * 1e-7
            handle.write(head + "[" + ",".join("%.20g" % (x if x >= 1e10 else x * scale) for x in run_secs) + "]"
                         + tail + "\n")
    return out


def wait_for(condition: Callable[[], T], what: str, timeout: float = 60.0) -> T:
    """Poll `condition` until it is truthy; fail naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(0.005)


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state first), or None."""
    try:
        text = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2:].split()


def children(pid: int) -> list[tuple[int, str]]:
    """The live child processes of `pid`, as (pid, start time) so that a reused pid is not
    mistaken for them."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat(int(entry))
            if fields is not None and fields[1] == str(pid) and fields[0] != "Z":
                found.append((int(entry), fields[19]))
    return found


def alive(process: tuple[int, str]) -> bool:
    """Whether the process still runs (a zombie has ended: it only waits to be reaped)."""
    fields = _stat(process[0])
    return fields is not None and fields[19] == process[1] and fields[0] != "Z"


def state(pid: int) -> str:
    fields = _stat(pid)
    return "gone" if fields is None else fields[0]


def survivors(processes: list[tuple[int, str]]) -> list[int]:
    return [p[0] for p in processes if alive(p)]


def kill_all(processes: list[tuple[int, str]]) -> None:
    """Clean up after a failed test: end the processes it found (by pid, only those)."""
    for process in processes:
        if alive(process):
            try:
                os.kill(process[0], 9)
            except OSError:
                pass
