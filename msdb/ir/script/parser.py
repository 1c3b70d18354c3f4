"""Read the TVMScript subset into msdb IR, with Python's `ast` (the text is never executed).

Accepts what TVM's printers write (0.2x: `T.block`, `T.alloc_buffer`, `T.Buffer[...]`; 0.24+:
`T.sblock`, `T.sblock_alloc_buffer`, `@T.prim_func(s_tir=True)`) and what TVM's tutorials
write by hand. It builds the IR TVM's own parser would build: the same literal typing, type
promotion and constant folding (see `ops`), a root block wrapped around a body that has none,
`global_symbol` set from the function name unless `private=True`, `s_tir` from the decorator,
and regions inferred for blocks that state no `T.reads`/`T.writes`.

Every problem in the text is a `ScriptError` carrying the 1-based line and column of the
offending source, never a bare Python exception: users hand us these files.

This module reads the module and function level; statements, buffers and expressions are
layers of their own (`parse_stmt`, `parse_buffer`, `parse_expr`, over `parse_scope`; see
docs/architecture.md, "TVMScript parser").
"""

from __future__ import annotations

import ast
import logging
import textwrap
import warnings
from typing import Any, NoReturn

from msdb.errors import ScriptError
from msdb.ir import expr as E
from msdb.ir import stmt as S
from msdb.ir.function import IRModule, PrimFunc
from msdb.ir.script.parse_scope import ALLOC_FUNCS, BLOCK_FUNCS, DTYPE_NAMES, FuncFrame, dotted
from msdb.ir.script.parse_stmt import StmtParser, const_true

logger = logging.getLogger(__name__)


class _Source:
    """The text being parsed and how to turn an AST position into a ScriptError."""

    def __init__(self, text: str, name: str) -> None:
        self.name = name
        self.col_shift = 0
        lines = text.splitlines()
        indents = [len(ln) - len(ln.lstrip()) for ln in lines if ln.strip()]
        common = min(indents) if indents else 0
        if common:
            # Scripts pasted from an indented context (a docstring, a test) parse as written;
            # columns are reported against the original text.
            text = textwrap.dedent(text)
            self.col_shift = common
        self.text = text

    def error(self, node: ast.AST | None, message: str) -> NoReturn:
        line = getattr(node, "lineno", None)
        col = getattr(node, "col_offset", None)
        column = None if col is None else col + 1 + self.col_shift
        raise ScriptError(message, line, column, self.name)


def from_script(text: str, source_name: str = "<script>") -> IRModule:
    """Parse TVMScript: a lone `@T.prim_func` becomes `{"main": f}`; an `@I.ir_module` class
    gives one function per method (module attrs from `I.module_attrs`)."""
    if not isinstance(text, str):
        raise ScriptError(f"expected TVMScript text, got {type(text).__name__}", None, None, source_name)
    src = _Source(text, source_name)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # SyntaxWarnings are Python's business, not the user's
            tree = ast.parse(src.text, filename=source_name)
    except SyntaxError as exc:
        col = exc.offset + src.col_shift if exc.offset is not None else None
        raise ScriptError(f"invalid Python syntax: {exc.msg}", exc.lineno, col, source_name) from None
    except (ValueError, RecursionError) as exc:  # null bytes, absurd nesting
        raise ScriptError(f"cannot read the script: {exc}", None, None, source_name) from None
    parser = ModuleParser(src)
    try:
        return parser.parse(tree)
    except ScriptError:
        raise
    except RecursionError:
        src.error(parser.current, "the script nests too deeply")
    except Exception as exc:  # a defect in this parser: still report where, never a bare error
        logger.exception("TVMScript parser failed")
        src.error(parser.current, f"internal error while parsing this statement ({type(exc).__name__}: {exc}); please report it")


