"""Print msdb IR as TVMScript in the style TVM 0.27 writes (`mod.script()`): `to_script`.

The output is what `from_script` reads back to a structurally equal module; every spelling that
differs from the shortest one exists for that round trip. See docs/architecture.md, "TVMScript
parser".
"""

from __future__ import annotations

import json
import keyword
import math
import re
from typing import Any, Callable, Iterable, Mapping

from msdb.ir import expr as E
from msdb.ir import stmt as S
from msdb.ir.function import IRModule, PrimFunc
from msdb.ir.script import ops
from msdb.ir.script.ops import BINARY_MATH, HANDLE_BUILTINS, UNARY_MATH, UNARY_PRED
from msdb.ir.tree_size import check_tree_size

_HEADER_MODULE = "# from tvm.script import ir as I\n# from tvm.script import tirx as T\n"
_HEADER_FUNC = "# from tvm.script import tirx as T\n"
_INDENT = "    "

_RESERVED = frozenset(keyword.kwlist) | {"T", "I", "range", "True", "False", "None", "tvm"}

# Python operator precedence (higher binds tighter).
_P_OR, _P_AND, _P_NOT, _P_CMP, _P_BOR, _P_BXOR, _P_BAND, _P_SHIFT, _P_ADD, _P_MUL, _P_UNARY, _P_ATOM = (
    1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13
)

_ARITH_SUGAR: dict[type, tuple[str, int]] = {
    E.Add: ("+", _P_ADD), E.Sub: ("-", _P_ADD), E.Mul: ("*", _P_MUL),
    E.FloorDiv: ("//", _P_MUL), E.FloorMod: ("%", _P_MUL),
}
_CMP_SUGAR: dict[type, str] = {E.EQ: "==", E.NE: "!=", E.LT: "<", E.LE: "<=", E.GT: ">", E.GE: ">="}
_BIT_SUGAR: dict[str, tuple[str, int]] = {
    "bitwise_and": ("&", _P_BAND), "bitwise_or": ("|", _P_BOR), "bitwise_xor": ("^", _P_BXOR),
    "shift_left": ("<<", _P_SHIFT), "shift_right": (">>", _P_SHIFT),
}
_AXIS_NAMES = {
    S.IterType.DATA_PAR: "spatial", S.IterType.COMM_REDUCE: "reduce",
    S.IterType.ORDERED: "scan", S.IterType.OPAQUE: "opaque",
}
_LOOP_NAMES = {
    S.ForKind.SERIAL: "serial", S.ForKind.PARALLEL: "parallel", S.ForKind.VECTORIZED: "vectorized",
    S.ForKind.UNROLLED: "unroll", S.ForKind.THREAD_BINDING: "thread_binding",
}


def to_script(node: IRModule | PrimFunc) -> str:
    """TVMScript text for a module (`@I.ir_module class Module`) or a function
    (`@T.prim_func def main`). The text is that of the tree: IR whose shared nodes expand it
    beyond any real workload raises `TreeTooLarge` (`msdb.ir.tree_size`) instead of printing
    for hours."""
    if isinstance(node, (IRModule, PrimFunc)):
        check_tree_size(node, "IR to print")
    if isinstance(node, IRModule):
        lines = [_HEADER_MODULE, "@I.ir_module", "class Module:"]
        if node.attrs:
            lines.append(_INDENT + f"I.module_attrs({_attr_value(node.attrs, _FuncPrinter(None, 'main'))})")
        for i, (name, func) in enumerate(node.functions.items()):
            if i:
                lines.append("")
            lines.extend(_INDENT + ln if ln else ln for ln in _FuncPrinter(func, _identifier(name)).print())
        if not node.functions and not node.attrs:
            lines.append(_INDENT + "pass")
        return "\n".join(lines) + "\n"
    if isinstance(node, PrimFunc):
        symbol = node.attrs.get("global_symbol")
        name = symbol if isinstance(symbol, str) and symbol.isidentifier() and not keyword.iskeyword(symbol) else "main"
        return "\n".join([_HEADER_FUNC] + _FuncPrinter(node, name).print()) + "\n"
    raise TypeError(f"to_script expects an IRModule or a PrimFunc, got {type(node).__name__}")


def expr_text(expr: E.PrimExpr) -> str:
    """One expression as TVMScript writes it, its variables by their names (an index map's
    outputs in a printed trace)."""
    return _FuncPrinter(None, "").expr(expr)


def _identifier(name: str) -> str:
    """A function name usable after `def` (module keys are normally identifiers already)."""
    text = re.sub(r"\W", "_", name) or "main"
    if text[0].isdigit() or keyword.iskeyword(text):
        text = "f_" + text
    return text


