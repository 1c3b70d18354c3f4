"""Child processes that end with the process that started them, however it ends (SIGKILL
included), and that leave Ctrl-C to their parent.

Parent side: `lifeline_fds()`, `start_process()`, `sigint_blocked()` around a fork. Child side:
`watch_parent()` and `ignore_sigint()` first thing (a forked child also closes its copy of the
write end: `close_write_end`). How (the death signal and the lifeline pipe) and why: see
docs/architecture.md, "Processes, temporary files and interrupts".
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import subprocess
import sys
import threading
from concurrent.futures import Future
from queue import SimpleQueue
from typing import Any, Callable, Iterator

__all__ = ["lifeline_fds", "close_write_end", "watch_parent", "start_process", "sigint_blocked", "ignore_sigint"]

logger = logging.getLogger(__name__)

#: Linux's prctl option that asks for a signal when the parent (thread) ends.
_PR_SET_PDEATHSIG = 1
#: How often a child without a lifeline pipe checks its parent pid.
_POLL_S = 0.5
#: (pid that made it, read end, write end): one pipe per process, never closed by its maker.
_LIFELINE: tuple[int, int, int] | None = None
_LOCK = threading.Lock()


def lifeline_fds() -> tuple[int, int]:
    """(read end, write end) of this process's lifeline pipe, made on first use. Hand the read
    end to a child (`pass_fds`, or inherited by fork); this process keeps the write end open
    until it ends, so a child reading the pipe sees end of file exactly when it is gone. Both
    ends are non-inheritable: an exec'd child gets only what `pass_fds` names."""
    global _LIFELINE
    with _LOCK:
        if _LIFELINE is None or _LIFELINE[0] != os.getpid():  # a forked child makes its own
            read_end, write_end = os.pipe()
            _LIFELINE = (os.getpid(), read_end, write_end)
        return _LIFELINE[1], _LIFELINE[2]


def close_write_end(write_end: int) -> None:
    """In a forked child: close the inherited copy of the parent's write end (otherwise the
    child itself would keep its own lifeline open)."""
    try:
        os.close(write_end)
    except OSError:
        pass


def watch_parent(parent_pid: int, read_end: int | None = None) -> None:
    """In a child: end this process (SIGKILL, or `os._exit`) when process `parent_pid` ends.
    Call it first thing; a parent that already died is noticed here."""
    _set_death_signal()
    if os.getppid() != parent_pid:  # the parent died before the death signal was armed
        os._exit(1)
    target: Callable[[], None]
    if read_end is not None:
        target = lambda: _wait_for_eof(read_end)  # noqa: E731
    else:
        target = lambda: _poll_parent(parent_pid)  # noqa: E731
    threading.Thread(target=target, name="msdb-parent-watch", daemon=True).start()


@contextlib.contextmanager
def sigint_blocked() -> Iterator[None]:
    """SIGINT blocked in this thread for the block: a child forked or started meanwhile starts
    with it blocked; a SIGINT that arrives meanwhile is delivered when the block ends."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def ignore_sigint() -> None:
    """In a child: ignore SIGINT from now on (then take it out of the blocked set inherited
    from `sigint_blocked`)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def _set_death_signal() -> None:
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) != 0:
            logger.debug("prctl(PR_SET_PDEATHSIG) failed: errno %d", ctypes.get_errno())
    except (OSError, AttributeError) as exc:  # no libc symbol: the watch thread still works
        logger.debug("prctl unavailable: %s", exc)


def _wait_for_eof(read_end: int) -> None:
    while True:
        try:
            data = os.read(read_end, 1)
        except InterruptedError:  # pragma: no cover - PEP 475 retries; kept for safety
            continue
        except OSError:
            data = b""
        if not data:
            os._exit(1)


def _poll_parent(parent_pid: int) -> None:
    import time

    while os.getppid() == parent_pid:
        time.sleep(_POLL_S)
    os._exit(1)


class _Starter:
    """A daemon thread that starts processes for other threads, so that a child's death signal
    is tied to a thread that lives as long as the process (see the module docstring)."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.queue: SimpleQueue[tuple[Callable[[], Any], Future[Any]]] = SimpleQueue()
        threading.Thread(target=self._run, name="msdb-process-starter", daemon=True).start()

    def _run(self) -> None:
        if hasattr(signal, "pthread_sigmask"):  # for good: every child of this thread starts with it blocked
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        while True:
            call, future = self.queue.get()
            try:
                future.set_result(call())
            except BaseException as exc:  # handed to the thread that asked
                future.set_exception(exc)


_STARTER: _Starter | None = None


def start_process(args: list[str], **popen_kwargs: Any) -> subprocess.Popen[bytes]:
    """`subprocess.Popen(args, **popen_kwargs)`, from the main thread or a thread that lives as
    long as this process, with SIGINT blocked (see the module docstring); the child still has to
    `watch_parent` and `ignore_sigint`."""
    global _STARTER
    if threading.current_thread() is threading.main_thread():
        with sigint_blocked():
            return subprocess.Popen(args, **popen_kwargs)
    with _LOCK:
        if _STARTER is None or _STARTER.pid != os.getpid():
            _STARTER = _Starter()
        starter = _STARTER
    future: Future[subprocess.Popen[bytes]] = Future()
    starter.queue.put((lambda: subprocess.Popen(args, **popen_kwargs), future))
    return future.result()
