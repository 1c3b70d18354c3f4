"""Random variables: the handles a schedule hands out for blocks, loops and sampled integers.

As in TVM, an RV is an opaque token; what it stands for lives in the schedule's symbol table
(`Schedule.get(rv)`), so a trace can be replayed on another schedule by rebinding its RVs. A
BlockRV stands for a block name (unique in its function), a LoopRV for a loop variable or one
of the two marks of `sample_compute_location`, an ExprRV for an integer.
"""

from __future__ import annotations

from msdb.ir import expr as E

__all__ = ["RV", "BlockRV", "LoopRV", "ExprRV", "ROOT_MARK", "INLINE_MARK", "LoopTarget"]

#: What the LoopRVs of `sample_compute_location`'s non-loop decisions stand for: -1 "compute
#: root" (leave the block where it is) and -2 "inline" (TVM's RootMark and InlineMark).
#: compute_at and reverse_compute_at accept them; a loop is always a `Var`, so the strings
#: never clash with a loop.
ROOT_MARK = "root"
INLINE_MARK = "inline"

#: What a LoopRV stands for: a loop variable, ROOT_MARK or INLINE_MARK.
LoopTarget = E.Var | str


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
