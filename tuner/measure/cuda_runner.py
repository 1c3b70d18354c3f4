"""`CudaRunner`: measure cubin artifacts from `LocalBuilder` (cuda targets) on a GPU with TVM's
timing semantics.

    runner = CudaRunner(number=3, repeat=1, min_repeat_ms=100)
    results = runner.run([RunnerInput(r.artifact_path, "cuda") for r in builder_results])

Failures (no driver, a kernel that faults, a bad artifact) are `[1e10]` results with the reason;
`isolated=False` measures in this process. See docs/architecture.md, "CUDA".
"""

from __future__ import annotations

import ctypes
import json
import logging
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from msdb.errors import MsdbError
from msdb.records.ranking import FAILED_RUN_SECS
from msdb.tuner.measure.runner import RunnerInput, RunnerResult, WorkerRunner, cached_arguments, random_arguments

__all__ = ["CudaRunner", "CudaRuntimeError", "CudaDevice", "time_cubin", "run_cubin", "check_against_numpy"]

logger = logging.getLogger(__name__)


class CudaRuntimeError(MsdbError):
    """No usable CUDA driver or device, or a driver call failed."""


_NO_BINDING = ("no CUDA driver binding: install pycuda (pip install 'msdb[gpu]') or NVIDIA's cuda-python "
               "(pip install cuda-python)")


class CudaDevice:
    """The few driver calls measurement needs, over pycuda or cuda-python."""

    def __init__(self, device: int = 0) -> None:
        self.backend = ""
        self._cu: Any = None
        self._ctx: Any = None
        try:
            import pycuda.driver as pdrv  # type: ignore[import-not-found,import-untyped,unused-ignore]

            self.backend = "pycuda"
            self._cu = pdrv
        except ImportError:
            try:
                from cuda.bindings import driver as cu  # type: ignore[import-not-found,unused-ignore]
            except ImportError:
                try:
                    from cuda import cuda as cu  # type: ignore[import-not-found,no-redef,unused-ignore]
                except ImportError:
                    raise CudaRuntimeError(_NO_BINDING) from None
            self.backend = "cuda-python"
            self._cu = cu
        except OSError as err:  # pycuda present, libcuda.so missing
            raise CudaRuntimeError(f"no GPU driver: {err}") from err
        try:
            if self.backend == "pycuda":
                self._cu.init()
                self._ctx = self._cu.Device(device).retain_primary_context()
                self._ctx.push()
                self.name = self._cu.Device(device).name()
            else:
                self._call("cuInit", 0)
                dev = self._call("cuDeviceGet", device)
                self._ctx = self._call("cuDevicePrimaryCtxRetain", dev)
                self._call("cuCtxSetCurrent", self._ctx)
                raw = self._call("cuDeviceGetName", 256, dev)
                self.name = raw.split(b"\0", 1)[0].decode() if isinstance(raw, bytes) else str(raw)
        except CudaRuntimeError:
            raise
        except Exception as err:  # pycuda raises its own errors ("no CUDA-capable device is detected")
            raise CudaRuntimeError(f"no usable GPU ({self.backend}): {err}") from err

    # ---- cuda-python ----
    def _call(self, name: str, *args: Any) -> Any:
        out = getattr(self._cu, name)(*args)
        err, rest = out[0], out[1:]
        if err != self._cu.CUresult.CUDA_SUCCESS:  # an enum in every cuda-python version
            text = self._cu.cuGetErrorString(err)
            msg = text[1].decode() if len(text) > 1 and isinstance(text[1], bytes) else str(err)
            raise CudaRuntimeError(f"{name} failed: {msg}")
        return rest[0] if len(rest) == 1 else rest

    # ---- the interface ----
    def load(self, cubin: bytes) -> Any:
        if self.backend == "pycuda":
            return self._cu.module_from_buffer(cubin)
        image = ctypes.create_string_buffer(cubin, len(cubin))  # the driver copies it while loading
        return self._call("cuModuleLoadData", ctypes.addressof(image))

    def function(self, module: Any, name: str) -> Any:
        if self.backend == "pycuda":
            return module.get_function(name)
        return self._call("cuModuleGetFunction", module, name.encode())

    def alloc(self, nbytes: int) -> Any:
        if self.backend == "pycuda":
            return self._cu.mem_alloc(max(1, nbytes))
        return self._call("cuMemAlloc", max(1, nbytes))

    def upload(self, ptr: Any, array: Any) -> None:
        if self.backend == "pycuda":
            self._cu.memcpy_htod(ptr, array)
        else:
            self._call("cuMemcpyHtoD", ptr, array.ctypes.data, array.nbytes)

    def download(self, array: Any, ptr: Any) -> None:
        if self.backend == "pycuda":
            self._cu.memcpy_dtoh(array, ptr)
        else:
            self._call("cuMemcpyDtoH", array.ctypes.data, ptr, array.nbytes)

    def free(self, ptr: Any) -> None:
        if self.backend == "pycuda":
            ptr.free()
        else:
            self._call("cuMemFree", ptr)

    def unload(self, module: Any) -> None:
        if self.backend != "pycuda":
            self._call("cuModuleUnload", module)

    def launcher(self, fn: Any, grid: Sequence[int], block: Sequence[int], ptrs: list[Any]) -> Callable[[], None]:
        """A no-argument function launching `fn` on `ptrs` (argument setup done once)."""
        if self.backend == "pycuda":
            g, b = tuple(int(x) for x in grid), tuple(int(x) for x in block)
            return lambda: fn(*ptrs, grid=g, block=b)
        values = (ctypes.c_uint64 * max(1, len(ptrs)))(*[int(p) for p in ptrs])
        argv = (ctypes.c_void_p * max(1, len(ptrs)))(*[ctypes.addressof(values) + 8 * i for i in range(len(ptrs))])
        keep = (values, argv)
        call = self._call
        gx, gy, gz = (int(x) for x in grid)
        bx, by, bz = (int(x) for x in block)

        def launch() -> None:
            call("cuLaunchKernel", fn, gx, gy, gz, bx, by, bz, 0, 0, ctypes.addressof(keep[1]), 0)

        return launch

    def timer(self) -> tuple[Callable[[], None], Callable[[], float]]:
        """(start, stop -> elapsed ms) on CUDA events of the default stream."""
        if self.backend == "pycuda":
            start, end = self._cu.Event(), self._cu.Event()

            def stop_p() -> float:
                end.record()
                end.synchronize()
                return float(start.time_till(end))

            return start.record, stop_p
        s_ev = self._call("cuEventCreate", 0)
        e_ev = self._call("cuEventCreate", 0)

        def begin() -> None:
            self._call("cuEventRecord", s_ev, 0)

        def stop() -> float:
            self._call("cuEventRecord", e_ev, 0)
            self._call("cuEventSynchronize", e_ev)
            return float(self._call("cuEventElapsedTime", s_ev, e_ev))

        return begin, stop

    def synchronize(self) -> None:
        if self.backend == "pycuda":
            self._cu.Context.synchronize()
        else:
            self._call("cuCtxSynchronize")


