"""Block primitives in chains, as real schedules use them, checked two ways:

- against real TVM 0.27: every scenario of tests/data/schedule/block_primitives/scenarios.py was
  run by TVM (generate.py) and the TVMScript before/after stored; msdb parses the "before"
  module, applies the same calls and must give a structurally equal module (same loops, same
  bindings, same predicates, same regions), or fail where TVM fails;
- against the interpreter: the scheduled module computes what the original computes
  (MetaSchedule's multi-level tiling chain on matmul and batch matmul, the padding block moved
  into a convolution's tile loop), on small shapes.
"""

from __future__ import annotations

import importlib.util
import json
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from msdb.errors import ScheduleError
from msdb.hashing import structural_equal, structural_hash
from msdb.ir import IRModule, from_script, interpret, te
from msdb.schedule import Schedule

DATA = Path(__file__).resolve().parents[1] / "data" / "schedule" / "block_primitives"


@lru_cache(maxsize=None)
def _scenarios() -> Any:
    spec = importlib.util.spec_from_file_location("msdb_test_block_scenarios", DATA / "scenarios.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


@lru_cache(maxsize=None)
def _expected() -> dict[str, Any]:
    return json.loads((DATA / "expected.json").read_text())


def _run(mod: IRModule, seed: int = 0) -> list[np.ndarray]:
    """Interpret `mod` on seeded random inputs; every buffer argument comes back."""
    func = mod.main
    rng = np.random.default_rng(seed)
    arrays = []
    for buf in func.buffers:
        shape = tuple(int(d.value) for d in buf.shape)
        arrays.append((rng.random(shape, dtype=np.float64) - 0.5).astype(buf.dtype))
    interpret(mod, *arrays)
    return arrays


def _assert_same_results(before: IRModule, after: IRModule) -> None:
    for seed in (0, 1):
        expected, got = _run(before, seed), _run(after, seed)
        for e, g in zip(expected, got):
            np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5)


NAMES = sorted(_expected())


def test_every_scenario_has_tvm_reference_data() -> None:
    assert sorted(_scenarios().SCENARIOS) == NAMES
    assert sum(name.startswith("err_") for name in NAMES) >= 10


@pytest.mark.parametrize("name", [n for n in NAMES if not n.startswith("err_")])
def test_scenario_gives_the_module_tvm_gives(name: str) -> None:
    entry = _expected()[name]
    before = from_script(entry["before"])
    sch = Schedule(before)
    _scenarios().SCENARIOS[name][1](sch)
    expected = from_script(entry["after"])
    assert structural_equal(sch.mod, expected), f"{name}: msdb's schedule differs from TVM's"
    assert structural_hash(sch.mod) == structural_hash(expected)
    _assert_same_results(before, sch.mod)


@pytest.mark.parametrize("name", [n for n in NAMES if n.startswith("err_")])
def test_illegal_scenario_fails_like_tvm_and_changes_nothing(name: str) -> None:
    entry = _expected()[name]
    assert "error" in entry
    before = from_script(entry["before"])
    sch = Schedule(before)
    with pytest.raises(ScheduleError) as info:
        _scenarios().SCENARIOS[name][1](sch)
    assert str(info.value)
    # the failing primitive left the module as the successful calls before it made it
    sch2 = Schedule(before)
    with pytest.raises(ScheduleError):
        _scenarios().SCENARIOS[name][1](sch2)
    assert structural_equal(sch.mod, sch2.mod)
    assert len(sch.trace.insts) == len(sch2.trace.insts)


# ---------------------------------------------------------------- MetaSchedule-like chains