class ModuleParser:
    def __init__(self, src: _Source) -> None:
        self.src = src
        self.t_names = {"T"}
        self.i_names = {"I"}
        self.current: ast.AST | None = None  # the statement being parsed, for error locations

    def parse(self, tree: ast.Module) -> IRModule:
        defs: list[ast.FunctionDef | ast.ClassDef] = []
        for stmt in tree.body:
            if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                self._note_import(stmt)
            elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
                continue  # module docstring
            elif isinstance(stmt, (ast.FunctionDef, ast.ClassDef)):
                defs.append(stmt)
            else:
                self.src.error(stmt, "expected a @T.prim_func function or an @I.ir_module class at top level")
        if len(defs) != 1:
            where = defs[1] if len(defs) > 1 else None
            self.src.error(where, f"expected exactly one @T.prim_func function or @I.ir_module class, found {len(defs)}")
        node = defs[0]
        if isinstance(node, ast.FunctionDef):
            func = self._function(node)
            return IRModule({"main": func})
        return self._class(node)

    def _note_import(self, stmt: ast.Import | ast.ImportFrom) -> None:
        # `from tvm.script import tir as T` (or tirx, or ir as I) declares the namespace aliases.
        if isinstance(stmt, ast.ImportFrom) and stmt.module in ("tvm.script", "tvm.script.parser"):
            for alias in stmt.names:
                target = alias.asname or alias.name
                if alias.name in ("tir", "tirx"):
                    self.t_names.add(target)
                elif alias.name == "ir":
                    self.i_names.add(target)

    def _is_ir_module(self, deco: ast.expr) -> bool:
        target = deco.func if isinstance(deco, ast.Call) else deco
        name = dotted(target)
        if name is None:
            return False
        head, _, attr = name.rpartition(".")
        return name == "ir_module" or (attr == "ir_module" and head in self.i_names | {"tvm.script", "tvm.script.ir"})

    def _class(self, node: ast.ClassDef) -> IRModule:
        if not any(self._is_ir_module(d) for d in node.decorator_list):
            self.src.error(node, f"class {node.name} needs the @I.ir_module decorator")
        functions: dict[str, PrimFunc] = {}
        attrs: dict[str, Any] = {}
        for stmt in node.body:
            if isinstance(stmt, ast.FunctionDef):
                if stmt.name in functions:
                    self.src.error(stmt, f"function {stmt.name} is defined twice in module {node.name}")
                functions[stmt.name] = self._function(stmt)
            elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
                continue
            elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and self._is_module_attrs(stmt.value.func):
                call = stmt.value
                if len(call.args) != 1 or call.keywords or not isinstance(call.args[0], ast.Dict):
                    self.src.error(call, "I.module_attrs takes one dict literal")
                attrs.update(_FunctionParser(self, "<module>").attr_dict(call.args[0]))
            elif isinstance(stmt, ast.Pass):
                continue
            else:
                self.src.error(stmt, "an @I.ir_module class may hold only @T.prim_func methods and I.module_attrs")
        if not functions:
            self.src.error(node, f"module {node.name} defines no @T.prim_func")
        return IRModule(functions, attrs)

    def _is_module_attrs(self, func: ast.expr) -> bool:
        name = dotted(func)
        if name is None:
            return False
        head, _, attr = name.rpartition(".")
        return attr == "module_attrs" and head in self.i_names

    def _function(self, node: ast.FunctionDef) -> PrimFunc:
        return _FunctionParser(self, node.name).function(node)


