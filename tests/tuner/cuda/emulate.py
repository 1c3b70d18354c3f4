"""Run generated CUDA C on the CPU, for tests on machines without a GPU: the kernels are
compiled as C++20 by g++ with one std::thread per CUDA thread of a block, `__syncthreads()` as a
`std::barrier` over the block, `__shared__` arrays as function statics (one block runs at a
time), and the blocks of each kernel launched one after another, kernels in order.

This checks what the code generator is responsible for (indexing, vector accesses, barriers,
vthread expansion, allreduce, dp4a, kernel splitting and workspaces) against the reference
interpreter; it says nothing about speed, and a missing barrier shows only when the threads
happen to interleave badly, as on a GPU.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from typing import Any

import numpy as np

from tests.tuner.cuda.emulate_headers import HEADERS

_SHIM = r"""
#include <math.h>
#include <cmath>
#include <cstring>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <barrier>
#include <vector>
#include <algorithm>
using std::min; using std::max;
struct msdb_dim3 { int x, y, z; };
static thread_local msdb_dim3 threadIdx, blockIdx;
static std::barrier<>* msdb_bar;
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(n)
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))
static inline void __syncthreads() { msdb_bar->arrive_and_wait(); }
struct alignas(16) uint4 { unsigned x, y, z, w; };
struct alignas(8) uint2 { unsigned x, y; };
static inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
static inline double __longlong_as_double(long long i) { double d; std::memcpy(&d, &i, 8); return d; }
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline int __dp4a(int a, int b, int c) {
  for (int k = 0; k < 4; ++k) c += (int)(signed char)(a >> (8 * k)) * (int)(signed char)(b >> (8 * k));
  return c;
}
static inline unsigned __dp4a(unsigned a, unsigned b, unsigned c) {
  for (int k = 0; k < 4; ++k) c += ((a >> (8 * k)) & 255u) * ((b >> (8 * k)) & 255u);
  return c;
}
"""

_CTYPES = {"float16": "half", "float32": "float", "float64": "double", "int8": "signed char", "uint8": "unsigned char",
           "int32": "int", "int64": "long long", "bool": "bool", "int16": "short"}


def available() -> bool:
    return shutil.which("g++") is not None


def _main(meta: dict[str, Any]) -> str:
    buffers = [a[1] for a in meta["args"]] + [w[1] for w in meta["workspaces"]]
    lines = ["int main(int argc, char** argv) {", "  std::vector<char*> bufs;",
             "  std::vector<size_t> sizes = {" + ", ".join(str(_nbytes(a)) for a in meta["args"] + meta["workspaces"])
             + "};",
             "  for (size_t i = 0; i < sizes.size(); ++i) {",
             "    char* p = (char*)std::aligned_alloc(256, (sizes[i] + 255) / 256 * 256 + 256);",
             "    std::memset(p, 0, sizes[i]);",
             f"    if (i < {len(meta['args'])}) {{ FILE* f = std::fopen(argv[1 + i], \"rb\");"
             " if (std::fread(p, 1, sizes[i], f) != sizes[i]) return 3; std::fclose(f); }",
             "    bufs.push_back(p);", "  }"]
    for k in meta["kernels"]:
        gx, gy, gz = k["grid"]
        bx, by, bz = k["block"]
        args = []
        for kind, i in k["params"]:
            index = i if kind == "arg" else len(meta["args"]) + i
            args.append(f"({_CTYPES[buffers[index]]}*)bufs[{index}]")
        call = f"{k['name']}({', '.join(args)});"
        lines += [
            f"  for (int gz = 0; gz < {gz}; ++gz) for (int gy = 0; gy < {gy}; ++gy) for (int gx = 0; gx < {gx}; ++gx) {{",
            f"    std::barrier<> bar({bx * by * bz}); msdb_bar = &bar;",
            "    std::vector<std::thread> ts;",
            f"    for (int tz = 0; tz < {bz}; ++tz) for (int ty = 0; ty < {by}; ++ty) for (int tx = 0; tx < {bx}; ++tx)",
            "      ts.emplace_back([=, &bufs] { threadIdx = {tx, ty, tz}; blockIdx = {gx, gy, gz}; " + call + " });",
            "    for (auto& t : ts) t.join();",
            "  }",
        ]
    lines += [f"  for (int i = 0; i < {len(meta['args'])}; ++i) {{ FILE* f = std::fopen(argv[1 + i], \"wb\");"
              " std::fwrite(bufs[i], 1, sizes[i], f); std::fclose(f); }",
              "  return 0;", "}"]
    return "\n".join(lines)


def _nbytes(spec: list[Any]) -> int:
    _, dtype, shape = spec
    return int(np.prod(shape, dtype=np.int64)) * np.dtype("bool" if dtype == "bool" else dtype).itemsize


def run_on_cpu(source: str, meta: dict[str, Any], arrays: list[np.ndarray], timeout_s: float = 120.0) -> list[np.ndarray]:
    """The arguments after running the kernels of `source` (described by a CudaBuild's
    `meta()`) on copies of `arrays`."""
    with tempfile.TemporaryDirectory(prefix="msdb-emulate-") as tmp:
        cpp = os.path.join(tmp, "kernels.cpp")
        exe = os.path.join(tmp, "kernels")
        with open(cpp, "w") as f:
            f.write(_SHIM + source + "\n" + _main(meta))
        for header, text in HEADERS.items():  # cuda_fp16.h and mma.h stand-ins (emulate_headers.py)
            with open(os.path.join(tmp, header), "w") as f:
                f.write(text)
        done = subprocess.run(["g++", "-std=c++20", "-O1", "-fno-strict-aliasing", "-pthread", "-w", "-I", tmp, cpp,
                               "-o", exe],
                              capture_output=True, text=True, timeout=timeout_s)
        if done.returncode != 0:
            raise RuntimeError(f"g++ rejected the emulated kernels:\n{done.stderr[-4000:]}")
        paths = []
        for i, a in enumerate(arrays):
            path = os.path.join(tmp, f"arg{i}.bin")
            np.ascontiguousarray(a).tofile(path)
            paths.append(path)
        run = subprocess.run([exe, *paths], capture_output=True, text=True, timeout=timeout_s)
        if run.returncode != 0:
            raise RuntimeError(f"emulated kernels exited with {run.returncode}: {run.stderr[-2000:]}")
        return [np.fromfile(p, dtype=a.dtype).reshape(a.shape) for p, a in zip(paths, arrays)]


