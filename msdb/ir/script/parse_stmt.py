"""Statements of the TVMScript parser: loops, blocks and their header statements (`T.axis.*`,
`T.reads`/`T.writes`, `T.where`, `T.init`), lets, ifs and buffer stores; regions of blocks that
state none are inferred here (docs/architecture.md, "TVMScript parser")."""

from __future__ import annotations

import ast
from typing import Any

from msdb.ir import expr as E
from msdb.ir import stmt as S
from msdb.ir.dtype import is_float, is_integer_like
from msdb.ir.script import ops
from msdb.ir.script.parse_buffer import BufferParser
from msdb.ir.script.parse_expr import ARITH_OPS, describe
from msdb.ir.script.parse_scope import ALLOC_FUNCS, BLOCK_ATTR_FUNCS, BLOCK_FUNCS, DTYPE_NAMES, BlockFrame, FuncFrame, dotted


def const_true() -> E.PrimExpr:
    return E.IntImm("bool", 1)


_LOOP_KINDS = {
    "serial": S.ForKind.SERIAL, "parallel": S.ForKind.PARALLEL,
    "vectorized": S.ForKind.VECTORIZED, "unroll": S.ForKind.UNROLLED,
    "thread_binding": S.ForKind.THREAD_BINDING,
}
_AXIS_KINDS = {
    "spatial": S.IterType.DATA_PAR, "S": S.IterType.DATA_PAR,
    "reduce": S.IterType.COMM_REDUCE, "R": S.IterType.COMM_REDUCE,
    "scan": S.IterType.ORDERED, "opaque": S.IterType.OPAQUE,
}
_HEADER_FUNCS = frozenset(["reads", "writes", "where"]) | BLOCK_ATTR_FUNCS


