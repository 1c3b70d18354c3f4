"""A workload's family: a shape-free key, so that "the records of this workload's relatives" is one
indexed query (docs/architecture.md, "Hashing", "Families"; issue 24).

Two workloads are relatives when they compute the same thing at other sizes: a conv2d at 56x56
and at 28x28, batch 1 and batch 8, tuned as a standalone te workload with int32 indices or
extracted from a Relax model with int64 indices. A schedule of one is a good start for the
other once its tile sizes are re-fitted; the structural and anchor-block hashes cannot find it,
since every size is part of them.

The key is the anchor block's stream (`msdb.hashing.anchor`: the loops around the anchor, its
bindings, iter vars, init, body and the declarations of the buffers it touches) written in the
walk's family mode (`msdb.hashing.walk`, module docstring): every integer constant of an index
dtype in an index position (loop extents, iter var domains, buffer shapes, strides and offsets,
the constants of bindings, indices and padding guards) becomes a placeholder, and the index dtype
(int32 / int64) one token. What stays: the data dtypes (of buffers, casts, float and data
constants), the operators and their order, the number, kinds and annotations of the loops, iter
var types, buffer ranks and scopes, and the shape of the index expressions. So the family differs
across operators, layouts (NCHW vs NHWC vs packed: the indices read other axes) and data dtypes
(float32 vs float16 vs int8).

Fallback: a workload without an anchor block (no reduction: elementwise, padding, layout
transforms) is keyed by its whole module walked in family mode (tensor bytes ignored), as the
anchor-block hash falls back to the whole module. Its relatives are then the same function at
other sizes.

The abstracted values (`FamilyKey.extents`) come in walk order, so two relatives have vectors
of the same length whose positions correspond (the i-th value of each is the same loop extent or
shape dimension): a distance between relatives is a comparison of two vectors.

Which anchor a module has can depend on its sizes when several reduction blocks compete (the
one with the most FLOPs wins), so a workload with two reductions of swapped weight at another
size may land in another family; such workloads are rare and only lose relatives.
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
