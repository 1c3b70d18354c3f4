"""Decode the workload payloads of TVM MetaSchedule logs into msdb IR.

A workload line of `database_workload.json` is `[shash, base64]`; the base64 decodes to an
8-byte little-endian length and that many bytes of JSON: TVM's object graph
(docs/tvm-formats.md section 1). TVM >= 0.22 writes `{"root_index", "nodes",
"metadata"}` where each node is `{"type": key, "data": ...}` and object fields hold node
indices. 0.24+ names TensorIR nodes `tirx.*` / `s_tir.*` (buffers are `ir.Var`s typed by a
`tirx.BufferType`); 0.22-0.23 used `tir.*` for the same nodes. Graphs of TVM <= 0.21 (`"root"`,
`"b64ndarrays"`) are a different format: `LegacyPayloadError` tells the caller to keep the
workload as an opaque payload (`payload_kind` names the two kinds of payload msdb keeps opaque).

Every node is decoded once and memoized by index, so a variable or buffer referenced from many
places becomes one msdb object (identity is what binds loops and blocks in msdb IR). A graph
whose tree, shared nodes counted each time they are reached, is beyond any real workload is
refused (`msdb.ir.tree_size`).
"""

from __future__ import annotations

import base64
import binascii
import json
import struct
from typing import Any, Callable

from msdb.errors import MsdbError
from msdb.ir import expr as E
from msdb.ir import stmt as S
from msdb.ir.function import IRModule, PrimFunc
from msdb.ir.tree_size import TreeTooLarge, check_tree_size

__all__ = [
    "PayloadError", "LegacyPayloadError", "UnsupportedNodeError", "LEGACY_GRAPH", "UNSUPPORTED_GRAPH", "payload_kind",
    "payload_bytes", "encode_payload_bytes", "graph_tvm_version", "load_graph", "decode_workload", "decode_graph",
]

#: A payload in TVM's <= 0.21 graph format (TVM 0.27 refuses it too).
LEGACY_GRAPH = "tvm-legacy-graph"
#: A TVM >= 0.22 graph with a node type msdb's IR has no counterpart for (TVM loads it).
UNSUPPORTED_GRAPH = "tvm-graph"


class PayloadError(MsdbError):
    """A workload payload that is not a TVM object graph msdb can decode."""


class LegacyPayloadError(PayloadError):
    """A payload in TVM's <= 0.21 graph format: importable only as an opaque payload."""


class UnsupportedNodeError(PayloadError):
    """The graph holds a node type msdb's IR has no counterpart for."""


def payload_kind(exc: PayloadError) -> str | None:
    """`LEGACY_GRAPH` or `UNSUPPORTED_GRAPH` for a payload msdb can keep byte for byte without
    decoding it (an opaque workload), None for one that is broken."""
    if isinstance(exc, LegacyPayloadError):
        return LEGACY_GRAPH
    if isinstance(exc, UnsupportedNodeError):
        return UNSUPPORTED_GRAPH
    return None


