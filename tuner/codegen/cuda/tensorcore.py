"""Tensor-core (wmma) fragments for the CUDA code generator (docs/architecture.md, "CUDA").

TVM's "cuda-tensorcore" schedules tensorize 16x16 tiles with the wmma intrinsics: blocks whose
`T.match_buffer` views (16x16 regions of `shared.dyn` and `wmma.*` buffers) are passed to
`T.tvm_fill_fragment`, `T.tvm_load_matrix_sync`, `T.tvm_mma_sync` and `T.tvm_store_matrix_sync`
through the views' `data`, `elem_offset` and `strides`. TVM lowers them in three steps, which
this module mirrors (written for msdb's IR, not copied):

1. LowerMatchBuffer binds each view to its source region: `data` is the source's pointer,
   `elem_offset` the flattened offset of the region's first element in the (compacted) source,
   `strides` the source's strides. Compaction runs before that binding in TVM, so the numbers
   depend on the compacted shapes. Here `bind_match_buffers` runs before lowering and replaces
   the view's variables by placeholders that carry the region as two `BufferLoad`s (its first and
   last element): compaction sees them as accesses and re-bases them like any other, and
   `resolve_tiles`, after compaction, storage_align and unrolling, turns the placeholders into
   numbers (`flat_index` of the first element, the source's strides).
2. InferFragment reads each fragment's m, n, k from the calls and the layout of a matrix_a /
   matrix_b fragment from its `load_matrix_sync` (`infer_fragments`), refusing what CUDA's
   `nvcuda::wmma` cannot express with a `CodegenError` naming the buffer: an unknown layout, a
   fragment whose shape is not a multiple of its tile, a fragment read element by element.
3. CodeGenCUDA declares a fragment buffer of N elements as an array of N / (rows * cols)
   `nvcuda::wmma::fragment<...>` and prints each call as its `nvcuda::wmma::` function, the
   fragment index being the call's index argument (which TVM's intrinsic computes from the
   view's elem_offset and strides, so a compacted buffer holds one warp's fragments).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

from msdb.ir import expr as E
from msdb.ir import stmt as S
from msdb.ir.arith import simplify
from msdb.ir.functor import IRMutator, substitute
from msdb.tuner.codegen.analysis import Allocate, buffer_strides, flat_index, static_shape, walk
from msdb.tuner.codegen.errors import CodegenError

__all__ = [
    "FRAGMENT_SCOPES", "LAYOUTS", "WMMA_CALLS", "TILE", "FragmentInfo", "bind_match_buffers", "resolve_tiles",
    "infer_fragments", "is_fragment", "is_wmma_call", "fragment_declaration", "wmma_statement", "tile_accesses",
]


#: The storage scopes of tensor-core fragments (TVM's kWMMAMatrixA/B, kWMMAAccumulator).
FRAGMENT_SCOPES = ("wmma.matrix_a", "wmma.matrix_b", "wmma.accumulator")
#: The layouts `nvcuda::wmma` knows (`nvcuda::wmma::row_major`, `mem_row_major`, ...).
LAYOUTS = ("row_major", "col_major")
#: TVM's wmma builtins: the statements this module prints.
WMMA_CALLS = ("tvm_fill_fragment", "tvm_load_matrix_sync", "tvm_store_matrix_sync", "tvm_mma_sync")

#: A view's `data`: the region of its source, as loads of its first and last element.
TILE = "msdb.wmma_tile"
#: A view's `elem_offset` until `resolve_tiles`: the flat offset of the first element.
_TILE_OFFSET = "msdb.wmma_tile_offset"
#: A view's `strides[k]` until `resolve_tiles`: (first element, axis of the source).
_TILE_STRIDE = "msdb.wmma_tile_stride"

#: dtypes the wmma fragments take (CodeGenCUDA's checks; sub-byte types are not supported here).
_INPUT_DTYPES = ("float16", "int8", "uint8")
_ACCUMULATOR_DTYPES = ("float16", "float32", "int32")


def is_fragment(buffer: E.Buffer) -> bool:
    return buffer.scope in FRAGMENT_SCOPES


def _op(call: E.Call) -> str:
    return call.op[4:] if call.op.startswith("tir.") else call.op


def is_wmma_call(e: object) -> bool:
    """Whether `e` is one of TVM's wmma builtins (a statement of its own)."""
    return isinstance(e, E.Call) and _op(e) in WMMA_CALLS