_device: CudaDevice | None = None


def _get_device() -> CudaDevice:
    global _device
    if _device is None:
        _device = CudaDevice()
    return _device


@dataclass
class _Loaded:
    device: CudaDevice
    module: Any
    ptrs: list[Any]
    launches: list[Callable[[], None]]

    def call(self) -> None:
        for launch in self.launches:
            launch()

    def close(self) -> None:
        for p in self.ptrs:
            self.device.free(p)
        self.device.unload(self.module)


def _load(cubin: bytes, meta: dict[str, Any], arrays: list[Any]) -> _Loaded:
    import numpy as np

    dev = _get_device()
    module = dev.load(cubin)
    ptrs: list[Any] = []
    try:
        for a in arrays:
            p = dev.alloc(a.nbytes)
            ptrs.append(p)
            dev.upload(p, np.ascontiguousarray(a))
        spaces = []
        for _, dtype, shape in meta.get("workspaces", []):
            nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype("bool" if dtype == "bool" else dtype).itemsize
            p = dev.alloc(nbytes)
            ptrs.append(p)
            spaces.append(p)
        launches = []
        for k in meta["kernels"]:
            fn = dev.function(module, k["name"])
            args = [ptrs[i] if kind == "arg" else spaces[i] for kind, i in k["params"]]
            launches.append(dev.launcher(fn, k["grid"], k["block"], args))
    except Exception:
        for p in ptrs:
            dev.free(p)
        raise
    return _Loaded(dev, module, ptrs, launches)


def _read(path: str) -> tuple[bytes, dict[str, Any]]:
    with open(path + ".json", "rb") as f:
        meta = json.loads(f.read())
    with open(path, "rb") as f:
        cubin = f.read()
    if meta.get("kind") != "cuda":
        raise CudaRuntimeError(f"{path} is not a CUDA artifact (its sidecar has kind {meta.get('kind')!r})")
    return cubin, meta


def run_cubin(path: str, arrays: list[Any]) -> list[Any]:
    """Run the kernels of the artifact at `path` once on copies of `arrays` (numpy, in argument
    order) and return the arguments as they are afterwards (outputs written)."""
    import numpy as np

    cubin, meta = _read(path)
    loaded = _load(cubin, meta, arrays)
    try:
        loaded.call()
        loaded.device.synchronize()
        out = [np.empty_like(a) for a in arrays]
        for host, ptr in zip(out, loaded.ptrs):
            loaded.device.download(host, ptr)
        return out
    finally:
        loaded.close()