def _is_true(expr: E.PrimExpr) -> bool:
    return isinstance(expr, E.IntImm) and expr.dtype == "bool" and expr.value == 1


def _is_zero(expr: E.PrimExpr) -> bool:
    return isinstance(expr, E.IntImm) and expr.value == 0


def _bare(expr: E.PrimExpr) -> bool:
    """Printed as a Python literal (which the parser retypes by context)."""
    return isinstance(expr, E.IntImm) and expr.dtype in ("int32", "bool")


def _same(a: Any, b: Any) -> bool:
    """Structural equality of two expressions (variables by identity), enough to decide
    whether `T.axis.remap` reproduces a block var's domain."""
    if a is b:
        return True
    if type(a) is not type(b) or a is None or b is None:
        return False
    if isinstance(a, (E.IntImm, E.FloatImm)):
        return a.dtype == b.dtype and a.value == b.value
    if isinstance(a, E.Var):
        return False
    if isinstance(a, E.BinaryOp):
        return a.dtype == b.dtype and _same(a.a, b.a) and _same(a.b, b.b)
    if isinstance(a, E.Cast):
        return a.dtype == b.dtype and _same(a.value, b.value)
    if isinstance(a, E.BufferLoad):
        return a.buffer is b.buffer and len(a.indices) == len(b.indices) and all(
            _same(x, y) for x, y in zip(a.indices, b.indices)
        )
    if isinstance(a, E.Call):
        return a.op == b.op and a.dtype == b.dtype and len(a.args) == len(b.args) and all(
            _same(x, y) for x, y in zip(a.args, b.args)
        )
    return False


class _Namer:
    """Scoped unique names: a name is taken while the scope defining it is open."""

    def __init__(self) -> None:
        self.names: dict[Any, str] = {}
        self.in_use: dict[str, int] = {}
        self.frames: list[list[str]] = [[]]

    def push(self) -> None:
        self.frames.append([])

    def pop(self) -> None:
        for name in self.frames.pop():
            count = self.in_use[name] - 1
            if count:
                self.in_use[name] = count
            else:
                del self.in_use[name]

    def define(self, obj: Any, hint: str) -> str:
        base = re.sub(r"\W", "_", hint) or "v"
        if base[0].isdigit():
            base = "v_" + base
        name = base
        k = 1
        while name in self.in_use or name in _RESERVED:
            name = f"{base}_{k}"
            k += 1
        self.names[obj] = name
        self.in_use[name] = self.in_use.get(name, 0) + 1
        self.frames[-1].append(name)
        return name

    def get(self, obj: Any, hint: str) -> str:
        name = self.names.get(obj)
        if name is None:  # a variable used outside its scope (ill-formed IR): keep it readable
            name = self.define(obj, hint)
        return name


