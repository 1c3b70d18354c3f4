"""How many loops around a block RewriteParallelVectorizeUnroll fuses into a parallel loop and
into a vectorized loop: TVM's `AdjustParallelVectorize`, a pure function over the block's realize
and its loops, kept apart from the rewriting so that the numbers can be checked on their own.

TVM's rules to the letter, quirks included, because the post-processed module (and the trace's
instructions) must be the one TVM builds: see docs/architecture.md, "Search".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from msdb.identity_cache import KeyCache
from msdb.ir import expr as E
from msdb.ir import stmt as S
from msdb.ir.arith import simplify
from msdb.ir.arith.keys import shape_key
from msdb.ir.functor import substitute
from msdb.schedule.analysis import loop_iter_types

__all__ = ["NONE", "LoopPlan", "plan_loops", "max_fusible_loops", "index_stride", "index_strides", "int_extent", "is_single_stmt",
           "has_ann_or_binding"]

#: TVM's "-1": no limit was annotated, or no loop qualifies.
NONE = -1
#: TVM's INT32_MAX for "no buffer access limits vectorization".
_UNLIMITED = 2**31 - 1


@dataclass(frozen=True)
class LoopPlan:
    """The numbers of outer loops to fuse and parallelize and of inner loops to fuse and
    vectorize; `NONE` (-1) for none. Both equal to the number of loops means: fuse them all,
    split off `max_vectorize_extent` as the vectorized inner loop, parallelize the outer one."""

    num_parallel: int
    num_vectorize: int


def int_extent(loop: S.For) -> int | None:
    """The loop's extent when it is an integer immediate (TVM's `GetLoopIntExtent`: no folding)."""
    return loop.extent.value if isinstance(loop.extent, E.IntImm) else None


def is_single_stmt(stmt: S.Stmt) -> bool:
    """TVM's `IsSingleStmt`: anything but a sequence of several statements."""
    return not isinstance(stmt, S.SeqStmt) or len(stmt.seq) == 1


def has_ann_or_binding(loop: S.For) -> bool:
    """A loop that already carries an annotation or a thread binding is left alone."""
    return loop.kind == S.ForKind.THREAD_BINDING or bool(loop.annotations)


def _strides(expr: E.PrimExpr, scale: int, out: dict[E.Var, int]) -> None:
    """TVM's StrideExtractor for every variable at once: the stride each variable reached
    through a chain of `*` by constants and `+` from the root gets (the smallest when several
    chains reach it), multiplied by `scale`, into `out`."""
    if isinstance(expr, E.Var):
        known = out.get(expr)
        out[expr] = scale if known is None else min(known, scale)
    elif isinstance(expr, E.Mul):
        if isinstance(expr.a, E.IntImm):
            _strides(expr.b, scale * expr.a.value, out)
        elif isinstance(expr.b, E.IntImm):
            _strides(expr.a, scale * expr.b.value, out)
    elif isinstance(expr, E.Add):
        _strides(expr.a, scale, out)
        _strides(expr.b, scale, out)


def index_strides(index: E.PrimExpr) -> dict[E.Var, int]:
    """The stride of each variable in a buffer index as TVM's `StrideExtractor::Extract`
    reports it (a variable it finds no stride for is absent: stride 0)."""
    out: dict[E.Var, int] = {}
    _strides(index, 1, out)
    return out


def index_stride(index: E.PrimExpr, var: E.Var) -> int:
    """The stride of `var` in a buffer index (0 when none is found)."""
    return index_strides(index).get(var, 0)


#: Index strides by the shape of the index (`shape_key`), shared by every candidate of a
#: search: a design space's candidates keep their loop names and repeat their tile sizes, so
#: most indices were already simplified for an earlier candidate.
_STRIDES_BY_SHAPE: KeyCache[tuple[tuple[int, int], ...]] = KeyCache(1 << 16)


def _simplified_strides(index: E.PrimExpr) -> dict[E.Var, int]:
    """`index_strides` of the simplified index (TVM simplifies it with no ranges known)."""
    variables: list[E.Var] = []
    key = shape_key(index, variables)
    if key is None:
        return index_strides(simplify(index))

    def strides() -> tuple[tuple[int, int], ...]:
        place = {id(var): i for i, var in enumerate(variables)}
        return tuple((place[id(var)], stride) for var, stride in index_strides(simplify(index)).items())

    known = _STRIDES_BY_SHAPE.get(key, strides)
    return {variables[i]: stride for i, stride in known}


