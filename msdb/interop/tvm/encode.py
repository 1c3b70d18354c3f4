"""Encode msdb IR as TVM 0.27's object graph, so workloads msdb created itself can be exported
to a work_dir that real TVM loads (docs/tvm-formats.md section 1). Workloads imported from TVM
keep their original payload bytes instead; this is only for msdb's own.

The graph mirrors what TVM 0.27's `SaveJSON` writes (field names, the `relax.FuncType` of the
function, int64 shapes in that type, `tirx.noalias`), pretty-printed with indent 2 like TVM.
Nodes are appended children-first; shared objects (a Var, a Buffer) are emitted once and
referred to by index, which is how TVM keeps identity.
"""

from __future__ import annotations

import json
from typing import Any

from msdb.ir import expr as E
from msdb.ir import stmt as S
from msdb.ir.function import IRModule, PrimFunc
from msdb.interop.tvm.payload import encode_payload_bytes
from msdb.schedule.index_map_json import TVM_VERSION  # the one spelling of the TVM version msdb writes

__all__ = ["TVM_VERSION", "encode_graph", "encode_workload"]


_BINARY_KEYS = {
    E.Add: "prim.Add", E.Sub: "prim.Sub", E.Mul: "prim.Mul", E.Div: "prim.Div", E.Mod: "prim.Mod",
    E.FloorDiv: "prim.FloorDiv", E.FloorMod: "prim.FloorMod", E.Min: "prim.Min", E.Max: "prim.Max",
    E.EQ: "prim.EQ", E.NE: "prim.NE", E.LT: "prim.LT", E.LE: "prim.LE", E.GT: "prim.GT",
    E.GE: "prim.GE", E.And: "prim.And", E.Or: "prim.Or",
}
# TVM registers most math intrinsics as "tirx.<name>"; these few live under "prim.".
_PRIM_OPS = {"if_then_else"}


