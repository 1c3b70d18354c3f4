"""GPU lowering: a scheduled PrimFunc becomes kernels, each a loop program whose thread-bound
loops stand for the hardware indices.

The CPU lowering's passes (`msdb.tuner.codegen.lower`) run with TVM's GPU rules: thread bindings
unified, compaction relaxed over the threads that share a scope, global intermediates as
workspaces, one kernel per top-level launch region, barriers inserted (`sync`). See
docs/architecture.md, "CUDA".
"""

from __future__ import annotations

from dataclasses import dataclass

from msdb.ir import expr as E
from msdb.ir import stmt as S
from msdb.ir.function import IRModule, PrimFunc
from msdb.ir.functor import IRMutator, substitute
from msdb.schedule import thread_scope
from msdb.tuner.codegen.analysis import Allocate, walk
from msdb.tuner.codegen.errors import CodegenError
from msdb.tuner.codegen.lower import (
    NOOP, _BlockLowering, _c_identifier, _param_buffers, align_allocations, apply_unroll_pragmas,
    compact_allocations, plan_allocations,
)

__all__ = ["Kernel", "GpuLoweredFunc", "lower_gpu", "lower_gpu_module", "storage_rank", "thread_rank",
           "can_relax_under_thread", "thread_tag", "THREAD_TAGS"]

#: Launch dimensions, in CUDA's order.
THREAD_TAGS = ("blockIdx.x", "blockIdx.y", "blockIdx.z", "threadIdx.x", "threadIdx.y", "threadIdx.z")

#: The storage scopes the CUDA code generator allocates (the wmma fragments: `tensorcore`).
_SCOPES = ("global", "shared", "shared.dyn", "warp", "local", "wmma.matrix_a", "wmma.matrix_b", "wmma.accumulator")


def storage_rank(buffer: E.Buffer) -> int:
    """TVM's StorageRank of a buffer's scope (global 0, shared 1, warp 2, local 3:
    `msdb.schedule.thread_scope`); a scope the generator does not allocate is refused."""
    scope = buffer.scope or "global"
    if scope not in _SCOPES:
        raise CodegenError(
            f"buffer {buffer.name} has storage scope {scope!r}; the CUDA code generator supports "
            "'global', 'shared', 'shared.dyn', 'local' and the wmma fragments 'wmma.matrix_a', 'wmma.matrix_b', "
            "'wmma.accumulator'"
        )
    return thread_scope.storage_rank(scope)


def thread_rank(tag: str) -> int:
    """TVM's ThreadScope rank: blockIdx 0, threadIdx and vthread 1 (`msdb.schedule.thread_scope`)."""
    if tag.startswith("blockIdx.") or tag.startswith("threadIdx.") or tag.startswith("vthread"):
        return thread_scope.thread_rank(tag)
    raise CodegenError(f"unknown thread axis {tag!r}; bind loops to blockIdx.x/y/z, threadIdx.x/y/z or vthread")


def can_relax_under_thread(buffer: E.Buffer, tag: str) -> bool:
    """Whether the threads of `tag` share one allocation of `buffer` (TVM's rule: the storage
    rank is at most the thread's). A virtual thread that does not share a local array gets its
    own copy of it (`compact_allocations`)."""
    return storage_rank(buffer) <= thread_rank(tag)


def thread_tag(loop: S.For) -> str | None:
    if loop.kind == S.ForKind.THREAD_BINDING and loop.thread_binding is not None:
        return loop.thread_binding.thread_tag
    return None


@dataclass(frozen=True, eq=False)
class Kernel:
    """One `__global__` function: its device code, launch extents by thread tag (a tag bound to
    different extents keeps the first; `verify` reports the mismatch) and the buffers it takes."""

    name: str
    body: S.Stmt
    launch: dict[str, int]
    params: tuple[E.Buffer, ...]

    @property
    def grid(self) -> tuple[int, int, int]:
        return (self.launch.get("blockIdx.x", 1), self.launch.get("blockIdx.y", 1), self.launch.get("blockIdx.z", 1))

    @property
    def block(self) -> tuple[int, int, int]:
        return (self.launch.get("threadIdx.x", 1), self.launch.get("threadIdx.y", 1), self.launch.get("threadIdx.z", 1))


