"""The canonical token stream of an IR tree: the one definition of what "structurally equal" means.

`structural_hash` (blake2b over the stream) and `structural_equal` (stream comparison) both read
this walk, so the two cannot disagree. `TokenWriter(family=True)` is the same walk with the
workload's sizes taken out, for `msdb.hashing.family`. What the stream leaves out and why, its
stability and its size bound (`TreeTooLarge`): see docs/architecture.md, "Hashing" and "Families".
Changing anything here changes stored hashes: that is a schema migration that rehashes stored
workloads.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Any, Callable, NoReturn

from msdb.ir import expr as E
from msdb.ir import stmt as S
from msdb.ir.function import IRModule, PrimFunc
from msdb.ir.tree_size import MAX_TREE_NODES, TreeTooLarge

# Function attributes that never count (see the module docstring for why).
IGNORED_FUNC_ATTRS = frozenset({"global_symbol", "tir.noalias", "tirx.noalias", "s_tir"})

_pack_double = struct.Struct("<d").pack

#: The longest stream written: a few tokens per node of the largest tree msdb accepts.
MAX_TOKENS = 4 * MAX_TREE_NODES

_STR_TOKENS: dict[str, str] = {}
_STR_CACHE_LIMIT = 8192


def _s(text: str) -> str:
    """A length-prefixed string token: decodable whatever characters the string holds."""
    token = _STR_TOKENS.get(text)
    if token is None:
        token = f"s{len(text)}:{text}"
        if len(_STR_TOKENS) < _STR_CACHE_LIMIT:
            _STR_TOKENS[text] = token
    return token


def _too_large() -> NoReturn:
    raise TreeTooLarge(f"IR expands to more than {MAX_TOKENS:,} hash tokens (its nodes are shared so often that the "
                       "tree is beyond any real workload); it cannot be hashed")


def _float_bits(value: float) -> str:
    """The exact bits of a float (so -0.0 != 0.0 and every NaN payload is kept apart)."""
    return _pack_double(float(value)).hex()


#: The dtypes of index arithmetic, written as one token in family mode (module docstring).
INDEX_DTYPES = frozenset({"int32", "int64"})
#: What an index dtype is written as in family mode (no real dtype is spelled so).
INDEX_DTYPE_TOKEN = "Xindex"


class TokenWriter:
    """Accumulates the token stream of one tree; holds the variable and buffer numbering."""

    __slots__ = ("out", "vars", "nvars", "bufs", "ignore_tensor", "family", "index", "extents", "scanned")

    def __init__(self, ignore_tensor: bool = False, *, family: bool = False) -> None:
        self.out: list[str] = []
        self.vars: dict[E.Var, int] = {}  # variables in scope (and free ones) -> number
        self.nvars = 0
        self.bufs: dict[E.Buffer, int] = {}
        self.ignore_tensor = ignore_tensor
        #: family mode (module docstring): sizes abstracted, their values in `extents`
        self.family = family
        #: inside an index position (family mode only)
        self.index = False
        self.extents: list[int] = []
        #: id(expression) -> (reads a buffer, mentions a variable), memo of `_index_arithmetic`
        self.scanned: dict[int, tuple[bool, bool]] = {}

    def new_scope(self) -> None:
        """Restart numbering (each function of a module is numbered on its own)."""
        self.vars = {}
        self.nvars = 0
        self.bufs = {}

    def expr(self, node: E.PrimExpr) -> None:
        _EXPR[type(node)](self, node)

    def stmt(self, node: S.Stmt) -> None:
        _STMT[type(node)](self, node)


class _Dispatch(dict):
    """Per-class handler table; a subclass not registered uses its nearest registered base."""

    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind = kind

    def __missing__(self, cls: type) -> Callable[[TokenWriter, Any], None]:
        for klass in cls.__mro__[1:]:
            handler = dict.get(self, klass)
            if handler is not None:
                self[cls] = handler
                return handler
        raise TypeError(f"structural hashing cannot handle {self.kind} node {cls.__name__}")


_EXPR = _Dispatch("expression")
_STMT = _Dispatch("statement")


# ---------------------------------------------------------------------------------------------
# Variables and buffers
# ---------------------------------------------------------------------------------------------


def write_var(w: TokenWriter, var: E.Var) -> None:
    """A use: `v<n>` for a bound variable; a free one (used outside any definition) is numbered
    here, at its first use, and written `V<n> dtype` like a definition."""
    n = w.vars.get(var)
    if n is None:
        n = w.nvars
        w.nvars = n + 1
        w.vars[var] = n
        w.out.append("V%d" % n)
        w.out.append(INDEX_DTYPE_TOKEN if w.family and var.dtype in INDEX_DTYPES else _s(var.dtype))
    else:
        w.out.append("v%d" % n)


def define_var(w: TokenWriter, var: E.Var) -> int:
    """A definition (loop var, iter var, let var, parameter): always the next number, so a Var
    object reused by two sibling loops hashes like two distinct variables. Returns the number the
    variable had before (-1 if none), for `end_scope`."""
    table = w.vars
    previous = table.get(var, -1)
    n = w.nvars
    w.nvars = n + 1
    table[var] = n
    w.out.append("V%d" % n)
    w.out.append(INDEX_DTYPE_TOKEN if w.family and var.dtype in INDEX_DTYPES else _s(var.dtype))
    return previous


def end_scope(w: TokenWriter, var: E.Var, previous: int) -> None:
    """Leave a definition's scope: a later use of the variable refers to what it meant before."""
    if previous < 0:
        del w.vars[var]
    else:
        w.vars[var] = previous