def time_cubin(path: str, number: int = 3, repeat: int = 1, min_repeat_ms: float = 100.0,
               seed: int = 0) -> list[float]:
    """Seconds per call of each repeat (TVM's time_evaluator with CUDA events)."""
    from msdb.tuner.measure.timing import evaluate

    cubin, meta = _read(path)
    loaded = _load(cubin, meta, cached_arguments(meta["args"], seed))
    try:
        begin, stop = loaded.device.timer()

        def timed(n: int) -> int:
            begin()
            for _ in range(n):
                loaded.call()
            return int(stop() * 1e6)

        return list(evaluate(timed, number, repeat, min_repeat_ms).results)
    finally:
        loaded.close()


def check_against_numpy(func: Any, artifact_path: str, *, reference: Callable[..., Any] | None = None,
                        seed: int = 0, rtol: float = 1e-3, atol: float = 1e-3) -> dict[str, Any]:
    """Run the artifact on seeded random inputs and compare every argument afterwards with
    the reference: `reference(*arrays)` writing outputs in place (numpy), else msdb's
    interpreter running `func` (the unscheduled or scheduled PrimFunc). Returns
    {"ok", "max_abs_err", "mismatched": [argument names]}."""
    import numpy as np

    _, meta = _read(artifact_path)
    inputs = random_arguments(meta["args"], seed)
    got = run_cubin(artifact_path, [a.copy() for a in inputs])
    want = [a.copy() for a in inputs]
    if reference is None:
        from msdb.ir.interpreter import interpret

        interpret(func, *want)
    else:
        reference(*want)
    worst = 0.0
    bad = []
    for (name, _, _), g, w in zip(meta["args"], got, want):
        if g.dtype.kind in "fc":
            err = float(np.max(np.abs(g.astype(np.float64) - w.astype(np.float64)))) if g.size else 0.0
            good = bool(np.allclose(g, w, rtol=rtol, atol=atol))
        else:
            err = float(np.max(np.abs(g.astype(np.int64) - w.astype(np.int64)))) if g.size else 0.0
            good = bool(np.array_equal(g, w))
        worst = max(worst, err)
        if not good:
            bad.append(name)
    return {"ok": not bad, "max_abs_err": worst, "mismatched": bad}


def _time_in_worker(path: str, number: int, repeat: int, min_repeat_ms: float, seed: int) -> list[float]:
    return time_cubin(path, number, repeat, min_repeat_ms, seed)


def _device_in_worker() -> tuple[str | None, str | None]:
    """(the GPU's name, None), or (None, why no GPU can be used): a value, not an exception, so
    that the reason crosses the worker's pipe as one line rather than a traceback."""
    try:
        return _get_device().name, None
    except CudaRuntimeError as err:
        return None, str(err)


class CudaRunner(WorkerRunner):
    """Measures CUDA artifacts one at a time (the `LocalRunner` interface)."""

    def __init__(self, timeout_sec: float = 30.0, number: int = 3, repeat: int = 1, min_repeat_ms: float = 100.0,
                 *, seed: int = 0, isolated: bool = True) -> None:
        self.timeout_sec = float(timeout_sec)
        self.number = int(number)
        self.repeat = int(repeat)
        self.min_repeat_ms = float(min_repeat_ms)
        self.seed = int(seed)
        self.isolated = isolated
        self._worker: Any = None

    def check_device(self) -> str:
        """The name of the GPU this runner measures on, or `CudaRuntimeError` saying why there is
        none (no driver binding, no driver, no device): `msdb tune` asks before it stores
        anything, rather than storing every candidate as a failed run. Asked where
        the candidates would run: in the worker process when isolated, so this process never
        initializes CUDA."""
        if self.isolated:
            from msdb.tuner.measure.worker import Worker, WorkerError

            if self._worker is None:
                self._worker = Worker(name="cuda-runner")
            try:
                name, reason = self._worker.call("msdb.tuner.measure.cuda_runner:_device_in_worker", (),
                                                 self.timeout_sec)
            except WorkerError as err:
                raise CudaRuntimeError(f"no usable GPU: the check failed ({str(err).strip().splitlines()[-1]})") \
                    from None
        else:
            name, reason = _device_in_worker()
        if name is None:
            raise CudaRuntimeError(reason or "no usable GPU")
        return name

    def run_one(self, item: RunnerInput) -> RunnerResult:
        if item.artifact_path is None:
            return RunnerResult([FAILED_RUN_SECS], "CudaRunner: no artifact (the build failed)")
        started = time.perf_counter()
        args = (item.artifact_path, self.number, self.repeat, self.min_repeat_ms, self.seed)
        try:
            if self.isolated:
                from msdb.tuner.measure.worker import Worker

                if self._worker is None:
                    self._worker = Worker(name="cuda-runner")
                secs = self._worker.call("msdb.tuner.measure.cuda_runner:_time_in_worker", args, self.timeout_sec)
            else:
                secs = time_cubin(*args)
        except Exception as err:  # every failure is this candidate's result
            return RunnerResult([FAILED_RUN_SECS], f"CudaRunner: {type(err).__name__}: {err}")
        return RunnerResult(list(secs), None, time.perf_counter() - started - sum(secs) * self.number)

