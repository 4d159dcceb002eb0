// A thread block's matrix products over shared-memory tiles, fp32 accumulation: bf16 operands on tensor cores
// (nvcuda::wmma 16×16×16 tiles, the block's warps taking the output tiles in turn), fp32 operands by FMA loops; into
// fp32 shared memory (block_mm) or, a sum of two products, straight to T in global memory (block_mm2_store).
// Invariant: every thread of the block calls it with the same arguments; it ends with a barrier; each output element
// is one thread's (or one warp's) fixed-order sum, so results are deterministic.
#pragma once
#include <cuda_bf16.h>
#include <mma.h>

#include <cstdint>
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

// out[m·out_ld + n] ← T((A1·B1 + A2·B2)[m, n]) for m < rows, n < cols, 0 for rows_valid ≤ m < rows: A1 [M, K1],
// B1 [K1, N], A2 [M, K2], B2 [K2, N] row-major (M ≥ rows, N ≥ cols), the sum in fp32 and never in shared memory
// whole. bf16: wmma as above, each warp's tiles kept as fragments through both products and staged 16×16 at a time
// in its 256 floats of stage (blockDim/32·256 floats). fp32: FMA loops (stage unused). Ends with a barrier.
template <typename T>
__device__ void block_mm2_store(T* out, int64_t out_ld, int rows, int64_t cols, int rows_valid, const T* A1, int lda1,
                                const T* B1, int ldb1, int K1, const T* A2, int lda2, const T* B2, int ldb2, int K2,
                                int M, int N, float* stage) {
  if constexpr (std::is_same_v<T, float>) {
    for (int e = threadIdx.x; e < rows * cols; e += blockDim.x) {
      const int m = static_cast<int>(e / cols), n = static_cast<int>(e % cols);
      float s = 0.f;
      for (int k = 0; k < K1; ++k) s += A1[m * lda1 + k] * B1[k * ldb1 + n];
      for (int k = 0; k < K2; ++k) s += A2[m * lda2 + k] * B2[k * ldb2 + n];
      out[m * out_ld + n] = m < rows_valid ? s : 0.f;
    }
  } else {
    namespace w = nvcuda::wmma;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32, tiles_n = N / 16;
    float* st = stage + warp * 256;
    for (int t = warp; t < M / 16 * tiles_n; t += warps) {
      const int m0 = t / tiles_n * 16, n0 = t % tiles_n * 16;
      if (m0 >= rows || n0 >= cols) continue;
      w::fragment<w::accumulator, 16, 16, 16, float> c;
      w::fill_fragment(c, 0.f);
      for (int k0 = 0; k0 < K1; k0 += 16) {
        w::fragment<w::matrix_a, 16, 16, 16, __nv_bfloat16, w::row_major> a;
        w::fragment<w::matrix_b, 16, 16, 16, __nv_bfloat16, w::row_major> b;
        w::load_matrix_sync(a, A1 + m0 * lda1 + k0, lda1);
        w::load_matrix_sync(b, B1 + k0 * ldb1 + n0, ldb1);
        w::mma_sync(c, a, b, c);
      }
      for (int k0 = 0; k0 < K2; k0 += 16) {
        w::fragment<w::matrix_a, 16, 16, 16, __nv_bfloat16, w::row_major> a;
        w::fragment<w::matrix_b, 16, 16, 16, __nv_bfloat16, w::row_major> b;
        w::load_matrix_sync(a, A2 + m0 * lda2 + k0, lda2);
        w::load_matrix_sync(b, B2 + k0 * ldb2 + n0, ldb2);
        w::mma_sync(c, a, b, c);
      }
      w::store_matrix_sync(st, c, 16, w::mem_row_major);
      __syncwarp();
      for (int e = lane; e < 256; e += 32) {
        const int m = m0 + e / 16, n = n0 + e % 16;
        if (m < rows && n < cols) out[m * out_ld + n] = __float2bfloat16_rn(m < rows_valid ? st[e] : 0.f);
      }
      __syncwarp();
    }
  }
  __syncthreads();
}

}  // namespace mt::cuda
