"""Encoding msdb IR as TVM 0.27 object graphs: decode(encode(m)) is m, for every real TVM
workload; the graph has TVM's shape (real TVM loading it is tested in tests/tvm/)."""

from __future__ import annotations

import json
import pathlib

import pytest

from msdb.hashing import structural_equal
from msdb.interop.tvm.encode import encode_graph, encode_workload
from msdb.interop.tvm.payload import decode_workload, load_graph

TVM027 = pathlib.Path(__file__).resolve().parents[1] / "data" / "tvm027_workloads"
PAYLOADS = [json.loads(line)[1] for name in ("zoo_index0", "constructs")
            for line in (TVM027 / f"{name}_database_workload.json").read_text().splitlines()]


@pytest.mark.parametrize("payload", PAYLOADS, ids=[f"w{i}" for i in range(len(PAYLOADS))])
def test_decode_of_encode_is_identity(payload: str) -> None:
    mod = decode_workload(payload)
    again = decode_workload(encode_workload(mod))
    assert structural_equal(mod, again)
    assert [b.name for b in again.main.buffers] == [b.name for b in mod.main.buffers]


def test_graph_has_tvm_027_shape() -> None:
    mod = decode_workload(PAYLOADS[0])
    graph = encode_graph(mod)
    assert graph["metadata"] == {"tvm_version": "0.27.0.post1"}
    types = {node["type"] for node in graph["nodes"]}
    assert {"ir.IRModule", "tirx.PrimFunc", "s_tir.SBlock", "s_tir.SBlockRealize", "tirx.BufferType", "relax.FuncType"} <= types
    assert not any(t.startswith("tir.") for t in types)
    func = next(node for node in graph["nodes"] if node["type"] == "tirx.PrimFunc")
    attrs = graph["nodes"][graph["nodes"][func["data"]["attrs"]]["data"]["__dict__"]]["data"]
    keys = {graph["nodes"][k]["data"] for k in attrs[0::2]}
    assert keys == {"global_symbol", "tirx.noalias", "s_tir"}


def test_payload_is_pretty_printed_like_tvm() -> None:
    mod = decode_workload(PAYLOADS[0])
    payload = encode_workload(mod)
    graph = load_graph(payload)
    assert graph["root_index"] == len(graph["nodes"]) - 1
    from msdb.interop.tvm.payload import payload_bytes

    assert payload_bytes(payload).startswith(b'{\n  "root_index": ')
