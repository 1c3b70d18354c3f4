"""The one binary serialization of msdb IR: pickle, read back by an unpickler that only builds
msdb IR nodes.

Two places ship IR as bytes: a database stores a workload's IR next to its TVMScript
(`workload.ir_blob`, decoded on every query replay, several times faster than parsing the
script), and the tuner's builder sends modules to its worker processes. Pickle can run
arbitrary code and databases are shared (merged, pulled), so `load_ir` resolves only the node
classes and enums of msdb's IR modules and one constructor of read-only dicts; anything else
raises `UnsafeBlob`. `IR_FORMAT` names this codec in the database's `ir_format` column, so a
future IR change can bump it and old blobs are ignored (the script is used) rather than misread.

Sizes are checked before the unpickler runs (`_check_sizes`): CPython's unpickler allocates
what a length or memo-index field claims before it reads the bytes, so a 14-byte blob claiming
2^62 bytes raises `MemoryError`, and one putting to memo slot 2^31 fills gigabytes. A blob
whose lengths and indices do not fit inside it is refused as `UnsafeBlob` instead.
"""

from __future__ import annotations

import copyreg
import enum
import importlib
import io
import logging
import pickle
import struct
from types import MappingProxyType
from typing import Any

from msdb.ir.function import IRModule, PrimFunc

__all__ = ["IR_FORMAT", "UnsafeBlob", "dump_ir", "load_ir", "load_stored_ir"]

logger = logging.getLogger(__name__)

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


# How each pickle opcode's argument is laid out (pickletools.opcodes): a byte count >= 0, or one
# of the codes below; opcodes missing from the table do not exist.
_LINE, _TWO_LINES, _COUNT1, _COUNT4, _COUNT8, _PUT_LINE, _PUT4, _FRAME, _STOP = -1, -2, -3, -4, -5, -6, -7, -8, -9
_ARGS: list[int | None] = [None] * 256
_P = pickle
for _ops, _layout in (
    ((_P.NONE, _P.NEWTRUE, _P.NEWFALSE, _P.EMPTY_LIST, _P.APPEND, _P.APPENDS, _P.LIST, _P.EMPTY_TUPLE, _P.TUPLE,
      _P.TUPLE1, _P.TUPLE2, _P.TUPLE3, _P.EMPTY_DICT, _P.DICT, _P.SETITEM, _P.SETITEMS, _P.EMPTY_SET, _P.ADDITEMS,
      _P.FROZENSET, _P.POP, _P.DUP, _P.MARK, _P.POP_MARK, _P.MEMOIZE, _P.STACK_GLOBAL, _P.REDUCE, _P.BUILD, _P.OBJ,
      _P.NEWOBJ, _P.NEWOBJ_EX, _P.BINPERSID, _P.NEXT_BUFFER, _P.READONLY_BUFFER), 0),
    ((_P.BININT1, _P.BINGET, _P.BINPUT, _P.EXT1, _P.PROTO), 1),
    ((_P.BININT2, _P.EXT2), 2),
    ((_P.BININT, _P.LONG_BINGET, _P.EXT4), 4),
    ((_P.BINFLOAT,), 8),
    ((_P.INT, _P.LONG, _P.STRING, _P.UNICODE, _P.FLOAT, _P.GET, _P.PERSID), _LINE),
    ((_P.GLOBAL, _P.INST), _TWO_LINES),
    ((_P.LONG1, _P.SHORT_BINSTRING, _P.SHORT_BINBYTES, _P.SHORT_BINUNICODE), _COUNT1),
    ((_P.LONG4, _P.BINSTRING, _P.BINBYTES, _P.BINUNICODE), _COUNT4),
    ((_P.BINBYTES8, _P.BYTEARRAY8, _P.BINUNICODE8), _COUNT8),
    ((_P.PUT,), _PUT_LINE),
    ((_P.LONG_BINPUT,), _PUT4),
    ((_P.FRAME,), _FRAME),
    ((_P.STOP,), _STOP),
):
    for _op in _ops:
        _ARGS[_op[0]] = _layout
#: LONG4 and BINSTRING: their 4-byte count is signed.
_SIGNED4 = (_P.LONG4[0], _P.BINSTRING[0])


