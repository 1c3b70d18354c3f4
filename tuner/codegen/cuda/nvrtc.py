"""CUDA C -> PTX with NVRTC (through ctypes) -> cubin with ptxas, without a GPU
(docs/architecture.md, "CUDA").

The libraries come from NVIDIA's wheels (`pip install 'msdb[cuda]'`: `nvidia-cuda-nvrtc-cu12`
gives `nvidia/cuda_nvrtc/lib/libnvrtc.so.12`, `nvidia-cuda-nvcc-cu12` gives
`nvidia/cuda_nvcc/bin/ptxas`; CUDA 13's wheels put both under `nvidia/cu13/`), else from a CUDA
toolkit (`$CUDA_HOME`, `/usr/local/cuda`, `ptxas` on PATH). `ptxas -v` reports registers, shared
memory and spills per kernel; they travel in the artifact's sidecar.

    ptx = compile_ptx(source, "sm_90")
    cubin, stats = assemble_cubin(ptx, "sm_90")   # stats["main_kernel"].registers
"""

from __future__ import annotations

import ctypes
import functools
import glob
import logging
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import asdict, dataclass

from msdb.tuner.codegen.errors import CodegenError

__all__ = ["CudaToolError", "KernelStats", "compile_ptx", "assemble_cubin", "find_nvrtc", "find_ptxas", "nvrtc_version",
           "arch_number"]

logger = logging.getLogger(__name__)

_INSTALL_HINT = "install NVIDIA's compiler wheels with pip install 'msdb[cuda]' (or set CUDA_HOME to a CUDA toolkit)"


class CudaToolError(CodegenError):
    """NVRTC or ptxas is missing, or rejected the generated CUDA C / PTX."""


@dataclass(frozen=True)
class KernelStats:
    """What `ptxas -v` reports for one kernel."""

    registers: int
    shared_bytes: int
    stack_bytes: int
    spill_stores: int
    spill_loads: int

    def as_json(self) -> dict[str, int]:
        return asdict(self)


def arch_number(arch: str) -> int:
    """`sm_90` / `sm_90a` / `compute_80` / `90` -> 90."""
    match = re.fullmatch(r"(?:sm_|compute_)?(\d+)[a-z]?", str(arch).strip())
    if match is None:
        raise CudaToolError(f"CUDA arch {arch!r} is not of the form sm_XX (e.g. sm_80, sm_90)")
    return int(match.group(1))


def _nvidia_roots() -> list[str]:
    roots = []
    try:
        import nvidia  # type: ignore[import-untyped,unused-ignore]  # namespace package of NVIDIA's wheels

        roots.extend(list(getattr(nvidia, "__path__", [])))
    except ImportError:
        pass
    return roots


def _toolkit_roots() -> list[str]:
    out = [os.environ.get(k, "") for k in ("CUDA_HOME", "CUDA_PATH")] + ["/usr/local/cuda"]
    return [r for r in out if r and os.path.isdir(r)]


@functools.lru_cache(maxsize=None)
def find_nvrtc() -> str:
    """Path of libnvrtc: NVIDIA's wheel first, then a CUDA toolkit."""
    candidates: list[str] = []
    for root in _nvidia_roots():
        for sub in ("cuda_nvrtc/lib", "cu13/lib", "cu12/lib"):
            candidates += sorted(glob.glob(os.path.join(root, sub, "libnvrtc.so*")), reverse=True)
    for root in _toolkit_roots():
        candidates += sorted(glob.glob(os.path.join(root, "lib64", "libnvrtc.so*")), reverse=True)
    candidates = [c for c in candidates if "builtins" not in c and ".alt." not in c]
    if candidates:
        return candidates[0]
    from ctypes.util import find_library

    found = find_library("nvrtc")
    if found:
        return found
    raise CudaToolError(f"libnvrtc (NVIDIA's runtime CUDA compiler) was not found; {_INSTALL_HINT}")


@functools.lru_cache(maxsize=None)
def find_ptxas() -> str:
    """Path of ptxas: NVIDIA's wheel first, then a CUDA toolkit, then PATH."""
    for root in _nvidia_roots():
        for sub in ("cuda_nvcc/bin", "cu13/bin", "cu12/bin"):
            path = os.path.join(root, sub, "ptxas")
            if os.path.isfile(path):
                if not os.access(path, os.X_OK):  # some wheel installs drop the mode bits
                    raise CudaToolError(f"{path} is not executable; run chmod +x on it")
                return path
    for root in _toolkit_roots():
        path = os.path.join(root, "bin", "ptxas")
        if os.access(path, os.X_OK):
            return path
    found = shutil.which("ptxas")
    if found:
        return found
    raise CudaToolError(f"ptxas (NVIDIA's PTX assembler) was not found; {_INSTALL_HINT}")


_Program = ctypes.c_void_p


@functools.lru_cache(maxsize=None)
def _lib() -> ctypes.CDLL:
    path = find_nvrtc()
    try:
        lib = ctypes.CDLL(path)
    except OSError as err:
        raise CudaToolError(f"cannot load {path}: {err}; {_INSTALL_HINT}") from err
    lib.nvrtcGetErrorString.restype = ctypes.c_char_p
    lib.nvrtcGetErrorString.argtypes = [ctypes.c_int]
    lib.nvrtcCreateProgram.argtypes = [ctypes.POINTER(_Program), ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int,
                                       ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(ctypes.c_char_p)]
    lib.nvrtcCompileProgram.argtypes = [_Program, ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
    lib.nvrtcGetProgramLogSize.argtypes = [_Program, ctypes.POINTER(ctypes.c_size_t)]
    lib.nvrtcGetProgramLog.argtypes = [_Program, ctypes.c_char_p]
    lib.nvrtcGetPTXSize.argtypes = [_Program, ctypes.POINTER(ctypes.c_size_t)]
    lib.nvrtcGetPTX.argtypes = [_Program, ctypes.c_char_p]
    lib.nvrtcDestroyProgram.argtypes = [ctypes.POINTER(_Program)]
    lib.nvrtcVersion.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int)]
    return lib


