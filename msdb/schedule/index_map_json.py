"""An index map in TVM's object-graph JSON, read and written byte for byte: how a trace records
TransformLayout's and TransformBlockLayout's maps (docs/architecture.md, "Layouts: reindex,
transform_layout, transform_block_layout"; the graph format is docs/tvm-formats.md section 1).

The schedule sits below `msdb.interop` (docs/architecture.md, "Which way imports point"), so it
reads and writes these small graphs itself: integer variables, constants and the integer
arithmetic of index expressions, nothing else (`msdb.interop.tvm.payload` decodes whole
workloads).

Writing keeps TVM's sharing: TVM emits an object once and refers to it by index (one `PrimType`
node per dtype, one `int` node per value, one node per expression *object*, so `i0 // 16` used
twice is one node while two `16`s built separately are two), except that an expression holding a
sampled variable of the trace is emitted anew at each use, as TVM's trace does when it
substitutes the sampled variables' names into the map. TransformLayout records the map in compact
JSON, TransformBlockLayout in TVM's indented form (`pretty`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from msdb.errors import ScheduleError
from msdb.ir import expr as E
from msdb.ir.functor import free_vars

__all__ = ["decode_index_map", "encode_index_map", "TVM_VERSION"]

#: The TVM version the graphs msdb writes name (TVM 0.27, as msdb.interop.tvm.encode writes).
TVM_VERSION = "0.27.0.post1"

_BINARY: dict[str, type[E.BinaryOp]] = {
    "Add": E.Add, "Sub": E.Sub, "Mul": E.Mul, "FloorDiv": E.FloorDiv, "FloorMod": E.FloorMod, "Min": E.Min,
    "Max": E.Max,
}
_KEYS = {cls: f"prim.{name}" for name, cls in _BINARY.items()}


def decode_index_map(text: str) -> tuple[list[E.Var], list[E.PrimExpr]]:
    """The initial and final indices of a serialized map; ScheduleError naming what is wrong.
    Variables other than the initial indices keep their names (in a trace they name sampled
    variables); one graph node is one msdb object."""
    try:
        graph = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ScheduleError(f"index map is not JSON ({exc})") from None
    if not isinstance(graph, dict) or "root_index" not in graph or not isinstance(graph.get("nodes"), list):
        raise ScheduleError("index map is JSON but not a TVM object graph (no 'root_index' and 'nodes')")
    nodes: list[Any] = graph["nodes"]
    memo: dict[int, Any] = {}
    open_nodes: set[int] = set()

    def node(index: Any) -> Any:
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < len(nodes) \
                or not isinstance(nodes[index], dict):
            raise ScheduleError(f"index map: the graph refers to node {index!r}, which does not exist")
        if index in memo:
            return memo[index]
        if index in open_nodes:
            raise ScheduleError(f"index map: node {index} contains itself")
        open_nodes.add(index)
        kind, data = nodes[index].get("type"), nodes[index].get("data")
        try:
            value = _decode_node(kind, data, node)
        except (KeyError, TypeError, ValueError) as exc:
            raise ScheduleError(f"index map: malformed {kind!r} node {index} ({exc!r})") from None
        open_nodes.discard(index)
        memo[index] = value
        return value

    root = node(graph["root_index"])
    if not (isinstance(root, tuple) and len(root) == 2):
        raise ScheduleError("index map: the graph's root is not a tirx.IndexMap")
    initial, final = root
    if not all(isinstance(v, E.Var) for v in initial) or not all(isinstance(e, E.PrimExpr) for e in final):
        raise ScheduleError("index map: the initial indices must be variables and the final indices expressions")
    return list(initial), list(final)


def _decode_node(kind: Any, data: Any, node: Any) -> Any:
    prefix, _, name = str(kind).partition(".")
    if kind == "None":
        return None
    if kind == "int":
        return int(data)
    if kind == "ffi.String":
        return str(data)
    if kind == "ffi.Array":
        return [node(i) for i in data]
    if kind == "ir.PrimType":
        return str(data["dtype"])
    if kind == "ir.IntImm":
        return E.IntImm(node(data["ty"]), int(node(data["value"])))
    if kind in ("ir.Var", "tirx.Var", "tir.Var", "tirx.SizeVar"):
        return E.Var(node(data["name"]), node(data["ty"]))
    if prefix in ("prim", "tir") and name in _BINARY:
        return _BINARY[name](node(data["a"]), node(data["b"]), node(data["ty"]))
    if kind in ("tirx.IndexMap", "tir.IndexMap"):
        return (node(data["initial_indices"]), node(data["final_indices"]))
    raise ValueError(f"msdb reads index maps of integer arithmetic only, not a {kind!r}")


class _Graph:
    """The nodes of one map being written, with TVM's sharing (module docstring)."""

    def __init__(self, sampled: frozenset[E.Var]) -> None:
        self.nodes: list[dict[str, Any]] = [{"type": "None"}]
        self.sampled = sampled
        self.by_object: dict[int, int] = {}
        self.keep: list[object] = []  # what by_object's ids refer to stays alive
        self.types: dict[str, int] = {}
        self.ints: dict[int, int] = {}

    def add(self, type_key: str, data: Any) -> int:
        self.nodes.append({"type": type_key, "data": data})
        return len(self.nodes) - 1

    def prim_type(self, dtype: str) -> int:
        if dtype not in self.types:
            self.types[dtype] = self.add("ir.PrimType", {"span": 0, "dtype": dtype})
        return self.types[dtype]

    def int_value(self, value: int) -> int:
        if value not in self.ints:
            self.ints[value] = self.add("int", value)
        return self.ints[value]

    def expr(self, expr: E.PrimExpr) -> int:
        shared = isinstance(expr, E.Var) or not (free_vars(expr) & self.sampled)
        if shared and id(expr) in self.by_object:
            return self.by_object[id(expr)]
        index = self._build(expr)
        if shared:
            self.by_object[id(expr)] = index
            self.keep.append(expr)
        return index

    def _build(self, expr: E.PrimExpr) -> int:
        ty = self.prim_type(expr.dtype)
        if isinstance(expr, E.Var):
            return self.add("ir.Var", {"span": 0, "ty": ty, "name": self.add("ffi.String", expr.name)})
        if isinstance(expr, E.IntImm):
            return self.add("ir.IntImm", {"span": 0, "ty": ty, "value": self.int_value(int(expr.value))})
        if type(expr) in _KEYS:
            assert isinstance(expr, E.BinaryOp)
            a, b = self.expr(expr.a), self.expr(expr.b)
            return self.add(_KEYS[type(expr)], {"span": 0, "ty": ty, "a": a, "b": b})
        raise ScheduleError(f"index map: msdb writes integer arithmetic only, not a {type(expr).__name__}")


def encode_index_map(initial: Sequence[E.Var], final: Sequence[E.PrimExpr], *, sampled: Iterable[E.Var] = (),
                     pretty: bool = False) -> str:
    """`lambda *initial: final` as a trace records it; `sampled` are the variables that stand
    for sampled variables of the trace (module docstring)."""
    graph = _Graph(frozenset(sampled))
    params = graph.add("ffi.Array", [graph.expr(v) for v in initial])
    outputs = graph.add("ffi.Array", [graph.expr(e) for e in final])
    root = graph.add("tirx.IndexMap", {"initial_indices": params, "final_indices": outputs, "inverse_index_map": 0})
    doc = {"root_index": root, "nodes": graph.nodes, "metadata": {"tvm_version": TVM_VERSION}}
    return json.dumps(doc, indent=2) if pretty else json.dumps(doc, separators=(",", ":"))