class _FuncPrinter:
    def __init__(self, func: PrimFunc | None, name: str) -> None:
        self.func = func
        self.name = name
        self.namer = _Namer()
        self.lines: list[str] = []
        self.depth = 0
        self.loops: dict[E.Var, S.For] = {}

    # ------------------------------------------------------------------ output helpers
    def emit(self, text: str) -> None:
        self.lines.append(_INDENT * self.depth + text)

    def print(self) -> list[str]:
        func = self.func
        assert func is not None
        attrs = dict(func.attrs)
        deco_opts = []
        symbol = attrs.get("global_symbol")
        if symbol is None:
            deco_opts.append("private=True")
        elif symbol == self.name:
            del attrs["global_symbol"]
        if attrs.get("s_tir") is True:
            del attrs["s_tir"]
            deco_opts.append("s_tir=True")
        deco = "@T.prim_func" + (f"({', '.join(deco_opts)})" if deco_opts else "")
        self.emit(deco)

        defined, free = _collect_vars(func)
        params = []
        late_matches: list[tuple[E.Var, E.Buffer]] = []
        for param in func.params:
            buffer = func.buffer_map.get(param)
            if buffer is not None and not _buffer_uses_vars(buffer):
                name = self.namer.define(buffer, buffer.name)
                params.append(f"{name}: T.Buffer({self.buffer_args(buffer, True, name)})")
            else:
                hint = param.name if buffer is None or param.name != buffer.name else buffer.name + "_handle"
                pname = self.namer.define(param, hint)
                params.append(f"{pname}: T.{param.dtype}")
                if buffer is not None:
                    late_matches.append((param, buffer))
        self.emit(f"def {self.name}({', '.join(params)}):")
        self.depth += 1
        start = len(self.lines)
        if attrs:
            self.emit(f"T.func_attr({_attr_value(attrs, self)})")
        for var in free:
            name = self.namer.define(var, var.name)
            self.emit(f"{name} = T.{var.dtype}()")
        for param, buffer in late_matches:
            pname = self.namer.names[param]
            bname = self.namer.define(buffer, buffer.name)
            self.emit(f"{bname} = T.match_buffer({pname}, {self.buffer_args(buffer, True)})")
        self.print_function_body(func.body)
        if len(self.lines) == start:
            self.emit("T.evaluate(0)")
        self.depth -= 1
        return self.lines

    def print_function_body(self, body: S.Stmt) -> None:
        if isinstance(body, S.BlockRealize) and self._elidable_root(body):
            block = body.block
            self.emit('# with T.sblock("root"):')
            for buf in block.alloc_buffers:
                name = self.namer.define(buf, buf.name)
                self.emit(f"{name} = T.sblock_alloc_buffer({self.buffer_args(buf, False)})")
            self.stmt(block.body)
            return
        self.stmt(body)

    @staticmethod
    def _elidable_root(realize: S.BlockRealize) -> bool:
        block = realize.block
        if (
            block.name_hint != "root" or block.iter_vars or realize.iter_values
            or not _is_true(realize.predicate) or block.reads or block.writes
            or block.init is not None or block.match_buffers or block.annotations
        ):
            return False
        # With no allocations, a lone block without block vars would be taken for the root.
        inner = block.body
        return bool(block.alloc_buffers) or not (isinstance(inner, S.BlockRealize) and not inner.block.iter_vars)

    # ------------------------------------------------------------------ statements
    def stmt(self, node: S.Stmt) -> None:
        if isinstance(node, S.SeqStmt):
            last = len(node.seq) - 1
            for i, item in enumerate(node.seq):
                if isinstance(item, S.LetStmt) and i != last:
                    self.let_scoped(item)
                else:
                    self.stmt(item)
            return
        method = getattr(self, "s_" + type(node).__name__, None)
        if method is None:
            raise TypeError(f"cannot print statement {type(node).__name__}")
        method(node)

    def body(self, node: S.Stmt) -> None:
        self.depth += 1
        self.namer.push()
        try:
            self.stmt(node)
        finally:
            self.namer.pop()
            self.depth -= 1

    def s_BufferStore(self, node: S.BufferStore) -> None:
        target = self.load_text(node.buffer, node.indices)
        self.emit(f"{target} = {self.expr(node.value)}")

    def s_Evaluate(self, node: S.Evaluate) -> None:
        self.emit(f"T.evaluate({self.expr(node.value)})")

    def s_IfThenElse(self, node: S.IfThenElse, keyword_: str = "if") -> None:
        self.emit(f"{keyword_} {self.expr(node.condition)}:")
        self.body(node.then_case)
        other = node.else_case
        if other is None:
            return
        if isinstance(other, S.IfThenElse):
            self.s_IfThenElse(other, "elif")
            return
        self.emit("else:")
        self.body(other)

    def s_LetStmt(self, node: S.LetStmt) -> None:
        value = self.expr(node.value)
        if node.var.dtype != node.value.dtype:
            self.let_scoped(node)
            return
        name = self.namer.define(node.var, node.var.name)
        self.emit(f"{name}: T.{node.var.dtype} = {value}")
        self.stmt(node.body)

    def let_scoped(self, node: S.LetStmt) -> None:
        value = self.expr(node.value)
        self.namer.push()
        name = self.namer.define(node.var, node.var.name)
        self.emit(f"with T.LetStmt({value}) as {name}:")
        self.depth += 1
        try:
            self.stmt(node.body)
        finally:
            self.depth -= 1
            self.namer.pop()

    def s_For(self, node: S.For) -> None:
        grid: list[S.For] = []
        grid_vars: set[E.Var] = set()
        loop: S.Stmt = node
        while isinstance(loop, S.For) and self._grid_ok(loop, grid_vars):
            grid.append(loop)
            grid_vars.add(loop.loop_var)
            loop = loop.body
        self.namer.push()
        try:
            if len(grid) > 1:
                extents = ", ".join(self.expr(lp.extent) for lp in grid)
                names = ", ".join(self.namer.define(lp.loop_var, lp.loop_var.name) for lp in grid)
                self.emit(f"for {names} in T.grid({extents}):")
                for lp in grid:
                    self.loops[lp.loop_var] = lp
                inner = grid[-1].body
            else:
                head = self._loop_head(node)
                name = self.namer.define(node.loop_var, node.loop_var.name)
                self.emit(f"for {name} in {head}:")
                self.loops[node.loop_var] = node
                grid = [node]
                inner = node.body
            self.depth += 1
            try:
                self.stmt(inner)
            finally:
                self.depth -= 1
        finally:
            for lp in grid:
                self.loops.pop(lp.loop_var, None)
            self.namer.pop()

    @staticmethod
    def _grid_ok(loop: S.For, grid_vars: set[E.Var]) -> bool:
        if loop.kind != S.ForKind.SERIAL or loop.annotations or loop.thread_binding is not None:
            return False
        if not (_is_zero(loop.min) and loop.min.dtype == loop.extent.dtype == loop.loop_var.dtype):
            return False
        if grid_vars and _uses_any(loop.extent, grid_vars):
            return False
        return True

    def _loop_head(self, node: S.For) -> str:
        args = self._start_stop(node.min, node.extent, node.loop_var.dtype)
        kwargs = []
        if node.kind == S.ForKind.THREAD_BINDING:
            tag = node.thread_binding.thread_tag if node.thread_binding is not None else ""
            kwargs.append(f"thread={json.dumps(tag)}")
        if node.annotations:
            kwargs.append(f"annotations={_attr_value(node.annotations, self)}")
        if node.kind == S.ForKind.SERIAL and not node.annotations:
            return f"range({', '.join(args)})"
        return f"T.{_LOOP_NAMES[node.kind]}({', '.join(args + kwargs)})"

    def _start_stop(self, lo: E.PrimExpr, ext: E.PrimExpr, dtype: str) -> list[str]:
        if _is_zero(lo) and lo.dtype == ext.dtype:
            return [self.expr(ext)]
        return [self.expr(lo), self._stop(lo, ext)]

    def _stop(self, lo: E.PrimExpr, ext: E.PrimExpr) -> str:
        """`lo + ext` as the parser reads it back (see `_range_of` there)."""
        if isinstance(lo, E.IntImm) and isinstance(ext, E.IntImm) and lo.dtype == ext.dtype:
            return self.expr(E.IntImm(ext.dtype, lo.value + ext.value))
        if _is_zero(lo) and lo.dtype == ext.dtype:
            return self.expr(ext)
        return f"{self.expr_p(lo, _P_ADD)} + {self.expr_p(ext, _P_ADD + 1)}"

    def s_BlockRealize(self, node: S.BlockRealize) -> None:
        block = node.block
        self.emit(f"with T.sblock({json.dumps(block.name_hint)}):")
        self.depth += 1
        self.namer.push()
        try:
            self._block_contents(node)
        finally:
            self.namer.pop()
            self.depth -= 1

    def _block_contents(self, node: S.BlockRealize) -> None:
        block = node.block
        self._iter_vars(block, node.iter_values)
        if not _is_true(node.predicate):
            self.emit(f"T.where({self.expr(node.predicate)})")
        self.emit(f"T.reads({', '.join(self.region(r) for r in block.reads)})")
        self.emit(f"T.writes({', '.join(self.region(r) for r in block.writes)})")
        if block.annotations:
            self.emit(f"T.sblock_attr({_attr_value(block.annotations, self)})")
        for buf in block.alloc_buffers:
            name = self.namer.define(buf, buf.name)
            self.emit(f"{name} = T.sblock_alloc_buffer({self.buffer_args(buf, False)})")
        for match in block.match_buffers:
            source = self.region(match.source)
            name = self.namer.define(match.buffer, match.buffer.name)
            self.emit(f"{name} = T.match_buffer({source}, {self.buffer_args(match.buffer, False, name)})")
        if block.init is not None:
            self.emit("with T.init():")
            self.body(block.init)
        self.stmt(block.body)

    def _iter_vars(self, block: S.Block, values: tuple[E.PrimExpr, ...]) -> None:
        """TVM's grouping: runs of block vars bound to enclosing loop vars over the loop's own
        range print as one `T.axis.remap`; a run of one prints like any other var."""
        run: list[int] = []

        def flush() -> None:
            if len(run) == 1:
                self._single_axis(block.iter_vars[run[0]], values[run[0]])
            elif run:
                rhs = ", ".join(self.expr(values[i]) for i in run)
                kinds = "".join("S" if block.iter_vars[i].iter_type == S.IterType.DATA_PAR else "R" for i in run)
                lhs = ", ".join(self.namer.define(block.iter_vars[i].var, block.iter_vars[i].var.name) for i in run)
                self.emit(f'{lhs} = T.axis.remap("{kinds}", [{rhs}])')
            run.clear()

        for i, (iv, value) in enumerate(zip(block.iter_vars, values)):
            if self._remappable(iv, value):
                run.append(i)
            else:
                flush()
                self._single_axis(iv, value)
        flush()

    def _remappable(self, iv: S.IterVar, value: E.PrimExpr) -> bool:
        if iv.iter_type not in (S.IterType.DATA_PAR, S.IterType.COMM_REDUCE):
            return False
        loop = self.loops.get(value) if isinstance(value, E.Var) else None
        if loop is None or iv.dom is None or iv.var.dtype != value.dtype:
            return False
        return _same(loop.min, iv.dom.min) and _same(loop.extent, iv.dom.extent)

    def _single_axis(self, iv: S.IterVar, value: E.PrimExpr) -> None:
        kind = _AXIS_NAMES.get(iv.iter_type)
        if kind is None:
            raise TypeError(f"cannot print a block var of iter type {iv.iter_type!r}")
        dom = iv.dom
        if dom is None:
            raise TypeError(f"block var {iv.var.name} has no domain")
        if _is_zero(dom.min) and dom.min.dtype == dom.extent.dtype:
            dom_text = self.expr(dom.extent)
        else:
            dom_text = f"({self.expr(dom.min)}, {self._stop(dom.min, dom.extent)})"
        if isinstance(value, E.IntImm) and value.dtype != iv.var.dtype:
            value_text = self.typed_literal(value)
        else:
            value_text = self.expr(value)
        widest = max(_bits(dom.min.dtype), _bits(dom.extent.dtype), 32)
        extra = f', dtype="{iv.var.dtype}"' if iv.var.dtype != f"int{widest}" else ""
        name = self.namer.define(iv.var, iv.var.name)
        self.emit(f"{name} = T.axis.{kind}({dom_text}, {value_text}{extra})")

    # ------------------------------------------------------------------ buffers and regions
    def buffer_args(self, buf: E.Buffer, dtype_always: bool, name: str | None = None) -> str:
        """The arguments of a buffer declaration. With the buffer's printed `name`, the
        variables the declaration itself defines print as TVM prints them: a new stride as a
        string (`strides=("d1", "d0")`, used as `C.strides[0]`), the elem_offset of a buffer
        with an offset_factor not at all (used as `C.elem_offset`), the data pointer as
        `C.data`."""
        parts = [self.shape_text(buf.shape)]
        if dtype_always or buf.dtype != "float32":
            parts.append(json.dumps(buf.dtype))
        auto_offset = name is not None and isinstance(buf.elem_offset, E.Var) and buf.offset_factor > 1 \
            and buf.elem_offset not in self.namer.names
        if name is not None:
            if buf.data is not None:
                self.namer.names[buf.data] = f"{name}.data"
            if auto_offset:
                assert buf.elem_offset is not None
                self.namer.names[buf.elem_offset] = f"{name}.elem_offset"
        if buf.strides:
            texts = []
            for i, stride in enumerate(buf.strides):
                if name is not None and isinstance(stride, E.Var) and stride not in self.namer.names:
                    texts.append(json.dumps(stride.name))
                    self.namer.names[stride] = f"{name}.strides[{i}]"
                else:
                    texts.append(self.expr(stride))
            parts.append(f"strides=({texts[0]},)" if len(texts) == 1 else f"strides=({', '.join(texts)})")
        if buf.elem_offset is not None and not auto_offset:
            parts.append(f"elem_offset={self.expr(buf.elem_offset)}")
        if buf.scope != "global":
            parts.append(f"scope={json.dumps(buf.scope)}")
        if buf.data_alignment != 64:
            parts.append(f"align={buf.data_alignment}")
        if buf.offset_factor != 1:
            parts.append(f"offset_factor={buf.offset_factor}")
        if buf.axis_separators:
            parts.append(f"axis_separators={list(buf.axis_separators)}")
        return ", ".join(parts)

    def shape_text(self, dims: tuple[E.PrimExpr, ...]) -> str:
        inner = ", ".join(self.expr(d) for d in dims)
        return f"({inner},)" if len(dims) == 1 else f"({inner})"

    def buffer_name(self, buf: E.Buffer) -> str:
        return self.namer.get(buf, buf.name)

    def load_text(self, buf: E.Buffer, indices: tuple[E.PrimExpr, ...]) -> str:
        if not indices:
            return f"{self.buffer_name(buf)}[()]"
        return f"{self.buffer_name(buf)}[{', '.join(self.expr(i) for i in indices)}]"

    def region(self, region: S.BufferRegion) -> str:
        parts = []
        for rng in region.region:
            ext = rng.extent
            if isinstance(ext, E.IntImm) and ext.value == 1 and ext.dtype == rng.min.dtype:
                parts.append(self.expr(rng.min))
            else:
                parts.append(f"{self.expr(rng.min)}:{self._stop(rng.min, ext)}")
        if not parts:
            return f"{self.buffer_name(region.buffer)}[()]"
        return f"{self.buffer_name(region.buffer)}[{', '.join(parts)}]"

    # ------------------------------------------------------------------ expressions
    def expr(self, node: E.PrimExpr) -> str:
        return self.expr_prec(node)[0]

    def expr_p(self, node: E.PrimExpr, min_prec: int) -> str:
        text, prec = self.expr_prec(node)
        return f"({text})" if prec < min_prec else text

    def typed_literal(self, node: E.PrimExpr) -> str:
        """An immediate spelled with its dtype (`T.int32(16)`, `T.bool(True)`), for places
        where a bare literal would be retyped or stay a Python value (attrs)."""
        if isinstance(node, E.IntImm):
            value = bool(node.value) if node.dtype == "bool" else node.value
            return f"T.{node.dtype}({value})"
        return self.expr(node)

    def expr_prec(self, node: E.PrimExpr) -> tuple[str, int]:
        method = _EXPR_DISPATCH.get(type(node))
        if method is None:
            for klass in type(node).__mro__:
                method = _EXPR_DISPATCH.get(klass)
                if method is not None:
                    break
            else:
                raise TypeError(f"cannot print expression {type(node).__name__}")
        return method(self, node)

    def _var(self, node: E.Var) -> tuple[str, int]:
        return self.namer.get(node, node.name), _P_ATOM

    def _int(self, node: E.IntImm) -> tuple[str, int]:
        if node.dtype == "int32":
            return str(node.value), (_P_UNARY if node.value < 0 else _P_ATOM)
        if node.dtype == "bool":
            return ("True" if node.value else "False"), _P_ATOM
        return f"T.{node.dtype}({node.value})", _P_ATOM

    def _float(self, node: E.FloatImm) -> tuple[str, int]:
        value = node.value
        if math.isfinite(value):
            text = repr(float(value))
        else:
            text = json.dumps("nan" if math.isnan(value) else ("inf" if value > 0 else "-inf"))
        return f"T.{node.dtype}({text})", _P_ATOM

    def _string(self, node: E.StringImm) -> tuple[str, int]:
        return json.dumps(node.value), _P_ATOM

    def _raw(self, ctor: str, node: E.BinaryOp) -> tuple[str, int]:
        typed = node.a.dtype != node.b.dtype
        a = self.typed_literal(node.a) if typed else self.expr(node.a)
        b = self.typed_literal(node.b) if typed else self.expr(node.b)
        return f"T.{ctor}({a}, {b})", _P_ATOM

    def _binary(self, node: E.BinaryOp) -> tuple[str, int]:
        cls = type(node)
        name = cls.__name__
        if isinstance(node, E.CmpOp):
            if isinstance(node, (E.And, E.Or)):
                ok = node.a.dtype == node.b.dtype == "bool" and not (_bare(node.a) and _bare(node.b))
                if not ok:
                    return self._raw(name, node)
                word, prec = ("and", _P_AND) if isinstance(node, E.And) else ("or", _P_OR)
                return f"{self.expr_p(node.a, prec)} {word} {self.expr_p(node.b, prec + 1)}", prec
            if node.a.dtype != node.b.dtype or (_bare(node.a) and _bare(node.b)):
                return self._raw(name, node)
            op = _CMP_SUGAR[cls]
            return f"{self.expr_p(node.a, _P_CMP + 1)} {op} {self.expr_p(node.b, _P_CMP + 1)}", _P_CMP
        if not ops.sugar_reads_back(node):
            return self._raw(name, node)
        if cls in _ARITH_SUGAR:
            op, prec = _ARITH_SUGAR[cls]
            return f"{self.expr_p(node.a, prec)} {op} {self.expr_p(node.b, prec + 1)}", prec
        if isinstance(node, E.Div):
            from msdb.ir.dtype import is_float

            if is_float(node.dtype):
                return f"{self.expr_p(node.a, _P_MUL)} / {self.expr_p(node.b, _P_MUL + 1)}", _P_MUL
            return self._raw("Div", node)
        if isinstance(node, E.Mod):
            return f"T.truncmod({self.expr(node.a)}, {self.expr(node.b)})", _P_ATOM
        if isinstance(node, E.Min):
            return f"T.min({self.expr(node.a)}, {self.expr(node.b)})", _P_ATOM
        if isinstance(node, E.Max):
            return f"T.max({self.expr(node.a)}, {self.expr(node.b)})", _P_ATOM
        return self._raw(name, node)

    def _not(self, node: E.Not) -> tuple[str, int]:
        if node.a.dtype != "bool" or _bare(node.a):
            return f"T.Not({self.typed_literal(node.a) if _bare(node.a) else self.expr(node.a)})", _P_ATOM
        return f"not {self.expr_p(node.a, _P_NOT)}", _P_NOT

    def _select(self, node: E.Select) -> tuple[str, int]:
        t, f = node.true_value, node.false_value
        typed = t.dtype != f.dtype
        tt = self.typed_literal(t) if typed else self.expr(t)
        ft = self.typed_literal(f) if typed else self.expr(f)
        return f"T.Select({self.expr(node.condition)}, {tt}, {ft})", _P_ATOM

    def _cast(self, node: E.Cast) -> tuple[str, int]:
        value = node.value
        text = self.typed_literal(value) if isinstance(value, E.IntImm) and value.dtype != "int32" else self.expr(value)
        return f'T.Cast("{node.dtype}", {text})', _P_ATOM

    def _load(self, node: E.BufferLoad) -> tuple[str, int]:
        return self.load_text(node.buffer, node.indices), _P_ATOM

    def _call(self, node: E.Call) -> tuple[str, int]:
        op, args, dtype = node.op, node.args, node.dtype
        n = len(args)
        if op in UNARY_MATH and n == 1 and args[0].dtype == dtype:
            return f"T.{op}({self.expr(args[0])})", _P_ATOM
        if op in UNARY_PRED and n == 1 and dtype == "bool":
            return f"T.{op}({self.expr(args[0])})", _P_ATOM
        if op in BINARY_MATH and n == 2 and args[0].dtype == args[1].dtype == dtype:
            return f"T.{op}({self.expr(args[0])}, {self.expr(args[1])})", _P_ATOM
        if op == "if_then_else" and n == 3:
            c, t, f = args
            if (
                c.dtype == "bool" and not isinstance(c, E.IntImm)
                and t.dtype == f.dtype == dtype
            ):
                return f"T.if_then_else({self.expr(c)}, {self.expr(t)}, {self.expr(f)})", _P_ATOM
        if op == "likely" and n == 1 and dtype == "bool" and args[0].dtype == "bool" and not _bare(args[0]):
            return f"T.likely({self.expr(args[0])})", _P_ATOM
        if op in _BIT_SUGAR and n == 2 and args[0].dtype == args[1].dtype == dtype and not (
            _bare(args[0]) and _bare(args[1])
        ):
            sym, prec = _BIT_SUGAR[op]
            return f"{self.expr_p(args[0], prec)} {sym} {self.expr_p(args[1], prec + 1)}", prec
        if op == "bitwise_not" and n == 1 and args[0].dtype == dtype and not _bare(args[0]):
            return f"~{self.expr_p(args[0], _P_UNARY)}", _P_UNARY
        if op in HANDLE_BUILTINS and dtype == "handle":
            return f"T.{op}({', '.join(self._intrin_arg(a) for a in args)})", _P_ATOM
        if op == "type_annotation" and n == 0:
            return f'T.type_annotation("{dtype}")', _P_ATOM
        if op in ("call_extern", "call_pure_extern") and n >= 1 and isinstance(args[0], E.StringImm):
            rest = "".join(", " + self._intrin_arg(a) for a in args[1:])
            return f'T.{op}("{dtype}", {json.dumps(args[0].value)}{rest})', _P_ATOM
        rest = "".join(", " + self._intrin_arg(a) for a in args)
        return f'T.call_intrin("{dtype}", {json.dumps("tir." + op)}{rest})', _P_ATOM

    def _intrin_arg(self, arg: E.PrimExpr) -> str:
        # call_intrin arguments have no partner to take a dtype from: int32/bool literals are
        # read back as int32/bool, others need their dtype spelled out (typed_literal does).
        return self.typed_literal(arg) if isinstance(arg, E.IntImm) and not _bare(arg) else self.expr(arg)


