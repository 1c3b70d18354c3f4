"""Tree surgery and scope analysis shared by the block primitives.

A block primitive typically removes one subtree, inserts another and rewrites a few blocks of
one scope at once. Doing that with one bottom-up rebuild of the scope block (`rebuild`) keeps
every edit consistent: edits are keyed by node identity, so they are unambiguous even when the
same expression objects appear in several places.

Scope analysis follows TVM's `BlockScope`: the blocks of a scope are the blocks whose nearest
enclosing block is the scope block, in execution (pre-)order; a block *produces* for a later
block that reads a buffer it writes (RAW) or writes it again (WAW).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

from msdb.errors import ScheduleError
from msdb.ir import expr as E
from msdb.ir import stmt as S
from msdb.ir.function import PrimFunc
from msdb.schedule.state import ScheduleState

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
        return S.BlockRealize(n.iter_values, n.predicate, block)  # type: ignore[arg-type]
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
            return S.IfThenElse(E.Not(n.condition), other)  # type: ignore[arg-type]
        return S.IfThenElse(n.condition, then, other)
    if isinstance(n, S.LetStmt):
        body = visit(n.body)
        if body is None:
            return None
        return n if body is n.body else S.LetStmt(n.var, n.value, body)
    return n


_KEEP = object()


def with_block(block: S.Block, *, iter_vars=_KEEP, reads=_KEEP, writes=_KEEP, name_hint=_KEEP, body=_KEEP,
               init=_KEEP, alloc_buffers=_KEEP, match_buffers=_KEEP, annotations=_KEEP) -> S.Block:
    """A copy of `block` with the given fields replaced."""
    def pick(value, current):
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


def body_insert_edit(container: S.Stmt, pos: int, new: S.Stmt) -> tuple[object, Callable[[S.Stmt], S.Stmt]]:
    """An edit (node, post-function) inserting `new` at index `pos` of the body sequence of
    `container` (a For or a Block): before item `pos`, or after the last item."""
    items = as_list(container.body)  # type: ignore[attr-defined]
    if pos < len(items):
        return items[pos], insert_before(new)
    return items[-1], insert_after(new)


def blocks_in(stmt: S.Stmt) -> list[S.BlockRealize]:
    """Block realizes under `stmt` (itself included) in execution order, not descending into
    the blocks found (their children belong to inner scopes)."""
    out: list[S.BlockRealize] = []
    stack = [stmt]
    while stack:
        n = stack.pop()
        if isinstance(n, S.BlockRealize):
            out.append(n)
        elif isinstance(n, S.For):
            stack.append(n.body)
        elif isinstance(n, S.SeqStmt):
            stack.extend(reversed(n.seq))
        elif isinstance(n, S.IfThenElse):
            if n.else_case is not None:
                stack.append(n.else_case)
            stack.append(n.then_case)
        elif isinstance(n, S.LetStmt):
            stack.append(n.body)
    return out


def read_buffers(block: S.Block) -> list[E.Buffer]:
    return _unique(r.buffer for r in block.reads)


def write_buffers(block: S.Block) -> list[E.Buffer]:
    return _unique(w.buffer for w in block.writes)


def _unique(items) -> list:
    seen: list = []
    for item in items:
        if not any(item is s for s in seen):
            seen.append(item)
    return seen


@dataclass
class Scope:
    """The blocks of one scope in execution order, with producer/consumer relations."""

    block: S.Block
    realizes: list[S.BlockRealize]

    @property
    def blocks(self) -> list[S.Block]:
        return [r.block for r in self.realizes]

    def index_of(self, block: S.Block) -> int:
        for i, r in enumerate(self.realizes):
            if r.block is block:
                return i
        raise ScheduleError(f"internal: block {block.name_hint!r} is not in scope {self.block.name_hint!r}")

    def producers(self, block: S.Block) -> list[S.Block]:
        """Earlier blocks writing a buffer `block` reads or writes (RAW, WAW)."""
        i = self.index_of(block)
        needs = set(map(id, read_buffers(block))) | set(map(id, write_buffers(block)))
        return [b for b in self.blocks[:i] if set(map(id, write_buffers(b))) & needs]

    def consumers(self, block: S.Block) -> list[S.Block]:
        """Later blocks reading or rewriting a buffer `block` writes (RAW, WAW)."""
        i = self.index_of(block)
        gives = set(map(id, write_buffers(block)))
        out = []
        for b in self.blocks[i + 1:]:
            if (set(map(id, read_buffers(b))) | set(map(id, write_buffers(b)))) & gives:
                out.append(b)
        return out

    def writers(self, buffer: E.Buffer) -> list[S.Block]:
        return [b for b in self.blocks if any(w is buffer for w in write_buffers(b))]

    def readers(self, buffer: E.Buffer) -> list[S.Block]:
        return [b for b in self.blocks if any(r is buffer for r in read_buffers(b))]


def output_buffers(func: PrimFunc) -> set[int]:
    """ids of the function's parameter buffers (what an "output block" writes)."""
    return {id(b) for b in func.buffer_map.values()}


