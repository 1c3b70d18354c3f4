"""CUDA code generation without a GPU: hand schedules lower to CUDA C that NVRTC and ptxas
accept for sm_80 and sm_90 (registers and shared memory reported), VerifyGPUCode refusals, the
cubin artifact of `LocalBuilder`, and a clear error from the runner where there is no GPU."""

from __future__ import annotations

import json
import os
import re

import pytest

from msdb.ir import zoo
from msdb.schedule.schedule import Schedule
from msdb.tuner.codegen.cuda import build_cuda, cuda_source, examples
from msdb.tuner.codegen.cuda.lower import lower_gpu_module
from msdb.tuner.codegen.cuda.nvrtc import parse_ptxas_verbose
from msdb.tuner.codegen.cuda.verify import GpuLimits, GPUVerifyError, verify_gpu
from msdb.tuner.codegen.errors import CodegenError
from tests.tuner.cuda import schedules

ARCHS = ["sm_80", "sm_90"]


@pytest.fixture(scope="module")
def workloads() -> dict:
    return {
        "matmul": examples.matmul(1024),
        "softmax": examples.softmax(256, 1024),
        "conv2d": examples.conv2d(),
        "dense_int8": examples.dense_int8(),
    }


@pytest.mark.slow
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("name", ["matmul", "softmax", "conv2d", "dense_int8"])
def test_kernels_compile_for_arch(workloads: dict, name: str, arch: str) -> None:
    built = build_cuda(workloads[name], f"cuda -arch={arch}")
    assert built.arch == arch
    assert built.cubin[:4] == b"\x7fELF"
    assert f".target {arch}" in built.ptx
    (kernel,) = built.kernels
    assert kernel["name"] == "main_kernel"
    assert 0 < kernel["registers"] <= 255
    assert kernel["spill_stores"] == 0
    meta = built.meta()
    assert json.loads(json.dumps(meta)) == meta


@pytest.mark.slow
def test_matmul_source_has_the_schedule(workloads: dict) -> None:
    src = cuda_source(workloads["matmul"], "cuda -arch=sm_90")
    assert 'extern "C" __global__ void __launch_bounds__(256) main_kernel(' in src
    assert "__shared__ __align__(16) float A_shared[1024];" in src
    assert "__shared__ __align__(16) float B_shared[1024];" in src
    assert "float C_local[64];" in src  # the 8x8 register tile, compacted per thread
    # vector copies: two cooperative global->shared fetches, shared->register B row, register->global C
    assert src.count("*(uint4*)") == 8
    assert re.search(r"\*\(uint4\*\)\(B_shared_local \+ [^;]*= \*\(uint4\*\)\(B_shared \+", src)
    assert re.search(r"\*\(uint4\*\)\(C \+ [^;]*= \*\(uint4\*\)\(C_local \+", src)
    assert "#pragma unroll" in src
    # a barrier before the copies overwrite tiles others read, one before reading them
    body = src[src.index("for (int k_0"):]
    assert re.search(r"__syncthreads\(\);\s+__shared__[^\n]*A_shared", body)
    assert body.count("__syncthreads();") == 2
    built = build_cuda(workloads["matmul"], "cuda -arch=sm_90")
    assert built.kernels[0]["shared_bytes"] == 8192
    assert built.kernels[0]["grid"] == [8, 8, 1] and built.kernels[0]["block"] == [16, 16, 1]


def test_softmax_barrier_between_shared_exp_and_sum(workloads: dict) -> None:
    src = cuda_source(workloads["softmax"], "cuda")
    assert "expf(" in src and "fmaxf(" in src
    exp_store = src.index("T_softmax_exp[")
    sum_loop = src.index("T_softmax_expsum[0] = (")
    assert "__syncthreads();" in src[exp_store:sum_loop]


def test_conv2d_padding_is_a_lazy_select(workloads: dict) -> None:
    src = cuda_source(workloads["conv2d"], "cuda")
    assert re.search(r"\? inputs\[[^\]]+\] : 0\.0f\)", src)


def test_int8_dot_of_four_is_dp4a(workloads: dict) -> None:
    src = cuda_source(workloads["dense_int8"], "cuda")
    assert "__dp4a(*(int*)(X + " in src


