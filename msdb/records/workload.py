"""`Workload`: a tensor program as a database stores it, with its three structural hashes.

A database keys workloads by `msdb.hashing.structural_hash` under its view's module equality;
every workload knows all three hashes ("structural", "ignore-tensor", "anchor-block"), so one
stored workload answers a view of any mode (docs/architecture.md, "Records and targets").
Hashes are computed lazily and at most once per workload, and a small cache keyed by module
identity lets repeated queries with the same `IRModule` object skip re-hashing (compile flows
query one module many times).

The module itself can be lazy too: a database row becomes a `Workload` whose IR is decoded only
when `mod` is first read, so a query that only needs hashes never parses TVMScript.

A workload's TVM forms (the workload line `[shash, payload]` of a work_dir, the payload
encoding) are TVM's formats and live in `msdb.interop.tvm.grammar`; a workload keeps what an
imported line said in `tvm_payload` and `tvm_shash`.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Callable

from msdb.errors import MsdbError
from msdb.identity_cache import IdentityCache
from msdb.hashing.modes import MODES, UnknownModuleEquality, canonical_mode
from msdb.ir.function import IRModule, PrimFunc

if TYPE_CHECKING:
    from msdb.hashing.family import FamilyKey

__all__ = ["Workload", "UnknownModuleEquality", "HASH_MODES", "canonical_mode"]

logger = logging.getLogger(__name__)

#: The hash modes every workload carries, in the order databases store them (`msdb.hashing.MODES`).
HASH_MODES: tuple[str, ...] = MODES

#: Recently hashed modules: mode -> hash, filled as modes are asked for.
_HASH_CACHE: IdentityCache[dict[str, str]] = IdentityCache(512)


def _cached_hashes(mod: IRModule) -> dict[str, str]:
    return _HASH_CACHE.get(mod, dict)


class Workload:
    """A workload: an `IRModule` (a lone PrimFunc becomes `{"main": f}`) and its hashes.

    `Workload(mod)` hashes on demand. Databases build stored workloads with `hashes=` (all three,
    as stored) and `loader=` (decodes the IR when `mod` is first read). `name` is a human label
    (task or zoo name); `tvm_payload` / `tvm_shash` keep what an imported TVM log said.
    """

    __slots__ = ("_mod", "_loader", "_hashes", "_family", "name", "tvm_payload", "tvm_shash", "_db_ids", "__weakref__")

    def __init__(self, mod: IRModule | PrimFunc | None = None, *, hashes: dict[str, str] | None = None,
                 loader: Callable[[], IRModule] | None = None, name: str | None = None,
                 tvm_payload: str | None = None, tvm_shash: str | None = None) -> None:
        if mod is None and loader is None:
            raise TypeError("Workload needs a module or a loader")
        self._mod: IRModule | None = IRModule.coerce(mod, "a workload") if mod is not None else None
        self._loader = loader
        if hashes is not None:
            self._hashes = {canonical_mode(m): h for m, h in hashes.items()}
        elif self._mod is not None:
            self._hashes = _cached_hashes(self._mod)
        else:
            self._hashes = {}
        self._family: FamilyKey | None = None
        self.name = name
        self.tvm_payload = tvm_payload
        self.tvm_shash = tvm_shash
        # database key -> row id, so a token handed out by a database resolves without a lookup
        self._db_ids: dict[Any, int] = {}

    @staticmethod
    def coerce(mod: IRModule | PrimFunc | Workload) -> Workload:
        """A `Workload` for `mod` (returned as is when it already is one)."""
        return mod if isinstance(mod, Workload) else Workload(mod)

    @property
    def mod(self) -> IRModule:
        """The module (decoded on first use for stored workloads)."""
        if self._mod is None:
            assert self._loader is not None
            self._mod = IRModule.coerce(self._loader(), "a workload")
            self._loader = None
        return self._mod

    @property
    def is_loaded(self) -> bool:
        return self._mod is not None

    def hash(self, mode: str = "structural") -> str:
        """The 16-hex structural hash under `mode` ("structural", "ignore-tensor"/"ignore-ndarray",
        "anchor-block")."""
        mode = canonical_mode(mode)
        value = self._hashes.get(mode)
        if value is None:
            from msdb.hashing import structural_hash

            value = structural_hash(self.mod, mode)
            self._hashes[mode] = value
        return value

    @property
    def shash(self) -> str:
        """The structural hash (the default key)."""
        return self.hash("structural")

    @property
    def hashes(self) -> dict[str, str]:
        """All three hashes, computing those not known yet."""
        return {mode: self.hash(mode) for mode in HASH_MODES}

    @property
    def family(self) -> FamilyKey:
        """The workload's family key and the sizes it abstracted (`msdb.hashing.family`), computed
        on first use from the module: the key that finds its relatives (the same operator at
        other sizes)."""
        if self._family is None:
            from msdb.hashing.family import family_key

            self._family = family_key(self.mod)
        return self._family

    def equal(self, other: Workload, mode: str = "structural") -> bool:
        """Same workload under `mode`: equal hashes, then a full structural comparison (TVM's
        dedup rule) unless both are the same object."""
        if self is other or (self._mod is not None and self._mod is other._mod):
            return True
        if self.hash(mode) != other.hash(mode):
            return False
        from msdb.hashing import structural_equal

        return structural_equal(self.mod, other.mod, canonical_mode(mode))

    def __repr__(self) -> str:
        known = self._hashes.get("structural", "?")
        name = f" {self.name!r}" if self.name else ""
        return f"<Workload{name} shash={known}>"
