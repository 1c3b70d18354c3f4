"""LocalBuilder and LocalRunner: object code built in worker processes, measured in a worker
process with TVM's semantics; a kernel that crashes or hangs is a failed result and the next
candidate in the same batch is measured normally."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from msdb.ir import zoo
from msdb.tuner import BuilderInput, LocalBuilder, LocalRunner, RunnerInput, load_kernel
from msdb.tuner.measure.runner import FAILED_RUN_SECS
from tests.tuner._util import crashing_module, hanging_module, random_arrays


@pytest.fixture(scope="module")
def builder(tmp_path_factory):
    with LocalBuilder(max_workers=2, timeout_sec=120, artifact_dir=str(tmp_path_factory.mktemp("artifacts"))) as b:
        yield b


def test_builder_writes_object_code_that_loads_and_computes(builder) -> None:
    mod = zoo.build("GMM", 1, 16, 24, 8)
    (result,) = builder.build([BuilderInput(mod)])
    assert result.error_msg is None and os.path.exists(result.artifact_path)
    with open(result.artifact_path + ".json") as f:
        meta = json.load(f)
    assert [a[1:] for a in meta["args"]] == [["float32", [1, 16, 8]], ["float32", [1, 8, 24]], ["float32", [1, 16, 24]]]
    with open(result.artifact_path, "rb") as f:
        kernel = load_kernel(f.read(), meta)
    x, y, z = random_arrays(mod, seed=1)
    kernel(x, y, z)
    np.testing.assert_allclose(z, x @ y, rtol=1e-4)


def test_build_failures_are_results_in_order(builder) -> None:
    from msdb.ir import expr as E
    from msdb.ir import stmt as S
    from tests.tuner._util import one_buffer_module

    bad = one_buffer_module(4, lambda A, i: S.For(i, E.IntImm("int64", 0), E.IntImm("int64", 4), S.ForKind.SERIAL,
                                                  S.BufferStore(A, E.FloatImm("bfloat16", 1.0), (i,))), dtype="bfloat16")
    good = zoo.build("relu0", 1, 32)
    results = builder.build([BuilderInput(good), BuilderInput(bad), BuilderInput(good)])
    assert [r.error_msg is None for r in results] == [True, False, True]
    assert "bfloat16" in results[1].error_msg and results[1].artifact_path is None


def _measure_batch(builder, bad, timeout_sec: float):
    good = zoo.build("matmul", 32, 32, 32)
    built = builder.build([BuilderInput(m) for m in (good, bad, good)])
    assert all(r.error_msg is None for r in built)
    with LocalRunner(timeout_sec=timeout_sec, number=2, repeat=2, min_repeat_ms=5) as runner:
        results = [f.result() for f in runner.run([RunnerInput(r.artifact_path) for r in built])]
        restarts = runner.worker.restarts
    for r in (results[0], results[2]):
        assert r.error_msg is None
        assert len(r.run_secs) == 2 and all(0 < s < 1 for s in r.run_secs)
    assert restarts == 1
    return results[1]


def test_a_crashing_kernel_fails_and_the_batch_goes_on(builder) -> None:
    crash = _measure_batch(builder, crashing_module(), timeout_sec=30)
    assert crash.run_secs == [FAILED_RUN_SECS]
    assert "crash" in crash.error_msg and "SIGSEGV" in crash.error_msg


@pytest.mark.slow
def test_a_hanging_kernel_times_out_and_the_batch_goes_on(builder) -> None:
    hang = _measure_batch(builder, hanging_module(), timeout_sec=2)
    assert hang.run_secs == [FAILED_RUN_SECS] and "timeout after 2s" in hang.error_msg


def test_runner_reports_a_missing_artifact() -> None:
    runner = LocalRunner(timeout_sec=5)
    (result,) = [f.result() for f in runner.run([RunnerInput(None)])]
    assert result.run_secs == [FAILED_RUN_SECS] and "no artifact" in result.error_msg
    runner.close()


def test_if_then_else_evaluates_only_the_taken_arm(builder) -> None:
    """The false arm loads 4 TiB past the buffer: evaluated eagerly it would crash."""
    from msdb.ir import expr as E
    from msdb.ir import stmt as S
    from tests.tuner._util import one_buffer_module

    def body(A, i):
        far = E.BufferLoad(A, (E.Add(i, E.IntImm("int64", 1 << 40)),))
        value = E.Call("float32", "if_then_else", (E.LT(i, E.IntImm("int64", 16)), E.BufferLoad(A, (i,)), far))
        return S.For(i, E.IntImm("int64", 0), E.IntImm("int64", 16), S.ForKind.SERIAL,
                     S.BufferStore(A, E.Add(value, E.FloatImm("float32", 1.0)), (i,)))

    (built,) = builder.build([BuilderInput(one_buffer_module(16, body))])
    with LocalRunner(timeout_sec=30, number=1, repeat=1, min_repeat_ms=0, enable_cpu_cache_flush=True) as runner:
        (result,) = [f.result() for f in runner.run([RunnerInput(built.artifact_path)])]
    assert result.error_msg is None and result.run_secs[0] < 1


def test_msdb_tuner_build_is_the_build_function_whatever_was_imported() -> None:
    import msdb.tuner
    import msdb.tuner.kernel
    from msdb.records import FAILED_RUN_SECS as RECORDS_FAILED_RUN_SECS

    assert msdb.tuner.build is msdb.tuner.kernel.build  # the module is `kernel`: no module to shadow it
    assert FAILED_RUN_SECS == RECORDS_FAILED_RUN_SECS == 1e10


def test_the_cache_flush_covers_every_argument_but_the_first_and_nothing_past_their_ends() -> None:
    """`flush_arguments` (TVM's cache_flush_cpu_non_first_arg) runs `clflush` on each line of
    every argument but the first. An argument that ends on the last byte of a page followed by
    an inaccessible page, with an unaligned start, is flushed without touching that page (a
    flush past the end would fault), an empty one costs nothing, and no value changes."""
    import ctypes
    import mmap

    from msdb.tuner.measure.timing import flush_arguments

    page = mmap.PAGESIZE
    region = mmap.mmap(-1, 2 * page)
    base = np.frombuffer(region, dtype=np.uint8)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    assert libc.mprotect(base.ctypes.data + page, page, 0) == 0, ctypes.get_errno()  # PROT_NONE
    try:
        tail = base[page - 1003:page].view()  # 1,003 bytes: unaligned start, ends at the guard page
        tail[:] = np.arange(1003) % 251
        first = np.ones(5, dtype="float32")
        flush_arguments([first, tail, np.empty(0, dtype="float32"), base[3:7]])
        np.testing.assert_array_equal(tail, np.arange(1003) % 251)
        assert first.tolist() == [1.0] * 5
    finally:
        libc.mprotect(base.ctypes.data + page, page, mmap.PROT_READ | mmap.PROT_WRITE)
        del base, tail
        region.close()