def test_two_launch_regions_are_two_kernels() -> None:
    sch = Schedule(zoo.build("matmul_relu", 64, 64, 64))
    for name in ("C", "compute"):
        blk = sch.get_block(name)
        loops = sch.get_loops(blk)
        fused = sch.fuse(*loops[:2])
        b, t = sch.split(fused, [None, 64])
        sch.bind(b, "blockIdx.x")
        sch.bind(t, "threadIdx.x")
    built = build_cuda(sch.mod, "cuda -arch=sm_80")
    assert [k["name"] for k in built.kernels] == ["main_kernel", "main_kernel_1"]
    assert built.workspaces and built.workspaces[0][0] == "C"
    assert built.kernels[0]["params"][-1] == ["workspace", 0]


def test_host_loop_is_refused() -> None:
    sch = Schedule(zoo.build("matmul", 64, 64, 64))
    i, j, _ = sch.get_loops(sch.get_block("C"))
    sch.bind(j, "threadIdx.x")
    with pytest.raises(CodegenError, match=r"loop i .*outside every thread binding.*host"):
        cuda_source(sch.mod, "cuda")


@pytest.mark.parametrize("mod_fn, reason", [
    (lambda: schedules.elementwise(1025 * 2, threads=1025), r"Used threads per block \(1025\) is greater than the "
                                                            r"allowed maximum \(1024\)"),
    (lambda: schedules.shared_tile(128), r"Used shared memory per block \(65536\) is greater than the allowed "
                                         r"maximum \(49152\)"),
    (lambda: schedules.elementwise(72, threads=8, vthread=9, vthread_axis="vthread"), r"Number of vthreads \(9\) is greater than the "
                                                               r"allowed maximum \(8\)"),
    (lambda: schedules.elementwise(64, threads=32, vector=8), r"Number of lanes \(8\) times number of bytes \(4\) "
                                                               r"for dtype float32 is greater than the maximum number "
                                                               r"of vector bytes \(16\)"),
], ids=["threads-1025", "shared-64KiB", "vthread-9", "vector-32B"])
def test_verify_gpu_code_refusals(mod_fn, reason: str) -> None:
    mod = mod_fn()
    errors = verify_gpu(lower_gpu_module(mod), GpuLimits.for_target("cuda -arch=sm_90"))
    assert any(re.search(reason, e) for e in errors), errors
    with pytest.raises(GPUVerifyError, match=reason):
        cuda_source(mod, "cuda -arch=sm_90")


def test_target_shared_memory_limit_is_used() -> None:
    mod = schedules.shared_tile(64)  # 16 KiB
    assert verify_gpu(lower_gpu_module(mod), GpuLimits.for_target("cuda")) == []
    small = GpuLimits.for_target({"kind": "cuda", "max_shared_memory_per_block": 8192})
    assert any("16384" in e for e in verify_gpu(lower_gpu_module(mod), small))


def test_vthread_is_expanded_into_copies() -> None:
    src = cuda_source(schedules.elementwise(64, threads=32, vthread=4), "cuda")
    assert "vthread" not in src
    assert src.count("fmaxf(") == 4


def test_ptxas_report_parsing() -> None:
    text = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'k0' for 'sm_90'
ptxas info    : Function properties for k0
    16 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 40 registers, used 0 barriers, 8192 bytes smem, 376 bytes cmem[0]
