"""The one scope analysis every schedule primitive uses: TVM's `BlockScope` and schedule analysis
over msdb's block tree, in one place so that no two primitives disagree about what a producer or a
complete block is.

`child_block_realizes`, `BlockScope` (dependencies, producers and consumers, complete and
reduction blocks), `loops_above`, `sref_parent`, `is_output_block`, `loop_iter_types`. TVM's
definitions and what is not checked: see docs/architecture.md, "Schedules and traces".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Sequence

from msdb.errors import ScheduleError
from msdb.ir import expr as E
from msdb.ir import stmt as S
from msdb.ir.function import PrimFunc
from msdb.ir.functor import free_vars
from msdb.schedule.state import ScheduleState

__all__ = [
    "child_block_realizes",
    "statements_under",
    "read_buffers",
    "write_buffers",
    "Dependency",
    "BlockScope",
    "scope_of",
    "loops_above",
    "sref_parent",
    "is_root_scope",
    "is_output_block",
    "loop_iter_type",
    "loop_iter_types",
    "uses_var",
    "domain",
]


def child_block_realizes(stmt: S.Stmt | None) -> list[S.BlockRealize]:
    """Block realizes under `stmt` (itself included), in execution order, without descending
    into the blocks found: their children belong to inner scopes."""
    out: list[S.BlockRealize] = []
    stack: list[Any] = [stmt]
    while stack:
        node = stack.pop()
        t = type(node)
        if t is S.BlockRealize:
            out.append(node)
        elif t is S.For or t is S.LetStmt:
            stack.append(node.body)
        elif t is S.SeqStmt:
            stack.extend(reversed(node.seq))
        elif t is S.IfThenElse:
            if node.else_case is not None:
                stack.append(node.else_case)
            stack.append(node.then_case)
    return out


def _unique(buffers: Iterable[E.Buffer]) -> list[E.Buffer]:
    seen: set[int] = set()
    out: list[E.Buffer] = []
    for buf in buffers:
        if id(buf) not in seen:
            seen.add(id(buf))
            out.append(buf)
    return out


def read_buffers(block: S.Block) -> list[E.Buffer]:
    """The buffers of the block's read regions, each once, in region order."""
    return _unique(r.buffer for r in block.reads)


def write_buffers(block: S.Block) -> list[E.Buffer]:
    """The buffers of the block's write regions, each once, in region order."""
    return _unique(w.buffer for w in block.writes)


@dataclass(frozen=True)
class Dependency:
    """`dst` depends on the earlier block `src`: "RAW" (dst reads what src writes), "WAW" (both
    write a buffer) or "WAR" (dst writes what src reads)."""

    src: S.Block
    dst: S.Block
    kind: str


