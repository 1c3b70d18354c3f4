"""Emission state: one `FnState` per LLVM function being written (builder, variable bindings,
buffer pointers, loop ranges, the memo of pure expressions and its validity scopes) and the
`VecState` of the vectorized loop being emitted as one vector statement."""

from __future__ import annotations

from dataclasses import dataclass, field

import llvmlite.ir as ir

from msdb.ir import expr as E


@dataclass
class VecState:
    """The vectorized loop being emitted as one vector statement."""

    var: E.Var
    lanes: int
    base: ir.Value
    vector: ir.Value
    lane0: bool = False
    mask: ir.Value | None = None  # <lanes x i1>: padding lanes and lane-dependent conditions off
    predicated: bool = False  # the mask comes from a condition (lane 0 may be off too)
    active: int = 0  # lanes 0..active-1 are the loop's; the rest pad the vector (mask off)


@dataclass
class FnState:
    """Emission state of one LLVM function."""

    fn: ir.Function
    builder: ir.IRBuilder
    alloca_builder: ir.IRBuilder
    env: dict[E.Var, ir.Value] = field(default_factory=dict)
    buffers: dict[E.Buffer, ir.Value] = field(default_factory=dict)
    ranges: dict[E.Var, E.Range] = field(default_factory=dict)
    in_parallel: bool = False
    vec: VecState | None = None
    # i1: the speculated if_then_else arm being emitted is taken; loads read the buffer's first
    # element instead of their own address when it is false (see `ExprEmitter.if_then_else`)
    guard: ir.Value | None = None
    stack_bytes: int = 0
    gather_lanes: int = 0
    allocas: dict[int, ir.Value] = field(default_factory=dict)
    # memo of pure expressions: id(expr) -> (value, ((var, version), ...), scope id)
    memo: dict[int, tuple[ir.Value, tuple, int]] = field(default_factory=dict)
    versions: dict[E.Var, int] = field(default_factory=dict)
    scopes: list[int] = field(default_factory=lambda: [0])
    active: set[int] = field(default_factory=lambda: {0})
    next_scope: int = 1

    def bind(self, var: E.Var, value: ir.Value) -> None:
        """(Re)bind a variable; memoized values that used its old value become stale."""
        self.env[var] = value
        self.versions[var] = self.versions.get(var, 0) + 1

    def unbind(self, var: E.Var) -> None:
        self.env.pop(var, None)
        self.versions[var] = self.versions.get(var, 0) + 1

    def push_scope(self) -> None:
        """Enter a region whose values do not dominate what follows it (loop body, branch)."""
        sid = self.next_scope
        self.next_scope += 1
        self.scopes.append(sid)
        self.active.add(sid)

    def pop_scope(self) -> None:
        self.active.discard(self.scopes.pop())