ptxas info    : Compiling entry function 'k1' for 'sm_90'
ptxas info    : Function properties for k1
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 12 registers, 368 bytes cmem[0]
"""
    stats = parse_ptxas_verbose(text)
    assert stats["k0"].as_json() == {"registers": 40, "shared_bytes": 8192, "stack_bytes": 16, "spill_stores": 8,
                                     "spill_loads": 4}
    assert stats["k1"].registers == 12 and stats["k1"].shared_bytes == 0


def test_builder_makes_a_cubin_artifact(tmp_path, workloads: dict) -> None:
    from msdb.tuner.measure.builder import BuilderInput, LocalBuilder

    with LocalBuilder(max_workers=1, artifact_dir=str(tmp_path)) as builder:
        ok, bad = builder.build([BuilderInput(workloads["softmax"], "cuda -arch=sm_90"),
                                 BuilderInput(schedules.shared_tile(128), "cuda -arch=sm_90")])
    assert ok.ok and ok.artifact_path is not None and ok.artifact_path.endswith(".cubin")
    meta = json.loads(open(ok.artifact_path + ".json").read())
    assert meta["kind"] == "cuda" and meta["arch"] == "sm_90"
    assert meta["args"] == [["A", "float32", [256, 1024]], ["T_softmax_norm", "float32", [256, 1024]]]
    assert meta["kernels"][0]["shared_bytes"] == 4096 and meta["kernels"][0]["grid"] == [256, 1, 1]
    assert os.path.getsize(ok.artifact_path) > 0 and os.path.exists(ok.artifact_path + ".cu")
    assert not bad.ok and "shared memory per block (65536)" in (bad.error_msg or "")


def test_runner_without_gpu_fails_cleanly(tmp_path, workloads: dict) -> None:
    pytest.importorskip("numpy")
    from msdb.tuner.measure.cuda_runner import CudaRunner, CudaRuntimeError, CudaDevice
    from msdb.tuner.measure.runner import RunnerInput

    try:
        CudaDevice()
    except CudaRuntimeError:
        pass
    else:
        pytest.skip("a GPU is present: bench/gpu_check.py measures there")
    from msdb.tuner.measure.builder import build_cuda_artifact

    path = build_cuda_artifact(workloads["softmax"], {"kind": "cuda", "arch": "sm_80"}, str(tmp_path))
    for isolated in (False, True):
        with CudaRunner(isolated=isolated) as runner:
            first, missing = [f.result() for f in runner.run([RunnerInput(path, "cuda"), RunnerInput(None, "cuda")])]
        assert first.run_secs == [1e10]
        assert first.error_msg is not None and "CudaRuntimeError" in first.error_msg
        assert "no CUDA driver binding" in first.error_msg or "GPU" in first.error_msg
        assert missing.run_secs == [1e10] and "no artifact" in (missing.error_msg or "")


# ---- the generated code computes the right numbers (CPU emulation, tests/tuner/cuda/emulate.py) ----


def _meta(lowered) -> dict:
    from msdb.tuner.codegen.analysis import static_shape

    kernels = []
    for k in lowered.kernels:
        refs = [["arg", lowered.params.index(b)] if b in lowered.params else ["workspace", lowered.workspaces.index(b)]
                for b in k.params]
        kernels.append({"name": k.name, "grid": list(k.grid), "block": list(k.block), "params": refs})
    return {"args": [[b.name, b.dtype, list(static_shape(b))] for b in lowered.params],
            "workspaces": [[b.name, b.dtype, list(static_shape(b))] for b in lowered.workspaces], "kernels": kernels}


def _emulated_matches_interpreter(mod) -> None:
    import numpy as np

    from msdb.ir.interpreter import interpret
    from msdb.tuner.codegen.cuda.emit import emit_cuda
    from msdb.tuner.measure.runner import random_arguments
    from tests.tuner.cuda import emulate

    lowered = lower_gpu_module(mod)
    meta = _meta(lowered)
    inputs = random_arguments(meta["args"], 0)
    got = emulate.run_on_cpu(emit_cuda(lowered), meta, [a.copy() for a in inputs])
    want = [a.copy() for a in inputs]
    interpret(mod, *want)
    for (name, _, _), g, w in zip(meta["args"], got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5, err_msg=name)


EMULATED = {
    "matmul": lambda: examples.matmul(128),
    "softmax": lambda: examples.softmax(8, 256),
    "conv2d": lambda: examples.conv2d(1, 8, 8, 16, 16, 3, 1, 1),
    "dense_int8": lambda: examples.dense_int8(32, 32, 32),
    "vthread": lambda: schedules.elementwise(64, threads=32, vthread=4),
}


@pytest.mark.slow
@pytest.mark.skipif(not __import__("shutil").which("g++"), reason="the CPU emulation compiles with g++")
@pytest.mark.parametrize("name", sorted(EMULATED))
def test_generated_kernels_compute_the_workload(name: str) -> None:
    _emulated_matches_interpreter(EMULATED[name]())


@pytest.mark.slow
@pytest.mark.skipif(not __import__("shutil").which("g++"), reason="the CPU emulation compiles with g++")
def test_two_kernels_share_a_workspace_correctly() -> None:
    sch = Schedule(zoo.build("matmul_relu", 32, 32, 32))
    for name in ("C", "compute"):
        blk = sch.get_block(name)
        fused = sch.fuse(*sch.get_loops(blk)[:2])
        b, t = sch.split(fused, [None, 64])
        sch.bind(b, "blockIdx.x")
        sch.bind(t, "threadIdx.x")
    _emulated_matches_interpreter(sch.mod)


# ---- TVM 0.27's own CUDA candidates (tests/data/cuda_candidates, TVMScript as TVM printed it) ----


def _tvm_candidates() -> list:
    """TVM's matmul, conv2d and softmax candidates. (The dp4a fixture's TVM print holds
    tensorized vector code, `T.Ramp` and int8x4, which msdb's IR does not express; its msdb
    replay is tests/tuner/cuda/test_cuda_replay*.py's subject.)"""
    from tests.tuner.cuda import _candidates

    return [s for s in _candidates.shipped()
            if s.role == "candidate" and s.workload in ("matmul", "conv2d", "softmax")]


