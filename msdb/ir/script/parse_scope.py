"""What the layers of the TVMScript parser share: the `T.` names, the frames that header
statements fill, and the scope stack of one prim_func (docs/architecture.md, "TVMScript parser")."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NoReturn

from msdb.ir import expr as E
from msdb.ir import stmt as S

if TYPE_CHECKING:
    from msdb.ir.script.parser import ModuleParser


DTYPE_NAMES = frozenset(
    ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
     "float16", "float32", "float64", "bfloat16"]
)
BLOCK_FUNCS = frozenset(["block", "sblock"])
ALLOC_FUNCS = frozenset(["alloc_buffer", "sblock_alloc_buffer"])
BLOCK_ATTR_FUNCS = frozenset(["block_attr", "sblock_attr"])


@dataclass
class BlockFrame:
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
class FuncFrame:
    """What the function-level header statements collect."""

    attrs: dict[str, Any] = field(default_factory=dict)
    root_allocs: list[E.Buffer] = field(default_factory=list)


def dotted(node: ast.expr) -> str | None:
    """`a.b.c` as a string, or None when the node is not a plain dotted name."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


class ScopedParser:
    """The state of one prim_func's parse and its names. Scopes mirror TVMScript's: loop,
    block, `if` and `init` bodies each open one, so sibling loops may reuse names."""

    def __init__(self, module: ModuleParser, name: str) -> None:
        self.module = module
        self.src = module.src
        self.name = name
        self.scopes: list[dict[str, Any]] = [{}]
        self.size_vars: set[E.Var] = set()
        self.loops: dict[E.Var, E.Range] = {}  # enclosing loops, for T.axis.remap
        self.direct: BlockFrame | FuncFrame | None = None  # frame header statements go to
        self.block_depth = 0  # enclosing non-root blocks
        self.saw_block = False
        self.stray_store: tuple[ast.AST, str] | None = None
        self.in_init = False

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
        name = dotted(node)
        if name is None:
            return None
        head, _, rest = name.partition(".")
        if head in self.module.t_names and rest and not self._shadowed(head):
            return rest
        return None

    def _shadowed(self, name: str) -> bool:
        return any(name in scope for scope in self.scopes)