class _FunctionParser(StmtParser):
    """Parses one prim_func: its decorator, parameters and function-level headers; the body
    goes through the statement, buffer and expression layers (parse_stmt, parse_buffer,
    parse_expr)."""

    def function(self, node: ast.FunctionDef) -> PrimFunc:
        private, s_tir = self._decorator(node)
        params, buffer_map = self._params(node.args)
        frame = FuncFrame()
        self.direct = frame
        body_nodes = [s for s in node.body if not _is_docstring(s)]
        root_node = self._root_candidate(body_nodes)
        stmts = self.block_body(body_nodes, root_node=root_node, buffer_map=buffer_map)
        if self.saw_block and self.stray_store is not None:
            where, buf = self.stray_store
            self.err(where, f"store to {buf} outside a block: in a function with blocks every buffer store must be inside a T.sblock")
        body = S.seq(*stmts) if stmts else S.Evaluate(E.IntImm("int32", 0))
        is_root = (
            not frame.root_allocs
            and isinstance(body, S.BlockRealize)
            and not body.block.iter_vars
        )
        if not is_root:
            root = S.Block((), (), (), "root", body, None, tuple(frame.root_allocs))
            body = S.BlockRealize((), const_true(), root)
        attrs = dict(frame.attrs)
        if private:
            if "global_symbol" in attrs:
                self.err(node, f"private function {self.name} must not set a global_symbol attribute")
        elif "global_symbol" not in attrs:
            attrs["global_symbol"] = self.name
        if s_tir is not None:
            attrs["s_tir"] = s_tir
        return PrimFunc(tuple(params), buffer_map, body, attrs)

    def _decorator(self, node: ast.FunctionDef) -> tuple[bool, bool | None]:
        private, s_tir = False, None
        found = False
        for deco in node.decorator_list:
            target = deco.func if isinstance(deco, ast.Call) else deco
            if self.t_func(target) != "prim_func":
                self.err(deco, "only @T.prim_func functions are supported")
            found = True
            if isinstance(deco, ast.Call):
                if deco.args:
                    self.err(deco.args[0], "@T.prim_func takes keyword arguments only")
                for kw in deco.keywords:
                    value = kw.value
                    if not (isinstance(value, ast.Constant) and isinstance(value.value, bool)):
                        self.err(value, f"@T.prim_func({kw.arg}=...) expects True or False")
                    if kw.arg == "private":
                        private = value.value
                    elif kw.arg == "s_tir":
                        s_tir = value.value if value.value else None
                    elif kw.arg == "check_well_formed":
                        pass
                    else:
                        self.err(kw, f"unknown @T.prim_func option {kw.arg!r} (expected private, s_tir or check_well_formed)")
        if not found:
            self.err(node, f"function {node.name} needs the @T.prim_func decorator")
        return private, s_tir

    def _params(self, args: ast.arguments) -> tuple[list[E.Var], dict[E.Var, E.Buffer]]:
        if args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs or args.defaults:
            self.err(args.vararg or args.kwarg or (args.kwonlyargs or args.posonlyargs or args.defaults)[0],
                     "prim_func parameters must be plain annotated names")
        params: list[E.Var] = []
        buffer_map: dict[E.Var, E.Buffer] = {}
        for arg in args.args:
            ann = arg.annotation
            if ann is None:
                self.err(arg, f"parameter '{arg.arg}' needs an annotation (T.Buffer(...), T.handle or a dtype such as T.int32)")
            if arg.arg in self.scopes[0]:
                self.err(arg, f"duplicate parameter '{arg.arg}'")
            buffer = self._buffer_annotation(ann, arg.arg)
            if buffer is not None:
                handle = E.Var(arg.arg + "_handle", "handle")
                params.append(handle)
                buffer_map[handle] = buffer
                self.define(arg.arg, buffer)
                continue
            name = self.t_func(ann)
            if name == "handle" or name in DTYPE_NAMES:
                var = E.Var(arg.arg, "handle" if name == "handle" else name)
                params.append(var)
                self.define(arg.arg, var)
                if name != "handle":
                    self.size_vars.add(var)
                continue
            self.err(ann, f"unsupported annotation for parameter '{arg.arg}': expected T.Buffer(...), T.handle or a scalar dtype")
        return params, buffer_map

    def _root_candidate(self, body: list[ast.stmt]) -> ast.With | None:
        """The `with T.sblock(...)` that will be the root block: the function's only statement
        apart from function-level headers, with no function-level allocations and no block
        vars of its own (TVM's ScriptComplete rule). Its regions are never inferred."""
        rest = [s for s in body if not self._is_func_header(s)]
        if any(self._is_alloc(s) for s in body) or len(rest) != 1:
            return None
        stmt = rest[0]
        if not (isinstance(stmt, ast.With) and len(stmt.items) == 1):
            return None
        call = stmt.items[0].context_expr
        if not (isinstance(call, ast.Call) and self.t_func(call.func) in BLOCK_FUNCS):
            return None
        for inner in stmt.body:
            if isinstance(inner, ast.Assign) and isinstance(inner.value, ast.Call):
                fname = self.t_func(inner.value.func) or ""
                if fname.startswith("axis."):
                    return None
        return stmt

    def _is_func_header(self, stmt: ast.stmt) -> bool:
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            return self.t_func(stmt.value.func) == "func_attr"
        if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call):
            name = self.t_func(stmt.value.func)
            if name in ALLOC_FUNCS or name == "match_buffer":
                return True
            if name in DTYPE_NAMES and not stmt.value.args and not stmt.value.keywords:
                return True
        return False

    def _is_alloc(self, stmt: ast.stmt) -> bool:
        return (
            isinstance(stmt, ast.Assign)
            and isinstance(stmt.value, ast.Call)
            and self.t_func(stmt.value.func) in ALLOC_FUNCS
        )


def _is_docstring(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)
