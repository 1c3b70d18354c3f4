"""Read the TVMScript subset into msdb IR, with Python's `ast` (the text is never executed).

Accepts what TVM's printers write (0.2x: `T.block`, `T.alloc_buffer`, `T.Buffer[...]`; 0.24+:
`T.sblock`, `T.sblock_alloc_buffer`, `@T.prim_func(s_tir=True)`) and what TVM's tutorials
write by hand. It builds the IR TVM's own parser would build: the same literal typing, type
promotion and constant folding (see `ops`), a root block wrapped around a body that has none,
`global_symbol` set from the function name unless `private=True`, `s_tir` from the decorator,
and regions inferred for blocks that state no `T.reads`/`T.writes`.

Every problem in the text is a `ScriptError` carrying the 1-based line and column of the
offending source, never a bare Python exception: users hand us these files.
"""

from __future__ import annotations

import ast
import logging
import math
import textwrap
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, NoReturn

from msdb.errors import ScriptError
from msdb.ir import expr as E
from msdb.ir import stmt as S
from msdb.ir.dtype import default_int_dtype, is_float, is_int, is_integer_like, is_uint, is_valid
from msdb.ir.function import IRModule, PrimFunc
from msdb.ir.script import ops

logger = logging.getLogger(__name__)


def _true() -> E.PrimExpr:
    return E.IntImm("bool", 1)


_DTYPE_NAMES = frozenset(
    ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
     "float16", "float32", "float64", "bfloat16"]
)

_UNARY_MATH = frozenset(
    ["exp", "exp2", "exp10", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "sin", "cos",
     "tan", "sinh", "cosh", "tanh", "asin", "acos", "atan", "asinh", "acosh", "atanh",
     "sigmoid", "erf", "floor", "ceil", "round", "trunc", "nearbyint", "fabs"]
)
_UNARY_PRED = frozenset(["isnan", "isinf", "isfinite"])
_BINARY_MATH = frozenset(["pow", "fmod", "atan2", "hypot", "copysign", "nextafter", "ldexp"])

_FOLDING_FUNCS: dict[str, type] = {
    "max": E.Max, "min": E.Min, "floordiv": E.FloorDiv, "floormod": E.FloorMod,
    "truncdiv": E.Div, "truncmod": E.Mod, "indexdiv": E.FloorDiv, "indexmod": E.FloorMod,
}
_RAW_CTORS: dict[str, type] = {
    "Add": E.Add, "Sub": E.Sub, "Mul": E.Mul, "Div": E.Div, "Mod": E.Mod,
    "FloorDiv": E.FloorDiv, "FloorMod": E.FloorMod, "Min": E.Min, "Max": E.Max,
    "EQ": E.EQ, "NE": E.NE, "LT": E.LT, "LE": E.LE, "GT": E.GT, "GE": E.GE,
    "And": E.And, "Or": E.Or,
}
_CMP_OPS: dict[type, type] = {
    ast.Eq: E.EQ, ast.NotEq: E.NE, ast.Lt: E.LT, ast.LtE: E.LE, ast.Gt: E.GT, ast.GtE: E.GE,
}
_ARITH_OPS: dict[type, type] = {
    ast.Add: E.Add, ast.Sub: E.Sub, ast.Mult: E.Mul, ast.Div: E.Div,
    ast.FloorDiv: E.FloorDiv, ast.Mod: E.FloorMod,
}
_BIT_OPS: dict[type, str] = {
    ast.BitAnd: "bitwise_and", ast.BitOr: "bitwise_or", ast.BitXor: "bitwise_xor",
    ast.LShift: "shift_left", ast.RShift: "shift_right",
}
_LOOP_KINDS = {
    "serial": S.ForKind.SERIAL, "parallel": S.ForKind.PARALLEL,
    "vectorized": S.ForKind.VECTORIZED, "unroll": S.ForKind.UNROLLED,
    "thread_binding": S.ForKind.THREAD_BINDING,
}
_AXIS_KINDS = {
    "spatial": S.IterType.DATA_PAR, "S": S.IterType.DATA_PAR,
    "reduce": S.IterType.COMM_REDUCE, "R": S.IterType.COMM_REDUCE,
    "scan": S.IterType.ORDERED, "opaque": S.IterType.OPAQUE,
}
_BLOCK_FUNCS = frozenset(["block", "sblock"])
_ALLOC_FUNCS = frozenset(["alloc_buffer", "sblock_alloc_buffer"])
_BLOCK_ATTR_FUNCS = frozenset(["block_attr", "sblock_attr"])
_HEADER_FUNCS = frozenset(["reads", "writes", "where"]) | _BLOCK_ATTR_FUNCS


@dataclass(frozen=True)
class _VarDecl:
    """`T.int32()` with no argument: declares a (size) variable of this dtype."""

    dtype: str


@dataclass(frozen=True)
class _DType:
    """`T.float32` used as a value (an annotation or a dtype argument)."""

    dtype: str


@dataclass
class _BlockFrame:
    """What the header statements of one `with T.sblock(...)` collect."""

    name: str
    is_root: bool
    iter_vars: list[S.IterVar] = field(default_factory=list)
    iter_values: list[E.PrimExpr] = field(default_factory=list)
    predicate: E.PrimExpr | None = None
    reads: tuple[S.BufferRegion, ...] | None = None
    writes: tuple[S.BufferRegion, ...] | None = None
    annotations: dict[str, Any] = field(default_factory=dict)
    alloc_buffers: list[E.Buffer] = field(default_factory=list)
    match_buffers: list[S.MatchBufferRegion] = field(default_factory=list)
    init: S.Stmt | None = None
    init_node: ast.AST | None = None


@dataclass
class _FuncFrame:
    """What the function-level header statements collect."""

    attrs: dict[str, Any] = field(default_factory=dict)
    root_allocs: list[E.Buffer] = field(default_factory=list)


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
    parser = _ModuleParser(src)
    try:
        return parser.parse(tree)
    except ScriptError:
        raise
    except RecursionError:
        src.error(parser.current, "the script nests too deeply")
    except Exception as exc:  # a defect in this parser: still report where, never a bare error
        logger.exception("TVMScript parser failed")
        src.error(parser.current, f"internal error while parsing this statement ({type(exc).__name__}: {exc}); please report it")


class _ModuleParser:
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
        name = _dotted(target)
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
        name = _dotted(func)
        if name is None:
            return False
        head, _, attr = name.rpartition(".")
        return attr == "module_attrs" and head in self.i_names

    def _function(self, node: ast.FunctionDef) -> PrimFunc:
        return _FunctionParser(self, node.name).function(node)