class BlockScope:
    """The child blocks of one scope root (a block, or a loop for TVM's "local" checks of a
    subtree such as parallel's compact dataflow), in execution order, with their
    dependencies."""

    def __init__(self, root: S.Block | S.For) -> None:
        self.root = root
        self.realizes = child_block_realizes(root.body)
        self._deps: list[Dependency] | None = None
        self._writers: dict[int, list[S.Block]] | None = None

    @property
    def blocks(self) -> list[S.Block]:
        return [r.block for r in self.realizes]

    def index_of(self, block: S.Block) -> int:
        for i, r in enumerate(self.realizes):
            if r.block is block:
                return i
        raise ScheduleError(f"internal: block {block.name_hint!r} is not a child block of this scope")

    # ---- dependencies ----
    def dependencies(self) -> list[Dependency]:
        """Every dependency edge, in TVM's `BlockScope` order."""
        if self._deps is None:
            writers: dict[int, list[S.Block]] = {}
            readers: dict[int, list[S.Block]] = {}
            deps: list[Dependency] = []
            for block in self.blocks:
                reads, writes = read_buffers(block), write_buffers(block)
                for buf in reads:
                    readers.setdefault(id(buf), []).append(block)
                for buf in writes:
                    writers.setdefault(id(buf), []).append(block)
                for bufs, table, kind in ((reads, writers, "RAW"), (writes, writers, "WAW"), (writes, readers, "WAR")):
                    for buf in bufs:
                        deps.extend(Dependency(src, block, kind) for src in table.get(id(buf), ()) if src is not block)
            self._deps = deps
        return self._deps

    def producers(self, block: S.Block) -> list[S.Block]:
        """Earlier blocks that write what `block` reads (RAW) or writes (WAW), each once, in
        TVM's order (`GetProducers`)."""
        return _unique_blocks(d.src for d in self.dependencies() if d.dst is block and d.kind != "WAR")

    def consumers(self, block: S.Block) -> list[S.Block]:
        """Later blocks that read (RAW) or rewrite (WAW) what `block` writes, each once, in
        TVM's order (`GetConsumers`)."""
        return _unique_blocks(d.dst for d in self.dependencies() if d.src is block and d.kind != "WAR")

    def writers(self, buffer: E.Buffer) -> list[S.Block]:
        """The blocks of the scope that write `buffer`, in execution order."""
        if self._writers is None:
            table: dict[int, list[S.Block]] = {}
            for block in self.blocks:
                for buf in write_buffers(block):
                    table.setdefault(id(buf), []).append(block)
            self._writers = table
        return list(self._writers.get(id(buffer), ()))

    def readers(self, buffer: E.Buffer) -> list[S.Block]:
        """The blocks of the scope that read `buffer`, in execution order."""
        return [b for b in self.blocks if any(r is buffer for r in read_buffers(b))]

    # ---- block kinds ----
    def is_dominant(self, block: S.Block) -> bool:
        """The block is the only writer, within the scope, of every buffer it writes."""
        return all(len(self.writers(buf)) == 1 for buf in write_buffers(block))

    def complete_block_problem(self, block: S.Block) -> str | None:
        """Why `block` is not a complete block (TVM's `IsCompleteBlock`), or None if it is."""
        if any(iv.iter_type != S.IterType.DATA_PAR for iv in block.iter_vars):
            return "not all of its iter vars are spatial"
        if not self.is_dominant(block):
            return "another block of its scope writes the same buffer"
        written = {id(b) for b in write_buffers(block)}
        if any(id(b) in written for b in read_buffers(block)):
            return "it reads a buffer it writes"
        return None

    def reduction_block_problem(self, block: S.Block, regions: bool = False) -> str | None:
        """Why `block` is not a reduction block (TVM's `IsReductionBlock`, except its check of
        affine bindings), or None if it is. With `regions`, a written region whose bounds use
        a reduction iter var is refused too: not TVM's condition (TVM refuses such scopes as
        not a "stage pipeline", an analysis msdb does not have), but the primitives that derive
        domains from the written regions (compute_at, rfactor) need it."""
        if block.init is None:
            return "it has no init"
        if any(iv.iter_type not in (S.IterType.DATA_PAR, S.IterType.COMM_REDUCE) for iv in block.iter_vars):
            return "it has iter vars that are neither spatial nor reduction"
        if not self.is_dominant(block):
            return "another block of its scope writes the same buffer"
        if _stores_at_reduction_index(block):
            return "it stores into a buffer it writes at an index that uses a reduction iter var"
        if regions and _written_region_uses_reduction_vars(block):
            return "its written region depends on a reduction iter var"
        return None

    def is_complete_block(self, block: S.Block) -> bool:
        return self.complete_block_problem(block) is None

    def is_reduction_block(self, block: S.Block) -> bool:
        return self.reduction_block_problem(block) is None


def _unique_blocks(blocks: Iterable[S.Block]) -> list[S.Block]:
    out: list[S.Block] = []
    for block in blocks:
        if not any(block is b for b in out):
            out.append(block)
    return out


