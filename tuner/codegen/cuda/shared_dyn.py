"""One pool for a kernel's `shared.dyn` buffers, reusing memory between buffers whose live
ranges do not overlap (TVM's MergeSharedMemoryAllocations; docs/architecture.md, "CUDA").

TVM's tensor-core schedules stage operands and results in `shared.dyn` memory. TVM's lowering
(VerifyGPUCode's pipeline too) merges a kernel's `shared.dyn` allocations into one byte array,
and a buffer that is first touched after another's last touch reuses its bytes: the output tile
staged after the reduction loop lives where the operand tiles lived. VerifyGPUCode counts the
merged array, so msdb must plan it the same way or it would refuse candidates TVM accepts
(a 256x128 matmul tile: 57,600 bytes as separate arrays, 32,768 merged).

The plan is TVM's, written for msdb's lowered IR:
- a linear sequence of the kernel's statements: a leaf (store, call) is one entry, a loop or an
  `if` two (its start and its end); the kernel's outermost launch loop is a scope, the thread
  loops inside it are not (TVM's nested thread_extent attributes);
- a buffer's touches count at the statement directly inside its allocation that contains them;
  it is born at the start of the first such statement and dies at the end of the last;
- at a birth the buffer takes a freed block of at least its size and at most 16 times it, else
  combines freed smaller blocks (largest first) until they hold it, else a new block; blocks of
  32 bits or less are never shared;
- offsets: blocks in order of size, each buffer of a block's layer aligned to its
  `data_alignment` (64 bytes), a block as large as its largest layer.

Sizes are TVM's flattened sizes: `shape[0] * strides[0]` elements for a padded (storage_align)
buffer. The pool is one `__shared__` byte array (static, not `extern`: the runner passes no
dynamic shared memory, and VerifyGPUCode's limit is the 48 KiB a static array may use); each
buffer becomes a view of it (`Buffer.data` the pool's variable, `elem_offset` its offset in
elements), so every index, vector access and wmma pointer carries its offset, and barrier
insertion (`sync`) treats views of one pool as one buffer, as TVM's ThreadSync sees the merged
array.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from msdb.ir import expr as E
from msdb.ir import stmt as S
from msdb.ir.functor import IRMutator
from msdb.tuner.codegen.analysis import Allocate, static_shape, walk
from msdb.tuner.codegen.cuda.emit_expr import elem_bytes

__all__ = ["POOL_NAME", "merge_dynamic_shared", "tvm_allocation_bytes", "is_pool_view"]

logger = logging.getLogger(__name__)

#: The merged array's name, as TVM names it.
POOL_NAME = "buf_dyn_shmem"
#: A freed block is reused for a buffer of at most this many times smaller (TVM's match_range).
_MATCH_RANGE = 16


def tvm_allocation_bytes(buffer: E.Buffer) -> int:
    """Bytes TVM allocates for `buffer` once flattened: the product of its shape, or with
    strides (storage_align) `shape[0] * strides[0]` elements (GetBufferAllocationShape)."""
    shape = static_shape(buffer)
    count = 1
    if buffer.strides and shape:
        first = E.const_int(buffer.strides[0])
        count = shape[0] * int(first if first is not None else 1)
    else:
        for d in shape:
            count *= d
    return count * elem_bytes(buffer.dtype)


def is_pool_view(buffer: E.Buffer) -> bool:
    """Whether `buffer` is a typed view of a merged pool (not allocated by itself)."""
    return buffer.scope == "shared.dyn" and buffer.data is not None and buffer.data.name == POOL_NAME


def _is_member(buffer: E.Buffer) -> bool:
    return buffer.scope == "shared.dyn" and not is_pool_view(buffer)


# =============================================================================================
# Linear access sequence and liveness
# =============================================================================================


@dataclass
class _Entry:
    offset: int  # > 0: start of a scope (its end is at index + offset); < 0: its end; 0: a leaf
    touched: list[E.Buffer] = field(default_factory=list)


class _Linear:
    """TVM's SharedMemLinearAccessPatternFinder over msdb's lowered statements."""

    def __init__(self, members: set[E.Buffer]) -> None:
        self.members = members
        self.seq: list[_Entry] = []
        self.scopes: list[list[E.Buffer]] = []
        self.level: dict[E.Buffer, int] = {}

    def touch(self, node: object) -> None:
        def visit(n: object) -> None:
            if isinstance(n, E.BufferLoad):
                self._touch(n.buffer)

        walk(node, visit)

    def _touch(self, buffer: E.Buffer) -> None:
        level = self.level.get(buffer)
        if level is not None and level < len(self.scopes):
            self.scopes[level].append(buffer)

    def leaf(self, exprs: list[E.PrimExpr], written: E.Buffer | None) -> None:
        self.scopes.append([])
        for e in exprs:
            self.touch(e)
        if written is not None:
            self._touch(written)
        touched = self.scopes.pop()
        if touched:
            self.seq.append(_Entry(0, touched))

    def new_scope(self, exprs: list[E.PrimExpr], bodies: list[S.Stmt]) -> None:
        self.scopes.append([])
        begin = len(self.seq)
        self.seq.append(_Entry(0))
        for e in exprs:
            self.touch(e)
        for b in bodies:
            self.stmt(b, nested=True)
        touched = self.scopes.pop()
        end = len(self.seq)
        self.seq.append(_Entry(begin - end, touched))
        self.seq[begin].offset = end - begin

    def stmt(self, s: S.Stmt, nested: bool) -> None:
        if isinstance(s, Allocate):
            if s.buffer in self.members:
                self.level[s.buffer] = len(self.scopes)
            self.stmt(s.body, nested)
        elif isinstance(s, S.SeqStmt):
            for x in s.seq:
                self.stmt(x, nested)
        elif isinstance(s, S.BufferStore):
            self.leaf([s.value, *s.indices], s.buffer)
        elif isinstance(s, S.Evaluate):
            self.leaf([s.value], None)
        elif isinstance(s, S.For):
            bound = s.kind == S.ForKind.THREAD_BINDING and s.thread_binding is not None and \
                not s.thread_binding.thread_tag.startswith("vthread")
            if bound and nested:  # an inner launch dimension: no scope of its own (TVM's thread_extent)
                self.touch(s.min)
                self.touch(s.extent)
                self.stmt(s.body, nested)
            else:
                self.new_scope([s.min, s.extent], [s.body])
        elif isinstance(s, S.IfThenElse):
            self.new_scope([s.condition], [s.then_case] + ([s.else_case] if s.else_case is not None else []))
        elif isinstance(s, S.LetStmt):
            self.touch(s.value)
            self.stmt(s.body, nested)


# =============================================================================================
# Planning
# =============================================================================================


@dataclass(eq=False)
class _Block:
    nbits: int
    layers: list[list[E.Buffer]]


class _Planner:
    def __init__(self) -> None:
        self.free: list[tuple[int, int, _Block]] = []  # (nbits, insertion order, block): TVM's multimap
        self.order = 0
        self.assigned: dict[E.Buffer, _Block] = {}
        self.blocks: list[_Block] = []

    def _insert(self, block: _Block) -> None:
        self.free.append((block.nbits, self.order, block))
        self.order += 1
        self.free.sort(key=lambda t: (t[0], t[1]))

    def alloc(self, buffer: E.Buffer) -> None:
        nbits = tvm_allocation_bytes(buffer) * 8
        if 0 < nbits <= 32:
            self.assigned[buffer] = self._new(buffer, nbits)
            return
        bigger = [t for t in self.free if nbits <= t[0] <= nbits * _MATCH_RANGE]
        if bigger:
            item = bigger[0]
            self.free.remove(item)
            block = item[2]
            block.nbits = max(block.nbits, nbits)
            block.layers.append([buffer])
            self.assigned[buffer] = block
            return
        smaller = [t for t in self.free if t[0] < nbits]
        taken: list[tuple[int, int, _Block]] = []
        layers: list[list[E.Buffer]] = []
        total = 0
        for item in reversed(smaller):
            taken.append(item)
            total += item[0]
            for i, layer in enumerate(item[2].layers):
                while len(layers) <= i:
                    layers.append([])
                layers[i].extend(layer)
            if total >= nbits:
                break
        if total:
            for item in taken:
                self.free.remove(item)
            block = _Block(max(nbits, total), layers + [[buffer]])
            self.blocks.append(block)
            for layer in block.layers:
                for member in layer:
                    self.assigned[member] = block
            return
        self.assigned[buffer] = self._new(buffer, nbits)

    def _new(self, buffer: E.Buffer, nbits: int) -> _Block:
        block = _Block(nbits, [[buffer]])
        self.blocks.append(block)
        return block

    def release(self, buffer: E.Buffer) -> None:
        block = self.assigned[buffer]
        if 0 < block.nbits <= 32:
            return
        self._insert(block)


def _plan(seq: list[_Entry]) -> tuple[dict[E.Buffer, int], int]:
    """(byte offset per buffer, pool bytes) of TVM's LivenessAnalysis + PlanMemory + ComputeOffsets."""
    kill: dict[int, list[E.Buffer]] = {}
    seen: set[E.Buffer] = set()
    for i in range(len(seq) - 1, -1, -1):
        for buf in seq[i].touched:
            if buf not in seen:
                seen.add(buf)
                kill.setdefault(i, []).append(buf)
    gen: dict[int, list[E.Buffer]] = {}
    seen = set()
    for i, entry in enumerate(seq):
        if entry.offset < 0:
            continue
        for buf in seq[i + entry.offset].touched:
            if buf not in seen:
                seen.add(buf)
                gen.setdefault(i, []).append(buf)
    planner = _Planner()
    for i, entry in enumerate(seq):
        # a scope's births are recorded at its start, its deaths at its end; a leaf has both
        born = gen.get(i, [])
        dying = kill.get(i, [])
        if entry.offset <= 0:
            for buf in dying:
                if not (entry.offset == 0 and buf in born):
                    planner.release(buf)
        if entry.offset >= 0:
            for buf in born:
                planner.alloc(buf)
        if entry.offset <= 0:
            for buf in dying:
                if entry.offset == 0 and buf in born:
                    planner.release(buf)
    live = [t[2] for t in planner.free]  # TVM lays blocks out in its free map's order (by size)
    current = {id(b) for b in planner.assigned.values()}
    live += [b for b in planner.blocks if id(b) in current and all(b is not x for x in live)]
    align: list[int] = []
    for block in live:
        for i, layer in enumerate(block.layers):
            while len(align) <= i:
                align.append(0)
            for buf in layer:
                align[i] = max(align[i], elem_bytes(buf.dtype))
    offsets: dict[E.Buffer, int] = {}
    size = 0
    for block in live:
        widest = 0
        for i, layer in enumerate(block.layers):
            inner = 0
            for buf in layer:
                step = max(align[i], elem_bytes(buf.dtype))
                if buf.data_alignment > 0:
                    step = buf.data_alignment
                inner += (step - (size + inner) % step) % step
                offsets[buf] = size + inner
                inner += tvm_allocation_bytes(buf)
            widest = max(widest, inner)
        size += widest
    return offsets, size


