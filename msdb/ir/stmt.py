"""Statements of the workload IR: loops, blocks, stores (docs/architecture.md, "Workload IR").

Mirrors TVM TensorIR: a `PrimFunc` body is a root `BlockRealize` whose block holds loop nests
(`For`) of `BlockRealize`s; each block binds its iter vars to loop expressions, declares what it
reads and writes, and may carry an `init` (a reduction) and allocations. Every schedule TVM
produces (split, fused, reordered, cached, inlined nests with predicates, annotations and thread
bindings) is a value of these types. Nodes are frozen; sequences are tuples and annotation maps
are read-only dicts, so a transformation always builds new nodes.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

from msdb.ir.expr import Buffer, PrimExpr, Range, Var
from msdb.ir.slot_init import fast_init


class ForKind(enum.IntEnum):
    """TVM's `ForKind` values (the integer codes are TVM's serialized ones)."""

    SERIAL = 0
    PARALLEL = 1
    VECTORIZED = 2
    UNROLLED = 3
    THREAD_BINDING = 4

    @property
    def script_name(self) -> str:
        """The `T.<name>` TVMScript uses for a loop of this kind."""
        return {0: "serial", 1: "parallel", 2: "vectorized", 3: "unroll", 4: "thread_binding"}[self.value]


class IterType(enum.IntEnum):
    """TVM's `IterVarType` codes for block iter vars."""

    DATA_PAR = 0
    THREAD_INDEX = 1
    COMM_REDUCE = 2
    ORDERED = 3
    OPAQUE = 4

    @property
    def axis_letter(self) -> str:
        """The letter `T.axis.remap` uses ("S" spatial, "R" reduce, "O" opaque)."""
        return {0: "S", 2: "R", 4: "O"}.get(self.value, "O")


def frozen_map(mapping: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """A read-only copy of an annotation or attribute dict (insertion order kept)."""
    return MappingProxyType(dict(mapping or {}))


@fast_init
@dataclass(frozen=True, eq=False, slots=True)
class IterVar:
    """A block iteration variable (`dom` is its range) or a loop's thread binding (`thread_tag`;
    its `dom` may be None, as TVM leaves it when the loop gives the extent)."""

    dom: Range | None
    var: Var
    iter_type: IterType = IterType.DATA_PAR
    thread_tag: str = ""


@fast_init
@dataclass(frozen=True, eq=False, slots=True)
class BufferRegion:
    """A rectangular region of a buffer, one `Range` per dimension (reads/writes of a block)."""

    buffer: Buffer
    region: tuple[Range, ...]


@fast_init
@dataclass(frozen=True, eq=False, slots=True)
class MatchBufferRegion:
    """`T.match_buffer(source_region, ...)` inside a block: `buffer` views `source`."""

    buffer: Buffer
    source: BufferRegion


@dataclass(frozen=True, eq=False, slots=True)
class Stmt:
    """Base of every statement."""


@fast_init
@dataclass(frozen=True, eq=False, slots=True)
class BufferStore(Stmt):
    """`buffer[indices] = value`"""

    buffer: Buffer
    value: PrimExpr
    indices: tuple[PrimExpr, ...]


@fast_init
@dataclass(frozen=True, eq=False, slots=True)
class Evaluate(Stmt):
    """Evaluate an expression for its effect (`T.evaluate(...)`)."""

    value: PrimExpr


@fast_init
@dataclass(frozen=True, eq=False, slots=True)
class SeqStmt(Stmt):
    """Statements run in order; never nested directly in another SeqStmt, never of length < 2
    (use `seq()` to build one)."""

    seq: tuple[Stmt, ...]


@fast_init
@dataclass(frozen=True, eq=False, slots=True)
class IfThenElse(Stmt):
    """`if condition: then_case else: else_case` (else_case may be None)."""

    condition: PrimExpr
    then_case: Stmt
    else_case: Stmt | None = None


@fast_init
@dataclass(frozen=True, eq=False, slots=True)
class LetStmt(Stmt):
    """`var = value` scoped over `body` (TVMScript: an assignment of a scalar)."""

    var: Var
    value: PrimExpr
    body: Stmt


@fast_init
@dataclass(frozen=True, eq=False, slots=True)
class For(Stmt):
    """`for loop_var in range(min, min + extent)` of a given kind. `thread_binding` is set iff
    kind is THREAD_BINDING (its thread_tag names the thread axis, e.g. "threadIdx.x")."""

    loop_var: Var
    min: PrimExpr
    extent: PrimExpr
    kind: ForKind
    body: Stmt
    thread_binding: IterVar | None = None
    annotations: Mapping[str, Any] = field(default_factory=lambda: frozen_map(None))

    def __post_init__(self) -> None:
        if not isinstance(self.annotations, MappingProxyType):
            object.__setattr__(self, "annotations", frozen_map(self.annotations))


@fast_init
@dataclass(frozen=True, eq=False, slots=True)
class Block(Stmt):
    """A unit of computation with explicit iteration domain and data access (TVM's `Block`,
    `SBlock` in 0.24+). The root block of a function has no iter vars and name "root"."""

    iter_vars: tuple[IterVar, ...]
    reads: tuple[BufferRegion, ...]
    writes: tuple[BufferRegion, ...]
    name_hint: str
    body: Stmt
    init: Stmt | None = None
    alloc_buffers: tuple[Buffer, ...] = ()
    match_buffers: tuple[MatchBufferRegion, ...] = ()
    annotations: Mapping[str, Any] = field(default_factory=lambda: frozen_map(None))

    def __post_init__(self) -> None:
        if not isinstance(self.annotations, MappingProxyType):
            object.__setattr__(self, "annotations", frozen_map(self.annotations))


@fast_init
@dataclass(frozen=True, eq=False, slots=True)
class BlockRealize(Stmt):
    """Instantiates `block` with `iter_values` (one per iter var) under `predicate`."""

    iter_values: tuple[PrimExpr, ...]
    predicate: PrimExpr
    block: Block


def seq(*stmts: Stmt | None) -> Stmt:
    """Sequence statements, flattening nested SeqStmts and dropping Nones; a single statement is
    returned as is."""
    flat: list[Stmt] = []
    for stmt in stmts:
        if stmt is None:
            continue
        if isinstance(stmt, SeqStmt):
            flat.extend(stmt.seq)
        else:
            flat.append(stmt)
    if not flat:
        raise ValueError("seq() needs at least one statement")
    return flat[0] if len(flat) == 1 else SeqStmt(tuple(flat))
