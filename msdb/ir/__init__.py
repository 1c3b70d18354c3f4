"""The workload IR: a TensorIR-like tree of functions, loops, blocks and expressions.

Public entry points (loaded lazily so `import msdb.ir` is cheap):
`from_script`, `to_script`, `te`, `zoo`, `arith`, `estimate_flops`, `interpret`, `verify`, plus the node
classes re-exported from `expr`, `stmt` and `function` (docs/architecture.md, "Workload IR").
"""

from __future__ import annotations

from msdb.lazy import lazy_getattr

from typing import Any

from msdb.ir.expr import (  # noqa: F401
    Add, And, Buffer, BufferLoad, Call, Cast, CmpOp, Div, EQ, FloatImm, FloorDiv, FloorMod, GE, GT,
    IntImm, LE, LT, Max, Min, Mod, Mul, NE, Not, Or, PrimExpr, Range, Select, StringImm, Sub, Var,
    BinaryOp, const_int, convert, make_const,
)
from msdb.ir.function import IRModule, PrimFunc  # noqa: F401
from msdb.ir.stmt import (  # noqa: F401
    Block, BlockRealize, BufferRegion, BufferStore, Evaluate, For, ForKind, IfThenElse, IterType,
    IterVar, LetStmt, MatchBufferRegion, SeqStmt, Stmt, seq,
)

__all__ = [
    # expressions
    "Add", "And", "BinaryOp", "Buffer", "BufferLoad", "Call", "Cast", "CmpOp", "Div", "EQ", "FloatImm", "FloorDiv",
    "FloorMod", "GE", "GT", "IntImm", "LE", "LT", "Max", "Min", "Mod", "Mul", "NE", "Not", "Or", "PrimExpr", "Range",
    "Select", "StringImm", "Sub", "Var", "const_int", "convert", "make_const",
    # functions and statements
    "IRModule", "PrimFunc", "Block", "BlockRealize", "BufferRegion", "BufferStore", "Evaluate", "For", "ForKind",
    "IfThenElse", "IterType", "IterVar", "LetStmt", "MatchBufferRegion", "SeqStmt", "Stmt", "seq",
    # loaded on first use
    "from_script", "to_script", "ScriptError", "estimate_flops", "interpret", "verify", "well_formed", "te", "zoo",
    "arith",
]

_LAZY = {
    "from_script": ("msdb.ir.script", "from_script"),
    "to_script": ("msdb.ir.script", "to_script"),
    "ScriptError": ("msdb.ir.script", "ScriptError"),
    "estimate_flops": ("msdb.ir.flops", "estimate_flops"),
    "interpret": ("msdb.ir.interpreter", "interpret"),
    "verify": ("msdb.ir.verify", "verify"),
    "well_formed": ("msdb.ir.verify", "well_formed"),
    "te": ("msdb.ir.te", None),
    "zoo": ("msdb.ir.zoo", None),
    "arith": ("msdb.ir.arith", None),
}


__getattr__ = lazy_getattr(__name__, _LAZY, globals())
