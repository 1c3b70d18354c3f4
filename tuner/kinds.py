"""Choosing an implementation by name (docs/architecture.md, "Tuner"): every tuner concept
(search strategy, space generator, schedule rule, post-processor, mutator, cost model, feature
extractor) has a `create(kind)` that maps a name to a class, as TVM's `create` functions do.

The classes are imported only when asked for, so naming a kind does not load every
implementation (the cost model would load xgboost)."""

from __future__ import annotations

import importlib
from typing import Any, Mapping

from msdb.errors import MsdbError

__all__ = ["UnknownKind", "load_kind"]


class UnknownKind(MsdbError, ValueError):
    """A `create(kind)` was given a name msdb does not have."""


def load_kind(kinds: Mapping[str, tuple[str, str]], kind: str, what: str) -> Any:
    """The class registered as `kind` in `kinds` (name -> (module, attribute)); an unknown
    name is one error naming it and the known names."""
    try:
        module_name, attr = kinds[kind]
    except (KeyError, TypeError):
        raise UnknownKind(f"unknown {what} {kind!r}; known: {', '.join(kinds)}") from None
    return getattr(importlib.import_module(module_name), attr)