def write_buffer(w: TokenWriter, buf: E.Buffer) -> None:
    """The full declaration the first time a buffer is met, `b<n>` after."""
    table = w.bufs
    n = table.get(buf)
    if n is not None:
        w.out.append("b%d" % n)
        return
    n = len(table)
    table[buf] = n
    out = w.out
    out.append("B%d" % n)
    out.append(_s(buf.dtype))
    out.append(_s(buf.scope))
    out.append("%d" % len(buf.shape))
    for dim in buf.shape:
        write_index(w, dim)
    out.append("%d" % len(buf.strides))
    for stride in buf.strides:
        write_index(w, stride)
    if buf.elem_offset is None:
        out.append("-")
    else:
        write_index(w, buf.elem_offset)
    out.append("%d" % buf.data_alignment)
    out.append("%d" % buf.offset_factor)
    out.append("%d" % len(buf.axis_separators))
    for sep in buf.axis_separators:
        out.append("%d" % sep)


def write_index(w: TokenWriter, node: E.PrimExpr) -> None:
    """An expression in an index position (a loop extent, a shape, an index, a binding): written
    as any expression, except in family mode, where its sizes are abstracted (module docstring)."""
    if w.family and not w.index:
        w.index = True
        _EXPR[type(node)](w, node)
        w.index = False
    else:
        _EXPR[type(node)](w, node)


_COMPARISONS = (E.EQ, E.NE, E.LT, E.LE, E.GT, E.GE)


def _scan(w: TokenWriter, node: E.PrimExpr) -> tuple[bool, bool]:
    """(reads a buffer, mentions a variable) of an expression, memoized per node for the walk."""
    key = id(node)
    known = w.scanned.get(key)
    if known is not None:
        return known
    if isinstance(node, E.BufferLoad):
        found = (True, True)
    elif isinstance(node, E.Var):
        found = (False, True)
    else:
        if isinstance(node, E.BinaryOp):
            children: tuple[E.PrimExpr, ...] = (node.a, node.b)
        elif isinstance(node, (E.Not, )):
            children = (node.a,)
        elif isinstance(node, E.Select):
            children = (node.condition, node.true_value, node.false_value)
        elif isinstance(node, E.Cast):
            children = (node.value,)
        elif isinstance(node, E.Call):
            children = tuple(node.args)
        else:
            children = ()
        load = var = False
        for child in children:
            child_load, child_var = _scan(w, child)
            load, var = load or child_load, var or child_var
        found = (load, var)
    w.scanned[key] = found
    return found


def _index_arithmetic(w: TokenWriter, node: E.PrimExpr) -> bool:
    """Whether an expression in a value position is index arithmetic (family mode): a
    comparison of two load-free index-dtype operands (a padding guard), or a load-free
    index-dtype expression that mentions a variable (a loop index cast into the data)."""
    if isinstance(node, _COMPARISONS):
        if node.a.dtype not in INDEX_DTYPES or node.b.dtype not in INDEX_DTYPES:
            return False
        return not _scan(w, node.a)[0] and not _scan(w, node.b)[0]
    if node.dtype not in INDEX_DTYPES:
        return False
    load, var = _scan(w, node)
    return var and not load


# ---------------------------------------------------------------------------------------------
# Expressions
# ---------------------------------------------------------------------------------------------


def _int_imm(w: TokenWriter, node: E.IntImm) -> None:
    out = w.out
    if w.index and node.dtype in INDEX_DTYPES:  # family mode: a size, abstracted
        w.extents.append(int(node.value))
        out.append("I?")
        out.append(INDEX_DTYPE_TOKEN)
        return
    out.append("I%d" % node.value)  # %d also turns a stray bool into 0/1
    out.append(_s(node.dtype))


