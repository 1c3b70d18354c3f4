"""Real TVM 0.27 loads what msdb encodes (run where apache-tvm 0.27.0.post1 is importable;
.ci/run runs this folder in a separate virtualenv with `-m tvm`)."""

from __future__ import annotations

import json
import pathlib

import pytest

from msdb.interop.tvm.encode import encode_workload
from msdb.interop.tvm.payload import decode_workload, payload_bytes

pytestmark = pytest.mark.tvm

TVM027 = pathlib.Path(__file__).resolve().parents[1] / "data" / "tvm027_workloads"
NAMES = json.loads((TVM027 / "zoo_index0_names.json").read_text())
LINES = [json.loads(line) for line in (TVM027 / "zoo_index0_database_workload.json").read_text().splitlines()]


@pytest.mark.parametrize("name,line", list(zip(NAMES, LINES)), ids=NAMES)
def test_tvm_loads_encoded_zoo_workload_as_its_own(name: str, line: list[str]) -> None:
    import tvm
    from tvm.s_tir.meta_schedule.testing import te_workload

    encoded = encode_workload(decode_workload(line[1]))
    loaded = tvm.ir.load_json(payload_bytes(encoded).decode())
    expected = tvm.IRModule({"main": te_workload.create_te_workload(name, 0)})
    tvm.ir.assert_structural_equal(loaded, expected)
