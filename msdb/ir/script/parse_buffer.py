"""Buffers in the TVMScript parser: `T.Buffer` parameter annotations, `T.alloc_buffer`,
`T.match_buffer`, their shape/dtype/layout arguments, and buffer regions such as
`A[vi, 0:128]` (docs/architecture.md, "TVMScript parser")."""

from __future__ import annotations

import ast
from typing import Any

from msdb.ir import expr as E
from msdb.ir import stmt as S
from msdb.ir.dtype import default_int_dtype, is_integer_like
from msdb.ir.script import ops
from msdb.ir.script.parse_expr import ExprParser, describe
from msdb.ir.script.parse_scope import BlockFrame, FuncFrame


class BufferParser(ExprParser):
    """Declares and resolves buffers; the statement layer builds on it."""

    def _buffer_annotation(self, ann: ast.expr, name: str) -> E.Buffer | None:
        if isinstance(ann, ast.Call) and self.t_func(ann.func) == "Buffer":
            args = [self.value(a) for a in ann.args]
            kwargs = self.keywords(ann)
            return self.buffer_decl(name, args, kwargs, ann, ann.args)
        if isinstance(ann, ast.Subscript) and self.t_func(ann.value) == "Buffer":
            # TVM <= 0.12: T.Buffer[(128, 128), "float32"]
            items = ann.slice.elts if isinstance(ann.slice, ast.Tuple) else [ann.slice]
            args = [self.value(a) for a in items]
            return self.buffer_decl(name, args, {}, ann, items)
        return None

    def _alloc(self, name: str, call: ast.Call) -> E.Buffer:
        args = [self.value(a) for a in call.args]
        kwargs = self.keywords(call)
        return self.buffer_decl(name, args, kwargs, call, call.args)

    def _match_buffer(self, name: str, call: ast.Call, buffer_map: dict | None) -> None:
        if not call.args:
            self.err(call, "T.match_buffer needs a source: a T.handle parameter or a buffer region")
        source_node = call.args[0]
        rest = call.args[1:]
        args = [self.value(a) for a in rest]
        kwargs = self.keywords(call)
        if "param" in kwargs:
            self.err(kwargs["param"][1], "pass the source of T.match_buffer positionally")
        buffer = self.buffer_decl(name, args, kwargs, call, rest)
        frame = self.direct
        if isinstance(frame, FuncFrame):
            handle = self.value(source_node)
            if not isinstance(handle, E.Var) or handle.dtype != "handle" or buffer_map is None:
                self.err(source_node, "at function level T.match_buffer binds a T.handle parameter")
            if handle in buffer_map:
                self.err(source_node, f"parameter {handle.name} is already bound to buffer {buffer_map[handle].name}")
            buffer_map[handle] = buffer
        elif isinstance(frame, BlockFrame):
            region = self._region(source_node)
            frame.match_buffers.append(S.MatchBufferRegion(buffer, region))
        else:
            self.err(call, "T.match_buffer must be at function level or directly inside a block")
        self.define(name, buffer)

    def buffer_decl(self, name: str, args: list[Any], kwargs: dict[str, tuple[Any, ast.expr]],
                    call: ast.AST, arg_nodes: list[ast.expr]) -> E.Buffer:
        """`T.Buffer`/`T.alloc_buffer`/`T.match_buffer` arguments after the source:
        shape, dtype="float32", then keywords TVM accepts."""
        names = ["shape", "dtype"]
        if len(args) > len(names):
            self.err(arg_nodes[len(names)], "pass buffer options other than shape and dtype by keyword")
        given: dict[str, tuple[Any, ast.AST]] = {}
        for key, value, anode in zip(names, args, arg_nodes):
            given[key] = (value, anode)
        for key, item in kwargs.items():
            if key in given:
                self.err(item[1], f"buffer argument {key!r} given twice")
            given[key] = item
        if "shape" not in given:
            self.err(call, "a buffer needs a shape")
        shape_value, shape_node = given.pop("shape")
        shape = self._shape(shape_value, shape_node, "shape")
        dtype = "float32"
        if "dtype" in given:
            dtype = self._dtype_of(*given.pop("dtype"))
        scope = "global"
        if "scope" in given:
            value, vnode = given.pop("scope")
            if not isinstance(value, str):
                self.err(vnode, "scope must be a string such as \"shared\"")
            scope = value
        strides: tuple[E.PrimExpr, ...] = ()
        if "strides" in given:
            value, vnode = given.pop("strides")
            if value is not None:
                strides = self._shape(value, vnode, "strides")
        elem_offset = None
        if "elem_offset" in given:
            value, vnode = given.pop("elem_offset")
            if value is not None:
                elem_offset = self._dim(value, vnode, "elem_offset")
        align = 64
        if "align" in given:
            value, vnode = given.pop("align")
            if not isinstance(value, int) or isinstance(value, bool):
                self.err(vnode, "align must be an integer")
            align = value if value > 0 else 64
        offset_factor = 1
        if "offset_factor" in given:
            value, vnode = given.pop("offset_factor")
            if not isinstance(value, int) or isinstance(value, bool):
                self.err(vnode, "offset_factor must be an integer")
            offset_factor = value if value > 0 else 1
        axis_separators: tuple[int, ...] = ()
        if "axis_separators" in given:
            value, vnode = given.pop("axis_separators")
            if value is not None:
                if not isinstance(value, (list, tuple)) or not all(isinstance(v, int) for v in value):
                    self.err(vnode, "axis_separators must be a list of integers")
                axis_separators = tuple(value)
        if "buffer_type" in given:
            value, vnode = given.pop("buffer_type")
            if value not in ("", "default", None):
                self.err(vnode, f"buffer_type {value!r} is not supported")
        if "data" in given:
            value, vnode = given.pop("data")
            if value is not None:
                self.err(vnode, "buffers over an explicit data pointer are not supported")
        for key, (_, knode) in given.items():
            self.err(knode, f"unknown buffer argument {key!r}")
        data = None
        if offset_factor > 1 or any(isinstance(d, E.Var) for d in strides):
            # a tensor intrinsic's buffer: TVM gives it an elem_offset variable (`C.elem_offset`)
            # when none is declared, and its calls take the data pointer (`C.data`)
            if elem_offset is None and offset_factor > 1:
                elem_offset = E.Var(f"{name}_elem_offset", "int32")
            data = E.Var(name, "handle")
        return E.Buffer(name, shape, dtype, scope, strides, elem_offset, align, offset_factor, axis_separators, data)

    def _shape(self, value: Any, node: ast.AST, what: str) -> tuple[E.PrimExpr, ...]:
        if isinstance(value, (list, tuple)):
            elts = node.elts if isinstance(node, (ast.Tuple, ast.List)) else [node] * len(value)
            return tuple(self._dim(v, n, what) for v, n in zip(value, elts))
        return (self._dim(value, node, what),)

    def _dim(self, value: Any, node: ast.AST, what: str) -> E.PrimExpr:
        if what == "strides" and isinstance(value, str) and value.isidentifier():
            return E.Var(value, "int32")  # TVM: a stride named by a string is a new variable
        if isinstance(value, bool) or not isinstance(value, (int, E.PrimExpr)):
            self.err(node, f"buffer {what} must be integers, got {describe(value)}")
        if isinstance(value, int):
            return E.IntImm(default_int_dtype(value), value)
        if not is_integer_like(value.dtype) or value.dtype == "bool":
            self.err(node, f"buffer {what} must be integers, got an expression of dtype {value.dtype}")
        from msdb.ir.functor import free_vars

        loose = [v for v in free_vars(value) if v not in self.size_vars]
        if loose:
            self.err(node, f"buffer {what} must be constants or function-level size variables; '{loose[0].name}' is neither")
        return value

    def _buffer_ref(self, node: ast.expr) -> E.Buffer:
        if not isinstance(node, ast.Name):
            self.err(node, "expected a buffer name")
        for scope in reversed(self.scopes):
            if node.id in scope:
                value = scope[node.id]
                if not isinstance(value, E.Buffer):
                    self.err(node, f"'{node.id}' is not a buffer")
                return value
        self.err(node, f"undefined buffer '{node.id}'")

    def _region(self, node: ast.expr) -> S.BufferRegion:
        if isinstance(node, ast.Name):
            buffer = self._buffer_ref(node)
            return S.BufferRegion(buffer, tuple(E.Range(E.make_const(0, d.dtype), d) for d in buffer.shape))
        if not isinstance(node, ast.Subscript):
            self.err(node, "expected a buffer region such as A[vi, 0:128]")
        buffer = self._buffer_ref(node.value)
        items = self._subscript_items(node)
        if isinstance(node.slice, ast.Tuple) and not node.slice.elts:
            items = []
        if len(items) != len(buffer.shape):
            self.err(node, f"buffer {buffer.name} has {len(buffer.shape)} dimension(s) but the region gives {len(items)}")
        ranges = []
        for item, dim in zip(items, buffer.shape):
            if isinstance(item, ast.Slice):
                if item.step is not None:
                    self.err(item.step, "region slices take no step")
                if item.lower is None and item.upper is None:
                    ranges.append(E.Range(E.make_const(0, dim.dtype), dim))
                    continue
                if item.lower is None and item.upper is not None:
                    ext = self._int_expr(item.upper, "a region bound")
                    ranges.append(E.Range(E.make_const(0, ext.dtype), ext))
                    continue
                if item.upper is None and item.lower is not None:
                    lo = self._int_expr(item.lower, "a region bound")
                    ranges.append(E.Range(lo, ops.arith(E.Sub, dim, lo)))
                    continue
                assert item.lower is not None and item.upper is not None  # the other cases are above
                lo, ext = self._range_of(item.lower, item.upper, "a region bound")
                ranges.append(E.Range(lo, ext))
            else:
                lo = self._index(item)
                ranges.append(E.Range(lo, E.make_const(1, lo.dtype)))
        return S.BufferRegion(buffer, tuple(ranges))