@dataclass(frozen=True, eq=False)
class GpuLoweredFunc:
    """The kernels of one PrimFunc, launched in order on its arguments and workspaces."""

    name: str
    params: tuple[E.Buffer, ...]
    workspaces: tuple[E.Buffer, ...]
    kernels: tuple[Kernel, ...]
    noalias: bool = True


def lower_gpu_module(mod: IRModule | PrimFunc) -> GpuLoweredFunc:
    """Lower the entry function of a module (or a lone PrimFunc) for the GPU."""
    if isinstance(mod, PrimFunc):
        return lower_gpu(mod, "main")
    name = next((k for k, f in mod.functions.items() if f is mod.main), "main")
    return lower_gpu(mod.main, name)


def lower_gpu(func: PrimFunc, name: str = "main") -> GpuLoweredFunc:
    """The GPU lowering pipeline, one pass per line."""
    from msdb.tuner.codegen.cuda.cross_thread import lower_cross_thread_reductions
    from msdb.tuner.codegen.cuda.emit import match_dp4a
    from msdb.tuner.codegen.cuda.sync import insert_barriers
    from msdb.tuner.codegen.cuda.shared_dyn import merge_dynamic_shared
    from msdb.tuner.codegen.cuda.tensorcore import bind_match_buffers, infer_fragments, resolve_tiles

    params = _param_buffers(func)                                   # the kernels' pointer arguments, in order
    body = bind_match_buffers(func.body)                            # wmma views -> regions of their sources
    body, registers = lower_cross_thread_reductions(body)          # reductions over threads -> allreduce
    lowering = _BlockLowering(keep_threads=True)
    body = lowering.stmt(body)                                      # blocks -> loops; thread-bound loops kept
    body = unify_thread_vars(body)                                  # one variable per launch axis (TVM's LiftThreadBinding)
    for buf in lowering.allocs:
        storage_rank(buf)                                           # unsupported scopes fail here, with the buffer's name
    workspaces = tuple(b for b in lowering.allocs if storage_rank(b) == 0)
    on_chip = [b for b in lowering.allocs if storage_rank(b) > 0] + registers
    body = plan_allocations(body, on_chip)                          # shared/local arrays at the LCA of their uses
    body = compact_allocations(body, can_relax_under_thread)        # shrink to the region their threads touch
    body = align_allocations(body, lowering.dim_aligns)             # storage_align padding (bank conflicts)
    body = merge_dynamic_shared(body)                               # shared.dyn buffers share one pool (TVM's merge)
    body = apply_unroll_pragmas(body, implicit=True, expand=True,   # auto-unroll: explicit ones written out,
                                intrinsic=lambda loop: match_dp4a(loop) is not None)  # implicit ones `#pragma unroll`
    body = resolve_tiles(body)                                      # views' elem_offset/strides of the compacted sources
    infer_fragments(body)                                           # wmma fragments checked here, with their names
    symbol = _c_identifier(str(func.attrs.get("global_symbol", name)))
    kernels = _split_kernels(body, symbol, params + workspaces)     # one kernel per top-level launch region
    kernels = [Kernel(k.name, insert_barriers(k.body), k.launch, k.params) for k in kernels]  # __syncthreads()
    noalias = bool(func.attrs.get("tir.noalias", False) or func.attrs.get("tirx.noalias", False))
    return GpuLoweredFunc(symbol, params, workspaces, tuple(kernels), noalias)


