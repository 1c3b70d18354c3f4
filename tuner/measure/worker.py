"""Isolated worker processes for building and measuring candidates: a kernel that segfaults or
never returns costs one worker, never the tuner.

Each `Worker` is a fresh interpreter (`python -m msdb.tuner.measure.worker`) talking over two
pipes with pickled messages:

    parent -> child: (function "module:name", args)   child -> parent: ("ok", value) | ("err", text)

See docs/architecture.md, "Measurement".
"""

from __future__ import annotations

import importlib
import logging
import os
import signal
import subprocess
import sys
import time
import traceback
from multiprocessing.connection import Connection
from typing import Any, Sequence

from msdb.lifeline import ignore_sigint, lifeline_fds, start_process, watch_parent

__all__ = ["Worker", "WorkerTimeout", "WorkerCrashed", "WorkerFailed", "WorkerError"]

logger = logging.getLogger(__name__)

#: How long a fresh worker may take to import its modules and report ready.
STARTUP_TIMEOUT = 120.0


class WorkerError(Exception):
    """A call in a worker did not produce a value."""


class WorkerTimeout(WorkerError):
    """The call ran past its timeout; the worker was killed."""


class WorkerCrashed(WorkerError):
    """The worker process died during the call (e.g. a segfault in a kernel)."""


class WorkerFailed(WorkerError):
    """The called function raised; the worker is still usable. The message is its traceback."""


def _signal_name(code: int | None) -> str:
    if code is None:
        return "unknown status"
    if code < 0:
        try:
            return signal.Signals(-code).name
        except ValueError:
            return f"signal {-code}"
    return f"exit status {code}"


class Worker:
    """One child interpreter; `call` runs a function in it (see the module docstring)."""

    def __init__(self, preload: Sequence[str] = (), env: dict[str, str] | None = None, name: str = "worker") -> None:
        self.preload = tuple(preload)
        self.env = dict(env or {})
        self.name = name
        self._proc: subprocess.Popen | None = None
        self._send: Connection | None = None
        self._recv: Connection | None = None
        self._ready = False
        self.restarts = 0
        self.start()

    # ---- lifecycle ----
    def start(self) -> None:
        """Start the process (returns at once; readiness is awaited by the first call)."""
        to_child_r, to_child_w = os.pipe()
        to_parent_r, to_parent_w = os.pipe()
        lifeline, _ = lifeline_fds()
        env = dict(os.environ)
        env.update(self.env)
        # the child must import exactly the msdb this process runs, wherever it came from
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        cmd = [sys.executable, "-m", "msdb.tuner.measure.worker", str(to_child_r), str(to_parent_w), str(os.getpid()),
               str(lifeline), *self.preload]
        try:
            self._proc = start_process(cmd, pass_fds=(to_child_r, to_parent_w, lifeline), env=env,
                                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        finally:
            os.close(to_child_r)
            os.close(to_parent_w)
        self._send = Connection(to_child_w, readable=False)
        self._recv = Connection(to_parent_r, writable=False)
        self._ready = False

    def _wait_ready(self) -> None:
        if self._ready:
            return
        assert self._recv is not None
        if not self._recv.poll(STARTUP_TIMEOUT):
            self.kill()
            raise WorkerError(f"{self.name}: worker did not start within {STARTUP_TIMEOUT:.0f}s")
        try:
            msg = self._recv.recv()
        except EOFError:
            code = self._reap()
            raise WorkerError(f"{self.name}: worker died while starting ({_signal_name(code)})") from None
        if msg[0] != "ready":
            self.kill()
            raise WorkerError(f"{self.name}: worker failed to start: {msg[1]}")
        self._ready = True

    def _reap(self) -> int | None:
        proc = self._proc
        if proc is None:
            return None
        try:
            return proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            return proc.wait()

    def kill(self) -> None:
        """Kill the process (if alive) and release the pipes."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.kill()
        self._reap()
        for conn in (self._send, self._recv):
            if conn is not None:
                try:
                    conn.close()
                except OSError:
                    pass
        self._proc = self._send = self._recv = None
        self._ready = False

    def restart(self) -> None:
        self.kill()
        self.restarts += 1
        self.start()

    def close(self) -> None:
        """Ask the worker to exit, then make sure it did."""
        if self._send is not None and self._proc is not None and self._proc.poll() is None:
            try:
                self._send.send(None)
                self._proc.wait(timeout=2)
            except (OSError, subprocess.TimeoutExpired, BrokenPipeError):
                pass
        self.kill()

    def __del__(self) -> None:  # pragma: no cover - interpreter shutdown order varies
        try:
            self.kill()
        except Exception:
            pass

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    # ---- calls ----
    def call(self, func: str, args: tuple, timeout: float) -> Any:
        """Run `func` ("module:function") with `args` in the worker; raises `WorkerTimeout`,
        `WorkerCrashed` (the worker is replaced) or `WorkerFailed` (it raised)."""
        if self._proc is None:
            self.start()
        self._wait_ready()
        assert self._send is not None and self._recv is not None
        try:
            self._send.send((func, args))
        except (BrokenPipeError, OSError):
            code = self._reap()
            self.restart()
            raise WorkerCrashed(f"worker was dead before the call ({_signal_name(code)})") from None
        started = time.monotonic()
        if not self._recv.poll(timeout):
            self.restart()
            raise WorkerTimeout(f"timeout after {timeout:g}s (worker killed)")
        try:
            status, value = self._recv.recv()
        except (EOFError, OSError):
            code = self._reap()
            elapsed = time.monotonic() - started
            self.restart()
            raise WorkerCrashed(f"worker crashed ({_signal_name(code)}) after {elapsed:.2f}s") from None
        if status == "ok":
            return value
        raise WorkerFailed(value)


# =============================================================================================
# Child side
# =============================================================================================


def _resolve(path: str) -> Any:
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)


def _child_main(argv: list[str]) -> int:
    """argv: the fd to read calls from, the fd to answer on, the parent's pid, the parent's
    lifeline fd, then the "module:function"s to run before reporting ready."""
    ignore_sigint()
    watch_parent(int(argv[2]), int(argv[3]))
    recv = Connection(int(argv[0]), writable=False)
    send = Connection(int(argv[1]), readable=False)
    try:
        for name in argv[4:]:
            _resolve(name)()
    except BaseException as err:  # report and exit: the parent sees why it never became ready
        send.send(("err", f"{type(err).__name__}: {err}"))
        return 1
    send.send(("ready", None))
    while True:
        try:
            msg = recv.recv()
        except EOFError:
            return 0
        if msg is None:
            return 0
        func, args = msg
        try:
            result = _resolve(func)(*args)
        except BaseException as err:  # any failure of the job is data for the parent
            send.send(("err", f"{type(err).__name__}: {err}\n{traceback.format_exc(limit=8)}"))
            continue
        send.send(("ok", result))


if __name__ == "__main__":
    sys.exit(_child_main(sys.argv[1:]))