# =============================================================================================
# 1. LowerMatchBuffer: views -> regions of their sources
# =============================================================================================


class _ViewBinder(IRMutator):
    def visit_Block(self, node: S.Block) -> S.Stmt:
        block = super().visit_Block(node)
        assert isinstance(block, S.Block)
        vmap: dict[E.Var, E.PrimExpr] = {}
        for match in block.match_buffers:
            vmap.update(_view_bindings(match))
        if not vmap:
            return block
        body = substitute(block.body, vmap)
        init = substitute(block.init, vmap) if block.init is not None else None
        return S.Block(block.iter_vars, block.reads, block.writes, block.name_hint, body, init, block.alloc_buffers,
                       block.match_buffers, block.annotations)


def _view_bindings(match: S.MatchBufferRegion) -> dict[E.Var, E.PrimExpr]:
    """The view's data / elem_offset / stride variables -> placeholders over its source region."""
    view, source = match.buffer, match.source
    region = source.region
    lead = len(region) - len(view.shape)
    if lead < 0:
        raise CodegenError(f"match_buffer {view.name} has more dimensions than its source {source.buffer.name}")
    first = E.BufferLoad(source.buffer, tuple(r.min for r in region))
    last = E.BufferLoad(source.buffer, tuple(_last(r) for r in region))
    out: dict[E.Var, E.PrimExpr] = {}
    if view.data is not None:
        out[view.data] = E.Call("handle", TILE, (first, last))
    if isinstance(view.elem_offset, E.Var):
        out[view.elem_offset] = E.Call(view.elem_offset.dtype, _TILE_OFFSET, (first,))
    for k, stride in enumerate(view.strides):
        if isinstance(stride, E.Var):
            out[stride] = E.Call(stride.dtype, _TILE_STRIDE, (first, E.IntImm("int32", lead + k)))
    return out


def _last(r: E.Range) -> E.PrimExpr:
    extent = E.const_int(r.extent)
    if extent == 1:
        return r.min
    return E.Add(r.min, E.Sub(r.extent, E.IntImm(r.extent.dtype, 1)))


def bind_match_buffers(body: S.Stmt) -> S.Stmt:
    """Every block's match-buffer views (`C.data`, `C.elem_offset`, `C.strides[k]`) become
    placeholders over their source regions, resolved by `resolve_tiles` once the sources are
    compacted (TVM's LowerMatchBuffer, which runs after CompactBufferAllocation)."""
    out: S.Stmt = _ViewBinder().visit(body)
    return out


# =============================================================================================
# After compaction: offsets and strides as numbers
# =============================================================================================


class _TileResolver(IRMutator):
    def __init__(self) -> None:
        super().__init__()
        self.ranges: dict[E.Var, E.Range] = {}

    def visit_For(self, node: S.For) -> S.Stmt:
        saved = self.ranges.get(node.loop_var)  # loops bound to one thread axis share their variable
        self.ranges[node.loop_var] = E.Range(node.min, node.extent)
        try:
            return super().visit_For(node)
        finally:
            if saved is None:
                del self.ranges[node.loop_var]
            else:
                self.ranges[node.loop_var] = saved

    def visit_Allocate(self, node: Allocate) -> S.Stmt:
        body = self.visit(node.body)
        return node if body is node.body else Allocate(node.buffer, body)

    def visit_Evaluate(self, node: S.Evaluate) -> S.Stmt:
        value = self.visit(node.value)
        if value is node.value:
            return node
        if isinstance(value, E.Call):
            value = E.Call(value.dtype, value.op, tuple(self._simplify(a) for a in value.args))
        return S.Evaluate(value)

    def _simplify(self, e: E.PrimExpr) -> E.PrimExpr:
        if isinstance(e, E.Call) or e.dtype not in ("int32", "int64"):
            if isinstance(e, E.Call) and _op(e) == "tvm_access_ptr":
                return E.Call(e.dtype, e.op, tuple(self._simplify(a) for a in e.args))
            return e
        return simplify(e, self.ranges)

    def visit_Call(self, node: E.Call) -> E.PrimExpr:
        args = self._exprs(node.args)
        if node.op == _TILE_OFFSET:
            first = args[0]
            assert isinstance(first, E.BufferLoad)
            offset = flat_index(first.buffer, first.indices)
            return offset if offset.dtype == node.dtype else E.Cast(node.dtype, offset)
        if node.op == _TILE_STRIDE:
            first, axis = args
            assert isinstance(first, E.BufferLoad)
            strides = buffer_strides(first.buffer)
            index = E.const_int(axis)
            if index is None or not 0 <= index < len(strides):
                raise CodegenError(f"buffer {first.buffer.name}: a tensor intrinsic asks for stride {axis}; it has "
                                   f"{len(strides)}")
            return E.IntImm(node.dtype, strides[index])
        return node if args is node.args else E.Call(node.dtype, node.op, args)


