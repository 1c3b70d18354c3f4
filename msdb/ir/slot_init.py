"""Constructors of the IR's frozen dataclasses that set their slots directly
(docs/architecture.md, "Workload IR").

The generated `__init__` of a frozen dataclass sets each field with
`object.__setattr__(self, name, value)`, which looks the attribute up by name on every call.
A schedule replay builds several hundred thousand nodes a second (every primitive rebuilds the
statements it touches and their ancestors), and those lookups were a twentieth of a tuning
search's time. Calling the slot's own descriptor sets the same field at about half the cost.
`fast_init` gives a dataclass an `__init__` with the generated one's parameters, defaults,
default factories and `__post_init__`, setting slots through their descriptors;
`slot_setter` gives one descriptor's setter to the constructors written by hand.
"""

from __future__ import annotations

from dataclasses import MISSING, fields
from typing import Any, Callable, TypeVar

__all__ = ["fast_init", "slot_setter"]

C = TypeVar("C", bound=type)


def slot_setter(cls: type, name: str) -> Callable[[Any, Any], None]:
    """The setter of slot `name` of `cls` (or of a base class), bypassing the frozen check."""
    descriptor = getattr(cls, name)
    setter: Callable[[Any, Any], None] = descriptor.__set__
    return setter


def fast_init(cls: C) -> C:
    """Replace the dataclass `cls`'s generated `__init__` (apply above `@dataclass`)."""
    namespace: dict[str, Any] = {"_MISSING": MISSING}
    params: list[str] = []
    body: list[str] = []
    for i, f in enumerate(fields(cls)):
        if not f.init or f.kw_only:
            raise TypeError(f"fast_init: field {f.name!r} of {cls.__name__} is not a plain positional field")
        namespace[f"_set{i}"] = slot_setter(cls, f.name)
        if f.default is not MISSING:
            namespace[f"_default{i}"] = f.default
            params.append(f"{f.name}=_default{i}")
        elif f.default_factory is not MISSING:
            namespace[f"_factory{i}"] = f.default_factory
            params.append(f"{f.name}=_MISSING")
            body.append(f"if {f.name} is _MISSING: {f.name} = _factory{i}()")
        else:
            params.append(f.name)
        body.append(f"_set{i}(self, {f.name})")
    if hasattr(cls, "__post_init__"):
        body.append("self.__post_init__()")
    source = f"def __init__(self, {', '.join(params)}):\n    " + "\n    ".join(body or ["pass"]) + "\n"
    exec(compile(source, f"<fast_init of {cls.__qualname__}>", "exec"), namespace)
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__doc__ = cls.__dict__["__init__"].__doc__
    setattr(cls, "__init__", init)
    return cls