def _stores_at_reduction_index(block: S.Block) -> bool:
    """TVM's last reduction-block condition: a store in the body (nested blocks included, a
    matched buffer standing for its source) into a buffer the block writes uses a reduction
    iter var in an index."""
    reduce_vars = {iv.var for iv in block.iter_vars if iv.iter_type == S.IterType.COMM_REDUCE}
    if not reduce_vars:
        return False
    written = {id(b) for b in write_buffers(block)}
    source = {id(m.buffer): m.source.buffer for m in block.match_buffers}
    for node in statements_under(block.body, inits=True):
        if type(node) is S.BufferStore:
            buffer = source.get(id(node.buffer), node.buffer)
            if id(buffer) in written and any(free_vars(i) & reduce_vars for i in node.indices):
                return True
        elif type(node) is S.BlockRealize:
            source.update((id(m.buffer), source.get(id(m.source.buffer), m.source.buffer))
                          for m in node.block.match_buffers)
    return False


def statements_under(stmt: S.Stmt, inits: bool = False) -> Iterator[Any]:
    """Every statement under `stmt` (itself included), descending into blocks (their bodies,
    and with `inits` their inits, init first), depth first in execution order (TVM's
    StmtVisitor order). A block realize is yielded before anything under it is visited."""
    stack: list[Any] = [stmt]
    while stack:
        node = stack.pop()
        if node is None:
            continue
        yield node
        t = type(node)
        if t is S.BlockRealize:
            stack.append(node.block.body)
            if inits and node.block.init is not None:
                stack.append(node.block.init)
        elif t is S.For or t is S.LetStmt:
            stack.append(node.body)
        elif t is S.SeqStmt:
            stack.extend(reversed(node.seq))
        elif t is S.IfThenElse:
            stack.append(node.else_case)
            stack.append(node.then_case)


def _written_region_uses_reduction_vars(block: S.Block) -> bool:
    reduce_vars = {iv.var for iv in block.iter_vars if iv.iter_type == S.IterType.COMM_REDUCE}
    return bool(reduce_vars) and any(free_vars(rng.min) & reduce_vars or free_vars(rng.extent) & reduce_vars
                                     for w in block.writes for rng in w.region)


def scope_of(state: ScheduleState, func_name: str, node: object) -> BlockScope:
    """The scope `node` (a block, loop or realize) belongs to: its nearest enclosing block's."""
    return BlockScope(state.scope_block(func_name, node))


def loops_above(state: ScheduleState, func_name: str, node: object, below: object | None = None) -> list[S.For]:
    """The loops enclosing `node` (a For or a BlockRealize; `node` itself excluded), outermost
    first, up to its scope block, or only those strictly inside `below` when given."""
    loops: list[S.For] = []
    parents = state.index(func_name).parent
    anc = parents.get(node)
    while anc is not None and anc is not below and type(anc) is not S.Block:
        if type(anc) is S.For:
            loops.append(anc)
        anc = parents.get(anc)
    loops.reverse()
    return loops


def sref_parent(state: ScheduleState, func_name: str, node: object) -> S.Stmt | None:
    """The nearest enclosing loop or block of `node` (TVM's sref-tree parent); a block's own
    realize is skipped."""
    for anc in state.ancestors(func_name, node):
        if isinstance(anc, (S.For, S.Block)):
            return anc
    return None


def is_root_scope(state: ScheduleState, func_name: str, scope_block: S.Block) -> bool:
    """Whether `scope_block` is the function's root block."""
    return state.parent(func_name, state.parent(func_name, scope_block)) is None


def is_output_block(func: PrimFunc, scope_block: S.Block, block: S.Block, root_scope: bool) -> bool:
    """Whether `block` writes an output of its scope: a parameter buffer of the function in the
    root scope, a buffer the scope block does not allocate in an inner scope."""
    if root_scope:
        params = {id(b) for b in func.buffer_map.values()}
        return any(id(w.buffer) in params for w in block.writes)
    allocated = {id(b) for b in scope_block.alloc_buffers}
    return any(id(w.buffer) not in allocated for w in block.writes)


