"""The schedule state (TVM's `ScheduleState`): the module being transformed and where every
block and loop is. The primitives are functions over it (docs/architecture.md, "Schedules and
traces").

IR nodes are immutable, so a primitive builds a new subtree and `ScheduleState.replace` rebuilds
the chain of ancestors up to the function. Random variables survive replacement because they
name *stable identities*, not nodes: a block is identified by its name (unique within a
function, as TVM requires and as every primitive keeps), a loop by its loop `Var` (a rebuilt
`For` keeps its var; a loop that a primitive creates gets a fresh one). The index of blocks and
loops is rebuilt lazily after each replacement, one walk of the function, unless the replacement
only re-dressed a loop or block (same children): then the index is patched along the rebuilt
chain (docs/architecture.md, "Features and cost model").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Hashable

from msdb.errors import ScheduleError
from msdb.ir import expr as E
from msdb.ir import stmt as S
from msdb.ir.function import IRModule, PrimFunc

__all__ = ["FuncIndex", "ScheduleState", "replace_child"]


@dataclass
class FuncIndex:
    """Where each block and loop of one function sits. `parent` maps a statement to the
    statement that directly contains it (a BlockRealize's parent is a For, SeqStmt, Block, ...;
    a Block's parent is its BlockRealize)."""

    blocks: dict[str, S.Block] = field(default_factory=dict)
    realizes: dict[str, S.BlockRealize] = field(default_factory=dict)
    loops: dict[E.Var, S.For] = field(default_factory=dict)
    parent: dict[object, S.Stmt] = field(default_factory=dict)


def _build_index(func: PrimFunc) -> FuncIndex:
    index = FuncIndex()
    blocks, realizes, loops, parents = index.blocks, index.realizes, index.loops, index.parent
    body = func.body
    # (node, parent) pairs; the body has no parent entry. Dispatch on the exact node type (the
    # statement classes have no subclasses): a replay rebuilds this index after every primitive.
    stack: list[tuple[Any, S.Stmt]] = []
    node: Any = body
    parent: S.Stmt | None = None
    while True:
        if node is not None:
            if parent is not None:
                parents[node] = parent
            t = type(node)
            if t is S.For:
                loops[node.loop_var] = node
                stack.append((node.body, node))
            elif t is S.BlockRealize:
                name = node.block.name_hint
                if name in blocks:
                    raise ScheduleError(f"block name {name!r} is not unique in the function; schedules need unique block names")
                blocks[name] = node.block
                realizes[name] = node
                stack.append((node.block, node))
            elif t is S.Block:
                stack.append((node.body, node))
                if node.init is not None:
                    stack.append((node.init, node))
            elif t is S.SeqStmt:
                for child in reversed(node.seq):
                    stack.append((child, node))
            elif t is S.IfThenElse:
                stack.append((node.then_case, node))
                if node.else_case is not None:
                    stack.append((node.else_case, node))
            elif t is S.LetStmt:
                stack.append((node.body, node))
        if not stack:
            return index
        node, parent = stack.pop()


def _children(node: S.Stmt) -> tuple[S.Stmt, ...]:
    """The statements `_build_index` records `node` as the parent of."""
    if isinstance(node, (S.For, S.LetStmt)):
        return (node.body,)
    if isinstance(node, S.BlockRealize):
        return (node.block,)
    if isinstance(node, S.Block):
        return (node.body,) if node.init is None else (node.body, node.init)
    if isinstance(node, S.SeqStmt):
        return tuple(node.seq)
    if isinstance(node, S.IfThenElse):
        return (node.then_case,) if node.else_case is None else (node.then_case, node.else_case)
    return ()


def _same_children(old: S.Stmt, new: S.Stmt) -> bool:
    """Whether `new` only re-dresses `old` (a loop's kind or annotations, a block's
    annotations): the same type, name or loop variable, and the very same children."""
    if isinstance(old, S.For) and isinstance(new, S.For):
        same_place = old.loop_var is new.loop_var
    elif isinstance(old, S.Block) and isinstance(new, S.Block):
        same_place = old.name_hint == new.name_hint
    else:
        same_place = isinstance(old, S.BlockRealize) and isinstance(new, S.BlockRealize)
    before, after = _children(old), _children(new)
    return same_place and len(before) == len(after) and all(a is b for a, b in zip(before, after))


def _patched_index(index: FuncIndex, rebuilt: list[tuple[S.Stmt, S.Stmt]]) -> FuncIndex | None:
    """`index` after each statement of `rebuilt` (the replaced one, then its ancestors up to
    the body, each with its replacement) was replaced by one with the same children but the
    next on the list: what a fresh `_build_index` gives, without walking the function (half of
    a replay's replacements only re-dress a loop or a block). None when a replacement is of
    another kind (a sequence of one statement rebuilt as that statement)."""
    if any(type(was) is not type(now) for was, now in rebuilt):
        return None
    patched = FuncIndex(dict(index.blocks), dict(index.realizes), dict(index.loops), dict(index.parent))
    parents = patched.parent
    for k, (was, now) in enumerate(rebuilt):
        parents.pop(was, None)
        if k + 1 < len(rebuilt):
            parents[now] = rebuilt[k + 1][1]
        for child in _children(now):
            parents[child] = now
        if isinstance(now, S.For):
            patched.loops[now.loop_var] = now
        elif isinstance(now, S.BlockRealize):
            patched.realizes[now.block.name_hint] = now
        elif isinstance(now, S.Block):
            patched.blocks[now.name_hint] = now
    return patched


def replace_child(parent: S.Stmt, old: S.Stmt, new: S.Stmt | None) -> S.Stmt:
    """`parent` with its direct child `old` replaced by `new` (None removes it from a
    SeqStmt). Raises ScheduleError when `old` is not a direct child."""
    if isinstance(parent, S.For):
        if parent.body is old and new is not None:
            return S.For(parent.loop_var, parent.min, parent.extent, parent.kind, new, parent.thread_binding, parent.annotations)
    elif isinstance(parent, S.SeqStmt):
        items = list(parent.seq)
        for i, item in enumerate(items):
            if item is old:
                if new is None:
                    del items[i]
                    return S.seq(*items)
                items[i] = new
                return S.seq(*items)
    elif isinstance(parent, S.Block):
        if parent.body is old and new is not None:
            return S.Block(parent.iter_vars, parent.reads, parent.writes, parent.name_hint, new, parent.init,
                           parent.alloc_buffers, parent.match_buffers, parent.annotations)
        if parent.init is old:
            return S.Block(parent.iter_vars, parent.reads, parent.writes, parent.name_hint, parent.body, new,
                           parent.alloc_buffers, parent.match_buffers, parent.annotations)
    elif isinstance(parent, S.BlockRealize):
        if parent.block is old and isinstance(new, S.Block):
            return S.BlockRealize(parent.iter_values, parent.predicate, new)
    elif isinstance(parent, S.IfThenElse):
        if parent.then_case is old and new is not None:
            return S.IfThenElse(parent.condition, new, parent.else_case)
        if parent.else_case is old:
            return S.IfThenElse(parent.condition, parent.then_case, new)
    elif isinstance(parent, S.LetStmt):
        if parent.body is old and new is not None:
            return S.LetStmt(parent.var, parent.value, new)
    raise ScheduleError(f"internal: cannot replace {type(old).__name__} under {type(parent).__name__}")


class ScheduleState:
    """The module under transformation plus a lazily rebuilt index per function."""

    def __init__(self, mod: IRModule) -> None:
        self.mod = mod
        self._indexes: dict[str, FuncIndex] = {}
        # (move, the module it was tried on, the state it gave): see `remember_tried`
        self._tried: tuple[Hashable, IRModule, ScheduleState] | None = None

    def copy(self) -> ScheduleState:
        # Nodes are immutable, so sharing them is safe; indexes are rebuilt on demand.
        clone = ScheduleState(self.mod)
        clone._indexes = dict(self._indexes)
        return clone

    def remember_tried(self, move: Hashable, result: ScheduleState) -> None:
        """Keep `result`, what doing `move` (a hashable description of a primitive and its
        arguments) on a copy of this state gave: sampling a compute location tries the move
        its decision names, and the trace's next instruction usually makes it."""
        self._tried = (move, self.mod, result)

    def take_tried(self, move: Hashable) -> bool:
        """Become the state `move` gave when it was tried on this very module (True), else
        leave the state alone (False): a primitive then does the move itself."""
        tried = self._tried
        if tried is None or tried[1] is not self.mod or tried[0] != move:
            return False
        result = tried[2]
        self.mod, self._indexes, self._tried = result.mod, result._indexes, None
        return True

    # ---- lookup ----
    def func(self, func_name: str) -> PrimFunc:
        try:
            return self.mod.functions[func_name]
        except KeyError:
            raise ScheduleError(f"the module has no function {func_name!r}; it has {sorted(self.mod.functions)}") from None

    def index(self, func_name: str) -> FuncIndex:
        cached = self._indexes.get(func_name)
        if cached is None:
            cached = _build_index(self.func(func_name))
            self._indexes[func_name] = cached
        return cached

    def block(self, func_name: str, name: str) -> S.Block:
        """The block named `name`; ScheduleError when absent."""
        index = self.index(func_name)
        try:
            return index.blocks[name]
        except KeyError:
            known = sorted(n for n in index.blocks if n != "root")
            raise ScheduleError(f"no block named {name!r} in function {func_name!r}; its blocks are {known}") from None

    def realize(self, func_name: str, name: str) -> S.BlockRealize:
        self.block(func_name, name)
        return self.index(func_name).realizes[name]

    def loop(self, func_name: str, loop_var: E.Var) -> S.For:
        """The loop whose variable is `loop_var`; ScheduleError when it no longer exists."""
        try:
            return self.index(func_name).loops[loop_var]
        except KeyError:
            raise ScheduleError(f"loop {loop_var.name!r} no longer exists in function {func_name!r} (it was transformed away)") from None

    def parent(self, func_name: str, node: object) -> S.Stmt | None:
        return self.index(func_name).parent.get(node)

    def ancestors(self, func_name: str, node: object) -> list[S.Stmt]:
        """Ancestors of `node`, innermost first, up to the root BlockRealize."""
        parents = self.index(func_name).parent
        chain = []
        current = parents.get(node)
        while current is not None:
            chain.append(current)
            current = parents.get(current)
        return chain

    def scope_block(self, func_name: str, node: object) -> S.Block:
        """The nearest Block strictly enclosing `node` (for a block: its parent scope)."""
        start = node
        if isinstance(node, S.Block):
            start = self.parent(func_name, node)  # its BlockRealize
        for ancestor in self.ancestors(func_name, start):
            if isinstance(ancestor, S.Block):
                return ancestor
        raise ScheduleError("internal: statement has no enclosing block")

    # ---- mutation ----
    def replace(self, func_name: str, old: S.Stmt, new: S.Stmt | None) -> None:
        """Put `new` where `old` is (None deletes `old` from its SeqStmt), rebuilding every
        ancestor up to the function body."""
        func = self.func(func_name)
        if old is func.body:
            if new is None:
                raise ScheduleError("internal: cannot delete a function body")
            self._set_body(func_name, new)
            return
        child: S.Stmt = old
        replacement: S.Stmt | None = new
        rebuilt: list[tuple[S.Stmt, S.Stmt]] = []
        for ancestor in self.ancestors(func_name, old):
            replacement = replace_child(ancestor, child, replacement)
            rebuilt.append((ancestor, replacement))
            child = ancestor
        if child is not func.body or replacement is None:
            raise ScheduleError("internal: statement is not part of the function")
        index = self._indexes.get(func_name)
        self._set_body(func_name, replacement)
        if index is not None and new is not None and _same_children(old, new):
            patched = _patched_index(index, [(old, new), *rebuilt])
            if patched is not None:
                self._indexes[func_name] = patched

    def _set_body(self, func_name: str, body: S.Stmt) -> None:
        self.mod = self.mod.with_function(func_name, self.func(func_name).with_body(body))
        self._indexes.pop(func_name, None)
