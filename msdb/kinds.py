"""Choosing an implementation by name: every concept with kinds (database views, and the
tuner's search strategy, space generator, schedule rules, post-processors, mutators, cost
model, feature extractor, task scheduler) has a `create(kind)` that maps a name to a class
through `load_kind`, as TVM's `create` functions do (docs/architecture.md, "Tuner").

The classes are imported only when asked for, so naming a kind does not load every
implementation (the cost model would load xgboost)."""

from __future__ import annotations

import importlib
from typing import Any, Mapping

from msdb.errors import MsdbError

__all__ = ["UnknownKind", "load_kind"]


class UnknownKind(MsdbError, ValueError):
    """A `create(kind)` was given a name msdb does not have."""


def load_kind(kinds: Mapping[str, tuple[str, str]], kind: str, what: str, *, error: type[UnknownKind] = UnknownKind,
              alternative: str = "") -> Any:
    """The class registered as `kind` in `kinds` (name -> (module, attribute)); an unknown
    name is one `error` naming it and the known names (and `alternative`, what else a caller
    may pass)."""
    try:
        module_name, attr = kinds[kind]
    except (KeyError, TypeError):
        also = f" ({alternative})" if alternative else ""
        raise error(f"unknown {what} {kind!r}; known: {', '.join(kinds)}{also}") from None
    return getattr(importlib.import_module(module_name), attr)