def _access_strides(access: S.BufferRegion, loops: Sequence[S.For],
                    binding: dict[E.Var, E.PrimExpr]) -> list[int] | None:
    """Per loop, how far one step of it moves in the flattened buffer (0: the access does not
    use it); None when a buffer dimension that must be crossed is not constant."""
    strides: list[int] = []
    indices = [_simplified_strides(substitute(rng.min, binding)) for rng in access.region]
    for loop in loops:
        stride = 0
        buffer_stride = 1
        for i in range(len(indices) - 1, -1, -1):
            coef = indices[i].get(loop.loop_var, 0)
            if coef != 0:
                stride = coef * buffer_stride
                break
            dim = access.buffer.shape[i]
            if not isinstance(dim, E.IntImm):
                return None
            buffer_stride *= dim.value
        strides.append(stride)
    return strides


def _fusible_in(strides: Sequence[int], loops: Sequence[S.For]) -> int:
    """How many innermost loops one access lets fuse into a contiguous run: unused loops are
    free, the first used loop must have stride 1 (unless only unused loops are inside it), and
    each next used loop must step over exactly the run inside it."""
    fusible = 0
    prev_used = -1
    for i in range(len(strides) - 1, -1, -1):
        if strides[i] == 0:
            fusible += 1
        elif prev_used == -1:
            if strides[i] != 1 and fusible != 0:
                break
            fusible += 1
            prev_used = i
        else:
            prev_extent = int_extent(loops[prev_used])
            if prev_extent is None or strides[i] != strides[prev_used] * prev_extent:
                break
            fusible += 1
            prev_used = i
    return fusible


def max_fusible_loops(realize: S.BlockRealize, loops: Sequence[S.For]) -> int:
    """The number of innermost loops that every read and write of the block lets fuse into
    one contiguous (vectorizable) run; 0 when some access cannot be analyzed."""
    block = realize.block
    binding = {iv.var: value for iv, value in zip(block.iter_vars, realize.iter_values)}
    result = _UNLIMITED
    for access in (*block.reads, *block.writes):
        strides = _access_strides(access, loops, binding)
        if strides is None:
            return 0
        result = min(result, _fusible_in(strides, loops))
    return result


def _num_rewritable(loops: Sequence[S.For], types: Sequence[S.IterType]) -> int:
    return sum(1 for loop, kind in zip(loops, types)
               if not has_ann_or_binding(loop) and kind == S.IterType.DATA_PAR and is_single_stmt(loop.body)
               and int_extent(loop) is not None)


def _num_parallel(loops: Sequence[S.For], types: Sequence[S.IterType], max_extent: int) -> int:
    count = 0
    product = 1
    for loop, kind in zip(loops, types):
        if kind != S.IterType.DATA_PAR or has_ann_or_binding(loop):
            break
        extent = int_extent(loop)
        if extent is None:
            break
        count += 1
        product *= extent
        if product > max_extent or not is_single_stmt(loop.body):
            break
    return NONE if product == 1 else count


def _num_vectorize(loops: Sequence[S.For], types: Sequence[S.IterType], max_extent: int, max_fusible: int) -> int:
    count = 0
    product = 1
    for loop, kind in zip(reversed(loops), reversed(types)):
        if kind != S.IterType.DATA_PAR or count >= max_fusible:
            break
        if has_ann_or_binding(loop) or not is_single_stmt(loop.body):
            break
        extent = int_extent(loop)
        if extent is None:
            break
        product *= extent
        if product > max_extent:
            break
        count += 1
    return NONE if product == 1 else count


def plan_loops(realize: S.BlockRealize, loops: Sequence[S.For], max_parallel_extent: int,
               max_vectorize_extent: int) -> LoopPlan:
    """TVM's `AdjustParallelVectorize` for one child block of the annotated root: `loops` are
    the block's loops, outermost first; a limit of `NONE` asks for nothing of that kind."""
    if max_parallel_extent == NONE and max_vectorize_extent == NONE:
        return LoopPlan(NONE, NONE)
    n_loops = len(loops)
    if n_loops == 0:
        return LoopPlan(NONE, NONE)
    types = loop_iter_types(loops)
    max_fusible = max_fusible_loops(realize, loops)
    num_parallel = NONE if max_parallel_extent == NONE else _num_parallel(loops, types, max_parallel_extent)
    num_vectorize = (NONE if max_vectorize_extent == NONE
                     else _num_vectorize(loops, types, max_vectorize_extent, max_fusible))
    if num_parallel != NONE and num_vectorize != NONE:
        if _num_rewritable(loops, types) == n_loops and max_fusible == n_loops:
            return LoopPlan(n_loops, n_loops)
        # TVM prefers vectorizing: the parallel loops give way to the vectorized ones
        num_parallel = min(num_parallel, n_loops - num_vectorize)
    return LoopPlan(num_parallel, num_vectorize)
