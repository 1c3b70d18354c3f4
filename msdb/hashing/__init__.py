"""Structural hashing and equality of workloads (docs/architecture.md, "Hashing").

`structural_hash(mod, mode)` is the key every workload is stored and looked up under: a 64-bit blake2b digest of the canonical token stream (`msdb.hashing.walk`), rendered as 16
lowercase hex characters, identical on every machine and process. `structural_equal` compares
the same streams, so it agrees with the hash by construction and is exact.

Modes (TVM's, docs/tvm-formats.md section 3, with msdb's normalization):
- "structural": the whole module, names and naming attributes ignored;
- "ignore-tensor" (old name "ignore-ndarray"): as structural, constant tensors by dtype and shape;
- "anchor-block": only the anchor block in its loop context (`msdb.hashing.anchor`), falling
  back to ignore-tensor on the whole module when there is no reduction block.
"""

from __future__ import annotations

from msdb.hashing.api import (
    MODES, UnknownModuleEquality, canonical_mode, structural_equal, structural_hash, token_stream,
)
from msdb.hashing.anchor import find_anchor_block
from msdb.ir.arith.keys import expr_equal as structural_equal_expr

__all__ = [
    "MODES",
    "UnknownModuleEquality",
    "canonical_mode",
    "find_anchor_block",
    "structural_equal",
    "structural_equal_expr",
    "structural_hash",
    "token_stream",
]
