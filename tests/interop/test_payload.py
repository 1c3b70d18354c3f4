"""Decoding TVM workload payloads (real TVM 0.27 output) into msdb IR, and the errors for
payloads that cannot be decoded."""

from __future__ import annotations

import base64
import json
import pathlib
import struct

import pytest

from msdb.interop.tvm.payload import (
    LegacyPayloadError,
    PayloadError,
    UnsupportedNodeError,
    decode_workload,
    encode_payload_bytes,
    payload_bytes,
)
from msdb.ir import expr as E
from msdb.ir import stmt as S

DATA = pathlib.Path(__file__).resolve().parents[1] / "data"
TVM027 = DATA / "tvm027_workloads"


def _workload_lines(path: pathlib.Path) -> list[tuple[str, str]]:
    return [tuple(json.loads(line)) for line in path.read_text().splitlines() if line.strip()]


def _all_blocks(stmt: S.Stmt) -> list[S.Block]:
    from msdb.ir.functor import post_order_visit

    found: list[S.Block] = []
    post_order_visit(stmt, lambda n: found.append(n) if isinstance(n, S.Block) else None)
    return found


ZOO_LINES = _workload_lines(TVM027 / "zoo_index0_database_workload.json")
ZOO_NAMES = json.loads((TVM027 / "zoo_index0_names.json").read_text())


@pytest.mark.parametrize("name,line", list(zip(ZOO_NAMES, ZOO_LINES)), ids=ZOO_NAMES)
def test_every_zoo_payload_of_tvm_027_decodes(name: str, line: tuple[str, str]) -> None:
    mod = decode_workload(line[1])
    func = mod["main"]
    assert func.attrs["tirx.noalias"] is True
    assert func.root_block is not None and func.root_block.name_hint == "root"
    assert len(func.buffers) >= 2
    blocks = [b for b in _all_blocks(func.body) if b.name_hint != "root"]
    assert blocks, "a workload without computation blocks"
    assert all(b.writes for b in blocks)


def test_gmm_payload_has_tvm_structure() -> None:
    mod = decode_workload(ZOO_LINES[ZOO_NAMES.index("GMM")][1])
    func = mod.main
    x, y, z = func.buffers
    assert [b.name for b in (x, y, z)] == ["X", "Y", "Z"]
    assert [d.value for d in z.shape] == [1, 128, 128] and z.dtype == "float32"
    (block,) = [b for b in _all_blocks(func.body) if b.name_hint == "Z"]
    assert [iv.iter_type for iv in block.iter_vars] == [S.IterType.DATA_PAR] * 3 + [S.IterType.COMM_REDUCE]
    assert isinstance(block.init, S.BufferStore) and isinstance(block.init.value, E.FloatImm)
    assert [r.buffer for r in block.reads] == [x, y] and [w.buffer for w in block.writes] == [z]
    # the store reads Z itself: the same Buffer object as the param (identity preserved)
    assert isinstance(block.body, S.BufferStore) and block.body.buffer is z


def test_constructs_payload_keeps_every_detail() -> None:
    ((_, b64),) = _workload_lines(TVM027 / "constructs_database_workload.json")
    func = decode_workload(b64).main
    assert list(func.attrs["layout_free_buffers"]) == [1]
    root = func.root_block
    assert [b.scope for b in root.alloc_buffers] == ["local"]
    outer = root.body.seq[0]
    assert isinstance(outer, S.For) and outer.kind == S.ForKind.THREAD_BINDING
    assert outer.thread_binding.thread_tag == "threadIdx.x"
    inner = outer.body
    assert inner.annotations["pragma_auto_unroll_max_step"] == 16
    realize = inner.body
    assert isinstance(realize.predicate, E.Or)
    assert realize.block.annotations["meta_schedule.tiling_structure"] == "SSRSRS"
    vec = root.body.seq[1]
    assert vec.kind == S.ForKind.VECTORIZED
    calls = []
    from msdb.ir.functor import post_order_visit

    post_order_visit(func.body, lambda n: calls.append(n.op) if isinstance(n, E.Call) else None)
    assert {"if_then_else", "exp", "sqrt", "fabs"} <= set(calls)
    kinds = set()
    post_order_visit(func.body, lambda n: kinds.add(type(n).__name__))
    assert {"Select", "Cast", "Min", "Max", "Not", "NE", "GT", "LE", "Div", "Mod", "FloorDiv", "FloorMod", "Or", "And"} <= kinds


def test_fixture_workloads_decode() -> None:
    paths = sorted((DATA / "fixtures" / "tvm-0.27").glob("*/database_workload.json"))
    assert paths, "no tvm-0.27 fixture workload files found"
    decoded = 0
    for path in paths:
        for _, b64 in _workload_lines(path):
            assert decode_workload(b64).main.root_block is not None
            decoded += 1
    assert decoded, f"no workload lines in {len(paths)} fixture files"


def _payload_of(graph: dict) -> str:
    return encode_payload_bytes(json.dumps(graph).encode())


def test_payload_round_trip_of_bytes() -> None:
    (_, b64) = ZOO_LINES[0]
    assert encode_payload_bytes(payload_bytes(b64)) == b64


@pytest.mark.parametrize(
    "payload,error,message",
    [
        ("not base64 at all!", PayloadError, "not valid base64"),
        (base64.b64encode(b"\x01\x02").decode(), PayloadError, "fewer than the 8-byte length prefix"),
        (base64.b64encode(struct.pack("<Q", 99) + b"{}").decode(), PayloadError, "length prefix says 99 bytes but 2 follow"),
        (encode_payload_bytes(b"{not json"), PayloadError, "not JSON"),
        (encode_payload_bytes(b"[1, 2]"), PayloadError, "not a TVM object graph"),
        (_payload_of({"root": 1, "nodes": [], "attrs": {"tvm_version": "0.16.0"}}), LegacyPayloadError, "legacy (<= 0.21)"),
        (_payload_of({"root_index": 1, "nodes": [{"type": "None"}, {"type": "relax.Function", "data": {}}]}), UnsupportedNodeError, "'relax.Function' (node 1)"),
        (_payload_of({"root_index": 5, "nodes": [{"type": "None"}]}), PayloadError, "node 5, which does not exist"),
    ],
    ids=["base64", "short", "prefix", "json", "not-graph", "legacy", "unknown-node", "dangling"],
)
def test_bad_payloads_give_one_clear_error(payload: str, error: type[Exception], message: str) -> None:
    with pytest.raises(error) as info:
        decode_workload(payload)
    assert message in str(info.value)
