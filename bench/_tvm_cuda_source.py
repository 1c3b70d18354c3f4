"""TVM 0.27's CUDA C for shipped candidates (run by bench_cuda_build.py with TVM's own Python,
e.g. .tvm-venv/bin/python; msdb never imports TVM).

    python _tvm_cuda_source.py <workload file (.json.gz)> <candidate index>...

Replays each candidate's trace in TVM, lowers and generates CUDA C with `tvm.compile` (the
compiler callback keeps the source and compiles nothing: no CUDA toolkit needed) and prints one
JSON object: candidate index -> TVM's CUDA C, or {"error": ...} where TVM's own build fails.
"""

from __future__ import annotations

import gzip
import json
import sys


def main() -> None:
    import tvm
    import tvm.s_tir.tensor_intrin  # noqa: F401  (registers the wmma intrinsics tensor-core traces name)

    with gzip.open(sys.argv[1]) as f:
        data = json.load(f)
    workload = tvm.script.from_source(data["workload"])
    target = tvm.target.Target(data["target"])

    @tvm.register_global_func("tvm_callback_cuda_compile", override=True)
    def _keep_source(code: str, target: object) -> bytearray:
        return bytearray(b"")

    out: dict[int, object] = {}
    for index in map(int, sys.argv[2:]):
        sch = tvm.s_tir.Schedule(workload)
        tvm.s_tir.schedule.Trace.apply_json_to_schedule(data["candidates"][index]["trace"], sch)
        try:
            runtime = tvm.compile(sch.mod, target=target)
        except Exception as exc:  # noqa: BLE001 - TVM's own failure, reported by the bench
            out[index] = {"error": str(exc).strip().splitlines()[-1][:300]}
            continue
        out[index] = runtime.mod.imports[0].inspect_source()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