def nvrtc_version() -> tuple[int, int]:
    major, minor = ctypes.c_int(), ctypes.c_int()
    _check(_lib().nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)), "nvrtcVersion")
    return major.value, minor.value


def _check(code: int, what: str) -> None:
    if code != 0:
        message = _lib().nvrtcGetErrorString(code)
        raise CudaToolError(f"NVRTC {what} failed: {message.decode() if message else code}")


def compile_ptx(source: str, arch: str, name: str = "msdb_kernels.cu", options: tuple[str, ...] = ()) -> str:
    """PTX of CUDA C `source` for the virtual architecture of `arch` (compute_XX)."""
    headers = [h for h in _HEADERS if f"#include <{h}>" in source]
    if headers:
        options = (*(f"--include-path={d}" for d in _include_dirs(tuple(headers))), *options)
    lib = _lib()
    prog = _Program()
    _check(lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), name.encode(), 0, None, None),
           "nvrtcCreateProgram")
    try:
        opts = [f"--gpu-architecture=compute_{arch_number(arch)}", "--std=c++17", *options]
        argv = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
        code = lib.nvrtcCompileProgram(prog, len(opts), argv)
        size = ctypes.c_size_t()
        _check(lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size)), "nvrtcGetProgramLogSize")
        log_buf = ctypes.create_string_buffer(size.value)
        _check(lib.nvrtcGetProgramLog(prog, log_buf), "nvrtcGetProgramLog")
        log = log_buf.value.decode(errors="replace").strip()
        if code != 0:
            raise CudaToolError(f"NVRTC rejected the generated CUDA C for {arch}:\n{log}\n--- source ---\n{_numbered(source)}")
        if log:
            logger.debug("NVRTC log: %s", log)
        _check(lib.nvrtcGetPTXSize(prog, ctypes.byref(size)), "nvrtcGetPTXSize")
        ptx = ctypes.create_string_buffer(size.value)
        _check(lib.nvrtcGetPTX(prog, ptx), "nvrtcGetPTX")
        return ptx.value.decode()
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))


#: Headers the generated code includes, which NVRTC does not ship: cuda_fp16.h (float16) and
#: mma.h (tensor-core fragments, `nvcuda::wmma`).
_HEADERS = ("cuda_fp16.h", "mma.h")


@functools.lru_cache(maxsize=None)
def _include_dirs(headers: tuple[str, ...]) -> tuple[str, ...]:
    """Folders holding `headers`: NVIDIA's runtime wheel, else a toolkit."""
    roots = [os.path.join(root, sub) for root in _nvidia_roots()
             for sub in ("cuda_runtime/include", "cu13/include", "cu12/include")]
    roots += [os.path.join(root, "include") for root in _toolkit_roots()]
    found: list[str] = []
    for header in headers:
        where = next((r for r in roots if os.path.isfile(os.path.join(r, header))), None)
        if where is None:
            raise CudaToolError(f"the generated CUDA C includes {header}, which NVRTC does not ship: install "
                                "nvidia-cuda-runtime-cu12 (pip) or set CUDA_HOME to a CUDA toolkit")
        if where not in found:
            found.append(where)
    return tuple(found)


def _numbered(source: str) -> str:
    return "\n".join(f"{i + 1:4d}  {line}" for i, line in enumerate(source.splitlines()))


_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers(?:.*?, (\d+) bytes smem)?")


def parse_ptxas_verbose(text: str) -> dict[str, KernelStats]:
    """Per-kernel registers, static shared memory, stack and spills from `ptxas -v` output."""
    stats: dict[str, KernelStats] = {}
    current: str | None = None
    frame = (0, 0, 0)
    for line in text.splitlines():
        m = _ENTRY.search(line)
        if m:
            current, frame = m.group(1), (0, 0, 0)
            continue
        m = _FRAME.search(line)
        if m and current is not None:
            frame = (int(m.group(1)), int(m.group(2)), int(m.group(3)))
            continue
        m = _USED.search(line)
        if m and current is not None:
            stats[current] = KernelStats(int(m.group(1)), int(m.group(2) or 0), *frame)
            current = None
    return stats


def assemble_cubin(ptx: str, arch: str, timeout_s: float = 60.0) -> tuple[bytes, dict[str, KernelStats]]:
    """(cubin, stats per kernel) of `ptx` for sm_XX of `arch`, by `ptxas -v -O3`."""
    ptxas = find_ptxas()
    with tempfile.TemporaryDirectory(prefix="msdb-ptxas-") as tmp:
        src, out = os.path.join(tmp, "kernels.ptx"), os.path.join(tmp, "kernels.cubin")
        with open(src, "w") as f:
            f.write(ptx)
        cmd = [ptxas, f"-arch=sm_{arch_number(arch)}", "-O3", "-v", src, "-o", out]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired as err:
            raise CudaToolError(f"ptxas ran past {timeout_s:.0f} s on the generated PTX") from err
        report = done.stdout + done.stderr
        if done.returncode != 0:
            raise CudaToolError(f"ptxas ({ptxas}) rejected the generated PTX for sm_{arch_number(arch)}:\n{report.strip()}")
        with open(out, "rb") as f:
            cubin = f.read()
    return cubin, parse_ptxas_verbose(report)
