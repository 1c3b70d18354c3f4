"""Well-formedness of TensorIR-like functions: the rules every module msdb stores, parses or
produces by scheduling must satisfy (TVM's, stated once), so a slip fails where it is made.

`verify(func_or_mod)` checks them in one walk and names the function, the block and the rule:
`undefined-var`, `loop-var-in-block`, `var-redefined`, `undefined-buffer`, `index-count`,
`iter-value-count`, `iter-var-domain`, `duplicate-block-name`, `root-block`, `block-realize`,
`loop-extent`, `loop-kind`, `dtype`, `init-without-reduction`, `seq-stmt`. What each means and
where msdb is stricter than TVM: see docs/architecture.md, "Well-formedness".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from msdb.errors import MsdbError
from msdb.ir import expr as E
from msdb.ir import stmt as S
from msdb.ir.dtype import is_integer_like
from msdb.ir.function import IRModule, PrimFunc

__all__ = ["IRVerifyError", "Problem", "verify", "well_formed", "problems"]


@dataclass(frozen=True)
class Problem:
    """One broken rule: where (function, innermost enclosing block) and what."""

    func: str
    block: str | None
    rule: str
    detail: str

    def __str__(self) -> str:
        where = f"function {self.func!r}"
        if self.block is not None:
            where += f", block {self.block!r}"
        return f"{where}: {self.rule}: {self.detail}"


class IRVerifyError(MsdbError):
    """A function breaks a well-formedness rule. `problems` lists every one found; the message
    names the first (function, block, rule) and how many more there are."""

    def __init__(self, found: list[Problem]) -> None:
        self.problems = list(found)
        first = found[0]
        self.func, self.block, self.rule = first.func, first.block, first.rule
        more = f" (and {len(found) - 1} more problem(s))" if len(found) > 1 else ""
        super().__init__(f"ill-formed IR: {first}{more}")


def verify(mod_or_func: IRModule | PrimFunc) -> None:
    """Raise `IRVerifyError` if any function of the module (or the function) is ill-formed."""
    found = problems(mod_or_func)
    if found:
        raise IRVerifyError(found)


def well_formed(mod_or_func: IRModule | PrimFunc) -> list[str]:
    """Every problem as a message; empty when the IR is well formed."""
    return [str(p) for p in problems(mod_or_func)]


def problems(mod_or_func: IRModule | PrimFunc) -> list[Problem]:
    """Every problem as a `Problem` (for callers that want the rule or the block)."""
    if isinstance(mod_or_func, PrimFunc):
        # a lone function is named by its global symbol, as a module would name it
        return _Walker(str(mod_or_func.attrs.get("global_symbol", "main"))).function(mod_or_func)
    if isinstance(mod_or_func, IRModule):
        found: list[Problem] = []
        for name, func in mod_or_func.functions.items():
            found.extend(_Walker(name).function(func))
        return found
    raise TypeError(f"verify expects an IRModule or a PrimFunc, not {type(mod_or_func).__name__}")


# ---------------------------------------------------------------------------------------------

#: `defined[var]` for variables that are not loop vars: a block depth no walk reaches, so the
#: loop-var-in-block rule never fires for them.
_NOT_A_LOOP = 1 << 30

def _name(var: E.Var) -> str:
    return f"{var.name!r} ({var.dtype})"


class _Walker:
    """One function's walk. Scopes are dicts/sets updated on entry and undone on exit, so each
    node is visited once and each check is O(1)."""

    def __init__(self, func_name: str) -> None:
        self.func_name = func_name
        self.found: list[Problem] = []
        # var -> depth (number of enclosing blocks with iter vars) at which a loop defined it;
        # _NOT_A_LOOP for every other kind of definition
        self.defined: dict[E.Var, int] = {}
        self.ever_defined: set[E.Var] = set()
        self.buffers: dict[E.Buffer, int] = {}  # in scope -> nesting count
        self.block_names: set[str] = set()
        self.block_stack: list[str] = []
        self.depth = 0  # enclosing blocks with iter vars

    # ---- reporting ----
    def bad(self, rule: str, detail: str) -> None:
        block = self.block_stack[-1] if self.block_stack else None
        self.found.append(Problem(self.func_name, block, rule, detail))

    # ---- scopes ----
    def define(self, var: E.Var, level: int, what: str) -> None:
        if var in self.defined:
            self.bad("var-redefined", f"{what} {_name(var)} is already defined in an enclosing scope")
        elif var in self.ever_defined:
            self.bad("var-redefined", f"{what} {_name(var)} was already defined elsewhere in the function")
        self.defined[var] = level
        self.ever_defined.add(var)

    def undefine(self, var: E.Var, previous: int | None) -> None:
        if previous is None:
            self.defined.pop(var, None)
        else:
            self.defined[var] = previous

    def push_buffer(self, buf: E.Buffer) -> None:
        self.buffers[buf] = self.buffers.get(buf, 0) + 1

    def pop_buffer(self, buf: E.Buffer) -> None:
        count = self.buffers[buf] - 1
        if count:
            self.buffers[buf] = count
        else:
            del self.buffers[buf]

    # ---- function ----
    def function(self, func: PrimFunc) -> list[Problem]:
        for param in func.params:
            if not isinstance(param, E.Var):
                self.bad("undefined-var", f"parameter {param!r} is not a Var")
                continue
            self.define(param, _NOT_A_LOOP, "parameter")
        for key, buf in func.buffer_map.items():
            if key not in self.defined:
                self.bad("undefined-var", f"buffer_map key {_name(key)} is not a parameter")
            # a parameter buffer's symbolic shape, strides and offset are defined by the binding
            # (several buffers may share one shape var: defined once, used by the others)
            for var in _shape_vars(buf):
                if var not in self.defined:
                    self.define(var, _NOT_A_LOOP, "buffer shape variable")
            self.push_buffer(buf)
        for buf in func.buffer_map.values():
            self.buffer_dims(buf)
        body = func.body
        if not isinstance(body, S.BlockRealize) or not isinstance(body.block, S.Block):
            self.bad("root-block", f"the body is a {type(body).__name__}, not the root BlockRealize")
            self.stmt(body)
        else:
            root = body.block
            self.block_stack.append(root.name_hint)
            if root.name_hint != "root":
                self.bad("root-block", f"the root block is named {root.name_hint!r}, not 'root'")
            if root.iter_vars or body.iter_values:
                self.bad("root-block", "the root block has iter vars")
            self.block_stack.pop()
            self.block_realize(body, is_root=True)
        return self.found

    def buffer_dims(self, buf: E.Buffer) -> None:
        for dim in buf.shape:
            self.index(dim, f"a dimension of buffer {buf.name!r}")
        for stride in buf.strides:
            self.index(stride, f"a stride of buffer {buf.name!r}")
        if buf.elem_offset is not None:
            self.index(buf.elem_offset, f"the elem_offset of buffer {buf.name!r}")

    # ---- expressions ----
    def expr(self, e: E.PrimExpr) -> None:
        t = type(e)
        if isinstance(e, E.Var):
            level = self.defined.get(e)
            if level is None:
                self.bad("undefined-var", f"variable {_name(e)} is used but not defined in scope")
            elif level < self.depth:
                self.bad("loop-var-in-block", f"loop var {_name(e)} of a loop outside block "
                         f"{self.block_stack[-1]!r} is used inside it (only its iter vars may be)")
            return
        if isinstance(e, E.IntImm) or isinstance(e, E.FloatImm) or isinstance(e, E.StringImm):
            return
        if isinstance(e, E.BufferLoad):
            self.buffer_access("load of", e.buffer, e.indices)
            if e.dtype != e.buffer.dtype:
                self.bad("dtype", f"a load of {e.buffer.name!r} has dtype {e.dtype}, the buffer {e.buffer.dtype}")
            return
        if isinstance(e, E.BinaryOp):
            a, b = e.a, e.b
            self.expr(a)
            self.expr(b)
            op = t.__name__
            if a.dtype != b.dtype:
                self.bad("dtype", f"the operands of {op} have different dtypes {a.dtype} and {b.dtype}")
            if isinstance(e, (E.And, E.Or)):
                if a.dtype != "bool" or b.dtype != "bool":
                    self.bad("dtype", f"{op} needs bool operands, not {a.dtype} and {b.dtype}")
            if isinstance(e, E.CmpOp):
                if e.dtype != "bool":
                    self.bad("dtype", f"{op} must have dtype bool, not {e.dtype}")
            elif e.dtype != a.dtype:
                self.bad("dtype", f"{op} of {a.dtype} operands has dtype {e.dtype}")
            return
        if isinstance(e, E.Cast):
            self.expr(e.value)
            return
        if isinstance(e, E.Call):
            for arg in e.args:
                self.expr(arg)
            if e.op == "if_then_else":
                if len(e.args) != 3:
                    self.bad("dtype", f"if_then_else takes 3 arguments, not {len(e.args)}")
                else:
                    self.condition(e.args[0], "the condition of if_then_else")
                    if not (e.args[1].dtype == e.args[2].dtype == e.dtype):
                        self.bad("dtype", f"the arms of if_then_else have dtypes {e.args[1].dtype} and "
                                 f"{e.args[2].dtype}, the call {e.dtype}")
            return
        if isinstance(e, E.Select):
            self.expr(e.condition)
            self.expr(e.true_value)
            self.expr(e.false_value)
            self.condition(e.condition, "the condition of Select")
            if e.true_value.dtype != e.false_value.dtype:
                self.bad("dtype", f"the arms of Select have dtypes {e.true_value.dtype} and {e.false_value.dtype}")
            return
        if isinstance(e, E.Not):
            self.expr(e.a)
            if e.a.dtype != "bool":
                self.bad("dtype", f"Not needs a bool operand, not {e.a.dtype}")
            return
        if isinstance(e, E.PrimExpr):
            return
        self.bad("dtype", f"{type(e).__name__} {e!r} is not an expression")

    def condition(self, cond: E.PrimExpr, what: str) -> None:
        if cond.dtype != "bool":
            self.bad("dtype", f"{what} has dtype {cond.dtype}, not bool")

    def index(self, e: E.PrimExpr, what: str) -> None:
        self.expr(e)
        if not is_integer_like(e.dtype) or e.dtype == "bool":
            self.bad("dtype", f"{what} has dtype {e.dtype}, not an integer")

    def buffer_access(self, kind: str, buf: E.Buffer, indices: Iterable[E.PrimExpr]) -> None:
        if buf not in self.buffers:
            self.bad("undefined-buffer", f"{kind} buffer {buf.name!r}, which is neither a parameter nor "
                     "allocated or matched by an enclosing block")
        n = 0
        for i in indices:
            self.index(i, f"an index of {buf.name!r}")
            n += 1
        if n != len(buf.shape):
            self.bad("index-count", f"{kind} {buf.name!r} has {n} indices, the buffer has {len(buf.shape)} dimensions")

    def region(self, kind: str, region: S.BufferRegion) -> None:
        buf = region.buffer
        if buf not in self.buffers:
            self.bad("undefined-buffer", f"{kind} buffer {buf.name!r}, which is neither a parameter nor "
                     "allocated or matched by an enclosing block")
        for rng in region.region:
            self.index(rng.min, f"a region bound of {buf.name!r}")
            self.index(rng.extent, f"a region extent of {buf.name!r}")
        if len(region.region) != len(buf.shape):
            self.bad("index-count", f"{kind} {buf.name!r} has {len(region.region)} ranges, the buffer has "
                     f"{len(buf.shape)} dimensions")

    # ---- statements ----
    def stmt(self, s: S.Stmt) -> None:
        if isinstance(s, S.BufferStore):
            self.buffer_access("store to", s.buffer, s.indices)
            self.expr(s.value)
            if s.value.dtype != s.buffer.dtype:
                self.bad("dtype", f"a store to {s.buffer.name!r} ({s.buffer.dtype}) has a {s.value.dtype} value")
        elif isinstance(s, S.For):
            self.loop(s)
        elif isinstance(s, S.SeqStmt):
            if len(s.seq) < 2:
                self.bad("seq-stmt", f"a SeqStmt of {len(s.seq)} statement(s)")
            for child in s.seq:
                if type(child) is S.SeqStmt:
                    self.bad("seq-stmt", "a SeqStmt directly inside a SeqStmt (build sequences with seq())")
                self.stmt(child)
        elif isinstance(s, S.BlockRealize):
            self.block_realize(s, is_root=False)
        elif isinstance(s, S.IfThenElse):
            self.expr(s.condition)
            self.condition(s.condition, "the condition of an if")
            self.stmt(s.then_case)
            if s.else_case is not None:
                self.stmt(s.else_case)
        elif isinstance(s, S.LetStmt):
            self.expr(s.value)
            if s.var.dtype != s.value.dtype:
                self.bad("dtype", f"let var {_name(s.var)} is bound to a {s.value.dtype} value")
            previous = self.defined.get(s.var)
            self.define(s.var, _NOT_A_LOOP, "let var")
            self.stmt(s.body)
            self.undefine(s.var, previous)
        elif isinstance(s, S.Evaluate):
            self.expr(s.value)
        elif isinstance(s, S.Block):
            self.bad("block-realize", f"block {s.name_hint!r} is not the block of a BlockRealize")
            self.block(s)
        else:
            self.bad("seq-stmt", f"{type(s).__name__} is not a statement")

    def loop(self, s: S.For) -> None:
        var = s.loop_var
        self.index(s.min, f"the start of loop {var.name!r}")
        self.index(s.extent, f"the extent of loop {var.name!r}")
        if not (var.dtype == s.min.dtype == s.extent.dtype):
            self.bad("dtype", f"loop var {_name(var)} has bounds of dtypes {s.min.dtype} and {s.extent.dtype}")
        if type(s.extent) is E.IntImm and s.extent.value <= 0:
            self.bad("loop-extent", f"loop {var.name!r} has extent {s.extent.value}")
        binding = s.thread_binding
        if s.kind == S.ForKind.THREAD_BINDING:
            if binding is None or not binding.thread_tag:
                self.bad("loop-kind", f"loop {var.name!r} is thread_binding but has no thread tag")
        elif binding is not None:
            self.bad("loop-kind", f"loop {var.name!r} of kind {s.kind.script_name} has a thread binding "
                     f"({binding.thread_tag!r})")
        previous = self.defined.get(var)
        self.define(var, self.depth, "loop var")
        self.stmt(s.body)
        self.undefine(var, previous)

    def block_realize(self, realize: S.BlockRealize, is_root: bool) -> None:
        block = realize.block
        if not isinstance(block, S.Block):
            self.bad("block-realize", f"a BlockRealize holds a {type(block).__name__}, not a Block")
            return
        for value in realize.iter_values:
            self.index(value, f"a binding of block {block.name_hint!r}")
        self.expr(realize.predicate)
        self.condition(realize.predicate, f"the predicate of block {block.name_hint!r}")
        if len(realize.iter_values) != len(block.iter_vars):
            self.bad("iter-value-count", f"block {block.name_hint!r} has {len(block.iter_vars)} iter vars "
                     f"bound to {len(realize.iter_values)} values")
        else:
            for iv, value in zip(block.iter_vars, realize.iter_values):
                if iv.var.dtype != value.dtype:
                    self.bad("dtype", f"iter var {_name(iv.var)} of block {block.name_hint!r} is bound to a "
                             f"{value.dtype} value")
        if not is_root and block.name_hint == "root":
            self.bad("root-block", "a block other than the function's root is named 'root'")
        self.block(block)

    def block(self, block: S.Block) -> None:
        name = block.name_hint
        self.block_stack.append(name)
        if name in self.block_names:
            self.bad("duplicate-block-name", f"another block of the function is named {name!r}")
        self.block_names.add(name)
        # domains are evaluated outside the block: its own iter vars are not visible yet, and
        # the loop-var rule (depth not yet raised) does not apply to them
        for iv in block.iter_vars:
            if iv.dom is None:
                self.bad("iter-var-domain", f"iter var {_name(iv.var)} has no domain")
                continue
            self.index(iv.dom.min, f"the domain of iter var {iv.var.name!r}")
            self.index(iv.dom.extent, f"the domain of iter var {iv.var.name!r}")
            if type(iv.dom.extent) is E.IntImm and iv.dom.extent.value <= 0:
                self.bad("iter-var-domain", f"iter var {_name(iv.var)} has extent {iv.dom.extent.value}")
        saved: list[tuple[E.Var, int | None]] = []
        for iv in block.iter_vars:
            saved.append((iv.var, self.defined.get(iv.var)))
            self.define(iv.var, _NOT_A_LOOP, "iter var")
        has_iter_vars = bool(block.iter_vars)
        if has_iter_vars:
            self.depth += 1
        for buf in block.alloc_buffers:
            self.buffer_dims(buf)
            self.push_buffer(buf)
        matched: list[E.Buffer] = []
        for match in block.match_buffers:
            self.region("match_buffer source", match.source)
            if match.buffer.dtype != match.source.buffer.dtype:
                self.bad("dtype", f"match_buffer {match.buffer.name!r} ({match.buffer.dtype}) views "
                         f"{match.source.buffer.name!r} ({match.source.buffer.dtype})")
            for var in _shape_vars(match.buffer):
                if var not in self.defined:
                    saved.append((var, None))
                    self.define(var, _NOT_A_LOOP, "match_buffer variable")
            self.buffer_dims(match.buffer)
            self.push_buffer(match.buffer)
            matched.append(match.buffer)
        for region in block.reads:
            self.region("read region of", region)
        for region in block.writes:
            self.region("write region of", region)
        if block.init is not None:
            if not any(iv.iter_type == S.IterType.COMM_REDUCE for iv in block.iter_vars):
                self.bad("init-without-reduction", f"block {name!r} has an init but no reduction iter var")
            self.stmt(block.init)
        self.stmt(block.body)
        for buf in matched:
            self.pop_buffer(buf)
        for buf in block.alloc_buffers:
            self.pop_buffer(buf)
        if has_iter_vars:
            self.depth -= 1
        for var, previous in reversed(saved):
            self.undefine(var, previous)
        self.block_stack.pop()


def _shape_vars(buf: E.Buffer) -> list[E.Var]:
    """The Vars that appear directly as a buffer's dimensions, strides or elem_offset (what a
    buffer binding defines, TVM's rule: a compound expression only uses variables)."""
    out = [d for d in buf.shape if type(d) is E.Var]
    out.extend(s for s in buf.strides if type(s) is E.Var)
    if type(buf.elem_offset) is E.Var:
        out.append(buf.elem_offset)
    return out
