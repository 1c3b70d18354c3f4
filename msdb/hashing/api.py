"""The public hash and equality functions over the canonical token streams."""

from __future__ import annotations

import hashlib

from msdb.ir.function import IRModule, PrimFunc
from msdb.hashing.anchor import anchor_tokens
from msdb.hashing.modes import MODES, UnknownModuleEquality, canonical_mode
from msdb.hashing.walk import module_tokens

__all__ = ["MODES", "UnknownModuleEquality", "canonical_mode", "token_stream", "structural_hash", "structural_equal"]

# Joins tokens into the bytes that are hashed. Tokens never need escaping: strings inside them
# are length-prefixed, so the joined text decodes back to the token list.
_SEPARATOR = "\x1f"


def token_stream(mod: IRModule | PrimFunc, mode: str = "structural") -> list[str]:
    """The canonical token stream of `mod` under `mode` (what is hashed and compared); useful to
    see why two workloads differ."""
    mode = canonical_mode(mode)
    if mode == "anchor-block":
        tokens = anchor_tokens(mod)
        if tokens is not None:
            return tokens
        return module_tokens(mod, ignore_tensor=True)
    return module_tokens(mod, ignore_tensor=mode == "ignore-tensor")


def structural_hash(mod: IRModule | PrimFunc, mode: str = "structural") -> str:
    """A 64-bit structural hash of `mod` as 16 lowercase hex characters, stable across
    processes, machines and PYTHONHASHSEED."""
    data = _SEPARATOR.join(token_stream(mod, mode)).encode("utf-8", "surrogatepass")
    return hashlib.blake2b(data, digest_size=8).hexdigest()


def structural_equal(a: IRModule | PrimFunc, b: IRModule | PrimFunc, mode: str = "structural") -> bool:
    """True when `a` and `b` are the same workload under `mode` (exact; equal modules always
    have equal `structural_hash`)."""
    mode = canonical_mode(mode)
    if a is b:
        return True
    return token_stream(a, mode) == token_stream(b, mode)
