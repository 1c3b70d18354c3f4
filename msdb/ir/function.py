"""Functions and modules of the workload IR (docs/architecture.md, "Workload IR")."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Iterator, Mapping

from msdb.ir.expr import Buffer, Var
from msdb.ir.stmt import Block, BlockRealize, Stmt, frozen_map


@dataclass(frozen=True, eq=False, slots=True)
class PrimFunc:
    """A tensor program: `params` are handle (or scalar) vars, `buffer_map` gives the buffer each
    handle param views, `body` is normally a root `BlockRealize`, `attrs` are TVM's function
    attributes ("global_symbol", "tir.noalias", ...)."""

    params: tuple[Var, ...]
    buffer_map: Mapping[Var, Buffer]
    body: Stmt
    attrs: Mapping[str, Any] = field(default_factory=lambda: frozen_map(None))

    def __post_init__(self) -> None:
        if not isinstance(self.buffer_map, MappingProxyType):
            object.__setattr__(self, "buffer_map", MappingProxyType(dict(self.buffer_map)))
        if not isinstance(self.attrs, MappingProxyType):
            object.__setattr__(self, "attrs", frozen_map(self.attrs))

    @property
    def buffers(self) -> tuple[Buffer, ...]:
        """The argument buffers, in parameter order."""
        return tuple(self.buffer_map[p] for p in self.params if p in self.buffer_map)

    @property
    def root_block(self) -> Block | None:
        """The root block, when the body is a root BlockRealize (always, for parsed scripts)."""
        return self.body.block if isinstance(self.body, BlockRealize) else None

    def with_body(self, body: Stmt) -> PrimFunc:
        return PrimFunc(self.params, self.buffer_map, body, self.attrs)

    def with_attrs(self, **updates: Any) -> PrimFunc:
        attrs = dict(self.attrs)
        attrs.update(updates)
        return PrimFunc(self.params, self.buffer_map, self.body, attrs)


@dataclass(frozen=True, eq=False, slots=True)
class IRModule:
    """Named functions. A single-function module is keyed `{"main": f}` by `IRModule.from_func`."""

    functions: Mapping[str, PrimFunc]
    attrs: Mapping[str, Any] = field(default_factory=lambda: frozen_map(None))

    def __post_init__(self) -> None:
        if not isinstance(self.functions, MappingProxyType):
            object.__setattr__(self, "functions", MappingProxyType(dict(self.functions)))
        if not isinstance(self.attrs, MappingProxyType):
            object.__setattr__(self, "attrs", frozen_map(self.attrs))

    @staticmethod
    def from_func(func: PrimFunc, name: str = "main") -> IRModule:
        return IRModule({name: func})

    @staticmethod
    def coerce(mod: IRModule | PrimFunc, what: str = "a module") -> IRModule:
        """`mod` as a module: a PrimFunc becomes `{"main": func}` (TVM's `_normalize_mod`);
        anything else is a TypeError saying what `what` must be."""
        if isinstance(mod, IRModule):
            return mod
        if isinstance(mod, PrimFunc):
            return IRModule.from_func(mod)
        raise TypeError(f"{what} is an IRModule or PrimFunc, got {type(mod).__name__}")

    def __getitem__(self, name: str) -> PrimFunc:
        try:
            return self.functions[name]
        except KeyError:
            raise KeyError(f"module has no function {name!r}; it has {sorted(self.functions)}") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self.functions)

    def __len__(self) -> int:
        return len(self.functions)

    def with_function(self, name: str, func: PrimFunc) -> IRModule:
        functions = dict(self.functions)
        functions[name] = func
        return IRModule(functions, self.attrs)

    @property
    def main(self) -> PrimFunc:
        """The entry function: attr `tir.is_entry_func`, else "main", else the only function."""
        for func in self.functions.values():
            if func.attrs.get("tir.is_entry_func"):
                return func
        if "main" in self.functions:
            return self.functions["main"]
        if len(self.functions) == 1:
            return next(iter(self.functions.values()))
        raise KeyError(f"module has no entry function among {sorted(self.functions)}")
