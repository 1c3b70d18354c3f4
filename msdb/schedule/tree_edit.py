"""Tree surgery for the schedule primitives: rebuild a scope with several edits at once.

A block primitive typically removes one subtree, inserts another and rewrites a few blocks of
one scope at once. Doing that with one bottom-up rebuild of the scope block (`rebuild`) keeps
every edit consistent: edits are keyed by node identity, so they are unambiguous even when the
same expression objects appear in several places. What the blocks of a scope are and how they
depend on each other is `msdb.schedule.analysis`'s job.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from msdb.errors import ScheduleError
from msdb.ir import expr as E
from msdb.ir import stmt as S
from msdb.schedule.state import ScheduleState

__all__ = [
    "const_true",
    "is_const_true",
    "as_list",
    "rebuild",
    "with_block",
    "insert_before",
    "insert_after",
    "body_insert_edit",
    "removal_target",
    "unique_block_name",
    "iter_var_map",
]


def const_true() -> E.PrimExpr:
    return E.IntImm("bool", 1)


def is_const_true(expr: E.PrimExpr) -> bool:
    return isinstance(expr, E.IntImm) and expr.value != 0


def as_list(body: S.Stmt) -> list[S.Stmt]:
    """A statement's sequence items (a lone statement is a one-item sequence)."""
    return list(body.seq) if isinstance(body, S.SeqStmt) else [body]


def rebuild(node: S.Stmt,
            replace: Mapping[object, S.Stmt | None] | None = None,
            post: Mapping[object, Callable[[S.Stmt], S.Stmt]] | None = None) -> S.Stmt | None:
    """Rebuild `node` bottom-up. `replace[n]` substitutes node n wholesale (None deletes it;
    a loop left without body disappears too); `post[n]` is applied to n after its children
    were rebuilt (used to insert next to a statement: return `seq(new, n)`)."""
    replace = replace or {}
    post = post or {}

    def visit(n: S.Stmt) -> S.Stmt | None:
        if n in replace:
            return replace[n]
        out = _descend(n, visit)
        if out is not None and n in post:
            out = post[n](out)
        return out

    return visit(node)


def _descend(n: S.Stmt, visit: Callable[[S.Stmt], S.Stmt | None]) -> S.Stmt | None:
    if isinstance(n, S.SeqStmt):
        items = [visit(c) for c in n.seq]
        if all(a is b for a, b in zip(items, n.seq)):
            return n
        kept = [i for i in items if i is not None]
        return S.seq(*kept) if kept else None
    if isinstance(n, S.For):
        body = visit(n.body)
        if body is None:
            return None
        if body is n.body:
            return n
        return S.For(n.loop_var, n.min, n.extent, n.kind, body, n.thread_binding, n.annotations)
    if isinstance(n, S.BlockRealize):
        block = visit(n.block)
        if block is None:
            return None
        if block is n.block:
            return n
        assert isinstance(block, S.Block)
        return S.BlockRealize(n.iter_values, n.predicate, block)
    if isinstance(n, S.Block):
        body = visit(n.body)
        init = visit(n.init) if n.init is not None else None
        if body is None:
            raise ScheduleError(f"block {n.name_hint!r} would be left without a body")
        if body is n.body and init is n.init:
            return n
        return with_block(n, body=body, init=init)
    if isinstance(n, S.IfThenElse):
        then = visit(n.then_case)
        other = visit(n.else_case) if n.else_case is not None else None
        if then is None and other is None:
            return None
        if then is n.then_case and other is n.else_case:
            return n
        if then is None:
            assert other is not None
            return S.IfThenElse(E.Not(n.condition), other)
        return S.IfThenElse(n.condition, then, other)
    if isinstance(n, S.LetStmt):
        body = visit(n.body)
        if body is None:
            return None
        return n if body is n.body else S.LetStmt(n.var, n.value, body)
    return n


_KEEP = object()


def with_block(block: S.Block, *, iter_vars: Any = _KEEP, reads: Any = _KEEP, writes: Any = _KEEP,
               name_hint: Any = _KEEP, body: Any = _KEEP, init: Any = _KEEP, alloc_buffers: Any = _KEEP,
               match_buffers: Any = _KEEP, annotations: Any = _KEEP) -> S.Block:
    """A copy of `block` with the given fields replaced."""
    def pick(value: Any, current: Any) -> Any:
        return current if value is _KEEP else value

    return S.Block(
        tuple(pick(iter_vars, block.iter_vars)),
        tuple(pick(reads, block.reads)),
        tuple(pick(writes, block.writes)),
        pick(name_hint, block.name_hint),
        pick(body, block.body),
        pick(init, block.init),
        tuple(pick(alloc_buffers, block.alloc_buffers)),
        tuple(pick(match_buffers, block.match_buffers)),
        pick(annotations, block.annotations),
    )


def insert_before(new: S.Stmt) -> Callable[[S.Stmt], S.Stmt]:
    return lambda rebuilt: S.seq(new, rebuilt)


def insert_after(new: S.Stmt) -> Callable[[S.Stmt], S.Stmt]:
    return lambda rebuilt: S.seq(rebuilt, new)


def body_insert_edit(container: S.For | S.Block, pos: int, new: S.Stmt) -> tuple[object, Callable[[S.Stmt], S.Stmt]]:
    """An edit (node, post-function) inserting `new` at index `pos` of the body sequence of
    `container` (a For or a Block): before item `pos`, or after the last item."""
    items = as_list(container.body)
    if pos < len(items):
        return items[pos], insert_before(new)
    return items[-1], insert_after(new)


def removal_target(state: ScheduleState, func_name: str, realize: S.BlockRealize) -> S.Stmt:
    """The statement to delete to take a block out of the tree: the block's realize, or the
    outermost loop of the chain of loops that contain nothing else (TVM's leaf removal)."""
    node: S.Stmt = realize
    parent = state.parent(func_name, node)
    while isinstance(parent, S.For):
        node = parent
        parent = state.parent(func_name, node)
    if isinstance(parent, S.Block):
        raise ScheduleError(
            f"block {realize.block.name_hint!r} is the only statement of its scope "
            f"{parent.name_hint!r} and cannot be removed from it")
    return node


def unique_block_name(state: ScheduleState, func_name: str, wanted: str) -> str:
    """`wanted`, or `wanted_1`, `wanted_2`, ... if a block already has that name (msdb keeps
    block names unique; TVM would create a duplicate)."""
    names = state.index(func_name).blocks
    if wanted not in names:
        return wanted
    i = 1
    while f"{wanted}_{i}" in names:
        i += 1
    return f"{wanted}_{i}"


def iter_var_map(block: S.Block, values: tuple[E.PrimExpr, ...]) -> dict[E.Var, E.PrimExpr]:
    return {iv.var: v for iv, v in zip(block.iter_vars, values)}
