"""Package names loaded on first use (PEP 562; docs/architecture.md, "Which way imports point"):
`import msdb` and its packages stay cheap, and a name's module (SQLAlchemy, datasette, llvmlite,
xgboost behind it) is imported only when the name is asked for."""

from __future__ import annotations

import importlib
from typing import Any, Callable, Mapping

__all__ = ["lazy_getattr"]

#: name -> module (the attribute of the same name), or (module, attribute); attribute None: the
#: module itself.
LazyTable = Mapping[str, "str | tuple[str, str | None]"]


def lazy_getattr(package: str, table: LazyTable, namespace: dict[str, Any]) -> Callable[[str], Any]:
    """A module `__getattr__` for `package` that imports `table`'s names on first use and keeps
    them in `namespace` (the package's globals), so the next lookup costs nothing."""

    def __getattr__(name: str) -> Any:
        try:
            entry = table[name]
        except KeyError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        module_name, attr = (entry, name) if isinstance(entry, str) else entry
        module = importlib.import_module(module_name)
        value = module if attr is None else getattr(module, attr)
        namespace[name] = value
        return value

    return __getattr__
