"""The one binary serialization of msdb IR: pickle, read back by an unpickler that only builds
msdb IR nodes.

Two places ship IR as bytes: a database stores a workload's IR next to its TVMScript
(`workload.ir_blob`, decoded on every query replay, several times faster than parsing the
script), and the tuner's builder sends modules to its worker processes. Pickle can run
arbitrary code and databases are shared (merged, pulled), so `load_ir` resolves only the node
classes and enums of msdb's IR modules and one constructor of read-only dicts; anything else
raises `UnsafeBlob`. `IR_FORMAT` names this codec in the database's `ir_format` column, so a
future IR change can bump it and old blobs are ignored (the script is used) rather than misread.
"""

from __future__ import annotations

import copyreg
import enum
import importlib
import io
import pickle
from types import MappingProxyType
from typing import Any

from msdb.ir.function import IRModule, PrimFunc

__all__ = ["IR_FORMAT", "UnsafeBlob", "dump_ir", "load_ir"]

IR_FORMAT = "msdb-pickle-1"

#: The modules whose classes (and enums) a blob may name.
_IR_MODULES = ("msdb.ir.expr", "msdb.ir.stmt", "msdb.ir.function")
#: Where the read-only-dict constructor lives: here, and where blobs written before this
#: module existed name it (databases hold such blobs; the format is the same).
_FROZEN_MAP_HOMES = (__name__, "msdb.database.ir_codec")


class UnsafeBlob(pickle.UnpicklingError):
    """An IR blob that refers to something other than msdb IR classes."""


def _frozen_map(items: dict[str, Any]) -> MappingProxyType[str, Any]:
    return MappingProxyType(items)


class _IRPickler(pickle.Pickler):
    # read-only annotation maps do not pickle by themselves: rebuild them from a plain dict
    dispatch_table = copyreg.dispatch_table.copy()
    dispatch_table[MappingProxyType] = lambda m: (_frozen_map, (dict(m),))


class _IRUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if name == "_frozen_map" and module in _FROZEN_MAP_HOMES:
            return _frozen_map
        if module in _IR_MODULES:
            obj = getattr(importlib.import_module(module), name, None)
            if isinstance(obj, type) and (obj.__module__ in _IR_MODULES or issubclass(obj, enum.Enum)):
                return obj
        raise UnsafeBlob(f"IR blob refers to {module}.{name}, which is not an msdb IR class")


def dump_ir(node: IRModule | PrimFunc) -> bytes:
    """The blob of a module or function; raises `pickle.PicklingError`, `TypeError` or
    `AttributeError` for IR holding something that does not pickle."""
    buffer = io.BytesIO()
    _IRPickler(buffer, protocol=5).dump(node)
    return buffer.getvalue()


def load_ir(blob: bytes) -> IRModule | PrimFunc:
    """The module or function of a blob `dump_ir` wrote; raises `pickle.UnpicklingError`
    (`UnsafeBlob` for a blob naming anything but msdb IR) and whatever a damaged blob makes
    the unpickler raise (`EOFError`, `ValueError`, ...)."""
    node = _IRUnpickler(io.BytesIO(blob)).load()
    if not isinstance(node, (IRModule, PrimFunc)):
        raise pickle.UnpicklingError(f"IR blob holds a {type(node).__name__}, not an IRModule or PrimFunc")
    return node
