"""Workload: hashes computed lazily and once, lazy modules. (Its TVM line form and payload are
the grammar's: tests/interop/test_grammar.py.)"""

from __future__ import annotations

import msdb.hashing
from msdb.ir import zoo
from msdb.records import Workload


def test_hashes_are_computed_lazily_and_once(monkeypatch):
    mod = zoo.build("matmul_relu", 8, 8, 8)
    calls = []
    real = msdb.hashing.structural_hash
    monkeypatch.setattr(msdb.hashing, "structural_hash", lambda m, mode="structural": calls.append(mode) or real(m, mode))
    w = Workload(mod)
    assert calls == []
    assert w.hash("anchor-block") == real(mod, "anchor-block")
    assert w.hash("ignore-ndarray") == w.hash("ignore-tensor") == real(mod, "ignore-tensor")
    assert w.shash == w.shash == Workload(mod).shash  # another token for the same module object shares the hashes
    assert sorted(calls) == ["anchor-block", "ignore-tensor", "structural"]


def test_a_stored_workload_decodes_its_module_only_when_asked():
    loads = []
    mod = zoo.build("matmul", 8, 8, 8)
    w = Workload(hashes={"structural": "0" * 16}, loader=lambda: loads.append(1) or mod)
    assert w.shash == "0" * 16 and not w.is_loaded and loads == []
    assert w.mod is mod and w.mod is mod and loads == [1]


def test_equality_is_hash_then_full_comparison():
    a, b = Workload(zoo.build("matmul", 8, 8, 8)), Workload(zoo.build("matmul", 8, 8, 8))
    relu = Workload(zoo.build("matmul_relu", 8, 8, 8))
    assert a.equal(b) and not a.equal(relu)
    assert a.equal(relu, "anchor-block")
