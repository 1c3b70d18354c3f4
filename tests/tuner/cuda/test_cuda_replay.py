"""msdb replays TVM 0.27's own CUDA design spaces and post-processed candidates (shipped in
tests/data/cuda_candidates by tests/tuner/cuda/test_cuda_replay_tvm.py): every trace replays on its
workload to the module TVM's replay printed, every post-processed candidate has each block
under blockIdx and threadIdx loops, every cache and set_scope has left its buffer in the scope
the trace asked for, and the scheduled modules round-trip through TVMScript."""

from __future__ import annotations

from functools import lru_cache

import pytest

from msdb.hashing import structural_equal
from msdb.ir import from_script, to_script
from msdb.ir import expr as E
from msdb.ir import stmt as S
from msdb.ir.function import IRModule
from msdb.schedule import Schedule, Trace
from msdb.schedule import tvm_json
from tests.tuner.cuda._candidates import DATA, DP4A_RECORDS, WORKLOADS, Shipped, load, shipped, tvm_module

SHIPPED = shipped()


@lru_cache(maxsize=None)
def _workload(name: str) -> IRModule:
    return from_script(load(name)["workload"])


@lru_cache(maxsize=None)
def _replayed(item_id: str) -> Schedule:
    item = next(s for s in SHIPPED if s.id == item_id)
    sch = Schedule(_workload(item.workload))
    Trace.from_json(item.trace).apply_to_schedule(sch, remove_postproc=False)
    return sch


def test_the_shipped_data_cover_every_workload_and_the_gpu_instructions() -> None:
    kinds = {inst[0] for item in SHIPPED for inst in item.trace[0]}
    assert {"SetScope", "Bind", "CacheRead", "CacheWrite", "DecomposeReduction", "EnterPostproc", "Blockize",
            "Tensorize"} <= kinds
    for name in WORKLOADS:
        data = load(name)
        assert data["target"]["kind"] == "cuda" and data["target"]["arch"] == "sm_90"
        assert data["design_spaces"] and data["candidates"]


@pytest.mark.parametrize("item", SHIPPED, ids=lambda s: s.id)
def test_msdb_replays_the_trace_to_the_module_tvm_gave(item: Shipped) -> None:
    sch = _replayed(item.id)
    assert structural_equal(sch.mod, tvm_module(item.tvm_script))
    # replay is deterministic and records the same trace
    assert sch.trace.as_json() == Trace.from_json(item.trace).as_json()


def _blocks_with_threads(stmt: S.Stmt, tags: tuple[str, ...], out: list[tuple[str, tuple[str, ...]]]) -> None:
    if isinstance(stmt, S.For):
        inner = tags + ((stmt.thread_binding.thread_tag,) if stmt.thread_binding is not None else ())
        _blocks_with_threads(stmt.body, inner, out)
    elif isinstance(stmt, S.SeqStmt):
        for child in stmt.seq:
            _blocks_with_threads(child, tags, out)
    elif isinstance(stmt, S.BlockRealize):
        out.append((stmt.block.name_hint, tags))
        _blocks_with_threads(stmt.block.body, tags, out)
        if stmt.block.init is not None:
            _blocks_with_threads(stmt.block.init, tags, out)
    elif isinstance(stmt, S.IfThenElse):
        _blocks_with_threads(stmt.then_case, tags, out)
        if stmt.else_case is not None:
            _blocks_with_threads(stmt.else_case, tags, out)


@pytest.mark.parametrize("item", [s for s in SHIPPED if s.role == "candidate"], ids=lambda s: s.id)
def test_every_block_of_a_candidate_runs_on_bound_threads(item: Shipped) -> None:
    found: list[tuple[str, tuple[str, ...]]] = []
    _blocks_with_threads(_replayed(item.id).mod.functions["main"].body, (), found)
    blocks = [(name, tags) for name, tags in found if name != "root"]
    assert blocks
    for name, tags in blocks:
        assert any(t.startswith("blockIdx.") for t in tags), f"{item.id}: block {name!r} is not under blockIdx"
        assert any(t.startswith("threadIdx.") for t in tags), f"{item.id}: block {name!r} is not under threadIdx"


@pytest.mark.parametrize("item", SHIPPED, ids=lambda s: s.id)
def test_every_buffer_is_in_the_scope_the_trace_asked_for(item: Shipped) -> None:
    sch = _replayed(item.id)
    checked = 0
    for inst in sch.trace.insts:
        if inst.kind == "CacheRead":  # the new block writes the cache
            block, index, scope = inst.outputs[0], 0, inst.attrs[1]
        elif inst.kind == "CacheWrite":  # the new block copies the cache back (the block may be cached again)
            copy = inst.outputs[0]
            if sch.has_block(copy):
                assert any(r.buffer.scope == inst.attrs[1] for r in sch.get(copy).reads)
                checked += 1
            continue
        elif inst.kind == "SetScope":
            block, index, scope = inst.inputs[0], inst.attrs[0], inst.attrs[1]
        else:
            continue
        if not sch.has_block(block):
            continue  # inlined later
        assert sch.get(block).writes[index].buffer.scope == scope
        checked += 1
    asked = sum(inst[0] in ("CacheRead", "CacheWrite", "SetScope") for inst in item.trace[0])
    assert checked >= 1 or asked == 0


@pytest.mark.parametrize("item", SHIPPED, ids=lambda s: s.id)
def test_the_scheduled_module_round_trips_through_tvmscript(item: Shipped) -> None:
    mod = _replayed(item.id).mod
    assert structural_equal(from_script(to_script(mod)), mod)


def test_the_dp4a_fixture_records_replay_fully_to_tvms_module() -> None:
    """The older TVM's CUDA log (GetBlock, Blockize, Tensorize "dp4a", cooperative fetch,
    DecomposeReduction of the blockized reduction) replays in msdb on its workload (TVM's dp4a
    dense, shipped with TVM's replay in dp4a_fixture.json) to the module TVM 0.27 gives."""
    import json

    data = json.loads((DATA / "dp4a_fixture.json").read_text())
    workload = from_script(data["workload"])
    lines = DP4A_RECORDS.read_text().splitlines()
    assert len(lines) == len(data["replayed"]) == 2
    for line, tvm_print in zip(lines, data["replayed"]):
        trace = Trace.from_json(tvm_json.loads(line)[1][0])
        assert {"Blockize", "Tensorize"} <= {inst.kind for inst in trace.insts}
        sch = Schedule(workload)
        trace.apply_to_schedule(sch, remove_postproc=False)
        assert structural_equal(sch.mod, tvm_module(tvm_print))
        update = sch.get(sch.get_block("compute_o_update"))
        assert [[E.const_int(d) for d in m.buffer.shape] for m in update.match_buffers] == [[4], [4], [1]]
        assert [m.source.buffer.scope for m in update.match_buffers] == ["shared", "shared", "local"]


@pytest.mark.slow
@pytest.mark.parametrize("item", [s for s in SHIPPED if s.workload == "softmax"], ids=lambda s: s.id)
def test_the_softmax_schedules_compute_softmax(item: Shipped) -> None:
    """msdb's interpreter runs TVM's softmax schedules (cross-thread reductions into shared
    memory, thread-bound loops run in turn) on the shipped 256x1024 shape; the matmul and conv2d
    ones are too large for it."""
    import numpy as np

    from msdb.ir import interpret

    a = np.random.default_rng(15).standard_normal((256, 1024)).astype("float32")
    out = np.zeros_like(a)
    interpret(_replayed(item.id).mod, a, out)
    e = np.exp(a - a.max(axis=1, keepdims=True))
    np.testing.assert_allclose(out, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-6)