class StmtParser(BufferParser):
    """Parses statement lists into IR statements; the function layer (`parser`) drives it."""

    def block_body(self, nodes: list[ast.stmt], **ctx: Any) -> list[S.Stmt]:
        """Statements of one body, in order; a scalar assignment (LetStmt) takes the rest of
        the body as its scope."""
        out: list[S.Stmt] = []
        for i, node in enumerate(nodes):
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and self._is_let(node):
                var, value = self._let(node)
                self.scopes.append({var.name: var})
                try:
                    rest = self.block_body(nodes[i + 1:], **ctx)
                finally:
                    self.scopes.pop()
                body = S.seq(*rest) if rest else S.Evaluate(E.IntImm("int32", 0))
                out.append(S.LetStmt(var, value, body))
                return out
            stmt = self.statement(node, **ctx)
            if stmt is not None:
                out.append(stmt)
        return out

    def statement(self, node: ast.stmt, root_node: ast.With | None = None, **ctx: Any) -> S.Stmt | None:
        self.module.current = node
        if isinstance(node, ast.For):
            return self._for(node)
        if isinstance(node, ast.With):
            return self._with(node, is_root=node is root_node)
        if isinstance(node, ast.If):
            return self._if(node)
        if isinstance(node, ast.Assign):
            return self._assign(node, **ctx)
        if isinstance(node, ast.AugAssign):
            return self._aug_assign(node)
        if isinstance(node, ast.Expr):
            return self._expr_stmt(node)
        if isinstance(node, ast.Pass):
            return None
        if isinstance(node, ast.AnnAssign):
            self.err(node, "annotated assignments must assign a scalar: `x: T.int32 = value`")
        kind = type(node).__name__.lower()
        self.err(node, f"'{kind}' statements are not supported in TVMScript")

    def _is_let(self, node: ast.Assign | ast.AnnAssign) -> bool:
        if isinstance(node, ast.AnnAssign):
            return isinstance(node.target, ast.Name)
        if len(node.targets) != 1 or not isinstance(node.targets[0], ast.Name):
            return False
        value = node.value
        if isinstance(value, ast.Call):
            name = self.t_func(value.func)
            if name is not None and (
                name.startswith("axis.") or name in ALLOC_FUNCS or name == "match_buffer"
                or (name in DTYPE_NAMES and not value.args and not value.keywords)
                or name == "handle"
            ):
                return False
        return True

    def _let(self, node: ast.Assign | ast.AnnAssign) -> tuple[E.Var, E.PrimExpr]:
        if isinstance(node, ast.AnnAssign):
            if node.value is None:
                self.err(node, "a scalar declaration needs a value: `x: T.int32 = value`")
            if not isinstance(node.target, ast.Name):
                self.err(node.target, "a scalar declaration assigns a plain name")
            dtype_name = self.t_func(node.annotation)
            if dtype_name not in DTYPE_NAMES:
                self.err(node.annotation, "expected a scalar dtype annotation such as T.int32 or T.float32")
            value = self.expr(node.value)
            if value.dtype != dtype_name:
                value = ops.cast(dtype_name, value) if isinstance(value, (E.IntImm, E.FloatImm)) else value
                if value.dtype != dtype_name:
                    self.err(node.value, f"value of dtype {value.dtype} assigned to '{node.target.id}: T.{dtype_name}'")
            return E.Var(node.target.id, dtype_name), value
        target = node.targets[0]
        if not isinstance(target, ast.Name):
            self.err(target, "a scalar binding assigns a plain name")
        value = self.expr(node.value)
        return E.Var(target.id, value.dtype), value

    def _for(self, node: ast.For) -> S.Stmt:
        if node.orelse:
            self.err(node.orelse[0], "for ... else is not supported")
        it = node.iter
        if not isinstance(it, ast.Call):
            self.err(it, "loops must iterate over range(...), T.grid(...) or a T. loop kind")
        names = self._loop_targets(node.target)
        fname = dotted(it.func)
        tname = self.t_func(it.func)
        loops: list[tuple[E.Var, E.PrimExpr, E.PrimExpr, S.ForKind, S.IterVar | None, dict]] = []
        if fname == "range" and not self._shadowed("range"):
            if it.keywords:
                self.err(it.keywords[0], "range() takes no keyword arguments")
            lo, ext = self._start_stop(it, it.args, "range")
            loops.append((self._loop_var(names, 0, 1, node, ext), lo, ext, S.ForKind.SERIAL, None, {}))
        elif tname == "grid":
            if it.keywords:
                self.err(it.keywords[0], "T.grid takes no keyword arguments")
            if len(it.args) != len(names):
                self.err(it, f"T.grid has {len(it.args)} extents but the loop names {len(names)} variables")
            for k, arg in enumerate(it.args):
                ext = self._int_expr(arg, "a loop extent")
                lo = E.make_const(0, ext.dtype)
                loops.append((self._loop_var(names, k, len(names), node, ext), lo, ext, S.ForKind.SERIAL, None, {}))
        elif tname in _LOOP_KINDS:
            kind = _LOOP_KINDS[tname]
            kwargs = self.keywords(it)
            args = list(it.args)
            thread = None
            if kind == S.ForKind.THREAD_BINDING:
                if "thread" in kwargs:
                    thread = kwargs.pop("thread")
                elif args and isinstance(args[-1], ast.Constant) and isinstance(args[-1].value, str):
                    thread = (args[-1].value, args[-1])
                    args = args[:-1]
                if thread is None or not isinstance(thread[0], str):
                    self.err(it, 'T.thread_binding needs thread="threadIdx.x" (or another thread tag)')
            annotations = {}
            if "annotations" in kwargs:
                ann_value, ann_node = kwargs.pop("annotations")
                annotations = self._annotation_map(ann_value, ann_node)
            for key, (_, kw_node) in kwargs.items():
                self.err(kw_node, f"T.{tname} got an unsupported keyword argument {key!r}")
            lo, ext = self._start_stop(it, args, f"T.{tname}")
            var = self._loop_var(names, 0, 1, node, ext)
            binding = None
            if thread is not None:
                binding = S.IterVar(None, E.Var("iter", var.dtype), S.IterType.THREAD_INDEX, thread[0])
            loops.append((var, lo, ext, kind, binding, annotations))
        else:
            self.err(it, "loops must iterate over range(...), T.grid(...), T.serial/parallel/vectorized/unroll/thread_binding(...)")
        scope = {}
        for (var, lo, ext, *_rest), name in zip(loops, names):
            scope[name] = var
            self.loops[var] = E.Range(lo, ext)
        self.scopes.append(scope)
        saved = self.direct
        self.direct = None
        try:
            stmts = self.block_body(node.body)
        finally:
            self.direct = saved
            self.scopes.pop()
            for var, *_ in loops:
                self.loops.pop(var, None)
        body = S.seq(*stmts) if stmts else S.Evaluate(E.IntImm("int32", 0))
        for var, lo, ext, kind, binding, annotations in reversed(loops):
            body = S.For(var, lo, ext, kind, body, binding, annotations)
        return body

    def _loop_targets(self, target: ast.expr) -> list[str]:
        if isinstance(target, ast.Name):
            return [target.id]
        if isinstance(target, (ast.Tuple, ast.List)):
            names = [t.id for t in target.elts if isinstance(t, ast.Name)]
            if len(names) == len(target.elts):
                return names
        self.err(target, "loop variables must be plain names")

    def _loop_var(self, names: list[str], k: int, n: int, node: ast.For, ext: E.PrimExpr) -> E.Var:
        if len(names) != n:
            self.err(node.target, f"this loop defines {n} variable(s) but names {len(names)}")
        return E.Var(names[k], ext.dtype)

    def _start_stop(self, call: ast.Call, args: list[ast.expr], what: str) -> tuple[E.PrimExpr, E.PrimExpr]:
        if len(args) == 1:
            ext = self._int_expr(args[0], "a loop extent")
            return E.make_const(0, ext.dtype), ext
        if len(args) == 2:
            return self._range_of(args[0], args[1], "a loop bound")
        self.err(call, f"{what} takes an extent or a start and a stop (got {len(args)} arguments; steps are not supported)")

    def _with(self, node: ast.With, is_root: bool = False) -> S.Stmt | None:
        if len(node.items) != 1:
            self.err(node, "with-statements take one T.sblock(...), T.init() or T.LetStmt(...)")
        item = node.items[0]
        call = item.context_expr
        name = self.t_func(call.func) if isinstance(call, ast.Call) else None
        if name in BLOCK_FUNCS:
            if item.optional_vars is not None:
                self.err(item.optional_vars, "`with T.sblock(...) as ...` is the pre-0.9 block syntax; use T.axis.* inside the block")
            return self._block(node, call, is_root)  # type: ignore[arg-type]
        if name == "init":
            self._init(node, call)  # type: ignore[arg-type]
            return None
        if name == "LetStmt":
            return self._let_with(node, call, item.optional_vars)  # type: ignore[arg-type]
        self.err(call, "expected `with T.sblock(...)`, `with T.block(...)`, `with T.init()` or `with T.LetStmt(...) as x`")

    def _block(self, node: ast.With, call: ast.Call, is_root: bool) -> S.Stmt:
        kwargs = self.keywords(call)
        if "no_realize" in kwargs:
            self.err(kwargs["no_realize"][1], "blocks without realize (no_realize=True) are not supported")
        for key, (_, kw_node) in kwargs.items():
            self.err(kw_node, f"unknown keyword argument {key!r} for a block")
        if len(call.args) > 1:
            self.err(call.args[1], "a block takes one argument, its name")
        if call.args:
            name = self.value(call.args[0])
            if not isinstance(name, str):
                self.err(call.args[0], "the block name must be a string")
        else:
            name = ""
        frame = BlockFrame(name=name, is_root=is_root)
        if not is_root:
            self.saw_block = True
            self.block_depth += 1
        self.scopes.append({})
        saved = self.direct
        self.direct = frame
        try:
            stmts = self.block_body(node.body)
        finally:
            self.direct = saved
            self.scopes.pop()
            if not is_root:
                self.block_depth -= 1
        body = S.seq(*stmts) if stmts else S.Evaluate(E.IntImm("int32", 0))
        reads, writes = frame.reads, frame.writes
        if reads is None or writes is None:
            if is_root:
                inferred: tuple[tuple, tuple] = ((), ())
            else:
                inferred = _infer_regions(body, frame.init, tuple(frame.alloc_buffers), frame.match_buffers)
            reads = inferred[0] if reads is None else reads
            writes = inferred[1] if writes is None else writes
        block = S.Block(
            tuple(frame.iter_vars), reads, writes, name, body, frame.init,
            tuple(frame.alloc_buffers), tuple(frame.match_buffers), frame.annotations,
        )
        predicate = frame.predicate if frame.predicate is not None else const_true()
        return S.BlockRealize(tuple(frame.iter_values), predicate, block)

    def _init(self, node: ast.With, call: ast.Call) -> None:
        frame = self.direct
        if not isinstance(frame, BlockFrame):
            self.err(node, "T.init() must be directly inside a block")
        if call.args or call.keywords:
            self.err(call, "T.init() takes no arguments")
        if frame.init_node is not None:
            self.err(node, f"block {frame.name!r} has two T.init() sections")
        self.scopes.append({})
        self.direct = None
        saved_init = self.in_init
        self.in_init = True
        try:
            stmts = self.block_body(node.body)
        finally:
            self.direct = frame
            self.in_init = saved_init
            self.scopes.pop()
        frame.init = S.seq(*stmts) if stmts else S.Evaluate(E.IntImm("int32", 0))
        frame.init_node = node

    def _let_with(self, node: ast.With, call: ast.Call, target: ast.expr | None) -> S.Stmt:
        if not isinstance(target, ast.Name):
            self.err(node, "use `with T.LetStmt(value) as x:`")
        if len(call.args) != 1:
            self.err(call, "T.LetStmt takes one value")
        value = self.expr(call.args[0])
        var = E.Var(target.id, value.dtype)
        self.scopes.append({target.id: var})
        saved = self.direct
        self.direct = None
        try:
            stmts = self.block_body(node.body)
        finally:
            self.direct = saved
            self.scopes.pop()
        body = S.seq(*stmts) if stmts else S.Evaluate(E.IntImm("int32", 0))
        return S.LetStmt(var, value, body)

    def _if(self, node: ast.If) -> S.Stmt:
        cond = self.expr(node.test)
        if cond.dtype != "bool":
            self.err(node.test, f"an if condition must be a boolean expression, got dtype {cond.dtype}")
        then = self._scoped_body(node.body)
        other = self._scoped_body(node.orelse) if node.orelse else None
        return S.IfThenElse(cond, then, other)

    def _scoped_body(self, nodes: list[ast.stmt]) -> S.Stmt:
        self.scopes.append({})
        saved = self.direct
        self.direct = None
        try:
            stmts = self.block_body(nodes)
        finally:
            self.direct = saved
            self.scopes.pop()
        return S.seq(*stmts) if stmts else S.Evaluate(E.IntImm("int32", 0))

    def _assign(self, node: ast.Assign, buffer_map: dict | None = None) -> S.Stmt | None:
        if len(node.targets) != 1:
            self.err(node, "chained assignment is not supported")
        target = node.targets[0]
        if isinstance(target, ast.Subscript):
            return self._store(target, node.value, node)
        value = node.value
        if not isinstance(value, ast.Call):
            self.err(node, "unsupported assignment")
        name = self.t_func(value.func) or ""
        if name.startswith("axis."):
            self._axis(node, target, value, name[5:])
            return None
        if not isinstance(target, ast.Name):
            self.err(target, "expected a single name on the left")
        if name in ALLOC_FUNCS:
            buffer = self._alloc(target.id, value)
            frame = self.direct
            if isinstance(frame, BlockFrame):
                frame.alloc_buffers.append(buffer)
            elif isinstance(frame, FuncFrame):
                frame.root_allocs.append(buffer)
            else:
                self.err(value, f"T.{name} must be at function level or directly inside a block")
            self.define(target.id, buffer)
            return None
        if name == "match_buffer":
            self._match_buffer(target.id, value, buffer_map)
            return None
        if name in DTYPE_NAMES or name == "handle":
            if not isinstance(self.direct, FuncFrame):
                self.err(value, f"variables (`{target.id} = T.{name}()`) may only be declared at function level")
            var = E.Var(target.id, name)
            self.size_vars.add(var)
            self.define(target.id, var)
            return None
        self.err(node, "unsupported assignment")  # pragma: no cover - _is_let took the rest

    def _store(self, target: ast.Subscript, value_node: ast.expr, node: ast.AST) -> S.Stmt:
        buffer = self._buffer_ref(target.value)
        indices = self._indices(target, buffer)
        value = self.value(value_node)
        if isinstance(value, (bool, int, float)) and not isinstance(value, E.PrimExpr):
            if isinstance(value, float) and not is_float(buffer.dtype):
                self.err(value_node, f"cannot store the float {value!r} into {buffer.dtype} buffer {buffer.name}")
            value = E.make_const(value, buffer.dtype)
        elif not isinstance(value, E.PrimExpr):
            self.err(value_node, f"cannot store {describe(value)} into buffer {buffer.name}")
        if value.dtype != buffer.dtype:
            self.err(value_node, f"stores a value of dtype {value.dtype} into {buffer.dtype} buffer {buffer.name}; convert it with T.Cast(\"{buffer.dtype}\", ...)")
        self._note_store(target, buffer)
        return S.BufferStore(buffer, value, indices)

    def _note_store(self, target: ast.AST, buffer: E.Buffer) -> None:
        if self.block_depth == 0 and self.stray_store is None:
            self.stray_store = (target, buffer.name)

    def _aug_assign(self, node: ast.AugAssign) -> S.Stmt:
        if not isinstance(node.target, ast.Subscript):
            self.err(node, "augmented assignment is supported for buffer elements only")
        cls = ARITH_OPS.get(type(node.op))
        if cls is None:
            self.err(node, "unsupported augmented assignment operator")
        buffer = self._buffer_ref(node.target.value)
        indices = self._indices(node.target, buffer)
        load = E.BufferLoad(buffer, indices)
        value = self._binop(cls, load, self.value(node.value), node)
        if value.dtype != buffer.dtype:
            self.err(node.value, f"stores a value of dtype {value.dtype} into {buffer.dtype} buffer {buffer.name}")
        self._note_store(node.target, buffer)
        return S.BufferStore(buffer, value, indices)

    def _expr_stmt(self, node: ast.Expr) -> S.Stmt | None:
        value = node.value
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            return None  # a docstring or comment string
        if isinstance(value, ast.Call):
            name = self.t_func(value.func)
            if name == "func_attr":
                if not isinstance(self.direct, FuncFrame):
                    self.err(value, "T.func_attr must be at function level")
                if len(value.args) != 1 or value.keywords:
                    self.err(value, "T.func_attr takes one dict")
                self.direct.attrs.update(self.attr_dict(value.args[0]))
                return None
            if name in _HEADER_FUNCS:
                self._block_header(name, value)
                return None
            if name == "evaluate":
                if len(value.args) != 1 or value.keywords:
                    self.err(value, "T.evaluate takes one expression")
                return S.Evaluate(self.expr(value.args[0]))
        return S.Evaluate(self.expr(value))

    # ------------------------------------------------------------------ block headers
    def _frame(self, call: ast.Call, what: str) -> BlockFrame:
        frame = self.direct
        if not isinstance(frame, BlockFrame):
            self.err(call, f"{what} must be directly inside a block (not in a loop, an if or T.init)")
        return frame

    def _block_header(self, name: str, call: ast.Call) -> None:
        frame = self._frame(call, f"T.{name}")
        if name in ("reads", "writes"):
            if call.keywords:
                self.err(call.keywords[0], f"T.{name} takes buffer regions only")
            items: list[ast.expr] = []
            for arg in call.args:
                if isinstance(arg, (ast.List, ast.Tuple)):  # TVM <= 0.9: T.reads([A[...], ...])
                    items.extend(arg.elts)
                else:
                    items.append(arg)
            regions = tuple(self._region(a) for a in items)
            if name == "reads":
                frame.reads = (frame.reads or ()) + regions
            else:
                frame.writes = (frame.writes or ()) + regions
        elif name == "where":
            if len(call.args) != 1 or call.keywords:
                self.err(call, "T.where takes one condition")
            cond = self.expr(call.args[0])
            if cond.dtype != "bool":
                self.err(call.args[0], f"T.where needs a boolean condition, got dtype {cond.dtype}")
            frame.predicate = cond
        else:
            if len(call.args) != 1 or call.keywords:
                self.err(call, f"T.{name} takes one dict")
            frame.annotations.update(self.attr_dict(call.args[0]))

    def _axis(self, node: ast.Assign, target: ast.expr, call: ast.Call, kind: str) -> None:
        frame = self._frame(call, f"T.axis.{kind}")
        if frame.is_root:
            self.err(call, "the root block cannot have block variables")
        if kind == "remap":
            self._remap(frame, target, call)
            return
        if kind not in _AXIS_KINDS:
            self.err(call.func, f"unknown block axis kind T.axis.{kind} (expected spatial, reduce, scan, opaque, remap)")
        if not isinstance(target, ast.Name):
            self.err(target, f"T.axis.{kind} defines one variable")
        kwargs = self.keywords(call)
        args = list(call.args)
        for key in ("dom", "binding"):
            if key in kwargs:
                args.append(kwargs.pop(key)[1])
        dtype_kw = kwargs.pop("dtype", None)
        for key, (_, kw_node) in kwargs.items():
            self.err(kw_node, f"unknown keyword argument {key!r} for T.axis.{kind}")
        if len(args) != 2:
            self.err(call, f"T.axis.{kind} takes a domain and a binding value, got {len(args)} argument(s)")
        dom_node, value_node = args
        if isinstance(dom_node, (ast.Tuple, ast.List)):
            if len(dom_node.elts) != 2:
                self.err(dom_node, "a block axis domain is an extent or a (min, max) pair")
            lo, ext = self._range_of(dom_node.elts[0], dom_node.elts[1], "an axis domain")
        else:
            ext = self._int_expr(dom_node, "an axis extent")
            lo = E.make_const(0, ext.dtype)
        widest = max(_int_bits(lo.dtype), _int_bits(ext.dtype), 32)
        dtype = f"int{widest}"
        if dtype_kw is not None:
            dtype = self._dtype_of(dtype_kw[0], dtype_kw[1])
        value = self.value(value_node)
        if isinstance(value, (bool, int)) and not isinstance(value, E.PrimExpr):
            value = E.make_const(value, dtype)
        elif not isinstance(value, E.PrimExpr) or not is_integer_like(value.dtype):
            self.err(value_node, "a block variable must be bound to an integer expression")
        var = E.Var(target.id, dtype)
        lo = ops.cast(dtype, lo) if isinstance(lo, E.IntImm) else lo
        ext = ops.cast(dtype, ext) if isinstance(ext, E.IntImm) else ext
        frame.iter_vars.append(S.IterVar(E.Range(lo, ext), var, _AXIS_KINDS[kind]))
        frame.iter_values.append(value)
        self.define(target.id, var)

    def _remap(self, frame: BlockFrame, target: ast.expr, call: ast.Call) -> None:
        if len(call.args) != 2 or call.keywords:
            self.err(call, 'T.axis.remap takes a kinds string and a list of loop variables: T.axis.remap("SSR", [i, j, k])')
        kinds_node, vars_node = call.args
        kinds = self.value(kinds_node)
        if not isinstance(kinds, str):
            self.err(kinds_node, 'the first argument of T.axis.remap is a string of "S"/"R" letters')
        if not isinstance(vars_node, (ast.List, ast.Tuple)):
            self.err(vars_node, "the second argument of T.axis.remap is a list of loop variables")
        names = [target] if isinstance(target, ast.Name) else (
            list(target.elts) if isinstance(target, (ast.Tuple, ast.List)) else None
        )
        if names is None or not all(isinstance(n, ast.Name) for n in names):
            self.err(target, "T.axis.remap assigns plain names")
        if len(kinds) != len(vars_node.elts):
            self.err(call, f'T.axis.remap kinds "{kinds}" has {len(kinds)} letters but {len(vars_node.elts)} loop variables are given')
        if len(names) != len(kinds):
            self.err(target, f'T.axis.remap kinds "{kinds}" defines {len(kinds)} variables but {len(names)} names are assigned')
        for letter, name_node, var_node in zip(kinds, names, vars_node.elts):
            if letter not in "SR":
                self.err(kinds_node, f'unknown axis kind {letter!r} in T.axis.remap (use "S" for spatial, "R" for reduce)')
            loop_var = self.value(var_node)
            if not isinstance(loop_var, E.Var) or loop_var not in self.loops:
                self.err(var_node, "T.axis.remap binds loop variables of enclosing loops only")
            dom = self.loops[loop_var]
            assert isinstance(name_node, ast.Name)  # checked above
            var = E.Var(name_node.id, loop_var.dtype)
            kind = S.IterType.DATA_PAR if letter == "S" else S.IterType.COMM_REDUCE
            frame.iter_vars.append(S.IterVar(dom, var, kind))
            frame.iter_values.append(loop_var)
            self.define(name_node.id, var)


