"""Structural hashing and equality of workloads (docs/architecture.md, "Hashing").

`structural_hash(mod, mode)` is the key every workload is stored and looked up under: a 64-bit blake2b digest of the canonical token stream (`msdb.hashing.walk`), rendered as 16
lowercase hex characters, identical on every machine and process. `structural_equal` compares
the same streams, so it agrees with the hash by construction and is exact.

Modes (TVM's, docs/tvm-formats.md section 3, with msdb's normalization):
- "structural": the whole module, names and naming attributes ignored;
- "ignore-tensor" (old name "ignore-ndarray"): as structural, constant tensors by dtype and shape;
- "anchor-block": only the anchor block in its loop context (`msdb.hashing.anchor`), falling
  back to ignore-tensor on the whole module when there is no reduction block.

Beside the modes, `family_hash(mod)` is a shape-free key (`msdb.hashing.family`): the anchor
block with its sizes and index dtype abstracted, equal across the sizes of one operator.
"""

from __future__ import annotations

from msdb.lazy import lazy_getattr

from typing import TYPE_CHECKING, Any

#: Public name -> (module, attribute), imported on first use: naming a mode
#: (`msdb.hashing.modes`) must not load the walk.
_LAZY: dict[str, tuple[str, str]] = {
    "MODES": ("msdb.hashing.modes", "MODES"),
    "UnknownModuleEquality": ("msdb.hashing.modes", "UnknownModuleEquality"),
    "canonical_mode": ("msdb.hashing.modes", "canonical_mode"),
    "structural_hash": ("msdb.hashing.api", "structural_hash"),
    "structural_equal": ("msdb.hashing.api", "structural_equal"),
    "token_stream": ("msdb.hashing.api", "token_stream"),
    "find_anchor_block": ("msdb.hashing.anchor", "find_anchor_block"),
    "FamilyKey": ("msdb.hashing.family", "FamilyKey"),
    "family_key": ("msdb.hashing.family", "family_key"),
    "family_hash": ("msdb.hashing.family", "family_hash"),
    "family_extents": ("msdb.hashing.family", "family_extents"),
    "structural_equal_expr": ("msdb.ir.arith.keys", "expr_equal"),
}

__all__ = sorted(_LAZY)

if TYPE_CHECKING:
    from msdb.hashing.anchor import find_anchor_block
    from msdb.hashing.api import structural_equal, structural_hash, token_stream
    from msdb.hashing.family import FamilyKey, family_extents, family_hash, family_key
    from msdb.hashing.modes import MODES, UnknownModuleEquality, canonical_mode
    from msdb.ir.arith.keys import expr_equal as structural_equal_expr


__getattr__ = lazy_getattr(__name__, _LAZY, globals())
