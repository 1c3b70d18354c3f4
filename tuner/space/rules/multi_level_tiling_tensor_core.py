"""`MultiLevelTilingTensorCore` (TVM's rule with its wmma intrinsic groups, as
`ScheduleRule::DefaultCUDATensorCore` configures it; docs/architecture.md, "Tuner"): the design
space of a matmul- or conv-like block that tensor cores can compute.

For each intrinsic group whose compute intrinsic the block matches (`space.auto_tensorize`:
same computation up to a layout, e.g. fp16 inputs accumulated in fp32), one design space:
1. the block's output and both inputs go through `reindex` buffers indexed by its iter vars,
   laid out (`transform_layout`) and the block re-indexed (`transform_block_layout`) by the
   proposed mapping (a conv becomes an (n*h*w) x co x (rh*rw*rc) matmul), its loops tiled by the
   intrinsic's 16x16x16 and the tile blockized and annotated for RewriteTensorize (and the
   reduction init for its fill intrinsic), warp execution on;
2. the outer loops tiled "SSSRRSRS" (tile levels bound to blockIdx.y, blockIdx.x, threadIdx.y;
   only the two innermost spatial loops are tiled, outer ones, a batch, join blockIdx.y);
3. the accumulator laid out by warp and fragment, written through a "shared.dyn" cache at the
   blockIdx.x level and a "wmma.accumulator" cache stored by the store intrinsic;
4. both inputs read through "shared.dyn" caches (cooperative fetching, rows padded by
   `storage_align`) and "wmma.matrix_a"/"wmma.matrix_b" caches loaded by the load intrinsics.
A block no group matches is left to the next rules (the CUDA tiling), and so is one whose
reindexing or layout a primitive refuses (TVM would fail the whole design space); the description of each
step is TVM's multi_level_tiling_tensor_core.cc, and the instructions are TVM's in TVM's order,
index maps included byte for byte (`msdb.schedule.index_map_json`), so that TVM replays the traces msdb
finds.

Not here: TVM's second tensor-core rule, the `mma_sync_m16n8k8` groups with software pipelining
(msdb registers no mma intrinsics). It never changes a design space TVM gives: a block it could
match is matched by a wmma group first, and a tiled block is left alone by every later rule.
Nor TVM's padding of loops the 16x16x16 tile does not divide (PadEinsum): such a block is left
to the CUDA tiling.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from msdb.errors import ScheduleError
from msdb.ir import expr as E
from msdb.ir.functor import free_vars
from msdb.schedule import tensor_intrin
from msdb.schedule.index_map_json import encode_index_map
from msdb.schedule.instruction import IndexMapInput
from msdb.schedule.rv import RV, BlockRV, ExprRV, LoopRV
from msdb.schedule.schedule import Schedule
from msdb.tuner.space import analysis as SA
from msdb.tuner.space.auto_tensorize import (AutoTensorizeMapping, auto_tensorize_mapping, desc_block,
                                             tile_with_tensor_intrin)
from msdb.tuner.space.postprocs.rewrite_reduction_block import AUTO_TENSORIZE
from msdb.tuner.space.rules.multi_level_tiling import ReuseConfig, _State
from msdb.tuner.space.rules.multi_level_tiling_gpu import MultiLevelTilingGPU

logger = logging.getLogger(__name__)

__all__ = ["MultiLevelTilingTensorCore", "TensorCoreIntrinGroup", "WMMA_INTRIN_GROUPS", "AUTO_TENSORIZE",
           "AUTO_TENSORIZE_INIT", "WARP_EXECUTION"]

AUTO_TENSORIZE_INIT = "meta_schedule.auto_tensorize_init"
WARP_EXECUTION = "warp_execution"


@dataclass(frozen=True)
class TensorCoreIntrinGroup:
    """The five intrinsics of one tensor-core computation, by TVM's names."""

    init: str
    load_a: str
    load_b: str
    compute: str
    store: str


def _wmma_group(acc: str, ins: str, trans: bool) -> TensorCoreIntrinGroup:
    shape = "16x16x16"
    b_suffix = "_trans" if trans else ""
    return TensorCoreIntrinGroup(
        init=f"wmma_fill_{shape}_{acc}", load_a=f"wmma_load_{shape}_{ins}_a_shared_dyn",
        load_b=f"wmma_load_{shape}_{ins}_b{b_suffix}_shared_dyn",
        compute=f"wmma_sync_{shape}_{ins}{ins}{acc}{b_suffix}", store=f"wmma_store_{shape}_{acc}_shared_dyn")


