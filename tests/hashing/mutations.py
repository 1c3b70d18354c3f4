"""Rewrites for the property tests: consistent renaming (must keep the hash) and single
mutations at a numbered site (must change it), built on `msdb.ir.functor.IRMutator`."""

from __future__ import annotations

import dataclasses
import random
from typing import Any

from msdb.ir import expr as E
from msdb.ir import stmt as S
from msdb.ir.function import IRModule, PrimFunc
from msdb.ir.functor import IRMutator, replace_buffers

NAME_ALPHABET = "abcxyz_ABC019\x1f:s \u00e9\u4e2d"


def random_name(rng: random.Random) -> str:
    return "".join(rng.choice(NAME_ALPHABET) for _ in range(rng.randint(0, 8)))


class Renamer(IRMutator):
    """Gives every variable, buffer and block a fresh object with a random name."""

    def __init__(self, rng: random.Random) -> None:
        super().__init__()
        self.rng = rng
        self.var_map: dict[E.Var, E.Var] = {}
        self.buf_map: dict[E.Buffer, E.Buffer] = {}

    def visit_Var(self, node: E.Var) -> E.Var:
        new = self.var_map.get(node)
        if new is None:
            new = self.var_map[node] = E.Var(random_name(self.rng), node.dtype)
        return new

    def visit_buffer(self, buffer: E.Buffer) -> E.Buffer:
        new = self.buf_map.get(buffer)
        if new is None:
            new = dataclasses.replace(
                buffer,
                name=random_name(self.rng),
                shape=tuple(self.visit(d) for d in buffer.shape),
                strides=tuple(self.visit(d) for d in buffer.strides),
                elem_offset=self.visit(buffer.elem_offset),
            )
            self.buf_map[buffer] = new
        return new

    def visit_Block(self, node: S.Block) -> S.Block:
        new = super().visit_Block(node)
        return dataclasses.replace(new, name_hint=random_name(self.rng))

    def visit_For(self, node: S.For) -> S.For:
        new = super().visit_For(node)
        if new.thread_binding is not None:
            tb = new.thread_binding
            new = dataclasses.replace(new, thread_binding=S.IterVar(tb.dom, E.Var(random_name(self.rng)), tb.iter_type, tb.thread_tag))
        return new

    def func(self, func: PrimFunc) -> PrimFunc:
        params = tuple(self.visit(p) for p in func.params)
        buffer_map = {self.visit(p): self.visit_buffer(b) for p, b in func.buffer_map.items()}
        attrs = dict(func.attrs)
        if "global_symbol" in attrs or self.rng.random() < 0.5:
            attrs["global_symbol"] = random_name(self.rng)
        return PrimFunc(params, buffer_map, self.visit(func.body), attrs)


def rename_module(mod: IRModule, rng: random.Random) -> IRModule:
    """Rename everything, including a single function's key in the module."""
    if len(mod.functions) == 1:
        (func,) = mod.functions.values()
        return IRModule({random_name(rng): Renamer(rng).func(func)}, mod.attrs)
    return IRModule({name: Renamer(rng).func(f) for name, f in mod.functions.items()}, mod.attrs)


# ---------------------------------------------------------------------------------------------
# Single mutations
# ---------------------------------------------------------------------------------------------

MUTATION_KINDS = (
    "extent", "loop_kind", "loop_annotation", "iter_type", "iter_dom", "iter_value", "index",
    "block_annotation", "float_const", "int_const", "op", "shape", "dtype", "scope",
)

_OP_SWAP: dict[type, type] = {E.Add: E.Sub, E.Sub: E.Add, E.Mul: E.Add, E.Div: E.Mul, E.Max: E.Min,
                              E.Min: E.Max, E.FloorDiv: E.FloorMod, E.FloorMod: E.FloorDiv,
                              E.LT: E.LE, E.LE: E.LT, E.GE: E.GT, E.GT: E.GE, E.And: E.Or, E.Or: E.And}