@pytest.mark.parametrize("shipped", _tvm_candidates(), ids=lambda s: s.id)
def test_tvm_candidates_lower_and_pass_verify(shipped) -> None:
    from msdb.ir.script import from_script

    mod = from_script(shipped.tvm_script)
    lowered = lower_gpu_module(mod)
    assert verify_gpu(lowered, GpuLimits.for_target("cuda -arch=sm_90")) == []  # TVM's postproc accepted them
    src = cuda_source(mod, "cuda -arch=sm_90")
    assert src.count('extern "C" __global__') == len(lowered.kernels) >= 1


#: matmul-candidate3 binds 128 vthreads over a 4096-float register tile: its build takes minutes
#: (TVM's would too); it is lowered and verified above, not assembled here.
_SLOW_BUILD = {"matmul-candidate3"}


@pytest.mark.slow
@pytest.mark.parametrize("shipped", [s for s in _tvm_candidates() if s.id not in _SLOW_BUILD], ids=lambda s: s.id)
def test_tvm_candidates_compile_for_sm90(shipped) -> None:
    from msdb.ir.script import from_script

    built = build_cuda(from_script(shipped.tvm_script), "cuda -arch=sm_90")
    assert all(k["registers"] > 0 and k["shared_bytes"] <= 48 * 1024 for k in built.kernels)


@pytest.mark.slow
@pytest.mark.skipif(not __import__("shutil").which("g++"), reason="the CPU emulation compiles with g++")
@pytest.mark.parametrize("shipped_id", ["softmax-candidate2", "softmax-space3"])
def test_tvm_softmax_with_cross_thread_reduction_computes_softmax(shipped_id: str) -> None:
    from msdb.ir.script import from_script

    (shipped,) = [s for s in __import__("tests.tuner.cuda._candidates", fromlist=["x"]).shipped() if s.id == shipped_id]
    src = cuda_source(from_script(shipped.tvm_script), "cuda")
    assert "red_buf" in src  # the threadIdx-bound reduction became an allreduce
    _emulated_matches_interpreter(from_script(shipped.tvm_script))


_EXCHANGE = '''
@T.prim_func
def main(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
    S = T.alloc_buffer((64,), scope="shared")
    for bx in T.thread_binding(1, thread="blockIdx.x"):
        for tx in T.thread_binding(64, thread="threadIdx.x"):
            if COND:
                with T.block("w"):
                    v = T.axis.spatial(64, tx)
                    S[v] = A[v]
                with T.block("r"):
                    v = T.axis.spatial(64, tx)
                    B[v] = S[63 - v]
'''


@pytest.mark.slow
def test_barrier_between_write_and_read_of_other_threads() -> None:
    from msdb.ir.script import from_script

    mod = from_script(_EXCHANGE.replace("COND", "bx < 1"))
    src = cuda_source(mod, "cuda")
    assert re.search(r"S\[\(\(int\)threadIdx\.x\)\] = A\[[^\n]*\n\s*__syncthreads\(\);\n\s*B\[", src)
    if __import__("shutil").which("g++"):  # threads exchange through shared memory: B is A reversed
        import numpy as np

        from msdb.tuner.codegen.cuda.emit import emit_cuda
        from tests.tuner.cuda import emulate

        lowered = lower_gpu_module(mod)
        a = np.arange(64, dtype="float32")
        _, b = emulate.run_on_cpu(emit_cuda(lowered), _meta(lowered), [a, np.zeros(64, "float32")])
        np.testing.assert_array_equal(b, a[::-1])


def test_barrier_under_thread_condition_is_refused() -> None:
    from msdb.ir.script import from_script

    with pytest.raises(CodegenError, match=r"shared buffer S needs a __syncthreads\(\).*depends on threadIdx"):
        cuda_source(from_script(_EXCHANGE.replace("COND", "tx < 32")), "cuda")