def is_output_block(func: PrimFunc, scope: S.Block, block: S.Block, is_root_scope: bool) -> bool:
    if is_root_scope:
        params = output_buffers(func)
        return any(id(w.buffer) in params for w in block.writes)
    allocated = {id(b) for b in scope.alloc_buffers}
    return any(id(w.buffer) not in allocated for w in block.writes)


def is_dominant(scope: Scope, block: S.Block) -> bool:
    """The block is the only writer, within its scope, of every buffer it writes."""
    return all(scope.writers(buf) == [block] for buf in write_buffers(block))


def complete_block_problem(scope: Scope, block: S.Block) -> str | None:
    """Why `block` is not a complete block (TVM's definition), or None if it is."""
    if block.init is not None:
        return "it has an init (it is a reduction block)"
    if any(iv.iter_type != S.IterType.DATA_PAR for iv in block.iter_vars):
        return "not all of its iter vars are spatial"
    if not is_dominant(scope, block):
        return "another block of its scope writes the same buffer"
    written = {id(b) for b in write_buffers(block)}
    if any(id(b) in written for b in read_buffers(block)):
        return "it reads a buffer it writes"
    return None


def reduction_block_problem(scope: Scope, block: S.Block) -> str | None:
    """Why `block` is not a reduction block (TVM's definition), or None if it is."""
    if block.init is None:
        return "it has no init"
    allowed = (S.IterType.DATA_PAR, S.IterType.COMM_REDUCE)
    if any(iv.iter_type not in allowed for iv in block.iter_vars):
        return "it has iter vars that are neither spatial nor reduction"
    if not is_dominant(scope, block):
        return "another block of its scope writes the same buffer"
    reduce_vars = {iv.var for iv in block.iter_vars if iv.iter_type == S.IterType.COMM_REDUCE}
    from msdb.ir.functor import free_vars

    for w in block.writes:
        for rng in w.region:
            if free_vars(rng.min) & reduce_vars or free_vars(rng.extent) & reduce_vars:
                return "its written region depends on a reduction iter var"
    return None


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


def loops_between(state: ScheduleState, func_name: str, node: object, top: object | None) -> list[S.For]:
    """Loops enclosing `node` below `top` (exclusive; None: up to the scope block), outermost
    first."""
    loops: list[S.For] = []
    for anc in state.ancestors(func_name, node):
        if anc is top or isinstance(anc, S.Block):
            break
        if isinstance(anc, S.For):
            loops.append(anc)
    loops.reverse()
    return loops


def enclosing_loops(state: ScheduleState, func_name: str, node: object, include_self: bool = True) -> list[S.For]:
    """All loops around `node` up to its scope block (and `node` itself if it is a loop)."""
    loops = loops_between(state, func_name, node, None)
    if include_self and isinstance(node, S.For):
        loops.append(node)
    return loops


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