def _matmul(n: int) -> IRModule:
    a = te.placeholder((n, n), name="A")
    b = te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), name="k")
    c = te.compute((n, n), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    return IRModule.from_func(te.create_prim_func([a, b, c]))


def _batch_matmul(batch: int, n: int) -> IRModule:
    x = te.placeholder((batch, n, n), name="X")
    y = te.placeholder((batch, n, n), name="Y")
    k = te.reduce_axis((0, n), name="k")
    z = te.compute((batch, n, n), lambda bb, i, j: te.sum(x[bb, i, k] * y[bb, k, j], axis=k), name="Z")
    return IRModule.from_func(te.create_prim_func([x, y, z]))


def _ssrsrs(sch: Schedule, block_name: str, spatial: list[list[int]], reduce: list[list[int]]) -> Any:
    """MetaSchedule's CPU multi-level tiling: spatial loops split in 4, reduction loops in 2,
    order S0 S1 R0 S2 R1 S3. Returns (block, tiles per level)."""
    block = sch.get_block(block_name)
    loops = sch.get_loops(block)
    s_tiles = [sch.split(loop, f) for loop, f in zip(loops[:len(spatial)], spatial)]
    r_tiles = [sch.split(loop, f) for loop, f in zip(loops[len(spatial):], reduce)]
    order = ([t[0] for t in s_tiles] + [t[1] for t in s_tiles] + [t[0] for t in r_tiles]
             + [t[2] for t in s_tiles] + [t[1] for t in r_tiles] + [t[3] for t in s_tiles])
    sch.reorder(*order)
    return block, s_tiles


@pytest.mark.parametrize("factors", [
    ([[1, 2, 2, 4], [2, 1, 4, 2]], [[4, 4]]),
    ([[2, 2, 1, 4], [1, 4, 2, 2]], [[2, 8]]),
    ([[1, 1, 16, 1], [16, 1, 1, 1]], [[16, 1]]),
])
def test_matmul_multi_level_tiling_with_write_cache(factors: tuple[list[list[int]], list[list[int]]]) -> None:
    mod = _matmul(16)
    sch = Schedule(mod, seed=0)
    spatial, reduce = factors
    block, s_tiles = _ssrsrs(sch, "C", spatial, reduce)
    cache = sch.cache_write(block, 0, "global")
    # write cache at the 2nd spatial tile level, keeping unit loops (TVM's MultiLevelTiling)
    sch.reverse_compute_at(cache, s_tiles[-1][1], preserve_unit_loops=True)
    loops = sch.get_loops(block)
    fused = sch.fuse(loops[0], loops[1], loops[2])
    sch.parallel(fused)
    inner = sch.fuse(sch.get_loops(block)[-1])
    sch.vectorize(inner)
    init = sch.decompose_reduction(block, sch.get_loops(block)[2])

    kinds = [i.kind for i in sch.trace.insts]
    assert kinds[kinds.index("CacheWrite"):] == ["CacheWrite", "ReverseComputeAt", "GetLoops", "Fuse", "Parallel",
                                                 "GetLoops", "Fuse", "Vectorize", "GetLoops", "DecomposeReduction"]
    assert sch.get(cache).name_hint == "C_global"
    assert sch.get(init).name_hint == "C_init"
    assert sch.get(block).name_hint == "C_update"
    # the copy block covers exactly one tile: the product of the spatial factors below level 2
    cache_loops = [sch.get(l) for l in sch.get_loops(cache)]
    tile = [f[2] * f[3] for f in spatial]
    assert [int(l.extent.value) for l in cache_loops[-2:]] == tile
    _assert_same_results(mod, sch.mod)


def test_batch_matmul_chain_replays_to_the_same_module() -> None:
    mod = _batch_matmul(2, 8)
    sch = Schedule(mod, seed=0)
    block, s_tiles = _ssrsrs(sch, "Z", [[1, 1, 2, 1], [1, 2, 2, 2], [2, 2, 1, 2]], [[2, 4]])
    cache = sch.cache_write(block, 0, "global")
    sch.reverse_compute_at(cache, s_tiles[-1][1], preserve_unit_loops=True)
    sch.decompose_reduction(block, sch.get_loops(block)[6])  # k_0, the first reduction loop
    _assert_same_results(mod, sch.mod)
    replayed = Schedule(mod)
    sch.trace.apply_to_schedule(replayed, remove_postproc=False)
    assert structural_equal(replayed.mod, sch.mod)


def test_conv_padding_block_computed_at_a_tile_loop() -> None:
    from msdb.ir import zoo

    mod = zoo.build("C2D", 1, 8, 8, 3, 4, 3, 2, 1)
    sch = Schedule(mod, seed=0)
    conv, s_tiles = _ssrsrs(sch, "conv2d_nhwc",
                            [[1, 1, 1, 1], [2, 1, 2, 1], [2, 1, 1, 2], [1, 2, 1, 2]], [[3, 1], [1, 3], [3, 1]])
    pad = sch.get_block("PadInput")
    location = sch.sample_compute_location(pad, decision=2)  # the w tile loop, as TVM samples it
    sch.compute_at(pad, location, preserve_unit_loops=True)
    pad_loops = [sch.get(l) for l in sch.get_loops(pad)]
    # under (n0, h0, w0): a 1 x 5 x 5 x 3 window of the padded input (2x2 outputs, stride 2, 3x3 kernel)
    assert [int(l.extent.value) for l in pad_loops] == [1, 2, 2, 1, 5, 5, 3]
    assert sch.trace.insts[-2].kind == "ComputeAt"
    assert sch.trace.insts[-2].attrs == (True, -1)
    _assert_same_results(mod, sch.mod)


def test_conv_padding_inlined_from_sampled_location() -> None:
    from msdb.ir import zoo

    mod = zoo.build("C2D", 1, 6, 6, 2, 2, 3, 1, 1)
    sch = Schedule(mod, seed=0)
    pad = sch.get_block("PadInput")
    location = sch.sample_compute_location(pad, decision=-2)
    sch.compute_at(pad, location)
    assert [b for b in sch.mod.main.body.block.alloc_buffers] == []
    _assert_same_results(mod, sch.mod)


# ---------------------------------------------------------------- property: any tiling, any level


def _tiles(extent: int, parts: int) -> st.SearchStrategy[list[int]]:
    """Ordered factorizations of `extent` into `parts` factors."""
    divisors = [d for d in range(1, extent + 1) if extent % d == 0]
    if parts == 1:
        return st.just([extent])
    return st.sampled_from(divisors).flatmap(
        lambda d: _tiles(extent // d, parts - 1).map(lambda rest: [d] + rest))


@settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(i=_tiles(8, 4), j=_tiles(8, 4), k=_tiles(8, 2), level=st.sampled_from([0, 1]), index=st.sampled_from([-1, -2]),
       preserve=st.booleans())
def test_any_tiling_with_write_cache_at_any_level_keeps_the_result(i: list[int], j: list[int], k: list[int], level: int,
                                                                    index: int, preserve: bool) -> None:
    mod = _matmul(8)
    sch = Schedule(mod, seed=0)
    block, s_tiles = _ssrsrs(sch, "C", [i, j], [k])
    cache = sch.cache_write(block, 0, "global")
    sch.reverse_compute_at(cache, s_tiles[-1][level], preserve_unit_loops=preserve, index=index)
    sch.decompose_reduction(block, sch.get_loops(block)[4])  # the first reduction loop
    _assert_same_results(mod, sch.mod)