_EXPR_DISPATCH: dict[type, Callable[[_FuncPrinter, Any], tuple[str, int]]] = {
    E.Var: _FuncPrinter._var,
    E.IntImm: _FuncPrinter._int,
    E.FloatImm: _FuncPrinter._float,
    E.StringImm: _FuncPrinter._string,
    E.BinaryOp: _FuncPrinter._binary,
    E.Not: _FuncPrinter._not,
    E.Select: _FuncPrinter._select,
    E.Cast: _FuncPrinter._cast,
    E.BufferLoad: _FuncPrinter._load,
    E.Call: _FuncPrinter._call,
}


def _attr_value(value: Any, printer: _FuncPrinter) -> str:
    """An attribute or annotation value: Python values as Python literals, IR immediates with
    their dtype spelled out so they read back as IR immediates."""
    if isinstance(value, bool) or value is None:
        return repr(value)
    if isinstance(value, int):
        return repr(value)
    if isinstance(value, float):
        if math.isfinite(value):
            return repr(value)
        return f'T.float64({json.dumps("nan" if math.isnan(value) else ("inf" if value > 0 else "-inf"))})'
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, E.PrimExpr):
        return printer.typed_literal(value)
    if isinstance(value, Mapping):
        items = ", ".join(f"{json.dumps(k)}: {_attr_value(v, printer)}" for k, v in value.items())
        return "{" + items + "}"
    if isinstance(value, tuple):
        inner = ", ".join(_attr_value(v, printer) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, list):
        return "[" + ", ".join(_attr_value(v, printer) for v in value) + "]"
    raise TypeError(f"cannot print attribute value {value!r}")


