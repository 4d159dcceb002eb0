// A thread block's matrix product over shared-memory tiles, fp32 accumulation: bf16 operands on tensor cores
// (nvcuda::wmma 16×16×16 tiles, the block's warps taking the output tiles in turn), fp32 operands by FMA loops.
// Invariant: every thread of the block calls it with the same arguments; it ends with a barrier; each output element
// is one thread's (or one warp's) fixed-order sum, so results are deterministic.
#pragma once
#include <cuda_bf16.h>
#include <mma.h>

#include <type_traits>

namespace mt::cuda {

// C[M, N] (fp32, row stride ldc) = (or += with acc) op(A)·op(B): A is [M, K] with row stride lda, or [K, M] when
// TA; B is [K, N] with row stride ldb, or [N, K] when TB. For bf16: M, N, K multiples of 16, strides multiples of 8
// and every pointer 32-byte aligned.
template <bool TA, bool TB>
__device__ void block_mm(float* C, int ldc, const float* A, int lda, const float* B, int ldb, int M, int N, int K,
                         bool acc) {
  for (int e = threadIdx.x; e < M * N; e += blockDim.x) {
    const int m = e / N, n = e % N;
    float s = acc ? C[m * ldc + n] : 0.f;
    for (int k = 0; k < K; ++k) s += (TA ? A[k * lda + m] : A[m * lda + k]) * (TB ? B[n * ldb + k] : B[k * ldb + n]);
    C[m * ldc + n] = s;
  }
  __syncthreads();
}

template <bool TA, bool TB>
__device__ void block_mm(float* C, int ldc, const __nv_bfloat16* A, int lda, const __nv_bfloat16* B, int ldb, int M,
                         int N, int K, bool acc) {
  namespace w = nvcuda::wmma;
  using LayoutA = std::conditional_t<TA, w::col_major, w::row_major>;
  using LayoutB = std::conditional_t<TB, w::col_major, w::row_major>;
  const int warp = threadIdx.x / 32, warps = blockDim.x / 32, tiles_n = N / 16;
  for (int t = warp; t < M / 16 * tiles_n; t += warps) {
    const int m0 = t / tiles_n * 16, n0 = t % tiles_n * 16;
    w::fragment<w::accumulator, 16, 16, 16, float> c;
    if (acc)
      w::load_matrix_sync(c, C + m0 * ldc + n0, ldc, w::mem_row_major);
    else
      w::fill_fragment(c, 0.f);
    for (int k0 = 0; k0 < K; k0 += 16) {
      w::fragment<w::matrix_a, 16, 16, 16, __nv_bfloat16, LayoutA> a;
      w::fragment<w::matrix_b, 16, 16, 16, __nv_bfloat16, LayoutB> b;
      w::load_matrix_sync(a, TA ? A + k0 * lda + m0 : A + m0 * lda + k0, lda);
      w::load_matrix_sync(b, TB ? B + n0 * ldb + k0 : B + k0 * ldb + n0, ldb);
      w::mma_sync(c, a, b, c);
    }
    w::store_matrix_sync(C + m0 * ldc + n0, c, ldc, w::mem_row_major);
  }
  __syncthreads();
}

}  // namespace mt::cuda
