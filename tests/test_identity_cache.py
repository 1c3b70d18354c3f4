"""msdb.identity_cache: values by an object's identity, the one cache of its kind."""

from __future__ import annotations

import pytest

from msdb.identity_cache import IdentityCache


class _Node:
    def __init__(self, name: str) -> None:
        self.name = name

    def __eq__(self, other: object) -> bool:  # equal objects are still different entries
        return isinstance(other, _Node) and other.name == self.name

    __hash__ = object.__hash__


def test_values_are_made_once_per_object_and_extra() -> None:
    cache: IdentityCache[str] = IdentityCache(8)
    made: list[str] = []

    def make(node: _Node, how: str) -> str:
        made.append(f"{node.name}/{how}")
        return made[-1]

    a, twin = _Node("a"), _Node("a")
    assert cache.get(a, lambda: make(a, "x"), extra="x") == "a/x"
    assert cache.get(a, lambda: make(a, "x"), extra="x") == "a/x"
    assert cache.get(a, lambda: make(a, "y"), extra="y") == "a/y"
    assert cache.get(twin, lambda: make(twin, "x"), extra="x") == "a/x"  # made again: another object
    assert made == ["a/x", "a/y", "a/x"] and len(cache) == 3


def test_the_least_recently_used_entry_goes_and_a_failure_stores_nothing() -> None:
    cache: IdentityCache[int] = IdentityCache(2)
    nodes = [_Node(str(i)) for i in range(3)]
    cache.get(nodes[0], lambda: 0)
    cache.get(nodes[1], lambda: 1)
    assert cache.get(nodes[0], lambda: -1) == 0  # 0 is now the most recent
    cache.get(nodes[2], lambda: 2)  # evicts 1
    assert cache.get(nodes[1], lambda: 11) == 11 and cache.get(nodes[2], lambda: -1) == 2
    with pytest.raises(ZeroDivisionError):
        cache.get(_Node("bad"), lambda: 1 // 0)
    assert len(cache) == 2
    cache.clear()
    assert len(cache) == 0
    with pytest.raises(ValueError, match="at least one entry"):
        IdentityCache(0)


def test_a_key_cache_makes_each_value_once_remembers_none_and_starts_over_when_full() -> None:
    from msdb.identity_cache import KeyCache

    made: list[object] = []

    def make(value: object):  # type: ignore[no-untyped-def]
        return lambda: made.append(value) or value

    cache: KeyCache[object] = KeyCache(2)
    assert cache.get(("a", 1), make("x")) == "x" and cache.get(("a", 1), make("y")) == "x"
    assert cache.get("none", make(None)) is None and cache.get("none", make("z")) is None  # None is a value
    assert made == ["x", None] and len(cache) == 2
    assert cache.get("third", make(3)) == 3 and len(cache) == 1  # full: emptied, then the new entry
    assert cache.get(("a", 1), make("again")) == "again"
    cache.clear()
    assert len(cache) == 0


def test_a_key_cache_holds_at_least_one_entry() -> None:
    import pytest

    from msdb.identity_cache import KeyCache

    with pytest.raises(ValueError, match="holds at least one entry, not 0"):
        KeyCache(0)
