"""A workload's family: a shape-free key, so that "the records of this workload's relatives" is one
indexed query.

Relatives compute the same thing at other sizes (a conv2d at 56x56 and 28x28, batch 1 and 8,
int32 or int64 indices). The key is the anchor block's stream (`msdb.hashing.anchor`) written in
the walk's family mode, or the whole module's when there is no anchor; `FamilyKey.extents` are the
abstracted values in walk order, aligned between relatives. What is abstracted and what is kept:
see docs/architecture.md, "Families".
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from msdb.hashing.anchor import locate_anchor
from msdb.hashing.walk import TokenWriter, write_block_realize, write_loop_header, write_module
from msdb.ir.function import IRModule, PrimFunc

__all__ = ["FamilyKey", "family_key", "family_hash", "family_extents", "family_tokens"]

# Joins tokens into the hashed bytes, as `msdb.hashing.api` does.
_SEPARATOR = "\x1f"


@dataclass(frozen=True)
class FamilyKey:
    """A workload's family hash (16 hex digits) and the integers its key abstracted, in walk order."""

    hash: str
    extents: tuple[int, ...]


def _family_writer(mod: IRModule | PrimFunc) -> TokenWriter:
    """The family-mode stream of `mod`: its anchor in its loop context, else the whole module."""
    w = TokenWriter(ignore_tensor=True, family=True)
    site = locate_anchor(mod)
    if site is None:
        w.out.append("Family-module")
        return write_module(w, mod)
    w.out.append("Family-anchor%d" % len(site.loops))
    for loop in site.loops:
        write_loop_header(w, loop)
    write_block_realize(w, site.realize)
    return w


def family_tokens(mod: IRModule | PrimFunc) -> list[str]:
    """The token stream the family hash is computed from (to see why two workloads are not relatives)."""
    return _family_writer(mod).out


def family_key(mod: IRModule | PrimFunc) -> FamilyKey:
    """The family hash and abstracted extents of `mod`, from one walk (module docstring)."""
    w = _family_writer(mod)
    data = _SEPARATOR.join(w.out).encode("utf-8", "surrogatepass")
    return FamilyKey(hashlib.blake2b(data, digest_size=8).hexdigest(), tuple(w.extents))


def family_hash(mod: IRModule | PrimFunc) -> str:
    """The 16-hex family key of `mod`: equal for the same operator at other sizes and index
    dtypes, different across operators, layouts and data dtypes (module docstring)."""
    return family_key(mod).hash


def family_extents(mod: IRModule | PrimFunc) -> tuple[int, ...]:
    """The integers the family key of `mod` abstracted (loop extents, shapes, index constants), in
    walk order: aligned position by position with those of every relative."""
    return family_key(mod).extents
