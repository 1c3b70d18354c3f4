"""Loads that read the same indices share their index forms (`store_walk._shared_forms`, a
Winograd transform's repeated loads); what the features then compute must be what separate
forms give. Two buffers read at the same indices where one is allocated under a loop (a
residual add whose intermediate is computed at a tile loop) once shared their composed
indices, and the allocation's compaction stripped the other buffer's outer terms."""

from __future__ import annotations

import numpy as np
import pytest

from msdb.ir import te
from msdb.ir.function import IRModule
from msdb.schedule import Schedule
from msdb.tuner.features import store_walk
from msdb.tuner.features.per_store import PerStoreFeature


def _residual_add_under_a_tile_loop() -> IRModule:
    n, m = 16, 32
    a = te.placeholder((n, m), "float32", name="A")
    b = te.placeholder((n, m), "float32", name="B")
    t = te.compute((n, m), lambda i, j: a[i, j] * 2.0, name="T")
    out = te.compute((n, m), lambda i, j: t[i, j] + b[i, j], name="O")
    sch = Schedule(IRModule.from_func(te.create_prim_func([a, b, out])))
    i, _ = sch.get_loops(sch.get_block("O"))
    sch.compute_at(sch.get_block("T"), i)
    return sch.mod


def _clear() -> None:
    for cache in (store_walk._INFO_CACHE, store_walk._LOAD_FORMS, store_walk._DECIDED_INFO, store_walk._VALUE_VARS,
                  store_walk._FORMS_BY_INDICES):
        cache.clear()


def test_buffers_read_at_the_same_indices_keep_their_own_features(monkeypatch: pytest.MonkeyPatch) -> None:
    mod = _residual_add_under_a_tile_loop()
    _clear()
    shared = PerStoreFeature().extract_mod(mod)
    _clear()
    monkeypatch.setattr(store_walk, "_shared_forms", store_walk._forms)  # every load its own forms
    separate = PerStoreFeature().extract_mod(mod)
    _clear()
    assert shared.shape == separate.shape
    assert np.array_equal(shared, separate)