#: TVM's wmma groups of DefaultCUDATensorCore, in its order: f32 += f16 * f16, f16 += f16 * f16,
#: s32 += s8 * s8, each with B as is and transposed; every load and store through "shared.dyn".
WMMA_INTRIN_GROUPS: tuple[TensorCoreIntrinGroup, ...] = tuple(
    _wmma_group(acc, ins, trans) for acc, ins in (("f32", "f16"), ("f16", "f16"), ("s32", "s8"))
    for trans in (False, True))


@dataclass
class _TensorCoreState(_State):
    """A design space of one intrinsic group: the mapping and the three reindex blocks."""

    group: TensorCoreIntrinGroup = field(default=WMMA_INTRIN_GROUPS[0])
    mapping: AutoTensorizeMapping | None = None
    reindex_a: BlockRV | None = None
    reindex_b: BlockRV | None = None
    reindex_store: BlockRV | None = None


class MultiLevelTilingTensorCore(MultiLevelTilingGPU):
    """Tensorize with one of `intrin_groups` and tile around the tensor-core tile (see the
    module docstring)."""

    def __init__(self, intrin_groups: tuple[TensorCoreIntrinGroup, ...] = WMMA_INTRIN_GROUPS,
                 structure: str = "SSSRRSRS", tile_binds: tuple[str, ...] = ("blockIdx.y", "blockIdx.x", "threadIdx.y"),
                 max_innermost_factor: int = 4, vector_load_lens: tuple[int, ...] = (1, 2, 3, 4, 8, 16),
                 reuse_read: ReuseConfig = ReuseConfig("must", (4,), "shared.dyn"),
                 reuse_write: ReuseConfig = ReuseConfig("must", (2,), "shared.dyn")) -> None:
        super().__init__(structure, tile_binds=tile_binds, max_innermost_factor=max_innermost_factor,
                         vector_load_lens=vector_load_lens, reuse_read=reuse_read, reuse_write=reuse_write)
        if "threadIdx.x" in self.tile_binds:
            raise ValueError("MultiLevelTilingTensorCore: cannot bind a tile level to threadIdx.x (a warp computes "
                             "each tensor-core tile); use threadIdx.y")
        if "threadIdx.y" not in self.tile_binds:
            raise ValueError(f"MultiLevelTilingTensorCore: tile_binds {self.tile_binds} must bind a level to "
                             "threadIdx.y (the warp id)")
        if reuse_write.req != "must" or not reuse_write.scope.startswith("shared"):
            raise ValueError("MultiLevelTilingTensorCore: the wmma groups need reuse_write 'must' in shared memory, "
                             f"got {reuse_write}")
        if reuse_read.req != "must" or len(self.r_indices) < 2:
            raise ValueError("MultiLevelTilingTensorCore: needs reuse_read 'must' and at least two reduction levels")
        for group in intrin_groups:
            for name in (group.init, group.load_a, group.load_b, group.compute, group.store):
                tensor_intrin.get(name)  # ScheduleError naming the registered ones
        self.intrin_groups = tuple(intrin_groups)

    def apply(self, sch: Schedule, block: BlockRV) -> list[Schedule]:
        if SA.is_root(sch, block) or not SA.needs_multi_level_tiling(sch, SA.block_of(sch, block)):
            return [sch]
        matched = []
        for group in self.intrin_groups:
            mapping = auto_tensorize_mapping(sch, block, tensor_intrin.get(group.compute).desc)
            if mapping is not None:
                matched.append((group, mapping))
        # TVM keeps the matches in an unordered_map keyed by group index; at most two groups
        # match a block (B as is and transposed), and TVM's order is then the groups' order
        states: list[_State] = []
        for group, mapping in matched:
            copy = sch.copy()
            copy.annotate(block, SA.TILING_STRUCTURE, self.structure)
            states.append(_TensorCoreState(copy, block, group=group, mapping=mapping))
        for sub_rule in (self._transform_for_tensorization, self._tile_tensor_core, self._transform_output_layout,
                         self._add_write_reuse, self._add_write_reuse_tensor_core, self._add_read_reuse,
                         self._add_read_reuse_tensor_core):
            states = [out for state in states for out in sub_rule(state)]
        return [state.sch for state in states] or [sch]

    # ------------------------------------------------------------------ step 1: tensorize the block
    def _transform_for_tensorization(self, state: _State) -> list[_State]:
        """Reindex, lay out and tile the block by the compute intrinsic, then blockize it and
        annotate the outer block (TVM's TransformForTensorization)."""
        state = _tc(state)
        try:
            loop = self._transform_with_tensor_intrin(state)
        except ScheduleError as exc:  # TVM would abort the design space; msdb drops this group
            logger.debug("MultiLevelTilingTensorCore: %s: %s", state.group.compute, exc)
            return []
        if loop is None:
            return []
        sch = state.sch
        state.block = sch.blockize(loop)
        sch.annotate(state.block, AUTO_TENSORIZE, state.group.compute)
        sch.annotate(state.block, AUTO_TENSORIZE_INIT, state.group.init)
        sch.annotate(state.block, WARP_EXECUTION, 1)
        return [state]

    def _transform_with_tensor_intrin(self, state: _TensorCoreState) -> LoopRV | None:
        sch, mapping = state.sch, state.mapping
        assert mapping is not None
        before = SA.block_of(sch, state.block)
        if len(before.reads) != 2 or len(before.writes) != 1:
            return None  # only matmul-like computations
        state.reindex_store = sch.reindex(state.block, ("write", 0))
        state.reindex_a = sch.reindex(state.block, ("read", 0))
        state.reindex_b = sch.reindex(state.block, ("read", 1))
        to_param = {iv.var: param for iv, param in zip(mapping.lhs_iters, mapping.initial)}
        offset = len(mapping.final) - len(mapping.rhs_iters)
        unmapped = set(mapping.final[:offset])
        rhs_to_final = {iv.var: expr for iv, expr in zip(mapping.rhs_iters, mapping.final[offset:])}
        sub_maps: dict[E.Buffer, tuple[list[E.Var], list[E.PrimExpr]]] = {}

        def transform_buffer(kind: str, index: int) -> None:
            regions = before.reads if kind == "read" else before.writes
            buffer = regions[index].buffer
            if buffer in sub_maps:
                return
            now = SA.block_of(sch, state.block)
            region = (now.reads if kind == "read" else now.writes)[index].region
            src: list[E.Var] = []
            tgt: list[E.PrimExpr] = []
            for rng in region:
                if not isinstance(rng.min, E.Var) or E.const_int(rng.extent) != 1:
                    raise ScheduleError(f"MultiLevelTilingTensorCore: reindexed access of {buffer.name} is not by "
                                        "the block's iter vars")
                param = to_param[rng.min]
                src.append(param)
                if param in unmapped:
                    tgt.append(param)
            for var in mapping.rhs_indices[mapping.buffer_map[buffer]]:
                assert isinstance(var, E.Var)
                tgt.append(rhs_to_final[var])
            sub_maps[buffer] = (src, tgt)
            sch.transform_layout(state.block, (kind, index), IndexMapInput(encode_index_map(src, tgt), {}),
                                 pad_value=None, assume_injective_transform=True)

        for i in range(len(before.reads)):
            transform_buffer("read", i)
        for i in range(len(before.writes)):
            transform_buffer("write", i)
        for reindex, kind in ((state.reindex_store, "write"), (state.reindex_a, "read"), (state.reindex_b, "read")):
            assert reindex is not None
            node = SA.block_of(sch, reindex)
            buffer = (node.writes if kind == "write" else node.reads)[0].buffer
            sch.transform_block_layout(reindex, encode_index_map(*sub_maps[buffer], pretty=True))
        sch.transform_block_layout(state.block, encode_index_map(mapping.initial, mapping.final, pretty=True))
        return tile_with_tensor_intrin(sch, state.block, state.group.compute)

    # ------------------------------------------------------------------ step 2: tile around it
    def _tile_tensor_core(self, state: _State) -> list[_State]:
        """TVM's TileLoopNest(state, 2): only the two innermost spatial loops are tiled."""
        return self._tile_and_bind(state, inner_spatial=2)

    # ------------------------------------------------------------------ step 3: the accumulator
    def _transform_output_layout(self, state: _State) -> list[_State]:
        """Lay the output out as [..., warp_m, warp_n, frag_m, frag_n, elem_m, elem_n] (TVM's
        TransformIntermediateOutputLayout): the number of fragments per warp are products of
        the sampled tile factors below the threadIdx.y level, written into the map as the
        sampled variables."""
        state = _tc(state)
        sch = state.sch
        fill = desc_block(tensor_intrin.get(state.group.init).desc)[1]
        # two separate constants, as TVM takes them from the fill description's two loops
        frag_m = E.IntImm("int32", int(E.const_int(fill[0].extent) or 0))
        frag_n = E.IntImm("int32", int(E.const_int(fill[1].extent) or 0))
        warp_level = self.tile_binds.index("threadIdx.y")
        placeholders: dict[str, RV] = {}

        def var_of(rv: ExprRV) -> E.Var:
            name = f"__sampled{len(placeholders)}"
            placeholders[name] = rv
            return E.Var(name, "int32")

        def inner_product(position: int) -> E.PrimExpr:
            factors = [state.factors[self.s_indices[i]][position] for i in range(warp_level + 1, len(self.s_indices))]
            if not factors:
                raise ScheduleError("MultiLevelTilingTensorCore: no tile level below the warp level")
            result: E.PrimExpr = var_of(factors[0])
            for factor in factors[1:]:
                result = E.Mul(result, var_of(factor))
            return result

        warp_frags_m = inner_product(-2)
        warp_frags_n = inner_product(-1)
        ndim = len(SA.block_of(sch, state.block).writes[0].buffer.shape)
        if ndim < 2:
            raise ScheduleError("MultiLevelTilingTensorCore: the output has fewer than two dimensions")
        params = [E.Var(f"i{i}", "int32") for i in range(ndim)]
        m, n = params[ndim - 2], params[ndim - 1]
        accum_m = E.FloorMod(m, frag_m)
        accum_n = E.FloorMod(n, frag_n)
        outer_m = E.FloorDiv(m, frag_m)
        outer_n = E.FloorDiv(n, frag_n)
        final: list[E.PrimExpr] = list(params[:ndim - 2]) + [
            E.FloorDiv(outer_m, warp_frags_m), E.FloorDiv(outer_n, warp_frags_n),
            E.FloorMod(outer_m, warp_frags_m), E.FloorMod(outer_n, warp_frags_n), accum_m, accum_n]
        text = encode_index_map(params, final, sampled=_placeholders_in(final, placeholders))
        sch.transform_layout(state.block, ("write", 0), IndexMapInput(text, placeholders), pad_value=None,
                             assume_injective_transform=True)
        return [state]

    def _add_write_reuse_tensor_core(self, state: _State) -> list[_State]:
        """The accumulator cache (TVM's AddWriteReuseTensorCore): computed per row of fragments
        inside the shared-memory cache's loops, bound to the warp, stored by the store
        intrinsic; the shared-memory cache's copy loops fused for cooperative fetching."""
        state = _tc(state)
        sch = state.sch
        shared = state.write_reuse[0]
        accumulator = sch.cache_write(state.block, 0, "wmma.accumulator")
        loops = sch.get_loops(shared)
        if len(loops) <= 6:
            raise ScheduleError("MultiLevelTilingTensorCore: the output cache has too few loops")
        i0, j0, i1, j1 = loops[-6:-2]
        sch.reorder(i1, i0, j0, j1)
        sch.compute_at(accumulator, i1, preserve_unit_loops=True)
        loops = sch.get_loops(accumulator)
        sch.bind(sch.fuse(loops[-6], loops[-5]), "threadIdx.y")
        assert state.reindex_store is not None
        sch.reverse_compute_inline(state.reindex_store)
        loops = sch.get_loops(accumulator)
        store = sch.blockize(loops[-2])
        sch.annotate(store, AUTO_TENSORIZE, state.group.store)
        loops = sch.get_loops(shared)
        sch.fuse(*loops[-5:])  # the shared-memory source is always 2-D
        self._annotate_cooperative_fetch(sch, shared)
        return [state]

    # ------------------------------------------------------------------ step 4: the inputs
    def _add_read_reuse_tensor_core(self, state: _State) -> list[_State]:
        """The fragment caches of both inputs, loaded by the load intrinsics inside the inner
        reduction tile; the reindex copies inlined into the shared-memory caches, whose rows
        are padded against bank conflicts (TVM's AddReadReuseTensorCore)."""
        state = _tc(state)
        sch = state.sch
        r_loop = state.tiles[self.r_indices[1]][-1]
        for index, scope, intrin in ((0, "wmma.matrix_a", state.group.load_a), (1, "wmma.matrix_b", state.group.load_b)):
            cache = sch.cache_read(state.block, index, scope)
            sch.compute_at(cache, r_loop, preserve_unit_loops=True)
            loop = tile_with_tensor_intrin(sch, cache, intrin)
            if loop is None:
                raise ScheduleError(f"MultiLevelTilingTensorCore: the {scope} cache does not fit {intrin}")
            sch.annotate(sch.blockize(loop), AUTO_TENSORIZE, intrin)
        for index in range(2):
            cache = state.read_reuse[index]
            sch.compute_inline(sch.get_producers(cache)[0])
            dtype = SA.block_of(sch, cache).writes[0].buffer.dtype
            if dtype == "float16":
                sch.storage_align(cache, 0, -2, 32, 8)
            elif dtype == "int8":
                sch.storage_align(cache, 0, -2, 32, 16)
        return [state]


def _tc(state: _State) -> _TensorCoreState:
    assert isinstance(state, _TensorCoreState)
    return state


def _placeholders_in(final: list[E.PrimExpr], placeholders: dict[str, RV]) -> list[E.Var]:
    """The variable objects of `final` that stand for sampled variables."""
    found: dict[str, E.Var] = {}
    for expr in final:
        for var in free_vars(expr):
            if var.name in placeholders:
                found[var.name] = var
    return list(found.values())
