// Weightless RMS normalisation over rows of D (Llama 4's q/k Llama4TextL2Norm): y = x·rsqrt(mean(x²) + eps), and its
// backward dx = r·dy − x·r³/D·Σ(dy·x).
// Invariant: one block per row; Σ x² (and Σ dy·x) in fp64 per thread, then a fixed-order block reduction (warp partials
// read in warp order), so results are deterministic; r is formed in fp32 from the fp64 mean, as the CPU reference does.
#include "kernels/ops/device_util.cuh"
#include "kernels/ops/kernels.h"
#include "kernels/ops/launch_check.h"

namespace mt::cuda {
namespace {

constexpr int threads = 128, block_warps = threads / 32;  // rows are head vectors (head_dim ≤ 256)

__device__ __forceinline__ float rstd_of(double sum_sq, int64_t D, float eps) {
  return 1.f / sqrtf(static_cast<float>(sum_sq / static_cast<double>(D)) + eps);
}

template <typename T>
__global__ void __launch_bounds__(threads) rms_normalize_forward_kernel(T* __restrict__ y, const T* __restrict__ x,
                                                                        int64_t D, float eps) {
  __shared__ double red[block_warps];
  const int64_t off = static_cast<int64_t>(blockIdx.x) * D;
  double ss = 0.0;
  for (int64_t d = threadIdx.x; d < D; d += threads) {
    const float v = to_f32(x[off + d]);
    ss += static_cast<double>(v) * v;
  }
  const float r = rstd_of(block_sum_all<block_warps>(ss, red), D, eps);
  for (int64_t d = threadIdx.x; d < D; d += threads) y[off + d] = from_f32<T>(to_f32(x[off + d]) * r);
}

template <typename T>
__global__ void __launch_bounds__(threads) rms_normalize_backward_kernel(T* __restrict__ dx, const T* __restrict__ dy,
                                                                         const T* __restrict__ x, int64_t D,
                                                                         float eps) {
  __shared__ double red[block_warps];
  const int64_t off = static_cast<int64_t>(blockIdx.x) * D;
  double ss = 0.0, proj = 0.0;
  for (int64_t d = threadIdx.x; d < D; d += threads) {
    const float v = to_f32(x[off + d]), g = to_f32(dy[off + d]);
    ss += static_cast<double>(v) * v;
    proj += static_cast<double>(g) * v;
  }
  const float r = rstd_of(block_sum_all<block_warps>(ss, red), D, eps);
  const double p = block_sum_all<block_warps>(proj, red);
  const float c = static_cast<float>(p * r * r * r / static_cast<double>(D));
  for (int64_t d = threadIdx.x; d < D; d += threads)
    dx[off + d] = from_f32<T>(r * to_f32(dy[off + d]) - to_f32(x[off + d]) * c);
}

void check(const char* op, int64_t N, int64_t D, float eps) {
  MT_ASSERT(N >= 0 && D > 0 && eps >= 0.f, "{}: N {} D {} eps {}", op, N, D, eps);
  MT_ASSERT(N <= 0x7fffffff, "{}: N {} rows exceed the grid", op, N);
}

}  // namespace

template <typename T>
void rms_normalize_forward(T* y, const T* x, int64_t N, int64_t D, float eps, cudaStream_t s) {
  check("rms_normalize_forward", N, D, eps);
  if (N == 0) return;
  rms_normalize_forward_kernel<T><<<static_cast<unsigned>(N), threads, 0, s>>>(y, x, D, eps);
  MT_CHECK_LAUNCH("rms_normalize_forward", "N={} D={}", N, D);
}

template <typename T>
void rms_normalize_backward(T* dx, const T* dy, const T* x, int64_t N, int64_t D, float eps, cudaStream_t s) {
  check("rms_normalize_backward", N, D, eps);
  if (N == 0) return;
  rms_normalize_backward_kernel<T><<<static_cast<unsigned>(N), threads, 0, s>>>(dx, dy, x, D, eps);
  MT_CHECK_LAUNCH("rms_normalize_backward", "N={} D={}", N, D);
}

template void rms_normalize_forward<float>(float*, const float*, int64_t, int64_t, float, cudaStream_t);
template void rms_normalize_forward<__nv_bfloat16>(__nv_bfloat16*, const __nv_bfloat16*, int64_t, int64_t, float,
                                                   cudaStream_t);
template void rms_normalize_backward<float>(float*, const float*, const float*, int64_t, int64_t, float, cudaStream_t);
template void rms_normalize_backward<__nv_bfloat16>(__nv_bfloat16*, const __nv_bfloat16*, const __nv_bfloat16*,
                                                    int64_t, int64_t, float, cudaStream_t);

}  // namespace mt::cuda