def _dotted(node: ast.expr) -> str | None:
    """`a.b.c` as a string, or None when the node is not a plain dotted name."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


class _FunctionParser:
    """Parses one prim_func. Scopes mirror TVMScript's: loop, block, `if` and `init` bodies
    each open one, so sibling loops may reuse names."""

    def __init__(self, module: _ModuleParser, name: str) -> None:
        self.module = module
        self.src = module.src
        self.name = name
        self.scopes: list[dict[str, Any]] = [{}]
        self.size_vars: set[E.Var] = set()
        self.loops: dict[E.Var, E.Range] = {}  # enclosing loops, for T.axis.remap
        self.direct: _BlockFrame | _FuncFrame | None = None  # frame header statements go to
        self.block_depth = 0  # enclosing non-root blocks
        self.saw_block = False
        self.stray_store: tuple[ast.AST, str] | None = None
        self.in_init = False

    # ------------------------------------------------------------------ errors and names
    def err(self, node: ast.AST | None, message: str) -> NoReturn:
        self.src.error(node, message)

    def lookup(self, name: str, node: ast.AST) -> Any:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        if name in self.module.t_names:
            self.err(node, f"{name} is the TVMScript namespace; call a function of it (e.g. {name}.float32(0))")
        self.err(node, f"undefined variable '{name}'")

    def define(self, name: str, value: Any) -> None:
        self.scopes[-1][name] = value

    def t_func(self, node: ast.expr) -> str | None:
        """The name after the `T.` prefix (`T.axis.remap` -> "axis.remap"), else None."""
        name = _dotted(node)
        if name is None:
            return None
        head, _, rest = name.partition(".")
        if head in self.module.t_names and rest and not self._shadowed(head):
            return rest
        return None

    def _shadowed(self, name: str) -> bool:
        return any(name in scope for scope in self.scopes)

    # ------------------------------------------------------------------ function
    def function(self, node: ast.FunctionDef) -> PrimFunc:
        private, s_tir = self._decorator(node)
        params, buffer_map = self._params(node.args)
        frame = _FuncFrame()
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
            body = S.BlockRealize((), _true(), root)
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
            if name == "handle" or name in _DTYPE_NAMES:
                var = E.Var(arg.arg, "handle" if name == "handle" else name)
                params.append(var)
                self.define(arg.arg, var)
                if name != "handle":
                    self.size_vars.add(var)
                continue
            self.err(ann, f"unsupported annotation for parameter '{arg.arg}': expected T.Buffer(...), T.handle or a scalar dtype")
        return params, buffer_map

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
        if not (isinstance(call, ast.Call) and self.t_func(call.func) in _BLOCK_FUNCS):
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
            if name in _ALLOC_FUNCS or name == "match_buffer":
                return True
            if name in _DTYPE_NAMES and not stmt.value.args and not stmt.value.keywords:
                return True
        return False

    def _is_alloc(self, stmt: ast.stmt) -> bool:
        return (
            isinstance(stmt, ast.Assign)
            and isinstance(stmt.value, ast.Call)
            and self.t_func(stmt.value.func) in _ALLOC_FUNCS
        )

    # ------------------------------------------------------------------ statements
    def block_body(self, nodes: list[ast.stmt], **ctx: Any) -> list[S.Stmt]:
        """Statements of one body, in order; a scalar assignment (LetStmt) takes the rest of
        the body as its scope."""
        out: list[S.Stmt] = []
        for i, node in enumerate(nodes):
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and self._is_let(node):
                var, value = self._let(node)
                self.scopes.append({var.name: var})
                try:
                    rest = self.block_body(nodes[i + 1:], **ctx)
                finally:
                    self.scopes.pop()
                body = S.seq(*rest) if rest else S.Evaluate(E.IntImm("int32", 0))
                out.append(S.LetStmt(var, value, body))
                return out
            stmt = self.statement(node, **ctx)
            if stmt is not None:
                out.append(stmt)
        return out

    def statement(self, node: ast.stmt, root_node: ast.With | None = None, **ctx: Any) -> S.Stmt | None:
        self.module.current = node
        if isinstance(node, ast.For):
            return self._for(node)
        if isinstance(node, ast.With):
            return self._with(node, is_root=node is root_node)
        if isinstance(node, ast.If):
            return self._if(node)
        if isinstance(node, ast.Assign):
            return self._assign(node, **ctx)
        if isinstance(node, ast.AugAssign):
            return self._aug_assign(node)
        if isinstance(node, ast.Expr):
            return self._expr_stmt(node)
        if isinstance(node, ast.Pass):
            return None
        if isinstance(node, ast.AnnAssign):
            self.err(node, "annotated assignments must assign a scalar: `x: T.int32 = value`")
        kind = type(node).__name__.lower()
        self.err(node, f"'{kind}' statements are not supported in TVMScript")

    def _is_let(self, node: ast.Assign | ast.AnnAssign) -> bool:
        if isinstance(node, ast.AnnAssign):
            return isinstance(node.target, ast.Name)
        if len(node.targets) != 1 or not isinstance(node.targets[0], ast.Name):
            return False
        value = node.value
        if isinstance(value, ast.Call):
            name = self.t_func(value.func)
            if name is not None and (
                name.startswith("axis.") or name in _ALLOC_FUNCS or name == "match_buffer"
                or (name in _DTYPE_NAMES and not value.args and not value.keywords)
                or name == "handle"
            ):
                return False
        return True

    def _let(self, node: ast.Assign | ast.AnnAssign) -> tuple[E.Var, E.PrimExpr]:
        if isinstance(node, ast.AnnAssign):
            if node.value is None:
                self.err(node, "a scalar declaration needs a value: `x: T.int32 = value`")
            if not isinstance(node.target, ast.Name):
                self.err(node.target, "a scalar declaration assigns a plain name")
            dtype_name = self.t_func(node.annotation)
            if dtype_name not in _DTYPE_NAMES:
                self.err(node.annotation, "expected a scalar dtype annotation such as T.int32 or T.float32")
            value = self.expr(node.value)
            if value.dtype != dtype_name:
                value = ops.cast(dtype_name, value) if isinstance(value, (E.IntImm, E.FloatImm)) else value
                if value.dtype != dtype_name:
                    self.err(node.value, f"value of dtype {value.dtype} assigned to '{node.target.id}: T.{dtype_name}'")
            return E.Var(node.target.id, dtype_name), value
        target = node.targets[0]
        if not isinstance(target, ast.Name):
            self.err(target, "a scalar binding assigns a plain name")
        value = self.expr(node.value)
        return E.Var(target.id, value.dtype), value

    def _for(self, node: ast.For) -> S.Stmt:
        if node.orelse:
            self.err(node.orelse[0], "for ... else is not supported")
        it = node.iter
        if not isinstance(it, ast.Call):
            self.err(it, "loops must iterate over range(...), T.grid(...) or a T. loop kind")
        names = self._loop_targets(node.target)
        fname = _dotted(it.func)
        tname = self.t_func(it.func)
        loops: list[tuple[E.Var, E.PrimExpr, E.PrimExpr, S.ForKind, S.IterVar | None, dict]] = []
        if fname == "range" and not self._shadowed("range"):
            if it.keywords:
                self.err(it.keywords[0], "range() takes no keyword arguments")
            lo, ext = self._start_stop(it, it.args, "range")
            loops.append((self._loop_var(names, 0, 1, node, ext), lo, ext, S.ForKind.SERIAL, None, {}))
        elif tname == "grid":
            if it.keywords:
                self.err(it.keywords[0], "T.grid takes no keyword arguments")
            if len(it.args) != len(names):
                self.err(it, f"T.grid has {len(it.args)} extents but the loop names {len(names)} variables")
            for k, arg in enumerate(it.args):
                ext = self._int_expr(arg, "a loop extent")
                lo = E.make_const(0, ext.dtype)
                loops.append((self._loop_var(names, k, len(names), node, ext), lo, ext, S.ForKind.SERIAL, None, {}))
        elif tname in _LOOP_KINDS:
            kind = _LOOP_KINDS[tname]
            kwargs = self.keywords(it)
            args = list(it.args)
            thread = None
            if kind == S.ForKind.THREAD_BINDING:
                if "thread" in kwargs:
                    thread = kwargs.pop("thread")
                elif args and isinstance(args[-1], ast.Constant) and isinstance(args[-1].value, str):
                    thread = (args[-1].value, args[-1])
                    args = args[:-1]
                if thread is None or not isinstance(thread[0], str):
                    self.err(it, 'T.thread_binding needs thread="threadIdx.x" (or another thread tag)')
            annotations = {}
            if "annotations" in kwargs:
                ann_value, ann_node = kwargs.pop("annotations")
                annotations = self._annotation_map(ann_value, ann_node)
            for key, (_, kw_node) in kwargs.items():
                self.err(kw_node, f"T.{tname} got an unsupported keyword argument {key!r}")
            lo, ext = self._start_stop(it, args, f"T.{tname}")
            var = self._loop_var(names, 0, 1, node, ext)
            binding = None
            if thread is not None:
                binding = S.IterVar(None, E.Var("iter", var.dtype), S.IterType.THREAD_INDEX, thread[0])
            loops.append((var, lo, ext, kind, binding, annotations))
        else:
            self.err(it, "loops must iterate over range(...), T.grid(...), T.serial/parallel/vectorized/unroll/thread_binding(...)")
        scope = {}
        for (var, lo, ext, *_rest), name in zip(loops, names):
            scope[name] = var
            self.loops[var] = E.Range(lo, ext)
        self.scopes.append(scope)
        saved = self.direct
        self.direct = None
        try:
            stmts = self.block_body(node.body)
        finally:
            self.direct = saved
            self.scopes.pop()
            for var, *_ in loops:
                self.loops.pop(var, None)
        body = S.seq(*stmts) if stmts else S.Evaluate(E.IntImm("int32", 0))
        for var, lo, ext, kind, binding, annotations in reversed(loops):
            body = S.For(var, lo, ext, kind, body, binding, annotations)
        return body

    def _loop_targets(self, target: ast.expr) -> list[str]:
        if isinstance(target, ast.Name):
            return [target.id]
        if isinstance(target, (ast.Tuple, ast.List)):
            names = [t.id for t in target.elts if isinstance(t, ast.Name)]
            if len(names) == len(target.elts):
                return names
        self.err(target, "loop variables must be plain names")

    def _loop_var(self, names: list[str], k: int, n: int, node: ast.For, ext: E.PrimExpr) -> E.Var:
        if len(names) != n:
            self.err(node.target, f"this loop defines {n} variable(s) but names {len(names)}")
        return E.Var(names[k], ext.dtype)

    def _start_stop(self, call: ast.Call, args: list[ast.expr], what: str) -> tuple[E.PrimExpr, E.PrimExpr]:
        if len(args) == 1:
            ext = self._int_expr(args[0], "a loop extent")
            return E.make_const(0, ext.dtype), ext
        if len(args) == 2:
            return self._range_of(args[0], args[1], "a loop bound")
        self.err(call, f"{what} takes an extent or a start and a stop (got {len(args)} arguments; steps are not supported)")

    def _range_of(self, start_node: ast.expr, stop_node: ast.expr, what: str) -> tuple[E.PrimExpr, E.PrimExpr]:
        """(min, extent) of `start:stop`. The printer writes `m:m + e` for a symbolic start;
        reading `e` back directly keeps the extent exactly as it was."""
        start = self._int_value(start_node, what)
        if (
            isinstance(stop_node, ast.BinOp)
            and isinstance(stop_node.op, ast.Add)
            and ast.dump(stop_node.left) == ast.dump(start_node)
        ):
            ext = self._int_value(stop_node.right, what)
        else:
            stop = self._int_value(stop_node, what)
            if isinstance(stop, int) and isinstance(start, int):
                ext = stop - start
            else:
                ext = ops.arith(E.Sub, stop, start)
        lo, ext_e = ops.operands(start, ext)
        lo, ext_e = ops.match_types(lo, ext_e)
        return lo, ext_e

    def _with(self, node: ast.With, is_root: bool = False) -> S.Stmt | None:
        if len(node.items) != 1:
            self.err(node, "with-statements take one T.sblock(...), T.init() or T.LetStmt(...)")
        item = node.items[0]
        call = item.context_expr
        name = self.t_func(call.func) if isinstance(call, ast.Call) else None
        if name in _BLOCK_FUNCS:
            if item.optional_vars is not None:
                self.err(item.optional_vars, "`with T.sblock(...) as ...` is the pre-0.9 block syntax; use T.axis.* inside the block")
            return self._block(node, call, is_root)  # type: ignore[arg-type]
        if name == "init":
            self._init(node, call)  # type: ignore[arg-type]
            return None
        if name == "LetStmt":
            return self._let_with(node, call, item.optional_vars)  # type: ignore[arg-type]
        self.err(call, "expected `with T.sblock(...)`, `with T.block(...)`, `with T.init()` or `with T.LetStmt(...) as x`")

    def _block(self, node: ast.With, call: ast.Call, is_root: bool) -> S.Stmt:
        kwargs = self.keywords(call)
        if "no_realize" in kwargs:
            self.err(kwargs["no_realize"][1], "blocks without realize (no_realize=True) are not supported")
        for key, (_, kw_node) in kwargs.items():
            self.err(kw_node, f"unknown keyword argument {key!r} for a block")
        if len(call.args) > 1:
            self.err(call.args[1], "a block takes one argument, its name")
        if call.args:
            name = self.value(call.args[0])
            if not isinstance(name, str):
                self.err(call.args[0], "the block name must be a string")
        else:
            name = ""
        frame = _BlockFrame(name=name, is_root=is_root)
        if not is_root:
            self.saw_block = True
            self.block_depth += 1
        self.scopes.append({})
        saved = self.direct
        self.direct = frame
        try:
            stmts = self.block_body(node.body)
        finally:
            self.direct = saved
            self.scopes.pop()
            if not is_root:
                self.block_depth -= 1
        body = S.seq(*stmts) if stmts else S.Evaluate(E.IntImm("int32", 0))
        reads, writes = frame.reads, frame.writes
        if reads is None or writes is None:
            if is_root:
                inferred: tuple[tuple, tuple] = ((), ())
            else:
                inferred = _infer_regions(body, frame.init, tuple(frame.alloc_buffers), frame.match_buffers)
            reads = inferred[0] if reads is None else reads
            writes = inferred[1] if writes is None else writes
        block = S.Block(
            tuple(frame.iter_vars), reads, writes, name, body, frame.init,
            tuple(frame.alloc_buffers), tuple(frame.match_buffers), frame.annotations,
        )
        predicate = frame.predicate if frame.predicate is not None else _true()
        return S.BlockRealize(tuple(frame.iter_values), predicate, block)

    def _init(self, node: ast.With, call: ast.Call) -> None:
        frame = self.direct
        if not isinstance(frame, _BlockFrame):
            self.err(node, "T.init() must be directly inside a block")
        if call.args or call.keywords:
            self.err(call, "T.init() takes no arguments")
        if frame.init_node is not None:
            self.err(node, f"block {frame.name!r} has two T.init() sections")
        self.scopes.append({})
        self.direct = None
        saved_init = self.in_init
        self.in_init = True
        try:
            stmts = self.block_body(node.body)
        finally:
            self.direct = frame
            self.in_init = saved_init
            self.scopes.pop()
        frame.init = S.seq(*stmts) if stmts else S.Evaluate(E.IntImm("int32", 0))
        frame.init_node = node

    def _let_with(self, node: ast.With, call: ast.Call, target: ast.expr | None) -> S.Stmt:
        if not isinstance(target, ast.Name):
            self.err(node, "use `with T.LetStmt(value) as x:`")
        if len(call.args) != 1:
            self.err(call, "T.LetStmt takes one value")
        value = self.expr(call.args[0])
        var = E.Var(target.id, value.dtype)
        self.scopes.append({target.id: var})
        saved = self.direct
        self.direct = None
        try:
            stmts = self.block_body(node.body)
        finally:
            self.direct = saved
            self.scopes.pop()
        body = S.seq(*stmts) if stmts else S.Evaluate(E.IntImm("int32", 0))
        return S.LetStmt(var, value, body)

    def _if(self, node: ast.If) -> S.Stmt:
        cond = self.expr(node.test)
        if cond.dtype != "bool":
            self.err(node.test, f"an if condition must be a boolean expression, got dtype {cond.dtype}")
        then = self._scoped_body(node.body)
        other = self._scoped_body(node.orelse) if node.orelse else None
        return S.IfThenElse(cond, then, other)

    def _scoped_body(self, nodes: list[ast.stmt]) -> S.Stmt:
        self.scopes.append({})
        saved = self.direct
        self.direct = None
        try:
            stmts = self.block_body(nodes)
        finally:
            self.direct = saved
            self.scopes.pop()
        return S.seq(*stmts) if stmts else S.Evaluate(E.IntImm("int32", 0))

    def _assign(self, node: ast.Assign, buffer_map: dict | None = None) -> S.Stmt | None:
        if len(node.targets) != 1:
            self.err(node, "chained assignment is not supported")
        target = node.targets[0]
        if isinstance(target, ast.Subscript):
            return self._store(target, node.value, node)
        value = node.value
        if not isinstance(value, ast.Call):
            self.err(node, "unsupported assignment")
        name = self.t_func(value.func) or ""
        if name.startswith("axis."):
            self._axis(node, target, value, name[5:])
            return None
        if not isinstance(target, ast.Name):
            self.err(target, "expected a single name on the left")
        if name in _ALLOC_FUNCS:
            buffer = self._alloc(target.id, value)
            frame = self.direct
            if isinstance(frame, _BlockFrame):
                frame.alloc_buffers.append(buffer)
            elif isinstance(frame, _FuncFrame):
                frame.root_allocs.append(buffer)
            else:
                self.err(value, f"T.{name} must be at function level or directly inside a block")
            self.define(target.id, buffer)
            return None
        if name == "match_buffer":
            self._match_buffer(target.id, value, buffer_map)
            return None
        if name in _DTYPE_NAMES or name == "handle":
            if not isinstance(self.direct, _FuncFrame):
                self.err(value, f"variables (`{target.id} = T.{name}()`) may only be declared at function level")
            var = E.Var(target.id, name)
            self.size_vars.add(var)
            self.define(target.id, var)
            return None
        self.err(node, "unsupported assignment")  # pragma: no cover - _is_let took the rest

    def _store(self, target: ast.Subscript, value_node: ast.expr, node: ast.AST) -> S.Stmt:
        buffer = self._buffer_ref(target.value)
        indices = self._indices(target, buffer)
        value = self.value(value_node)
        if isinstance(value, (bool, int, float)) and not isinstance(value, E.PrimExpr):
            if isinstance(value, float) and not is_float(buffer.dtype):
                self.err(value_node, f"cannot store the float {value!r} into {buffer.dtype} buffer {buffer.name}")
            value = E.make_const(value, buffer.dtype)
        elif not isinstance(value, E.PrimExpr):
            self.err(value_node, f"cannot store {_describe(value)} into buffer {buffer.name}")
        if value.dtype != buffer.dtype:
            self.err(value_node, f"stores a value of dtype {value.dtype} into {buffer.dtype} buffer {buffer.name}; convert it with T.Cast(\"{buffer.dtype}\", ...)")
        self._note_store(target, buffer)
        return S.BufferStore(buffer, value, indices)

    def _note_store(self, target: ast.AST, buffer: E.Buffer) -> None:
        if self.block_depth == 0 and self.stray_store is None:
            self.stray_store = (target, buffer.name)

    def _aug_assign(self, node: ast.AugAssign) -> S.Stmt:
        if not isinstance(node.target, ast.Subscript):
            self.err(node, "augmented assignment is supported for buffer elements only")
        cls = _ARITH_OPS.get(type(node.op))
        if cls is None:
            self.err(node, "unsupported augmented assignment operator")
        buffer = self._buffer_ref(node.target.value)
        indices = self._indices(node.target, buffer)
        load = E.BufferLoad(buffer, indices)
        value = self._binop(cls, load, self.value(node.value), node)
        if value.dtype != buffer.dtype:
            self.err(node.value, f"stores a value of dtype {value.dtype} into {buffer.dtype} buffer {buffer.name}")
        self._note_store(node.target, buffer)
        return S.BufferStore(buffer, value, indices)

    def _expr_stmt(self, node: ast.Expr) -> S.Stmt | None:
        value = node.value
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            return None  # a docstring or comment string
        if isinstance(value, ast.Call):
            name = self.t_func(value.func)
            if name == "func_attr":
                if not isinstance(self.direct, _FuncFrame):
                    self.err(value, "T.func_attr must be at function level")
                if len(value.args) != 1 or value.keywords:
                    self.err(value, "T.func_attr takes one dict")
                self.direct.attrs.update(self.attr_dict(value.args[0]))
                return None
            if name in _HEADER_FUNCS:
                self._block_header(name, value)
                return None
            if name == "evaluate":
                if len(value.args) != 1 or value.keywords:
                    self.err(value, "T.evaluate takes one expression")
                return S.Evaluate(self.expr(value.args[0]))
        return S.Evaluate(self.expr(value))

    # ------------------------------------------------------------------ block headers
    def _frame(self, call: ast.Call, what: str) -> _BlockFrame:
        frame = self.direct
        if not isinstance(frame, _BlockFrame):
            self.err(call, f"{what} must be directly inside a block (not in a loop, an if or T.init)")
        return frame

    def _block_header(self, name: str, call: ast.Call) -> None:
        frame = self._frame(call, f"T.{name}")
        if name in ("reads", "writes"):
            if call.keywords:
                self.err(call.keywords[0], f"T.{name} takes buffer regions only")
            items: list[ast.expr] = []
            for arg in call.args:
                if isinstance(arg, (ast.List, ast.Tuple)):  # TVM <= 0.9: T.reads([A[...], ...])
                    items.extend(arg.elts)
                else:
                    items.append(arg)
            regions = tuple(self._region(a) for a in items)
            if name == "reads":
                frame.reads = (frame.reads or ()) + regions
            else:
                frame.writes = (frame.writes or ()) + regions
        elif name == "where":
            if len(call.args) != 1 or call.keywords:
                self.err(call, "T.where takes one condition")
            cond = self.expr(call.args[0])
            if cond.dtype != "bool":
                self.err(call.args[0], f"T.where needs a boolean condition, got dtype {cond.dtype}")
            frame.predicate = cond
        else:
            if len(call.args) != 1 or call.keywords:
                self.err(call, f"T.{name} takes one dict")
            frame.annotations.update(self.attr_dict(call.args[0]))

    def _axis(self, node: ast.Assign, target: ast.expr, call: ast.Call, kind: str) -> None:
        frame = self._frame(call, f"T.axis.{kind}")
        if frame.is_root:
            self.err(call, "the root block cannot have block variables")
        if kind == "remap":
            self._remap(frame, target, call)
            return
        if kind not in _AXIS_KINDS:
            self.err(call.func, f"unknown block axis kind T.axis.{kind} (expected spatial, reduce, scan, opaque, remap)")
        if not isinstance(target, ast.Name):
            self.err(target, f"T.axis.{kind} defines one variable")
        kwargs = self.keywords(call)
        args = list(call.args)
        for key in ("dom", "binding"):
            if key in kwargs:
                args.append(kwargs.pop(key)[1])
        dtype_kw = kwargs.pop("dtype", None)
        for key, (_, kw_node) in kwargs.items():
            self.err(kw_node, f"unknown keyword argument {key!r} for T.axis.{kind}")
        if len(args) != 2:
            self.err(call, f"T.axis.{kind} takes a domain and a binding value, got {len(args)} argument(s)")
        dom_node, value_node = args
        if isinstance(dom_node, (ast.Tuple, ast.List)):
            if len(dom_node.elts) != 2:
                self.err(dom_node, "a block axis domain is an extent or a (min, max) pair")
            lo, ext = self._range_of(dom_node.elts[0], dom_node.elts[1], "an axis domain")
        else:
            ext = self._int_expr(dom_node, "an axis extent")
            lo = E.make_const(0, ext.dtype)
        widest = max(_int_bits(lo.dtype), _int_bits(ext.dtype), 32)
        dtype = f"int{widest}"
        if dtype_kw is not None:
            dtype = self._dtype_of(dtype_kw[0], dtype_kw[1])
        value = self.value(value_node)
        if isinstance(value, (bool, int)) and not isinstance(value, E.PrimExpr):
            value = E.make_const(value, dtype)
        elif not isinstance(value, E.PrimExpr) or not is_integer_like(value.dtype):
            self.err(value_node, "a block variable must be bound to an integer expression")
        var = E.Var(target.id, dtype)
        lo = ops.cast(dtype, lo) if isinstance(lo, E.IntImm) else lo
        ext = ops.cast(dtype, ext) if isinstance(ext, E.IntImm) else ext
        frame.iter_vars.append(S.IterVar(E.Range(lo, ext), var, _AXIS_KINDS[kind]))
        frame.iter_values.append(value)
        self.define(target.id, var)

    def _remap(self, frame: _BlockFrame, target: ast.expr, call: ast.Call) -> None:
        if len(call.args) != 2 or call.keywords:
            self.err(call, 'T.axis.remap takes a kinds string and a list of loop variables: T.axis.remap("SSR", [i, j, k])')
        kinds_node, vars_node = call.args
        kinds = self.value(kinds_node)
        if not isinstance(kinds, str):
            self.err(kinds_node, 'the first argument of T.axis.remap is a string of "S"/"R" letters')
        if not isinstance(vars_node, (ast.List, ast.Tuple)):
            self.err(vars_node, "the second argument of T.axis.remap is a list of loop variables")
        names = [target] if isinstance(target, ast.Name) else (
            list(target.elts) if isinstance(target, (ast.Tuple, ast.List)) else None
        )
        if names is None or not all(isinstance(n, ast.Name) for n in names):
            self.err(target, "T.axis.remap assigns plain names")
        if len(kinds) != len(vars_node.elts):
            self.err(call, f'T.axis.remap kinds "{kinds}" has {len(kinds)} letters but {len(vars_node.elts)} loop variables are given')
        if len(names) != len(kinds):
            self.err(target, f'T.axis.remap kinds "{kinds}" defines {len(kinds)} variables but {len(names)} names are assigned')
        for letter, name_node, var_node in zip(kinds, names, vars_node.elts):
            if letter not in "SR":
                self.err(kinds_node, f'unknown axis kind {letter!r} in T.axis.remap (use "S" for spatial, "R" for reduce)')
            loop_var = self.value(var_node)
            if not isinstance(loop_var, E.Var) or loop_var not in self.loops:
                self.err(var_node, "T.axis.remap binds loop variables of enclosing loops only")
            dom = self.loops[loop_var]
            assert isinstance(name_node, ast.Name)  # checked above
            var = E.Var(name_node.id, loop_var.dtype)
            kind = S.IterType.DATA_PAR if letter == "S" else S.IterType.COMM_REDUCE
            frame.iter_vars.append(S.IterVar(dom, var, kind))
            frame.iter_values.append(loop_var)
            self.define(name_node.id, var)

    # ------------------------------------------------------------------ buffers
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
        if isinstance(frame, _FuncFrame):
            handle = self.value(source_node)
            if not isinstance(handle, E.Var) or handle.dtype != "handle" or buffer_map is None:
                self.err(source_node, "at function level T.match_buffer binds a T.handle parameter")
            if handle in buffer_map:
                self.err(source_node, f"parameter {handle.name} is already bound to buffer {buffer_map[handle].name}")
            buffer_map[handle] = buffer
        elif isinstance(frame, _BlockFrame):
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
        return E.Buffer(name, shape, dtype, scope, strides, elem_offset, align, offset_factor, axis_separators)

    def _shape(self, value: Any, node: ast.AST, what: str) -> tuple[E.PrimExpr, ...]:
        if isinstance(value, (list, tuple)):
            elts = node.elts if isinstance(node, (ast.Tuple, ast.List)) else [node] * len(value)
            return tuple(self._dim(v, n, what) for v, n in zip(value, elts))
        return (self._dim(value, node, what),)

    def _dim(self, value: Any, node: ast.AST, what: str) -> E.PrimExpr:
        if isinstance(value, bool) or not isinstance(value, (int, E.PrimExpr)):
            self.err(node, f"buffer {what} must be integers, got {_describe(value)}")
        if isinstance(value, int):
            return E.IntImm(default_int_dtype(value), value)
        if not is_integer_like(value.dtype) or value.dtype == "bool":
            self.err(node, f"buffer {what} must be integers, got an expression of dtype {value.dtype}")
        from msdb.ir.functor import free_vars

        loose = [v for v in free_vars(value) if v not in self.size_vars]
        if loose:
            self.err(node, f"buffer {what} must be constants or function-level size variables; '{loose[0].name}' is neither")
        return value

    def _dtype_of(self, value: Any, node: ast.AST) -> str:
        if isinstance(value, _DType):
            return value.dtype
        if not isinstance(value, str):
            self.err(node, f"expected a dtype string such as \"float32\", got {_describe(value)}")
        if not is_valid(value) or value == "handle":
            self.err(node, f"unknown dtype {value!r}")
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

    def _subscript_items(self, node: ast.Subscript) -> list[ast.expr]:
        sl = node.slice
        if isinstance(sl, ast.Tuple):
            return list(sl.elts)
        return [sl]

    def _indices(self, node: ast.Subscript, buffer: E.Buffer) -> tuple[E.PrimExpr, ...]:
        items = self._subscript_items(node)
        if len(items) == 1 and isinstance(items[0], ast.Tuple) and not items[0].elts:
            items = []  # A[()] on a 0-d buffer
        if isinstance(node.slice, ast.Tuple) and not node.slice.elts:
            items = []
        if len(items) != len(buffer.shape):
            self.err(node, f"buffer {buffer.name} has {len(buffer.shape)} dimension(s) but is indexed with {len(items)}")
        out = []
        for item in items:
            if isinstance(item, ast.Slice):
                self.err(item, f"slices are only allowed in T.reads/T.writes/T.match_buffer regions, not in an access of {buffer.name}")
            out.append(self._index(item))
        return tuple(out)

    def _index(self, node: ast.expr) -> E.PrimExpr:
        value = self.value(node)
        if isinstance(value, bool) or not isinstance(value, (int, E.PrimExpr)):
            self.err(node, f"a buffer index must be an integer expression, got {_describe(value)}")
        if isinstance(value, int):
            return E.IntImm(default_int_dtype(value), value)
        if not is_integer_like(value.dtype):
            self.err(node, f"a buffer index must be an integer expression, got dtype {value.dtype}")
        return value

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

    # ------------------------------------------------------------------ attribute values
    def attr_dict(self, node: ast.expr) -> dict[str, Any]:
        value = self.value(node)
        return self._annotation_map(value, node)

    def _annotation_map(self, value: Any, node: ast.AST) -> dict[str, Any]:
        if not isinstance(value, dict):
            self.err(node, "expected a dict literal with string keys")
        for key in value:
            if not isinstance(key, str):
                self.err(node, f"attribute keys must be strings, got {key!r}")
        for key, item in value.items():
            self._check_attr_value(item, node, key)
        return value

    def _check_attr_value(self, item: Any, node: ast.AST, key: str) -> None:
        if isinstance(item, (bool, int, float, str, E.PrimExpr)) or item is None:
            return
        if isinstance(item, (list, tuple)):
            for x in item:
                self._check_attr_value(x, node, key)
            return
        if isinstance(item, dict):
            self._annotation_map(item, node)
            return
        self.err(node, f"unsupported value for attribute {key!r}: {_describe(item)}")

    def keywords(self, call: ast.Call) -> dict[str, tuple[Any, ast.expr]]:
        out: dict[str, tuple[Any, ast.expr]] = {}
        for kw in call.keywords:
            if kw.arg is None:
                self.err(kw, "**kwargs are not supported")
            out[kw.arg] = (self.value(kw.value), kw.value)
        return out

    # ------------------------------------------------------------------ expressions
    def expr(self, node: ast.expr) -> E.PrimExpr:
        """An expression as an IR node (Python literals become immediates)."""
        value = self.value(node)
        if isinstance(value, E.PrimExpr):
            return value
        if isinstance(value, (bool, int, float)):
            return ops.literal(value)
        if isinstance(value, str):
            return E.StringImm("handle", value)
        self.err(node, f"expected an expression, got {_describe(value)}")

    def _int_value(self, node: ast.expr, what: str) -> E.PrimExpr | int:
        value = self.value(node)
        if isinstance(value, bool) or not isinstance(value, (int, E.PrimExpr)) or (
            isinstance(value, E.PrimExpr) and not (is_int(value.dtype) or is_uint(value.dtype))
        ):
            self.err(node, f"{what} must be an integer expression, got {_describe(value)}")
        return value

    def _int_expr(self, node: ast.expr, what: str) -> E.PrimExpr:
        value = self._int_value(node, what)
        return E.IntImm(default_int_dtype(value), value) if isinstance(value, int) else value

    def value(self, node: ast.expr) -> Any:
        """Evaluate a node to a Python value, an IR expression, a Buffer or a marker."""
        method = self._dispatch.get(type(node))
        if method is None:
            self.err(node, f"unsupported expression ({type(node).__name__})")
        return method(self, node)

    def _v_constant(self, node: ast.Constant) -> Any:
        if isinstance(node.value, (bool, int, float, str)) or node.value is None:
            return node.value
        self.err(node, f"unsupported constant {node.value!r}")

    def _v_name(self, node: ast.Name) -> Any:
        return self.lookup(node.id, node)

    def _v_tuple(self, node: ast.Tuple) -> tuple:
        return tuple(self.value(e) for e in node.elts)

    def _v_list(self, node: ast.List) -> list:
        return [self.value(e) for e in node.elts]

    def _v_dict(self, node: ast.Dict) -> dict:
        out = {}
        for k, v in zip(node.keys, node.values):
            if k is None:
                self.err(v, "dict unpacking is not supported")
            out[self.value(k)] = self.value(v)
        return out

    def _v_attribute(self, node: ast.Attribute) -> Any:
        name = self.t_func(node)
        if name is not None:
            if name in _DTYPE_NAMES or name == "handle":
                return _DType(name)
            self.err(node, f"T.{name} cannot be used as a value")
        self.err(node, f"unsupported attribute access '{_dotted(node) or node.attr}'")

    def _v_subscript(self, node: ast.Subscript) -> Any:
        base = node.value
        if isinstance(base, ast.Name):
            value = self.lookup(base.id, base)
            if isinstance(value, E.Buffer):
                return E.BufferLoad(value, self._indices(node, value))
        self.err(node, "only buffers can be indexed")

    def _v_unaryop(self, node: ast.UnaryOp) -> Any:
        operand = self.value(node.operand)
        if isinstance(node.op, ast.Not):
            if isinstance(operand, bool):
                return not operand
            if isinstance(operand, E.PrimExpr):
                if operand.dtype != "bool":
                    self.err(node, f"'not' needs a boolean operand, got dtype {operand.dtype}")
                return E.Not(operand)
        elif isinstance(node.op, ast.USub):
            if isinstance(operand, (int, float)) and not isinstance(operand, bool):
                return -operand
            if isinstance(operand, E.PrimExpr):
                return ops.negate(operand)
        elif isinstance(node.op, ast.UAdd):
            if isinstance(operand, (int, float, E.PrimExpr)) and not isinstance(operand, bool):
                return operand
        elif isinstance(node.op, ast.Invert):
            if isinstance(operand, E.PrimExpr) and is_integer_like(operand.dtype):
                return E.Call(operand.dtype, "bitwise_not", (operand,))
        self.err(node, f"unsupported operand for unary {type(node.op).__name__}: {_describe(operand)}")

    def _v_binop(self, node: ast.BinOp) -> Any:
        a = self.value(node.left)
        b = self.value(node.right)
        op = type(node.op)
        if op in _ARITH_OPS:
            return self._binop(_ARITH_OPS[op], a, b, node)
        if op in _BIT_OPS:
            if _is_py_num(a) and _is_py_num(b) and isinstance(a, int) and isinstance(b, int):
                return _py_bitop(op, a, b)
            x, y = self._operands(a, b, node)
            if not (is_integer_like(x.dtype) and is_integer_like(y.dtype)):
                self.err(node, "bitwise operators need integer operands")
            x, y = ops.match_types(x, y)
            return E.Call(x.dtype, _BIT_OPS[op], (x, y))
        if op is ast.Pow:
            self.err(node, "the ** operator is not supported; use T.pow(a, b)")
        self.err(node, f"unsupported operator {op.__name__}")

    def _operands(self, a: Any, b: Any, node: ast.AST) -> tuple[E.PrimExpr, E.PrimExpr]:
        for v in (a, b):
            if not (isinstance(v, E.PrimExpr) or _is_py_num(v)):
                self.err(node, f"unsupported operand {_describe(v)}")
        try:
            return ops.operands(a, b)
        except (TypeError, ValueError) as exc:
            self.err(node, str(exc))

    def _binop(self, cls: type, a: Any, b: Any, node: ast.AST) -> Any:
        if _is_py_num(a) and _is_py_num(b):
            return _py_arith(cls, a, b, node, self)
        x, y = self._operands(a, b, node)
        if cls is E.Div and not is_float(x.dtype) and not is_float(y.dtype):
            self.err(node, "integer division with / is ambiguous; use // (floordiv), T.truncdiv, % (floormod) or T.truncmod")
        try:
            return ops.arith(cls, x, y)
        except (TypeError, ValueError) as exc:
            self.err(node, str(exc))

    def _v_boolop(self, node: ast.BoolOp) -> Any:
        values = [self.value(v) for v in node.values]
        cls = E.And if isinstance(node.op, ast.And) else E.Or
        if all(isinstance(v, bool) for v in values):
            return all(values) if cls is E.And else any(values)
        acc = None
        for v, vnode in zip(values, node.values):
            if isinstance(v, bool):
                v = E.IntImm("bool", int(v))
            if not isinstance(v, E.PrimExpr) or v.dtype != "bool":
                self.err(vnode, f"'{'and' if cls is E.And else 'or'}' needs boolean operands, got {_describe(v)}")
            acc = v if acc is None else cls(acc, v)
        return acc

    def _v_compare(self, node: ast.Compare) -> Any:
        left = self.value(node.left)
        result = None
        for op, right_node in zip(node.ops, node.comparators):
            right = self.value(right_node)
            cls = _CMP_OPS.get(type(op))
            if cls is None:
                self.err(node, f"unsupported comparison {type(op).__name__}")
            if _is_py_num(left) and _is_py_num(right):
                part: Any = _py_compare(cls, left, right)
            else:
                x, y = self._operands(left, right, node)
                if x.dtype != y.dtype:
                    self.err(node, f"cannot compare {x.dtype} with {y.dtype}; cast one side with T.Cast")
                part = cls(x, y)
            if result is None:
                result = part
            elif isinstance(result, bool) and isinstance(part, bool):
                result = result and part
            else:
                r = E.IntImm("bool", int(result)) if isinstance(result, bool) else result
                p = E.IntImm("bool", int(part)) if isinstance(part, bool) else part
                result = E.And(r, p)
            left = right
        return result

    def _v_call(self, node: ast.Call) -> Any:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "astype" and self.t_func(func) is None:
            base = self.expr(func.value)
            if len(node.args) != 1 or node.keywords:
                self.err(node, "astype takes one dtype")
            return ops.cast(self._dtype_of(self.value(node.args[0]), node.args[0]), base)
        name = self.t_func(func)
        if name is None:
            fname = _dotted(func) or "this function"
            self.err(func, f"unknown function {fname}; only T.* functions can be called")
        handler = _T_CALLS.get(name)
        if handler is None:
            if name in _UNARY_MATH or name in _UNARY_PRED:
                return self._math1(name, node)
            if name in _BINARY_MATH:
                return self._math2(name, node)
            if name in _DTYPE_NAMES:
                return self._dtype_ctor(name, node)
            if name in _FOLDING_FUNCS:
                a, b = self._args(node, 2, f"T.{name}")
                return self._binop_fn(_FOLDING_FUNCS[name], a, b, node)
            if name in _RAW_CTORS:
                a, b = self._args(node, 2, f"T.{name}")
                return ops.raw(_RAW_CTORS[name], *self._operands(a, b, node))
            if name in _STATEMENT_ONLY:
                self.err(node, f"T.{name} is a statement, not an expression")
            self.err(func, f"unknown TVMScript function T.{name}")
        return handler(self, node)

    def _binop_fn(self, cls: type, a: Any, b: Any, node: ast.AST) -> E.PrimExpr:
        if _is_py_num(a) and _is_py_num(b):
            a = ops.literal(a)
        x, y = self._operands(a, b, node)
        return ops.arith(cls, x, y)

    def _args(self, node: ast.Call, n: int, what: str) -> list[Any]:
        if len(node.args) != n or node.keywords:
            self.err(node, f"{what} takes {n} argument(s), got {len(node.args) + len(node.keywords)}")
        return [self.value(a) for a in node.args]

    def _args_dtype(self, node: ast.Call, n: int, what: str) -> tuple[list[Any], str | None]:
        """Arguments of an intrinsic call that TVM <= 0.8 printed with a `dtype=` keyword."""
        keywords = [kw for kw in node.keywords if kw.arg != "dtype"]
        if len(node.args) != n or keywords:
            self.err(node, f"{what} takes {n} argument(s), got {len(node.args) + len(keywords)}")
        dtype = None
        for kw in node.keywords:
            dtype = self._dtype_of(self.value(kw.value), kw.value)
        return [self.value(a) for a in node.args], dtype

    def _as_expr(self, value: Any, node: ast.AST) -> E.PrimExpr:
        if isinstance(value, E.PrimExpr):
            return value
        if _is_py_num(value):
            return ops.literal(value)
        self.err(node, f"expected an expression, got {_describe(value)}")

    def _math1(self, name: str, node: ast.Call) -> E.PrimExpr:
        (x,), dtype = self._args_dtype(node, 1, f"T.{name}")
        x = self._as_expr(x, node.args[0])
        return E.Call(dtype or ("bool" if name in _UNARY_PRED else x.dtype), name, (x,))

    def _math2(self, name: str, node: ast.Call) -> E.PrimExpr:
        (a, b), dtype = self._args_dtype(node, 2, f"T.{name}")
        x, y = ops.match_types(*self._operands(a, b, node))
        return E.Call(dtype or x.dtype, name, (x, y))

    def _dtype_ctor(self, dtype: str, node: ast.Call) -> Any:
        if not node.args:
            for kw in node.keywords:
                if kw.arg != "is_size_var":
                    self.err(kw, f"unexpected keyword {kw.arg!r} for T.{dtype}()")
            return _VarDecl(dtype)
        (value,) = self._args(node, 1, f"T.{dtype}")
        if isinstance(value, str) and is_float(dtype):
            try:
                value = float(value)
            except ValueError:
                self.err(node.args[0], f"T.{dtype} cannot convert {value!r}")
        if isinstance(value, E.PrimExpr):
            return ops.cast(dtype, value)
        if isinstance(value, bool):
            return E.make_const(value, dtype)
        if isinstance(value, int):
            return E.make_const(value, dtype)
        if isinstance(value, float):
            if not is_float(dtype):
                if dtype != "bool" and value.is_integer():
                    return E.make_const(int(value), dtype)
                self.err(node.args[0], f"T.{dtype} expects an integer, got {value!r}")
            return E.FloatImm(dtype, value)
        self.err(node.args[0], f"T.{dtype} cannot convert {_describe(value)}")

    _dispatch: dict[type, Callable[..., Any]] = {}


_FunctionParser._dispatch = {
    ast.Constant: _FunctionParser._v_constant,
    ast.Name: _FunctionParser._v_name,
    ast.Tuple: _FunctionParser._v_tuple,
    ast.List: _FunctionParser._v_list,
    ast.Dict: _FunctionParser._v_dict,
    ast.Attribute: _FunctionParser._v_attribute,
    ast.Subscript: _FunctionParser._v_subscript,
    ast.UnaryOp: _FunctionParser._v_unaryop,
    ast.BinOp: _FunctionParser._v_binop,
    ast.BoolOp: _FunctionParser._v_boolop,
    ast.Compare: _FunctionParser._v_compare,
    ast.Call: _FunctionParser._v_call,
}


# ---------------------------------------------------------------------------- T.* handlers
def _t_cast_ctor(p: _FunctionParser, node: ast.Call) -> E.PrimExpr:
    dtype_v, value = p._args(node, 2, "T.Cast")
    dtype = p._dtype_of(dtype_v, node.args[0])
    return E.Cast(dtype, p._as_expr(value, node.args[1]))


def _t_cast(p: _FunctionParser, node: ast.Call) -> E.PrimExpr:
    value, dtype_v = p._args(node, 2, "T.cast")
    return ops.cast(p._dtype_of(dtype_v, node.args[1]), p._as_expr(value, node.args[0]))


def _bool_arg(p: _FunctionParser, value: Any, node: ast.AST, what: str) -> E.PrimExpr:
    if isinstance(value, bool):
        return E.IntImm("bool", int(value))
    if not isinstance(value, E.PrimExpr) or value.dtype != "bool":
        p.err(node, f"{what} needs a boolean condition, got {_describe(value)}")
    return value


def _t_if_then_else(p: _FunctionParser, node: ast.Call) -> E.PrimExpr:
    (cond, a, b), dtype = p._args_dtype(node, 3, "T.if_then_else")
    cond = _bool_arg(p, cond, node.args[0], "T.if_then_else")
    x, y = ops.match_types(*p._operands(a, b, node))
    if isinstance(cond, E.IntImm):
        return x if cond.value else y
    return E.Call(dtype or x.dtype, "if_then_else", (cond, x, y))


def _t_select(p: _FunctionParser, node: ast.Call) -> E.PrimExpr:
    cond, a, b = p._args(node, 3, "T.Select")
    cond = _bool_arg(p, cond, node.args[0], "T.Select")
    x, y = p._operands(a, b, node)
    return E.Select(cond, x, y)


def _t_not(p: _FunctionParser, node: ast.Call) -> E.PrimExpr:
    (a,) = p._args(node, 1, "T.Not")
    return E.Not(_bool_arg(p, a, node.args[0], "T.Not"))


def _t_limit(upper: bool) -> Callable[[_FunctionParser, ast.Call], E.PrimExpr]:
    def handler(p: _FunctionParser, node: ast.Call) -> E.PrimExpr:
        (dtype_v,) = p._args(node, 1, "T.max_value" if upper else "T.min_value")
        dtype = p._dtype_of(dtype_v, node.args[0])
        return ops.max_value(dtype) if upper else ops.min_value(dtype)

    return handler


def _t_infinity(p: _FunctionParser, node: ast.Call) -> E.PrimExpr:
    (dtype_v,) = p._args(node, 1, "T.infinity")
    dtype = p._dtype_of(dtype_v, node.args[0])
    if not is_float(dtype):
        p.err(node.args[0], "T.infinity needs a float dtype")
    return E.FloatImm(dtype, math.inf)


def _t_abs(p: _FunctionParser, node: ast.Call) -> E.PrimExpr:
    (x,) = p._args(node, 1, "T.abs")
    x = p._as_expr(x, node.args[0])
    if is_float(x.dtype):
        return E.Call(x.dtype, "fabs", (x,))
    if is_uint(x.dtype):
        return x
    if isinstance(x, E.IntImm):
        return E.IntImm(x.dtype, abs(x.value))
    zero = E.make_const(0, x.dtype)
    return E.Select(E.GE(x, zero), x, E.Sub(zero, x))


def _t_call_intrin(p: _FunctionParser, node: ast.Call, prefix_op: str | None = None) -> E.PrimExpr:
    if len(node.args) < 2 or node.keywords:
        p.err(node, "T.call_intrin(dtype, \"tir.op\", *args)")
    dtype = p._dtype_of(p.value(node.args[0]), node.args[0])
    op = p.value(node.args[1])
    if not isinstance(op, str):
        p.err(node.args[1], "the operator name must be a string")
    args = tuple(p.expr(a) for a in node.args[2:])
    if prefix_op is not None:
        return E.Call(dtype, prefix_op, (E.StringImm("handle", op),) + args)
    return E.Call(dtype, op[4:] if op.startswith("tir.") else op, args)


def _t_likely(p: _FunctionParser, node: ast.Call) -> E.PrimExpr:
    (x,) = p._args(node, 1, "T.likely")
    return E.Call("bool", "likely", (_bool_arg(p, x, node.args[0], "T.likely"),))


def _t_ceildiv(p: _FunctionParser, node: ast.Call) -> E.PrimExpr:
    a, b = p._args(node, 2, "T.ceildiv")
    x, y = ops.match_types(*p._operands(a, b, node))
    one = E.make_const(1, x.dtype)
    return ops.arith(E.FloorDiv, ops.arith(E.Sub, ops.arith(E.Add, x, y), one), y)


_T_CALLS: dict[str, Callable[[_FunctionParser, ast.Call], Any]] = {
    "Cast": _t_cast_ctor,
    "cast": _t_cast,
    "if_then_else": _t_if_then_else,
    "Select": _t_select,
    "Not": _t_not,
    "max_value": _t_limit(True),
    "min_value": _t_limit(False),
    "infinity": _t_infinity,
    "abs": _t_abs,
    "call_intrin": _t_call_intrin,
    "call_pure_intrin": _t_call_intrin,
    "call_extern": lambda p, n: _t_call_intrin(p, n, "call_extern"),
    "call_pure_extern": lambda p, n: _t_call_intrin(p, n, "call_pure_extern"),
    "likely": _t_likely,
    "ceildiv": _t_ceildiv,
}

_STATEMENT_ONLY = frozenset(
    ["evaluate", "reads", "writes", "where", "func_attr", "init", "grid", "serial", "parallel",
     "vectorized", "unroll", "thread_binding", "match_buffer", "prim_func", "Buffer", "LetStmt"]
) | _BLOCK_FUNCS | _ALLOC_FUNCS | _BLOCK_ATTR_FUNCS


# ---------------------------------------------------------------------------- helpers
def _infer_regions(
    body: S.Stmt, init: S.Stmt | None, allocs: tuple[E.Buffer, ...], matches: list[S.MatchBufferRegion]
) -> tuple[tuple[S.BufferRegion, ...], tuple[S.BufferRegion, ...]]:
    """TVM's inferred regions; an access through a block's `T.match_buffer` counts as an
    access of the source buffer (TVM's ConvertMatchedRegion)."""
    from msdb.ir.regions import infer_access_regions

    reads, writes = infer_access_regions(body, init, allocs)
    if not matches:
        return reads, writes
    by_buffer = {m.buffer: m for m in matches}
    return _to_sources(reads, by_buffer), _to_sources(writes, by_buffer)


def _to_sources(regions: tuple[S.BufferRegion, ...], by_buffer: dict[E.Buffer, S.MatchBufferRegion]) -> tuple[S.BufferRegion, ...]:
    out: list[S.BufferRegion] = []
    for region in regions:
        match = by_buffer.get(region.buffer)
        if match is None:
            out.append(region)
            continue
        source = match.source.region
        offset = len(source) - len(region.region)
        ranges = [E.Range(rng.min, E.make_const(1, rng.min.dtype)) for rng in source[:offset]]
        for src, rng in zip(source[offset:], region.region):
            ranges.append(E.Range(ops.arith(E.Add, src.min, rng.min), rng.extent))
        converted = S.BufferRegion(match.source.buffer, tuple(ranges))
        if not any(r.buffer is converted.buffer for r in out):
            out.append(converted)
    return tuple(out)


def _is_docstring(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)


def _is_py_num(value: Any) -> bool:
    return isinstance(value, (bool, int, float)) and not isinstance(value, E.PrimExpr)


def _int_bits(dtype: str) -> int:
    from msdb.ir.dtype import bits

    return bits(dtype)


def _py_arith(cls: type, a: Any, b: Any, node: ast.AST, p: _FunctionParser) -> Any:
    try:
        if cls is E.Add:
            return a + b
        if cls is E.Sub:
            return a - b
        if cls is E.Mul:
            return a * b
        if cls is E.Div:
            return a / b
        if cls is E.FloorDiv:
            return a // b
        if cls is E.FloorMod:
            return a % b
    except ZeroDivisionError:
        p.err(node, "division by zero")
    p.err(node, "unsupported operator")  # pragma: no cover


def _py_bitop(op: type, a: int, b: int) -> int:
    ops: dict[type, Callable[[], int]] = {
        ast.BitAnd: lambda: a & b, ast.BitOr: lambda: a | b, ast.BitXor: lambda: a ^ b,
        ast.LShift: lambda: a << b, ast.RShift: lambda: a >> b,
    }
    return ops[op]()


def _py_compare(cls: type, a: Any, b: Any) -> bool:
    ops: dict[type, Callable[[], Any]] = {
        E.EQ: lambda: a == b, E.NE: lambda: a != b, E.LT: lambda: a < b,
        E.LE: lambda: a <= b, E.GT: lambda: a > b, E.GE: lambda: a >= b,
    }
    return bool(ops[cls]())


def _describe(value: Any) -> str:
    if isinstance(value, E.Buffer):
        return f"buffer {value.name}"
    if isinstance(value, E.PrimExpr):
        return f"an expression of dtype {value.dtype}"
    if isinstance(value, _VarDecl):
        return f"a variable declaration T.{value.dtype}()"
    if isinstance(value, _DType):
        return f"the dtype T.{value.dtype}"
    if isinstance(value, str):
        return f"the string {value!r}"
    if value is None:
        return "None"
    if isinstance(value, (list, tuple)):
        return f"a {type(value).__name__}"
    return repr(value)
