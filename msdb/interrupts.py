"""Ctrl-C held over a commit, so that a commit and the note of what it committed cannot be split.

A SIGINT raises `KeyboardInterrupt` between any two bytecodes; arriving just after a database
commit and before the caller counts it, it would leave the database holding a row the caller
says it never wrote. `SigintHold.hold()` replaces Python's own Ctrl-C handler with one that only
notes the signal; `release()` puts the handler back, and the caller raises what fits once its
books agree with the database (docs/architecture.md, "Processes, temporary files and
interrupts"). Signal handlers exist in the main thread only; elsewhere holding does nothing (no
SIGINT handler runs there either).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Any, Iterator

__all__ = ["SigintHold", "interrupts_held", "in_main_thread"]


def in_main_thread() -> bool:
    """Whether this thread is the one Python runs signal handlers in."""
    return threading.current_thread() is threading.main_thread()


class SigintHold:
    """Notes SIGINT instead of raising it while held; `pending` says whether one came."""

    def __init__(self) -> None:
        self.pending = False
        self._previous: Any = None
        self._held = False

    def hold(self) -> None:
        # only Python's own Ctrl-C handler is replaced: an ignored SIGINT stays ignored, and
        # someone else's handler stays theirs
        if self._held or not in_main_thread() or signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
            return
        self._previous = signal.signal(signal.SIGINT, self._note)
        self._held = True

    def _note(self, _signum: int, _frame: Any) -> None:
        self.pending = True

    def release(self) -> None:
        if self._held:
            signal.signal(signal.SIGINT, self._previous)
            self._held = False


@contextlib.contextmanager
def interrupts_held() -> Iterator[None]:
    """Run the block with Ctrl-C held; one that came meanwhile is raised as `KeyboardInterrupt`
    when the block has finished (an exception of the block's own goes first)."""
    hold = SigintHold()
    hold.hold()
    try:
        yield
    finally:
        hold.release()
    if hold.pending:
        raise KeyboardInterrupt