def _check_sizes(blob: bytes) -> None:
    """Raise `UnsafeBlob` unless every length, frame and memo index in the blob's opcodes fits
    inside the blob (one pass over the opcodes; the unpickler then never allocates more than
    the blob could fill)."""
    n = len(blob)
    i = 0
    args = _ARGS
    while i < n:
        op = blob[i]
        layout = args[op]
        i += 1
        if layout is None:
            raise UnsafeBlob(f"IR blob has an unknown pickle opcode {op:#04x} at byte {i - 1}")
        if layout >= 0:
            i += layout
            continue
        if layout == _STOP:
            return
        if layout == _LINE or layout == _PUT_LINE or layout == _TWO_LINES:
            end = blob.find(b"\n", i)
            if layout == _TWO_LINES and end >= 0:
                end = blob.find(b"\n", end + 1)
            if end < 0:
                break
            if layout == _PUT_LINE and not (blob[i:end].isdigit() and int(blob[i:end]) <= n):
                raise UnsafeBlob(f"IR blob puts to memo slot {blob[i:end][:20]!r} at byte {i - 1}, beyond its size")
            i = end + 1
            continue
        width = 1 if layout == _COUNT1 else 4 if layout in (_COUNT4, _PUT4) else 8
        if i + width > n:
            break
        if op in _SIGNED4:
            (value,) = struct.unpack_from("<i", blob, i)
        else:
            value = int.from_bytes(blob[i:i + width], "little")
        i += width
        if layout == _PUT4:
            if value > n:
                raise UnsafeBlob(f"IR blob puts to memo slot {value} at byte {i - 5}, beyond its size of {n} bytes")
            continue
        if value < 0 or value > n - i:
            raise UnsafeBlob(f"IR blob claims {value} bytes at byte {i - width - 1}, but only {n - i} follow")
        if layout != _FRAME:  # a frame's bytes are opcodes: read on into them
            i += value
    raise UnsafeBlob(f"IR blob of {n} bytes is truncated (no STOP opcode)")


def dump_ir(node: IRModule | PrimFunc) -> bytes:
    """The blob of a module or function; raises `pickle.PicklingError`, `TypeError` or
    `AttributeError` for IR holding something that does not pickle."""
    buffer = io.BytesIO()
    _IRPickler(buffer, protocol=5).dump(node)
    return buffer.getvalue()


def load_ir(blob: bytes) -> IRModule | PrimFunc:
    """The module or function of a blob `dump_ir` wrote; raises `pickle.UnpicklingError`
    (`UnsafeBlob` for a blob naming anything but msdb IR, or whose sizes do not fit in it) and
    whatever a damaged blob makes the unpickler raise (`EOFError`, `ValueError`, ...)."""
    _check_sizes(blob)
    node = _IRUnpickler(io.BytesIO(blob)).load()
    if not isinstance(node, (IRModule, PrimFunc)):
        raise pickle.UnpicklingError(f"IR blob holds a {type(node).__name__}, not an IRModule or PrimFunc")
    return node


def load_stored_ir(ir_format: str | None, ir_blob: bytes | None, script: str, *, label: str = "workload") -> IRModule:
    """The IR of a stored workload (a database row's `ir_format`, `ir_blob` and `script`): its
    blob when it is of `IR_FORMAT` and readable, else its TVMScript (the authoritative form; a
    damaged or foreign blob is logged and skipped).

    A blob is only a cache of the script and databases are shared, so any failure to read it
    (a hostile one claiming 2^62 bytes, one whose shared nodes expand past
    `msdb.ir.tree_size.MAX_TREE_NODES`, a bug) falls back to the script; only the script's own
    errors reach the caller. Here, below the database, so that a schema migration that
    recomputes a key from stored IR (`msdb.schema`) reads it the way the database does."""
    from msdb.ir.tree_size import check_tree_size

    if ir_format == IR_FORMAT and ir_blob is not None:
        try:
            node = load_ir(bytes(ir_blob))
            mod = node if isinstance(node, IRModule) else IRModule.from_func(node)
            check_tree_size(mod, "IR blob")
            return mod
        except Exception as exc:  # noqa: BLE001 - see the docstring
            logger.warning("%s: IR blob unreadable (%s: %s); parsing its script", label, type(exc).__name__,
                           str(exc)[:200])
    from msdb.ir.script import from_script

    return from_script(script)
