"""Shared helpers of the code generation tests: seeded inputs, a reference run through msdb's
interpreter, and small workloads built directly from IR nodes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import numpy as np

from msdb.ir import expr as E
from msdb.ir import interpret
from msdb.ir import stmt as S
from msdb.ir.function import IRModule, PrimFunc

DATA = Path(__file__).resolve().parents[1] / "data"
FIXTURES = DATA / "fixtures" / "tvm-0.27"
TVMSCRIPT = DATA / "tvmscript"

#: Reduced shapes of every zoo workload (same structure as TVM's configs, seconds to check).
SMALL_ZOO = {
    "C1D": (1, 16, 8, 8, 3, 2, 1), "C2D": (1, 10, 10, 3, 8, 3, 2, 1), "C3D": (1, 4, 6, 6, 3, 4, 3, 2, 1),
    "CAP": (1, 4, 4, 4, 4, 3, 2, 1), "DEP": (1, 10, 10, 8, 3, 1, 1), "DIL": (1, 12, 12, 4, 8, 3, 1, 1, 2),
    "GMM": (1, 16, 8, 12), "GRP": (1, 8, 8, 8, 8, 3, 2, 1, 1, 4), "T2D": (1, 4, 4, 8, 4, 4, 2, 1),
    "CBR": (1, 8, 8, 4, 8, 3, 2, 1), "TBG": (1, 8, 2, 8), "NRM": (1, 8, 8), "SFM": (8, 16),
    "dense": (4, 8, 16), "linear": (1, 8, 16), "matmul": (8, 8, 8), "matmul_relu": (8, 8, 8),
    "matmul_bias": (8, 8, 8), "matmul_bias_relu": (8, 8, 8), "linear0": (1, 8, 16), "relu0": (1, 16),
    "linear1": (1, 4, 8),
}


def random_arrays(func: IRModule | PrimFunc, seed: int = 0, low: float = 0.0, high: float = 1.0) -> list[np.ndarray]:
    """Seeded inputs for every buffer argument (outputs get values too: kernels overwrite them)."""
    if isinstance(func, IRModule):
        func = func.main
    rng = np.random.default_rng(seed)
    out = []
    for buf in func.buffers:
        shape = tuple(int(d.value) for d in buf.shape)
        if buf.dtype.startswith("float"):
            out.append(rng.uniform(low, high, size=shape).astype(buf.dtype))
        elif buf.dtype == "bool":
            out.append(rng.random(shape) < 0.5)
        else:
            out.append(rng.integers(-20, 20, size=shape).astype(buf.dtype))
    return out


def check_against_interpreter(reference: IRModule, scheduled: IRModule | None = None, seed: int = 0,
                              rtol: float = 1e-4, atol: float = 1e-5, arrays: list[np.ndarray] | None = None,
                              target: Any = None) -> None:
    """Build `scheduled` (default: `reference`) for `target` (None: this machine; the tests pass
    an ISA level's, `tests/isa.py`) and compare every array after one call with msdb's
    interpreter running `reference` on the same inputs."""
    from msdb.tuner import build

    arrays = arrays if arrays is not None else random_arrays(reference, seed)
    expected = [a.copy() for a in arrays]
    interpret(reference, *expected)
    actual = [a.copy() for a in arrays]
    build(scheduled if scheduled is not None else reference, target)(*actual)
    for buf, got, want in zip(reference.main.buffers, actual, expected):
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=f"buffer {buf.name}")


def one_buffer_module(n: int, body: Callable[[E.Buffer, E.Var], S.Stmt], dtype: str = "float32",
                      loop_dtype: str = "int64") -> IRModule:
    """A function of one buffer `A` (n elements) whose body `body(A, i)` is built from nodes."""
    buf = E.Buffer("A", (E.IntImm("int32", n),), dtype)
    handle = E.Var("A", "handle")
    i = E.Var("i", loop_dtype)
    root = S.BlockRealize((), E.IntImm("bool", 1), S.Block((), (), (), "root", body(buf, i)))
    return IRModule.from_func(PrimFunc((handle,), {handle: buf}, root))


def crashing_module() -> IRModule:
    """Stores 4 TiB past the buffer: a segfault when run."""
    return one_buffer_module(16, lambda A, i: S.For(
        i, E.IntImm("int64", 0), E.IntImm("int64", 16), S.ForKind.SERIAL,
        S.BufferStore(A, E.FloatImm("float32", 1.0), (E.Add(i, E.IntImm("int64", 1 << 40)),))))


def hanging_module() -> IRModule:
    """A loop of 2**62 iterations that LLVM cannot fold away."""
    def body(A: E.Buffer, i: E.Var) -> S.Stmt:
        slot = E.FloorMod(i, E.IntImm("int64", 16))
        update = S.BufferStore(A, E.Add(E.BufferLoad(A, (slot,)), E.FloatImm("float32", 1.0)), (slot,))
        return S.For(i, E.IntImm("int64", 0), E.IntImm("int64", 1 << 62), S.ForKind.SERIAL, update)

    return one_buffer_module(16, body)


def fixture_records(team: str) -> tuple[list[IRModule], list[list[Any]]]:
    """Decoded workloads and tuning records of one fixture team (TVM 0.27 logs)."""
    from msdb.interop.tvm.payload import decode_workload

    folder = FIXTURES / f"team_{team}"
    workloads = [json.loads(line) for line in (folder / "database_workload.json").read_text().splitlines() if line.strip()]
    records = [json.loads(line) for line in (folder / "database_tuning_record.json").read_text().splitlines() if line.strip()]
    return [decode_workload(w[1]) for w in workloads], records


def mean_run_secs(record: list[Any]) -> float:
    secs = record[1][1]
    return sum(secs) / len(secs)


def replay(mod: IRModule, record: list[Any]) -> IRModule:
    from msdb.schedule import Schedule, Trace

    sch = Schedule(mod)
    Trace.from_json(record[1][0]).apply_to_schedule(sch, remove_postproc=False)
    return sch.mod