def _bits(dtype: str) -> int:
    from msdb.ir.dtype import bits

    return bits(dtype)


def _uses_any(expr: E.PrimExpr, variables: set[E.Var]) -> bool:
    stack = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, E.Var):
            if node in variables:
                return True
        elif isinstance(node, E.BinaryOp):
            stack.extend((node.a, node.b))
        elif isinstance(node, (E.Not,)):
            stack.append(node.a)
        elif isinstance(node, E.Cast):
            stack.append(node.value)
        elif isinstance(node, E.Select):
            stack.extend((node.condition, node.true_value, node.false_value))
        elif isinstance(node, E.Call):
            stack.extend(node.args)
        elif isinstance(node, E.BufferLoad):
            stack.extend(node.indices)
    return False


def _declared_vars(buf: E.Buffer) -> list[E.Var]:
    """The variables a tensor intrinsic's buffer declaration defines (module docstring of
    msdb.ir.script.parse_buffer): its data pointer, named strides, automatic elem_offset."""
    if buf.data is None:
        return []
    out = [buf.data] + [s for s in buf.strides if isinstance(s, E.Var)]
    if isinstance(buf.elem_offset, E.Var) and buf.offset_factor > 1:
        out.append(buf.elem_offset)
    return out


def _buffer_uses_vars(buf: E.Buffer) -> bool:
    declared = _declared_vars(buf)
    exprs: list[E.PrimExpr] = list(buf.shape) + [s for s in buf.strides if s not in declared]
    if buf.elem_offset is not None and buf.elem_offset not in declared:
        exprs.append(buf.elem_offset)
    return any(not isinstance(e, E.IntImm) for e in exprs)