def _float_imm(w: TokenWriter, node: E.FloatImm) -> None:
    out = w.out
    out.append("F" + _float_bits(node.value))
    out.append(_s(node.dtype))


def _string_imm(w: TokenWriter, node: E.StringImm) -> None:
    out = w.out
    out.append("S")
    out.append(_s(node.dtype))
    out.append(_s(node.value))


def _binary_handler(code: str) -> Callable[[TokenWriter, E.BinaryOp], None]:
    def handler(w: TokenWriter, node: E.BinaryOp) -> None:
        out = w.out
        if len(out) > MAX_TOKENS:
            _too_large()
        if w.family and not w.index and _index_arithmetic(w, node):
            write_index(w, node)
            return
        out.append(code)
        out.append(INDEX_DTYPE_TOKEN if w.index and node.dtype in INDEX_DTYPES else _s(node.dtype))
        a, b = node.a, node.b
        _EXPR[type(a)](w, a)
        _EXPR[type(b)](w, b)

    return handler


def _binary_generic(w: TokenWriter, node: E.BinaryOp) -> None:
    # A BinaryOp subclass this module does not know: its class name is its code.
    _binary_handler(type(node).__name__)(w, node)


def _not(w: TokenWriter, node: E.Not) -> None:
    w.out.append("Not")
    _EXPR[type(node.a)](w, node.a)


def _select(w: TokenWriter, node: E.Select) -> None:
    out = w.out
    if len(out) > MAX_TOKENS:
        _too_large()
    if w.family and not w.index and _index_arithmetic(w, node):
        write_index(w, node)
        return
    out.append("Select")
    out.append(INDEX_DTYPE_TOKEN if w.index and node.dtype in INDEX_DTYPES else _s(node.dtype))
    _EXPR[type(node.condition)](w, node.condition)
    _EXPR[type(node.true_value)](w, node.true_value)
    _EXPR[type(node.false_value)](w, node.false_value)


def _cast(w: TokenWriter, node: E.Cast) -> None:
    out = w.out
    if w.family and not w.index and _index_arithmetic(w, node):
        write_index(w, node)
        return
    out.append("Cast")
    out.append(INDEX_DTYPE_TOKEN if w.index and node.dtype in INDEX_DTYPES else _s(node.dtype))
    _EXPR[type(node.value)](w, node.value)


def _call(w: TokenWriter, node: E.Call) -> None:
    out = w.out
    if len(out) > MAX_TOKENS:
        _too_large()
    if w.family and not w.index and _index_arithmetic(w, node):
        write_index(w, node)
        return
    out.append("Call")
    out.append(INDEX_DTYPE_TOKEN if w.index and node.dtype in INDEX_DTYPES else _s(node.dtype))
    out.append(_s(node.op))
    args = node.args
    out.append("%d" % len(args))
    for arg in args:
        _EXPR[type(arg)](w, arg)


def _buffer_load(w: TokenWriter, node: E.BufferLoad) -> None:
    out = w.out
    if len(out) > MAX_TOKENS:
        _too_large()
    out.append("Load")
    out.append(INDEX_DTYPE_TOKEN if w.index and node.dtype in INDEX_DTYPES else _s(node.dtype))
    write_buffer(w, node.buffer)
    indices = node.indices
    out.append("%d" % len(indices))
    for index in indices:
        write_index(w, index)


def _prim_expr_unknown(w: TokenWriter, node: E.PrimExpr) -> None:
    raise TypeError(f"structural hashing cannot handle expression node {type(node).__name__}")


_EXPR.update(
    {
        E.Var: write_var,
        E.IntImm: _int_imm,
        E.FloatImm: _float_imm,
        E.StringImm: _string_imm,
        E.BinaryOp: _binary_generic,
        E.Not: _not,
        E.Select: _select,
        E.Cast: _cast,
        E.Call: _call,
        E.BufferLoad: _buffer_load,
        E.PrimExpr: _prim_expr_unknown,
    }
)
for _cls in (E.Add, E.Sub, E.Mul, E.Div, E.Mod, E.FloorDiv, E.FloorMod, E.Min, E.Max,
             E.EQ, E.NE, E.LT, E.LE, E.GT, E.GE, E.And, E.Or):
    _EXPR[_cls] = _binary_handler(_cls.__name__)


# ---------------------------------------------------------------------------------------------
# Annotation and attribute values
# ---------------------------------------------------------------------------------------------


