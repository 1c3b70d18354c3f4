"""Every zoo workload, every index, is structurally equal (by TVM's own assert_structural_equal)
to what TVM 0.27 builds from the same TE definitions."""

from __future__ import annotations

import pytest

from msdb.interop.tvm.encode import encode_workload
from msdb.interop.tvm.payload import payload_bytes
from msdb.ir import zoo

pytestmark = pytest.mark.tvm

CASES = [(name, i) for name in zoo.names() for i in range(len(zoo.configs(name)))]


def _tvm_tensors(name, params):
    from tvm import te, tirx, topi
    from tvm.s_tir.meta_schedule.testing import te_workload

    if name in te_workload.CONFIGS:
        return te_workload.CONFIGS[name][0](*params)
    if name in ("matmul", "matmul_relu"):
        return getattr(te_workload, name)(*params)
    if name == "relu0":
        n, m = params
        x = te.placeholder((n, m), name="X")
        return x, te.compute((n, m), lambda i, j: te.max(x[i, j], tirx.const(0, "float32")), name="Y")
    if name in ("dense", "linear", "linear0", "linear1"):
        n, m, k = params
        x = te.placeholder((n, k), name="X")
        w = te.placeholder((m, k), name="W")
        kk = te.reduce_axis((0, k), name="k")
        y = te.compute((n, m), lambda i, j: te.sum(x[i, kk] * w[j, kk], axis=kk), name="Y")
        if name == "dense":
            return x, w, y
        b = te.placeholder((m,), name="B")
        return x, w, b, te.compute((n, m), lambda i, j: y[i, j] + b[j], name="Z")
    a, b, c = te_workload.matmul(*params)
    bias = te.placeholder((params[1],), name="bias")
    d = te.compute(c.shape, lambda i, j: c[i, j] + bias[j], name="bias_add")
    return (a, b, bias, topi.nn.relu(d) if name == "matmul_bias_relu" else d)


@pytest.mark.parametrize("name,index", CASES, ids=[f"{n}-{i}" for n, i in CASES])
def test_zoo_equals_tvm(name, index):
    import tvm
    from tvm import te

    loaded = tvm.ir.load_json(payload_bytes(encode_workload(zoo.workload(name, index))).decode())
    expected = tvm.IRModule({"main": te.create_prim_func(_tvm_tensors(name, zoo.configs(name)[index]))})
    tvm.ir.assert_structural_equal(loaded, expected)