class SiteMutator(IRMutator):
    """Applies one mutation of `kind` at the `target`-th site of that kind (pre-order over
    statements); with target -1 it only counts the sites."""

    def __init__(self, kind: str, target: int = -1) -> None:
        super().__init__()
        self.kind = kind
        self.target = target
        self.count = 0

    def _hit(self, kind: str) -> bool:
        if kind != self.kind:
            return False
        n = self.count
        self.count += 1
        return n == self.target

    def visit_BufferRegion(self, node: S.BufferRegion) -> S.BufferRegion:
        # Block reads/writes do not count (derived data); no match_buffer sources in the samples.
        return node

    def visit_For(self, node: S.For) -> S.Stmt:
        hit_extent = self._hit("extent")
        hit_kind = node.kind != S.ForKind.THREAD_BINDING and self._hit("loop_kind")
        hit_ann = self._hit("loop_annotation")
        new = super().visit_For(node)
        if hit_extent:
            new = dataclasses.replace(new, extent=new.extent + 1)
        if hit_kind:
            new = dataclasses.replace(new, kind=S.ForKind((int(node.kind) + 1) % 4))
        if hit_ann:
            new = dataclasses.replace(new, annotations={**new.annotations, "pragma_unroll_explicit": 1})
        return new

    def visit_Block(self, node: S.Block) -> S.Stmt:
        hit_ann = node.iter_vars != () and self._hit("block_annotation")
        hits_type = [self._hit("iter_type") for _ in node.iter_vars]
        hits_dom = [self._hit("iter_dom") for _ in node.iter_vars]
        new = super().visit_Block(node)
        if hit_ann:
            new = dataclasses.replace(new, annotations={**new.annotations, "meta_schedule.unroll_explicit": 16})
        if any(hits_type) or any(hits_dom):
            ivs = []
            for iv, ht, hd in zip(new.iter_vars, hits_type, hits_dom):
                if ht:
                    flipped = S.IterType.COMM_REDUCE if iv.iter_type == S.IterType.DATA_PAR else S.IterType.DATA_PAR
                    iv = S.IterVar(iv.dom, iv.var, flipped, iv.thread_tag)
                if hd:
                    iv = S.IterVar(E.Range(iv.dom.min, iv.dom.extent + 1), iv.var, iv.iter_type, iv.thread_tag)
                ivs.append(iv)
            new = dataclasses.replace(new, iter_vars=tuple(ivs))
        return new

    def visit_BlockRealize(self, node: S.BlockRealize) -> S.Stmt:
        hits = [self._hit("iter_value") for _ in node.iter_values]
        new = super().visit_BlockRealize(node)
        if any(hits):
            values = tuple(v + 1 if h else v for v, h in zip(new.iter_values, hits))
            new = S.BlockRealize(values, new.predicate, new.block)
        return new

    def _indices(self, indices: tuple[E.PrimExpr, ...]) -> tuple[E.PrimExpr, ...]:
        hits = [self._hit("index") for _ in indices]
        if not any(hits):
            return indices
        return tuple(i * 2 if h else i for i, h in zip(indices, hits))

    def visit_BufferLoad(self, node: E.BufferLoad) -> E.PrimExpr:
        indices = self._indices(node.indices)
        new = super().visit_BufferLoad(node)
        if indices is not node.indices:
            new = E.BufferLoad(new.buffer, indices)
        return new

    def visit_BufferStore(self, node: S.BufferStore) -> S.Stmt:
        new = super().visit_BufferStore(node)
        indices = self._indices(node.indices)
        if indices is not node.indices:
            new = S.BufferStore(new.buffer, new.value, indices)
        return new

    def visit_FloatImm(self, node: E.FloatImm) -> E.PrimExpr:
        return E.FloatImm(node.dtype, node.value + 1.0) if self._hit("float_const") else node

    def visit_IntImm(self, node: E.IntImm) -> E.PrimExpr:
        if node.dtype != "bool" and self._hit("int_const"):
            return E.IntImm(node.dtype, node.value + 1)
        return node

    def visit_BinaryOp(self, node: E.BinaryOp) -> E.PrimExpr:
        hit = type(node) in _OP_SWAP and self._hit("op")
        new = super().visit_BinaryOp(node)
        if hit:
            new = _OP_SWAP[type(node)](new.a, new.b, new.dtype)
        return new


def _func_buffers(func: PrimFunc) -> list[E.Buffer]:
    found: list[E.Buffer] = list(func.buffers)

    class Collect(IRMutator):
        def visit_buffer(self, buffer: E.Buffer) -> E.Buffer:
            if buffer not in found:
                found.append(buffer)
            return buffer

    Collect().visit(func.body)
    return found


def _mutate_buffer(buf: E.Buffer, kind: str) -> E.Buffer:
    if kind == "shape":
        return dataclasses.replace(buf, shape=(buf.shape[0] + 1,) + buf.shape[1:])
    if kind == "dtype":
        return dataclasses.replace(buf, dtype="float64" if buf.dtype != "float64" else "float16")
    return dataclasses.replace(buf, scope="shared" if buf.scope != "shared" else "local")


def count_sites(mod: IRModule, kind: str) -> int:
    func = mod.main
    if kind in ("shape", "dtype", "scope"):
        return len(_func_buffers(func))
    counter = SiteMutator(kind)
    counter.visit(func.body)
    return counter.count


def mutate(mod: IRModule, kind: str, target: int) -> IRModule:
    """`mod` with one mutation of `kind` at site `target` of its entry function."""
    (name, func), = [(n, f) for n, f in mod.functions.items() if f is mod.main]
    if kind in ("shape", "dtype", "scope"):
        old = _func_buffers(func)[target]
        new = _mutate_buffer(old, kind)
        body = replace_buffers(func.body, {old: new})
        buffer_map = {p: (new if b is old else b) for p, b in func.buffer_map.items()}
        new_func = PrimFunc(func.params, buffer_map, body, func.attrs)
    else:
        new_func = func.with_body(SiteMutator(kind, target).visit(func.body))
    return mod.with_function(name, new_func)


def with_attrs(mod: IRModule, **attrs: Any) -> IRModule:
    (name, func), = mod.functions.items()
    return IRModule({name: func.with_attrs(**attrs)}, mod.attrs)