def write_value(w: TokenWriter, value: Any) -> None:
    """An annotation/attribute value: scalars, strings, expressions, sequences, maps, arrays."""
    out = w.out
    if value is None:
        out.append("N")
    elif isinstance(value, bool):
        out.append("b1" if value else "b0")
    elif isinstance(value, int):
        out.append("i%d" % value)
    elif isinstance(value, float):
        out.append("f" + _float_bits(value))
    elif isinstance(value, str):
        out.append(_s(value))
    elif isinstance(value, E.PrimExpr):
        out.append("E")
        _EXPR[type(value)](w, value)
    elif isinstance(value, (list, tuple)):
        if len(out) > MAX_TOKENS:
            _too_large()
        out.append("L%d" % len(value))
        for item in value:
            write_value(w, item)
    elif isinstance(value, Mapping):
        write_map(w, value, "D")
    elif isinstance(value, E.Buffer):
        write_buffer(w, value)
    else:
        _write_foreign(w, value)


def _write_foreign(w: TokenWriter, value: Any) -> None:
    import numpy as np  # already loaded by msdb.ir.dtype; imported here to keep the hot path short

    out = w.out
    if isinstance(value, np.ndarray):
        out.append("T")
        out.append(_s(value.dtype.str))
        out.append("%d" % value.ndim)
        out.extend("%d" % d for d in value.shape)
        if w.ignore_tensor:
            out.append("-")
        else:
            out.append(np.ascontiguousarray(value).tobytes().hex())
    elif isinstance(value, np.generic):
        write_value(w, value.item())
    else:
        raise TypeError(
            f"structural hashing cannot handle an annotation value of type {type(value).__name__}: "
            "use int, float, str, bool, a PrimExpr, a list/tuple/dict of them or a numpy array"
        )


def write_map(w: TokenWriter, mapping: Mapping[Any, Any], code: str = "A") -> None:
    """A map with its keys sorted (annotations and attrs are unordered in TVM)."""
    out = w.out
    out.append("%s%d" % (code, len(mapping)))
    if not mapping:
        return
    for key in sorted(mapping, key=_key_order):
        write_value(w, key)
        write_value(w, mapping[key])


def _key_order(key: Any) -> tuple[str, str]:
    return (type(key).__name__, str(key))


# ---------------------------------------------------------------------------------------------
# Statements
# ---------------------------------------------------------------------------------------------


def _buffer_store(w: TokenWriter, node: S.BufferStore) -> None:
    out = w.out
    out.append("Store")
    write_buffer(w, node.buffer)
    _EXPR[type(node.value)](w, node.value)
    indices = node.indices
    out.append("%d" % len(indices))
    for index in indices:
        write_index(w, index)


def _evaluate(w: TokenWriter, node: S.Evaluate) -> None:
    w.out.append("Eval")
    _EXPR[type(node.value)](w, node.value)


def _seq(w: TokenWriter, node: S.SeqStmt) -> None:
    if len(w.out) > MAX_TOKENS:
        _too_large()
    w.out.append("Seq%d" % len(node.seq))
    for stmt in node.seq:
        _STMT[type(stmt)](w, stmt)


def _if(w: TokenWriter, node: S.IfThenElse) -> None:
    if len(w.out) > MAX_TOKENS:
        _too_large()
    w.out.append("If")
    _EXPR[type(node.condition)](w, node.condition)
    _STMT[type(node.then_case)](w, node.then_case)
    if node.else_case is None:
        w.out.append("-")
    else:
        _STMT[type(node.else_case)](w, node.else_case)


def _let(w: TokenWriter, node: S.LetStmt) -> None:
    w.out.append("Let")
    _EXPR[type(node.value)](w, node.value)
    previous = define_var(w, node.var)
    _STMT[type(node.body)](w, node.body)
    end_scope(w, node.var, previous)


def write_loop_header(w: TokenWriter, node: S.For) -> int:
    """Everything about a loop except its body (shared by the anchor-block walk); defines the
    loop var and returns its previous number for `end_scope`."""
    out = w.out
    out.append("For%d" % node.kind)
    write_index(w, node.min)
    write_index(w, node.extent)
    previous = define_var(w, node.loop_var)
    # The binding's own var and dom repeat the loop's; only the thread axis it names counts.
    binding = node.thread_binding
    out.append("-" if binding is None else _s(binding.thread_tag))
    write_map(w, node.annotations)
    return previous


def _for(w: TokenWriter, node: S.For) -> None:
    previous = write_loop_header(w, node)
    _STMT[type(node.body)](w, node.body)
    end_scope(w, node.loop_var, previous)