def payload_bytes(b64: str | bytes) -> bytes:
    """The JSON bytes inside a base64 workload payload (length prefix checked and stripped)."""
    try:
        raw = base64.b64decode(b64, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise PayloadError(f"workload payload is not valid base64 ({exc})") from None
    if len(raw) < 8:
        raise PayloadError(f"workload payload has {len(raw)} bytes, fewer than the 8-byte length prefix")
    (length,) = struct.unpack("<Q", raw[:8])
    if length != len(raw) - 8:
        raise PayloadError(f"workload payload's length prefix says {length} bytes but {len(raw) - 8} follow")
    return raw[8:]


def encode_payload_bytes(graph_json: bytes) -> str:
    """The base64 payload TVM writes for these JSON bytes (8-byte little-endian length prefix)."""
    return base64.b64encode(struct.pack("<Q", len(graph_json)) + graph_json).decode("ascii")


def graph_tvm_version(graph: dict[str, Any]) -> str | None:
    """The TVM version a graph records, if any (new and legacy formats)."""
    meta = graph.get("metadata") or graph.get("attrs") or {}
    version = meta.get("tvm_version") if isinstance(meta, dict) else None
    return str(version) if version is not None else None


def load_graph(b64: str | bytes) -> dict[str, Any]:
    """Parse a payload into its JSON graph (either format)."""
    data = payload_bytes(b64)
    try:
        graph = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PayloadError(f"workload payload is not JSON ({exc})") from None
    if not isinstance(graph, dict) or "nodes" not in graph:
        raise PayloadError("workload payload is JSON but not a TVM object graph (no 'nodes')")
    return graph


def decode_workload(b64: str | bytes) -> IRModule:
    """Decode a base64 workload payload into an IRModule."""
    return decode_graph(load_graph(b64))


def decode_graph(graph: dict[str, Any], *, check_size: bool = True) -> IRModule:
    """Decode a TVM >= 0.22 object graph into an IRModule. `check_size=False` skips the bound on
    the expanded tree, for a graph TVM serialized from a module it holds in this process
    (`msdb.tvm`), which is no file from outside."""
    if "root_index" not in graph:
        if "root" in graph:
            version = graph_tvm_version(graph) or "<= 0.21"
            raise LegacyPayloadError(f"workload is in TVM's legacy (<= 0.21) graph format (tvm_version {version})")
        raise PayloadError("TVM object graph has no 'root_index'")
    root = _GraphDecoder(graph["nodes"]).decode(graph["root_index"])
    if isinstance(root, PrimFunc):
        root = IRModule.from_func(root)
    if not isinstance(root, IRModule):
        raise PayloadError(f"workload graph's root is a {type(root).__name__}, not an IRModule")
    if not check_size:
        return root
    try:
        # nodes are shared by index: a graph of a few KB can stand for a tree no walk finishes
        check_tree_size(root, "workload graph")
    except TreeTooLarge as exc:
        raise PayloadError(str(exc)) from None
    return root


# Type keys of 0.22-0.23 that 0.24+ renamed; decoding looks up the new name.
_ALIASES = {
    "tir.Block": "s_tir.SBlock",
    "tir.BlockRealize": "s_tir.SBlockRealize",
    "tir.MatchBufferRegion": "s_tir.MatchBufferRegion",
    "tir.BufferLoad": "ir.TensorLoad",
    "tir.BufferRegion": "ir.TensorRegion",
}
_BINARY = {
    "Add": E.Add, "Sub": E.Sub, "Mul": E.Mul, "Div": E.Div, "Mod": E.Mod, "FloorDiv": E.FloorDiv,
    "FloorMod": E.FloorMod, "Min": E.Min, "Max": E.Max, "EQ": E.EQ, "NE": E.NE, "LT": E.LT,
    "LE": E.LE, "GT": E.GT, "GE": E.GE, "And": E.And, "Or": E.Or,
}


def _canonical_key(key: str) -> str:
    if key in _ALIASES:
        return _ALIASES[key]
    prefix, _, name = key.partition(".")
    if prefix == "tir" and name in _BINARY | {"Not": 0, "Select": 0, "Cast": 0}:
        return f"prim.{name}"
    if prefix == "tir":
        return f"tirx.{name}"
    return key


class _GraphDecoder:
    def __init__(self, nodes: list[dict[str, Any]]) -> None:
        self.nodes = nodes
        self.memo: dict[int, Any] = {}
        self.handlers: dict[str, Callable[[int, Any], Any]] = {
            "None": lambda i, d: None,
            "int": lambda i, d: int(d),
            "bool": lambda i, d: bool(d),
            "float": lambda i, d: float(d),
            "ffi.String": lambda i, d: str(d),
            "ffi.Array": lambda i, d: [self.decode(x) for x in d],
            "ffi.Map": self._map,
            "ir.PrimType": lambda i, d: d["dtype"],
            "ir.IntImm": self._int_imm,
            "ir.FloatImm": self._float_imm,
            "ir.StringImm": lambda i, d: E.StringImm("handle", self.decode(d["value"])),
            "ir.Var": self._var,
            "tirx.Var": self._var,
            "tirx.SizeVar": self._var,
            "ir.Range": lambda i, d: E.Range(self.decode(d["min"]), self.decode(d["extent"])),
            "ir.Op": lambda i, d: str(d),
            "ir.Call": self._call,
            "ir.TensorLoad": self._load,
            "ir.TensorRegion": self._region,
            "ir.DictAttrs": lambda i, d: self.decode(d["__dict__"]),
            "ir.GlobalVar": lambda i, d: self.decode(d["name_hint"]),
            "ir.IRModule": self._module,
            "prim.Not": lambda i, d: E.Not(self.decode(d["a"])),
            "prim.Select": lambda i, d: E.Select(self.decode(d["condition"]), self.decode(d["true_value"]), self.decode(d["false_value"])),
            "prim.Cast": lambda i, d: E.Cast(self._dtype(d["ty"]), self.decode(d["value"])),
            "tirx.BufferType": lambda i, d: d,  # kept raw: the Var that carries it builds the Buffer
            "tirx.Buffer": self._legacy_buffer,
            "tirx.IterVar": self._iter_var,
            "tirx.BufferStore": self._store,
            "tirx.SeqStmt": lambda i, d: S.seq(*self.decode(d["seq"])),
            "tirx.Evaluate": lambda i, d: S.Evaluate(self.decode(d["value"])),
            "tirx.IfThenElse": lambda i, d: S.IfThenElse(self.decode(d["condition"]), self.decode(d["then_case"]), self.decode(d.get("else_case", 0))),
            "tirx.LetStmt": lambda i, d: S.LetStmt(self.decode(d["var"]), self.decode(d["value"]), self.decode(d["body"])),
            "tirx.For": self._for,
            "s_tir.SBlock": self._block,
            "s_tir.SBlockRealize": lambda i, d: S.BlockRealize(tuple(self.decode(d["iter_values"])), self.decode(d["predicate"]), self.decode(d["block"])),
            "s_tir.MatchBufferRegion": lambda i, d: S.MatchBufferRegion(self._buffer_of(d["buffer"]), self.decode(d["source"])),
            "tirx.PrimFunc": self._func,
        }
        for name, cls in _BINARY.items():
            self.handlers[f"prim.{name}"] = self._binary(cls)

    def decode(self, index: int) -> Any:
        if index in self.memo:
            return self.memo[index]
        try:
            node = self.nodes[index]
        except (IndexError, TypeError):
            raise PayloadError(f"object graph refers to node {index!r}, which does not exist") from None
        key = _canonical_key(node.get("type", "?"))
        handler = self.handlers.get(key)
        if handler is None:
            raise UnsupportedNodeError(f"unsupported node type {node.get('type')!r} (node {index}) in the workload graph")
        try:
            value = handler(index, node.get("data"))
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, MsdbError):
                raise
            raise PayloadError(f"malformed {node.get('type')!r} node {index}: {exc!r}") from None
        self.memo[index] = value
        return value

    # ---- helpers ----
    def _dtype(self, ty_index: int) -> str:
        ty = self.decode(ty_index)
        if not isinstance(ty, str):
            raise PayloadError(f"expected a primitive type at node {ty_index}")
        return ty

    def _map(self, index: int, data: list[int]) -> dict[Any, Any]:
        items = [self.decode(x) for x in data]
        return {items[k]: items[k + 1] for k in range(0, len(items), 2)}

    def _binary(self, cls: type[E.BinaryOp]) -> Callable[[int, Any], Any]:
        def build(index: int, data: dict[str, Any]) -> E.PrimExpr:
            return cls(self.decode(data["a"]), self.decode(data["b"]), self._dtype(data["ty"]))

        return build

    def _int_imm(self, index: int, data: dict[str, Any]) -> E.IntImm:
        return E.IntImm(self._dtype(data["ty"]), int(self.decode(data["value"])))

    def _float_imm(self, index: int, data: dict[str, Any]) -> E.FloatImm:
        value = data["value"]
        if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < len(self.nodes) and self.nodes[value].get("type") in ("float", "ffi.String"):
            value = self.decode(value)
        return E.FloatImm(self._dtype(data["ty"]), float(value))

    def _var(self, index: int, data: dict[str, Any]) -> E.Var | E.Buffer:
        name = self.decode(data["name"]) if "name" in data else self.decode(data.get("name_hint", 0)) or "v"
        ty_node: dict[str, Any] = (self.nodes[data["ty"]] if isinstance(data.get("ty"), int) and data["ty"]
                                   else {"type": "None"})
        ty_key = _canonical_key(ty_node.get("type", ""))
        if ty_key == "tirx.BufferType":
            return self._buffer_from_type(name, ty_node["data"])
        if ty_key == "ir.PrimType":
            return E.Var(name, self._dtype(data["ty"]))
        if ty_key in ("ir.PointerType", "None"):
            return E.Var(name, "handle")
        raise UnsupportedNodeError(f"unsupported variable type {ty_node.get('type')!r} (node {index})")

    def _buffer_from_type(self, name: str, data: dict[str, Any]) -> E.Buffer:
        strides = tuple(self.decode(data["strides"])) if data.get("strides") else ()
        elem_offset = self.decode(data["elem_offset"]) if data.get("elem_offset") else None
        if isinstance(elem_offset, E.IntImm) and elem_offset.value == 0:
            elem_offset = None
        return E.Buffer(
            name=name,
            shape=tuple(self.decode(data["shape"])),
            dtype=self._dtype(data["dtype"]),
            scope=self.decode(data["storage_scope"]) or "global",
            strides=strides,
            elem_offset=elem_offset,
            data_alignment=int(data.get("data_alignment", 64)),
            offset_factor=int(data.get("offset_factor", 1)),
            axis_separators=tuple(int(x.value if isinstance(x, E.IntImm) else x) for x in self.decode(data["axis_separators"])) if data.get("axis_separators") else (),
        )

    def _legacy_buffer(self, index: int, data: dict[str, Any]) -> E.Buffer:
        # 0.22-0.23: a Buffer object with a name and a data var (no BufferType).
        dtype = data["dtype"] if isinstance(data["dtype"], str) else self._dtype(data["dtype"])
        elem_offset = self.decode(data["elem_offset"]) if data.get("elem_offset") else None
        if isinstance(elem_offset, E.IntImm) and elem_offset.value == 0:
            elem_offset = None
        scope = "global"
        if "scope" in data:
            scope = self.decode(data["scope"]) or "global"
        return E.Buffer(
            name=self.decode(data["name"]),
            shape=tuple(self.decode(data["shape"])),
            dtype=dtype,
            scope=scope,
            strides=tuple(self.decode(data["strides"])) if data.get("strides") else (),
            elem_offset=elem_offset,
        )

    def _buffer_of(self, index: int) -> E.Buffer:
        buffer = self.decode(index)
        if not isinstance(buffer, E.Buffer):
            raise PayloadError(f"node {index} should be a buffer but is a {type(buffer).__name__}")
        return buffer

    def _call(self, index: int, data: dict[str, Any]) -> E.PrimExpr:
        op = self.decode(data["op"])
        if not isinstance(op, str):
            raise UnsupportedNodeError(f"call of a non-operator (node {index})")
        name = op.split(".", 1)[1] if "." in op else op
        return E.Call(self._dtype(data["ty"]), name, tuple(self.decode(data["args"])))

    def _load(self, index: int, data: dict[str, Any]) -> E.BufferLoad:
        source = data["source"] if "source" in data else data["buffer"]
        return E.BufferLoad(self._buffer_of(source), tuple(self.decode(data["indices"])))

    def _region(self, index: int, data: dict[str, Any]) -> S.BufferRegion:
        source = data["source"] if "source" in data else data["buffer"]
        return S.BufferRegion(self._buffer_of(source), tuple(self.decode(data["region"])))

    def _store(self, index: int, data: dict[str, Any]) -> S.BufferStore:
        return S.BufferStore(self._buffer_of(data["buffer"]), self.decode(data["value"]), tuple(self.decode(data["indices"])))

    def _iter_var(self, index: int, data: dict[str, Any]) -> S.IterVar:
        # iter_type is stored inline as TVM's IterVarType code, not as a node reference
        return S.IterVar(self.decode(data["dom"]), self.decode(data["var"]), S.IterType(int(data["iter_type"])), self.decode(data["thread_tag"]) or "")

    def _for(self, index: int, data: dict[str, Any]) -> S.For:
        step = data.get("step", 0)
        if step:
            step_value = self.decode(step)
            if step_value is not None and not (isinstance(step_value, E.IntImm) and step_value.value == 1):
                raise UnsupportedNodeError(f"loop with a step other than 1 (node {index})")
        binding = self.decode(data["thread_binding"]) if data.get("thread_binding") else None
        return S.For(
            self.decode(data["loop_var"]),
            self.decode(data["min"]),
            self.decode(data["extent"]),
            S.ForKind(int(data["kind"])),
            self.decode(data["body"]),
            binding,
            self.decode(data["annotations"]) or {},
        )

    def _block(self, index: int, data: dict[str, Any]) -> S.Block:
        return S.Block(
            iter_vars=tuple(self.decode(data["iter_vars"])),
            reads=tuple(self.decode(data["reads"])),
            writes=tuple(self.decode(data["writes"])),
            name_hint=self.decode(data["name_hint"]),
            body=self.decode(data["body"]),
            init=self.decode(data["init"]) if data.get("init") else None,
            alloc_buffers=tuple(self._buffer_of(i) for i in self.nodes[data["alloc_buffers"]]["data"]),
            match_buffers=tuple(self.decode(data["match_buffers"])),
            annotations=self.decode(data["annotations"]) or {},
        )

    def _func(self, index: int, data: dict[str, Any]) -> PrimFunc:
        params: list[E.Var] = []
        buffer_map: dict[E.Var, E.Buffer] = {}
        legacy_map = self.decode(data["buffer_map"]) if data.get("buffer_map") else {}
        for param in self.decode(data["params"]):
            if isinstance(param, E.Buffer):
                handle = E.Var(param.name, "handle")
                params.append(handle)
                buffer_map[handle] = param
            else:
                params.append(param)
                if param in legacy_map:
                    buffer_map[param] = legacy_map[param]
        attrs = self.decode(data["attrs"]) if data.get("attrs") else {}
        return PrimFunc(tuple(params), buffer_map, self.decode(data["body"]), attrs or {})

    def _module(self, index: int, data: dict[str, Any]) -> IRModule:
        functions = self.decode(data["functions"])
        decoded: dict[str, PrimFunc] = {}
        for name, func in functions.items():
            if not isinstance(func, PrimFunc):
                raise UnsupportedNodeError(f"module function {name!r} is not a TensorIR PrimFunc")
            decoded[name] = func
        return IRModule(decoded)
