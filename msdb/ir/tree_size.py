"""How big an IR tree is once shared subtrees are counted every time they are reached: the work
every tree walk of msdb (hashing, printing, FLOP counting, verifying, scheduling) does on it.

msdb IR is a tree, but nothing stops one node object from being a child twice: TVM's object
graph refers to nodes by index, and a pickled blob by memo. Twenty levels of `Add(prev, prev)`
are 40 nodes in a graph and a million in the tree every walk sees; an 18 KB workload payload
expands past 2^300. The hash must stay that of the tree (it is TVM-compatible, and stored
hashes of ordinary workloads must not change), so instead of hashing a DAG differently msdb
refuses IR whose tree is beyond any real workload, where it enters: a decoded TVM payload
(`msdb.interop.tvm.payload`) and a stored IR blob (`msdb.database.rows`). The count itself
visits each distinct node once.
"""

from __future__ import annotations

import dataclasses
import enum
import operator
from collections.abc import Mapping
from typing import Any

from msdb.errors import MsdbError

__all__ = ["MAX_TREE_NODES", "TreeTooLarge", "tree_size", "check_tree_size"]

#: The most nodes an IR tree may have, shared subtrees counted each time: a thousand times the
#: largest workload of msdb's zoo and test logs (about a thousand nodes); walking this many
#: takes about a second.
MAX_TREE_NODES = 1_000_000

_LEAF, _SEQUENCE, _MAPPING = 0, 1, 2
#: What each type is to the count: a leaf, a sequence, a mapping, or (a tuple) the fields of
#: a dataclass node and their getter.
_KINDS: dict[type, Any] = {}


class TreeTooLarge(MsdbError):
    """IR whose tree, shared subtrees counted each time, is beyond any real workload."""


def _kind(cls: type) -> Any:
    kind: Any
    if issubclass(cls, (str, int, float, bytes, enum.Enum)) or cls is type(None):
        kind = _LEAF
    elif issubclass(cls, (list, tuple)):
        kind = _SEQUENCE
    elif issubclass(cls, Mapping):
        kind = _MAPPING
    elif dataclasses.is_dataclass(cls):
        names = [f.name for f in dataclasses.fields(cls)]
        kind = operator.attrgetter(*names) if len(names) > 1 else (
            (lambda node, name=names[0]: (getattr(node, name),)) if names else (lambda node: ()))
    else:
        kind = _LEAF  # numpy arrays and other annotation values: no IR inside
    _KINDS[cls] = kind
    return kind


def _children(node: Any) -> list[Any]:
    """The children of a node that are not leaves."""
    kind = _KINDS.get(type(node))
    if kind is None:
        kind = _kind(type(node))
    if kind is _SEQUENCE:
        values: Any = node
    elif kind is _MAPPING:
        values = (*node.keys(), *node.values())
    elif kind is _LEAF:
        return []
    else:
        values = kind(node)
    kinds = _KINDS
    return [v for v in values if kinds.get(type(v), 1) != _LEAF]


def tree_size(root: Any, limit: int = MAX_TREE_NODES) -> int:
    """The number of nodes of the tree under `root` (IR nodes, and the lists and maps holding
    them; scalars are not counted), each shared subtree counted every time it is reached;
    `limit + 1` as soon as it is known to be more than `limit`. Visits each distinct node once.
    Raises `TreeTooLarge` for a node that contains itself (only a damaged blob can)."""
    sizes: dict[int, int] = {}
    stack: list[tuple[Any, list[Any] | None]] = [(root, None)]
    while stack:
        node, children = stack.pop()
        if children is not None:
            total = 1
            for child in children:
                total += sizes[id(child)]
            if total > limit:
                return limit + 1
            sizes[id(node)] = total
            continue
        key = id(node)
        state = sizes.get(key)
        if state is not None:
            if state < 0:
                raise TreeTooLarge(f"IR holds a {type(node).__name__} that contains itself")
            continue
        sizes[key] = -1  # in progress
        children = _children(node)
        stack.append((node, children))
        for child in children:
            state = sizes.get(id(child))
            if state is None:
                stack.append((child, None))
            elif state < 0:
                raise TreeTooLarge(f"IR holds a {type(child).__name__} that contains itself")
    return sizes[id(root)]


def check_tree_size(root: Any, what: str, limit: int = MAX_TREE_NODES) -> None:
    """Raise `TreeTooLarge` naming `what` when `tree_size(root)` is more than `limit`."""
    if tree_size(root, limit) > limit:
        raise TreeTooLarge(f"{what} expands to more than {limit:,} IR nodes (its nodes are shared so often that "
                           "every walk of the tree would take hours); msdb refuses it")
