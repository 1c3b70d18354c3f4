"""What both of the interpreter's code generators build with: the generated Python function
(`Fn`), the bindings of IR variables and buffers to generated names, and interval arithmetic
that tolerates unknowns (docs/architecture.md, "Reference interpreter")."""

from __future__ import annotations

import keyword
import re
from dataclasses import dataclass
from typing import Any, Callable

from msdb.ir import expr as E
from msdb.ir import stmt as S
from msdb.ir.arith import interval as intervals
from msdb.ir.interpreter.runtime import Interval, InterpreterError


@dataclass(frozen=True)
class VarBind:
    name: str
    interval: Interval | None


@dataclass(frozen=True)
class BufBind:
    name: str
    buffer: E.Buffer
    dims: tuple[tuple[str, Interval | None], ...]  # code (a literal or a local name) and interval
    names: tuple[str, ...]  # every local this binding needs (array plus dimension temporaries)


Env = dict[Any, Any]  # Var -> VarBind, Buffer -> BufBind


class Fn:
    """One generated Python function."""

    def __init__(self, name: str, params: list[str]) -> None:
        self.name = name
        self.params = params
        self.lines: list[str] = []
        self.indent = 1

    def emit(self, line: str) -> None:
        self.lines.append("    " * self.indent + line)

    def source(self) -> str:
        body = self.lines or ["    pass"]
        return f"def {self.name}({', '.join(self.params)}):\n" + "\n".join(body) + "\n"


CMP_OPS = {"EQ": "==", "NE": "!=", "LT": "<", "LE": "<=", "GT": ">", "GE": ">="}


def domain(iv: S.IterVar) -> E.Range:
    if iv.dom is None:
        raise InterpreterError(f"block iter var {iv.var.name} has no domain")
    return iv.dom


def is_name(code: str) -> bool:
    return code.isidentifier() and not keyword.iskeyword(code)


def is_literal(code: str) -> bool:
    return code.isdigit() or code in ("True", "False") or bool(re.fullmatch(r"\(-\d+\)", code))


def index_tuple(codes: list[str]) -> str:
    if not codes:
        return "()"
    return ", ".join(codes)


def optional(op: Callable[[Interval, Interval], Interval]) -> Callable[[Interval | None, Interval | None], Interval | None]:
    """`op` on intervals that may be unknown (None): unknown in, unknown out."""

    def lifted(a: Interval | None, b: Interval | None) -> Interval | None:
        return None if a is None or b is None else op(a, b)

    return lifted


union = optional(intervals.union)
iv_add = optional(intervals.add)
iv_sub = optional(intervals.sub)
iv_mul = optional(intervals.mul)
iv_min = optional(intervals.minimum)
iv_max = optional(intervals.maximum)
iv_trunc_mod = optional(intervals.truncmod_bound)
iv_floor_mod = optional(intervals.floormod)
iv_floor_div = optional(intervals.floordiv)
iv_trunc_div = optional(intervals.truncdiv_bound)


def iv_abs(a: Interval | None) -> Interval | None:
    return None if a is None else intervals.absolute(a)


def expect_args(e: E.Call, op: str, n: int, block: str) -> None:
    if len(e.args) != n:
        raise InterpreterError(f"op {op!r} in block {block!r} takes {n} arguments, got {len(e.args)}")