class _GraphEncoder:
    def __init__(self) -> None:
        self.nodes: list[dict[str, Any]] = [{"type": "None"}]
        self.memo: dict[int, int] = {}
        self.keep_alive: list[object] = []
        self.prim_types: dict[str, int] = {}
        self.strings: dict[str, int] = {}

    # ---- primitives ----
    def add(self, type_key: str, data: Any = None) -> int:
        node: dict[str, Any] = {"type": type_key}
        if data is not None or type_key not in ("None",):
            node["data"] = data
        self.nodes.append(node)
        return len(self.nodes) - 1

    def once(self, obj: object, build: Any) -> int:
        key = id(obj)
        if key not in self.memo:
            self.keep_alive.append(obj)
            self.memo[key] = build()
        return self.memo[key]

    def string(self, value: str) -> int:
        return self.add("ffi.String", value)

    def prim_type(self, dtype: str) -> int:
        return self.add("ir.PrimType", {"span": 0, "dtype": dtype})

    def array(self, items: list[int]) -> int:
        return self.add("ffi.Array", items)

    def map(self, pairs: list[tuple[int, int]]) -> int:
        flat: list[int] = []
        for key, value in pairs:
            flat.extend((key, value))
        return self.add("ffi.Map", flat)

    def value(self, value: Any) -> int:
        """An attribute or annotation value (plain Python or PrimExpr)."""
        if isinstance(value, E.PrimExpr):
            return self.expr(value)
        if isinstance(value, bool):
            return self.add("bool", value)
        if isinstance(value, int):
            return self.add("int", value)
        if isinstance(value, float):
            return self.add("float", value)
        if isinstance(value, str):
            return self.string(value)
        if isinstance(value, (list, tuple)):
            return self.array([self.value(v) for v in value])
        if isinstance(value, dict) or hasattr(value, "items"):
            return self.map([(self.string(str(k)), self.value(v)) for k, v in value.items()])
        raise TypeError(f"cannot encode attribute value {value!r} for TVM")

    # ---- expressions ----
    def expr(self, node: E.PrimExpr) -> int:
        if isinstance(node, E.Var):
            return self.once(node, lambda: self.add("ir.Var", {"span": 0, "ty": self.prim_type(node.dtype), "name": self.string(node.name)}))
        if isinstance(node, E.IntImm):
            ty = self.prim_type(node.dtype)
            return self.add("ir.IntImm", {"span": 0, "ty": ty, "value": self.add("int", int(node.value))})
        if isinstance(node, E.FloatImm):
            return self.add("ir.FloatImm", {"span": 0, "ty": self.prim_type(node.dtype), "value": float(node.value)})
        if isinstance(node, E.StringImm):
            return self.add("ir.StringImm", {"span": 0, "value": self.string(node.value)})
        if isinstance(node, E.BinaryOp):
            a, b = self.expr(node.a), self.expr(node.b)
            return self.add(_BINARY_KEYS[type(node)], {"span": 0, "ty": self.prim_type(node.dtype), "a": a, "b": b})
        if isinstance(node, E.Not):
            a = self.expr(node.a)
            return self.add("prim.Not", {"span": 0, "ty": self.prim_type("bool"), "a": a})
        if isinstance(node, E.Select):
            c, t, f = self.expr(node.condition), self.expr(node.true_value), self.expr(node.false_value)
            return self.add("prim.Select", {"span": 0, "ty": self.prim_type(node.dtype), "condition": c, "true_value": t, "false_value": f})
        if isinstance(node, E.Cast):
            v = self.expr(node.value)
            return self.add("prim.Cast", {"span": 0, "ty": self.prim_type(node.dtype), "value": v})
        if isinstance(node, E.Call):
            op_name = ("prim." if node.op in _PRIM_OPS else "tirx.") + node.op
            op = self.add("ir.Op", op_name)
            args = self.array([self.expr(a) for a in node.args])
            return self.add("ir.Call", {"span": 0, "ty": self.prim_type(node.dtype), "op": op, "args": args, "attrs": 0, "ty_args": self.array([])})
        if isinstance(node, E.BufferLoad):
            source = self.buffer(node.buffer)
            indices = self.array([self.expr(i) for i in node.indices])
            return self.add("ir.TensorLoad", {"span": 0, "ty": self.prim_type(node.dtype), "source": source, "indices": indices})
        raise TypeError(f"cannot encode {type(node).__name__} for TVM")

    def buffer(self, buf: E.Buffer) -> int:
        def build() -> int:
            shape = self.array([self.expr(d) for d in buf.shape])
            strides = self.array([self.expr(s) for s in buf.strides])
            # TVM's default offset is a 0 of the first dimension's index dtype (BufferType's
            # DefaultIndexType): an int32 0 on an int64-shaped buffer is a different buffer to TVM
            index_dtype = buf.shape[0].dtype if buf.shape else "int32"
            offset = buf.elem_offset if buf.elem_offset is not None else E.IntImm(index_dtype, 0)
            ty = self.add("tirx.BufferType", {
                "span": 0, "dtype": self.prim_type(buf.dtype), "storage_scope": self.string(buf.scope),
                "shape": shape, "strides": strides, "elem_offset": self.expr(offset),
                "data_alignment": buf.data_alignment, "offset_factor": buf.offset_factor, "layout": 0,
                "allocated_addr": self.array([]),
            })
            return self.add("ir.Var", {"span": 0, "ty": ty, "name": self.string(buf.name)})

        return self.once(buf, build)

    def range(self, rng: E.Range) -> int:
        lo, ext = self.expr(rng.min), self.expr(rng.extent)
        return self.add("ir.Range", {"min": lo, "extent": ext, "span": 0})

    def region(self, region: S.BufferRegion) -> int:
        ty = self.add("tirx.BufferRegionType", {"span": 0})
        ranges = self.array([self.range(r) for r in region.region])
        return self.add("ir.TensorRegion", {"span": 0, "ty": ty, "source": self.buffer(region.buffer), "region": ranges})

    def iter_var(self, iv: S.IterVar) -> int:
        dom = self.range(iv.dom) if iv.dom is not None else 0  # a thread binding may have no domain
        var = self.expr(iv.var)
        return self.add("tirx.IterVar", {"dom": dom, "var": var, "iter_type": int(iv.iter_type), "thread_tag": self.string(iv.thread_tag), "span": 0})

    # ---- statements ----
    def stmt(self, node: S.Stmt | None) -> int:
        if node is None:
            return 0
        if isinstance(node, S.BufferStore):
            buf = self.buffer(node.buffer)
            value = self.expr(node.value)
            indices = self.array([self.expr(i) for i in node.indices])
            return self.add("tirx.BufferStore", {"span": 0, "buffer": buf, "value": value, "indices": indices})
        if isinstance(node, S.SeqStmt):
            return self.add("tirx.SeqStmt", {"span": 0, "seq": self.array([self.stmt(s) for s in node.seq])})
        if isinstance(node, S.Evaluate):
            return self.add("tirx.Evaluate", {"span": 0, "value": self.expr(node.value)})
        if isinstance(node, S.IfThenElse):
            cond = self.expr(node.condition)
            then, other = self.stmt(node.then_case), self.stmt(node.else_case)
            return self.add("tirx.IfThenElse", {"span": 0, "condition": cond, "then_case": then, "else_case": other})
        if isinstance(node, S.LetStmt):
            var, value = self.expr(node.var), self.expr(node.value)
            return self.add("tirx.LetStmt", {"span": 0, "var": var, "value": value, "body": self.stmt(node.body)})
        if isinstance(node, S.For):
            var, lo, ext = self.expr(node.loop_var), self.expr(node.min), self.expr(node.extent)
            binding = self.iter_var(node.thread_binding) if node.thread_binding is not None else 0
            body = self.stmt(node.body)
            annotations = self.value(dict(node.annotations))
            return self.add("tirx.For", {"span": 0, "loop_var": var, "min": lo, "extent": ext, "kind": int(node.kind),
                                         "body": body, "thread_binding": binding, "annotations": annotations, "step": 0})
        if isinstance(node, S.BlockRealize):
            values = self.array([self.expr(v) for v in node.iter_values])
            pred = self.expr(node.predicate)
            return self.add("s_tir.SBlockRealize", {"span": 0, "iter_values": values, "predicate": pred, "block": self.block(node.block)})
        raise TypeError(f"cannot encode {type(node).__name__} for TVM")

    def block(self, block: S.Block) -> int:
        iter_vars = self.array([self.iter_var(iv) for iv in block.iter_vars])
        reads = self.array([self.region(r) for r in block.reads])
        writes = self.array([self.region(w) for w in block.writes])
        name = self.string(block.name_hint)
        allocs = self.array([self.buffer(b) for b in block.alloc_buffers])
        matches = self.array([
            self.add("s_tir.MatchBufferRegion", {"buffer": self.buffer(m.buffer), "source": self.region(m.source)})
            for m in block.match_buffers
        ])
        annotations = self.value(dict(block.annotations))
        init = self.stmt(block.init)
        body = self.stmt(block.body)
        return self.add("s_tir.SBlock", {"span": 0, "iter_vars": iter_vars, "reads": reads, "writes": writes, "name_hint": name,
                                         "alloc_buffers": allocs, "match_buffers": matches, "annotations": annotations,
                                         "init": init, "body": body})

    # ---- functions ----
    def func_type(self, func: PrimFunc) -> int:
        params = []
        for param in func.params:
            buf = func.buffer_map.get(param)
            if buf is None:
                params.append(self.prim_type(param.dtype))
                continue
            dims = self.array([self.expr(E.IntImm("int64", int(d.value))) if isinstance(d, E.IntImm) else self.expr(d) for d in buf.shape])
            shape_ty = self.add("relax.ShapeType", {"span": 0, "values": dims, "ndim": len(buf.shape)})
            shape = self.add("relax.expr.ShapeExpr", {"span": 0, "ty": shape_ty, "values": dims})
            params.append(self.add("relax.TensorType", {"span": 0, "shape": shape, "dtype": self.prim_type(buf.dtype), "vdevice": 0, "ndim": len(buf.shape)}))
        ret = self.add("ir.TupleType", {"span": 0, "fields": self.array([])})
        return self.add("relax.FuncType", {"span": 0, "params": self.array(params), "ret": ret, "derive_func": 0, "purity": False})

    def func(self, func: PrimFunc, name: str) -> int:
        ty = self.func_type(func)
        attrs = dict(func.attrs)
        attrs.pop("tir.noalias", None)
        attrs.setdefault("global_symbol", name)
        attrs["tirx.noalias"] = True
        attrs["s_tir"] = True
        attr_node = self.add("ir.DictAttrs", {"__dict__": self.value(attrs)})
        params = []
        for param in func.params:
            buf = func.buffer_map.get(param)
            params.append(self.buffer(buf) if buf is not None else self.expr(param))
        param_array = self.array(params)
        ret_type = self.add("ir.TupleType", {"span": 0, "fields": self.array([])})
        body = self.stmt(func.body)
        return self.add("tirx.PrimFunc", {"span": 0, "ty": ty, "attrs": attr_node, "params": param_array, "ret_type": ret_type, "body": body})

    def module(self, mod: IRModule) -> int:
        pairs = []
        by_name = []
        for name, func in mod.functions.items():
            gvar_ty = self.add("ir.Type", {"span": 0})
            name_node = self.string(name)
            gvar = self.add("ir.GlobalVar", {"span": 0, "ty": gvar_ty, "name_hint": name_node})
            pairs.append((gvar, self.func(func, name)))
            by_name.append((name_node, gvar))
        functions = self.map(pairs)
        gvar_map = self.map(by_name)
        source_map = self.add("ir.SourceMap", {"source_map": self.map([])})
        attrs = self.add("ir.DictAttrs", {"__dict__": self.map([])})
        return self.add("ir.IRModule", {"functions": functions, "global_var_map_": gvar_map, "source_map": source_map,
                                        "attrs": attrs, "global_infos": self.map([])})


def encode_graph(mod: IRModule | PrimFunc) -> dict[str, Any]:
    """TVM 0.27's object graph of `mod` (a lone PrimFunc is encoded as {"main": f})."""
    if isinstance(mod, PrimFunc):
        mod = IRModule.from_func(mod)
    encoder = _GraphEncoder()
    root = encoder.module(mod)
    return {"root_index": root, "nodes": encoder.nodes, "metadata": {"tvm_version": TVM_VERSION}}


def encode_workload(mod: IRModule | PrimFunc) -> str:
    """The base64 workload payload TVM 0.27 writes for `mod` (pretty JSON, length prefix)."""
    text = json.dumps(encode_graph(mod), indent=2)
    return encode_payload_bytes(text.encode("utf-8"))