def _collect_vars(func: PrimFunc) -> tuple[set[E.Var], list[E.Var]]:
    """(variables the function defines, variables it uses without defining, in first-use
    order): the latter print as `n = T.int32()` declarations."""
    from msdb.ir.functor import IRVisitor

    defined: set[E.Var] = set(func.params)
    used: dict[E.Var, None] = {}

    class Collector(IRVisitor):
        visit_buffers = False

        def visit_Var(self, node: E.Var) -> None:
            used.setdefault(node, None)

        def visit_For(self, node: S.For) -> None:
            defined.add(node.loop_var)
            super().visit_For(node)

        def visit_IterVar(self, node: S.IterVar) -> None:
            defined.add(node.var)
            super().visit_IterVar(node)

        def visit_LetStmt(self, node: S.LetStmt) -> None:
            defined.add(node.var)
            super().visit_LetStmt(node)

        def visit_Block(self, node: S.Block) -> None:
            for buf in node.alloc_buffers:
                self.buffer(buf)
            for match in node.match_buffers:
                self.buffer(match.buffer)
            super().visit_Block(node)

        def buffer(self, buf: E.Buffer) -> None:
            defined.update(_declared_vars(buf))
            for dim in _buffer_exprs(buf):
                self.visit(dim)

    collector = Collector()
    for param in func.params:
        buf = func.buffer_map.get(param)
        if buf is not None:
            collector.buffer(buf)
    collector.visit(func.body)
    return defined, [v for v in used if v not in defined]


def _buffer_exprs(buf: E.Buffer) -> Iterable[E.PrimExpr]:
    yield from buf.shape
    yield from buf.strides
    if buf.elem_offset is not None:
        yield buf.elem_offset
