"""Stand-ins for CUDA's `cuda_fp16.h` and `mma.h` when tests/tuner/cuda/emulate.py runs generated
CUDA C on the CPU with g++ (docs/architecture.md, "CUDA").

`half` is g++'s `_Float16` (the same 2-byte IEEE format numpy's float16 arrays hold). The wmma
fragments are whole tiles: each emulated thread of a warp holds the full 16x16 tile and does
the whole load, multiply-accumulate and store itself (the 32 threads of a warp store the same
values), which is the meaning of the warp-wide wmma calls that the generated code must get right
(fragment arrays and indices, tile pointers, strides, layouts, barriers); how a GPU spreads a
fragment over a warp's registers is NVIDIA's concern and is not modelled.
"""

from __future__ import annotations

CUDA_FP16 = r"""
#pragma once
typedef _Float16 half;
static inline half __float2half(float f) { return (half)f; }
static inline float __half2float(half h) { return (float)h; }
"""

MMA = r"""
#pragma once
#include <type_traits>
namespace nvcuda { namespace wmma {
struct matrix_a {}; struct matrix_b {}; struct accumulator {};
struct row_major {}; struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

template <typename Use, int M, int N, int K, typename T, typename Layout = void> struct fragment {
  static constexpr int rows = std::is_same<Use, matrix_b>::value ? K : M;
  static constexpr int cols = std::is_same<Use, matrix_a>::value ? K : N;
  T x[rows * cols];  // element (r, c) at r * cols + c
};

template <typename Use, int M, int N, int K, typename T, typename L, typename V>
static inline void fill_fragment(fragment<Use, M, N, K, T, L>& f, V v) {
  for (auto& e : f.x) e = (T)v;
}

template <typename Use, int M, int N, int K, typename T, typename L, typename P>
static inline void load_matrix_sync(fragment<Use, M, N, K, T, L>& f, const P* p, unsigned ldm) {
  using F = fragment<Use, M, N, K, T, L>;
  constexpr bool col = std::is_same<L, col_major>::value;
  for (int r = 0; r < F::rows; ++r)
    for (int c = 0; c < F::cols; ++c) f.x[r * F::cols + c] = (T)(col ? p[r + c * ldm] : p[r * ldm + c]);
}

template <int M, int N, int K, typename T, typename P>
static inline void store_matrix_sync(P* p, const fragment<accumulator, M, N, K, T>& f, unsigned ldm, layout_t l) {
  for (int r = 0; r < M; ++r)
    for (int c = 0; c < N; ++c) p[l == mem_col_major ? r + c * ldm : r * ldm + c] = (P)f.x[r * N + c];
}

template <int M, int N, int K, typename TA, typename LA, typename TB, typename LB, typename TC>
static inline void mma_sync(fragment<accumulator, M, N, K, TC>& d, const fragment<matrix_a, M, N, K, TA, LA>& a,
                            const fragment<matrix_b, M, N, K, TB, LB>& b, const fragment<accumulator, M, N, K, TC>& c) {
  TC out[M * N];
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      float s = (float)c.x[i * N + j];
      for (int k = 0; k < K; ++k) s += (float)a.x[i * K + k] * (float)b.x[k * N + j];
      out[i * N + j] = (TC)s;
    }
  for (int i = 0; i < M * N; ++i) d.x[i] = out[i];
}
} }
"""

#: File name -> text, written where g++ looks for `#include <...>`.
HEADERS = {"cuda_fp16.h": CUDA_FP16, "mma.h": MMA}