def resolve_tiles(body: S.Stmt) -> S.Stmt:
    """Each view's elem_offset and strides as numbers of its (compacted, aligned) source, the
    wmma calls' integer arguments simplified under their loops (a fragment index is then a
    constant once the loops around it are unrolled)."""
    out: S.Stmt = _TileResolver().visit(body)
    return out


# =============================================================================================
# 2. InferFragment
# =============================================================================================


@dataclass(frozen=True)
class FragmentInfo:
    """What `nvcuda::wmma::fragment<use, m, n, k, T, layout>` needs of one fragment buffer."""

    scope: str
    m: int
    n: int
    k: int
    layout: str  # matrix_a / matrix_b: row_major or col_major; accumulator: ""

    @property
    def tile(self) -> tuple[int, int]:
        """(rows, cols) of one fragment: matrix_a m x k, matrix_b k x n, accumulator m x n."""
        if self.scope == "wmma.matrix_a":
            return self.m, self.k
        if self.scope == "wmma.matrix_b":
            return self.k, self.n
        return self.m, self.n


def _tile_load(arg: E.PrimExpr, call: E.Call) -> E.BufferLoad:
    if isinstance(arg, E.Call) and arg.op == TILE and isinstance(arg.args[0], E.BufferLoad):
        return arg.args[0]
    raise CodegenError(f"{_op(call)} takes a buffer's data as a match_buffer view (T.match_buffer(...).data), "
                       f"not {arg!r}; write the call inside a block whose match_buffer views the fragment")


def _fragment_arg(arg: E.PrimExpr, call: E.Call) -> E.Buffer:
    buffer = _tile_load(arg, call).buffer
    if not is_fragment(buffer):
        raise CodegenError(f"{_op(call)} takes a wmma fragment (scope {', '.join(FRAGMENT_SCOPES)}), but buffer "
                           f"{buffer.name} has scope {buffer.scope!r}")
    return buffer


def _int_arg(call: E.Call, i: int) -> int:
    value = E.const_int(call.args[i])
    if value is None:
        raise CodegenError(f"{_op(call)}: argument {i} (m, n or k) must be a constant, not {call.args[i]!r}")
    return int(value)


def _calls(body: S.Stmt) -> list[E.Call]:
    found: list[E.Call] = []

    def visit(node: object) -> None:
        if isinstance(node, S.Evaluate) and is_wmma_call(node.value):
            assert isinstance(node.value, E.Call)
            found.append(node.value)

    walk(body, visit)
    return found


