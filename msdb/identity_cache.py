"""What was worked out for an object, remembered by the object's identity (`IdentityCache`) or
by a hashable key of its shape (`KeyCache`).

IR nodes and modules are immutable (docs/architecture.md, "Workload IR"), so whatever is computed
from one stays true for as long as the object lives, and a search's candidates share every node a
primitive did not rebuild. The one cache of this kind in msdb: a module's hashes, the interpreter's
compiled functions, the features of a scheduled module and of the stores and loads in it.

An entry holds its object, so that the object's `id` cannot be reused by another while the entry
lives; `extra` tells apart values computed from the same object in different ways. The least
recently used entry goes when the cache is full.

A `KeyCache` remembers what depends only on a structure that recurs across objects (an index's
or a binding's `shape_key`: a design space's candidates repeat their loop names and tile sizes).
Lookups are on the search's hot path, so it keeps no recency order: when full it starts over.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Callable, Generic, Hashable, TypeVar

__all__ = ["IdentityCache", "KeyCache"]

V = TypeVar("V")


class IdentityCache(Generic[V]):
    """At most `size` values, each for an object (by identity) and an `extra` key."""

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"an identity cache holds at least one entry, not {size}")
        self.size = size
        self._entries: OrderedDict[tuple[int, Hashable], tuple[object, V]] = OrderedDict()

    def get(self, obj: object, make: Callable[[], V], extra: Hashable = None) -> V:
        """The value for `obj` (and `extra`), made by `make()` the first time."""
        key = (id(obj), extra)
        hit = self._entries.get(key)
        if hit is not None and hit[0] is obj:
            self._entries.move_to_end(key)
            return hit[1]
        value = make()
        self._entries[key] = (obj, value)
        self._entries.move_to_end(key)
        if len(self._entries) > self.size:
            self._entries.popitem(last=False)
        return value

    def clear(self) -> None:
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)


_ABSENT = object()


class KeyCache(Generic[V]):
    """At most `size` values by hashable key; emptied when full. A value may be None."""

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"a key cache holds at least one entry, not {size}")
        self.size = size
        self._entries: dict[Hashable, V] = {}

    def get(self, key: Hashable, make: Callable[[], V]) -> V:
        """The value for `key`, made by `make()` the first time."""
        value = self._entries.get(key, _ABSENT)
        if value is _ABSENT:
            if len(self._entries) >= self.size:
                self._entries.clear()
            value = self._entries[key] = make()
        return value  # type: ignore[return-value]

    def clear(self) -> None:
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)