# ---------------------------------------------------------------------------- helpers
def _infer_regions(
    body: S.Stmt, init: S.Stmt | None, allocs: tuple[E.Buffer, ...], matches: list[S.MatchBufferRegion]
) -> tuple[tuple[S.BufferRegion, ...], tuple[S.BufferRegion, ...]]:
    """TVM's inferred regions; an access through a block's `T.match_buffer` counts as an
    access of the source buffer (TVM's ConvertMatchedRegion)."""
    from msdb.ir.regions import infer_access_regions

    reads, writes = infer_access_regions(body, init, allocs)
    if not matches:
        return reads, writes
    by_buffer = {m.buffer: m for m in matches}
    return _to_sources(reads, by_buffer), _to_sources(writes, by_buffer)


def _to_sources(regions: tuple[S.BufferRegion, ...], by_buffer: dict[E.Buffer, S.MatchBufferRegion]) -> tuple[S.BufferRegion, ...]:
    out: list[S.BufferRegion] = []
    for region in regions:
        match = by_buffer.get(region.buffer)
        if match is None:
            out.append(region)
            continue
        source = match.source.region
        offset = len(source) - len(region.region)
        ranges = [E.Range(rng.min, E.make_const(1, rng.min.dtype)) for rng in source[:offset]]
        for src, rng in zip(source[offset:], region.region):
            ranges.append(E.Range(ops.arith(E.Add, src.min, rng.min), rng.extent))
        converted = S.BufferRegion(match.source.buffer, tuple(ranges))
        if not any(r.buffer is converted.buffer for r in out):
            out.append(converted)
    return tuple(out)


def _int_bits(dtype: str) -> int:
    from msdb.ir.dtype import bits

    return bits(dtype)