# =============================================================================================
# Rewriting
# =============================================================================================


class _ViewRewriter(IRMutator):
    def __init__(self, views: dict[E.Buffer, E.Buffer]) -> None:
        super().__init__()
        self.views = views

    def visit_buffer(self, buffer: E.Buffer) -> E.Buffer:
        return self.views.get(buffer, buffer)

    def visit_BufferStore(self, node: S.BufferStore) -> S.Stmt:
        value = self.visit(node.value)
        indices = self._exprs(node.indices)
        buffer = self.views.get(node.buffer, node.buffer)
        if value is node.value and indices is node.indices and buffer is node.buffer:
            return node
        return S.BufferStore(buffer, value, indices)

    def visit_Allocate(self, node: Allocate) -> S.Stmt:
        body = self.visit(node.body)
        if node.buffer in self.views:
            return body
        return node if body is node.body else Allocate(node.buffer, body)


def _merge_region(region: S.Stmt) -> S.Stmt:
    members: list[E.Buffer] = []

    def visit(node: object) -> None:
        if isinstance(node, Allocate) and _is_member(node.buffer):
            members.append(node.buffer)

    walk(region, visit)
    if len(members) <= 1:  # TVM merges only when there is something to merge
        return region
    linear = _Linear(set(members))
    linear.stmt(region, nested=False)
    offsets, size = _plan(linear.seq)
    data = E.Var(POOL_NAME, "handle")
    pool = E.Buffer(POOL_NAME, (E.IntImm("int32", max(1, size)),), "uint8", "shared.dyn", data=data)
    views: dict[E.Buffer, E.Buffer] = {}
    for buf in members:
        if buf not in offsets:  # allocated, never touched
            offsets[buf] = 0
        step = elem_bytes(buf.dtype)
        views[buf] = E.Buffer(buf.name, buf.shape, buf.dtype, buf.scope, buf.strides,
                              E.IntImm("int32", offsets[buf] // step), buf.data_alignment, buf.offset_factor,
                              buf.axis_separators, data)
        logger.debug("%s: %s at byte %d of %d", POOL_NAME, buf.name, offsets[buf], size)
    body: S.Stmt = _ViewRewriter(views).visit(region)
    assert isinstance(body, S.For)
    return S.For(body.loop_var, body.min, body.extent, body.kind, Allocate(pool, body.body), body.thread_binding,
                 body.annotations)


def merge_dynamic_shared(body: S.Stmt) -> S.Stmt:
    """Each launch region's `shared.dyn` buffers as views of one pool allocated inside its
    outermost launch loop (see the module docstring)."""
    if isinstance(body, S.SeqStmt):
        parts = [merge_dynamic_shared(x) for x in body.seq]
        return body if all(a is b for a, b in zip(parts, body.seq)) else S.SeqStmt(tuple(parts))
    if isinstance(body, S.For) and body.kind == S.ForKind.THREAD_BINDING:
        return _merge_region(body)
    if isinstance(body, Allocate):
        inner = merge_dynamic_shared(body.body)
        return body if inner is body.body else Allocate(body.buffer, inner)
    return body
