"""Workload: hashes computed lazily and once, lazy modules, TVM's line form and payloads."""

from __future__ import annotations


import pytest

import msdb.hashing
from msdb.hashing import structural_equal, structural_hash
from msdb.ir import zoo
from msdb.records import Workload, WorkloadPayloadError, encode_workload_payload


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


def test_tvm_line_form_round_trips_through_tvms_graph_encoding():
    mod = zoo.build("matmul_bias", 8, 8, 8)
    line = Workload(mod).as_json()
    assert line[0] == str(int(structural_hash(mod), 16))
    back = Workload.from_json(line)
    assert back.tvm_shash == line[0] and back.tvm_payload == line[1]
    assert structural_equal(back.mod, mod)
    assert encode_workload_payload(back) == line[1]  # an imported payload is kept as it was


@pytest.mark.parametrize("bad, message", [
    (["1", "%%%"], "not valid base64"),
    (["1", "AAAA"], "fewer than the 8-byte length prefix"),
    (["1"], "a workload line is"),
])
def test_bad_workload_lines(bad, message):
    with pytest.raises(WorkloadPayloadError, match=message):
        Workload.from_json(bad)