def domain(iv: S.IterVar) -> E.Range:
    """The domain of a block iter var (only a loop's thread binding may lack one)."""
    if iv.dom is None:
        raise ScheduleError(f"internal: iter var {iv.var.name!r} has no domain")
    return iv.dom


def uses_var(expr: Any, var: E.Var) -> bool:
    """Whether `var` occurs in the expression (fast path for the common tiny bindings)."""
    t = type(expr)
    if t is E.Var:
        return expr is var
    if t is E.IntImm or t is E.FloatImm or t is E.StringImm:
        return False
    if isinstance(expr, E.BinaryOp):
        return uses_var(expr.a, var) or uses_var(expr.b, var)
    return var in free_vars(expr)


def _add_vars(expr: Any, out: set[E.Var]) -> None:
    """The variables of `expr` into `out` (fast path for the common tiny bindings)."""
    t = type(expr)
    if t is E.Var:
        out.add(expr)
    elif t is E.IntImm or t is E.FloatImm or t is E.StringImm:
        return
    elif isinstance(expr, E.BinaryOp):
        _add_vars(expr.a, out)
        _add_vars(expr.b, out)
    else:
        out |= free_vars(expr)


def _var_uses(realize: S.BlockRealize) -> dict[E.Var, list[int]]:
    """Per variable, how many of the block's iter vars of each kind (spatial, reduction, other)
    its bindings feed."""
    uses: dict[E.Var, list[int]] = {}
    for iv, value in zip(realize.block.iter_vars, realize.iter_values):
        kind = 0 if iv.iter_type == S.IterType.DATA_PAR else 1 if iv.iter_type == S.IterType.COMM_REDUCE else 2
        found: set[E.Var] = set()
        _add_vars(value, found)
        for var in found:
            counts = uses.get(var)
            if counts is None:
                counts = uses[var] = [0, 0, 0]
            counts[kind] += 1
    return uses


def loop_iter_types(loops: Sequence[S.For]) -> list[S.IterType]:
    """TVM's GetLoopIterType of each loop: how the blocks directly under it use its variable
    (spatial, reduction, or opaque when mixed or fed to another kind of iter var). Each block's
    bindings are read once for all the loops (a loop nest shares its blocks)."""
    per_realize: dict[int, dict[E.Var, list[int]]] = {}
    types: list[S.IterType] = []
    for loop in loops:
        var = loop.loop_var
        n_spatial = n_reduce = n_other = 0
        for realize in child_block_realizes(loop.body):
            uses = per_realize.get(id(realize))
            if uses is None:
                uses = per_realize[id(realize)] = _var_uses(realize)
            counts = uses.get(var)
            if counts is not None:
                n_spatial += counts[0]
                n_reduce += counts[1]
                n_other += counts[2]
        if n_other or (n_spatial and n_reduce):
            types.append(S.IterType.OPAQUE)
        elif n_reduce:
            types.append(S.IterType.COMM_REDUCE)
        else:
            types.append(S.IterType.DATA_PAR)
    return types


def loop_iter_type(loop: S.For) -> S.IterType:
    """TVM's GetLoopIterType for one loop (see `loop_iter_types`)."""
    return loop_iter_types([loop])[0]


def simplify_non_trivial(index: E.PrimExpr, ranges: dict[E.Var, E.Range]) -> E.PrimExpr:
    """TVM's SimplifyNonTrivialExpr under an analyzer bound to `ranges`: the index simplified (a
    variable of one value is that value, as TVM's Analyzer binds it: a 1x1 conv's `v_h + v_rh` is
    `v_h`), or the index itself when it simplifies to a constant."""
    from msdb.ir.arith import simplify
    from msdb.ir.functor import substitute

    units = {v: r.min for v, r in ranges.items() if E.const_int(r.extent) == 1}
    simple = simplify(substitute(index, units), ranges)
    return index if isinstance(simple, E.IntImm) else simple