def _block(w: TokenWriter, node: S.Block) -> None:
    out = w.out
    iter_vars = node.iter_vars
    out.append("Block%d" % len(iter_vars))
    previous: list[int] = []
    for iv in iter_vars:
        dom = iv.dom
        if dom is None:
            raise TypeError(f"block {node.name_hint!r}: iter var {iv.var.name} has no domain")
        write_index(w, dom.min)
        write_index(w, dom.extent)
        previous.append(define_var(w, iv.var))
        out.append("%d" % iv.iter_type)
        out.append(_s(iv.thread_tag))
    # reads/writes deliberately skipped: derived from the body (module docstring).
    out.append("%d" % len(node.alloc_buffers))
    for buf in node.alloc_buffers:
        write_buffer(w, buf)
    out.append("%d" % len(node.match_buffers))
    for match in node.match_buffers:
        write_buffer(w, match.buffer)
        _buffer_region(w, match.source)
    write_map(w, node.annotations)
    if node.init is None:
        out.append("-")
    else:
        out.append("Init")
        _STMT[type(node.init)](w, node.init)
    _STMT[type(node.body)](w, node.body)
    for iv, prev in zip(reversed(iter_vars), reversed(previous)):
        end_scope(w, iv.var, prev)


def _buffer_region(w: TokenWriter, region: S.BufferRegion) -> None:
    write_buffer(w, region.buffer)
    w.out.append("%d" % len(region.region))
    for rng in region.region:
        write_index(w, rng.min)
        write_index(w, rng.extent)


def write_block_realize(w: TokenWriter, node: S.BlockRealize) -> None:
    out = w.out
    values = node.iter_values
    out.append("Realize%d" % len(values))
    for value in values:
        write_index(w, value)
    write_index(w, node.predicate)
    _block(w, node.block)


def _stmt_unknown(w: TokenWriter, node: S.Stmt) -> None:
    raise TypeError(f"structural hashing cannot handle statement node {type(node).__name__}")


_STMT.update(
    {
        S.BufferStore: _buffer_store,
        S.Evaluate: _evaluate,
        S.SeqStmt: _seq,
        S.IfThenElse: _if,
        S.LetStmt: _let,
        S.For: _for,
        S.Block: _block,
        S.BlockRealize: write_block_realize,
        S.Stmt: _stmt_unknown,
    }
)


# ---------------------------------------------------------------------------------------------
# Functions and modules
# ---------------------------------------------------------------------------------------------


def normalized_functions(mod: IRModule | PrimFunc) -> list[tuple[str | None, PrimFunc]]:
    """(name, function) pairs in canonical order; the name is None for a single function, whose
    key never counts (a lone PrimFunc is the module {"main": f})."""
    if isinstance(mod, PrimFunc):
        return [(None, mod)]
    if not isinstance(mod, IRModule):
        raise TypeError(f"expected an IRModule or a PrimFunc, got {type(mod).__name__}")
    functions = mod.functions
    if len(functions) == 1:
        return [(None, next(iter(functions.values())))]
    return [(name, functions[name]) for name in sorted(functions)]


def write_function(w: TokenWriter, func: PrimFunc) -> None:
    w.new_scope()
    out = w.out
    out.append("Func")
    attrs = func.attrs
    if any(key in IGNORED_FUNC_ATTRS for key in attrs):
        attrs = {k: v for k, v in attrs.items() if k not in IGNORED_FUNC_ATTRS}
    write_map(w, attrs)
    params = func.params
    out.append("%d" % len(params))
    for param in params:
        define_var(w, param)
    buffer_map = func.buffer_map
    for param in params:
        buf = buffer_map.get(param)
        if buf is None:
            out.append("-")
        else:
            write_buffer(w, buf)
    _STMT[type(func.body)](w, func.body)


def module_tokens(mod: IRModule | PrimFunc, ignore_tensor: bool = False) -> list[str]:
    """The token stream of a whole module (structural or ignore-tensor mode)."""
    return write_module(TokenWriter(ignore_tensor), mod).out


def write_module(w: TokenWriter, mod: IRModule | PrimFunc) -> TokenWriter:
    """Write a whole module's stream into `w` (whose mode it takes); returns `w`."""
    functions = normalized_functions(mod)
    out = w.out
    out.append("Module%d" % len(functions))
    mod_attrs = mod.attrs if isinstance(mod, IRModule) else {}
    write_map(w, mod_attrs)
    for name, func in functions:
        if name is not None:
            out.append(_s(name))
        write_function(w, func)
    return w
