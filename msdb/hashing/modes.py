"""The structural hash modes (TVM's module equalities, docs/tvm-formats.md section 3) and the one
check of a mode a user gave. Kept apart from the hashing walk so that modules that only name a
mode (records, databases) do not load the walk and the anchor-block search.
"""

from __future__ import annotations

from msdb.errors import MsdbError

__all__ = ["MODES", "UnknownModuleEquality", "canonical_mode"]

#: The modes, in the order databases store their hashes.
MODES: tuple[str, ...] = ("structural", "ignore-tensor", "anchor-block")

_ALIASES = {"ignore-ndarray": "ignore-tensor"}


class UnknownModuleEquality(MsdbError, ValueError):
    """A module equality (structural hash mode) msdb does not know."""


def canonical_mode(mode: str) -> str:
    """The canonical name of `mode` ("ignore-ndarray" -> "ignore-tensor"); `UnknownModuleEquality`
    naming the bad mode and the valid ones otherwise. The one place modes are checked: every
    caller that takes a mode from a user passes it through here."""
    if mode in MODES:
        return mode
    try:
        return _ALIASES[mode]
    except (KeyError, TypeError):
        valid = ", ".join(repr(m) for m in MODES + tuple(_ALIASES))
        raise UnknownModuleEquality(
            f"unknown module equality {mode!r} (a structural hash mode); valid modes are {valid}"
        ) from None
