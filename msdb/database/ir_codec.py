"""The fast serialized form of workload IR stored next to its TVMScript (`workload.ir_blob`).

Decoding a workload happens on every query replay, and unpickling is several times faster than
parsing TVMScript. Pickle can run arbitrary code, and databases are shared (hub, pull), so the
unpickler here only resolves msdb IR node classes and enums from `msdb.ir` and one
constructor of read-only dicts; anything else is refused and the caller falls back to the
script. `IR_FORMAT` names the codec in the `ir_format` column, so a future IR change can bump it
and old blobs are ignored rather than misread.
"""

from __future__ import annotations

import copyreg
import enum
import io
import logging
import pickle
from types import MappingProxyType
from typing import Any

from msdb.ir.function import IRModule

__all__ = ["IR_FORMAT", "dump_ir", "load_ir", "UnsafeBlob"]

logger = logging.getLogger(__name__)

IR_FORMAT = "msdb-pickle-1"

_ALLOWED_MODULES = ("msdb.ir.expr", "msdb.ir.stmt", "msdb.ir.function")


class UnsafeBlob(pickle.UnpicklingError):
    """An IR blob referring to something other than msdb IR classes."""


def _frozen_map(items: dict[str, Any]) -> MappingProxyType[str, Any]:
    return MappingProxyType(items)


class _Pickler(pickle.Pickler):
    dispatch_table = copyreg.dispatch_table.copy()
    dispatch_table[MappingProxyType] = lambda m: (_frozen_map, (dict(m),))


class _Unpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if module == __name__ and name == "_frozen_map":
            return _frozen_map
        if module in _ALLOWED_MODULES:
            obj = getattr(__import__(module, fromlist=[name]), name, None)
            if isinstance(obj, type) and (obj.__module__ in _ALLOWED_MODULES or issubclass(obj, enum.Enum)):
                return obj
        raise UnsafeBlob(f"IR blob refers to {module}.{name}, which is not an msdb IR class")


def dump_ir(mod: IRModule) -> bytes | None:
    """The blob for `mod`, or None when it cannot be pickled (the script is enough then)."""
    buffer = io.BytesIO()
    try:
        _Pickler(buffer, protocol=5).dump(mod)
    except (pickle.PicklingError, TypeError, AttributeError) as exc:
        logger.debug("workload IR not pickled (%s); the script is stored alone", exc)
        return None
    return buffer.getvalue()


def load_ir(blob: bytes) -> IRModule:
    """Decode a blob of `IR_FORMAT`; raises `pickle.UnpicklingError` (incl. `UnsafeBlob`)."""
    mod = _Unpickler(io.BytesIO(blob)).load()
    if not isinstance(mod, IRModule):
        raise pickle.UnpicklingError(f"IR blob holds a {type(mod).__name__}, not an IRModule")
    return mod
