"""Random variables: the handles a schedule hands out for blocks, loops and sampled integers.

As in TVM, an RV is an opaque token; what it stands for lives in the schedule's symbol table
(`Schedule.get(rv)`), so a trace can be replayed on another schedule by rebinding its RVs.
"""

from __future__ import annotations


class RV:
    """Base of every random variable; identity equality."""

    __slots__ = ("__weakref__",)
    prefix = "?"

    def __repr__(self) -> str:
        return f"{type(self).__name__}@{id(self):x}"


class BlockRV(RV):
    """Stands for a block (bound to its name within the schedule's function)."""

    __slots__ = ()
    prefix = "b"


class LoopRV(RV):
    """Stands for a loop (bound to its loop variable)."""

    __slots__ = ()
    prefix = "l"


class ExprRV(RV):
    """Stands for a sampled integer (a tile factor, a categorical choice)."""

    __slots__ = ()
    prefix = "v"