class _ThreadUnifier(IRMutator):
    def __init__(self) -> None:
        super().__init__()
        self.axes: dict[str, E.Var] = {}

    def visit_For(self, node: S.For) -> S.Stmt:
        tag = thread_tag(node)
        if tag is None or tag.startswith("vthread"):
            return super().visit_For(node)
        axis = self.axes.setdefault(tag, E.Var(tag, node.loop_var.dtype))
        body = self.visit(substitute(node.body, {node.loop_var: axis.astype(node.loop_var.dtype)}))
        return S.For(axis, _as_index(node.min, axis.dtype), _as_index(node.extent, axis.dtype), node.kind, body,
                     node.thread_binding, node.annotations)

    def visit_Allocate(self, node: Allocate) -> S.Stmt:
        return Allocate(node.buffer, self.visit(node.body))


def _as_index(value: E.PrimExpr, dtype: str) -> E.PrimExpr:
    """`value` (a loop's min or extent) in the index dtype of the launch axis it is bound to."""
    constant = E.const_int(value)
    return E.IntImm(dtype, constant) if constant is not None else value.astype(dtype)


def unify_thread_vars(body: S.Stmt) -> S.Stmt:
    """Every loop bound to the same blockIdx/threadIdx axis uses one variable, as the hardware
    index is one: accesses of a register tile from two thread loops then line up, and the tile
    compacts to each thread's part (TVM's LiftThreadBinding / UnifyThreadBinding).

    The variable takes the index dtype of the first loop bound to the axis; a loop of another
    dtype reads it through a cast, as in TVM's UnifyThreadBinding. Such loops meet in a
    function whose tensors mix int32 and int64 shapes: a cache stage's loops take the dtype of
    the cached buffer's shape, the compute loops that of the block's iter vars."""
    return _ThreadUnifier().visit(body)


def _describe(s: S.Stmt) -> str:
    if isinstance(s, S.For):
        return f"loop {s.loop_var.name} (extent {s.extent})"
    if isinstance(s, S.BufferStore):
        return f"a store to {s.buffer.name}"
    if isinstance(s, Allocate):
        return f"the {s.buffer.scope} allocation of {s.buffer.name}"
    return type(s).__name__


def _split_kernels(body: S.Stmt, symbol: str, buffers: tuple[E.Buffer, ...]) -> list[Kernel]:
    regions: list[S.For] = []

    def host(s: S.Stmt) -> None:
        if s is NOOP or (isinstance(s, S.Evaluate) and isinstance(s.value, E.IntImm)):
            return
        if isinstance(s, S.SeqStmt):
            for x in s.seq:
                host(x)
            return
        if isinstance(s, S.For) and thread_tag(s) is not None:
            regions.append(s)
            return
        if isinstance(s, Allocate):
            raise CodegenError(
                f"{_describe(s)} is used by more than one kernel (or outside any); a {s.buffer.scope} "
                "buffer lives inside one launch: compute its producer and consumers under the same blockIdx loop"
            )
        raise CodegenError(
            f"{_describe(s)} of {symbol} is outside every thread binding and would run on the host; "
            "bind the outer loops to blockIdx/threadIdx (TVM refuses the same: 'did you forget to bind?')"
        )

    host(body)
    if not regions:
        raise CodegenError(f"{symbol} has no loop bound to blockIdx/threadIdx: nothing would run on the GPU")
    kernels = []
    for index, region in enumerate(regions):
        launch: dict[str, int] = {}
        used: set[E.Buffer] = set()

        def visit(node: object) -> None:
            if isinstance(node, S.For):
                tag = thread_tag(node)
                if tag is not None and not tag.startswith("vthread"):
                    if tag not in THREAD_TAGS:
                        raise CodegenError(f"loop {node.loop_var.name} is bound to unknown thread axis {tag!r}")
                    extent = E.const_int(node.extent)
                    if extent is None:
                        raise CodegenError(f"loop {node.loop_var.name} bound to {tag} has a symbolic extent {node.extent}")
                    launch.setdefault(tag, int(extent))
            elif isinstance(node, (E.BufferLoad, S.BufferStore)):
                used.add(node.buffer)

        walk(region, visit)
        name = f"{symbol}_kernel" if index == 0 else f"{symbol}_kernel_{index}"
        kernels.append(Kernel(name, region, launch, tuple(b for b in buffers if b in used)))
    return kernels