def infer_fragments(body: S.Stmt) -> dict[E.Buffer, FragmentInfo]:
    """m, n, k and layout of every fragment buffer used under `body` (TVM's InferFragment),
    after checking what TVM checks (arity, one shape per fragment, one layout per input
    fragment, mma operands of one shape) and what `nvcuda::wmma` needs (a known layout, a
    supported dtype, an allocation that is a whole number of tiles, no element access)."""
    infos: dict[E.Buffer, FragmentInfo] = {}
    arity = {"tvm_fill_fragment": 6, "tvm_load_matrix_sync": 8, "tvm_store_matrix_sync": 8, "tvm_mma_sync": 8}
    mma: list[tuple[E.Call, list[E.Buffer]]] = []
    for call in _calls(body):
        op = _op(call)
        if len(call.args) != arity[op]:
            raise CodegenError(f"{op} takes {arity[op]} arguments, got {len(call.args)}")
        if op == "tvm_mma_sync":
            mma.append((call, [_fragment_arg(call.args[i], call) for i in (0, 2, 4, 6)]))
            continue
        buffer = _fragment_arg(call.args[0], call)
        shape = (_int_arg(call, 1), _int_arg(call, 2), _int_arg(call, 3))
        layout = ""
        if op in ("tvm_load_matrix_sync", "tvm_store_matrix_sync"):
            arg = call.args[7]
            if not isinstance(arg, E.StringImm) or arg.value not in LAYOUTS:
                text = arg.value if isinstance(arg, E.StringImm) else repr(arg)
                raise CodegenError(f"{op} of wmma fragment {buffer.name} has layout {text!r}; nvcuda::wmma knows "
                                   f"{' and '.join(repr(x) for x in LAYOUTS)}")
            if op == "tvm_load_matrix_sync" and buffer.scope != "wmma.accumulator":
                layout = arg.value
        info = FragmentInfo(buffer.scope, *shape, layout)
        known = infos.get(buffer)
        if known is None or (not known.layout and layout):
            if known is not None and (known.m, known.n, known.k) != shape:
                raise _shape_mismatch(buffer, known, shape)
            infos[buffer] = info
        elif (known.m, known.n, known.k) != shape:
            raise _shape_mismatch(buffer, known, shape)
        elif layout and known.layout != layout:
            raise CodegenError(f"wmma fragment {buffer.name} is loaded as {known.layout} and as {layout}; "
                               "a fragment has one layout")
    for call, operands in mma:
        for buffer in operands:
            if buffer not in infos:
                raise CodegenError(f"wmma fragment {buffer.name} is used by tvm_mma_sync but never filled or loaded "
                                   "(tvm_fill_fragment / tvm_load_matrix_sync give its shape)")
        shapes = {(infos[b].m, infos[b].n, infos[b].k) for b in operands}
        if len(shapes) > 1:
            raise CodegenError(f"tvm_mma_sync mixes fragment shapes {sorted(shapes)} of "
                               f"{', '.join(b.name for b in operands)}")
    for buffer, info in infos.items():
        if buffer.scope in ("wmma.matrix_a", "wmma.matrix_b") and not info.layout:
            raise CodegenError(f"wmma fragment {buffer.name} ({buffer.scope}) is never loaded with "
                               "tvm_load_matrix_sync, which gives its layout")
        allowed = _ACCUMULATOR_DTYPES if buffer.scope == "wmma.accumulator" else _INPUT_DTYPES
        if buffer.dtype not in allowed:
            raise CodegenError(f"wmma fragment {buffer.name} ({buffer.scope}) has dtype {buffer.dtype}; "
                               f"supported: {', '.join(allowed)}")
    _check_element_access(body)
    _check_allocations(body, infos)
    return infos


def _shape_mismatch(buffer: E.Buffer, known: FragmentInfo, shape: tuple[int, int, int]) -> CodegenError:
    return CodegenError(f"wmma fragment {buffer.name} is used with m, n, k = {(known.m, known.n, known.k)} and "
                        f"{shape}; a fragment has one shape")


def _check_element_access(body: S.Stmt) -> None:
    """A fragment's elements are spread over a warp's registers in an unspecified order: only
    the wmma calls may touch them."""
    inside: set[int] = set()

    def mark(node: object) -> None:
        if isinstance(node, E.Call) and node.op == TILE:
            inside.update(id(a) for a in node.args)

    walk(body, mark)

    def visit(node: object) -> None:
        if isinstance(node, (E.BufferLoad, S.BufferStore)) and is_fragment(node.buffer) and id(node) not in inside:
            raise CodegenError(f"wmma fragment {node.buffer.name} ({node.buffer.scope}) is accessed element by element; "
                               "its elements live in a warp's registers and only the tvm_*_matrix_sync / "
                               "tvm_fill_fragment / tvm_mma_sync intrinsics may touch them")

    walk(body, visit)


def _check_allocations(body: S.Stmt, infos: Mapping[E.Buffer, FragmentInfo]) -> None:
    def visit(node: object) -> None:
        if not (isinstance(node, Allocate) and is_fragment(node.buffer)):
            return
        buffer = node.buffer
        info = infos.get(buffer)
        if info is None:
            raise CodegenError(f"wmma fragment {buffer.name} is allocated but no wmma intrinsic uses it")
        rows, cols = info.tile
        shape = static_shape(buffer)
        count = 1
        for d in shape:
            count *= d
        if buffer.strides or not shape or shape[-1] % cols or count % (rows * cols):
            raise CodegenError(f"wmma fragment {buffer.name} has shape {list(shape)}, which is not a whole number "
                               f"of {rows}x{cols} tiles (its last dimension a multiple of {cols}); give the "
                               "fragment buffer a shape whose last two dimensions are multiples of the tile")

    walk(body, visit)


# =============================================================================================
# 3. CUDA C
# =============================================================================================


