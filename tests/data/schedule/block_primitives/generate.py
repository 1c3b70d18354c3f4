"""Regenerate expected.json with real TVM 0.27 (never run by the tests).

    /work/tvm-venv/bin/python tests/data/schedule/block_primitives/generate.py

For every scenario of scenarios.py: TVM's TVMScript of the workload before scheduling and of
the module after the scenario's schedule (or the last line of TVM's error message for the
`err_` scenarios). msdb's tests parse both scripts, replay the scenario with msdb's Schedule on
the parsed "before" module, and compare with the parsed "after" module.
"""

from __future__ import annotations

import importlib.util
import json
import os

import tvm
from tvm import s_tir, te
from tvm.s_tir.meta_schedule.testing import te_workload

HERE = os.path.dirname(os.path.abspath(__file__))


def _load_scenarios():
    spec = importlib.util.spec_from_file_location("block_scenarios", os.path.join(HERE, "scenarios.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _mm(n=16, relu=False):
    a = te.placeholder((n, n), name="A")
    b = te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), name="k")
    c = te.compute((n, n), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    if not relu:
        return [a, b, c]
    d = te.compute((n, n), lambda i, j: te.max(c[i, j], tvm.tirx.const(0.0, "float32")), name="D")
    return [a, b, d]


def _ew(n=12):
    a = te.placeholder((n, n), name="A")
    b = te.compute((n, n), lambda i, j: a[i, j] * tvm.tirx.const(2.0, "float32"), name="B")
    c = te.compute((n, n), lambda i, j: b[j, i] + tvm.tirx.const(1.0, "float32"), name="C")
    return [a, c]


def _chain(n=10):
    a = te.placeholder((n,), name="A")
    b = te.compute((n,), lambda i: a[i] + tvm.tirx.const(1.0, "float32"), name="B")
    c = te.compute((n,), lambda i: b[i] * tvm.tirx.const(3.0, "float32"), name="C")
    d = te.compute((n - 2,), lambda i: c[i] + c[i + 1] + c[i + 2], name="D")
    return [a, d]


def _blocked():
    a = te.placeholder((12, 5), name="A")
    p = te.compute((3, 5, 4), lambda o, x, lane: a[o * 4 + lane, x] * tvm.tirx.const(2.0, "float32"), name="P")
    u = te.compute((12, 5), lambda c, x: p[tvm.tirx.floordiv(c, 4), x, tvm.tirx.floormod(c, 4)]
                   + tvm.tirx.const(1.0, "float32"), name="U")
    return [a, u]


WORKLOADS = {
    "blocked": _blocked,
    "mm": lambda: _mm(),
    "mmrelu": lambda: _mm(relu=True),
    "ew": _ew,
    "chain": _chain,
    "bmm": lambda: te_workload.batch_matmul_nkkm(2, 8, 8, 8),
    "conv": lambda: te_workload.conv2d_nhwc(1, 8, 8, 3, 4, 3, 2, 1),
}


def main() -> None:
    scenarios = _load_scenarios()
    out = {}
    for name, (workload, fn) in scenarios.SCENARIOS.items():
        mod = tvm.IRModule({"main": te.create_prim_func(WORKLOADS[workload]())})
        sch = s_tir.Schedule(mod)
        entry = {"workload": workload, "before": mod.script()}
        try:
            fn(sch)
            entry["after"] = sch.mod.script()
        except Exception as exc:  # noqa: BLE001 - the error text is the data
            lines = [ln for ln in str(exc).splitlines() if ln.strip()]
            entry["error"] = next((ln for ln in reversed(lines) if "Error message" in ln), lines[-1])
        out[name] = entry
    with open(os.path.join(HERE, "expected.json"), "w") as handle:
        json.dump(out, handle, indent=1, sort_keys=True)
        handle.write("\n")
    print(f"{len(out)} scenarios, tvm {tvm.__version__}")


if __name__ == "__main__":
    main()