def fragment_declaration(buffer: E.Buffer, info: FragmentInfo, name: str, c_type: Callable[[str], str]) -> str:
    """`nvcuda::wmma::fragment<...> name[count];` for a fragment buffer (TVM's PrintWmmaScope)."""
    rows, cols = info.tile
    count = 1
    for d in static_shape(buffer):
        count *= d
    use = buffer.scope.split(".", 1)[1]
    layout = f", nvcuda::wmma::{info.layout}" if info.layout else ""
    return (f"nvcuda::wmma::fragment<nvcuda::wmma::{use}, {info.m}, {info.n}, {info.k}, {c_type(buffer.dtype)}"
            f"{layout}> {name}[{count // (rows * cols)}];")


def wmma_statement(call: E.Call, expr: Callable[[E.PrimExpr], str], buffer_name: Callable[[E.Buffer], str],
                   c_type: Callable[[str], str]) -> str:
    """The `nvcuda::wmma::` call of one of TVM's builtins (TVM's CodeGenCUDA::VisitExpr_)."""
    op, args = _op(call), call.args

    def fragment(data: int, index: int) -> str:
        return f"{buffer_name(_tile_load(args[data], call).buffer)}[{expr(args[index])}]"

    if op == "tvm_fill_fragment":  # (data, m, n, k, index, value)
        return f"nvcuda::wmma::fill_fragment({fragment(0, 4)}, {expr(args[5])});"
    if op == "tvm_load_matrix_sync":  # (data, m, n, k, index, pointer, stride, layout)
        return (f"nvcuda::wmma::load_matrix_sync({fragment(0, 4)}, "
                f"{_pointer(args[5], call, expr, buffer_name, c_type)}, {expr(args[6])});")
    if op == "tvm_store_matrix_sync":  # (data, m, n, k, index, pointer, stride, layout)
        layout = args[7].value if isinstance(args[7], E.StringImm) else "row_major"
        return (f"nvcuda::wmma::store_matrix_sync({_pointer(args[5], call, expr, buffer_name, c_type)}, "
                f"{fragment(0, 4)}, {expr(args[6])}, nvcuda::wmma::mem_{layout});")
    if op == "tvm_mma_sync":  # (d, d index, a, a index, b, b index, c, c index)
        return f"nvcuda::wmma::mma_sync({', '.join(fragment(i, i + 1) for i in (0, 2, 4, 6))});"
    raise CodegenError(f"{op} is not a wmma intrinsic")


def _pointer(arg: E.PrimExpr, call: E.Call, expr: Callable[[E.PrimExpr], str],
             buffer_name: Callable[[E.Buffer], str], c_type: Callable[[str], str]) -> str:
    """`T.tvm_access_ptr(T.type_annotation(dtype), data, offset, extent, rw)` as a C pointer."""
    if not (isinstance(arg, E.Call) and _op(arg) == "tvm_access_ptr" and len(arg.args) == 5):
        raise CodegenError(f"{_op(call)} takes its memory operand as T.tvm_access_ptr(...), not {arg!r}")
    kind, data, offset = arg.args[0], arg.args[1], arg.args[2]
    buffer = _tile_load(data, call).buffer
    if is_fragment(buffer):
        raise CodegenError(f"{_op(call)} reads or writes memory through wmma fragment {buffer.name}; "
                           "the memory operand must be a shared or global buffer")
    name = buffer_name(buffer)
    if kind.dtype != buffer.dtype:
        return f"(({c_type(kind.dtype)}*)({name}) + {expr(offset)})"
    return f"(&({name}[{expr(offset)}]))"


# =============================================================================================
# For barrier insertion
# =============================================================================================


def tile_accesses(e: E.PrimExpr) -> list[tuple[E.BufferLoad, bool]]:
    """(first element, written) of each memory region a wmma call reads or writes through
    `T.tvm_access_ptr` (rw mask 2: written), so barriers see a store_matrix_sync as a write of
    its whole tile."""
    found: list[tuple[E.BufferLoad, bool]] = []

    def visit(node: object) -> None:
        if isinstance(node, E.Call) and _op(node) == "tvm_access_ptr" and len(node.args) == 5:
            data = node.args[1]
            if isinstance(data, E.Call) and data.op == TILE and isinstance(data.args[0], E.BufferLoad):
                rw = E.const_int(node.args[4])
                found.append((data.args[0], rw is None or bool(rw & 2)))

    walk(e, visit)
    return found
